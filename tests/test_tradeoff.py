"""f-DP trade-off functions and the certified μ-GDP check (dpopt.privacy.tradeoff).

Oracles: the digest of Lee, Kim, Kwak & Jung (2022), `papers/000_gdp_multivariate.md`
(its [computed] tables, labelled "digest §x"), closed forms derived independently in the
tests (randomized response for ε-DP, one-sided threshold tests for Laplace groups), and
Monte Carlo of the Neyman–Pearson test with tolerances of 4 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special

from dpopt.privacy.gdp_check import certified_mu, gdp_margin, mu_of_tradeoff
from dpopt.privacy.laplace_gdp import eps_laplace_tight, eps_universal, mu_laplace_tight, mu_universal
from dpopt.privacy.tradeoff import (
    SPECIFICITY,
    TYPE_I,
    GaussianTradeOff,
    GroupTradeOff,
    Laplace2DTradeOff,
    LaplaceTradeOff,
    PureDPTradeOff,
    contingency_laplace_tradeoff,
    group_privacy,
    laplace_tradeoff,
)

GRID = np.linspace(0.0, 1.0, 20001)


# ------------------------------------------------------------------ Gaussian, conventions
def test_gaussian_tradeoff_digest_values():
    # digest §1.3 [computed]: G_1(0.05), G_1(0.5), G_0.5(0.1); fixed point of G_1 = Φ(−1/2)
    assert GaussianTradeOff(1.0)(0.05) == pytest.approx(0.7404889772, abs=1e-10)
    assert GaussianTradeOff(1.0)(0.5) == pytest.approx(0.1586552539, abs=1e-10)
    assert GaussianTradeOff(0.5)(0.1) == pytest.approx(0.7827609196, abs=1e-10)
    assert GaussianTradeOff(1.0).fixed_point() == pytest.approx(0.3085375387, abs=1e-10)


def test_conventions_are_explicit():
    g = GaussianTradeOff(1.0)
    assert g.convention == TYPE_I
    x = np.array([0.1, 0.4, 0.9])
    np.testing.assert_allclose(g.curve(x, SPECIFICITY), g(1.0 - x), rtol=0, atol=0)
    np.testing.assert_allclose(g.power(x), 1.0 - g(x), atol=1e-15)
    with pytest.raises(ValueError, match="convention"):
        g.curve(0.1, "power")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        g(1.5)


def test_power_is_accurate_near_zero():
    # 1 − G_μ(α) = Φ(μ + Φ⁻¹(α)) exactly; at α = 1e-200 the difference 1 − G is far below 1e-16.
    a = 1e-200
    assert GaussianTradeOff(1.0).power(a) == pytest.approx(special.ndtr(1.0 + special.ndtri(a)), rel=1e-12)
    assert LaplaceTradeOff(1.0).power(a) == pytest.approx(math.e * a, rel=1e-14)


# ----------------------------------------------------------------------------- pure ε
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_pure_dp_is_randomized_response(eps):
    # ε-DP trade-off = NP trade-off of randomized response P = (p, 1−p), Q = (1−p, p),
    # p = e^ε/(1+e^ε): the broken line (0,1) → (1−p, 1−p) → (1,0). (Lee et al. print a wrong
    # form in Sec. 3.1; digest §7.2.)
    q = 1.0 / (1.0 + math.exp(eps))
    rr = np.interp(GRID, [0.0, q, 1.0], [1.0, q, 0.0])
    np.testing.assert_allclose(PureDPTradeOff(eps)(GRID), rr, atol=1e-14)


# ----------------------------------------------------------------------- 1-D Laplace
def test_laplace_1d_digest_values():
    # digest §4.1 [computed]: T_{Lap, ε=1}(0.1, 0.3, 0.7)
    np.testing.assert_allclose(LaplaceTradeOff(1.0)([0.1, 0.3, 0.7]),
                               [0.7281718172, 0.3065662010, 0.1103638324], atol=1e-10)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 4.0])
def test_laplace_1d_tangent_to_gaussian_at_alpha0(eps):
    # Prop. 9: with μ0 = −2Φ⁻¹(e^{−ε/2}/2), T_{Lap,ε} ≥ G_μ0 and they touch at α0 = e^{−ε/2}/2.
    mu0 = -2.0 * special.ndtri(math.exp(-eps / 2.0) / 2.0)
    lap, gauss = LaplaceTradeOff(eps), GaussianTradeOff(mu0)
    alpha0 = math.exp(-eps / 2.0) / 2.0
    assert lap(alpha0) - gauss(alpha0) == pytest.approx(0.0, abs=1e-13)
    assert np.min(lap(GRID) - gauss(GRID)) > -1e-13


# ----------------------------------------------------------------------- 2-D Laplace
def test_laplace_2d_digest_values():
    # digest §8.2 item 9: eq. (14) at δ = (1, −0.4), 4 decimals
    np.testing.assert_allclose(Laplace2DTradeOff(1.0, -0.4)([0.05, 0.1, 0.3, 0.5]),
                               [0.7972, 0.6302, 0.2959, 0.1670], atol=5e-5)


def test_contingency_tradeoff_digest_table():
    # digest §4.4 [computed]: T_b at seven α for b = 1 and b = 2
    alpha = [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8]
    b1 = [0.9261094390, 0.6529613328, 0.4909265170, 0.3518191618, 0.2518191618, 0.0959572944, 0.0270670566]
    b2 = [0.9728171817, 0.8640859086, 0.7290787594, 0.5603297491, 0.4581633246, 0.2581633246, 0.0735758882]
    np.testing.assert_allclose(contingency_laplace_tradeoff(1.0)(alpha), b1, atol=1e-10)
    np.testing.assert_allclose(contingency_laplace_tradeoff(2.0)(alpha), b2, atol=1e-10)


def test_eq16_as_printed_is_discontinuous():
    # digest §7.4: the paper prints piece 2 of eq. (16) as ¼e^{−1+K1/2}(3 + 1/b − K1/2); only
    # e^{−1/b+K1/2} is continuous with piece 1 (T = ¾ at α = ¼e^{−2/b}, where K1 = 2/b).
    b = 2.0
    d = 1.0 / b
    k1 = 2.0 * d  # solves α = ¼e^{−d−K1/2}(1 + d − K1/2) at α = ¼e^{−2d}
    printed = 0.25 * math.exp(-1.0 + k1 / 2.0) * (3.0 + d - k1 / 2.0)
    corrected = 0.25 * math.exp(-d + k1 / 2.0) * (3.0 + d - k1 / 2.0)
    assert corrected == pytest.approx(0.75, abs=1e-15)
    assert abs(printed - 0.75) > 0.2
    assert contingency_laplace_tradeoff(b)(0.25 * math.exp(-2 * d)) == pytest.approx(0.75, abs=1e-14)


def test_eq14_implicit_form_by_root_finding():
    # Pieces 2 and 6 in the paper's implicit K form, solved by brentq, against the Lambert-W code.
    d1, d2 = 1.5, -0.2
    D = d1 - d2
    t = Laplace2DTradeOff(d1, d2)
    for alpha in np.linspace(0.25 * math.exp(-D), 0.25 * math.exp(-d1) * (1 - d2), 7)[1:-1]:
        k1 = optimize.brentq(lambda k, a=alpha: 0.25 * math.exp(-(D + k) / 2) * (1 + (D - k) / 2) - a, d1 + d2, D)
        assert t(alpha) == pytest.approx(0.25 * math.exp(-(D - k1) / 2) * (3 + (D - k1) / 2), abs=1e-12)
    for alpha in np.linspace(0.25 * math.exp(d2) * (3 - d2), 0.75, 7)[1:-1]:
        k2 = optimize.brentq(lambda k, a=alpha: 0.25 * math.exp(-(D + k) / 2) * (3 + (D + k) / 2) - a, -D, -d1 - d2)
        assert t(alpha) == pytest.approx(0.25 * math.exp(-(D - k2) / 2) * (1 + (D + k2) / 2), abs=1e-12)


@pytest.mark.parametrize("delta", [(1.0, -0.4), (1.5, -0.2), (0.8, -0.8), (3.0, -2.5), (0.3, 0.0)])
def test_laplace_2d_is_a_tradeoff_function(delta):
    t = Laplace2DTradeOff(*delta)
    v = t(GRID)
    assert v[0] == 1.0 and v[-1] == 0.0
    assert np.all(np.diff(v) <= 1e-15)                        # non-increasing
    assert np.all(np.diff(v, 2) >= -1e-12)                    # convex (what gdp_margin relies on)
    np.testing.assert_allclose(t(v), GRID, atol=1e-12)       # symmetric: T∘T = id
    for a in t.breakpoints[:-1]:                              # continuous at every breakpoint
        assert t(np.nextafter(a, 0.0)) == pytest.approx(t(a), abs=1e-12)
    h = 1e-7                                                  # the subgradient is the slope
    inner = np.linspace(0.01, 0.99, 97)
    np.testing.assert_allclose(t.subgradient(inner), (t(inner + h) - t(inner - h)) / (2 * h), rtol=1e-4, atol=1e-6)


def test_laplace_2d_with_one_coordinate_is_1d():
    np.testing.assert_allclose(Laplace2DTradeOff(1.3, 0.0)(GRID), LaplaceTradeOff(1.3)(GRID), atol=1e-14)
    assert isinstance(laplace_tradeoff([0.0, -1.3, 0.0]), LaplaceTradeOff)
    assert isinstance(laplace_tradeoff([0.5, -1.3]), Laplace2DTradeOff)
    with pytest.raises(ValueError, match="more than two"):
        laplace_tradeoff([1.0, 1.0, 1.0])


def _np_test_monte_carlo(delta, thresholds, n=400_000, seed=11):
    """Empirical (α̂, β̂) of the test 'reject when l(x) > K', l the log-likelihood ratio of
    Lap_2(δ, 1) against Lap_2(0, 1): l(x) = Σ |x_i| − |x_i − δ_i| (eq. 13)."""
    rng = np.random.default_rng(seed)
    delta = np.asarray(delta)
    x0 = rng.laplace(0.0, 1.0, size=(n, 2))
    x1 = rng.laplace(0.0, 1.0, size=(n, 2)) + delta
    l0 = np.sum(np.abs(x0) - np.abs(x0 - delta), axis=1)
    l1 = np.sum(np.abs(x1) - np.abs(x1 - delta), axis=1)
    return [(np.mean(l0 > k), np.mean(l1 <= k)) for k in thresholds], n


@pytest.mark.parametrize("delta, thresholds", [
    ((1.0, -0.4), [-1.0, -0.3, 0.0, 0.3, 1.0]),   # atoms of l at ±1.4, ±0.6 avoided
    ((1.0, -1.0), [-1.5, -0.5, 0.5, 1.5]),        # contingency table, b = 1: atoms at ±2, 0
])
def test_laplace_2d_matches_monte_carlo(delta, thresholds):
    t = Laplace2DTradeOff(*delta)
    pairs, n = _np_test_monte_carlo(delta, thresholds)
    for a, b in pairs:
        # a threshold test is most powerful at its own size: β̂ ≈ T(α̂); 4 SE of β̂ plus the
        # slope times 4 SE of α̂
        se = math.sqrt(b * (1 - b) / n) + abs(t.subgradient(a)) * math.sqrt(a * (1 - a) / n)
        assert abs(t(a) - b) < 4 * se


# --------------------------------------------------------------------- group privacy
def test_group_privacy_of_gaussian_is_exact():
    # Dong, Roth & Su Thm 2.14 / Cor. 2.15: G_μ for groups of k is G_{kμ}; the generic
    # composition 1 − (1 − f)^{∘k} gives the same curve.
    assert group_privacy(GaussianTradeOff(0.7), 3).mu == pytest.approx(2.1)
    np.testing.assert_allclose(GroupTradeOff(GaussianTradeOff(0.7), 3)(GRID), GaussianTradeOff(2.1)(GRID),
                               atol=1e-12)


@pytest.mark.parametrize("eps, k", [(0.3, 2), (1.0, 3), (2.5, 2)])
def test_group_privacy_of_laplace_is_laplace_of_k_eps(eps, k):
    # Derived: for a location family whose MP tests are thresholds, 1 − T_t(α) = F̄(F̄⁻¹(α) − t),
    # and composing shifts adds them: 1 − (1 − T_ε)^{∘k} = T_{kε}.
    np.testing.assert_allclose(group_privacy(LaplaceTradeOff(eps), k)(GRID), LaplaceTradeOff(k * eps)(GRID),
                               atol=1e-14)


def test_group_privacy_of_pure_dp_implies_k_eps():
    # Dong, Roth & Su: an ε-DP mechanism is kε-DP for groups of k (the f-DP bound is tighter).
    g = group_privacy(PureDPTradeOff(1.0), 2)
    assert np.min(g(GRID) - PureDPTradeOff(2.0)(GRID)) > -1e-14
    assert np.max(g(GRID) - PureDPTradeOff(2.0)(GRID)) > 0.05


# ------------------------------------------------------------------ certified μ-GDP check
@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0, 10.0])
def test_margin_brackets_the_prop9_threshold(mu):
    # Prop. 9: Lap(ε) is μ-GDP iff ε ≤ −2 log(2Φ(−μ/2)) (tight): certified just below, refused above.
    eps = eps_laplace_tight(mu)
    assert gdp_margin(LaplaceTradeOff(eps * (1 - 1e-7)), mu).passed
    assert not gdp_margin(LaplaceTradeOff(eps * (1 + 1e-7)), mu).passed


@pytest.mark.parametrize("mu", [0.5, 1.0, 4.0])
def test_margin_brackets_the_universal_threshold(mu):
    # eq. (12): ε-DP ⇒ μ-GDP iff ε ≤ log(Φ(μ/2)/Φ(−μ/2)); the curves touch at α = Φ(−μ/2).
    eps = eps_universal(mu)
    assert gdp_margin(PureDPTradeOff(eps * (1 - 1e-7)), mu).passed
    assert not gdp_margin(PureDPTradeOff(eps * (1 + 1e-7)), mu).passed


# digest §4.4 [computed]: μ_b of Laplace(b) on a contingency table
MU_B = {0.5: 2.3114797, 1.0: 1.3051121, 2.0: 0.7075515, 5.0: 0.3003992, 10.0: 0.1536074}
SINGLE_COORDINATE = {0.5: 2.986779, 1.0: 1.800905, 2.0: 1.030064, 5.0: 0.458356, 10.0: 0.239106}


@pytest.mark.parametrize("b, mu_b", MU_B.items())
def test_mu_of_contingency_laplace(b, mu_b):
    t = contingency_laplace_tradeoff(b)
    assert mu_of_tradeoff(t) == pytest.approx(mu_b, abs=1e-7)
    cert = certified_mu(t)
    assert mu_b - 1e-7 < cert < mu_b * (1 + 1e-6)
    assert gdp_margin(t, cert).passed
    assert not gdp_margin(t, mu_b * (1 - 1e-6)).passed
    # Thm 11's bound (the whole l1 sensitivity 2 in one coordinate, ε = 2/b) is looser
    assert mu_laplace_tight(2.0 / b) == pytest.approx(SINGLE_COORDINATE[b], abs=1e-6)
    assert SINGLE_COORDINATE[b] > mu_b


def test_mu_of_tradeoff_closed_forms():
    # digest §1.3 / §2.5: ε = 1 gives μ = 1.2320354 (universal) and 1.0300640 (Laplace, Prop. 9)
    assert mu_of_tradeoff(PureDPTradeOff(1.0)) == pytest.approx(mu_universal(1.0), abs=1e-9)
    assert mu_universal(1.0) == pytest.approx(1.2320354, abs=1e-7)
    assert mu_of_tradeoff(LaplaceTradeOff(1.0)) == pytest.approx(1.0300640, abs=1e-7)
    assert certified_mu(GaussianTradeOff(0.8)) == 0.8


def test_margin_on_a_non_symmetric_object():
    # GroupTradeOff is not flagged symmetric, so the check runs over all of [0, 1]; the
    # group of Lap(1) for k = 2 is Lap(2), whose μ is −2Φ⁻¹(e^{−1}/2) = 1.8009052 (digest §2.5).
    g = GroupTradeOff(LaplaceTradeOff(1.0), 2)
    assert not g.symmetric
    mu = mu_laplace_tight(2.0)
    assert mu == pytest.approx(1.8009052, abs=1e-7)
    assert gdp_margin(g, mu * (1 + 1e-7)).passed
    assert not gdp_margin(g, mu * (1 - 1e-7)).passed


def test_margin_extreme_mu():
    # tiny and large μ stay certifiable (values compared as 1 − T near α = 0)
    for mu in (1e-3, 20.0):
        eps = eps_laplace_tight(mu)
        assert gdp_margin(LaplaceTradeOff(eps * (1 - 1e-6)), mu).passed
        assert not gdp_margin(LaplaceTradeOff(eps * (1 + 1e-6)), mu).passed


def test_gaussian_margin_is_exact():
    assert gdp_margin(GaussianTradeOff(1.0), 1.0).passed
    assert not gdp_margin(GaussianTradeOff(1.0 + 1e-12), 1.0).passed
