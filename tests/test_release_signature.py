"""Signed release folders (issue 35): the signature covers what is published, and a seeded release never
verifies as a production one.

``dpopt sign DIR`` signs a manifest of every file of the folder and the release's mode
(:mod:`dpopt.release.signature`). The expected outcome of every tamper is "rejected" by construction:
Ed25519 verification is exact (RFC 8032, §5.1.7), so a manifest edited without the private key fails,
and every edit of a file changes its SHA-256 (a collision is not expected: FIPS 180-4), so the folder is
no longer the one signed. The battery edits each leaf value of ``release.json`` and of the certificate,
each file (edited, removed, renamed), adds files, and edits the signed manifest (mode, a digest, the
signature); it counts the accepted edits per class, all of which must be 0. The default run takes a
sample of the leaves (the first two entries of every list); ``-m slow`` every leaf.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import edited
from dpopt.cli import main
from dpopt.release.signature import SIGNATURE_FILE, release_signature_check, sign_release
from solved_specs import ROOT

pytest.importorskip("cryptography")

TABLE = ROOT / "specs" / "table_replace_gdp.yaml"
SURVEY = ROOT / "specs" / "data" / "survey.csv"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    assert main(["keygen", str(folder / "agency.pem")]) == 0
    assert main(["keygen", str(folder / "other.pem")]) == 0
    return folder


def _release(tmp_path_factory, name: str, *seed: str) -> Path:
    out = tmp_path_factory.mktemp(name) / "release"
    assert main(["release", str(TABLE), "--data", str(SURVEY), *seed, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def production(tmp_path_factory, keys):
    out = _release(tmp_path_factory, "production")
    assert main(["sign", str(out), "--key", str(keys / "agency.pem")]) == 0
    return out


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, keys):
    out = _release(tmp_path_factory, "seeded", "--seed", "7", "--insecure-seed")
    assert main(["sign", str(out), "--key", str(keys / "agency.pem")]) == 0
    return out


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


def test_a_signed_production_release_verifies_and_names_its_mode(production, keys, capsys):
    manifest = json.loads((production / SIGNATURE_FILE).read_text())["manifest"]
    assert manifest["mode"] == "production"
    assert set(manifest["files"]) == {"release.json", "certificate.json", "release.csv"}  # every file written
    capsys.readouterr()
    assert main(["verify", str(production), "--public-key", str(keys / "agency.pub.pem")]) == 0
    out = capsys.readouterr().out
    assert f"PASS  {SIGNATURE_FILE}" in out and "mode: production" in out
    assert main(["verify", str(production), "--public-key", str(keys / "other.pub.pem")]) == 1
    assert f"FAIL  {SIGNATURE_FILE}" in capsys.readouterr().out


def test_a_seeded_release_is_refused_unless_accepted_and_cannot_pass_as_production(seeded, keys, tmp_path, capsys):
    public = str(keys / "agency.pub.pem")
    assert json.loads((seeded / SIGNATURE_FILE).read_text())["manifest"]["mode"] == "test"
    capsys.readouterr()
    assert main(["verify", str(seeded), "--public-key", public]) == 1
    assert "signed as a TEST release" in capsys.readouterr().out
    assert main(["verify", str(seeded), "--public-key", public, "--accept-seeded"]) == 0
    assert "mode: TEST release" in capsys.readouterr().out
    folder = _copy(seeded, tmp_path)  # the forger's two routes to "production" without the key
    signed = json.loads((folder / SIGNATURE_FILE).read_text())
    signed["manifest"]["mode"] = "production"
    (folder / SIGNATURE_FILE).write_text(json.dumps(signed))
    assert not release_signature_check(folder, public).passed
    folder = _copy(seeded, tmp_path / "again")
    certificate = json.loads((folder / "certificate.json").read_text())
    del certificate["test_release"]
    (folder / "certificate.json").write_text(json.dumps(certificate))
    document = json.loads((folder / "release.json").read_text())
    document["randomness"] = {"kind": "csprng"}
    (folder / "release.json").write_text(json.dumps(document))
    check = release_signature_check(folder, public, accept_test=True)
    assert not check.passed and "edited: certificate.json, release.json" in check.detail


def test_a_signed_test_certificate_is_refused_unless_accepted(seeded, keys, tmp_path, capsys):
    """The certificate of a seeded release, signed on its own (`dpopt sign CERT`), is refused under the public key
    as the folder is, and accepted with --accept-seeded."""
    cert = _copy(seeded, tmp_path) / "certificate.json"
    assert main(["sign", str(cert), "--key", str(keys / "agency.pem")]) == 0
    public = str(keys / "agency.pub.pem")
    capsys.readouterr()
    assert main(["verify", str(cert), "--public-key", public]) == 1
    assert "signature.mode" in capsys.readouterr().err
    assert main(["verify", str(cert), "--public-key", public, "--accept-seeded"]) == 0


def test_signing_refuses_a_folder_that_does_not_verify(production, keys, tmp_path, capsys):
    folder = _copy(production, tmp_path)
    (folder / SIGNATURE_FILE).unlink()
    table = folder / "release.csv"
    table.write_bytes(table.read_bytes() + b"0\n")
    capsys.readouterr()
    assert main(["sign", str(folder), "--key", str(keys / "agency.pem")]) == 1
    assert "does not verify" in capsys.readouterr().err and not (folder / SIGNATURE_FILE).exists()


def test_a_hierarchy_release_folder_is_signed_with_its_level_certificates(tmp_path, keys):
    from dpopt.release.hierarchy import release_hierarchy

    release = release_hierarchy(ROOT / "specs" / "hierarchy_topdown_zcdp.yaml", ROOT / "specs" / "data" / "hierarchy.csv",
                                seed=3, insecure_seed=True)
    release.write(tmp_path)
    sign_release(tmp_path, keys / "agency.pem")
    manifest = json.loads((tmp_path / SIGNATURE_FILE).read_text())["manifest"]
    assert manifest["mode"] == "test"
    assert {"certificate_nation.json", "certificate_state.json", "certificate_county.json"} <= set(manifest["files"])
    assert release_signature_check(tmp_path, keys / "agency.pub.pem", accept_test=True).passed
    assert not release_signature_check(tmp_path, keys / "agency.pub.pem").passed


# ----------------------------------------------------------------------------------- battery
def _leaves(obj, path=(), every: bool = True):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, (*path, key), every)
    elif isinstance(obj, list):
        for i, value in enumerate(obj if every else obj[:2]):
            yield from _leaves(value, (*path, i), every)
    else:
        yield path


def _value_edits(folder: Path, every: bool):
    """(class, edit) for every leaf of release.json and of certificate.json, re-serialised as JSON."""
    for name in ("release.json", "certificate.json"):
        data = json.loads((folder / name).read_text())
        for path in _leaves(data, every=every):
            def edit(target: Path, name=name, path=path):
                document = json.loads((target / name).read_text())
                node = document
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = edited(node[path[-1]])
                (target / name).write_text(json.dumps(document, indent=1))
            yield f"value in {name}", edit


def _file_edits(folder: Path):
    names = sorted(p.name for p in folder.iterdir() if p.name != SIGNATURE_FILE)
    for name in names:
        yield "file edited", lambda t, n=name: (t / n).write_bytes((t / n).read_bytes() + b" ")
        yield "file removed", lambda t, n=name: (t / n).unlink()
        yield "file renamed", lambda t, n=name: (t / n).rename(t / f"x_{n}")
    yield "file added", lambda t: (t / "release_extra.csv").write_text("cell,value\n")
    yield "file added", lambda t: (t / "notes.txt").write_text("unsigned\n")
    yield "file added", lambda t: ((t / "sub").mkdir(), (t / "sub" / "release.csv").write_text("x\n"))

    def manifest(edit):
        def apply(t):
            signed = json.loads((t / SIGNATURE_FILE).read_text())
            edit(signed)
            (t / SIGNATURE_FILE).write_text(json.dumps(signed))
        return apply

    flipped = {"test": "production", "production": "test"}
    yield "manifest edited", manifest(lambda s: s["manifest"].update(mode=flipped[s["manifest"]["mode"]]))
    yield "manifest edited", manifest(lambda s: s["manifest"]["files"].update({"release.json": "0" * 64}))
    yield "manifest edited", manifest(lambda s: s["manifest"]["files"].pop("release.csv"))
    yield "manifest edited", manifest(lambda s: s.update(signature=s["signature"][::-1]))
    yield "manifest edited", manifest(lambda s: s.update(signature=""))
    yield "manifest edited", lambda t: (t / SIGNATURE_FILE).unlink()


def _battery(folder: Path, public: Path, tmp_path: Path, every: bool) -> dict[str, list[int]]:
    """{class: [cases, accepted]}: each edit applied to a fresh copy of ``folder``, accepted when the
    signature line still passes (test releases accepted, so that only the edit can fail it)."""
    counts: dict[str, list[int]] = {}
    for i, (label, edit) in enumerate([*_value_edits(folder, every), *_file_edits(folder)]):
        target = tmp_path / f"case{i}"
        shutil.copytree(folder, target)
        edit(target)
        row = counts.setdefault(label, [0, 0])
        row[0] += 1
        row[1] += release_signature_check(target, public, accept_test=True).passed
        shutil.rmtree(target)
    return counts


def _assert_none_accepted(counts: dict[str, list[int]]) -> None:
    print("edits per class (cases / accepted): " + ", ".join(f"{k} {n}/{a}" for k, (n, a) in counts.items()))
    assert all(cases > 0 for cases, _ in counts.values())
    assert {label: accepted for label, (_, accepted) in counts.items() if accepted} == {}, counts


def test_tamper_battery_sample(seeded, keys, tmp_path):
    counts = _battery(seeded, keys / "agency.pub.pem", tmp_path, every=False)
    assert set(counts) == {"value in release.json", "value in certificate.json", "file edited", "file removed",
                           "file renamed", "file added", "manifest edited"}
    _assert_none_accepted(counts)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["production", "seeded"])
def test_tamper_battery_every_leaf(kind, request, keys, tmp_path):
    _assert_none_accepted(_battery(request.getfixturevalue(kind), keys / "agency.pub.pem", tmp_path, every=True))
