"""The one-coordinate profile and pDP level of the discrete GG (dpopt.privacy.discrete_gg_one_move) and the weight
table they read (dpopt.noise.discrete_generalized_gaussian.weight_table).

Expected values come from independent routes: the loss-law convolution of dpopt.privacy.discrete_gg_profile (a
dictionary of the integer loss values with an arb exponential per term, no half-line and no suffix sums), a linear
scan for the half-line's start, and the direct exponential w(k) = exp(−(k/s)^p) of each weight. The brute-force
mpmath sums of the definitions are in test_discrete_gg_targets.py and test_discrete_gg_pdp.py (single-coordinate
cases there now run through the one-move route too).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import (
    PRECISION,
    RESYNC,
    DiscreteGeneralizedGaussian,
    weight_table,
    working_precision,
)
from dpopt.privacy.discrete_gg_one_move import (
    MAX_RADIUS,
    first_above,
    float_one_move_levels,
    one_move_pdp_level,
    one_move_profile_delta,
)
from dpopt.privacy.discrete_gg_pdp import convolution_pdp_level
from dpopt.privacy.discrete_gg_profile import convolution_profile_delta

CASES = [
    (2, Fraction(5, 2), 1, Fraction(1, 2)),
    (2, Fraction(37, 4), 3, Fraction(1)),
    (3, Fraction(21, 2), 4, Fraction(3, 10)),
    (4, Fraction(9), 2, Fraction(1, 5)),
    (1, Fraction(3), 2, Fraction(1, 2)),  # the discrete Laplace: A is bounded by v, the half-line may be empty
    (2, Fraction(3, 2), 7, Fraction(1, 10)),  # a move of several s: the half-line starts left of the box's middle
    (3, Fraction(401, 8), 25, Fraction(1)),
    (2, Fraction(4803, 8), 100, Fraction(1)),  # a sum's lattice in small: s ≈ 600, Δ_u = 100, R ≈ 6,600
]


@pytest.mark.parametrize("p, s, v, eps", CASES)
def test_one_move_levels_equal_the_convolution(p, s, v, eps):
    # both are upper bounds that add the box's outside mass, ≤ 2·tail(R)/Z ≤ 2^-79 each (tail below 2^-80 of
    # w(0) ≤ Z), so they differ by at most 2^-78 beyond their arb radii (128-bit: far below 1e-25 relative)
    routes = ((one_move_profile_delta, convolution_profile_delta), (one_move_pdp_level, convolution_pdp_level))
    for fast, slow in routes:
        got, expected = fast(p, s, v, eps), slow(p, s, (v,), eps)
        assert abs(got - expected) <= expected * Fraction(1, 10**25) + Fraction(1, 2**78)


@pytest.mark.parametrize("p, v, threshold", [(2, 3, Fraction(17, 2)), (3, 1, Fraction(0)), (4, 5, Fraction(-7)),
                                             (1, 4, Fraction(4)), (2, 1, Fraction(10**6))])
def test_first_above_is_the_linear_scans_first_index(p, v, threshold):
    lo, hi = -60, 60
    scan = next((k for k in range(lo, hi + 1) if abs(k + v) ** p - abs(k) ** p > threshold), hi + 1)
    assert first_above(p, v, threshold, lo, hi) == scan


@pytest.mark.parametrize("p, s", [(1, Fraction(1201, 2)), (2, Fraction(1000)), (3, Fraction(2001, 2)),
                                  (4, Fraction(12001, 8))])
def test_the_weight_tables_recurrence_encloses_each_direct_exponential(p, s):
    law = DiscreteGeneralizedGaussian(p, s)
    assert law.radius > RESYNC  # the table crosses at least one resynchronisation
    table = weight_table(p, s, law.radius)
    with working_precision(PRECISION):
        for k in range(0, law.radius + 1, 7):
            direct = law.weight(k)
            assert table[k].overlaps(direct)
            assert float(table[k].rad()) <= float(direct.mid()) * 1e-20


@pytest.mark.parametrize("p, s, v, eps", CASES)
def test_the_search_estimate_is_the_certified_level_in_double_precision(p, s, v, eps):
    # both sum the same terms; doubles lose at most ~R ulps of the sums relative (R ≤ 10^4 here): 1e-9 is ample
    profile, level = float_one_move_levels(p, s, v, eps)
    assert profile == pytest.approx(float(one_move_profile_delta(p, s, v, eps)), rel=1e-9, abs=1e-24)
    assert level == pytest.approx(float(one_move_pdp_level(p, s, v, eps)), rel=1e-9, abs=1e-24)


def test_a_box_beyond_the_radius_limit_is_refused_in_one_line():
    s = Fraction(MAX_RADIUS // 4)  # R ≥ 10·s at p = 2
    with pytest.raises(CalibrationError, match="limit"):
        one_move_profile_delta(2, s, 1, Fraction(1))
