"""Calibrations are certified against the decimal a person wrote, not the binary float nearest to it.

The ledger charges ρ = 0.1 as 1/10 (``dpopt.core.decimals``). The float 0.1 is
3602879701896397/2^55 = 0.1000000000000000055…, above 1/10; the float 0.3 is
5404319552844595/2^54 = 0.2999999999999999888…, below 3/10 (both exact: ``float.as_integer_ratio``).
A mechanism whose exact loss is the binary 0.1 therefore spends more than the ledger charges; one whose
loss is exactly 3/10 spends exactly ρ = 0.3. Each case below sits between the two readings, so it
passes one reading and fails the other: only the decimal reading gives the verdicts asserted.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.decimals import float_below, float_written_below, written
from dpopt.privacy.pure_conversion import epsilon_dp_check
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.privacy.pure_conversion import pure_implies
from dpopt.spec.models import Privacy

BINARY_TENTH = Fraction(3602879701896397, 2**55)
"""The float 0.1, exactly (0.1.as_integer_ratio())."""


def privacy(definition: str, **parameters) -> Privacy:
    return Privacy.model_validate({definition: parameters})


def test_the_two_readings_differ_as_stated():
    assert Fraction(0.1) == BINARY_TENTH > Fraction(1, 10)
    assert Fraction(0.3) == Fraction(5404319552844595, 2**54) < Fraction(3, 10)
    assert written(0.1) == Fraction(1, 10) and written("0.3") == Fraction(3, 10)


def test_float_below_is_the_largest_float_not_above_the_decimal():
    """0.1: the float is above 1/10, so one step down; 0.3: the float is below 3/10 already."""
    assert float_below(0.1) == math.nextafter(0.1, 0.0) and Fraction(float_below(0.1)) < Fraction(1, 10)
    assert float_below(0.3) == 0.3
    assert float_below("1e-6") <= 1e-6 and Fraction(float_below("1e-6")) <= Fraction(1, 10**6)


def test_a_share_is_rounded_below_in_the_decimal_it_is_read_as():
    """A third of ρ = 0.1 stated as a float whose repr decimal is at most 1/30, and the next float's above."""
    third = float_written_below(Fraction(1, 30))
    assert written(third) <= Fraction(1, 30) < written(math.nextafter(third, 1.0))


def test_zcdp_check_compares_with_the_decimal():
    """σ = 1: Δ₂²/(2σ²) = Δ₂²/2. At Δ₂² = 2·(binary 0.1) the loss is the binary 0.1 > 1/10: refused; at
    Δ₂² = 1/5 it is 1/10 exactly: accepted. ρ = 0.3 with loss 3/10 (above the binary 0.3): accepted."""
    assert not gaussian_privacy_check(2 * BINARY_TENTH, 1.0, privacy("zcdp", rho=0.1)).passed
    assert gaussian_privacy_check(Fraction(1, 5), 1.0, privacy("zcdp", rho=0.1)).passed
    assert gaussian_privacy_check(Fraction(3, 5), 1.0, privacy("zcdp", rho=0.3)).passed


def test_gdp_check_compares_with_the_decimal():
    """Δ₂ ≤ μσ: σ = 1, Δ₂² = (binary 0.1)² > μ² = 1/100: refused; Δ₂² = 1/100: accepted."""
    assert not gaussian_privacy_check(BINARY_TENTH**2, 1.0, privacy("gdp", mu=0.1)).passed
    assert gaussian_privacy_check(Fraction(1, 100), 1.0, privacy("gdp", mu=0.1)).passed


def test_calibrated_sigma_meets_the_decimal():
    """ρ = 0.1, Δ₂² = 1: the σ found satisfies 1/(2σ²) ≤ 1/10 in exact arithmetic."""
    sigma = gaussian_sigma(Fraction(1), privacy("zcdp", rho=0.1))
    assert Fraction(1) / (2 * Fraction(sigma) ** 2) <= Fraction(1, 10)


def test_pure_checks_compare_with_the_decimal():
    """Laplace Δ₁/b = binary 0.1 against ε = 0.1: refused; = 3/10 against ε = 0.3: accepted (the float 0.3
    is below it); ε₀-DP ⇒ ε-DP the same way."""
    assert not epsilon_dp_check(BINARY_TENTH, privacy("pure", epsilon=0.1), "Laplace").passed
    assert epsilon_dp_check(Fraction(3, 10), privacy("pure", epsilon=0.3), "Laplace").passed
    assert not pure_implies(BINARY_TENTH, privacy("pure", epsilon=0.1)).passed
    assert pure_implies(Fraction(3, 10), privacy("pure", epsilon=0.3)).passed
