"""The certified GDP slope of the discrete Gaussian (dpopt.privacy.discrete_gaussian_gdp).

Expected values come from an independent evaluation: the pmf e^{−k²/(2σ²)}/Z summed directly in 50-digit mpmath
over |k| ≤ 60σ + 60 (the rest is below e^{−1800}), the trade-off function of the pair (N_ℤ(0, σ²), N_ℤ(Δ, σ²)) at
its Neyman–Pearson vertices, and the Gaussian trade-off G_μ(α) = Φ(Φ̄⁻¹(α) − μ) (Dong, Roth & Su 2022).
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

from dpopt.privacy.discrete_gaussian_gdp import MARGIN, MAX_SIGMA2, _tail_bound, unit_shift_gdp


def pmf_tails(sigma2: float):
    """T(k) = P[Y ≥ k] for |k| ≤ K, 50 digits, by direct summation (independent of the module's float64)."""
    with mpmath.workdps(50):
        s2 = mpmath.mpf(sigma2)
        top = int(60 * float(mpmath.sqrt(s2))) + 60
        w = {k: mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(-top, top + 1)}
        z = mpmath.fsum(w.values())
        tails, acc = {}, mpmath.mpf(0)
        for k in range(top, -top - 1, -1):
            acc += w[k]
            tails[k] = acc / z
        return tails, top


def worst_gdp_parameter(sigma2: float, shift: int, span: int) -> mpmath.mpf:
    """max_k Φ̄⁻¹(T(k)) − Φ̄⁻¹(T(k − Δ)) over |k| ≤ span: the smallest μ with every vertex (T(k), 1 − T(k − Δ))
    on or above G_μ."""
    tails, top = pmf_tails(sigma2)
    span = min(span, max(k for k in tails if tails[k] > 1e-40))  # erfinv resolves 2T − 1 ≠ −1 at 50 digits
    with mpmath.workdps(50):
        def z(k):  # Φ̄⁻¹(T(k)); for k ≤ 0 by symmetry, T(k) = 1 − T(1 − k), so z(k) = −z(1 − k)
            if k <= 0:
                return -z(1 - k)
            return -mpmath.sqrt(2) * mpmath.erfinv(2 * tails[k] - 1)
        return max(z(k) - z(k - shift) for k in range(-span + shift, span + 1))


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(4), Fraction(25)])
def test_slope_matches_an_independent_evaluation(sigma2):
    """The slope is (1 + η) times the largest unit-shift vertex gap found by the 50-digit evaluation (its
    maximum is at the centre, d_0 = 2Φ̄⁻¹(P[Y ≥ 1]))."""
    gdp = unit_shift_gdp(sigma2)
    span = int(8 * float(sigma2) ** 0.5) + 4  # T(±span) within 1e-14 of 0 or 1: erfinv stays accurate
    reference = worst_gdp_parameter(float(sigma2), 1, span)
    assert float(reference) == pytest.approx(gdp.largest_increment, rel=1e-9)
    assert float(gdp.slope) == pytest.approx(float(reference) * (1 + MARGIN), rel=1e-12)


@pytest.mark.parametrize("sigma2,shift", [(Fraction(1), 2), (Fraction(4), 3), (Fraction(9, 4), 5)])
def test_every_integer_shift_is_within_shift_times_slope_and_the_bound_is_nearly_tight(sigma2, shift):
    """Shift Δ: the smallest μ is at most Δ·m (sum of Δ increments), and above Δ·m·(1 − 2η) − the rounding
    (the increments are nearly constant near the centre), so the slope does not waste privacy."""
    gdp = unit_shift_gdp(sigma2)
    needed = worst_gdp_parameter(float(sigma2), shift, int(8 * float(sigma2) ** 0.5) + 4 + shift)
    assert needed <= shift * float(gdp.slope)
    assert needed >= shift * float(gdp.slope) * 0.9


def test_continuous_limit_and_small_variance():
    """σm → 1 like 1 + 1/(24σ²) (the centre mass 1/Z exceeds the continuous mass of [−½, ½] by that factor,
    Euler–Maclaurin), and for small σ the discrete Gaussian is far less private than N(0, σ²): at σ² = 1/4 a unit
    shift needs μ = 2Φ̄⁻¹(P[Y ≥ 1]) ≈ 2.488 instead of 1/σ = 2."""
    for s2 in (100, 4096):
        gdp = unit_shift_gdp(Fraction(s2))
        sigma_m = float(gdp.slope) * s2 ** 0.5
        assert sigma_m == pytest.approx((1 + 1 / (24 * s2)) * (1 + MARGIN), rel=2e-6)
    assert float(unit_shift_gdp(Fraction(1, 4)).largest_increment) == pytest.approx(2.48838, abs=1e-5)


def test_range():
    assert unit_shift_gdp(MAX_SIGMA2 * 2) is None
    assert unit_shift_gdp(Fraction(0)) is None
    large = unit_shift_gdp(Fraction(2**20))
    assert large is not None and large.tail_bound <= float(large.slope)


def tails_at_large_variance(sigma2: int, js: list[int], top: int) -> dict:
    """T(k) = P[Y ≥ k] for k ∈ {j, j + 1 : j ∈ js}, 50 digits, by direct summation: the weights e^{−k²/(2σ²)}
    by the recurrence w(k + 1) = w(k)·q^{2k+1}, q = e^{−1/(2σ²)}, for 0 ≤ k ≤ top (Z = 2Σ w − 1; top = 40σ
    leaves out less than e^{−800} of Z), and beyond top from e^{−j²/(2σ²)} until a term falls below 10⁻⁶⁰ of
    the first (the terms decrease geometrically there: the rest is below 10⁻⁵⁹ of the sum)."""
    with mpmath.workdps(50):
        s2 = mpmath.mpf(sigma2)
        q = mpmath.exp(-1 / (2 * s2))
        weight, ratio, weights = mpmath.mpf(1), q, []
        for _ in range(top + 1):
            weights.append(weight)
            weight, ratio = weight * ratio, ratio * q * q
        z = 2 * mpmath.fsum(weights) - 1
        wanted = {k for j in js if j < top for k in (j, j + 1)}
        suffix, acc = {}, mpmath.mpf(0)
        for k in range(top, -1, -1):
            acc += weights[k]
            if k in wanted:
                suffix[k] = acc
        for j in (j for j in js if j >= top):
            weight = mpmath.exp(-mpmath.mpf(j) ** 2 / (2 * s2))
            ratio = mpmath.exp(-mpmath.mpf(2 * j + 1) / (2 * s2))
            terms = []
            while not terms or terms[-1] > terms[0] * mpmath.mpf(10) ** -60:
                terms.append(weight)
                weight, ratio = weight * ratio, ratio * q * q
            suffix[j], suffix[j + 1] = mpmath.fsum(terms), mpmath.fsum(terms[1:])
        return {k: v / z for k, v in suffix.items()}


def gaussian_upper_quantile(tail, guess: float):
    """Φ̄⁻¹(tail) in 50 digits: the root of log(erfc(x/√2)/2) = log(tail) (erfc keeps its digits far out)."""
    with mpmath.workdps(50):
        log_tail = mpmath.log(tail)
        return mpmath.findroot(lambda x: mpmath.log(mpmath.erfc(x / mpmath.sqrt(2)) / 2) - log_tail, guess)


def test_large_variance_slope_dominates_an_independent_sample_of_increments():
    """σ² = 10⁶ (the integer strategies' size): the increments d_j at a sample of j from the centre to far past
    the evaluated range A, each from a 50-digit reference, are below the certified slope; d_0 is the largest
    evaluated one. The proof steps of the tail bound hold at every sampled
    j ≥ A: z_j ≥ (j − ½)/σ and d_j ≤ B(j)."""
    s2, sigma = 10**6, 1000
    gdp = unit_shift_gdp(Fraction(s2))
    assert gdp.checked < 20_000  # B(A) ≤ m from A ≈ max(16.1σ, 16,668); the former bound needed A ≥ σ²/2
    js = [0, 1, 10, 1000, gdp.checked - 1, gdp.checked, 20_000, 30_000, 100_000, 500_000]
    tails = tails_at_large_variance(s2, js, 40 * sigma)
    for j in js:
        if j == 0:
            z_j, z_next = None, gaussian_upper_quantile(tails[1], 0.5 / sigma)
            d_j = 2 * z_next  # z_0 = −z_1 by symmetry
        else:
            z_j = gaussian_upper_quantile(tails[j], (j - 0.5) / sigma)
            d_j = gaussian_upper_quantile(tails[j + 1], (j + 0.5) / sigma) - z_j
        assert d_j <= float(gdp.slope), j
        if j == 0:
            assert float(d_j) == pytest.approx(gdp.largest_increment, rel=1e-9)
            assert float(d_j) * sigma == pytest.approx(1 + 1 / (24 * s2), rel=1e-12)  # Euler–Maclaurin, next O(σ⁻⁴)
        if j >= gdp.checked:
            assert z_j >= (j - 0.5) / sigma
            assert d_j <= _tail_bound(j, float(s2))
    assert gdp.tail_bound <= float(gdp.slope)


@pytest.mark.parametrize("y", [1.0, 2.0, 5.0, 16.1, 100.0])
def test_mills_ratio_series_bound(y):
    """The tail bound's last step, h(y) ≥ y/(1 − 1/y² + 3/y⁴) (Abramowitz & Stegun 26.2.12), against the hazard
    φ(y)/Φ̄(y) in 50 digits."""
    with mpmath.workdps(50):
        hazard = mpmath.npdf(y) / (mpmath.erfc(y / mpmath.sqrt(2)) / 2)
        assert hazard >= y / (1 - 1 / y**2 + 3 / y**4)


def tails_by_theta(sigma2: int, js: list[int]) -> dict:
    """T(k) = P[Y ≥ k] for k ∈ {j, j + 1 : j ∈ js}, 50 digits, without summing 40σ terms: Z = σ√(2π)(1 +
    2Σ_{n≥1} e^{−2π²σ²n²}) (Poisson summation; the sum is below e^{−10⁹} here, so Z = σ√(2π) to 50 digits);
    for j ≤ σ + 1, Σ_{k≥j} w(k) = (Z + 1)/2 − Σ_{0≤k<j} w(k) (no cancellation: the front sum is below Z/2·0.7);
    beyond, the terms from j until one falls below 10⁻⁶⁰ of the first (:func:`tails_at_large_variance`)."""
    with mpmath.workdps(50):
        s2 = mpmath.mpf(sigma2)
        sigma = mpmath.sqrt(s2)
        z = sigma * mpmath.sqrt(2 * mpmath.pi) * (1 + 2 * mpmath.exp(-2 * mpmath.pi**2 * s2))
        q = mpmath.exp(-1 / (2 * s2))
        wanted = sorted({k for j in js for k in (j, j + 1)})
        out, front = {}, [k for k in wanted if k <= int(sigma) + 2]
        weight, ratio, acc, k = mpmath.mpf(1), q, mpmath.mpf(0), 0
        for target in front:
            while k < target:
                acc += weight
                weight, ratio, k = weight * ratio, ratio * q * q, k + 1
            out[target] = ((z + 1) / 2 - acc) / z
        for j in (j for j in js if j > int(sigma) + 2):
            weight = mpmath.exp(-mpmath.mpf(j) ** 2 / (2 * s2))
            ratio = mpmath.exp(-mpmath.mpf(2 * j + 1) / (2 * s2))
            terms = []
            while not terms or terms[-1] > terms[0] * mpmath.mpf(10) ** -60:
                terms.append(weight)
                weight, ratio = weight * ratio, ratio * q * q
            out[j], out[j + 1] = mpmath.fsum(terms) / z, mpmath.fsum(terms[1:]) / z
        return out


@pytest.mark.slow
def test_slope_at_the_top_of_the_range_dominates_a_50_digit_sample_of_increments():
    """σ² = 2²⁸ = MAX_SIGMA2 (about 4 s of mpmath): increments d_j from the centre to twice the evaluated range A,
    each from 50-digit tails, are below the certified slope; d_0 is the largest evaluated increment and matches
    the Euler–Maclaurin value (1 + 1/(24σ²))/σ; past A the tail bound's proof steps hold."""
    s2 = int(MAX_SIGMA2)
    assert s2 == 2**28
    sigma = 2**14
    gdp = unit_shift_gdp(Fraction(s2))
    js = [0, 1, 100, sigma, gdp.checked - 1, gdp.checked, 2 * gdp.checked]
    tails = tails_by_theta(s2, js)
    for j in js:
        if j == 0:
            z_j, d_j = None, 2 * gaussian_upper_quantile(tails[1], 0.5 / sigma)
        else:
            z_j = gaussian_upper_quantile(tails[j], (j - 0.5) / sigma)
            d_j = gaussian_upper_quantile(tails[j + 1], (j + 0.5) / sigma) - z_j
        assert d_j <= float(gdp.slope), j
        if j == 0:
            assert float(d_j) == pytest.approx(gdp.largest_increment, rel=1e-9)  # the float64 bound: 2.4e-10
            assert float(d_j) * sigma == pytest.approx(1 + 1 / (24 * s2), rel=1e-12)
        if j >= gdp.checked:
            assert z_j >= (j - 0.5) / sigma
            assert d_j <= _tail_bound(j, float(s2))
    assert gdp.tail_bound <= float(gdp.slope)
