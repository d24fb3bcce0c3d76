"""The example plans through the CLI (solve, verify, report, release) and the one-pass release."""

from __future__ import annotations

import csv
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpopt.cli import main
from dpopt.plan import solve_plan
from dpopt.plan.release import plan_answers

ROOT = Path(__file__).resolve().parents[1]
PLANS = sorted((ROOT / "specs").glob("*_plan*.yaml"))
SURVEY = ROOT / "specs" / "data" / "survey.csv"


SURVEY_PLAN = ROOT / "specs" / "survey_plan_zcdp.yaml"
CENSUS_PLAN = ROOT / "specs" / "census_plan_gdp.yaml"


def _solve_and_verify(path: Path, out: Path, capsys) -> dict:
    assert main(["solve", str(path), "--out", str(out)]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["kind"] == "plan" and len(cert["queries"]) == len(cert["spec"]["queries"])
    # the optimal allocation beats an equal split on the examples (the figure is in the report)
    assert cert["allocation"]["ratio_optimal_to_equal"] < 1.0
    assert "## Allocation and per-query error" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main(["verify", str(out / "certificate.json")]) == 0
    assert "certificate holds" in capsys.readouterr().out
    return cert


def test_every_example_plan_is_tested():
    assert PLANS == sorted([SURVEY_PLAN, CENSUS_PLAN])


def test_survey_plan_solves_and_verifies_through_the_cli(tmp_path, capsys):
    cert = _solve_and_verify(SURVEY_PLAN, tmp_path, capsys)
    assert [q["name"] for q in cert["queries"]] == ["total income", "race", "sex", "age", "race x sex", "mean income"]
    assert main(["report", str(tmp_path / "certificate.json")]) == 0
    assert "| race x sex | 2 |" in capsys.readouterr().out
    # tampering: one query's noise lowered in its certificate and in the plan's row (the Gaussian sum, measured
    # exactly on its lattice: σ_ℤ² halved; the tables are measured exactly by marginal_gaussian under zCDP)
    entry = cert["queries"][0]
    for parameters in (entry["certificate"]["mechanism"]["parameters"], entry["parameters"]):
        parameters["lattice_sigma2"] = str(Fraction(parameters["lattice_sigma2"]) / 2)
    (tmp_path / "bad.json").write_text(json.dumps(cert))
    assert main(["verify", str(tmp_path / "bad.json")]) == 1
    assert "total income.privacy" in capsys.readouterr().err


@pytest.mark.slow  # about a minute: the range workload's Semi-DP space (a(t) = 3) and its SDP design
def test_census_plan_solves_verifies_and_releases_through_the_cli(tmp_path, capsys):
    _solve_and_verify(CENSUS_PLAN, tmp_path, capsys)
    out = tmp_path / "release"
    args = ["release", str(CENSUS_PLAN), "--data", str(SURVEY), "--seed", "3", "--insecure-seed", "--out", str(out)]
    assert main(args) == 0
    doc = json.loads((out / "release.json").read_text())
    assert [t["name"] for t in doc["tables"]] == ["race x sex", "age ranges"]
    assert len(doc["tables"][1]["release"]) == 15 and "records" not in doc
    # the projected Gaussian keeps the invariant margins exactly (its noise lies in the margins' kernel)
    table = np.array(list(doc["tables"][0]["release"].values())).reshape(3, 2)
    with SURVEY.open(newline="") as f:
        rows = list(csv.DictReader(f))
    sex = [sum(r["sex"] == s for r in rows) for s in ("female", "male")]
    np.testing.assert_allclose(table.sum(axis=0), sex, atol=1e-8)


def _brute_force(rows: list[dict]) -> dict[str, np.ndarray]:
    """The survey plan's true answers, counted record by record with the csv module."""
    def hist(attr, levels):
        return np.array([sum(r[attr] == lv for r in rows) for lv in levels], dtype=float)

    races, sexes = ["white", "black", "other"], ["female", "male"]
    ages = ["0-17", "18-34", "35-49", "50-64", "65+"]
    income = sum(float(r["income"]) for r in rows)
    table = np.array([sum(r["race"] == a and r["sex"] == b for r in rows) for a in races for b in sexes], dtype=float)
    return {"total income": np.array([income]), "race": hist("race", races), "sex": hist("sex", sexes),
            "age": hist("age_group", ages), "race x sex": table, "mean income": np.array([income / len(rows)])}


def test_plan_answers_in_one_pass_match_brute_force():
    """The true answers are checked, not the selection: each query names the family ``auto`` chooses for it
    (gaussian for the sums, gaussian_optimal for the tables; the plan as written is solved above)."""
    with SURVEY.open(newline="") as f:
        rows = list(csv.DictReader(f))
    plan = yaml.safe_load(SURVEY_PLAN.read_text(encoding="utf-8"))
    for query in plan["queries"]:
        query["mechanism"] = "gaussian" if query["query"]["kind"] in ("sum", "mean") else "gaussian_optimal"
    sol = solve_plan(plan)
    answers, records = plan_answers(sol, SURVEY)
    assert records == len(rows)
    expected = _brute_force(rows)
    for design, value in zip(sol.designs, answers):
        np.testing.assert_allclose(value, expected[design.name], rtol=1e-12)


def test_cli_release_of_a_plan_is_one_document(tmp_path, capsys):
    args = ["release", str(SURVEY_PLAN), "--data", str(SURVEY), "--seed", "3", "--insecure-seed"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in doc["tables"]] == ["total income", "race", "sex", "age", "race x sex", "mean income"]
    assert "records" not in doc and doc["guarantee"]["definition"] == "zcdp"
    assert doc["randomness"]["kind"] == "insecure_seed"  # recorded by the library
    assert "seed" not in doc and "seed" not in doc["randomness"]  # never published (issue 31)
    assert len(doc["tables"][4]["release"]) == 6
    assert main(args + ["--group-by", "disability"]) == 2  # the survey plan fixes n: one size per group needed
    assert "data.n" in capsys.readouterr().err


def test_cli_audit_of_the_survey_plan_does_not_refute_it(capsys):
    """Replace-one with a public n: the mean's difference is (x − x′)/n (a difference of one
    record's value over n would make this audit refute a correct plan)."""
    assert main(["audit", str(SURVEY_PLAN), "--draws", "40000"]) == 0
    assert "not refuted" in capsys.readouterr().out


GROUPED = {"dpopt": 1, "name": "grouped plan",
           "data": {"attributes": {"race": ["white", "black", "other"], "sex": ["female", "male"],
                                   # the grouping columns, declared with their public levels
                                   "age_group": ["0-17", "18-34", "35-49", "50-64", "65+"], "disability": ["yes", "no"]}},
           "queries": [{"name": "race", "query": {"kind": "histogram", "attribute": "race"}},
                       {"name": "race x sex", "query": {"kind": "contingency_table", "attributes": ["race", "sex"]}}],
           "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 1.0e8}}, "mechanism": "gaussian"}


def test_grouped_plan_release_matches_brute_force_and_composes(tmp_path, capsys):
    """ρ = 10⁸: σ ≈ 10⁻⁴, so every released cell is within 10⁻² of its count (over 100 σ), and the
    counts per group come out of one scan per grouping column; a record is in one group of each
    of the 2 columns, so the whole release is 2ρ-zCDP (Bun & Steinke 2016, Lemma 2.3)."""
    plan = tmp_path / "grouped_plan.json"
    plan.write_text(json.dumps(GROUPED))
    out = tmp_path / "out"
    assert main(["release", str(plan), "--data", str(SURVEY), "--group-by", "age_group", "--group-by", "disability",
                 "--seed", "1", "--insecure-seed", "--out", str(out)]) == 0
    doc = json.loads((out / "release.json").read_text())
    assert doc["guarantee"]["whole_release"]["rho"] == 2.0e8
    with SURVEY.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for column in ("age_group", "disability"):
        for key, tables in doc["groups"][column].items():
            mine = [r for r in rows if r[column] == key]
            race = [sum(r["race"] == v for r in mine) for v in ("white", "black", "other")]
            np.testing.assert_allclose(list(tables["race"].values()), race, atol=1e-2)
            cells = [sum(r["race"] == a and r["sex"] == b for r in mine)
                     for a in ("white", "black", "other") for b in ("female", "male")]
            np.testing.assert_allclose(list(tables["race x sex"].values()), cells, atol=1e-2)
    capsys.readouterr()
    assert main(["verify", str(out / "certificate.json")]) == 0
    cert = json.loads((out / "certificate.json").read_text())
    cert["groups"]["composition"]["rho"] = 1.0e8  # under-counted: one group's budget for the whole release
    (tmp_path / "bad.json").write_text(json.dumps(cert))
    assert main(["verify", str(tmp_path / "bad.json")]) == 1
