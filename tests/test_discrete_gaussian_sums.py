"""The law of S = ⟨η, v⟩ for i.i.d. N_ℤ(0, σ²) noise, shared per σ² (dpopt.privacy.discrete_gaussian_sums), the pDP
level read from it (dpopt.privacy.discrete_gaussian_pdp.pdp_level) and the σ² search on it (pattern_pdp_sigma2).

Expected values, none from the code under test:
- δ(v) = P[S > εσ² − ‖v‖²/2] + P[S > εσ² + ‖v‖²/2] (Canonne, Kamath & Steinke 2020: integer shifts, no normaliser
  term) from the law of S convolved coordinate by coordinate in mpmath at 40 digits over |η_i| ≤ 20σ + 1 (the
  mass outside below e^{−200}): no gcd reduction, no powers, no integer scaling;
- the box law as a 60-digit mpmath product of the coordinates' polynomials;
- the previous implementation of the level (one arb_poly factor per coordinate, reproduced below as it stood in
  ce9da87), an independent evaluation order and arithmetic;
- the levels at σ_ℤ² of a person-level spec by double-precision direct convolution (numpy.convolve of positive
  terms: relative error about 10⁻¹³, independent of the FFT estimates), for the minimality of the search.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.core.rounding import ball_upper
from dpopt.mechanisms.integer_noise import dyadic_ceil, move_patterns
from dpopt.privacy.discrete_gaussian_pdp import pdp_level, subgaussian_level, worst_pdp_level
from dpopt.privacy.discrete_gaussian_sums import SCALE_BITS, BoxLaws, box_radius, estimate_error, \
    estimated_levels
from dpopt.sensitivity.person_patterns import table_patterns
from pdp_brute import mp_level


def arb_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """The level as ce9da87 summed it: one arb_poly factor Σ_{|k|≤N} w(k) X^{v_i(k+N)} per coordinate, 128 bits,
    the weights by exponentials, plus the tail bound mT/z."""
    n = box_radius(sigma2)
    span = n * sum(pattern) if len(pattern) > 1 else n
    norm2 = sum(t * t for t in pattern)
    with flint.ctx.workprec(128):
        row = [(-flint.arb(flint.fmpq(k * k * sigma2.denominator, 2 * sigma2.numerator))).exp()
               for k in range(-n, n + 1)]
        z = sum(row, flint.arb(0))
        outer = (-flint.arb(flint.fmpq((n + 1) ** 2 * sigma2.denominator, 2 * sigma2.numerator))).exp()
        r = (-flint.arb(flint.fmpq((n + 1) * sigma2.denominator, sigma2.numerator))).exp()
        tail = 2 * outer / (1 - r)
        unit, law = (pattern[0], row) if len(pattern) == 1 else (1, None)
        if law is None:
            product = flint.arb_poly([1])
            for t in pattern:
                coefficients = [flint.arb(0)] * (2 * n * t + 1)
                coefficients[::t] = row
                product *= flint.arb_poly(coefficients)
            law = [product[j] for j in range(2 * span + 1)]
        mass = flint.arb(0)
        for x in (epsilon * sigma2 - Fraction(norm2, 2), epsilon * sigma2 + Fraction(norm2, 2)):
            mass += sum(law[max(math.floor(x / unit) + 1 + span, 0):], flint.arb(0))
        return ball_upper(mass / z ** len(pattern) + len(pattern) * tail / z)


CASES = [
    (Fraction(7, 2), (1,), Fraction(1)),
    (Fraction(9, 4), (3,), Fraction(1)),                 # one coordinate, g = 3
    (Fraction(8), (1, 1), Fraction(1)),                  # thresholds at integers: S > 7 strictly
    (Fraction(6), (2, 4), Fraction(7, 10)),              # g = 2: S/2 = η₁ + 2η₂
    (Fraction(5), (3, 3, 6), Fraction(1, 2)),            # g = 3, a power (η₁ + η₂) and an inflated factor
    (Fraction(3), (1, 1, 2, 2, 3), Fraction(1)),         # three distinct values, two powers
    (Fraction(25, 8), (1, 1, 1, 1), Fraction(3, 2)),     # one power of four
    (Fraction(12), (1, 2, 2), Fraction(2, 5)),
]


@pytest.mark.parametrize("sigma2, pattern, epsilon", CASES)
def test_the_level_is_a_tight_upper_bound_on_the_mpmath_level(sigma2, pattern, epsilon):
    expected = mp_level(sigma2, pattern, epsilon)
    got = pdp_level(sigma2, pattern, epsilon)
    with mpmath.workdps(50):
        assert mpmath.mpf(got.numerator) / got.denominator >= expected
    assert float(got) <= float(expected) * (1 + 1e-12) + 1e-25


@pytest.mark.parametrize("sigma2, pattern, epsilon", CASES)
def test_the_level_agrees_with_the_per_coordinate_arb_product(sigma2, pattern, epsilon):
    # both are upper bounds of the same box level plus the same tail bound (< 2^-99): equal to 128-bit rounding
    old, new = arb_level(sigma2, pattern, epsilon), pdp_level(sigma2, pattern, epsilon)
    assert abs(new - old) <= old * Fraction(1, 10**30) + Fraction(1, 2**100)


def test_the_levels_of_many_patterns_and_variances_agree_with_the_per_coordinate_product():
    # every replace pattern of ≤ 3 rows on a 3-cell table (18 patterns, up to 6 coordinates), at three σ² whose
    # thresholds fall on and off the integers
    patterns = table_patterns(3, 3, 3, 3, True)
    for sigma2 in (Fraction(60), Fraction(121, 2), Fraction(245, 4)):
        for pattern in patterns:
            old, new = arb_level(sigma2, pattern, Fraction(1)), pdp_level(sigma2, pattern, Fraction(1))
            assert abs(new - old) <= old * Fraction(1, 10**30) + Fraction(1, 2**100), (sigma2, pattern)


@pytest.mark.parametrize("sigma2, pattern", [(Fraction(5, 2), (1, 1, 2)), (Fraction(3), (2, 2, 4, 6)),
                                             (Fraction(7, 4), (1, 1, 1))])
def test_box_law_coefficients_bound_the_exact_box_law_from_above(sigma2, pattern):
    # the box law of S/g: the product of Σ_{|k|≤N} w(k) X^{(v_i/g)(k+N)} over the coordinates, in mpmath at 60
    # digits; the integer polynomial divided by 2^128 is above it coefficientwise and within 10^-30
    law, offset, g = BoxLaws(sigma2).law(pattern)
    n = box_radius(sigma2)
    assert g == math.gcd(*pattern) and offset == n * sum(pattern) // g
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        row = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-n, n + 1)]
        exact = [mpmath.mpf(1)]
        for t in pattern:
            factor = [mpmath.mpf(0)] * (2 * n * (t // g) + 1)
            factor[:: t // g] = row
            exact = [mpmath.fsum(exact[i] * factor[j - i] for i in range(max(0, j - len(factor) + 1),
                                                                           min(j, len(exact) - 1) + 1))
                     for j in range(len(exact) + len(factor) - 1)]
        coefficients = law.coeffs()
        assert len(coefficients) == len(exact)
        for c, e in zip(coefficients, exact):
            bound = mpmath.mpf(int(c)) / mpmath.mpf(2) ** SCALE_BITS
            assert e <= bound <= e + mpmath.mpf(10) ** -30


@pytest.mark.parametrize("sigma2, pattern, epsilon", CASES)
def test_the_double_precision_estimate_is_within_its_budget(sigma2, pattern, epsilon):
    (estimate,) = estimated_levels(sigma2, [pattern], epsilon)
    assert abs(estimate - float(mp_level(sigma2, pattern, epsilon))) <= estimate_error(sigma2, pattern)


def test_estimates_of_a_person_level_pattern_set_are_within_budget_and_screens_bound_the_levels():
    patterns = table_patterns(3, 3, 3, 3, True)
    sigma2, epsilon = Fraction(245, 4), Fraction(1)
    exact = [float(pdp_level(sigma2, p, epsilon)) for p in patterns]
    estimates = estimated_levels(sigma2, patterns, epsilon)
    for pattern, e, x in zip(patterns, estimates, exact):
        assert abs(e - x) <= estimate_error(sigma2, pattern)
    screen = float(np.median(exact))
    screened = estimated_levels(sigma2, patterns, epsilon, screen=screen)
    for pattern, s, e, x in zip(patterns, screened, estimates, exact):
        if s != e:  # screened: its sub-Gaussian bound, above the level and below the screen
            assert x <= s <= screen and s == pytest.approx(float(subgaussian_level(sigma2, pattern, epsilon)))


def direct_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> float:
    """δ(v) in double precision by direct convolution (numpy.convolve: sums of positive terms) over |η| ≤ 13σ."""
    box = int(13 * math.sqrt(sigma2)) + 1
    k = np.arange(-box, box + 1)
    row = np.exp(-(k.astype(float) ** 2) / (2 * float(sigma2)))
    row /= row.sum()
    law, low = np.array([1.0]), 0
    for v in pattern:
        factor = np.zeros(2 * box * v + 1)
        factor[::v] = row
        law, low = np.convolve(law, factor), low - box * v
    norm2 = sum(v * v for v in pattern)
    values = np.arange(low, low + law.size)
    return float(sum(law[values > x].sum() for x in (epsilon * sigma2 - Fraction(norm2, 2),
                                                      epsilon * sigma2 + Fraction(norm2, 2))))


UNITS = {"2-way, <=3 rows": ({"kind": "marginals", "all_of_size": 2}, {"max_rows": 3}),
         "1-way, <=4 rows in <=2 cells, <=3 per cell": ({"kind": "marginals", "all_of_size": 1},
                                                         {"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3})}


@pytest.fixture(scope="module", params=list(UNITS))
def person_solution(request):
    """Person-level marginals over 3 × 2 × 3 levels, replace, (1, 10^-3)-pDP (benchmarks/bench_pdp_patterns.py):
    a hundred move patterns and more."""
    query, unit = UNITS[request.param]
    document = {"dpopt": 1, "name": "person-level marginals under pDP",
                "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"], "c": ["p", "q", "r"]},
                         "privacy_unit": {"id": "pid", **unit}},
                "query": query, "adjacency": {"kind": "replace_one"},
                "privacy": {"pdp": {"epsilon": 1, "delta": 1e-3}}, "mechanism": "gaussian",
                "utility": {"metric": "l2"}}
    solution = dpopt.solve(document)
    return solution, move_patterns(dpopt.derive(dpopt.load_spec(document)))


def test_the_search_passes_every_pattern_and_one_grid_step_below_fails(person_solution):
    solution, patterns = person_solution
    sigma2 = solution.mechanism.lattice_sigma2
    delta = Fraction(1, 1000)
    # every pattern: its exact level, or its sub-Gaussian bound when that is below the largest level (a bound above
    # the level: test_the_sub_gaussian_bound_is_above_the_level of tests/test_person_marginal_pdp.py)
    assert worst_pdp_level(sigma2, patterns, Fraction(1)) <= delta
    # the sampler's grid p/2^k, k = 21 − e at σ² ∈ [2^e, 2^{e+1}): its step there is 2^{e−21}
    step = Fraction(2) ** (math.floor(math.log2(sigma2)) - 21)
    below = sigma2 - step
    assert dyadic_ceil(below) == below and dyadic_ceil(below + step / 2) == sigma2
    failing = next(p for p in sorted(patterns, key=lambda p: -sum(t * t for t in p))
                   if pdp_level(below, p, Fraction(1)) > delta)
    # independently of the integer and FFT evaluations: the direct convolution, 10^-9 relative margins
    assert direct_level(below, failing, Fraction(1)) > 1e-3 * (1 + 1e-9)
    assert direct_level(sigma2, failing, Fraction(1)) < 1e-3 * (1 - 1e-9)


def test_verify_rejects_the_variance_one_grid_step_below(person_solution):
    solution, _ = person_solution
    certificate = json.loads(solution.certificate.to_json())
    assert dpopt.verify(certificate).passed
    sigma2 = Fraction(certificate["mechanism"]["parameters"]["lattice_sigma2"])
    forged = json.loads(json.dumps(certificate))
    below = sigma2 - Fraction(2) ** (math.floor(math.log2(sigma2)) - 21)  # the grid point below (previous test)
    forged["mechanism"]["parameters"]["lattice_sigma2"] = str(below)
    assert "privacy" in {check.claim for check in dpopt.verify(forged).failed}


def test_the_certified_maximum_does_not_depend_on_the_order_of_the_patterns(person_solution):
    solution, patterns = person_solution
    sigma2 = solution.mechanism.lattice_sigma2
    levels = [pdp_level(sigma2, p, Fraction(1)) for p in patterns]
    assert worst_pdp_level(sigma2, patterns, Fraction(1)) == max(levels)
    assert worst_pdp_level(sigma2, patterns[::-1], Fraction(1)) == max(levels)
