"""The convolution power of a law by repeated squaring, and the FFT's proven error bound
(dpopt.stats.convolution_power).

Sources of the expected values:

* **d − 1 direct convolutions** (np.convolve, non-negative sums: relative rounding below n·2⁻⁵³ per entry and
  stage), against which repeated squaring must agree;
* **exact rationals**: every double is a rational, so the exact convolution of the FFT's (floating-point) inputs is
  computed in Fractions; the FFT's true error on them must lie below the stated bound (Higham 2002, Thm 24.2,
  carried through the transforms, the pointwise product and the inverse: the module docstring).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpopt.stats import convolution_power as cp


def _law(size: int, seed: int) -> np.ndarray:
    """A non-negative law on {0..size − 1} of mass 1, with a spread of magnitudes (a discretised bell curve times
    random factors), like a grid law's."""
    rng = np.random.default_rng(seed)
    x = np.arange(size)
    law = np.exp(-0.5 * ((x - size / 3) / (size / 8)) ** 2) * rng.uniform(0.5, 1.5, size)
    return law / law.sum()


def _direct_power(law: np.ndarray, d: int, top: int) -> np.ndarray:
    out = law[: top + 1]
    for _ in range(d - 1):
        out = np.convolve(out, law)[: top + 1]
    return out


@pytest.mark.parametrize("d", [1, 2, 5, 6, 13])
def test_repeated_squaring_agrees_with_direct_convolutions(d):
    law, top = _law(200, d), 900
    power, error = cp.convolution_power(law, d, top)
    assert error == 0.0  # every factor ≤ DIRECT_MAX points: direct convolutions only
    # both are sums of non-negative products: relative rounding below (d·n)·2⁻⁵³ per entry, n ≤ 901·13
    assert power == pytest.approx(_direct_power(law, d, top), rel=d * 901 * 13 * 2.0**-53 * 4, abs=1e-300)


@pytest.mark.parametrize("d", [3, 8, 30])
def test_fft_power_agrees_with_direct_convolutions_within_its_bound(d, monkeypatch):
    monkeypatch.setattr(cp, "DIRECT_MAX", 0)  # every stage by FFT
    law, top = _law(150, d), 2000
    power, error = cp.convolution_power(law, d, top)
    exact = _direct_power(law, d, top)
    assert power.size == exact.size and (power >= 0).all()
    # the direct reference's own rounding is below (d·n)·2⁻⁵³ relative, n ≤ 2001 (≤ 10⁻¹¹ of the mass 1)
    assert np.abs(power - exact).sum() <= error + 1e-11
    assert 0.0 < error < 1e-10 * cp.FFT_SAFETY  # not vacuous: 1.6·10⁻¹² per unit of the safety factor


@pytest.mark.parametrize("sizes, top", [((64, 64), 127), ((100, 37), 60), ((300, 300), 500)])
def test_fft_error_bound_against_exact_rationals(sizes, top, monkeypatch):
    monkeypatch.setattr(cp, "DIRECT_MAX", 0)
    a, b = _law(sizes[0], 1), _law(sizes[1], 2)
    computed, bound = cp.convolve(a, b, top)
    fa, fb = [Fraction(float(v)) for v in a], [Fraction(float(v)) for v in b]
    kept = min(top + 1, a.size + b.size - 1)
    true_error = Fraction(0)
    for m in range(kept):
        exact = sum(fa[i] * fb[m - i] for i in range(max(0, m - b.size + 1), min(m, a.size - 1) + 1))
        true_error += abs(Fraction(float(computed[m])) - exact)
    # the bound holds, and without FFT_SAFETY (Higham's constant as stated) it would hold too on these cases
    assert true_error <= Fraction(bound)
    assert true_error <= Fraction(bound / cp.FFT_SAFETY)
    # and is not vacuous: below 10⁻¹³ of the mass per unit of the safety factor
    assert bound < 1e-13 * cp.FFT_SAFETY


def test_squaring_a_law_by_fft_uses_one_transform_and_the_same_bound(monkeypatch):
    monkeypatch.setattr(cp, "DIRECT_MAX", 0)
    a = _law(500, 3)
    squared, bound = cp.convolve(a, a, 999)
    other, bound_two = cp.convolve(a, a.copy(), 999)
    assert bound == bound_two and np.array_equal(squared, other)


def test_convolving_two_computed_laws_carries_their_errors(monkeypatch):
    """Two laws known exactly (a, b), their computed versions perturbed by ℓ¹ errors E_a, E_b (a law's FFT power
    stands for such a factor): ‖â∗b̂ − a∗b‖₁ ≤ E_a‖b̂‖₁ + E_b(‖â‖₁ + E_a) + the product's own rounding, the stated
    error; the true error in exact rationals lies below it, and most of the stated error is the carried part."""
    monkeypatch.setattr(cp, "DIRECT_MAX", 0)
    a, b, top = _law(120, 4), _law(90, 5), 150
    rng = np.random.default_rng(6)
    a_hat, b_hat = a * (1 + rng.uniform(-1e-9, 1e-9, a.size)), b * (1 + rng.uniform(-1e-9, 1e-9, b.size))
    fa, fb = [Fraction(float(v)) for v in a], [Fraction(float(v)) for v in b]
    err_a = float(sum(abs(Fraction(float(x)) - y) for x, y in zip(a_hat, fa))) * (1 + 1e-12)
    err_b = float(sum(abs(Fraction(float(x)) - y) for x, y in zip(b_hat, fb))) * (1 + 1e-12)
    computed, stated = cp.convolve_laws(a_hat, err_a, b_hat, err_b, top)
    true_error = Fraction(0)
    for m in range(top + 1):
        exact = sum(fa[i] * fb[m - i] for i in range(max(0, m - b.size + 1), min(m, a.size - 1) + 1))
        true_error += abs(Fraction(float(computed[m])) - exact)
    assert true_error <= Fraction(stated)
    assert stated >= err_a + err_b  # the carried errors (each law's mass about 1)


def test_a_power_needs_a_positive_exponent():
    with pytest.raises(ValueError, match="d ≥ 1"):
        cp.convolution_power(np.ones(3), 0, 5)
