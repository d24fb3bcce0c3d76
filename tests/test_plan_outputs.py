"""A plan is first-class: ε per δ of its composed guarantee, an HTML report, an audit of its certificate.

The survey plan (specs/survey_plan_zcdp.yaml) spends ρ = 0.5. Its tables are measured exactly on the lattice
(discrete Gaussians: ρ-zCDP, not μ-GDP), so its ε at δ is the CKS conversion of ρ = 0.5 (Canonne, Kamath &
Steinke 2020, Prop. 12), minimised here by scipy. With ``sampler: floating_point`` every query adds continuous
Gaussian noise, so the whole plan is μ-GDP with μ² = 2ρ = 1 (Bun & Steinke 2016, Prop. 1.6; Dong, Roth & Su
2022, Cor. 3.3), and its ε at δ solves δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8),
solved here by scipy's brentq.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from exact_gdp import balle_wang_epsilon, cks_epsilon

from dpopt.cli import main
from dpopt.plan import load_plan, solve_plan, verify_plan

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "specs" / "survey_plan_zcdp.yaml"



@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    assert main(["solve", str(PLAN), "--out", str(out), "--quiet"]) == 0
    return out


def test_plan_certificate_states_epsilon_per_delta_and_verifies():
    cert = solve_plan(PLAN).certificate
    g = cert["guarantee"]
    for delta in ("1e-05", "1e-06", "1e-10"):
        assert g["epsilon_at_delta"][delta] == pytest.approx(cks_epsilon(0.5, float(delta)), rel=1e-9)
    assert "CKS conversion" in g["epsilon_method"]
    assert verify_plan(cert).passed


def test_floating_point_plan_states_the_exact_gdp_epsilon():
    document = load_plan(PLAN).model_dump(mode="json", exclude_none=True)
    cert = solve_plan(load_plan({**document, "sampler": "floating_point"})).certificate
    g = cert["guarantee"]
    for delta in ("1e-05", "1e-06", "1e-10"):
        # the shares' budgets are rounded down: μ is 1 to about 1e-12
        assert g["epsilon_at_delta"][delta] == pytest.approx(balle_wang_epsilon(1.0, float(delta)), rel=1e-9)
    assert g["epsilon_method"].startswith("exact")
    assert verify_plan(cert).passed


def test_plan_html_report(solved, capsys):
    page = solved / "plan.html"
    assert main(["report", str(solved / "certificate.json"), "--out", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "Error of each cell" in text and "Composed guarantee" in text
    assert f"<strong>{cks_epsilon(0.5, 1e-6):.6g}</strong>" in text  # in the ε per δ table
    assert main(["report", str(solved / "certificate.json"), "--out", str(solved / "plan.pdf")]) == 2


def test_plan_audit_of_the_certificate_states_the_report_headline(solved, capsys):
    assert main(["audit", str(solved / "certificate.json"), "--draws", "4000"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    certified = float(re.search(r"certified ([0-9.]+) at delta = 1e-06", line).group(1))
    assert certified == pytest.approx(cks_epsilon(0.5, 1e-6), rel=1e-5)  # the CKS 5.22 of the lattice plan
    assert line.startswith("not refuted")
