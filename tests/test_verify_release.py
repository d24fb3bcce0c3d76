"""A release folder verified as a whole, seeded releases marked as tests, Ed25519 signatures (issue 31).

* ``release.json`` names the SHA-256 of its certificate (and of every table beside it): swapping
  or editing either fails ``dpopt verify DIR``; a document whose repeated blocks (guarantee,
  groups) differ from the certificate's fails.
* A seeded release publishes no seed; its certificate says ``test_release: true`` and verify
  prints TEST RELEASE (exit 0).
* Signatures: a round trip passes; a one-byte edit of the signed file and a wrong key fail
  (Ed25519 verification is exact: RFC 8032, §5.1.7).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from dpopt.cli import main
from solved_specs import ROOT

TABLE = ROOT / "specs" / "table_replace_gdp.yaml"
SURVEY = ROOT / "specs" / "data" / "survey.csv"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    out = tmp_path_factory.mktemp("seeded") / "release"
    assert main(["release", str(TABLE), "--data", str(SURVEY), "--seed", "7", "--insecure-seed", "--out", str(out)]) == 0
    return out


def _copy(folder, tmp_path):
    target = tmp_path / "copy"
    target.mkdir()
    for path in folder.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def test_a_seeded_release_publishes_no_seed_and_verifies_as_a_test_release(seeded, capsys):
    text = (seeded / "release.json").read_text()
    document = json.loads(text)
    assert "seed" not in document and "seed" not in document["randomness"]
    certificate = (seeded / "certificate.json").read_bytes()
    assert document["certificate_sha256"] == hashlib.sha256(certificate).hexdigest()
    assert json.loads(certificate)["test_release"] is True
    capsys.readouterr()
    assert main(["verify", str(seeded)]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 3 and "TEST RELEASE" in out  # release.json, certificate.json, release.csv
    assert main(["verify", str(seeded / "certificate.json")]) == 0
    assert "TEST RELEASE" in capsys.readouterr().out


def test_a_folder_with_an_edited_certificate_or_document_fails(seeded, tmp_path, capsys):
    folder = _copy(seeded, tmp_path)
    cert_path = folder / "certificate.json"
    original = cert_path.read_bytes()
    cert_path.write_bytes(original.replace(b'"test_release": true', b'"test_release": true '))  # same JSON, other bytes
    assert main(["verify", str(folder)]) == 1
    assert "SHA-256 is not the one release.json names" in capsys.readouterr().out
    cert_path.write_bytes(original)
    document = json.loads((folder / "release.json").read_text())
    document["guarantee"]["mu"] = 0.1
    document["seed"] = 7
    (folder / "release.json").write_text(json.dumps(document))
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "its guarantee differs" in out and "publishes a seed" in out


def test_a_grouped_release_folder_binds_its_tables(tmp_path, capsys):
    spec = tmp_path / "sex.json"
    spec.write_text(json.dumps({"dpopt": 1, "name": "sex by race",
                                "data": {"attributes": {"sex": ["female", "male"], "race": ["white", "black", "other"]}},
                                "query": {"kind": "histogram", "attribute": "sex"}, "adjacency": "add_remove",
                                "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian"}))
    out = tmp_path / "by_race"
    assert main(["release", str(spec), "--data", str(SURVEY), "--group-by", "race", "--out", str(out)]) == 0
    document = json.loads((out / "release.json").read_text())
    assert set(document["files_sha256"]) == {"release_race.parquet"}
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.count("PASS") == 3
    table = out / "release_race.parquet"
    table.write_bytes(table.read_bytes() + b"\0")
    assert main(["verify", str(out)]) == 1
    assert "FAIL  release_race.parquet" in capsys.readouterr().out


def test_sign_and_verify_round_trip_one_byte_edit_and_wrong_key(seeded, tmp_path, capsys):
    pytest.importorskip("cryptography")
    cert = tmp_path / "certificate.json"
    cert.write_bytes((seeded / "certificate.json").read_bytes())
    assert main(["keygen", str(tmp_path / "agency.pem")]) == 0
    assert main(["keygen", str(tmp_path / "other.pem")]) == 0
    assert (tmp_path / "agency.pem").stat().st_mode & 0o077 == 0  # the private key is owner-only
    assert main(["keygen", str(tmp_path / "agency.pem")]) == 2  # never overwritten
    assert main(["sign", str(cert), "--key", str(tmp_path / "agency.pem")]) == 0
    capsys.readouterr()
    # the fixture is a seeded (test) release: its signed certificate verifies only with --accept-seeded
    assert main(["verify", str(cert), "--public-key", str(tmp_path / "agency.pub.pem"), "--accept-seeded"]) == 0
    assert "PASS  signature" in capsys.readouterr().out
    assert main(["verify", str(cert), "--public-key", str(tmp_path / "other.pub.pem")]) == 1
    assert "certificate FAILED: signature" in capsys.readouterr().err
    data = bytearray(cert.read_bytes())
    assert data[1:2] == b"\n"
    data[1] = ord(" ")  # one byte, the same JSON: the claims still verify, the signature does not
    cert.write_bytes(bytes(data))
    code = main(["verify", str(cert), "--public-key", str(tmp_path / "agency.pub.pem")])
    assert code == 1 and "signature" in capsys.readouterr().err
