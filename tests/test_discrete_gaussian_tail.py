"""The closed forms of N_ℤ(0, σ²) at large σ (:mod:`dpopt.noise.discrete_gaussian_tail`) against 50-digit sums,
and the per-cell designs that read them above the tabulated range.

References: exact sums of e^{−j²/(2σ²)} in mpmath at 50 digits (terms beyond 40σ are below e^{−800} and left out);
the elementary bracket ∫_{k+1}^∞ f ≤ Σ_{j>k} f(j) ≤ ∫_k^∞ f of a decreasing f; Φ⁻¹(0.975) in mpmath.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpopt.certificate.per_cell import _marginal_errors
from dpopt.noise import discrete_gaussian_tail as closed
from dpopt.noise.discrete_gaussian import TABULATED_MAX_SIGMA2, DiscreteGaussianMarginal, discrete_gaussian_moments

FLOAT_SLACK = 2e-15
"""Float64 evaluation of the closed form: Q by :func:`dpopt.core.normal.ndtr` is accurate to a relative u²·2⁻⁵³
(4e-15 at u = 6, the farthest point below), the other terms to a few roundings: 2e-15 relative, plus 1e-18 absolute."""


def _exact(sigma2: float, ks: list[int]) -> tuple[list, mpmath.mpf]:
    """P(W > k) for each k and E|W|, from the 50-digit terms e^{−j²/(2σ²)}, 0 ≤ j ≤ 40σ."""
    with mpmath.workdps(50):
        s2 = mpmath.mpf(sigma2)
        top = int(40 * math.sqrt(sigma2))
        terms = [mpmath.exp(-mpmath.mpf(j) ** 2 / (2 * s2)) for j in range(top + 1)]
        z = 2 * mpmath.fsum(terms) - 1
        tails = [mpmath.fsum(terms[k + 1:]) / z for k in ks]
        mean_abs = 2 * mpmath.fsum(j * t for j, t in enumerate(terms)) / z
    return tails, mean_abs


@pytest.mark.parametrize("sigma2", [1e4, 1e6])
def test_tail_and_mean_abs_match_50_digit_sums_within_the_proven_bound(sigma2):
    sigma = math.sqrt(sigma2)
    ks = [0, int(0.5 * sigma), int(2 * sigma), int(6 * sigma)]
    tails, mean_abs = _exact(sigma2, ks)
    for k, exact in zip(ks, tails):
        value, bound = closed.tail_with_error(sigma2, k)
        gap = abs(float(value) - float(exact))
        assert gap <= float(bound) + FLOAT_SLACK * float(exact) + 1e-18  # the proven Euler–Maclaurin bracket
        assert gap <= FLOAT_SLACK * float(exact) + 1e-18  # every stated term is there (dropping f'''/720: 7e-11)
        assert float(closed.tail_upper(sigma2, k)) >= float(exact) * (1 - FLOAT_SLACK)
    value, bound = closed.mean_abs_with_error(sigma2)
    assert abs(value - float(mean_abs)) <= bound + FLOAT_SLACK * value
    assert abs(value - float(mean_abs)) <= FLOAT_SLACK * value


def test_closed_form_continues_the_tabulated_law_at_the_switch():
    """At σ² = 2^30 the tabulated law (a float64 sum over 40σ terms) and the closed form are two independent
    routes to the same numbers."""
    tabulated = DiscreteGaussianMarginal(float(TABULATED_MAX_SIGMA2))
    sigma = math.sqrt(TABULATED_MAX_SIGMA2)
    ks = np.array([0, sigma // 3, sigma, 2 * sigma, 5 * sigma])
    np.testing.assert_allclose(closed.tail_with_error(float(TABULATED_MAX_SIGMA2), ks)[0], tabulated.tail(ks),
                               rtol=1e-12, atol=1e-17)  # the float64 cumulative sum's rounding over 1.3M terms
    above = DiscreteGaussianMarginal(float(2 * TABULATED_MAX_SIGMA2))
    assert not hasattr(above, "_tail")  # nothing of size σ is formed above the switch
    assert closed.mean_abs_with_error(float(TABULATED_MAX_SIGMA2))[0] == pytest.approx(tabulated.abs_moment(1.0),
                                                                                       rel=1e-12)
    assert above.abs_moment(2.0) == 2.0 * TABULATED_MAX_SIGMA2


def test_quantile_at_sigma2_2_to_40_is_the_bracketed_whole_number():
    """The per-cell margin at σ² = 2⁴⁰: P(W > k) ≤ 0.025 forces Q((k+1)/σ) ≤ 0.025 and P(W > k−1) > 0.025 forces
    Q((k−1)/σ) > 0.025 (the integral bracket), so k ∈ (zσ − 1, zσ + 1) with z = Φ⁻¹(0.975)."""
    sigma2 = 2.0**40
    sigma = 2.0**20
    se, moe = _marginal_errors(DiscreteGaussianMarginal(sigma2))
    assert se == sigma
    z = float(mpmath.sqrt(2) * mpmath.erfinv(mpmath.mpf("0.95")))
    assert z * sigma - 1 < moe < z * sigma + 1
    assert moe == int(moe)


def test_moments_above_the_switch_are_the_closed_forms():
    m = discrete_gaussian_moments(2.0**50, gamma=2.0**25)
    assert m["second_moment"] == 2.0**50 and m["fourth_moment"] == 3.0 * 2.0**100  # Poisson summation
    assert m["mean_abs"] == pytest.approx(2.0**25 * math.sqrt(2 / math.pi), rel=1e-15)  # σ√(2/π)(1 − 1/(12σ²))
    assert m["within"] == pytest.approx(math.erf(1 / math.sqrt(2)), abs=1e-6)  # P(|W| ≤ σ) ≈ 0.6827 (± pmf σ⁻¹)


def test_lattice_ks_statistic_reads_only_the_draws_and_their_left_neighbours():
    """D = max_k |F̂(k) − F(k)| over every integer between the extreme draws (brute force) equals the statistic the
    sampler claim computes from the distinct draws u and u′ − 1 alone."""
    from dpopt.certificate.second_route import _ks_pvalue, _ks_sf

    law = DiscreteGaussianMarginal(50.0)
    x = np.random.default_rng(7).integers(-25, 26, size=400).astype(float)  # not the law: D is large
    k = np.arange(x.min(), x.max() + 1.0)
    gap = np.max(np.abs(np.searchsorted(np.sort(x), k, side="right") / x.size - law.cdf(k)))
    gap = max(gap, float(law.cdf(k[0] - 1.0)), float(1.0 - law.cdf(k[-1])))
    assert _ks_pvalue(x, law) == _ks_sf(gap, x.size)


@pytest.mark.parametrize("privacy", [{"zcdp": {"rho": 1e-12}}, {"approx": {"epsilon": 1e-5, "delta": 1e-6}}])
def test_discrete_gaussian_family_beyond_the_tabulated_range(privacy):
    """σ² = Δ₂²/(2ρ) = 5·10¹¹ under ρ-zCDP (add/remove, Δ₂ = 1: CKS Thm 14), and about 1.4·10¹⁰ for (ε, δ) =
    (10⁻⁵, 10⁻⁶) by the CKS conversion: both above 2³⁰, served by the wide sampler and certified."""
    import dpopt

    spec = {"dpopt": 1, "name": "histogram", "data": {"attributes": {"a": ["x", "y", "z"]}, "n": 10},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "mechanism": "discrete_gaussian", "privacy": privacy}
    solution = dpopt.solve(spec)
    sigma2 = solution.mechanism.sigma2
    assert sigma2 > TABULATED_MAX_SIGMA2
    if "zcdp" in privacy:
        assert sigma2 == 500_000_000_000
    assert solution.certificate.passed and dpopt.verify(solution.certificate).passed


@pytest.mark.parametrize("sigma2", [0.3, 50.0, 1e4])
def test_lattice_margin_by_bisection_is_the_first_k_of_a_linear_scan(sigma2):
    """The per-cell margin of a lattice law is the smallest k with P(W > k) ≤ 0.025: bisection finds the k a scan
    from 0 finds (the tabulated law, every k checked)."""
    law = DiscreteGaussianMarginal(sigma2)
    k = 0
    while float(law.tail(k)) > 0.025:
        k += 1
    assert _marginal_errors(law)[1] == k
