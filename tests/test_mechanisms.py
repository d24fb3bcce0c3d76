"""Gaussian, projected Gaussian and Laplace: calibration, sampling laws, closed-form utilities.

Statistical tolerances are 4 standard errors of the estimator, derived in each test.
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from conftest import make_spec
from scipy import special

import dpopt
from dpopt.mechanisms.gaussian import GaussianMechanism, ProjectedGaussianMechanism
from dpopt.mechanisms.laplace import LaplaceMechanism

N = 200_000


def _solve(**overrides):
    return dpopt.solve(make_spec(**overrides))


def test_gdp_sigma_is_l2_over_mu():
    # 3x2 table under replace-one: Delta_2 = sqrt(2), so sigma = sqrt(2)/mu (Dong, Roth & Su Thm 2.7).
    sol = _solve(privacy={"gdp": {"mu": 0.5}}, mechanism="gaussian")
    assert sol.mechanism.sigma == pytest.approx(math.sqrt(2) / 0.5, rel=1e-15)


def test_zcdp_sigma():
    # rho-zCDP Gaussian: Delta^2 / (2 sigma^2) = rho (Bun & Steinke Prop. 1.6).
    sol = _solve(privacy={"zcdp": {"rho": 0.125}}, mechanism="gaussian")
    assert sol.mechanism.sigma == pytest.approx(math.sqrt(2) / math.sqrt(0.25), rel=1e-15)


def test_laplace_scale_is_l1_over_eps():
    sol = _solve(privacy={"pure": {"epsilon": 0.5}}, mechanism="laplace")
    assert sol.mechanism.scale == pytest.approx(4.0, rel=1e-15)


def test_projected_gaussian_wins_on_rank_deficient_space():
    # E||Z||^2 = sigma^2 * rank = 5 sigma^2 < 6 sigma^2 for the isotropic Gaussian (Lee et al. Thm 2): the
    # continuous designs (on the lattice the isotropic count pays Var N_Z and the slope, not the paper's σ²)
    sol = _solve(sampler="floating_point")
    assert sol.mechanism.family == "projected_gaussian"
    values = {c.family: c.utility.value for c in sol.candidates if c.feasible}
    assert values["projected_gaussian"] / values["gaussian"] == pytest.approx(5 / 6, rel=1e-12)


def test_gaussian_sample_law():
    mech = GaussianMechanism(sigma=2.0, dimension=3)
    z = mech.sample(N, np.random.default_rng(1))
    assert z.shape == (N, 3)
    # Var of the sample variance of N(0, s^2): 2 s^4 / (N - 1); tolerance 4 standard errors.
    se = math.sqrt(2 * 16 / (N - 1))
    assert np.all(np.abs(z.var(axis=0) - 4.0) < 4 * se)


def test_projected_gaussian_covariance_is_sigma2_p():
    space = dpopt.derive(dpopt.load_spec(make_spec()))
    mech = ProjectedGaussianMechanism(1.5, space)
    z = mech.sample(N, np.random.default_rng(2))
    assert np.abs(z.sum(axis=1)).max() < 1e-9  # noise lies in the sum-zero span
    d, s2 = 6, 1.5**2
    target = s2 * (np.eye(d) - 1.0 / d)
    cov = z.T @ z / N
    # SE of a covariance entry of a Gaussian vector: sqrt((S_ii S_jj + S_ij^2) / N).
    se = np.sqrt((np.outer(np.diag(target), np.diag(target)) + target**2) / N)
    assert np.all(np.abs(cov - target) < 4 * se)


def test_laplace_sample_law():
    mech = LaplaceMechanism(scale=3.0, dimension=2)
    z = mech.sample(N, np.random.default_rng(3))
    # |X| ~ Exponential(mean b): mean b, standard deviation b.
    assert np.all(np.abs(np.abs(z).mean(axis=0) - 3.0) < 4 * 3.0 / math.sqrt(N))


def test_release_adds_the_sampled_noise():
    sol = _solve()
    truth = np.arange(6.0)
    released = sol.mechanism.release(truth, rng=np.random.default_rng(5))
    noise = sol.mechanism.sample(1, rng=np.random.default_rng(5))[0]
    # the exact measurement (gaussian_optimal by an integer strategy) releases x + Rη as (I − P)x + R(y − M(I − P)x):
    # the same numbers up to double rounding of a few units in the last place
    np.testing.assert_allclose(released, truth + noise, rtol=0, atol=1e-12)
    with pytest.raises(ValueError):
        sol.mechanism.release(np.zeros(5))


MECHANISMS = {
    "gaussian": lambda space: GaussianMechanism(1.7, 6),
    "projected": lambda space: ProjectedGaussianMechanism(1.7, space),
    "laplace": lambda space: LaplaceMechanism(1.3, 6),
}
METRICS = [
    {"metric": "l2"},
    {"metric": "l2", "workload": [[1, 1, 0, 0, 0, 0], [0, 0, 1, -1, 2, 0]]},
    {"metric": "l1"},
    {"metric": "usefulness", "gamma": 1.0},
    {"metric": "max_variance"},
]


@pytest.mark.parametrize("name", MECHANISMS)
@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m["metric"] + ("_W" if "workload" in m else ""))
def test_closed_form_utility_matches_monte_carlo(name, metric):
    space = dpopt.derive(dpopt.load_spec(make_spec()))
    mech = MECHANISMS[name](space)
    utility = dpopt.load_spec(make_spec(utility=metric)).utility
    closed = mech.expected_utility(utility)
    assert closed.method == "closed form"
    mc = mech._monte_carlo(utility.metric, None if utility.workload is None else np.array(utility.workload),
                           utility.gamma)
    if mc.ci is None:  # max variance: sample variance, SE sqrt(2/N) relative for Gaussian, more for Laplace
        assert mc.value == pytest.approx(closed.value, rel=8 * math.sqrt(2 / 200_000) * 2)
    else:
        half = (mc.ci[1] - mc.ci[0]) / 2  # 1.96 SE
        assert abs(mc.value - closed.value) < 4 * half / 1.96


def test_usefulness_closed_forms():
    # P(|N(0, s^2)| <= g) = erf(g / (s sqrt 2)); P(|Lap(b)| <= g) = 1 - exp(-g/b).
    g = dpopt.load_spec(make_spec(utility={"metric": "usefulness", "gamma": 2.0})).utility
    assert GaussianMechanism(1.0, 1).expected_utility(g).value == pytest.approx(special.erf(2 / math.sqrt(2)))
    assert LaplaceMechanism(1.0, 1).expected_utility(g).value == pytest.approx(1 - math.exp(-2))


def test_no_family_meets_target_is_a_clear_error():
    with pytest.raises(dpopt.CalibrationError, match="gaussian: gaussian cannot meet a pure target"):
        _solve(privacy={"pure": {"epsilon": 1.0}}, mechanism="gaussian")


def test_unavailable_family_is_named(monkeypatch):
    # A family the spec format reserves but this installation does not register is named.
    select = importlib.import_module("dpopt.design.select")  # the package re-exports a function of the same name
    available = {k: v for k, v in dpopt.registry().items() if k != "r2dp"}
    monkeypatch.setattr(select, "registry", lambda: available)
    with pytest.raises(dpopt.UnsupportedSpecError, match="'r2dp' is not available"):
        _solve(mechanism="r2dp")


EXTREME_TARGETS = [
    # about 17 s: the discrete Gaussian's 80-digit δ series at σ ≈ 10⁴ (≈ 10⁵ terms per tail sum)
    pytest.param({"approx": {"epsilon": 1e-3, "delta": 1e-15}}, marks=pytest.mark.slow),
    {"approx": {"epsilon": 50.0, "delta": 0.5}},
    {"approx": {"epsilon": 50.0, "delta": 1e-15}},
    {"gdp": {"mu": 1e-3}},
    {"gdp": {"mu": 20.0}},
    {"zcdp": {"rho": 1e-6}},
    {"pure": {"epsilon": 1e-3}},
    {"pure": {"epsilon": 50.0}},
]


@pytest.mark.parametrize("privacy", EXTREME_TARGETS, ids=lambda p: str(p))
def test_extreme_targets_solve_and_verify(privacy):
    sol = _solve(privacy=privacy)
    assert sol.certificate.passed and dpopt.verify(sol.certificate).passed
