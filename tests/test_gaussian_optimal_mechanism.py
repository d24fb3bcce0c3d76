"""The ``gaussian_optimal`` family: certification independent of the solver, sampling,
certificates that `dpopt verify` re-checks, the spec options, and the workload example."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from conftest import ROOT, make_spec
from scipy import stats

import dpopt
from dpopt.design.select import design_candidates
from dpopt.errors import DpoptError, SpecError
from dpopt.mechanisms.gaussian_optimal import (
    GaussianOptimalMechanism,
    covariance_checks,
    mahalanobis_sensitivity,
)

WORKLOAD_SPEC = ROOT / "specs" / "age_cumulative_optimal_gdp.yaml"


def table(**overrides):
    """The continuous design (the exact measurement of the same Σ: tests/test_exact_strategy.py)."""
    return dpopt.compile(make_spec(mechanism="gaussian_optimal", **{"sampler": "floating_point", **overrides}))


def prefix_spec(d: int = 6, **overrides):
    """A d-bin histogram under replace-one whose utility is the error of its prefix sums."""
    return make_spec(
        data={"attributes": {"age": [f"a{i}" for i in range(d)]}, "n": 100},
        query={"kind": "histogram", "attribute": "age"},
        mechanism=["gaussian", "projected_gaussian", "gaussian_optimal"],
        utility={"metric": "l2", "workload": np.tril(np.ones((d, d))).tolist()},
        **{"sampler": "floating_point", **overrides},
    )


# ------------------------------------------------------------ certification
def test_certified_sensitivity_is_tight_and_within_the_target():
    for privacy in ({"gdp": {"mu": 0.8}}, {"zcdp": {"rho": 0.3}}, {"approx": {"epsilon": 0.5, "delta": 1e-6}}):
        problem = dpopt.compile(prefix_spec(privacy=privacy))
        spec, space = problem.spec, problem.space
        mech = GaussianOptimalMechanism.design(problem)
        checks = mech.privacy_checks(space, spec.privacy)
        assert [c.claim for c in checks] == ["covariance.range", "privacy"] and all(c.passed for c in checks)
        sens = mahalanobis_sensitivity(mech.covariance, space.vectors())
        target = mech.design_info["target_mu"]
        # the scale factor only absorbs rounding: μ_Σ is the target to ~1e-9
        assert math.sqrt(sens.upper) <= target and math.sqrt(sens.squared) >= target * (1 - 1e-9)
        assert abs(mech.design_info["scale_factor"] - 1.0) < 1e-6


def test_checks_reject_an_under_noised_or_misplaced_covariance():
    problem = table()
    spec, space = problem.spec, problem.space
    mech = GaussianOptimalMechanism.design(problem)
    vectors = space.vectors()
    under = covariance_checks(mech.covariance * 0.999, vectors, space, spec.privacy)
    assert [c.passed for c in under] == [True, False]
    # noise off the span (full rank): the range no longer equals span(S)
    off = covariance_checks(mech.covariance + 0.1 * np.ones((6, 6)), vectors, space, spec.privacy)
    assert not off[0].passed and not off[1].passed
    # a direction of the span left without noise: the generators leave range(Σ)
    w, q = np.linalg.eigh(mech.covariance)
    dropped = (q[:, 2:] * w[2:]) @ q[:, 2:].T
    short = covariance_checks(0.5 * (dropped + dropped.T), vectors, space, spec.privacy)
    assert not short[0].passed and not short[1].passed


def test_verify_rebuilds_the_covariance_and_catches_tampering(tmp_path):
    sol = dpopt.solve(prefix_spec())
    assert sol.mechanism.family == "gaussian_optimal"
    assert dpopt.verify(sol.certificate).passed
    data = copy.deepcopy(sol.certificate.data)
    data["mechanism"]["parameters"]["covariance"] = (
        np.asarray(data["mechanism"]["parameters"]["covariance"]) * 0.99
    ).tolist()
    result = dpopt.verify(data)
    assert not result.passed and "privacy" in {c.claim for c in result.failed}
    data["mechanism"]["parameters"]["covariance"] = [[1.0]]
    assert not dpopt.verify(data).passed


def test_verify_does_not_need_cvxpy(monkeypatch):
    """Rebuilding and re-checking Σ uses numpy only: make importing cvxpy fail."""
    import builtins

    sol = dpopt.solve(prefix_spec())
    real_import = builtins.__import__

    def no_cvxpy(name, *args, **kwargs):
        if name == "cvxpy" or name.startswith("cvxpy."):
            raise ImportError("cvxpy disabled for this test")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cvxpy)
    assert dpopt.verify(sol.certificate.data).passed


# ----------------------------------------------------------------- sampling
def test_samples_follow_the_covariance_and_keep_the_total():
    problem = table()
    mech = GaussianOptimalMechanism.design(problem)
    n = 100_000
    z = mech.sample(n, np.random.default_rng(2024))
    assert np.abs(z.sum(axis=1)).max() < 1e-9  # range(Σ) = sum-zero vectors: the total is exact
    sigma = mech.covariance
    # Var of the sample covariance entry (i, j) of Gaussian draws: (Σ_ii Σ_jj + Σ_ij²)/n; 5 SE
    se = np.sqrt((np.outer(np.diag(sigma), np.diag(sigma)) + sigma**2) / n)
    assert np.all(np.abs(z.T @ z / n - sigma) <= 5 * se)
    released = mech.release(np.arange(6.0) + 10, rng=np.random.default_rng(1))
    assert released.sum() == pytest.approx(75.0, abs=1e-9)


def test_power_and_region_volume_closed_forms():
    problem = table()
    mech = GaussianOptimalMechanism.design(problem)  # Σ = 2(I − J/6) at μ = 1
    eta = np.array([1.0, -1.0, 0, 0, 0, 0])
    # ηᵀΣ⁺η = ‖η‖²/2 = 1: power 1 − Φ(z_{0.95} − 1)
    assert mech._test_power(eta, 0.05) == pytest.approx(stats.norm.sf(stats.norm.isf(0.05) - 1.0), rel=1e-9)
    assert mech._test_power(np.ones(6), 0.05) == 1.0  # a shift of the total is released exactly
    # 1 − α ellipsoid on the 5-dim span: V_5 t^{5/2} √(2⁵), t = χ²_{5, 0.95}
    v5 = math.pi**2.5 / math.gamma(3.5)
    expected = v5 * stats.chi2.isf(0.05, 5) ** 2.5 * math.sqrt(2.0**5)
    assert math.exp(mech._log_ci_volume(0.05)) == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------- the spec
def test_unsupported_targets_and_metrics_give_a_reason():
    problem = table(privacy={"pure": {"epsilon": 1.0}})
    assert "gdp, zcdp and approx" in GaussianOptimalMechanism.supports(problem)
    problem = table(utility={"metric": "l1"})
    assert "not a convex function" in GaussianOptimalMechanism.supports(problem)
    candidates = design_candidates(dpopt.compile(make_spec(mechanism="gaussian_optimal",
                                                           utility={"metric": "usefulness", "gamma": 1.0})))
    assert candidates[0].reason is not None


def test_weights_option():
    with pytest.raises(SpecError, match="weights"):
        dpopt.load_spec(make_spec(utility={"metric": "l2", "weights": [1.0], "workload": [[1.0]]}))
    with pytest.raises(SpecError, match="weights"):
        dpopt.load_spec(make_spec(utility={"metric": "max_variance", "weights": [1.0]}))
    # the query's dimension is known after derivation: each family reports the mismatch
    with pytest.raises(DpoptError, match="utility.weights: has 2 entries"):
        dpopt.solve(make_spec(utility={"metric": "l2", "weights": [1.0, 2.0]}))
    weights = [4.0, 1.0, 1.0, 1.0, 1.0, 0.25]
    sol = dpopt.solve(make_spec(mechanism=["projected_gaussian", "gaussian_optimal"], sampler="floating_point",
                                utility={"metric": "l2", "weights": weights}))  # the continuous σ²P below
    by = {c.family: c for c in sol.candidates}
    # the projected Gaussian's weighted error: σ² Σ_i w_i P_ii with P_ii = 1 − 1/6, σ² = 2
    assert by["projected_gaussian"].utility.value == pytest.approx(2 * sum(weights) * 5 / 6, rel=1e-12)
    optimal = by["gaussian_optimal"]
    assert optimal.utility.value == pytest.approx(
        float(np.sum(np.asarray(weights) * np.diag(optimal.mechanism.covariance))), rel=1e-12
    )
    assert optimal.utility.value < by["projected_gaussian"].utility.value
    assert dpopt.verify(sol.certificate).passed


# ---------------------------------------------------- the workload example
def test_prefix_workload_gain_is_confirmed_by_monte_carlo():
    """The spec's claim — optimal Σ beats isotropic and projected noise on the prefix sums —
    checked on the released errors of each mechanism's own sampler."""
    sol = dpopt.solve(dpopt.load_spec(WORKLOAD_SPEC))
    assert sol.mechanism.family == "gaussian_optimal"
    w = np.asarray(sol.spec.utility.workload)
    mechanisms = {c.family: c.mechanism for c in sol.candidates}
    predicted = {c.family: c.utility.value for c in sol.candidates}
    # optimal ≤ projected ≤ isotropic: both baselines are feasible points of the program
    assert predicted["gaussian_optimal"] < predicted["projected_gaussian"] < predicted["gaussian"]
    info = sol.mechanism.design_info
    assert info["duality_gap"] < 1e-6  # certified near-optimal
    n = 40_000
    errors = {}
    for family, mech in mechanisms.items():
        z = mech.sample(n, np.random.default_rng(99))
        per = np.sum((z @ w.T) ** 2, axis=1)
        errors[family] = (per.mean(), per.std(ddof=1) / math.sqrt(n))
        # each mean agrees with its closed form within 5 standard errors
        assert abs(errors[family][0] - predicted[family]) <= 5 * errors[family][1]
    for baseline in ("gaussian", "projected_gaussian"):
        ratio = errors["gaussian_optimal"][0] / errors[baseline][0]
        # delta method: relative SE of a ratio of independent means
        rel_se = math.hypot(errors["gaussian_optimal"][1] / errors["gaussian_optimal"][0],
                            errors[baseline][1] / errors[baseline][0])
        assert ratio == pytest.approx(info[f"vs_{'isotropic' if baseline == 'gaussian' else 'projected'}"]["ratio"],
                                      rel=5 * rel_se)
