"""The lattice variance of a μ-GDP / (ε, δ) target (dpopt.mechanisms.lattice.target_lattice_variance) and its start
(predicted_gdp_ratio).

Sources of the expected values:

* d_0 = 2Φ⁻¹(½ + 1/(2Z)) of N_ℤ(0, σ²), Z = Σ_k e^{−k²/(2σ²)} summed in 50-digit mpmath (the largest increment of the
  trade-off's vertices, dpopt.privacy.discrete_gaussian_gdp): the start's series σd_0 = 1 + 1/(24σ²) + 7/(1920σ⁴)
  is below it and within O(σ⁻⁶);
* the previous procedure (start at the wanted variance, then rounded up by the certified ratio), restated here: the
  new start never gives a larger certified σ²;
* the certification itself (effective_variance): every σ² returned has an effective variance at least the wanted
  one.
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath
import pytest

from dpopt.mechanisms import lattice
from dpopt.mechanisms.integer_noise import dyadic_ceil, dyadic_ceil_fine
from dpopt.privacy.discrete_gaussian_gdp import unit_shift_gdp


def sigma_d0_50_digits(sigma2: float) -> mpmath.mpf:
    """σ·d_0 with Z summed over |k| ≤ 60σ + 60 (the rest below e^{−1800}) in 50 digits."""
    with mpmath.workdps(50):
        s2 = mpmath.mpf(sigma2)
        top = int(60 * float(mpmath.sqrt(s2))) + 60
        z = 1 + 2 * mpmath.fsum(mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(1, top + 1))
        return mpmath.sqrt(s2) * 2 * mpmath.sqrt(2) * mpmath.erfinv(1 / z)  # Φ⁻¹(½ + p) = √2 erfinv(2p)


@pytest.mark.parametrize("sigma2", [4, 16, 1000, 10**6])
def test_the_start_series_is_below_the_50_digit_slope_and_close(sigma2):
    exact = sigma_d0_50_digits(sigma2)
    with mpmath.workdps(50):
        series = 1 + mpmath.mpf(1) / (24 * sigma2) + mpmath.mpf(7) / (1920 * sigma2**2)
        assert series <= exact  # the probit's Taylor coefficients at ½ are positive
        assert exact - series < mpmath.mpf(1) / sigma2**3  # the next term, (127/322560)/σ⁶ ≈ 4e-4/σ⁶


def _previous(wanted: Fraction) -> Fraction | None:
    """The procedure before the predicted start: σ² = ⌈wanted⌉ (dyadic), then ⌈σ²·wanted/v(σ²)⌉ until v ≥ wanted."""
    sigma2 = dyadic_ceil(wanted)
    for _ in range(8):
        variance = lattice.effective_variance(sigma2, "gdp")
        if variance is None:
            return None
        if variance >= wanted:
            return sigma2
        sigma2 = dyadic_ceil(sigma2 * wanted / variance)
    return None


def test_the_predicted_start_is_certified_never_larger_and_usually_one_certification():
    rng = random.Random(7)
    wanted = [Fraction(rng.uniform(1, 10)) * 10 ** rng.choice([0, 1, 2, 3, 4, 6]) for _ in range(24)]
    for w in wanted:
        unit_shift_gdp.cache_clear()
        sigma2 = lattice.target_lattice_variance(w, 1, "gdp")
        certifications = unit_shift_gdp.cache_info().misses
        assert lattice.effective_variance(sigma2, "gdp") >= w
        assert sigma2 <= _previous(w)
        # the previous procedure certified two variances each (its start is always below the ratio ≈ 1 + 2·10⁻⁴);
        # from σ² = 1000 the series' error (4·10⁻⁴/σ⁶) and the start's margin (10⁻¹⁰ + 2⁻²⁴/σ²) are far below the
        # grid's 2⁻²¹, so the start is the accepted σ² but with probability about 2·10⁻⁴
        assert certifications == 1 or (w < 1000 and certifications == 2)


def test_large_wanted_variances_take_one_certification():
    for w in (Fraction(10**7) + Fraction(1, 3), Fraction(123456789, 2)):
        unit_shift_gdp.cache_clear()
        sigma2 = lattice.target_lattice_variance(w, 1, "approx")
        assert unit_shift_gdp.cache_info().misses == 1
        assert lattice.effective_variance(sigma2, "approx") >= w


def test_the_fine_grid_rounds_up_within_2_to_the_minus_21_and_never_above_dyadic_ceil():
    rng = random.Random(11)
    for _ in range(300):
        x = Fraction(rng.randrange(1, 10**12), rng.randrange(1, 10**9)) * Fraction(2) ** rng.randrange(-8, 20)
        for same in (x, Fraction(x.numerator * 3, x.denominator * 3)):  # a value, however it is written
            fine = dyadic_ceil_fine(same)
            assert fine.denominator & (fine.denominator - 1) == 0 and fine.denominator <= 2**30
            assert x <= fine <= dyadic_ceil(x)
            assert fine - x < x / 2**21 or fine.denominator == 2**30 or fine.denominator == 1
    assert dyadic_ceil_fine(Fraction(3, 2)) == Fraction(3, 2)
    assert dyadic_ceil_fine(Fraction(2**25 + 1, 2**25)) == 1 + Fraction(1, 2**21)  # e = 0: the grid 2⁻²¹
    assert dyadic_ceil_fine(Fraction(2**22 + 1)) == 2**22 + 1  # k = 21 − 22 clamped at 0: whole numbers


def test_a_forged_smaller_lattice_variance_fails_the_certification():
    w = Fraction(2_000_000)
    sigma2 = lattice.target_lattice_variance(w, 1, "gdp")
    forged = sigma2 * (1 - Fraction(1, 10**5))  # below (1 + 2η)·w·(1 + 1/(12σ²)) ≈ 1.0002·w: a relative 10⁻⁵ less
    assert lattice.effective_variance(forged, "gdp") < w <= lattice.effective_variance(sigma2, "gdp")
