"""Private χ² tests by parametric bootstrap (Lee, Kim, Kwak & Jung 2022, Algorithms 2–3).

Level checks: under H0 the rejection rate over K independent repetitions has standard
error √(0.05·0.95/K) if the level is exact; a test passes when the rate is at most
0.05 + 3 SE (one-sided, 3 SE so that a run of several configurations stays reliable; the
paper's Fig. 9 draws 2 SE). The default run uses K = 300 and B = 300; the paper's sizes
(K = 1000, B up to 5000) are marked slow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.mechanisms.gaussian import GaussianMechanism, ProjectedGaussianMechanism
from dpopt.mechanisms.james_stein import JamesSteinMechanism
from dpopt.mechanisms.laplace import LaplaceMechanism
from dpopt.postprocess.chi2 import (
    bootstrap_gof,
    bootstrap_homogeneity,
    chi2_statistic,
    privatizer,
    simulate_rejection_rate,
)
from dpopt.privacy.laplace_gdp import contingency_laplace_scale

P = 9
PI0 = np.arange(1, P + 1) / 45.0     # "Model II" of Sec. 4.2.2 (π_i ∝ i)
UNIFORM = np.full(P, 1.0 / P)        # "Model I"


def _level_bound(k: int) -> float:
    return 0.05 + 3 * math.sqrt(0.05 * 0.95 / k)


def _mechanisms(mu: float, p: int = P) -> dict:
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": [f"c{i}" for i in range(p)]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "replace_one",
            "privacy": {"gdp": {"mu": mu}}}
    space = dpopt.derive(dpopt.load_spec(spec))
    sigma = math.sqrt(2) / mu
    return {
        "G": GaussianMechanism(sigma, p),
        "r": ProjectedGaussianMechanism(sigma, space),
        "JS": JamesSteinMechanism(sigma, space, "mean"),
        "rJS": JamesSteinMechanism(sigma, space, "rotated"),
        "Lap": LaplaceMechanism(contingency_laplace_scale(mu), p),
    }


def _gof_rate(mechanism, n, pi, k, b, seed):
    release = privatizer(mechanism, truncate=True)

    def test(rng):
        theta = rng.multinomial(n, pi).astype(float)
        return bootstrap_gof(release(theta[None], rng)[0], PI0, release, replicates=b, rng=rng)

    return simulate_rejection_rate(test, k, np.random.default_rng(seed))


def _hom_rate(mechanism, sizes, pis, k, b, seed):
    release = privatizer(mechanism, truncate=True)

    def test(rng):
        rows = np.stack([rng.multinomial(n, pi) for n, pi in zip(sizes, pis)]).astype(float)
        return bootstrap_homogeneity(release(rows, rng), release, replicates=b, rng=rng)

    return simulate_rejection_rate(test, k, np.random.default_rng(seed))


def test_statistic_conventions():
    # Pearson's statistic against scipy; 0/0 = 0 (Sec. 4.3); E ≤ 0 with O ≠ E is +∞
    obs, exp = np.array([10.0, 20.0, 30.0]), np.array([15.0, 20.0, 25.0])
    assert chi2_statistic(obs, exp) == pytest.approx(stats.chisquare(obs, exp).statistic)
    assert chi2_statistic(np.array([0.0, 5.0]), np.array([0.0, 5.0])) == 0.0
    assert chi2_statistic(np.array([1.0, 5.0]), np.array([0.0, 6.0])) == math.inf
    np.testing.assert_allclose(chi2_statistic(np.vstack([obs, exp]), exp), [stats.chisquare(obs, exp).statistic, 0.0])


def test_without_noise_the_bootstrap_is_pearsons_test():
    # With negligible noise the bootstrap null law is the multinomial law of Pearson's
    # statistic, whose χ²_{p−1} approximation gives the classical p-value (N = 3000 cells
    # of expected count ≥ 66). Tolerance: 4 binomial SE of the bootstrap p-value + 0.01
    # for the χ² approximation.
    rng = np.random.default_rng(8)
    theta = rng.multinomial(3000, 0.97 * PI0 + 0.03 * UNIFORM).astype(float)
    exact = privatizer(GaussianMechanism(1e-9, P))
    result = bootstrap_gof(theta, PI0, exact, replicates=4000, rng=rng)
    classical = stats.chisquare(theta, 3000 * PI0).pvalue
    assert abs(result.p_value - classical) < 4 * math.sqrt(classical * (1 - classical) / 4000) + 0.01
    assert result.sizes == (3000,) and result.statistic == pytest.approx(stats.chisquare(theta, 3000 * PI0).statistic)


@pytest.mark.parametrize("name", ["G", "r", "rJS", "Lap"])
def test_gof_holds_its_level_small(name):
    rate = _gof_rate(_mechanisms(0.3)[name], n=200, pi=PI0, k=300, b=300, seed=2026)
    assert rate.rate <= _level_bound(300)


def test_gof_power_and_laplace_is_weakest():
    # H1: uniform data tested against π0 ∝ i. Sec. 4.4 / Fig. 10: Laplace has the lowest
    # power; allowed slack 3 SE of the difference of two rates.
    mechs = _mechanisms(0.3)
    rjs = _gof_rate(mechs["rJS"], n=200, pi=UNIFORM, k=300, b=300, seed=7)
    lap = _gof_rate(mechs["Lap"], n=200, pi=UNIFORM, k=300, b=300, seed=7)
    assert rjs.rate > 0.8
    assert lap.rate <= rjs.rate + 3 * math.hypot(lap.se, rjs.se)


@pytest.mark.parametrize("name", ["r", "Lap"])
def test_homogeneity_holds_its_level_small(name):
    rate = _hom_rate(_mechanisms(0.3)[name], sizes=(300, 400), pis=(PI0, PI0), k=200, b=200, seed=2027)
    assert rate.rate <= _level_bound(200)


def test_homogeneity_detects_a_difference():
    rate = _hom_rate(_mechanisms(0.3)["rJS"], sizes=(300, 400), pis=(PI0, UNIFORM), k=100, b=200, seed=5)
    assert rate.rate > 0.8


def test_bad_inputs():
    release = privatizer(GaussianMechanism(1.0, 3))
    with pytest.raises(ValueError, match="no bootstrap"):
        bootstrap_gof(np.array([-5.0, 1.0, 1.0]), np.full(3, 1 / 3), release)
    with pytest.raises(ValueError, match="pi0"):
        bootstrap_gof(np.array([5.0, 1.0, 1.0]), np.array([0.5, 0.5, 0.0]), release)
    with pytest.raises(ValueError, match="two tables"):
        bootstrap_homogeneity(np.array([[5.0, 1.0, 1.0]]), release)
    with pytest.raises(ValueError, match="negative"):
        bootstrap_homogeneity(np.array([[5.0, -4.0, 1.0], [5.0, -4.0, 1.0]]), release)


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.1, 0.3])
@pytest.mark.parametrize("name", ["G", "r", "JS", "rJS", "Lap"])
def test_gof_holds_its_level_full(mu, name):
    # Fig. 9 setting: K = 1000 repetitions (B = 2000 here, the paper uses 5000), N = 500
    rate = _gof_rate(_mechanisms(mu)[name], n=500, pi=PI0, k=1000, b=2000, seed=11)
    assert rate.rate <= _level_bound(1000)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["G", "r", "JS", "rJS", "Lap"])
def test_homogeneity_holds_its_level_full(name):
    # Fig. 11 setting at μ = 0.3, two tables of 500 and 1000 records, K = 1000, B = 1000
    rate = _hom_rate(_mechanisms(0.3)[name], sizes=(500, 1000), pis=(PI0, PI0), k=1000, b=1000, seed=12)
    assert rate.rate <= _level_bound(1000)
