"""The generalized_gaussian family through the pipeline: design, certificates, release, tampering.

Expected values come from the digest of Liu (2019) (``papers/002_generalized_gaussian.md``),
scipy.stats.gennorm / norm, and numerical integration of the truncated densities; statistical
tolerances are 4 standard errors, derived where used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT, make_spec
from scipy import integrate, stats

import dpopt
from dpopt.cli import main
from dpopt.errors import DataError
from dpopt.mechanisms.generalized_gaussian import GeneralizedGaussianMechanism

HISTOGRAM = {"kind": "histogram", "attribute": "race"}
COMMITTEE = ROOT / "specs" / "committee_mean_truncated_gg.yaml"
CONTINUOUS_COMMITTEE = {**yaml.safe_load(COMMITTEE.read_text()), "sampler": "floating_point"}
"""The committee spec with the continuous laws (its exact lattice box: tests/test_discrete_truncated_gg.py)."""


def _options(spec_dict):
    return GeneralizedGaussianMechanism._options(dpopt.compile(spec_dict))[0]


def test_family_is_registered_and_round_trips():
    # registered: the class extending its options to sums (dpopt/mechanisms/generalized_gaussian_sum.py)
    assert issubclass(dpopt.registry()["generalized_gaussian"], GeneralizedGaussianMechanism)
    sol = dpopt.solve(COMMITTEE)
    rebuilt = GeneralizedGaussianMechanism.from_parameters(sol.mechanism.parameters, sol.space)
    assert rebuilt.parameters == sol.mechanism.parameters


def test_pdp_design_picks_the_best_shape_for_the_metric():
    # histogram under add/remove (Δ = 1, disjoint), (ε, δ) = (1, 0.25), usefulness at γ = 3
    spec = make_spec(
        query=HISTOGRAM,
        adjacency="add_remove",
        privacy={"pdp": {"epsilon": 1.0, "delta": 0.25}},
        mechanism="generalized_gaussian",
        utility={"metric": "usefulness", "gamma": 3.0},
        sampler="floating_point",  # the continuous laws (the lattice's: tests/test_discrete_gg_pdp.py)
    )
    scales = {m.p: m.scale for m in _options(spec)}
    # digest §4.4 (σ = 1.486671, b = √2 σ) and §4.2 (p = 3: 2.612351)
    assert scales[1] == 1.0
    assert scales[2] == pytest.approx(math.sqrt(2) * 1.486671, abs=2e-6)
    assert scales[3] == pytest.approx(2.612351, abs=1e-6)
    # P(|e| <= 3) under each law, from scipy: the design must keep the largest
    useful = {
        p: stats.gennorm(p, scale=b).cdf(3) - stats.gennorm(p, scale=b).cdf(-3) for p, b in scales.items()
    }
    sol = dpopt.solve(spec)
    assert (
        sol.mechanism.p == max(useful, key=useful.get) == 2
    )  # Fig. 4: past the crossing, Gaussian tails are lighter
    assert sol.certificate["utility"]["value"] == pytest.approx(useful[2], rel=1e-9)


def test_pdp_l2_design_follows_lemma11():
    # δ = 0.05 < 2Φ(−√2): the pDP Gaussian has the larger variance, Laplace (p = 1) is kept
    sol = dpopt.solve(
        make_spec(
            query=HISTOGRAM,
            adjacency="add_remove",
            privacy={"pdp": {"epsilon": 1.0, "delta": 0.05}},
            mechanism="generalized_gaussian",
            sampler="floating_point",
        )
    )
    assert (sol.mechanism.p, sol.mechanism.scale) == (1, 1.0)
    assert sol.certificate["utility"]["value"] == pytest.approx(3 * 2.0)  # 3 cells × 2b²


def test_pdp_multi_coordinate_shapes_use_monte_carlo():
    # 3x2 table under replace-one: two cells move, so p = 3 needs Corollary 7
    spec = make_spec(privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}}, mechanism="generalized_gaussian",
                     sampler="floating_point")
    by_p = {m.p: m for m in _options(spec)}
    assert by_p[3].calibration == "corollary7_monte_carlo"
    assert by_p[3].monte_carlo == {"seed": 20190406, "draws": 200_000, "confidence": 0.99}
    space = dpopt.derive(dpopt.load_spec(spec))
    privacy = dpopt.load_spec(spec).privacy
    check = by_p[3].privacy_checks(space, privacy)[0]
    assert check.passed and "confidence 0.99" in check.detail
    smaller = GeneralizedGaussianMechanism(
        3, 0.95 * by_p[3].scale, 6, "unbounded", "corollary7_monte_carlo", monte_carlo=by_p[3].monte_carlo
    )
    assert not smaller.privacy_checks(space, privacy)[0].passed


def test_monte_carlo_certificate_verifies_and_states_its_confidence():
    # far in the tails (γ = 12) the lighter GG tails win: p = 4, calibrated by Corollary 7
    spec = make_spec(
        privacy={"pdp": {"epsilon": 1.0, "delta": 0.1}},
        mechanism="generalized_gaussian",
        utility={"metric": "usefulness", "gamma": 12.0},
        sampler="floating_point",
    )
    sol = dpopt.solve(spec)
    assert (sol.mechanism.p, sol.mechanism.calibration) == (4, "corollary7_monte_carlo")
    privacy = next(c for c in sol.certificate["checks"] if c["claim"] == "privacy")
    assert "seed 20190406" in privacy["method"] and "confidence 0.99" in privacy["detail"]
    assert any("certified statistically" in note for note in sol.certificate["mechanism"]["notes"])
    assert dpopt.verify(sol.certificate).passed
    data = sol.certificate.data
    params = data["mechanism"]["parameters"]
    smaller = {
        **data,
        "mechanism": {**data["mechanism"], "parameters": {**params, "scale": 0.9 * params["scale"]}},
    }
    assert "privacy" in {c.claim for c in dpopt.verify(smaller).failed}


def test_unbounded_shape_above_one_is_not_pure_dp():
    # Claim 4: no b makes unbounded GG noise with p ≠ 1 ε-DP
    space = dpopt.derive(dpopt.load_spec(make_spec(query=HISTOGRAM)))
    privacy = dpopt.load_spec(make_spec(privacy={"pure": {"epsilon": 1.0}})).privacy
    checks = GeneralizedGaussianMechanism(2, 100.0, 3).privacy_checks(space, privacy)
    assert not checks[0].passed and "Claim 4" in checks[0].method


def test_gdp_target_takes_p_one_or_two_and_refuses_larger_shapes():
    # μ-GDP: p = 1, 2 are Laplace and Gaussian noise; p > 2 is μ-GDP for no μ (dpopt.privacy.gg_profile)
    solution = dpopt.solve(make_spec(mechanism="generalized_gaussian"))
    assert solution.mechanism.p in (1, 2)
    assert any("p > 2: no ρ-zCDP or μ-GDP guarantee" in note for note in solution.mechanism.notes())


# ---------------------------------------------------------------- bounded variants
def _truncated_square(b, p, width, offset):
    """E e² of GG(0, b, p) noise truncated to [−offset, width − offset], by quadrature."""
    density = stats.gennorm(p, scale=b).pdf
    lo, hi = -offset, width - offset
    mass = integrate.quad(density, lo, hi, points=[0.0])[0]
    return integrate.quad(lambda x: x * x * density(x), lo, hi, points=[0.0])[0] / mass


def test_committee_spec_picks_truncated_gg_with_the_worst_case_error():
    sol = dpopt.solve(CONTINUOUS_COMMITTEE)
    mech = sol.mechanism
    assert (mech.variant, mech.p) == ("truncated", 2)
    # the prediction is the worst case over true answers in [0, 10]: recompute on the same grid by quadrature
    worst = max(_truncated_square(mech.scale, 2, 10.0, s) for s in np.linspace(0.0, 5.0, 101))
    assert sol.certificate["utility"]["value"] == pytest.approx(worst, rel=1e-8)
    assert "worst case" in sol.certificate["utility"]["method"]
    claims = {c["claim"]: c for c in sol.certificate["checks"]}
    assert (
        claims["mechanism.box"]["passed"]
        and claims["privacy"]["passed"]
        and claims["privacy.numerics"]["passed"]
    )
    # every option was calibrated to a certified ε = 0.2 and the chosen one predicts the least error
    values = [m.expected_utility(sol.spec.utility).value for m in _options(CONTINUOUS_COMMITTEE)]
    assert sol.certificate["utility"]["value"] == pytest.approx(min(values), rel=1e-12)


@pytest.mark.parametrize("variant", ["truncated", "boundary_inflated"])
def test_bounded_release_law(variant):
    # releases at a true answer s = 1 in [0, 10]: E (release − s)² against quadrature (truncated)
    # or against the clamped law (BIT); tolerance 4 SE of the sample mean of e²
    mech = GeneralizedGaussianMechanism(2, 3.0, 1, variant, "certified_bound", [0.0], [10.0])
    rng = np.random.default_rng(11)
    e = mech.release(np.full((20_000, 1), 1.0), rng)[:, 0] - 1.0
    assert mech.release([1.0], rng).shape == (1,)
    assert e.min() >= -1.0 and e.max() <= 9.0
    if variant == "truncated":
        expected = _truncated_square(3.0, 2, 10.0, 1.0)
    else:
        law = stats.gennorm(2, scale=3.0)
        core = integrate.quad(lambda x: x * x * law.pdf(x), -1.0, 9.0)[0]
        expected = core + 1.0 * law.cdf(-1.0) + 81.0 * law.sf(9.0)
    se = np.std(e**2) / math.sqrt(e.size)
    assert abs(np.mean(e**2) - expected) < 4 * se


def test_bounded_release_refuses_answers_outside_the_box():
    mech = GeneralizedGaussianMechanism(2, 3.0, 1, "truncated", "certified_bound", [0.0], [10.0])
    with pytest.raises(DataError, match="outside the public box"):
        mech.release([11.0])


def test_bounded_certificate_tampering_is_caught():
    data = dpopt.solve(CONTINUOUS_COMMITTEE).certificate.data
    params = data["mechanism"]["parameters"]
    wider = {**data, "mechanism": {**data["mechanism"], "parameters": {**params, "upper": [20.0]}}}
    failed = {c.claim for c in dpopt.verify(wider).failed}
    assert "mechanism.box" in failed
    smaller = {
        **data,
        "mechanism": {**data["mechanism"], "parameters": {**params, "scale": 0.8 * params["scale"]}},
    }
    assert "privacy" in {c.claim for c in dpopt.verify(smaller).failed}


# ------------------------------------------------------------------ the CLI, my specs
SPECS = ["survey_table_pdp_gg", "table_pdp_replace_gg", "committee_mean_truncated_gg"]
DATA = {
    "survey_table_pdp_gg": "survey.csv",
    "table_pdp_replace_gg": "survey.csv",
    "committee_mean_truncated_gg": "committee.csv",
}


@pytest.mark.parametrize("name", SPECS)
def test_specs_release_through_the_cli(name, tmp_path, capsys):
    spec = ROOT / "specs" / f"{name}.yaml"
    data = ROOT / "specs" / "data" / DATA[name]
    args = [
        "release",
        str(spec),
        "--data",
        str(data),
        "--seed",
        "1",
        "--insecure-seed",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    released = json.loads(Path(tmp_path / "release.json").read_text())
    assert released["mechanism"]["family"] == "generalized_gaussian"
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "certificate.json")]) == 0
    assert "certificate holds" in capsys.readouterr().out
    if released["guarantee"]["definition"] == "pdp":
        assert "NOT the (ε, δ)-DP guarantee" in released["guarantee"]["note"]
    else:
        assert 0.0 <= released["release"]["value"] <= 10.0  # bounded mechanism stays in the box
