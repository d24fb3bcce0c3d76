"""The discrete Gaussian sampler at large σ² (up to 2^60): its Python-integer Bernoulli(exp(−num/den)) and its fit.

**Enumeration** (the method of ``test_exact_sampler_law``): the Python-integer Bernoulli(num/den) built from limbs
and Bernoulli(exp(−num/den)) of Python integers (the envelope's tail acceptance, ``dpopt.noise.discrete_gaussian``),
each output's exact probability bracketed against its closed form (mpmath).

**Goodness of fit at σ² ≈ 2^40 and 2^56**: the G-test of ``test_exact_sampler_law`` on 500,000 draws in bins σ/10
wide. The bins' masses are normal-cdf differences at half-integer edges: by Poisson summation the normaliser is
σ√(2π)(1 + 2e^{−2π²σ²} + …), and by Euler–Maclaurin (midpoint rule) Σ_{k<b} e^{−k²/2σ²} differs from
∫_{−∞}^{b−½} e^{−x²/2σ²} dx by at most sup|f'|/24 ≈ 0.6/(24σ) on the unnormalised scale, i.e. below 10⁻⁷/σ² ≤ 10⁻¹⁸
of probability per edge here — far below the 1/√N ≈ 10⁻³ the test resolves.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats
from test_exact_sampler_law import (
    _g_test,
    assert_bracketed,
    component_laws,  # noqa: F401  (a fixture)
    enumerate_law,
)

from dpopt.noise import discrete_gaussian
from dpopt.noise.discrete_gaussian import (
    MAX_WIDE_SIGMA2,
    _bernoulli_exp_fraction,
    _bernoulli_fraction,
    sample_discrete_gaussian,
)


@pytest.fixture
def fraction_law(monkeypatch):
    """Bernoulli(num/den) of Python integers drawn as two branches (its limbs are enumerated below); counts calls."""
    calls = []

    def bernoulli(rng, num, den):
        calls.append(den)
        p = mpmath.mpf(num) / den
        return bool(rng.law([(1, p), (0, 1 - p)], mpmath.mpf(0), 1)[0] == 1)

    monkeypatch.setattr(discrete_gaussian, "_bernoulli_fraction", bernoulli)
    return calls


@pytest.mark.parametrize("num,den,bits", [(3, 5, 2), (1, 3, 1), (4, 5, 1)])
def test_uniform_integer_over_limbs_is_exact(monkeypatch, num, den, bits):
    """Limbs of 1–2 bits: a uniform integer below 3 or 5 is built from two or three limbs, cut to its bit length and
    rejected at ≥ den (the rejections beyond the cutoff are the residual, below 0.03; an off-by-one in the comparison
    or the cut moves the probability by at least 1/8)."""
    monkeypatch.setattr(discrete_gaussian, "_LIMB_BITS", bits)
    law, residual = enumerate_law(lambda rng: _bernoulli_fraction(rng, num, den), mpmath.mpf(10) ** -5)
    assert_bracketed(law, residual, {True: mpmath.mpf(num) / den}, 0.03)


@pytest.mark.parametrize("num,den", [(1, 3), (7, 3), (0, 5)])
def test_python_integer_bernoulli_exp_is_exact(component_laws, fraction_law, num, den):  # noqa: F811
    law, residual = enumerate_law(lambda rng: _bernoulli_exp_fraction(rng, num, den), mpmath.mpf(10) ** -8)
    assert_bracketed(law, residual, {True: mpmath.exp(-mpmath.mpf(num) / den)}, 1e-6)


def _normal_bins(sigma2: float, edges: np.ndarray) -> list:
    """Masses of N_ℤ(0, σ²) below the first edge, between the edges, above the last: normal cdf at half-integer
    edges (module docstring: exact to 10⁻¹⁸ at these σ)."""
    cdf = stats.norm.cdf((edges - 0.5) / math.sqrt(sigma2))
    return [cdf[0], *np.diff(cdf), 1.0 - cdf[-1]]


@pytest.mark.parametrize("p,seed", [(2**40 + 3 * 2**19, 11), (2**56 + 2**35, 12)])
def test_wide_sampler_fits_its_pmf_at_large_sigma(p, seed):
    """G-test of 500,000 draws in bins σ/10 wide out to ±3.5σ (tails pooled, 116 expected each); the alternative is N_ℤ(0, 1.03σ²),
    power from the noncentral χ² (``test_exact_sampler_law._g_test``) asserted ≥ 0.99."""
    sigma = math.sqrt(p)
    width = 2 * math.floor(sigma / 20) + 1
    edges = np.arange(-35, 36) * width - (width - 1) // 2
    masses, alternative = _normal_bins(p, edges), _normal_bins(p * 1.03, edges)
    draws = sample_discrete_gaussian(np.random.default_rng(seed), p, 1, 500_000)
    g, threshold, power = _g_test(draws, edges, masses, alternative)
    assert power >= 0.99
    assert g <= threshold, f"G = {g:.1f} above its 1e-6 quantile {threshold:.1f}"


def test_range_of_the_sampler():
    """σ² up to 2^60 is served, beyond is refused in one line."""
    rng = np.random.default_rng(0)
    assert sample_discrete_gaussian(rng, MAX_WIDE_SIGMA2, 1, 10).dtype == np.int64
    with pytest.raises(ValueError, match="outside the exact sampler's range"):
        sample_discrete_gaussian(rng, 2**61, 1, 10)
