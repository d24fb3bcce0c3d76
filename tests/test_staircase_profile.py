"""The staircase's exact (ε, δ) profile (dpopt.privacy.staircase_profile) and its calibration (issue 26).

References, independent of the module:
- the loss pmf by brute force: the density and its shift on a fine grid (StaircaseNoise.density), the
  loss log f(x)/f(x − m) rounded to ε₀ℤ, masses Σ f·dx; each break point misplaces at most f·dx, and
  the break points (four families, Δ₀ ≥ 0.25 apart in each) weigh Σ f ≤ 4·(1/Δ₀ + max f) ≤ 4·(4 + 4),
  so the error is ≤ 32·dx = 32·4e-5 ≈ 1.3e-3 (plus the mass beyond ±40, < 1e-6); 2e-3 allowed;
- one coordinate moved by exactly one step, derived by hand: the loss is +ε₀ on x ≤ 0 (mass ½) and on
  (0, min(g, 1 − g)Δ₀) (mass a·Δ₀·min(g, 1 − g)), so δ(ε) = p₊(1 − e^{ε − ε₀}), p₊ = ½ + aΔ₀ min(g, 1 − g);
- randomized response at ε₁ = ε₀K bounds every ε₁-DP mechanism (Kairouz, Oh & Viswanath 2015);
- dpopt verify's second route: the numerical PLD of the noise law (dpopt.privacy.pld).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.staircase import l1_optimal_g
from dpopt.noise.staircase import StaircaseNoise
from dpopt.privacy.pure_conversion import rr_delta_mp
from dpopt.privacy.staircase_profile import staircase_delta_mp, staircase_loss_pmf


@pytest.mark.parametrize("epsilon0, step, g, shift", [
    (1.0, 1.0, 0.3, 1.0), (0.7, 0.5, 0.8, 1.3), (2.0, 1.0, 0.0, 0.25), (0.5, 0.4, 1.0, 1.0), (1.3, 0.3, 0.5, 0.1),
])
def test_loss_pmf_against_brute_force(epsilon0, step, g, shift):
    pmf = staircase_loss_pmf(epsilon0, step, g, shift)
    assert float(sum(pmf.values())) == pytest.approx(1.0, abs=1e-14)
    noise = StaircaseNoise(epsilon0, step, g)
    x = np.linspace(-40.0, 40.0, 2_000_001)
    f, q = noise.density(x), noise.density(x - shift)
    keep = f > 1e-300
    loss = np.rint(np.log(f[keep] / q[keep]) / epsilon0).astype(int)
    dx = x[1] - x[0]
    brute = {int(j): float(np.sum(f[keep][loss == j]) * dx) for j in np.unique(loss)}
    for j in set(brute) | set(pmf):
        assert float(pmf.get(j, 0)) == pytest.approx(brute.get(j, 0.0), abs=2e-3)


@pytest.mark.parametrize("epsilon, epsilon0, g", [(0.0, 1.0, 0.5), (0.3, 1.0, 0.2), (0.9, 1.5, 0.7)])
def test_one_step_closed_form(epsilon, epsilon0, g):
    b = math.exp(-epsilon0)
    a = (1 - b) / (2 * (g + (1 - g) * b))  # Δ₀ = 1
    expected = (0.5 + a * min(g, 1 - g)) * -math.expm1(epsilon - epsilon0)
    assert float(staircase_delta_mp(epsilon, epsilon0, 1.0, g, [Fraction(1)])) == pytest.approx(expected, rel=1e-13)


@pytest.mark.parametrize("epsilon, epsilon0, step, g, shifts", [
    (0.5, 0.5, 1.0, 0.4, [1, 1]), (0.5, 0.2, 0.25, 0.5, [1, 1]), (2.0, 1.0, 0.5, 0.1, [1, 0.5, 0.5]),
])
def test_never_above_randomized_response(epsilon, epsilon0, step, g, shifts):
    k = sum(math.ceil(m / step) for m in shifts)
    exact = staircase_delta_mp(epsilon, epsilon0, step, g, [Fraction(m) for m in shifts])
    assert exact <= rr_delta_mp(Fraction(epsilon0) * k, epsilon)
    assert exact < 0.9 * rr_delta_mp(Fraction(epsilon0) * k, epsilon)  # and strictly tighter on these moves


def _spec(privacy: dict) -> dict:
    return {
        "dpopt": 1,
        "name": "staircase exact profile",
        "data": {"attributes": {"x": ["a", "b"]}},
        "query": {"kind": "histogram", "attribute": "x"},
        "adjacency": {"kind": "replace_one"},
        "privacy": privacy,
        "mechanism": "staircase",
        "utility": {"metric": "l1"},
        "sampler": "floating_point",  # the continuous law's profile (on counts the default is the discrete staircase)
    }


def test_approx_design_beats_the_generic_conversion_and_verifies():
    """(1, 0.01) on a replace-one histogram of two cells: measured l1 3.853 against 3.904 generic."""
    target = {"epsilon": 1.0, "delta": 0.01}
    solution = dpopt.solve(_spec({"approx": target}))
    # the generic conversion: ε₁ = log((e^ε + δ)/(1 − δ)) through randomized response, 2 steps per move
    generic = dpopt.solve(_spec({"pure": {"epsilon": math.log((math.exp(1.0) + 0.01) / 0.99)}}))
    assert solution.certificate["utility"]["value"] < 0.99 * generic.certificate["utility"]["value"]
    check = next(c for c in solution.certificate["checks"] if c["claim"] == "privacy")
    assert check["passed"] and "exact staircase privacy-loss distribution" in check["method"]
    assert dpopt.verify(solution.certificate).passed
    # the calibration is tight: 1e-6 more ε₀ (with its l1-optimal g, G&V Thm 4) breaks the target
    n = solution.mechanism.noise
    e0 = n.epsilon0 * (1 + 1e-6)
    assert staircase_delta_mp(1.0, e0, n.step, l1_optimal_g(e0), [Fraction(1), Fraction(1)]) > 0.01


@pytest.mark.parametrize("alpha", [2.0, 5.0])
def test_renyi_divergence_against_quadrature(alpha):
    """D_α of a move (1, 0.5) at Δ₀ = 0.4 from the pmf (Arb ball) against scipy quadrature of
    ∫ f^α q^{1−α} per coordinate (product over coordinates), split at the density's break points
    (piecewise constant integrand: quad is exact up to its 1e-12 tolerance)."""
    from scipy import integrate

    from dpopt.privacy.staircase_profile import staircase_move_pmf, staircase_renyi_ball

    epsilon0, step, g = 0.7, 0.4, 0.3
    noise = StaircaseNoise(epsilon0, step, g)
    log_total = 0.0
    for m in (1.0, 0.5):
        edges = sorted({o + s * (g + k) * step for o in (0.0, m) for s in (1, -1) for k in range(200)} | {0.0, m})
        parts = [integrate.quad(lambda x: noise.density(x) ** alpha * noise.density(x - m) ** (1 - alpha), a, b,
                                epsabs=1e-15, epsrel=1e-12)[0] for a, b in zip(edges, edges[1:])]
        log_total += math.log(math.fsum(parts))
    expected = log_total / (alpha - 1)
    law = staircase_move_pmf(epsilon0, step, g, [Fraction(1), Fraction(1, 2)])
    ball = staircase_renyi_ball(law, epsilon0)(alpha)
    assert float(ball.mid()) == pytest.approx(expected, rel=1e-9)


def test_zcdp_design_adds_divergences_over_coordinates_and_verifies():
    """ρ = 0.5 on a replace-one histogram: the exact Rényi divergences of the two one-step coordinates add,
    where the generic route pays randomized response at ε₀·K; measured l2 6.383 against 14.52 on two cells."""
    from dpopt.privacy.pure_conversion import pure_epsilon_for
    from dpopt.spec.models import Privacy

    spec = {**_spec({"zcdp": {"rho": 0.5}}), "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    generic = dpopt.solve({**spec, "privacy": {"pure": {"epsilon": pure_epsilon_for(Privacy(zcdp={"rho": 0.5}))}}})
    assert solution.certificate["utility"]["value"] < 0.5 * generic.certificate["utility"]["value"]
    check = next(c for c in solution.certificate["checks"] if c["claim"] == "privacy")
    assert check["passed"] and "Rényi divergences D_α ≤ ρα" in check["method"]
    assert dpopt.verify(solution.certificate).passed


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 0.9])
def test_tradeoff_conjugate_gives_back_the_profile(epsilon):
    """δ(ε) = 1 + T*(−e^ε) = max_α 1 − T(α) − e^ε α (Dong, Roth & Su 2022, Prop. 2.12), attained at a vertex
    of the piecewise-linear T, against the profile summed directly (staircase_delta_mp)."""
    from dpopt.privacy.staircase_profile import LossPMFTradeOff, staircase_move_pmf

    shifts = [Fraction(1), Fraction(1, 2)]
    tradeoff = LossPMFTradeOff(staircase_move_pmf(0.7, 0.4, 0.3, shifts), 0.7)
    alpha = np.linspace(0.0, 1.0, 200_001)
    conjugate = float(np.max(1.0 - tradeoff(alpha) - math.exp(epsilon) * alpha))
    vertices = float(np.max(1.0 - tradeoff(tradeoff._alpha) - math.exp(epsilon) * tradeoff._alpha))
    exact = float(staircase_delta_mp(epsilon, 0.7, 0.4, 0.3, shifts))
    assert vertices == pytest.approx(exact, rel=1e-12, abs=1e-15)
    assert conjugate <= vertices + 1e-15


def test_gdp_design_beats_randomized_response_and_verifies():
    """μ = 1 on a replace-one histogram: the move's exact trade-off function against G_μ, where the generic
    route needs ε₀K ≤ log(Φ(μ/2)/Φ(−μ/2)); measured l1 2.735 against 4.923 on two cells."""
    from dpopt.privacy.pure_conversion import pure_epsilon_for
    from dpopt.spec.models import Privacy

    solution = dpopt.solve(_spec({"gdp": {"mu": 1.0}}))
    generic = dpopt.solve(_spec({"pure": {"epsilon": pure_epsilon_for(Privacy(gdp={"mu": 1.0}))}}))
    assert solution.certificate["utility"]["value"] < 0.6 * generic.certificate["utility"]["value"]
    check = next(c for c in solution.certificate["checks"] if c["claim"] == "privacy")
    assert check["passed"] and "trade-off function T ≥ G_μ" in check["method"]
    assert dpopt.verify(solution.certificate).passed


@pytest.mark.parametrize("epsilon0, step, g, shifts", [
    (1.0, 1.0, 0.3, [1.0]), (0.7, 0.5, 0.8, [1.3, 0.5]), (0.5, 0.4, 1.0, [1.0, 1.0]), (1.3, 0.3, 0.5, [0.1, 7.5]),
    (0.012987114889818067, 1.0, 0.4989177409314891, [1.0, 75.0, 1.0]), (0.0053, 1 / 3, 0.4995, [1.0, 42.0]),
])
def test_double_precision_search_profile_against_60_digits(epsilon0, step, g, shifts):
    """The search's double-precision pmf, δ(ε), KL and trade-off function (dpopt.privacy.staircase_search) against
    the 60-digit profile (itself checked by brute force above). The search lets double precision decide a step
    only farther than 10⁻¹¹ (relative) from its target (staircase._UNDECIDED): the sums are of positive terms
    (KL: of at most ~10³ terms whose |j|ε₀ sum to a few times the KL), each from a few dozen roundings, so
    relative errors of ~10⁻¹³ are the most they should carry; 10⁻¹² is asserted."""
    from dpopt.privacy import staircase_search as search
    from dpopt.privacy.staircase_profile import LossPMFTradeOff, staircase_kl, staircase_move_pmf

    exact = staircase_move_pmf(epsilon0, step, g, [Fraction(m) for m in shifts])
    j0, masses = law = search.move_pmf(epsilon0, step, g, shifts)
    for j, mass in exact.items():
        if mass > 1e-300:
            assert masses[j - j0] == pytest.approx(float(mass), rel=1e-12)
    assert search.kl(epsilon0, law) == pytest.approx(staircase_kl(exact, epsilon0), rel=1e-12)
    for epsilon in (0.0, 0.3, 1.0, 2.0):
        reference = float(staircase_delta_mp(epsilon, epsilon0, step, g, [Fraction(m) for m in shifts]))
        assert search.delta(epsilon, epsilon0, law) == pytest.approx(reference, rel=1e-12, abs=1e-300)
    alpha = np.linspace(0.0, 1.0, 1001)
    assert LossPMFTradeOff.in_double_precision(law, epsilon0)(alpha) == pytest.approx(
        LossPMFTradeOff(exact, epsilon0)(alpha), abs=1e-14)


def test_approx_check_reads_the_target_as_written():
    """δ is read as the decimal written (dpopt.core.decimals): a staircase whose exact δ(ε) lies between the
    decimal D and the float nearest to D (above it) meets the float but not D, so its check fails; the design
    for D itself passes. D is found by moving ε₀ until the exact δ sits just below a float x whose repr
    spells a decimal below x (then D = repr(x), float(D) = x and float_below(D) is the float before x)."""
    from dpopt.core.decimals import float_below, written
    from dpopt.mechanisms.staircase import StaircaseMechanism

    spec = _spec({"approx": {"epsilon": 1.0, "delta": 0.01}})
    space = dpopt.derive(dpopt.load_spec(spec))
    moves = [Fraction(1), Fraction(1)]
    for k in range(200):
        epsilon0 = 0.6 + 1e-3 * k
        g = l1_optimal_g(epsilon0)
        exact = staircase_delta_mp(1.0, epsilon0, 1.0, g, moves)
        x = math.nextafter(float(exact), math.inf)
        if float(exact) < x and Fraction(x) > written(repr(x)) and exact > float_below(repr(x)):
            break
    else:
        pytest.fail("no ε₀ put δ(ε) between a decimal and its float")
    target = {"approx": {"epsilon": 1.0, "delta": x}}  # a float counts as its repr, D
    mechanism = StaircaseMechanism(epsilon0, 1.0, g, 2, "l1-optimal")
    [check] = mechanism._privacy_checks(space, dpopt.load_spec({**spec, "privacy": target}).privacy)
    assert exact <= x and not check.passed
    solution = dpopt.solve({**spec, "privacy": target})
    assert next(c for c in solution.certificate["checks"] if c["claim"] == "privacy")["passed"]
