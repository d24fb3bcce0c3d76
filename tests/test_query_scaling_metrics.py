"""The utility metrics ``ci_volume`` and ``test_power``: spec fields, Gaussian closed forms, inference.

Oracles: hand-derived closed forms (V_r t^{r/2} σ^r; 1 − Φ(z − ‖η‖/σ)), the χ² law of a
Gaussian quadratic form (coverage), and seeded Monte Carlo with derived tolerances.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_spec
from scipy import special, stats

import dpopt
from dpopt.cli import main
from dpopt.mechanisms.gaussian import GaussianMechanism, ProjectedGaussianMechanism
from dpopt.stats import inference

Z95 = special.ndtri(0.95)


# ------------------------------------------------------------------ spec
def test_alpha_defaults_to_five_percent_and_is_recorded():
    spec = dpopt.load_spec(make_spec(utility="ci_volume"))
    assert spec.utility.alpha == 0.05
    assert dpopt.solve(spec).certificate["spec"]["utility"]["alpha"] == 0.05


@pytest.mark.parametrize(
    "utility, message",
    [
        ({"metric": "test_power"}, "needs alternative"),
        ({"metric": "test_power", "alternative": [0, 0, 0, 0, 0, 0]}, "differ from the null"),
        ({"metric": "l2", "alternative": [1, 0, 0, 0, 0, 0]}, "test_power' only"),
        ({"metric": "l2", "alpha": 0.1}, "alpha goes with"),
        ({"metric": "ci_volume", "alpha": 1.5}, "alpha"),
        ({"metric": "test_power", "alternative": [1, "x"]}, "alternative"),
    ],
)
def test_bad_utility_options_are_one_clear_error(utility, message, tmp_path, capsys):
    with pytest.raises(dpopt.SpecError, match=message):
        dpopt.load_spec(make_spec(utility=utility))
    path = tmp_path / "bad.json"
    path.write_text(__import__("json").dumps(make_spec(utility=utility)))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpopt: error: utility")


def test_alternative_of_the_wrong_length_names_the_field():
    spec = dpopt.load_spec(make_spec(utility={"metric": "test_power", "alternative": [1.0, 2.0]}))
    mech = GaussianMechanism(1.0, 6)
    with pytest.raises(dpopt.SpecError, match="utility.alternative"):
        mech.expected_utility(spec.utility)


# ------------------------------------------------- Gaussian closed forms
def test_gaussian_ci_volume_is_measured_on_the_sensitivity_span():
    # 3×2 table, replace-one: span = sum-zero (rank 5). Isotropic and projected noise give the same
    # region for the protected component: V_5 t^{5/2} σ^5 with t = χ²_{5,0.95}, V_5 = 8π²/15. Both families
    # measure the 6 counts exactly (the lattice's region: test_lattice_span_regions), and state this continuous
    # region as the reference of their cost of exactness.
    spec = dpopt.load_spec(make_spec(utility={"metric": "ci_volume", "alpha": 0.1}))
    sol = dpopt.solve(spec)
    by = {c.family: c for c in sol.candidates if c.feasible}
    sigma = by["gaussian"].mechanism.sigma
    t = stats.chi2.isf(0.1, 5)
    expected = 8 * math.pi**2 / 15 * t**2.5 * sigma**5
    for family in ("gaussian", "projected_gaussian"):
        mechanism = by[family].mechanism
        assert math.exp(mechanism._log_ci_volume(0.1)) == pytest.approx(expected, rel=1e-12)
        assert mechanism.span_cost["continuous"] == pytest.approx(expected, rel=1e-12)
        assert mechanism.span_cost["exact"] == by[family].utility.value
    assert sol.certificate.passed and dpopt.verify(sol.certificate).passed


def test_gaussian_test_power_closed_forms():
    # the continuous closed forms: the floating-point sampler (the lattice's test: test_lattice_inference)
    problem = dpopt.compile(make_spec(utility={"metric": "test_power", "alternative": [3, -3, 0, 0, 0, 0]},
                                      sampler="floating_point"))
    spec = problem.spec
    iso = GaussianMechanism.design(problem)
    proj = ProjectedGaussianMechanism.design(problem)
    power = special.ndtr(math.sqrt(18.0) / iso.sigma - Z95)
    assert iso.expected_utility(spec.utility).value == pytest.approx(power, rel=1e-12)
    assert proj.expected_utility(spec.utility).value == pytest.approx(power, rel=1e-12)
    # a shift that changes the table's total is off the span: projected noise releases it exactly
    off = dpopt.load_spec(make_spec(utility={"metric": "test_power", "alternative": [3, 0, 0, 0, 0, 0]}))
    assert proj.expected_utility(off.utility).value == 1.0
    assert iso.expected_utility(off.utility).value == pytest.approx(
        special.ndtr(3.0 / iso.sigma - Z95), rel=1e-12
    )


@pytest.mark.parametrize(
    "utility", [{"metric": "ci_volume"}, {"metric": "test_power", "alternative": [2, 1, -1, 0, 0, -2]}]
)
def test_closed_forms_agree_with_monte_carlo_of_the_sampler(utility):
    # the base's Monte Carlo (importance weights for the volume, LR rejections for the power) on
    # 200,000 draws must cover the closed form within 4 of its standard errors
    problem = dpopt.compile(make_spec(utility=utility, privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}))
    spec = problem.spec
    for cls in (GaussianMechanism, ProjectedGaussianMechanism):
        mech = cls.design(problem)
        closed = mech.expected_utility(spec.utility)
        alt = None if spec.utility.alternative is None else np.asarray(spec.utility.alternative)
        mc = mech._monte_carlo(spec.utility.metric, None, None, alpha=spec.utility.alpha, alternative=alt)
        se = (mc.ci[1] - mc.ci[0]) / (2 * 1.96)
        assert abs(mc.value - closed.value) <= 4 * se, cls.family


def test_families_without_a_prediction_are_excluded_with_a_reason():
    sol = dpopt.solve(make_spec(utility="ci_volume", privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}))
    laplace = next(c for c in sol.candidates if c.family == "laplace")
    assert not laplace.feasible and "ci_volume" in laplace.reason


# ------------------------------------------------------------ inference
def test_confidence_region_volume_and_membership():
    cov = np.diag([4.0, 1.0, 0.0])  # third coordinate exact
    region = inference.confidence_region([1.0, 2.0, 3.0], cov, 0.05)
    assert region.rank == 2
    assert region.volume == pytest.approx(math.pi * stats.chi2.isf(0.05, 2) * 2.0, rel=1e-12)
    assert region.contains([1.0, 2.0, 3.0]) and not region.contains([1.0, 2.0, 3.1])
    r = math.sqrt(stats.chi2.isf(0.05, 2))
    assert region.contains([1.0 + 0.999 * 2 * r, 2.0, 3.0]) and not region.contains(
        [1.0 + 1.001 * 2 * r, 2.0, 3.0]
    )
    with pytest.raises(ValueError, match="not released"):
        inference.confidence_region([1.0, np.nan, 3.0], cov)


def test_confidence_region_on_a_span_matches_the_projected_volume():
    # isotropic noise σ²I in R^3 viewed on the sum-zero plane: a 2-d disc of radius σ√t
    basis = np.linalg.qr(np.array([[1.0, 0.0], [-1.0, 1.0], [0.0, -1.0]]))[0]
    region = inference.confidence_region([0.0, 0.0, 0.0], 9.0 * np.eye(3), 0.05, span=basis)
    assert region.rank == 2 and region.volume == pytest.approx(
        math.pi * 9.0 * stats.chi2.isf(0.05, 2), rel=1e-12
    )


def test_likelihood_ratio_test_size_and_power_by_simulation():
    # 4,000 releases per hypothesis from N(θ, C) with a correlated C, each through the public
    # test; tolerance 4 SE of a proportion
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    null, alt = np.zeros(3), np.array([1.0, -0.5, 2.0])
    expected = inference.gaussian_test_power(cov, alt - null, 0.05)
    lam = math.sqrt(float(alt @ np.linalg.solve(cov, alt)))
    assert expected == pytest.approx(special.ndtr(lam - Z95), rel=1e-12)
    n = 4_000
    chol = np.linalg.cholesky(cov)
    for mean, target in ((null, 0.05), (alt, expected)):
        draws = mean + rng.normal(size=(n, 3)) @ chol.T
        rate = np.mean([inference.likelihood_ratio_test(m, cov, null, alt).reject for m in draws])
        assert abs(rate - target) <= 4 * math.sqrt(target * (1 - target) / n)


def test_likelihood_ratio_test_with_an_exact_component_and_unreleased_coordinates():
    cov = np.diag([1.0, 0.0, np.inf])
    test = inference.likelihood_ratio_test([0.1, 1.0, np.nan], cov, [0.0, 0.0, 0.0], [0.0, 1.0, 5.0])
    assert test.reject and test.power == 1.0 and math.isinf(test.noncentrality)
    test = inference.likelihood_ratio_test([0.1, 0.0, np.nan], cov, [0.0, 0.0, 0.0], [0.0, 1.0, 5.0])
    assert not test.reject
    with pytest.raises(ValueError, match="equals the null"):
        inference.likelihood_ratio_test([0.1, 0.0, np.nan], cov, [0.0, 0.0, 0.0], [0.0, 0.0, 5.0])


def test_a_volume_beyond_floating_point_is_stated_by_its_logarithm():
    # 299 noisy dimensions (the sum-zero span) at ε = 0.1: log-volume = log V_299 + 299·log(σ√t) ≫ 709 (the
    # largest double's log); once refused, now stated as log_value, value null (the exact sampler's region on this
    # span: tests/test_log_volume.py and the lattice span regions' tests)
    spec = make_spec(
        data={"attributes": {"a": [str(i) for i in range(300)]}},
        query={"kind": "histogram", "attribute": "a"},
        utility="ci_volume",
        privacy={"approx": {"epsilon": 0.1, "delta": 1e-6}},
        mechanism="gaussian",
        sampler="floating_point",
    )
    cert = dpopt.solve(spec).certificate
    sigma, t = cert["mechanism"]["parameters"]["sigma"], stats.chi2.isf(0.05, 299)
    expected = 149.5 * math.log(math.pi) - special.gammaln(150.5) + 299 * math.log(sigma * math.sqrt(t))
    assert expected > 709.8
    assert cert["utility"]["value"] is None
    assert cert["utility"]["log_value"] == pytest.approx(expected, rel=1e-12)
