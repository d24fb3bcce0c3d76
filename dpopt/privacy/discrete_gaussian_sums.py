r"""The law of S = ⟨η, v⟩ for i.i.d. discrete Gaussian noise η ~ N_ℤ(0, σ²) and an integer move v, per σ²: on a box in
exact integer arithmetic rounded up (upper bounds), shared across the moves, and in double precision by FFT to steer
a search.

The pDP level of :mod:`dpopt.privacy.discrete_gaussian_pdp` is a sum of two tails of S. S depends on v only through
its pattern, the multiset of the non-zero |v_i|; write it {t: c_t} (value t taken c_t times) and g = gcd of the
pattern. Then

.. math:: S = g\,S', \qquad S' = \sum_t \frac{t}{g}\,U_{c_t}, \qquad U_c = \eta_1 + \dots + \eta_c ,

the U independent. On the box |η_i| ≤ N (:func:`box_radius`) with
B(X) = Σ_{|k|≤N} w(k) X^{k+N}, w(k) = e^{−k²/(2σ²)}, the box law of U_c is the polynomial B(X)^c and that of S'
the product over t of B^{c_t} inflated by t/g (X ↦ X^{t/g}): **the same box law** as the product of the m = Σ c_t
coordinates' polynomials (the products are the same polynomial, multiplied in another order), so the level's
bound (mass/z^m + mT/z, z the box sum, T the tail bound) is unchanged. The powers B^c are computed once per σ²
(:class:`BoxLaws`, :func:`box_laws` keeps the last few), so that a pattern costs a product per distinct value of
its moves beyond the first instead of one per coordinate, and S' = S/g shortens the law g-fold. The polynomials
are exact integer polynomials (FLINT ``fmpz_poly``) on the weights scaled by 2^{128} and rounded up, each product
rounded up again (:class:`BoxLaws`): every coefficient is a proven upper bound on 2^{128} times the box mass. (The
weights span 1 to 2^{−100}: an ``arb_poly`` product of such balls is split into blocks of similar magnitude and
took 30 times as long.)

**Double precision** (:func:`estimated_levels`, never a certificate): the law of S' on ℤ/Lℤ by FFT, the transform
of w placed at k mod L evaluated at the multiples (t/g)·j (inflation multiplies frequencies) and raised to the
powers c_t. The circular law equals the law of S' when |S'| < L/2; L is a power of two with
L/2 > min(N Σ t/g, 12 σ ‖v/g‖ + 1), beyond which the (sub-Gaussian) mass is below 2e^{−72}. Its error is that of
the transforms, about L·log₂L·2^{−53} on a tail sum; the budget :func:`estimate_error` allows 2^3 times that
(:data:`ESTIMATE_ERROR`), and a search's comparisons are decided by an estimate only when it is farther than its
budget from the target.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010): the law, sub-Gaussian tails (Corollary 9).
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.noise.discrete_generalized_gaussian import PRECISION, working_precision

flint = lazy_module("flint")

TAIL_BITS = 100
"""The box |k| ≤ N stops where w(k) ≤ 2^{−100} (w(0) = 1)."""

MAX_BOX_TERMS = 4_000_000
"""Largest number of coefficients of a box law an evaluation forms: 2N·Σ_i v_i/g + 1 (about 24σ·Σ_i v_i/g), so σ up
to about 1.7·10⁵/Σ_i v_i/g."""

FFT_VALUES = 1 << 22
"""Values of the double-precision laws :func:`estimated_levels` transforms at once (32 MiB of floats)."""

SCALE_BITS = 128
"""P: the box laws are integer polynomials ≥ 2^P times the masses (:class:`BoxLaws`)."""

ESTIMATE_ERROR = 2.0**-50
"""Factor of L·log₂L in the error budget of a double-precision tail sum of :func:`estimated_levels` (2^{−53} per
operation of the transforms, 2^3 for the powers and products; the errors measured on person-level patterns at
σ² ≈ 600–900 are below 10⁻¹⁵, the budget there 2·10⁻¹¹). Below δ ≈ 10⁴ times the budget, more comparisons fall
within it and are decided by exact levels: slower, never less exact."""


def box_radius(sigma2: Fraction) -> int:
    """N = ⌈σ√(2·TAIL_BITS·ln 2)⌉ + 1: e^{−N²/(2σ²)} ≤ 2^{−TAIL_BITS} (the tail bound's T is then below it)."""
    return math.isqrt(math.ceil(2 * TAIL_BITS * math.log(2) * float(sigma2)) + 1) + 2


@lru_cache(maxsize=65536)
def reduced(pattern: tuple[int, ...]) -> tuple[int, tuple[tuple[int, int], ...]]:
    """g = gcd of the pattern and the multiset {t/g: c_t} of S' = S/g (module docstring), as sorted pairs (t/g, c_t)."""
    g = math.gcd(*pattern)
    return g, tuple(sorted(Counter(t // g for t in pattern).items()))


def _weights(sigma2: Fraction, top: int) -> list[flint.arb]:
    """w(0), …, w(top), w(k) = exp(−k²/(2σ²)), as arb balls: w(k + 1) = w(k)·q^{2k+1} with q = exp(−1/(2σ²)) (the
    exponent an exact rational) and q^{2k+1} = q^{2k−1}·q², two ball products a term instead of an exponential
    (each product is rigorous; the relative radius grows by about 2^-128 a step, 10⁻³³ over 10⁵ terms)."""
    q = (-flint.arb(flint.fmpq(sigma2.denominator, 2 * sigma2.numerator))).exp()
    q2, step, w = q * q, q, flint.arb(1)
    out = [w]
    for _ in range(top):
        w, step = w * step, step * q2
        out.append(w)
    return out


def _scaled_up(end: flint.arb) -> int:
    """⌈2^P·x⌉ of an exact arb x = man·2^exp (a ball's upper end), P = :data:`SCALE_BITS`."""
    man, exp = (int(v) for v in end.man_exp())
    shift = exp + SCALE_BITS
    return man << shift if shift >= 0 else -((-man) >> -shift)


def _ceil_shift(poly: flint.fmpz_poly) -> flint.fmpz_poly:
    """An integer polynomial ≥ poly/2^SCALE_BITS coefficientwise (floor, plus one on every coefficient)."""
    return poly // (1 << SCALE_BITS) + flint.fmpz_poly([1] * (poly.degree() + 1))


class BoxLaws:
    r"""The box laws of sums of N_ℤ(0, σ²) draws at one σ² (module docstring), as integer polynomials scaled by
    2^{SCALE_BITS} that bound the box masses from above coefficientwise.

    Each weight is rounded up, W(k) = ⌈2^P·w(k)⌉ (P = :data:`SCALE_BITS`, from the upper end of its 128-bit arb
    ball), so B̂ = Σ W(k) X^{k+N} ≥ 2^P B coefficientwise. A product of two such polynomials (non-negative
    coefficients) is computed exactly and then divided by 2^P, rounded up (:func:`_ceil_shift`): if F ≥ 2^P f and
    G ≥ 2^P g coefficientwise, then FG ≥ 2^{2P} fg and ⌈FG/2^P⌉ ≥ 2^P fg. Every law formed is therefore ≥ 2^P times
    the exact box law, in exact integer arithmetic; each rounding adds at most one unit 2^{−P} to a coefficient,
    a relative 2^{−P}·(coefficients) ≤ 2^{−100} of the level here. A single coordinate (S' = η) needs no product:
    its tails are summed from the weights' balls, and the integer weights are formed only for a product.

    Attributes
    ----------
    sigma2 : Fraction
        σ².
    radius : int
        N, the box |k| ≤ N.
    z : arb
        Σ_{|k|≤N} w(k) (≤ the normaliser Z), a ball.
    tail : arb
        T ≥ Σ_{|k|>N} w(k): for k ≥ N + 1, k² ≥ (N+1)² + 2(N+1)(k − N − 1), so w(k) ≤ w(N+1) r^{k−N−1} with
        r = e^{−(N+1)/σ²} and T = 2w(N+1)/(1 − r).
    """

    def __init__(self, sigma2: Fraction):
        self.sigma2 = sigma2 = Fraction(sigma2)
        self.radius = n = box_radius(sigma2)
        with working_precision(PRECISION):
            half = _weights(sigma2, n + 1)
            r = (-flint.arb(flint.fmpq((n + 1) * sigma2.denominator, sigma2.numerator))).exp()
            self.tail = 2 * half[n + 1] / (1 - r)
            self._half = half[: n + 1]  # w(0), …, w(N)
            self.z = 2 * sum(self._half, flint.arb(0)) - 1
        self._powers: dict[int, flint.fmpz_poly] = {}

    def power(self, count: int) -> flint.fmpz_poly:
        """≥ 2^P·B^count, the box law of U_count (coefficient j at U = j − count·N), from the largest cached power
        below."""
        if not self._powers:
            with working_precision(PRECISION):  # the balls' upper ends rounded at 128 bits, not the default 53
                upper = [_scaled_up(w.upper()) for w in self._half]
            self._powers[1] = flint.fmpz_poly(upper[:0:-1] + upper)  # k = −N .. N
        if count not in self._powers:
            below = max(c for c in self._powers if c < count)
            self._powers[count] = _ceil_shift(self._powers[below] * self.power(count - below))
        return self._powers[count]

    def law(self, pattern: tuple[int, ...]) -> tuple[flint.fmpz_poly, int, int]:
        """≥ 2^P times the box law of S' = S/g for a move of ``pattern``, its offset (coefficient j at
        S' = j − offset) and g."""
        g, key = reduced(pattern)
        factors = sorted((self.power(c).inflate(t) for t, c in key), key=lambda p: p.degree())
        product = factors[0]
        for factor in factors[1:]:
            product = _ceil_shift(product * factor)
        return product, self.radius * sum(t * c for t, c in key), g

    def tail_mass(self, pattern: tuple[int, ...], thresholds: tuple[Fraction, ...]) -> flint.arb:
        """A ball whose upper end bounds Σ over the thresholds x of the box mass of {S > x} (unnormalised: the
        weights' products)."""
        g, key = reduced(pattern)
        firsts = [math.floor(x / g) + 1 for x in thresholds]  # the smallest S' with gS' > x
        with working_precision(PRECISION):
            if key == ((1, 1),):  # S' = η: Σ_{k ≥ a} w(k) on the box, by symmetry from w(0), …, w(N)
                n, half = self.radius, self._half
                return sum((sum(half[a:], flint.arb(0)) if a >= 0 else self.z - sum(half[1 - a:], flint.arb(0))
                            for a in firsts if a <= n), flint.arb(0))
            law, offset, g = self.law(pattern)
            total = sum(int(law.right_shift(max(first + offset, 0))(1)) for first in firsts
                        if first + offset <= law.degree())
            return flint.arb(flint.fmpq(total, 1 << SCALE_BITS))


@lru_cache(maxsize=4)
def box_laws(sigma2: Fraction) -> BoxLaws:
    """The :class:`BoxLaws` of σ², the last few kept (a search's final σ² is checked again by the certificate)."""
    return BoxLaws(sigma2)


def _transform(sigma2: Fraction, length: int) -> np.ndarray:
    """The DFT of length L of w/Σw placed at k mod L (|k| ≤ N): real and even, the full L values."""
    n = box_radius(sigma2)
    k = np.arange(-n, n + 1)
    w = np.exp(-(k.astype(float) ** 2) / (2 * float(sigma2)))
    circle = np.zeros(length)
    np.add.at(circle, k % length, w / w.sum())
    return np.fft.fft(circle).real


def estimated_levels(sigma2: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction,
                     screen: float | None = None) -> np.ndarray:
    r"""The pDP levels δ(v) = P[S > εσ² − ‖v‖²/2] + P[S > εσ² + ‖v‖²/2] of the patterns in double precision
    (module docstring), each within :func:`estimate_error` of the box level. Not a bound: it steers a search.

    With a ``screen``, a pattern whose sub-Gaussian bound
    :math:`e^{-a^2/(2\sigma^2\|v\|^2)} + e^{-b^2/(2\sigma^2\|v\|^2)}` (a, b = εσ² ∓ ‖v‖²/2, a ≥ 0;
    :func:`~dpopt.privacy.discrete_gaussian_pdp.subgaussian_level`, here in double precision) is at most
    ``screen`` is given that bound instead of its FFT level: above its level, below the screen."""
    sigma2, epsilon = Fraction(sigma2), Fraction(epsilon)
    scaled = epsilon * sigma2
    p, q = scaled.numerator, scaled.denominator
    out = np.zeros(len(patterns))
    todo = range(len(patterns))
    if screen is not None:
        norm2 = np.array([sum(t * t for t in pattern) for pattern in patterns], dtype=float)
        a, b, spread = float(scaled) - norm2 / 2, float(scaled) + norm2 / 2, 2 * float(sigma2) * norm2
        out = np.where(a < 0, 1.0, np.exp(-np.maximum(a, 0) ** 2 / spread) + np.exp(-b * b / spread))
        todo = np.flatnonzero(out > screen)
    groups: dict[int, list[int]] = {}
    for i in todo:
        groups.setdefault(estimate_length(sigma2, patterns[i]), []).append(i)
    for length, group in groups.items():
        spectrum = _transform(sigma2, length)
        for start in range(0, len(group), max(1, FFT_VALUES // length)):
            members = group[start:start + max(1, FFT_VALUES // length)]
            out[members] = _tails(spectrum, [patterns[i] for i in members], p, q)
    return out


def _tails(spectrum: np.ndarray, patterns: list[tuple[int, ...]], p: int, q: int) -> np.ndarray:
    """:func:`estimated_levels` of patterns sharing the transform ``spectrum`` (length L), εσ² = p/q."""
    length = spectrum.size
    half = np.arange(length // 2 + 1)
    powers: dict[tuple[int, int], np.ndarray] = {}
    rows = np.ones((len(patterns), half.size))
    cuts = np.zeros((len(patterns), 2), dtype=np.int64)
    for row, pattern in enumerate(patterns):
        g, counts = reduced(pattern)
        for t, c in counts:
            if (t, c) not in powers:
                powers[t, c] = spectrum[(t * half) % length] ** c
            rows[row] *= powers[t, c]
        norm2 = sum(t * t for t in pattern)
        # the smallest S' counted: ⌊(εσ² ∓ ‖v‖²/2)/g⌋ + 1 = ⌊(2p ∓ ‖v‖² q)/(2qg)⌋ + 1, εσ² = p/q
        cuts[row] = (2 * p - norm2 * q) // (2 * q * g) + 1, (2 * p + norm2 * q) // (2 * q * g) + 1
    laws = np.fft.irfft(rows, n=length, axis=1)  # index i at S' = i mod L
    above = np.cumsum(np.fft.fftshift(laws, axes=1)[:, ::-1], axis=1)[:, ::-1]  # [:, i]: P[S' ≥ i − L/2]
    padded = np.concatenate([above, np.zeros((len(patterns), 1))], axis=1)
    index = np.clip(cuts + length // 2, 0, length)
    return np.take_along_axis(padded, index, axis=1).sum(axis=1)


@lru_cache(maxsize=65536)
def estimate_length(sigma2: Fraction, pattern: tuple[int, ...]) -> int:
    """L of :func:`estimated_levels` for a pattern: the power of two with L/2 > min(N Σ t/g, 12σ‖v/g‖ + 1)."""
    g = math.gcd(*pattern)
    support = min(box_radius(sigma2) * sum(pattern) // g,
                  math.ceil(12 * math.sqrt(sigma2) * math.sqrt(sum(t * t for t in pattern)) / g) + 1)
    return 1 << (2 * support + 2).bit_length()


def estimate_error(sigma2: Fraction, pattern: tuple[int, ...]) -> float:
    """The error budget of a level of :func:`estimated_levels`: L·log₂L·:data:`ESTIMATE_ERROR`, plus 2^{−100}
    for the circle's wrap-around."""
    length = estimate_length(sigma2, pattern)
    return length * math.log2(length) * ESTIMATE_ERROR + 2.0**-100
