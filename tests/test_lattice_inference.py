"""Inference on the discrete law (issue 39): the region's coverage and the test's level and power for independent
N_ℤ(0, σ_i²) noise, and the families that predict ci_volume / test_power from them.

Sources of the expected values:

* **brute-force enumeration**: the pmf of N_ℤ(0, σ²), exp(−k²/(2σ²))/Σ_j exp(−j²/(2σ²)), summed here in 40-digit
  mpmath over |k| ≤ √(160σ²) (the mass beyond is below e^{−80}); the law of Q = Σ η_i²/σ_i² and of the test
  statistic T = Σ w_i η_i are enumerated over all tuples (exact rational values of Q, integer values of T);
* **simulation**: draws of the exact sampler (CKS 2020, Algorithm 3, :func:`sample_discrete_gaussian`) with fixed
  seeds; the tolerances are 4 standard errors of a binomial proportion, √(p(1 − p)/n), derived in each test;
* the module's own guarantees (its docstring): coverage ≥ 1 − α and level ≤ α proven; the radius less than
  (d + 1)h above the exact quantile; the power within κ + 2·slack below the test's exact power.
"""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction
from itertools import product

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.mechanisms.lattice import _inference
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.stats import lattice_inference
from dpopt.stats.inference import log_unit_ball_volume
from dpopt.stats.lattice_inference import (FLOAT_SLACK, GRID_STEPS, TRUNCATION, VOLUME_EXCESS, _Coverage, _grid,
                                           _power_region, lattice_region, lattice_test)

SIGMA2 = (Fraction(1, 2), Fraction(9, 4), Fraction(4))
ALPHA = 0.05


def _pmf(sigma2: Fraction, top: int | None = None) -> dict[int, mpmath.mpf]:
    """The pmf over |k| ≤ top; by default top = ⌈√(160σ²)⌉, beyond which the mass is below e^{−80}."""
    top = math.isqrt(math.ceil(160 * sigma2)) + 1 if top is None else top
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    weights = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-top, top + 1)}
    total = mpmath.fsum(weights.values())
    return {k: w / total for k, w in weights.items()}


@pytest.fixture(scope="module")
def q_law() -> list[tuple[Fraction, mpmath.mpf]]:
    """The exact law of Q = Σ η_i²/σ_i² for SIGMA2, sorted by value."""
    with mpmath.workdps(40):
        law = {Fraction(0): mpmath.mpf(1)}
        for s2 in SIGMA2:
            folded: dict[int, mpmath.mpf] = {}
            for k, p in _pmf(s2).items():
                folded[abs(k)] = folded.get(abs(k), 0) + p
            step: dict[Fraction, mpmath.mpf] = {}
            for (q, p), (k, pk) in product(law.items(), folded.items()):
                value = q + Fraction(k * k) / s2
                step[value] = step.get(value, 0) + p * pk
            law = step
        return sorted(law.items())


def _exact_coverage(law, radius: Fraction) -> float:
    return float(mpmath.fsum(p for q, p in law if q <= radius))


def test_region_coverage_against_enumeration(q_law):
    region = lattice_region(SIGMA2, ALPHA)
    exact = _exact_coverage(q_law, region.radius)
    # proven: the exact coverage is at least the stated bound, which is at least 1 − α
    assert exact >= region.coverage >= 1 - ALPHA
    # the radius is less than (d + 1)h above the exact 1 − α quantile of Q
    cumulative, quantile = mpmath.mpf(0), None
    for q, p in q_law:
        cumulative += p
        if cumulative >= 1 - ALPHA:
            quantile = q
            break
    h = _grid(len(SIGMA2), ALPHA)
    assert quantile <= region.radius < quantile + (len(SIGMA2) + 1) * h
    # the volume is V_3 r^{3/2} Π σ_i (V_3 = 4π/3)
    assert region.volume == pytest.approx(4 * math.pi / 3 * float(region.radius) ** 1.5
                                          * math.sqrt(float(SIGMA2[0] * SIGMA2[1] * SIGMA2[2])), rel=1e-12)


def test_region_coverage_by_simulation():
    region = lattice_region(SIGMA2, ALPHA)
    rng = np.random.default_rng(39)
    n = 200_000
    eta = np.column_stack([sample_discrete_gaussian(rng, s.numerator, s.denominator, n) for s in SIGMA2])
    inside = np.mean([region.contains(row, np.zeros(3)) for row in eta[:500]])  # the rational membership test
    q = (eta.astype(float) ** 2) @ np.array([1 / float(s) for s in SIGMA2])
    fraction = float(np.mean(q <= float(region.radius)))
    # SE of a proportion near 0.95 from n draws: √(0.95·0.05/n) ≈ 4.9e-4; 4 SE
    se = math.sqrt(0.95 * 0.05 / n)
    assert fraction >= region.coverage - 4 * se
    assert abs(inside - float(np.mean(q[:500] <= float(region.radius)))) == 0.0


def _t_law(sigma2s, weights) -> dict[int, mpmath.mpf]:
    """The exact law of T = Σ w_i η_i by enumeration."""
    law = {0: mpmath.mpf(1)}
    for s2, w in zip(sigma2s, weights):
        step: dict[int, mpmath.mpf] = {}
        for (t, p), (k, pk) in product(law.items(), _pmf(s2).items()):
            step[t + w * k] = step.get(t + w * k, 0) + p * pk
        law = step
    return law


@pytest.mark.parametrize("sigma2s, shift", [((Fraction(4), Fraction(9, 4)), (3, -2)),
                                            ((Fraction(2130631, 32768),), (20,)),
                                            ((Fraction(1, 2), Fraction(1, 2)), (1, 1))])
def test_level_and_power_against_enumeration(sigma2s, shift):
    test = lattice_test(sigma2s, shift, ALPHA)
    # NP weights: proportional to a_i/σ_i², coprime integers
    ratios = [Fraction(a) / s for a, s in zip(shift, sigma2s)]
    assert all(w * ratios[0] == r * test.weights[0] for w, r in zip(test.weights, ratios))
    assert math.gcd(*test.weights) == 1
    with mpmath.workdps(40):
        law = _t_law(sigma2s, test.weights)
        s = sum(w * a for w, a in zip(test.weights, shift))
        c, gamma = test.critical, mpmath.mpf(test.randomization)
        level = mpmath.fsum(p for t, p in law.items() if t > c) + gamma * law.get(c, 0)
        power = mpmath.fsum(p for t, p in law.items() if t + s > c) + gamma * law.get(c - s, 0)
    slack = TRUNCATION * ALPHA + 2 * FLOAT_SLACK
    # proven: the exact level is at most α (and the stated bound), within the cut mass and slack of α
    assert float(level) <= test.level <= ALPHA
    assert float(level) >= ALPHA - slack
    # proven: the stated power is a lower bound, within κ + 2·slack of the exact power
    assert test.power <= float(power) <= test.power + slack


def test_one_coordinate_test_is_the_threshold_on_the_count():
    """With one coordinate the NP test is a threshold on η: c is the smallest whole number with P(η > c) ≤ α
    (enumeration), and γ = (α − P(η > c))/P(η = c) up to the stated slack."""
    s2 = Fraction(2130631, 32768)
    test = lattice_test([s2], [20], ALPHA)
    with mpmath.workdps(40):
        pmf = _pmf(s2)
        above = {c: mpmath.fsum(p for k, p in pmf.items() if k > c) for c in range(0, 40)}
    c = min(c for c, p in above.items() if p <= ALPHA)
    assert test.critical == c and test.weights == (1,)
    assert test.randomization == pytest.approx(float((ALPHA - above[c]) / pmf[c]), abs=1e-6)


def test_test_by_simulation():
    """Rejections of the randomised test on draws of the exact sampler under H0 and H1: 4 SE of a proportion."""
    sigma2s, shift = (Fraction(4), Fraction(9, 4)), (3, -2)
    test = lattice_test(sigma2s, shift, ALPHA)
    rng = np.random.default_rng(7)
    n = 100_000
    eta = np.column_stack([sample_discrete_gaussian(rng, s.numerator, s.denominator, n) for s in sigma2s])
    w = np.array(test.weights)
    for hypothesis, target in ((np.zeros(2), test.level), (np.array(shift), test.power)):
        t = (eta + hypothesis.astype(int)) @ w
        rejected = np.mean((t > test.critical) + test.randomization * (t == test.critical))
        assert abs(rejected - target) <= 4 * math.sqrt(target * (1 - target) / n) + TRUNCATION * ALPHA
    decisions = [test.reject(row + shift, np.zeros(2), rng) for row in eta[:5000]]
    assert abs(np.mean(decisions) - test.power) <= 4 * math.sqrt(test.power * (1 - test.power) / 5000)


# ---------------------------------------------------------------- the families
COUNTS = {"dpopt": 1, "name": "three counts", "data": {"attributes": {"x": ["a", "b", "c"]}},
          "query": {"kind": "histogram", "attribute": "x"}, "adjacency": "add_remove",
          "privacy": {"zcdp": {"rho": 0.5}}}


@pytest.mark.parametrize("family", ["gaussian", "query_scaling"])
@pytest.mark.parametrize("utility", [{"metric": "ci_volume", "alpha": 0.05},
                                     {"metric": "test_power", "alternative": [2, 1, 0], "alpha": 0.05}])
def test_families_measure_exactly_and_verify(family, utility):
    solution = dpopt.solve({**COUNTS, "mechanism": family, "utility": utility})
    mechanism, cert = solution.mechanism, solution.certificate
    assert mechanism.sampler == "exact"
    assert cert["utility"]["method"].startswith("exact law of the discrete noise")
    assert "idealized" not in " ".join(mechanism.notes())
    verification = dpopt.verify(cert)
    assert verification.passed, [c.claim for c in verification.failed]
    claims = {c.claim: c for c in verification.checks}
    assert claims["utility.sampler"].passed and "exact law" in claims["utility.sampler"].detail


def test_prediction_is_the_module_s_for_the_lattice_variances():
    """The predicted test_power of query scaling is the module's test at the recorded lattice variances and the
    whole shift on the noisy coordinates (independent re-derivation from the parameters)."""
    utility = {"metric": "test_power", "alternative": [2, 1, 0], "alpha": 0.05}
    solution = dpopt.solve({**COUNTS, "mechanism": "query_scaling", "utility": utility})
    p = solution.mechanism.parameters
    noisy = [i for i, v in enumerate(p["lattice_variances"]) if v is not None]
    test = lattice_test([Fraction(p["lattice_variances"][i]) for i in noisy],
                        [utility["alternative"][i] for i in noisy], 0.05)
    assert solution.certificate["utility"]["value"] == test.power


def test_forged_region_or_variance_fails_verification():
    utility = {"metric": "ci_volume", "alpha": 0.05}
    solution = dpopt.solve({**COUNTS, "mechanism": "query_scaling", "utility": utility})
    forged = copy.deepcopy(solution.certificate.data)
    method = forged["utility"]["method"]
    radius = method.split("r = ")[1].split(" ")[0]
    forged["utility"]["method"] = method.replace(f"r = {radius}", f"r = {Fraction(radius) * Fraction(9, 10)}")
    forged["utility"]["value"] *= 0.9**1.5
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}
    forged = copy.deepcopy(solution.certificate.data)
    variances = forged["mechanism"]["parameters"]["lattice_variances"]
    variances[0] = str(Fraction(variances[0]) / 2)  # smaller noise: the region and the privacy move
    failed = {c.claim for c in dpopt.verify(forged).failed}
    assert {"privacy", "utility"} <= failed


@pytest.mark.parametrize("family", ["gaussian", "query_scaling"])
def test_fractional_alternative_keeps_the_floating_point_sampler(family):
    utility = {"metric": "test_power", "alternative": [0.5, 1, 0], "alpha": 0.05}
    mechanism = dpopt.solve({**COUNTS, "mechanism": family, "utility": utility}).mechanism
    notes = " ".join(mechanism.notes())
    assert mechanism.sampler == "floating_point" and "whole-number shift" in notes and "idealized" in notes


def test_region_beyond_the_convolution_budget_keeps_the_floating_point_sampler(monkeypatch):
    """80 noisy coordinates at ρ = 5·10⁻⁷ (σ_ℤ² = 1/(2ρ) = 10⁶) with MAX_POWER_SUPPORT lowered to 2¹⁶ (a test hook):
    the grid of VOLUME_EXCESS needs 1.02·d·⌈(d + 1)/(2·VOLUME_EXCESS)⌉ + d ≈ 3.0·10⁶ points, h = 1/σ² about
    1.1·t·σ² ≈ 1.2·10⁸, and the coarsened grid ⌊(2¹⁶ − 82)/(1.02·80)⌋ = 802 steps has (d + 1)/(d·802) > 10⁻³
    (MAX_RADIUS_EXCESS): the family keeps the floating-point sampler and says why. (At the real budget the
    coarsened grid serves: tests/test_lattice_grouped_regions.py.)"""
    monkeypatch.setattr(lattice_inference, "MAX_POWER_SUPPORT", 2**16)
    _inference.cache_clear()
    cells = [f"v{i}" for i in range(80)]
    spec = {**COUNTS, "data": {"attributes": {"x": cells}}, "privacy": {"zcdp": {"rho": 5e-7}},
            "mechanism": "gaussian", "utility": {"metric": "ci_volume", "alpha": 0.05}}
    try:
        mechanism = dpopt.solve(spec).mechanism
    finally:
        _inference.cache_clear()
    assert mechanism.sampler == "floating_point" and "convolution budget" in " ".join(mechanism.notes())


def test_a_region_that_is_a_point_keeps_the_floating_point_sampler():
    """ρ = 50: σ_ℤ² ≈ 1/100 and P(η ≠ 0) ≈ 2e^{−50} per count, so P(Q = 0) ≥ 0.95 and the region is a point."""
    region = lattice_region([Fraction(1, 100)] * 3, ALPHA)
    assert region.radius == 0 and region.volume == 0.0
    spec = {**COUNTS, "privacy": {"zcdp": {"rho": 50}}, "mechanism": "gaussian",
            "utility": {"metric": "ci_volume", "alpha": 0.05}}
    mechanism = dpopt.solve(spec).mechanism
    assert mechanism.sampler == "floating_point" and "region is a point" in " ".join(mechanism.notes())


# ------------------------------------------------------------ i.i.d. coordinates: the convolution power
def _s_law(sigma2: Fraction, d: int, top: int) -> list[mpmath.mpf]:
    """P(S = s), s = 0..top, S = Σ_{i≤d} η_i² for i.i.d. N_ℤ(0, σ²): the law of η² (mass of ±k at k²) convolved
    d times in 40-digit mpmath, truncated at top (nothing beyond top enters a sum ≤ top)."""
    with mpmath.workdps(40):
        square = [mpmath.mpf(0)] * (top + 1)
        for k, p in _pmf(sigma2).items():
            if k * k <= top:
                square[k * k] += p
        law = square
        for _ in range(d - 1):
            law = [mpmath.fsum(law[i] * square[s - i] for i in range(s + 1) if square[s - i]) for s in range(top + 1)]
        return law


@pytest.mark.parametrize("sigma2, d", [(Fraction(2), 5), (Fraction(2), 8), (Fraction(9, 4), 6), (Fraction(1, 2), 7),
                                       (Fraction(50), 5)])
def test_iid_region_is_the_exact_quantile_of_the_sum_of_squares(sigma2, d):
    """h = 1/σ²: k_i = η_i², so the radius is q/σ², q the exact 1 − α quantile of S = Σ η_i² (no grid excess),
    unless the exact law's distribution function at q lies within the slack of 1 − α (checked not to)."""
    region = lattice_region([sigma2] * d, ALPHA)
    top = math.ceil(1.5 * stats.chi2.isf(ALPHA, d) * sigma2) + d
    law = _s_law(sigma2, d, top)
    cumulative = list(itertools.accumulate(law))
    q = next(s for s, c in enumerate(cumulative) if c >= 1 - ALPHA)
    assert cumulative[q] >= 1 - ALPHA + 1e-6  # far from the slack (d·FLOAT_SLACK + the FFT's bound ≤ 10⁻⁸)
    assert region.radius == Fraction(q) / sigma2
    assert float(cumulative[q]) >= region.coverage >= 1 - ALPHA
    assert region.coverage == pytest.approx(float(cumulative[q]), abs=d * FLOAT_SLACK + 1e-8)


def _old_region(sigma2s, alpha):
    """The region as computed before the convolution power (d − 1 direct convolutions on h = t/(d·4096))."""
    h = _grid(len(sigma2s), alpha)
    top = math.ceil(Fraction(11, 10) * Fraction(stats.chi2.isf(alpha, len(sigma2s))) / h) + len(sigma2s)
    coverage = _Coverage(tuple(sigma2s), h, top)
    j = next(j for j in range(top + 1) if coverage(j) >= 1 - alpha)
    return j * h, coverage(j)


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(9, 4), Fraction(4), Fraction(2130631, 32768),
                                    Fraction(10**6)])
@pytest.mark.parametrize("d", [2, 3, 4])
def test_iid_region_is_at_least_as_tight_as_the_old_path(sigma2, d):
    """The convolution power (which serves from 5 coordinates) on d ≤ 4: either h = 1/σ² (the exact quantile: never above the old grid's bound, itself ≥ the exact quantile) or the
    old grid h = t/(d·4096) with the same laws: the same radius unless the old coverage at it lies within the new
    slack ((d − 1)·FLOAT_SLACK more) of 1 − α."""
    assert lattice_region([sigma2] * d, ALPHA).grid is None  # up to 4 coordinates the old path serves
    region = _power_region((Fraction(sigma2),) * d, ALPHA)  # the convolution power, one group
    old_radius, old_coverage = _old_region([sigma2] * d, ALPHA)
    if region.grid == 1 / sigma2:
        assert region.radius <= old_radius
    else:
        assert region.grid == _grid(d, ALPHA)
        assert region.radius == old_radius or old_coverage < 1 - ALPHA + d * FLOAT_SLACK
        assert region.coverage <= old_coverage


@pytest.mark.parametrize("d", [5, 10])
def test_iid_region_at_large_variance_converges_to_the_chi2_quantile(d):
    """σ² = 10¹⁰ (σ = 10⁵): each P(η²/σ² ≤ x) = P(|η| ≤ ⌊σ√x⌋) is within ε₁ = 0.4/σ + 0.2/σ² of P(Z² ≤ x) (the
    midpoint rule Σ_{|k|≤m} φ_σ(k) = P(|σZ| ≤ m + 1/2) ± (2m + 1)/(24√(2π)σ³), and m + 1/2 within 1/(2σ) of σ√x
    where the density of |σZ| is ≤ 0.8/σ; the discrete normaliser is σ√(2π)(1 + O(e^{−2π²σ²}))), so the law of Q
    within d·ε₁ of χ²_d (Kolmogorov distance of independent sums ≤ the sum of the marginals'). The exact quantile q
    then lies in [χ²_d.isf(α + d·ε₁), χ²_d.isf(α − d·ε₁)], and q ≤ r < q + (d + 1)h (the module's grid excess;
    the slack d·FLOAT_SLACK + the FFT's bound ≤ 10⁻⁷ moves the upper end by less than 10⁻⁴ of a grid step)."""
    sigma2 = Fraction(10**10)
    region = lattice_region([sigma2] * d, ALPHA)
    sigma = 10**5
    eps = d * (0.4 / sigma + 0.2 / sigma**2)
    low, high = stats.chi2.isf(ALPHA + eps, d), stats.chi2.isf(ALPHA - eps - 1e-7, d)
    h = region.grid
    assert h == Fraction(math.ceil(stats.chi2.isf(ALPHA, d) * 10**6), 10**6 * d * max(GRID_STEPS, math.ceil(
        (d + 1) / (2 * VOLUME_EXCESS))))
    assert low <= float(region.radius) < high + float((d + 1) * h)
    # the volume against the continuous region V_d t^{d/2} σ^d: within the grid excess and the law's distance
    t = stats.chi2.isf(ALPHA, d)
    assert (low / t) ** (d / 2) <= region.volume / (math.exp(log_unit_ball_volume(d)) * t ** (d / 2) * sigma**d) \
        < ((high + float((d + 1) * h)) / t) ** (d / 2)


def test_iid_budget_boundary_at_large_variance():
    """σ² = 10⁶ (h = 1/σ² would need ⌈1.1tσ²⌉ + d ≈ 10⁸ points): d = 66 fits MAX_POWER_SUPPORT = 2²¹ on the grid of
    VOLUME_EXCESS (1.02·66·⌈67/0.0022⌉ + 66 ≈ 2.05·10⁶ points: its grid and radius as before), d = 67 does not
    (≈ 2.11·10⁶): its grid is coarsened to ⌊(2²¹ − 69)/(1.02·67)⌋ steps, (d + 1)h ≤ t/1000."""
    region = lattice_region([Fraction(10**6)] * 66, ALPHA)
    # the FFT's stated rounding (Higham's bound × FFT_SAFETY) stays below 10⁻⁷ of coverage at this largest support
    assert region is not None and region.coverage >= 1 - ALPHA and 0.0 < region.fft_error < 1e-7
    assert region.radius >= stats.chi2.isf(ALPHA + 66 * (0.4 / 1000 + 0.2 / 10**6), 66)  # test above: q ≥ this
    t = Fraction(math.ceil(stats.chi2.isf(ALPHA, 66) * 10**6), 10**6)
    assert region.grid == t / (66 * math.ceil(67 / 0.0022)) and not region.stated_excess
    t = Fraction(math.ceil(stats.chi2.isf(ALPHA, 67) * 10**6), 10**6)
    steps = math.floor((2**21 - 69) / (1.02 * 67))
    h, top, coarsened = lattice_inference._power_grid((Fraction(10**6),) * 67, ALPHA, 1)
    assert coarsened and h == t / (67 * steps) and top + 1 <= 2**21 and 68 * h <= t / 1000
