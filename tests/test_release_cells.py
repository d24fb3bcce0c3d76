"""Every release output carries, per labelled cell, the value, its standard error and its 95% margin of error.

Expected errors are derived here: Gaussian noise N(0, σ²) has SE = σ and margin Φ⁻¹(0.975)·σ
(scipy's norm.ppf); the discrete Gaussian N_Z(0, 1) has E Z² and P(|Z| ≤ m) summed from its pmf
∝ exp(−k²/2) over |k| ≤ 60 (the rest is below 1e-700); a projected Gaussian on the sum-zero
subspace of a 3-cell histogram has covariance σ²(I − 11ᵀ/3), so SE = σ√(2/3); a linear map M of
i.i.d. N(0, σ²) noise has SE_i = σ‖M_i‖₂; a sum of two i.i.d. Laplace(b) has variance 4b².
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pytest
from scipy import optimize, stats

from dpopt.certificate.per_cell import mapped_per_cell_errors
from dpopt.cli import main
from dpopt.plan import load_plan
from dpopt.solve import solve

ROOT = Path(__file__).resolve().parents[1]
SURVEY = ROOT / "specs" / "data" / "survey.csv"
Z975 = stats.norm.ppf(0.975)
RACE = {"dpopt": 1, "name": "race counts", "data": {"attributes": {"race": ["white", "black", "other"]}},
        "query": {"kind": "histogram", "attribute": "race"}, "adjacency": "add_remove",
        "privacy": {"gdp": {"mu": 0.5}}, "mechanism": "gaussian", "utility": {"metric": "l2"},
        "sampler": "floating_point"}  # the continuous σ = Δ₂/μ the expected errors below are derived from


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_ungrouped_release_json_and_csv_carry_value_se_and_moe(tmp_path, capsys):
    spec = tmp_path / "race.json"
    spec.write_text(json.dumps(RACE))
    argv = ["release", str(spec), "--data", str(SURVEY), "--seed", "4", "--insecure-seed"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    sigma = 1 / 0.5  # Δ₂ = 1 under add/remove, σ = Δ₂/μ
    rows = doc["cells"]["rows"]
    assert [r["label"] for r in rows] == list(doc["release"]) == ["race=white", "race=black", "race=other"]
    for r in rows:
        assert r["value"] == doc["release"][r["label"]] and r["postprocessed"] is None
        assert r["standard_error"] == pytest.approx(sigma, rel=1e-12)
        assert r["margin_of_error_95"] == pytest.approx(Z975 * sigma, rel=1e-12)
    assert main(argv + ["--format", "csv"]) == 0
    table = _csv(capsys.readouterr().out)
    assert list(table[0]) == ["label", "value", "standard_error", "margin_of_error_95", "postprocessed",
                              "ci_95_low", "ci_95_high"]
    assert [(t["label"], float(t["value"])) for t in table] == [(r["label"], r["value"]) for r in rows]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 0
    assert "release.csv" in capsys.readouterr().err
    cert = json.loads((tmp_path / "out" / "certificate.json").read_text())
    # the certificate's per-cell labels are the release's labels, one format
    assert [c["cell"] for c in cert["utility"]["per_cell"]["cells"]] == [r["label"] for r in rows]
    assert len(_csv((tmp_path / "out" / "release.csv").read_text())) == 3


def test_postprocessed_release_has_both_values(tmp_path, capsys):
    spec = ROOT / "specs" / "table_race_sex_postprocess_gdp.yaml"
    assert main(["release", str(spec), "--data", str(SURVEY), "--seed", "4", "--insecure-seed",
                 "--error-draws", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["cells"]["rows"]
    assert [r["postprocessed"] for r in rows] == list(doc["postprocess"]["values"].values())
    assert [r["value"] for r in rows] == list(doc["release"].values())
    assert "least squares" in doc["cells"]["postprocessed"]


def test_grouped_parquet_and_csv_carry_the_discrete_gaussian_errors(tmp_path, capsys):
    spec = ROOT / "specs" / "block_tables_discrete_zcdp.yaml"
    out = tmp_path / "out"
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "blocks.csv"), "--group-by", "tract",
                 "--groups", str(ROOT / "specs" / "data" / "block_list.csv"),
                 "--seed", "2", "--insecure-seed", "--out", str(out), "--format", "csv"]) == 0
    capsys.readouterr()
    k = np.arange(-60, 61)
    pmf = np.exp(-k**2 / 2.0)
    pmf /= pmf.sum()
    se = math.sqrt(float(np.sum(k**2 * pmf)))
    within = {m: float(pmf[np.abs(k) <= m].sum()) for m in range(4)}
    moe = min(m for m in within if within[m] >= 0.95)
    assert moe == 2 and within[1] < 0.95  # P(|Z| ≤ 1) = 0.883, P(|Z| ≤ 2) = 0.991
    table = duckdb.sql(f"SELECT * FROM read_parquet('{out / 'release_tract.parquet'}') ORDER BY tract").df()
    label = "race=white,sex=female"
    assert table[f"{label} standard_error"].to_numpy() == pytest.approx(se, rel=1e-9)
    assert (table[f"{label} margin_of_error_95"] == moe).all()
    rows = _csv((out / "release_tract.csv").read_text())  # the same table, for a spreadsheet
    assert len(rows) == len(table) and list(rows[0]) == list(table.columns)
    assert list(rows[0])[:4] == ["tract", label, f"{label} standard_error", f"{label} margin_of_error_95"]
    first = next(r for r in rows if r["tract"] == table["tract"][0])
    assert int(first[label]) == table[label][0] and float(first[f"{label} margin_of_error_95"]) == moe
    capsys.readouterr()
    assert main(["release", str(spec), "--data", str(ROOT / "specs" / "data" / "blocks.csv"), "--group-by", "tract",
                 "--groups", str(ROOT / "specs" / "data" / "block_list.csv"),
                 "--seed", "2", "--insecure-seed", "--format", "csv"]) == 0
    long = _csv(capsys.readouterr().out)  # printed: one row per group and cell
    assert len(long) == len(table) * 6 and list(long[0])[:3] == ["column", "group", "label"]


def test_plan_release_cells_per_query(capsys, tmp_path):
    # the floating-point samplers (the tables are otherwise measured exactly by marginal_gaussian): race is then
    # the projected Gaussian, whose per-cell error has the closed form below
    plan = tmp_path / "survey_plan.json"
    document = load_plan(ROOT / "specs" / "survey_plan_zcdp.yaml").model_dump(mode="json", exclude_none=True)
    plan.write_text(json.dumps({**document, "sampler": "floating_point"}))
    assert main(["release", str(plan), "--data", str(SURVEY), "--seed", "1", "--insecure-seed"]) == 0
    doc = json.loads(capsys.readouterr().out)
    race = next(t for t in doc["tables"] if t["name"] == "race")
    sigma = race["mechanism"]["parameters"]["sigma"]
    assert race["mechanism"]["family"] == "projected_gaussian"
    rows = [r for r in doc["cells"]["rows"] if r["query"] == "race"]
    assert [r["value"] for r in rows] == list(race["release"].values())
    for r in rows:
        assert r["standard_error"] == pytest.approx(sigma * math.sqrt(2 / 3), rel=1e-9)
        assert r["margin_of_error_95"] == pytest.approx(Z975 * sigma * math.sqrt(2 / 3), rel=1e-9)


def test_errors_of_a_linear_map_of_the_noise():
    sol = solve(RACE)
    m = np.array([[1.0, 1.0, 0.0], [1.0, -2.0, 3.0]])
    block = mapped_per_cell_errors(sol.mechanism, m, ["a", "b"])
    se = [c["standard_error"] for c in block["cells"]]
    assert se == pytest.approx(2.0 * np.linalg.norm(m, axis=1), rel=1e-12) and "closed form" in block["method"]
    laplace = solve(RACE | {"privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "laplace"})
    b = laplace.mechanism.parameters["scale"]
    block = mapped_per_cell_errors(laplace.mechanism, [[1.0, 1.0, 0.0]], ["sum"])
    # X = Z₁ + Z₂, Z_k i.i.d. Laplace(b): Var X = 2·2b², so SE = 2b exactly. X has density (1 + |x|/b)e^{−|x|/b}/(4b)
    # and tail P(X > x) = e^{−x/b}(2 + x/b)/4 (integrating the density), so the exact 95% margin q solves
    # e^{−q/b}(2 + q/b)/2 = 0.05. The Chernoff margin is a proven upper bound: at least q, and (the bound's slack on
    # two Laplace terms) below 1.8q
    q = b * optimize.brentq(lambda x: math.exp(-x) * (2.0 + x) / 2.0 - 0.05, 0.0, 50.0)
    assert block["cells"][0]["standard_error"] == pytest.approx(2 * b, rel=1e-9)
    assert q <= block["cells"][0]["margin_of_error"] <= 1.8 * q and "Chernoff" in block["method"]


def test_data_errors_come_before_the_design(tmp_path, monkeypatch):
    from dpopt.errors import DataError
    from dpopt.release import batch, random_source, release_groups, release_once

    bad = tmp_path / "bad.csv"
    bad.write_text("race,sex\nwhite,female\npurple,male\n")

    def no_design(problem):
        raise AssertionError("the design ran before the data were checked")

    monkeypatch.setattr(batch, "solve", no_design)
    with pytest.raises(DataError, match="purple"):
        release_once(RACE, bad, random_source(1, insecure_seed=True))
    with pytest.raises(DataError, match="purple"):
        release_groups(RACE, bad, "sex", groups={"sex": ["female", "male"]}, seed=1, insecure_seed=True)
    with pytest.raises(DataError, match="tract"):
        release_groups(RACE, bad, "tract", groups={"tract": ["T01"]}, seed=1, insecure_seed=True)
