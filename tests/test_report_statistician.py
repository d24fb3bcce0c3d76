"""The report as a statistician reads it first (issue 19): one headline ε per δ with every
other figure labelled as a looser bound; each cell's standard error and 95% margin of error
(report, certificate, mechanism.json); what is published exactly, said once; numbers rounded
for people while the JSON keeps every digit; plain words for the checks' jargon; the claim
count `dpopt verify` reports; a K-norm fallback to a ball named with its possible cost; the
utility curve of a K-norm scaled rather than re-designed; the CLI's --version, help, output of
``report --out`` and Ctrl-C.

Expected values come from closed forms computed here (Balle & Wang's exact Gaussian profile,
Bun & Steinke's Lemma 40 conversion, the Gaussian and Laplace quantiles, the projector onto
the tables with fixed state totals), never from the code's own output.
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import replace

import numpy as np
import pytest
import yaml
from conftest import make_spec
from exact_gdp import balle_wang_epsilon, cks_epsilon
from solved_specs import SPECS, solved

import dpopt
from dpopt.cli import main
from dpopt.report import data as report_data
from dpopt.report.document import build_report
from dpopt.report.reading import epsilon_by_delta, human
from dpopt.report.render import render_markdown


def _path(stem):
    return next(p for p in SPECS if p.stem == stem)



@pytest.fixture(scope="module")
def census():
    return solved(_path("census_2020_states")).certificate


def test_census_has_one_headline_epsilon_per_delta(census):
    # measured exactly on the lattice: σ_ℤ² = σ² = 25/16 (dyadic, no rounding) and Δ₂² = 8 (a = 2 record changes
    # under the state totals), so ρ = 8/(2·25/16) = 2.56 by CKS 2020, Thm 14; the discrete Gaussian is not exactly
    # GDP, so ε per δ is the CKS conversion of ρ (Prop. 12), the tightest valid for every ρ-zCDP mechanism
    rho = 2.56
    by_delta = epsilon_by_delta(census.data)
    assert set(by_delta) == {1e-5, 1e-6, 1e-10}
    for delta, figures in by_delta.items():
        headline = figures[0][0]
        assert headline == pytest.approx(cks_epsilon(rho, delta), rel=1e-6)
        assert all(eps >= headline * (1 - 1e-12) for eps, _ in figures)
        lemma40 = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke 2016, Prop. 1.3
        assert all(eps == pytest.approx(lemma40, rel=1e-9) for eps, how in figures[1:] if "Lemma 40" in how)
    text = render_markdown(census)
    assert f"| 1e-06 | **{cks_epsilon(rho, 1e-6):.6g}** |" in text  # 13.5678
    headline = f"Headline: ε = {cks_epsilon(rho, 1e-5):.4g} at δ = 1e-05, ε = {cks_epsilon(rho, 1e-6):.4g} at δ = 1e-06"
    assert text.count(headline) == 1
    assert "ε at δ = 1e-06 within D_t" not in text  # the Semi-DP figures are in the one table, labelled
    assert f"{balle_wang_epsilon(math.sqrt(8) / 1.25, 1e-6):.6g}" not in text  # the continuous profile is not claimed


def test_census_audit_states_its_delta_and_conversion(census):
    report = build_report(census, audit_draws=4_000, utility_families="selected", utility_scales=(1.0,))
    text = render_markdown(report)
    # the audit's target is the report's headline at δ = 1e-6, the CKS conversion of ρ = 2.56 (the lattice
    # measurement has no tighter profile of its own): one ε per δ on the page and on the terminal
    headline = cks_epsilon(2.56, 1e-6)
    assert report.audit.delta == 1e-6 and report.audit.certified == pytest.approx(headline, rel=1e-9)
    assert "by the CKS bound (Canonne, Kamath & Steinke 2020)" in report.audit.certified_from
    assert "gives the looser" not in report.audit.certified_from
    assert f"the audited value ε = {headline:.6g} at δ = 1e-06" in text
    assert "the headline at this δ is" not in text


def test_per_cell_errors_of_the_census(census, tmp_path):
    # P_V η with η i.i.d. N_ℤ(0, 25/16) and P_V the projector on tables with fixed state totals: a state's two cells
    # have P_ii = 1/2, so SE² = Var N_ℤ(0, 25/16)/2, the variance summed over k ∈ [−60, 60] here (the tail beyond is
    # below e^{−1100}); the 95% margin is the exact quantile of the lattice noise: a cell's noise is (η₁ − η₂)/2
    # (P_V = I − J/2 within a state), so it is m/2 for the smallest whole m with P(|η₁ − η₂| > m) ≤ 0.05, the pmf
    # of η₁ − η₂ convolved here
    k = np.arange(-60, 61, dtype=float)
    weights = np.exp(-k**2 / (2 * 25 / 16))
    se = math.sqrt(float(np.sum(k**2 * weights) / np.sum(weights)) / 2)
    difference = np.convolve(weights / weights.sum(), weights[::-1] / weights.sum())  # η₁ − η₂ on [−120, 120]
    support = np.arange(-120, 121)
    moe = min(m for m in range(121) if difference[np.abs(support) > m].sum() <= 0.05) / 2
    per_cell = census["utility"]["per_cell"]
    assert per_cell["level"] == 0.95 and len(per_cell["cells"]) == 104
    assert per_cell["cells"][1]["cell"] == "state=AL,voting_age=under_18"
    for cell in per_cell["cells"]:
        assert cell["standard_error"] == pytest.approx(se, rel=1e-12)
        assert cell["margin_of_error"] == pytest.approx(moe, rel=1e-12)
    text = render_markdown(census)
    assert f"| every released cell (104 of 104) | {se:.3g} | ± {moe:.3g} |" in text
    assert main(["solve", str(_path("census_2020_states")), "--out", str(tmp_path), "--quiet"]) == 0
    written = json.loads((tmp_path / "mechanism.json").read_text())
    assert written["per_cell"]["cells"][0]["margin_of_error"] == pytest.approx(moe, rel=1e-12)


def test_per_cell_errors_of_laplace_noise():
    # Laplace(0, b): E W² = 2b² and P(|W| > m) = e^{−m/b} = 0.05 at m = b·ln 20
    sol = dpopt.solve(make_spec(query={"kind": "histogram", "attribute": "race"}, adjacency={"kind": "add_remove"},
                                privacy={"pure": {"epsilon": 1.0}}, mechanism="laplace", sampler="floating_point"))
    b = sol.mechanism.parameters["scale"]
    cells = sol.certificate["utility"]["per_cell"]["cells"]
    assert [c["cell"] for c in cells] == ["race=white", "race=black", "race=other"]
    for c in cells:
        assert c["standard_error"] == pytest.approx(math.sqrt(2) * b, rel=1e-8)
        assert c["margin_of_error"] == pytest.approx(b * math.log(20), rel=1e-9)


def test_per_cell_errors_of_k_norm_noise_add_up_to_its_l2():
    # Monte Carlo (20,000 draws): Σ_i E Z_i² is the closed-form E‖Z‖₂² of the certificate; the relative SE
    # of a mean of Z_i² is about √2/√20000 = 1% per cell, so 5% is beyond 4 SE for the sum
    cert = solved(_path("table_3x4_margins_pure")).certificate
    cells = cert["utility"]["per_cell"]["cells"]
    assert cells[0]["cell"] == "tenure=owner,size=1"
    total = sum(c["standard_error"] ** 2 for c in cells)
    assert total == pytest.approx(cert["utility"]["value"], rel=0.05)
    assert all(c["standard_error"] < c["margin_of_error"] < 4 * c["standard_error"] for c in cells)


def test_published_exactly_said_once():
    # replace-one without invariants: the total is the same on neighbours, so whichever Gaussian design auto picks
    # (rank 5 of 6) releases the component off the sum-zero span exactly, and the report says so once
    text = render_markdown(solved(_path("table_replace_gdp")).certificate)
    line = next(x for x in text.splitlines() if x.startswith("**Published exactly.**"))
    assert "Nothing" not in line and "No invariant is declared, but noise lies in the 5-dimensional span" in line
    assert "orthogonal to it is released exactly" in line
    assert text.count("released exactly") == 1


def test_numbers_are_rounded_for_people_and_kept_in_the_json(census):
    assert human("Δ₂²/(2σ²) = 2.5600000000000001 vs ρ = 2.56") == "Δ₂²/(2σ²) = 2.56 vs ρ = 2.56"
    assert human("recorded 10.000000000000002, seed 20261123, 81.188441") == "recorded 10, seed 20261123, 81.188441"
    assert "2.5600000000000001" in json.dumps(census.data["checks"], ensure_ascii=False)
    assert "2.5600000000000001" not in render_markdown(census)


def test_jargon_is_explained(census):
    # the exact census has no second-route law check (its noise P_V η is not a product law), so only the span's
    # name is jargon; the floating-point design of the same spec states the law and its bracket terms
    terms = _terms(render_markdown(census))
    assert "**margins_kernel**" in terms
    assert "pessimistic / optimistic bracket" not in terms and "‖Λ^(-1/2)Bᵀv‖" not in terms
    spec = yaml.safe_load(_path("census_2020_states").read_text())
    floating = dpopt.solve({**spec, "sampler": "floating_point"}).certificate
    terms = _terms(render_markdown(floating))
    for term in ("pessimistic / optimistic bracket", "‖Λ^(-1/2)Bᵀv‖", "margins_kernel"):
        assert f"**{term}**" in terms


def _terms(text: str) -> str:
    return text[text.index("**Terms used above.**"):text.index("## Caveats")]


def test_claim_count_is_the_one_verify_reports():
    cert = solved(_path("table_2x2_margins_pure")).certificate
    result = dpopt.verify(cert)
    counted = sum(1 for c in result.checks if c.method != "second route not available")
    unavailable = len(result.checks) - counted
    assert f"{counted} claims for `dpopt verify` to re-derive ({unavailable} not available)" in render_markdown(cert)


def test_a_k_norm_ball_fallback_is_named_with_its_cost(monkeypatch):
    from dpopt.mechanisms import k_norm

    monkeypatch.setattr(k_norm, "HULL_BUDGET", replace(k_norm.HULL_BUDGET, facets=0))  # no facet allowed: a ball
    spec = {**yaml.safe_load(_path("table_3x4_margins_pure").read_text()), "sampler": "floating_point"}
    cert = dpopt.solve(spec).certificate  # the floating-point ball (on the lattice: the cross-polytope)
    check = next(c for c in cert["checks"] if c["claim"] == "k_norm.excess_cost")
    ratio = float(check["detail"].split("≤ ")[1].split(" ×")[0])
    summary = render_markdown(cert).split("\n\n")[1]
    assert "the design fell back to a ball" in summary and f"up to {ratio:.3g}×" in summary


def test_k_norm_utility_curve_is_scaled_not_redesigned():
    # the independent route: every point re-designed (the hull rebuilt) at ε·s; the continuous law (the lattice
    # law, the default on counts, is homogeneous in ε only up to its lattice's cost: report.data.SCALE_FAMILIES)
    problem = dpopt.compile({**yaml.safe_load(_path("table_3x4_margins_pure").read_text()),
                             "sampler": "floating_point"})
    known = {"k_norm": dpopt.solve(problem.spec).certificate["utility"]["value"]}
    scaled, _, _ = report_data.utility_curves(problem, ["k_norm"], (0.5, 1.0, 2.0), known)
    redesigned, _, _ = report_data.utility_curves(problem, ["k_norm"], (0.5, 1.0, 2.0), None)
    np.testing.assert_allclose(scaled["k_norm"][1], redesigned["k_norm"][1], rtol=1e-9)


def test_optimal_covariance_utility_curve_is_scaled_not_redesigned():
    # the independent route: every point re-designed (the SDP solved again) at μ·s; Σ(μ) = Σ(1)/μ² exactly, the
    # solver to its tolerance (the re-designs' own spread), hence 1e-6. The continuous design (at μ = 1 the exact
    # measurement's rounding, at most 0.1%, would be the only difference)
    sol = solved(_path("age_cumulative_optimal_gdp"))
    problem = dpopt.compile({**yaml.safe_load(_path("age_cumulative_optimal_gdp").read_text()),
                             "sampler": "floating_point"})
    known = {"gaussian_optimal": sol.mechanism.design_info["objective_value"]}  # the design's tr(WΣWᵀ) at Σ
    scaled, _, _ = report_data.utility_curves(problem, ["gaussian_optimal"], (0.5, 1.0, 2.0), known)
    redesigned, _, _ = report_data.utility_curves(problem, ["gaussian_optimal"], (0.5, 1.0, 2.0), None)
    np.testing.assert_allclose(scaled["gaussian_optimal"][1], redesigned["gaussian_optimal"][1], rtol=1e-6)


def test_noise_panels_are_named_by_cell():
    sol = solved(_path("table_replace_gdp"))
    panels = report_data.noise_panels(sol.mechanism, sol.mechanism.noise_law(), ["race=white,sex=female"] * 6,
                                      draws=2_000)
    assert panels and all(p["label"] == "cell race=white, sex=female" for p in panels)


def test_cli_version_help_and_report_out(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"dpopt {dpopt.__version__}"
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    usage = capsys.readouterr().out
    assert "SPEC" in usage and "a spec file (YAML or JSON)" in usage
    cert = tmp_path / "certificate.json"
    solved(_path("table_replace_gdp")).certificate.write(cert)
    assert main(["report", str(cert), "--out", str(tmp_path / "r.html"), "--no-audit"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'r.html'} (5 figures embedded")


def test_ctrl_c_is_one_line(monkeypatch, capsys):
    def interrupted(*_):
        raise KeyboardInterrupt

    # the CLI imports the solve stage when the command runs: patch it where it is defined
    monkeypatch.setattr(importlib.import_module("dpopt.solve"), "solve", interrupted)
    assert main(["solve", str(_path("table_replace_gdp"))]) == 130
    assert capsys.readouterr().err == "dpopt: interrupted\n"
