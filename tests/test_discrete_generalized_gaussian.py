"""The discrete generalized Gaussian on ℤ (dpopt.noise.discrete_generalized_gaussian): moments, the rejection
identity, and the sampler's law.

Expected values: mpmath sums at 40 digits (independent of the arb code), the discrete Laplace closed forms of
dpopt.noise.discrete_laplace (CKS 2020) at p = 1, exact rational identities; the goodness-of-fit threshold and its
power are derived in the test.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpopt.noise.discrete_generalized_gaussian import DiscreteGeneralizedGaussian
from dpopt.noise.discrete_laplace import discrete_laplace_moments


def _mp_pmf(p: int, s: Fraction):
    """P[K = k] by mpmath: w(k) / Σ_{|j| ≤ 400} w(j) (the rest is below e^{-(400/s)^p}, negligible for s ≤ 10)."""
    mpmath.mp.dps = 40
    sm = mpmath.mpf(s.numerator) / s.denominator
    z = mpmath.fsum(mpmath.exp(-((abs(j) / sm) ** p)) for j in range(-400, 401))
    return lambda k: mpmath.exp(-((abs(k) / sm) ** p)) / z


@pytest.mark.parametrize("p, s", [(2, Fraction(7, 3)), (3, Fraction(5, 2)), (4, Fraction(9, 2))])
def test_moments_match_an_independent_mpmath_sum(p, s):
    pmf = _mp_pmf(p, s)
    expected = {name: float(mpmath.fsum(abs(k) ** m * pmf(k) for k in range(-400, 401)))
                for name, m in (("mean_abs", 1), ("second_moment", 2), ("fourth_moment", 4))}
    expected["within"] = float(mpmath.fsum(pmf(k) for k in range(-2, 3)))
    got = DiscreteGeneralizedGaussian(p, s).moments(gamma=2.5)
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-14)


def test_shape_one_is_the_discrete_laplace():
    got = DiscreteGeneralizedGaussian(1, Fraction(3, 2)).moments(gamma=2.0)
    closed = discrete_laplace_moments(1.5, 2.0)
    for name in ("mean_abs", "second_moment", "fourth_moment", "within"):
        assert got[name] == pytest.approx(closed[name], rel=1e-14)


@pytest.mark.parametrize("p", [2, 3, 4])
def test_rejection_identity_by_enumeration(p):
    # proposal weight e^{-|k|/s} times acceptance e^{-x(k)} equals e^{-c} w(k) exactly, and x(k) ≥ 0, k = 0..3000
    law = DiscreteGeneralizedGaussian(p, Fraction(13, 4))
    c = 1 - Fraction(1, p)
    for k in range(3001):
        x = law.exponent(k) - Fraction(k) / law.scale + c
        assert x >= 0
        assert Fraction(k) / law.scale + x == law.exponent(k) + c


@pytest.mark.parametrize("p", [2, 3])
def test_sampler_law_goodness_of_fit(p):
    # 30000 draws at s = 5/2, cells k = -6..6 and the two tails; χ² at level 1e-6 (14 degrees of freedom).
    # Power: the proposal law alone (discrete Laplace of scale s) has noncentrality n·Σ(q − π)²/π > 3000 here
    # (computed below), far above the 1e-6 threshold (≈ 48): a sampler that skipped the rejection would fail.
    s = Fraction(5, 2)
    pmf = _mp_pmf(p, s)
    cells = list(range(-6, 7))
    inner = [float(pmf(k)) for k in cells]
    tail = (1.0 - sum(inner)) / 2
    expected = np.array([tail] + inner + [tail])
    n = 30_000
    draws = DiscreteGeneralizedGaussian(p, s).sample(np.random.default_rng(20261207), n)
    counts = np.array([np.sum(draws < -6)] + [np.sum(draws == k) for k in cells] + [np.sum(draws > 6)])
    chi2 = float(np.sum((counts - n * expected) ** 2 / (n * expected)))
    threshold = stats.chi2.isf(1e-6, df=expected.size - 1)
    assert chi2 < threshold
    r = np.exp(-1 / float(s))
    laplace = np.array([(1 - r) / (1 + r) * r ** abs(k) for k in cells])
    laplace = np.concatenate([[(1 - laplace.sum()) / 2], laplace, [(1 - laplace.sum()) / 2]])
    assert n * np.sum((laplace - expected) ** 2 / expected) > 3000 > threshold


def test_the_sampler_returns_integers_of_the_requested_size():
    draws = DiscreteGeneralizedGaussian(4, Fraction(1, 3)).sample(np.random.default_rng(1), 1000)
    assert draws.dtype == np.int64 and draws.shape == (1000,)
    # s = 1/3: P[K ≠ 0] = 2e^{-81}/Z, so every draw is 0
    assert not draws.any()


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="integer >= 1"):
        DiscreteGeneralizedGaussian(1.5, 2)
    with pytest.raises(ValueError, match="positive"):
        DiscreteGeneralizedGaussian(2, 0)


@pytest.mark.parametrize("p, scale", [(1, Fraction(3)), (1, Fraction(7, 2)), (2, Fraction(3)), (2, Fraction(41, 4)),
                                      (2, Fraction(1, 2))])
def test_the_closed_form_moments_at_p_1_and_2_are_the_term_sums(p, scale):
    # p = 1, 2 read the discrete Laplace's and the discrete Gaussian's closed forms; the reference is the law's own
    # term-by-term sum in 128-bit arb (DiscreteGeneralizedGaussian.sums), a different computation of the same series
    law = DiscreteGeneralizedGaussian(p, scale)
    sums = law.sums()
    reference = {key: float((sums[m] / sums[0]).mid())
                 for key, m in (("mean_abs", 1), ("second_moment", 2), ("fourth_moment", 4))}
    found = law.moments(2.5)
    for key, value in reference.items():
        assert found[key] == pytest.approx(value, rel=1e-13)
    inside = sum(float(law.weight(k).mid()) for k in range(-2, 3)) / float(sums[0].mid())
    assert found["within"] == pytest.approx(inside, rel=1e-12)
