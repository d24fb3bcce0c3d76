"""``dpopt solve`` on a geography spec certifies the whole hierarchical release, and ``release`` does exactly that.

Expected values are derived here, independently of the code: the optimal shares of
ρ = 1 for weights 1 : 1 : 2 are s_l ∝ √w_l = (1, 1, √2)/(2 + √2) (Lagrange on Σ w_l/s_l), one
record added or removed changes one cell of a unit's table by 1 (Δ₂ = 1), so level l adds
N(0, σ_l²) with σ_l = Δ₂/√(2 s_l ρ) (Bun & Steinke 2016, Prop. 1.6) — σ = 1.30656 (nation,
state), 1.09868 (county), the figures of issue 27; the whole release is μ-GDP with μ² = Σ 1/σ_l²
= 2ρ = 2, whose ε(δ) solves δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8),
solved here by scipy's brentq.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from exact_gdp import balle_wang_epsilon, cks_epsilon
from scipy import stats

from dpopt.certificate.hierarchy_release import verify_hierarchy_release
from dpopt.cli import main
from dpopt.errors import DataError
from dpopt.release import hierarchy as hierarchy_release
from dpopt.release.hierarchy import release_hierarchy
from dpopt.release.hierarchy_design import solve_hierarchy
from dpopt.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "hierarchy_topdown_zcdp.yaml"
DATA = ROOT / "specs" / "data" / "hierarchy.csv"

SHARES = {"nation": 1 / (2 + math.sqrt(2)), "state": 1 / (2 + math.sqrt(2)), "county": math.sqrt(2) / (2 + math.sqrt(2))}
SIGMAS = {name: 1 / math.sqrt(2 * s) for name, s in SHARES.items()}  # Δ₂ = 1, ρ = 1
# the shares are rational approximations with denominator ≤ 10⁶ and each ρ_l is rounded down:
# σ moves by well under 1e-5 relative
REL = 1e-5



@pytest.fixture(scope="module")
def design():
    return solve_hierarchy(SPEC)


def test_solve_designs_every_level_with_the_closed_form_sigma(design):
    assert design.names == ("nation", "state", "county")
    assert design.sigmas() == pytest.approx(SIGMAS, rel=REL)
    assert [float(s) for s in design.shares] == pytest.approx(list(SHARES.values()), abs=2e-6)
    assert sum(design.shares) == 1  # exact fractions


def test_solve_and_release_agree_on_every_sigma_in_python(design):
    rel = release_hierarchy(SPEC, DATA, seed=2, insecure_seed=True)
    released = {lv["level"]: lv["mechanism"]["parameters"]["sigma"] for lv in rel.block["levels"]}
    assert released == design.sigmas()  # the same floats: one design
    whole = rel.certificate
    assert {n: c["mechanism"]["parameters"]["sigma"] for n, c in whole["levels"].items()} == design.sigmas()
    assert verify_hierarchy_release(whole).passed


def test_cli_solve_and_release_agree_and_name_what_they_wrote(tmp_path, capsys):
    solved, released = tmp_path / "solved", tmp_path / "released"
    assert main(["solve", str(SPEC), "--out", f"{solved}/"]) == 0
    out = capsys.readouterr().out
    assert "//" not in out and f"wrote {solved / 'mechanism.json'}, {solved / 'certificate.json'}" in out
    for name, sigma in SIGMAS.items():  # one line per level with its σ, then the whole release
        line = next(x for x in out.splitlines() if x.startswith(f"{name}:"))
        assert f"sigma={sigma:.6g}" in line
    assert main(["release", str(SPEC), "--data", str(DATA), "--out", str(released), "--seed", "3",
                 "--insecure-seed", "--error-draws", "0"]) == 0
    assert f"wrote {released / 'release.json'}" in capsys.readouterr().err
    report = (solved / "report.md").read_text()  # the whole release's headline: one ε per δ, as the certificate's
    # the levels measure exactly on the lattice (ρ-zCDP, not μ-GDP): the whole release's ε is the CKS conversion
    assert f"ε = {cks_epsilon(1.0, 1e-6):.4g} at δ = 1e-06" in report and "## Levels" in report
    a = json.loads((solved / "certificate.json").read_text())
    b = json.loads((released / "certificate.json").read_text())
    sigmas = [{lv["level"]: lv["mechanism"]["parameters"]["sigma"] for lv in c["hierarchy"]["levels"]} for c in (a, b)]
    assert sigmas[0] == sigmas[1] == pytest.approx(SIGMAS, rel=REL)
    assert a["guarantee"] == b["guarantee"]
    for folder in (solved, released):
        assert main(["verify", str(folder / "certificate.json")]) == 0
        assert main(["verify", str(folder / "certificate_county.json")]) == 0


def test_whole_release_states_one_epsilon_per_delta(design):
    g = design.certificate()["guarantee"]
    assert g["definition"] == "zcdp" and g["rho"] == 1.0
    # each level's lattice variance is its σ² rounded up by at most 2^-20 (relative): Σ ρ_l ∈ [1 − 2^-20, 1]
    assert 1 - 2.0**-20 <= g["zcdp_rho"] <= 1 + 1e-15
    for delta in ("1e-05", "1e-06", "1e-10"):
        assert g["epsilon_at_delta"][delta] == pytest.approx(cks_epsilon(g["zcdp_rho"], float(delta)), rel=1e-9)
    assert "Canonne, Kamath & Steinke" in g["epsilon_method"]


@pytest.fixture(scope="module")
def float_design():
    return solve_hierarchy(dict(load_spec(SPEC).model_dump(mode="json", exclude_none=True), sampler="floating_point"))


def test_floating_point_levels_compose_as_gdp(float_design):
    g = float_design.certificate()["guarantee"]
    mu = math.sqrt(sum(1 / s**2 for s in float_design.sigmas().values()))
    assert mu == pytest.approx(math.sqrt(2), rel=REL)
    for delta in ("1e-05", "1e-06", "1e-10"):
        assert g["epsilon_at_delta"][delta] == pytest.approx(balle_wang_epsilon(mu, float(delta)), rel=1e-9)
    assert "Dong, Roth & Su" in g["epsilon_method"]


def test_verify_names_a_tampered_level_or_epsilon(design):
    data = design.certificate().data
    assert verify_hierarchy_release(data).passed
    bad = json.loads(json.dumps(data))
    bad["levels"]["county"]["mechanism"]["parameters"]["sigma"] = 0.9  # less noise than the budget allows
    failed = {c.claim for c in verify_hierarchy_release(bad).failed}
    assert any(c.startswith("county.") for c in failed)
    bad = json.loads(json.dumps(data))
    bad["guarantee"]["epsilon_at_delta"]["1e-06"] = 5.0
    assert {c.claim for c in verify_hierarchy_release(bad).failed} == {"guarantee"}
    bad = json.loads(json.dumps(data))
    del bad["levels"]["state"]
    assert "hierarchy.levels" in {c.claim for c in verify_hierarchy_release(bad).failed}


@pytest.mark.parametrize("edit, message", [
    (lambda row: {k: v for k, v in row.items() if k != "county"}, "county"),
    (lambda row: row | {"sex": "x"}, "sex"),
])
def test_data_errors_come_before_the_design(tmp_path, monkeypatch, capsys, edit, message):
    lines = DATA.read_text().splitlines()
    header = lines[0].split(",")
    rows = [edit(dict(zip(header, line.split(",")))) for line in lines[1:]]
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([",".join(rows[0])] + [",".join(r.values()) for r in rows]) + "\n")

    def no_design(spec):
        raise AssertionError("the design ran before the data were checked")

    monkeypatch.setattr(hierarchy_release, "solve_hierarchy", no_design)
    with pytest.raises(DataError, match=message):
        release_hierarchy(SPEC, bad, seed=1, insecure_seed=True)
    assert main(["release", str(SPEC), "--data", str(bad), "--seed", "1", "--insecure-seed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_verify_given_a_spec_says_to_run_solve(tmp_path, capsys):
    assert main(["verify", str(SPEC)]) == 2
    err = capsys.readouterr().err
    assert "verify takes a certificate; to check a spec, run `dpopt solve" in err
    spec_json = tmp_path / "spec.json"
    spec_json.write_text(json.dumps({"dpopt": 1, "name": "n", "query": {"kind": "count"}}))
    assert main(["verify", str(spec_json)]) == 2
    assert "verify takes a certificate" in capsys.readouterr().err


def lattice_margin(sigma2: float) -> int:
    k = np.arange(-200, 201)
    pmf = np.exp(-k * k / (2 * sigma2))
    pmf /= pmf.sum()
    return next(m for m in range(200) if pmf[np.abs(k) > m].sum() <= 0.05)


def test_hierarchy_release_csv_has_every_unit_and_cell(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["release", str(SPEC), "--data", str(DATA), "--out", str(out), "--seed", "5", "--insecure-seed",
                 "--error-draws", "0"]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader((out / "release.csv").open()))
    assert len(rows) == (1 + 3 + 12) * 12  # nation, 3 states, 12 counties (specs/data/hierarchy.csv); 2 x 6 cells
    for r in rows:
        # the lattice variance exceeds σ² by at most 2^-20 (relative), so the SE exceeds σ by at most 2^-21
        # (the discrete Gaussian's variance is σ² to e^-300 at these σ); its 95% margin is the integer k with
        # P(|W| > k) ≤ 0.05 < P(|W| > k − 1), W ~ N_Z(0, σ²) summed here term by term
        assert float(r["standard_error"]) == pytest.approx(SIGMAS[r["level"]], rel=2.0**-21)
        assert float(r["margin_of_error_95"]) == lattice_margin(SIGMAS[r["level"]] ** 2)
        assert float(r["postprocessed"]) == int(r["postprocessed"]) >= 0  # TopDown: non-negative integers


def test_audit_of_the_whole_release(design, float_design):
    from dpopt.certificate.model import Certificate
    from dpopt.plan.audit import audit_hierarchy_certificate

    cert = design.certificate()
    result = audit_hierarchy_certificate(cert, draws=4_000)
    # the audit tests the whole release's headline ε at δ = 1e-6 (ρ ≈ 1, the CKS conversion), not a level's
    assert result.passed and result.certified == pytest.approx(cks_epsilon(1.0, 1e-6), rel=1e-5)
    # the floating-point levels (μ = √2 in all, ε = 7.29 at 1e-6) with σ = 0.1 (μ = 10 each, √300 ≈ 17 in all):
    # its ε at 1e-6 is far above 7.29; 20,000 draws can show at most about 7.6 (the bound saturates: the rates'
    # Clopper–Pearson limits), enough (the lattice's CKS headline, 7.77, is beyond what they can show)
    broken = json.loads(json.dumps(float_design.certificate().data))
    for level in broken["levels"].values():
        level["mechanism"]["parameters"]["sigma"] = 0.1
    refuted = audit_hierarchy_certificate(Certificate(broken), draws=20_000)
    assert not refuted.passed and refuted.lower_bound > refuted.certified
