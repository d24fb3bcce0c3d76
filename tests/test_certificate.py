"""Certificates: contract keys, independent re-verification, tamper detection, atomic writes."""

from __future__ import annotations

import copy
import json
import os

import pytest

import dpopt
from conftest import make_spec
from dpopt.certificate import write_atomic
from dpopt.cli import main

CONTRACT = {"dpopt_version", "spec_sha256", "guarantee", "sensitivity", "mechanism", "utility", "checks"}


@pytest.fixture(scope="module")
def certificate() -> dict:
    # the continuous Laplace, whose scale the tampers edit (the exact default's lattice scale: test_verify_second_route)
    spec = make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, mechanism="laplace", sampler="floating_point")
    return copy.deepcopy(dpopt.solve(spec).certificate.data)


def test_contract_keys(certificate):
    assert CONTRACT <= set(certificate)
    g = certificate["guarantee"]
    assert g["definition"] == "approx" and g["epsilon"] == 1.0 and g["delta"] == 1e-6
    assert set(g["scope"]) >= {"adjacency", "invariants", "semi_adjacent_parameter"}
    assert g["scope"]["semi_adjacent_parameter"] is None
    assert {"dimension", "rank", "l1", "l2", "linf"} <= set(certificate["sensitivity"])
    assert {"family", "parameters"} <= set(certificate["mechanism"])
    assert {"metric", "value", "method"} <= set(certificate["utility"])
    assert all({"claim", "method", "passed", "detail"} <= set(c) for c in certificate["checks"])


def test_untouched_certificate_verifies(certificate):
    result = dpopt.verify(certificate)
    assert result.passed, result.failed
    assert {"spec_sha256", "guarantee", "sensitivity", "privacy", "utility"} <= {c.claim for c in result.checks}


def _tamper(cert: dict, path: str, value) -> dict:
    cert = copy.deepcopy(cert)
    *parents, last = path.split(".")
    node = cert
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value(node[last]) if callable(value) else value
    return cert


TAMPERS = {
    "noise halved": ("mechanism.parameters.scale", lambda b: b / 2, "privacy"),
    "noise slightly lower": ("mechanism.parameters.scale", lambda b: b * (1 - 1e-12), "privacy"),
    "spec hash": ("spec_sha256", "0" * 64, "spec_sha256"),
    "spec edited": ("spec.privacy.approx.epsilon", 2.0, "spec_sha256"),
    "guarantee edited": ("guarantee.epsilon", 0.5, "guarantee"),
    "sensitivity edited": ("sensitivity.l1", 1.0, "sensitivity"),
    "utility edited": ("utility.value", 1.0, "utility"),
    "claim edited": ("checks.0.claim", "privacy.extra", "recorded:privacy.extra"),
}


@pytest.mark.parametrize("path, value, claim", TAMPERS.values(), ids=TAMPERS.keys())
def test_tampered_certificate_fails_naming_the_claim(certificate, path, value, claim):
    result = dpopt.verify(_tamper(certificate, path, value))
    assert not result.passed
    assert claim in {c.claim for c in result.failed}


def test_cli_verify_exit_codes(certificate, tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(certificate))
    bad.write_text(json.dumps(_tamper(certificate, "spec_sha256", "f" * 64)))
    assert main(["verify", str(good)]) == 0
    assert main(["verify", str(bad)]) == 1
    assert "spec_sha256" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"dpopt_version": "0.1.0"}'])
def test_cli_verify_rejects_non_certificates(content, tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text(content)
    assert main(["verify", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_write_atomic_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "f.txt"
    write_atomic(target, "one")
    write_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]  # no temporary file left behind
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask  # like open(path, "w"), not owner-only
