"""Utility metrics of Table 1 computed from the MGF, each against Monte Carlo (fixed seeds,
tolerances of 4 standard errors unless derived otherwise)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from dpopt.noise.prior_metrics import (
    R2DPNoise,
    abs_moment_monte_carlo,
    kl_costs,
    kl_divergence,
    kl_divergence_monte_carlo,
    laplace_noise,
    mallows_distance,
    mallows_monte_carlo,
    renyi_bracket_costs,
    renyi_bracket_monte_carlo,
    renyi_divergence,
    usefulness,
    usefulness_monte_carlo,
)
from dpopt.noise.second_folds import DiscreteFold, GammaFold, SumFold, UniformFold
from dpopt.noise.staircase import StaircaseNoise

NOISES = {
    "laplace": laplace_noise(0.7),
    "bernoulli": R2DPNoise(DiscreteFold([0.3, 5.0], [0.4, 0.6])),
    "gamma": R2DPNoise(GammaFold(6.0, 0.5)),  # k > 4: E Z⁴ < ∞, so the MC of E Z² has a finite SE
    "sum": R2DPNoise(SumFold([GammaFold(5, 0.4), UniformFold(0.3, 2.0)])),
    "staircase": StaircaseNoise(1.5, 1.0, 0.35),
}
PRIOR = [120.0, 45.0, 9.0, 2.0, 0.4, 0.0]


def _within(estimate, value, k=4.0):
    return abs(estimate.value - value) <= k * estimate.standard_error + 1e-12 * abs(value)


@pytest.mark.parametrize("name", NOISES)
def test_usefulness_l1_l2(name):
    noise = NOISES[name]
    rng = np.random.default_rng(1)
    assert _within(usefulness_monte_carlo(noise, 0.4, 200_000, rng), usefulness(noise, 0.4))
    assert _within(abs_moment_monte_carlo(noise, 1.0, 200_000, rng), noise.abs_moment(1.0))
    assert _within(abs_moment_monte_carlo(noise, 2.0, 200_000, rng), noise.abs_moment(2.0))


def test_table_1_mgf_forms():
    # ℓ1 = ∫₀^∞ M(−x) dx and ℓ2² = 2 ∫₀^∞ x M(−x) dx (Table 1, de-garbled in the digest)
    fold = GammaFold(4.0, 0.8)
    l1 = integrate.quad(lambda x: float(fold.mgf(-x)), 0, np.inf)[0]
    l2 = 2 * integrate.quad(lambda x: x * float(fold.mgf(-x)), 0, np.inf)[0]
    assert fold.inverse_moment(1) == pytest.approx(l1, rel=1e-9)
    assert 2 * fold.inverse_moment(2) == pytest.approx(l2, rel=1e-9)
    # closed form for Gamma (digest §1.7): ℓ1 = 1/(θ(k − 1)), E[b²] = 1/(θ²(k − 1)(k − 2))
    assert fold.inverse_moment(1) == pytest.approx(1 / (0.8 * 3), rel=1e-13)
    assert fold.inverse_moment(2) == pytest.approx(1 / (0.64 * 3 * 2), rel=1e-13)


@pytest.mark.parametrize("name", NOISES)
def test_kl_against_monte_carlo(name):
    noise = NOISES[name]
    est = kl_divergence_monte_carlo(noise, PRIOR, 0.5, 100_000, np.random.default_rng(2))
    assert _within(est, kl_divergence(noise, PRIOR, 0.5))


@pytest.mark.parametrize("name", NOISES)
@pytest.mark.parametrize("order", [0.5, 2.0])
def test_renyi_against_monte_carlo(name, order):
    noise = NOISES[name]
    value = renyi_divergence(noise, PRIOR, 0.5, order)
    est = renyi_bracket_monte_carlo(noise, PRIOR, 0.5, order, 100_000, np.random.default_rng(3))
    assert _within(est, math.expm1((order - 1) * value))  # the bracket is e^{(α−1)D} − 1
    assert value >= 0  # the positive-measure form stays a divergence


def test_staircase_piecewise_and_generic_quadrature_agree():
    # the staircase integrates exactly by half-steps; the generic tail quadrature is a
    # different method on the same law
    class TailOnly:
        def __init__(self, noise):
            self.noise = noise
            self.typical_scale = noise.typical_scale

        def tail(self, x):
            return self.noise.tail(x)

        def abs_moment(self, p):
            return self.noise.abs_moment(p)

    noise, prior = StaircaseNoise(2.5, 1.0, 0.3), [40.0, 3.0, 0.2]
    assert kl_divergence(noise, prior, 0.5) == pytest.approx(kl_divergence(TailOnly(noise), prior, 0.5), rel=1e-7)
    assert renyi_divergence(noise, prior, 0.5, 2.0) == pytest.approx(
        renyi_divergence(TailOnly(noise), prior, 0.5, 2.0), rel=1e-7)


def test_lp_cost_vectors_match_adaptive_quadrature():
    rates = np.array([0.05, 0.4, 2.0, 30.0])
    kl = kl_costs(PRIOR, 0.5, rates)
    renyi = renyi_bracket_costs(PRIOR, 0.5, 2.0, rates)
    for t, a, b in zip(rates, kl, renyi):
        assert a == pytest.approx(kl_divergence(laplace_noise(1 / t), PRIOR, 0.5), rel=1e-6)
        assert math.log1p(b) == pytest.approx(renyi_divergence(laplace_noise(1 / t), PRIOR, 0.5, 2.0), rel=1e-6)


VALUES = [1, 1, 2, 3, 3, 3, 7, 10]  # a small degree sequence


def _w1_by_cdf(noise, values):
    """W1(μ, μ∗ν) = ∫ |F_μ − F_{μ∗ν}| ds: an independent formula (no quantiles)."""
    atoms, w = np.unique(values, return_counts=True)
    w = w / w.sum()

    def gap(s):
        mix = sum(wi * (float(noise.tail(a - s)) if s < a else 1 - float(noise.tail(s - a))) for a, wi in zip(atoms, w))
        return abs(mix - w[atoms <= s].sum())

    edges = [-np.inf, *atoms, np.inf]
    return sum(integrate.quad(gap, a, b, limit=200)[0] for a, b in zip(edges[:-1], edges[1:]))


@pytest.mark.parametrize("name", ["laplace", "bernoulli", "gamma"])
def test_mallows_w1(name):
    noise = NOISES[name]
    value = mallows_distance(noise, VALUES, 1.0)
    assert value == pytest.approx(_w1_by_cdf(noise, VALUES), rel=1e-7)
    # Monte Carlo: W1 between emp(x) (x repeated n/8 times, so emp(x) = μ exactly) and one noisy
    # release of it. |W1(μ, emp(y)) − W1(μ, μ∗ν)| ≤ W1(emp(y), μ∗ν), and E|F̂(s) − F(s)| ≤
    # sqrt(F(1−F)/n) for the stratified sample, so the gap is ≤ ∫ sqrt(F(1−F)/n) ds (Bobkov &
    # Ledoux 2019, Thm 3.5, for the i.i.d. case); tolerance: 4 times that bound.
    repeats = 25_000
    n = repeats * len(VALUES)
    atoms, w = np.unique(VALUES, return_counts=True)
    w = w / w.sum()

    def spread(s):
        f = sum(wi * (float(noise.tail(a - s)) if s < a else 1 - float(noise.tail(s - a))) for a, wi in zip(atoms, w))
        return math.sqrt(max(f * (1 - f), 0.0) / n)

    bound = integrate.quad(spread, -np.inf, np.inf, limit=400)[0]
    mc = mallows_monte_carlo(noise, VALUES, 1.0, repeats, np.random.default_rng(4))
    assert abs(mc - value) <= 4 * bound


def test_mallows_is_bracketed_by_the_paper_form():
    # W_p(μ, μ∗ν)^p ≤ E|Z|^p: the paper's printed Mallows (identity coupling) is an upper bound
    for noise, orders in ((NOISES["laplace"], (1.0, 2.0)), (NOISES["bernoulli"], (1.0, 2.0)), (NOISES["staircase"], (1.0,))):
        for p in orders:
            assert mallows_distance(noise, VALUES, p) ** p <= noise.abs_moment(p) * (1 + 1e-9)


def test_mallows_w2_against_quantile_integration():
    # W2² = ∫₀¹ |Q_μ(u) − Q_{μ∗ν}(u)|² du, with Q_{μ∗ν} by bisection on a fine u-grid
    noise = NOISES["laplace"]
    atoms, w = np.unique(VALUES, return_counts=True)
    w = w / w.sum()
    u = (np.arange(40_000) + 0.5) / 40_000

    def cdf(s):
        s = np.asarray(s)[..., None]
        return np.sum(w * np.where(s < atoms, noise.tail(np.abs(atoms - s)), 1 - noise.tail(np.abs(s - atoms))), axis=-1)

    lo, hi = np.full(u.shape, -60.0), np.full(u.shape, 70.0)
    for _ in range(48):  # 130 / 2^48: far below the tolerance
        mid = (lo + hi) / 2
        below = cdf(mid) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    q_mu = atoms[np.searchsorted(np.cumsum(w), u)]
    w2 = math.sqrt(np.mean((q_mu - (lo + hi) / 2) ** 2))
    # midpoint rule on 4·10⁴ cells: Q_μ jumps at the cumulative weights, an O(1/N) error
    assert mallows_distance(noise, VALUES, 2.0) == pytest.approx(w2, rel=1e-3)
