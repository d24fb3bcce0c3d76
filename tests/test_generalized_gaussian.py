"""The GG distribution, l_p sensitivities, and the bounded (truncated / BIT) pure-ε calibrations.

Sources of expected values: the digest of Liu (2019) (``papers/002_generalized_gaussian.md``,
section numbers below), scipy.stats.gennorm (same parameterization), numerical integration
with scipy.integrate.quad, brute-force enumeration of neighbouring datasets, and brute-force
grids of the privacy loss computed from gennorm densities (no dpopt code).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import make_spec
from scipy import integrate, stats

import dpopt
from dpopt.noise import GeneralizedGaussian
from dpopt.privacy.exponential_gg import (
    exponential_gg_actual_epsilon,
    exponential_gg_scale,
    lemma9_utility_sensitivity,
    lp_utility_sensitivity,
)
from dpopt.privacy.truncated_gg import (
    bit_coordinate_loss,
    bit_coordinate_loss_mp,
    paper_scale,
    tight_scale,
    truncated_coordinate_loss,
    worst_case_loss,
)
from dpopt.sensitivity import enumerate_space
from dpopt.sensitivity.lp import (
    coordinate_sensitivities,
    difference_magnitudes,
    lemma2_bound,
    lp_sensitivity,
    lp_sensitivity_power,
)

SHAPES = (1, 1.5, 2, 3, 5)


# ------------------------------------------------------------------ distribution
@pytest.mark.parametrize("p", SHAPES)
def test_normalizer_variance_and_moments_against_quadrature(p):
    g = GeneralizedGaussian(p, 1.3)
    unnormalized = integrate.quad(lambda x: math.exp(-((abs(x) / 1.3) ** p)), -np.inf, np.inf)[0]
    assert g.normalizer == pytest.approx(unnormalized, rel=1e-9)
    assert integrate.quad(lambda x: x * x * float(g.pdf(x)), -np.inf, np.inf)[0] == pytest.approx(
        g.var, rel=1e-8
    )
    assert integrate.quad(lambda x: abs(x) * float(g.pdf(x)), -np.inf, np.inf)[0] == pytest.approx(
        g.mean_abs, rel=1e-8
    )
    tail = 2 * integrate.quad(lambda x: float(g.pdf(x)), 0.9, np.inf)[0]
    assert float(g.tail(0.9)) == pytest.approx(tail, rel=1e-8)


@pytest.mark.parametrize("p", SHAPES)
def test_partial_moments_against_quadrature(p):
    g = GeneralizedGaussian(p, 0.8, loc=0.2)
    for lo, hi in ((-0.5, 1.1), (0.4, 2.0), (-3.0, -0.1)):
        for m in (0, 1, 2):
            weighted = lambda x, m=m: abs(x - 0.2) ** m * float(g.pdf(x))
            direct = integrate.quad(weighted, lo, hi, points=[0.2])[0]
            assert float(g.partial_abs_moment(m, lo, hi)) == pytest.approx(direct, rel=1e-8, abs=1e-14)
    assert float(g.interval_probability(-0.5, 1.1)) == pytest.approx(
        float(g.cdf(1.1) - g.cdf(-0.5)), rel=1e-12
    )


@pytest.mark.parametrize("p", SHAPES)
def test_density_cdf_quantiles_match_scipy_gennorm(p):
    g = GeneralizedGaussian(p, 1.7, loc=-0.4)
    ref = stats.gennorm(p, loc=-0.4, scale=1.7)
    x = np.linspace(-6, 6, 41)
    np.testing.assert_allclose(g.pdf(x), ref.pdf(x), rtol=1e-12)
    np.testing.assert_allclose(g.cdf(x), ref.cdf(x), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(g.sf(x), ref.sf(x), rtol=1e-12, atol=1e-300)
    u = np.array([1e-9, 0.01, 0.3, 0.5, 0.8, 1 - 1e-6])
    np.testing.assert_allclose(g.ppf(u), ref.ppf(u), rtol=1e-10)
    assert g.var == pytest.approx(ref.var(), rel=1e-12)


def test_digest_variance_values():
    # digest §9.2 case 1 and §2.3 (Figure 1 parameters)
    assert GeneralizedGaussian(2, math.sqrt(2)).var == pytest.approx(1.0, abs=1e-12)
    assert GeneralizedGaussian(1, 1.0).var == pytest.approx(2.0, abs=1e-12)
    assert GeneralizedGaussian(3, 1.7).var == pytest.approx(1.078785, abs=1e-6)
    assert GeneralizedGaussian.from_variance(3, 1.0).scale == pytest.approx(1.636746, abs=1e-6)
    assert GeneralizedGaussian.from_variance(1, 1.0).scale == pytest.approx(0.707107, abs=1e-6)
    left = [GeneralizedGaussian(p, math.sqrt(2)).var for p in (1, 2, 3, 4, 5, 10)]
    np.testing.assert_allclose(left, [4.0, 1.0, 0.746564, 0.675978, 0.648766, 0.628910], atol=1e-6)
    at_zero = [float(GeneralizedGaussian.from_variance(p, 1.0).pdf(0.0)) for p in (1, 2, 3, 4, 5, 10)]
    np.testing.assert_allclose(
        at_zero, [0.707107, 0.398942, 0.342095, 0.320701, 0.310153, 0.294719], atol=1e-6
    )


@pytest.mark.parametrize("p", (1, 2, 3))
def test_sampler_agrees_with_gennorm(p):
    g = GeneralizedGaussian(p, 1.4)
    x = g.sample(np.random.default_rng(600 + p), 200_000)
    # KS test at the 1e-3 level (a correct sampler fails it with probability 1e-3; seed fixed)
    assert stats.kstest(x, stats.gennorm(p, scale=1.4).cdf).pvalue > 1e-3
    # sample variance: SE = sqrt((E X^4 - var^2) / n); tolerance 4 SE
    se = math.sqrt((g.abs_moment(4) - g.var**2) / x.size)
    assert abs(x.var() - g.var) < 4 * se


def test_truncated_sampler_agrees_with_truncated_gennorm():
    g = GeneralizedGaussian(2, 0.7, loc=0.1)
    x = g.sample_truncated(np.random.default_rng(3), -0.3, 1.0, 100_000)
    ref = stats.gennorm(2, loc=0.1, scale=0.7)
    mass = ref.cdf(1.0) - ref.cdf(-0.3)
    assert x.min() >= -0.3 and x.max() <= 1.0
    assert stats.kstest(x, lambda t: (ref.cdf(t) - ref.cdf(-0.3)) / mass).pvalue > 1e-3


# --------------------------------------------------------------- l_p sensitivity
QUERIES = {
    "histogram": {"kind": "histogram", "attribute": "race"},
    "marginals": {"kind": "marginals", "attributes": [["race"], ["sex"]]},
    "linear": {"kind": "linear", "attribute": "race", "matrix": [[1, 0, 0], [1, 1, 0], [1, 1, 1]]},
    "sum": {"kind": "sum", "attribute": "income"},
}
ADJACENCIES = {
    "add_remove": "add_remove",
    "replace_one": "replace_one",
    "hamming2": {"kind": "hamming", "distance": 2},
}


@pytest.mark.parametrize("query", QUERIES, ids=list(QUERIES))
@pytest.mark.parametrize("adjacency", ADJACENCIES, ids=list(ADJACENCIES))
def test_lp_sensitivity_against_enumeration(query, adjacency):
    spec = dpopt.load_spec(make_spec(query=QUERIES[query], adjacency=ADJACENCIES[adjacency]))
    space = dpopt.derive(spec)
    brute = np.abs(enumerate_space(spec, max_records=3).vectors())
    for p in (1, 2, 3, 4):
        power, _ = lp_sensitivity_power(space, p)
        expected = max(sum(Fraction(x) ** p for x in row) for row in brute)
        assert power == expected
    np.testing.assert_array_equal(coordinate_sensitivities(space), brute.max(axis=0))


def test_lp_sensitivity_closed_forms():
    # digest §1.5 table: histogram Δ_p = 1 under add/remove, 2^(1/p) under replace-one
    for adjacency, expected in (("add_remove", lambda p: 1.0), ("replace_one", lambda p: 2 ** (1 / p))):
        space = dpopt.derive(dpopt.load_spec(make_spec(query=QUERIES["histogram"], adjacency=adjacency)))
        for p in (1, 2, 3, 4):
            assert lp_sensitivity(space, p) == pytest.approx(expected(p), rel=1e-15)
    # Lemma 2 for Δ_{1,k} = (1, 0.1, 0.05) (Fig. 2 setting): digest §1.5
    assert lemma2_bound([1, 0.1, 0.05], 1) == pytest.approx(1.15, abs=1e-12)
    assert lemma2_bound([1, 0.1, 0.05], 2) == pytest.approx(1.006231, abs=1e-6)
    assert lemma2_bound([1, 0.1, 0.05], 3) == pytest.approx(1.000375, abs=1e-6)


def test_difference_magnitudes_and_disjointness():
    # one record changes one cell under add/remove (Corollary 8's disjoint case); two under replace-one
    hist_ar = dpopt.derive(dpopt.load_spec(make_spec(query=QUERIES["histogram"], adjacency="add_remove")))
    hist_ro = dpopt.derive(dpopt.load_spec(make_spec(query=QUERIES["histogram"], adjacency="replace_one")))
    assert difference_magnitudes(hist_ar).disjoint and difference_magnitudes(hist_ar).profiles() == ((1.0,),)
    assert not difference_magnitudes(hist_ro).disjoint and difference_magnitudes(hist_ro).profiles() == (
        (1.0, 1.0),
    )
    # prefix sums under add/remove: the profiles (1), (1,1) are dominated by (1,1,1)
    prefix = dpopt.derive(dpopt.load_spec(make_spec(query=QUERIES["linear"], adjacency="add_remove")))
    assert difference_magnitudes(prefix).profiles() == ((1.0, 1.0, 1.0),)


# ------------------------------------------------------ truncated and BIT (pure ε)
def _brute_truncated_loss(b, p, width, shift, n=201):
    """sup |log f(s*|s) − log f(s*|s')| over a grid, from scipy's gennorm (independent of dpopt)."""
    s = np.linspace(0, width, n)
    t = np.linspace(-shift, shift, 21)
    star = np.linspace(0, width, n)
    worst = 0.0
    for tt in t:
        s2 = s + tt
        ok = (s2 >= 0) & (s2 <= width)
        a, a2 = s[ok], s2[ok]
        mass = stats.gennorm.cdf(width, p, loc=a, scale=b) - stats.gennorm.cdf(0, p, loc=a, scale=b)
        mass2 = stats.gennorm.cdf(width, p, loc=a2, scale=b) - stats.gennorm.cdf(0, p, loc=a2, scale=b)
        lf = stats.gennorm.logpdf(star[:, None], p, loc=a, scale=b) - np.log(mass)
        lf2 = stats.gennorm.logpdf(star[:, None], p, loc=a2, scale=b) - np.log(mass2)
        worst = max(worst, float(np.abs(lf - lf2).max()))
    return worst


@pytest.mark.parametrize(
    "p, eq7, actual", [(1, 0.2, 0.830553), (2, 0.648074, 0.306666), (3, 0.871537, 0.316067)]
)
def test_eq7_scale_and_its_actual_loss(p, eq7, actual):
    # digest §3.3 table: r = 1, [0, 1], Δ = 0.1, ε = 1
    b = paper_scale(1.0, p, [1.0], [0.1], Fraction(1, 10) ** p)
    assert b == pytest.approx(eq7, abs=1e-6)
    bound = truncated_coordinate_loss(b, p, 1.0, 0.1).value
    brute = _brute_truncated_loss(b, p, 1.0, 0.1)
    # the certified bound dominates the brute-force supremum and the digest's grid search,
    # and is within 0.5% of them (grid resolution + Lipschitz remainder)
    assert brute <= bound and actual <= bound
    assert bound <= 1.005 * max(actual, brute)
    assert bound <= 1.0  # Eq. 7 is valid


@pytest.mark.parametrize("p, digest", [(1, 0.161156), (2, 0.390079), (3, 0.615321)])
def test_tight_truncated_scale(p, digest):
    # digest §3.3: smallest b that is actually 1-DP (grid search); the certified b may exceed it
    # by the bound's slack (at most 0.5% here), never fall below it
    b = tight_scale(1.0, "truncated", p, [1.0], [[0.1]])
    assert digest * (1 - 1e-5) <= b <= digest * 1.005
    assert _brute_truncated_loss(b, p, 1.0, 0.1) <= 1.0


@pytest.mark.parametrize("p, digest", [(2, 0.456685), (3, 0.687606)])
def test_tight_bit_scale(p, digest):
    b = tight_scale(1.0, "boundary_inflated", p, [1.0], [[0.1]])
    assert b == pytest.approx(digest, rel=2e-3)


@pytest.mark.parametrize("p", (2, 3))
def test_bit_closed_form_against_brute_force(p):
    b, width, shift = 0.5, 1.0, 0.1
    s = np.linspace(0, width, 401)
    worst = 0.0
    for tt in np.linspace(-shift, shift, 21):
        s2 = s + tt
        ok = (s2 >= 0) & (s2 <= width)
        a, a2 = s[ok], s2[ok]
        star = np.linspace(0, width, 201)[1:-1, None]
        interior = np.abs(np.abs(star - a2) ** p - np.abs(star - a) ** p) / b**p
        low = np.abs(stats.gennorm.logcdf(0, p, loc=a, scale=b) - stats.gennorm.logcdf(0, p, loc=a2, scale=b))
        high = np.abs(
            stats.gennorm.logsf(width, p, loc=a, scale=b) - stats.gennorm.logsf(width, p, loc=a2, scale=b)
        )
        worst = max(worst, float(interior.max()), float(low.max()), float(high.max()))
    closed = bit_coordinate_loss(b, p, width, shift).value
    assert worst <= closed + 1e-12 and closed == pytest.approx(worst, rel=1e-3)
    assert float(bit_coordinate_loss_mp(b, p, width, shift)) == pytest.approx(closed, rel=1e-12)


def test_multi_coordinate_loss_sums_the_moving_coordinates():
    # a row moving two coordinates costs the sum of the two one-coordinate bounds
    one = worst_case_loss("boundary_inflated", 0.5, 2, [1.0], [[0.1]])[0]
    two = worst_case_loss("boundary_inflated", 0.5, 2, [1.0, 1.0, 1.0], [[0.1, 0.1, 0.0]])[0]
    assert two == pytest.approx(2 * one, rel=1e-12)


# ------------------------------------------------------------ exponential mechanism
def test_exponential_mechanism_scales_and_actual_cost():
    # digest §5: p = 2, [0, 1], Δ = 0.1, ε = 1: Lemma 9b gives b = 0.632456, the exact Δu = 0.19 gives 0.616441
    assert exponential_gg_scale(1.0, 2, lemma9_utility_sensitivity(2, [0.0], [1.0], [0.1])) == pytest.approx(
        0.632456, abs=1e-6
    )
    exact = lp_utility_sensitivity(2, [1.0], [[0.1]])
    assert exact == pytest.approx(0.19, abs=1e-12)
    assert exponential_gg_scale(1.0, 2, exact) == pytest.approx(0.616441, abs=1e-6)
    # p = 3: Lemma 9c gives Δu = 1.141 (b = 1.316554), the exact 0.271 (b = 0.815329)
    assert lemma9_utility_sensitivity(3, [0.0], [1.0], [0.1]) == pytest.approx(1.141, abs=1e-12)
    assert exponential_gg_scale(1.0, 3, lp_utility_sensitivity(3, [1.0], [[0.1]])) == pytest.approx(
        0.815329, abs=1e-6
    )
    # Corollary 12: the actual cost of the bounded EM is below its nominal ε
    for p in (2, 3):
        b = exponential_gg_scale(1.0, p, lp_utility_sensitivity(p, [1.0], [[0.1]]))
        assert exponential_gg_actual_epsilon(b, p, [1.0], [[0.1]]) < 1.0
    # unbounded, p = 1: b = 2Δ/ε and the actual loss is exactly ε/2 (twice the Laplace noise)
    b = exponential_gg_scale(1.0, 1, 1.0)
    assert b == 2.0 and exponential_gg_actual_epsilon(b, 1, l1_sensitivity=1.0) == 0.5
