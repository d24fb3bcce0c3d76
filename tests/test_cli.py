"""The `dpopt` command end to end: solve, release, report, and the installed console script."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from collections import Counter

import pytest

from conftest import ROOT
from dpopt.cli import main

TABLE = ROOT / "specs" / "table_replace_gdp.yaml"
DATA = ROOT / "specs" / "data" / "survey.csv"


def test_solve_json_prints_the_certificate(capsys):
    assert main(["solve", str(TABLE), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    # gaussian_optimal's covariance σ²P ties the continuous projected design (l2 10); the projected design on the
    # lattice costs 4.4% more (μ-GDP at σ = √2: (σm)² ≈ 1 + 1/(12σ²)), beyond auto's 0.1% margin for exact noise
    assert cert["mechanism"]["family"] == "gaussian_optimal"
    assert cert["guarantee"] == {**cert["guarantee"], "definition": "gdp", "mu": 1.0}


def test_solve_out_writes_three_files(tmp_path, capsys):
    assert main(["solve", str(TABLE), "--out", str(tmp_path)]) == 0
    mechanism = json.loads((tmp_path / "mechanism.json").read_text())
    assert mechanism["dimension"] == 6 and len(mechanism["labels"]) == 6
    assert "# dpopt report" in (tmp_path / "report.md").read_text()


def _true_table() -> list[float]:
    """The race × sex counts of the example data, counted here with csv + Counter."""
    with DATA.open() as handle:
        counts = Counter((row["race"], row["sex"]) for row in csv.DictReader(handle))
    return [counts[(r, s)] for r in ("white", "black", "other") for s in ("female", "male")]


def _release(tmp_path, spec_text: str, *extra: str) -> dict:
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    out = tmp_path / "out"
    assert main(["release", str(spec), "--data", str(DATA), "--out", str(out), *extra]) == 0
    return json.loads((out / "release.json").read_text())


def test_release_computes_the_query_on_the_records(tmp_path):
    # With mu = 1e6 the noise has sigma = sqrt(2)/1e6: the release equals the true counts to 1e-4.
    text = TABLE.read_text().replace("mu: 1.0", "mu: 1000000.0")
    doc = _release(tmp_path, text, "--seed", "1", "--insecure-seed")
    assert list(doc["release"].values()) == pytest.approx(_true_table(), abs=1e-4)
    assert "records" not in doc and "race=white,sex=female" in doc["release"]  # n: the spec's data.n (issue 35)


def test_release_with_a_seed_is_reproducible(tmp_path):
    first = _release(tmp_path, TABLE.read_text(), "--seed", "7", "--insecure-seed")
    second = _release(tmp_path, TABLE.read_text(), "--seed", "7", "--insecure-seed")
    assert first["release"] == second["release"]
    assert sum(first["release"].values()) == pytest.approx(1000.0, abs=1e-9)  # the total is invariant here


def test_release_rejects_records_outside_the_domain(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("race,sex\nwhite,female\nmartian,male\n")
    spec = TABLE.read_text().replace("n: 1000", "n: 2")
    (tmp_path / "s.yaml").write_text(spec)
    assert main(["release", str(tmp_path / "s.yaml"), "--data", str(bad), "--seed", "1", "--insecure-seed"]) == 2
    err = capsys.readouterr().err
    assert "row 3, column race" in err and err.count("\n") == 1


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_report_from_spec_and_certificate(tmp_path, suffix, capsys):
    out = tmp_path / f"report{suffix}"
    assert main(["report", str(TABLE), "--out", str(out)]) == 0
    text = out.read_text()
    assert "projected_gaussian" in text and "Candidates compared" in text
    if suffix == ".md":  # from a certificate (the format of --out does not matter here)
        main(["solve", str(TABLE), "--out", str(tmp_path / "o"), "--quiet"])
        assert main(["report", str(tmp_path / "o" / "certificate.json")]) == 0
        assert "Checks" in capsys.readouterr().out


def test_console_script_is_installed():
    exe = shutil.which("dpopt")
    assert exe is not None, "the dpopt console script is not on PATH (pip install -e .)"
    done = subprocess.run([exe, "solve", str(TABLE), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["spec_sha256"]
