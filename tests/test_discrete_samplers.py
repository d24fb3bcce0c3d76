"""The exact discrete samplers (Canonne, Kamath & Steinke 2020, Algorithms 1-3) draw their laws.

Every expected law is written down independently of the samplers:
* Bernoulli(exp(-γ)): the probability e^{-γ};
* discrete Laplace of scale b: P[Y = y] = (1 - r)/(1 + r) r^{|y|}, r = e^{-1/b};
* discrete Gaussian N_Z(0, σ²): P[Y = y] ∝ e^{-y²/(2σ²)}, normalised by direct summation.
Tolerances are derived: a binomial proportion is allowed 5 standard errors
(P(|Z| > 5) ≈ 6e-7), a chi-square goodness-of-fit statistic its 1 - 1e-6 quantile. Fixed seeds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.discrete_laplace import bernoulli_exp, sample_discrete_laplace

N = 200_000
CHI2_LEVEL = 1e-6


def _chi_square_passes(draws: np.ndarray, pmf) -> tuple[bool, float, float]:
    """Chi-square goodness of fit, cells with expected count ≥ 5 kept, the rest pooled in one tail cell."""
    lo, hi = int(draws.min()), int(draws.max())
    support = np.arange(lo - 50, hi + 51)
    p = np.array([pmf(int(y)) for y in support])
    expected = p * draws.size
    keep = expected >= 5
    observed = np.array([np.count_nonzero(draws == y) for y in support[keep]])
    obs = np.append(observed, draws.size - observed.sum())
    exp = np.append(expected[keep], draws.size - expected[keep].sum())
    if exp[-1] < 5:  # nothing left to pool: drop the empty tail cell
        obs, exp = obs[:-1], exp[:-1]
    statistic = float(np.sum((obs - exp) ** 2 / exp))
    threshold = float(stats.chi2.isf(CHI2_LEVEL, df=len(obs) - 1))
    return statistic <= threshold, statistic, threshold


@pytest.mark.parametrize("num,den", [(0, 1), (3, 10), (1, 1), (5, 2), (7, 3)])
def test_bernoulli_exp_has_probability_e_to_minus_gamma(num, den):
    rng = np.random.default_rng(11)
    draws = bernoulli_exp(rng, np.full(N, num, dtype=np.int64), den)
    p = math.exp(-num / den)
    se = math.sqrt(p * (1 - p) / N)
    assert abs(draws.mean() - p) <= 5 * se + 1e-15


@pytest.mark.parametrize("t,s", [(1, 1), (7, 2), (1, 4), (1000, 3)])
def test_discrete_laplace_matches_its_pmf(t, s):
    rng = np.random.default_rng(12)
    draws = sample_discrete_laplace(rng, t, s, N)
    r = math.exp(-s / t)  # scale b = t/s

    def pmf(y: int) -> float:
        return (1 - r) / (1 + r) * r ** abs(y)

    ok, statistic, threshold = _chi_square_passes(draws, pmf)
    assert ok, f"chi-square {statistic:.1f} above its 1e-6 quantile {threshold:.1f}"
    # symmetry: P[Y > 0] = P[Y < 0]; difference of two proportions, 5 standard errors
    pos, neg = np.mean(draws > 0), np.mean(draws < 0)
    assert abs(pos - neg) <= 5 * math.sqrt((pos + neg) / N)


def _discrete_gaussian_pmf(sigma2: float):
    top = int(40 * math.sqrt(sigma2)) + 10
    ys = np.arange(-top, top + 1)
    weights = np.exp(-(ys.astype(float) ** 2) / (2 * sigma2))
    z = weights.sum()
    return lambda y: math.exp(-y * y / (2 * sigma2)) / z


@pytest.mark.parametrize("p,q", [(1, 4), (1, 1), (3, 2), (100 * 2**20, 2**20),
                                 pytest.param(5_000_000, 1, marks=pytest.mark.slow)])
def test_discrete_gaussian_matches_its_pmf(p, q):
    rng = np.random.default_rng(13)
    draws = sample_discrete_gaussian(rng, p, q, N)
    sigma2 = p / q
    ok, statistic, threshold = _chi_square_passes(draws, _discrete_gaussian_pmf(sigma2))
    assert ok, f"chi-square {statistic:.1f} above its 1e-6 quantile {threshold:.1f}"


def test_discrete_gaussian_variance_within_five_standard_errors():
    # Var of the sample second moment is (E Y^4 - (E Y^2)^2)/N; E Y^4 ≈ 3σ^4 for σ ≥ 1 (Poisson summation).
    rng = np.random.default_rng(14)
    sigma2 = 9.0
    draws = sample_discrete_gaussian(rng, 9, 1, N).astype(float)
    se = math.sqrt(2 * sigma2**2 / N)
    assert abs(np.mean(draws**2) - sigma2) <= 5 * se


def test_tiny_sigma_takes_the_exact_python_integer_path_and_is_all_zero():
    # σ² = 2^-10: P[Y ≠ 0] ≤ 2 e^{-512}; proposals |Y| ≥ 3 of the Laplace(1) step exceed the int64-safe
    # bound 2^31 // (t q) = 2 and are evaluated with Python integers.
    rng = np.random.default_rng(15)
    assert not np.any(sample_discrete_gaussian(rng, 2**20, 2**30, 20_000))


def test_samplers_are_reproducible_from_the_generator_state():
    a = sample_discrete_gaussian(np.random.default_rng(5), 3, 2, 1000)
    b = sample_discrete_gaussian(np.random.default_rng(5), 3, 2, 1000)
    assert np.array_equal(a, b) and a.dtype == np.int64


def test_parameters_outside_the_samplers_range_are_refused():
    """The discrete Laplace needs t, s < 2^62; the discrete Gaussian serves σ² up to 2^60 (beyond int64 by its wide
    round, p < 2^61: tests/test_wide_discrete_gaussian.py), not 2^61."""
    with pytest.raises(ValueError):
        sample_discrete_laplace(np.random.default_rng(0), 2**62, 1, 10)
    with pytest.raises(ValueError):
        sample_discrete_gaussian(np.random.default_rng(0), 2**61, 1, 10)


@pytest.mark.parametrize(
    "x", [Fraction(1, 10), Fraction(3), Fraction(10**9), Fraction(1, 3), Fraction(2**-25)]
)
def test_dyadic_ceil_rounds_up_to_a_dyadic_with_about_twenty_bits(x):
    y = dyadic_ceil(x)
    q = y.denominator
    assert y >= x and q & (q - 1) == 0 and q <= 2**30
    assert y - x < Fraction(1, q)  # the smallest multiple of 1/q at or above x
    assert y.numerator < 2**22 or q == 1
