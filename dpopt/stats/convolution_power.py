r"""The d-fold convolution power of a law on {0, 1, …, top}, truncated at top, with a proven ℓ¹ error bound.

The law of a sum of d i.i.d. non-negative integer variables, read at j ≤ top, is the d-th convolution power of
their law truncated at top (no mass beyond top can enter an index ≤ top). It is computed by repeated squaring:
⌊log₂ d⌋ squarings and popcount(d) − 1 products instead of d − 1 convolutions.

* A **direct** convolution (``np.convolve``, when both factors have at most :data:`DIRECT_MAX` points) sums
  non-negative products: its relative rounding is below n·2⁻⁵³ per entry and stage, covered by the caller's
  floating-point slack; its stated error is 0.
* An **FFT** convolution of length n = 2^t ≥ 2·top + 1 (no wrap-around into the kept indices) carries a rounding
  error bounded as follows (u = 2⁻⁵³, γ_k = ku/(1 − ku)). Higham, *Accuracy and Stability of Numerical
  Algorithms*, 2nd ed., 2002, Theorem 24.2: a radix-2 FFT with twiddle factors accurate to μ gives
  ‖fl(Fx) − Fx‖₂ ≤ κ‖Fx‖₂, κ = tη/(1 − tη), η = μ + γ₄(√2 + μ). Here μ = u and κ is multiplied by
  :data:`FFT_SAFETY` to cover what the theorem does not literally describe: numpy's pocketfft (radix-4 passes,
  real-input transforms with a post-processing pass, twiddles accurate to a few ulp) — a stated assumption. For non-negative a, b with
  ℓ¹ norms L_a, L_b and ℓ² norms A, B (‖Fa‖_∞ ≤ L_a, ‖Fa‖₂ = √n A):

  - the transforms: ‖δa‖₂ ≤ κ√n A, ‖δb‖₂ ≤ κ√n B;
  - the exact product of the computed transforms: ‖â⊙b̂ − Fa⊙Fb‖₂ ≤ κ√n(A L_b + B L_a) + κ²nAB;
  - its rounding (Higham, Lemma 3.5, |fl(xy) − xy| ≤ √2γ₂|xy|): ≤ √2γ₂(L_a + κ√n A)(1 + κ)√n B;
  - with D the sum of the two and ‖p̂‖₂ ≤ √n L_a B + D, the inverse (division by n = 2^t exact):
    ‖ĉ − a∗b‖₂ ≤ (D + κ‖p̂‖₂)/√n + n·2⁻¹⁰⁷⁴ (subnormal underflow);
  - on the top + 1 kept entries, ‖·‖₁ ≤ √(top + 1)‖·‖₂. Negative entries are clipped to 0, which moves each
    entry towards its true (non-negative) value: the bound still holds.

  Through the stages, an ℓ¹ error E_a of â and E_b of b̂ give ‖â∗b̂ − a∗b‖₁ ≤ E_a L̂_b + E_b(L̂_a + E_a) (L̂ the
  computed masses), to which each FFT stage adds its own bound above.

The tests check the bound against the FFT's true error computed in exact rationals, and the power against
d − 1 direct convolutions.
"""

from __future__ import annotations

import math

import numpy as np

DIRECT_MAX = 4096
"""Largest support of a factor convolved directly (above, by FFT: (top + 1)² products would cost seconds)."""

FFT_SAFETY = 1000.0
"""Factor on Higham's κ for numpy's FFT (module docstring). An assumption, not a theorem about pocketfft: its
mixed-radix real transforms have error bounds of Higham's form with constants a few times larger, and the factor
leaves two orders of magnitude above that (the tests measure the true error about 2000 times below the bound at
factor 1). The subtracted slack stays below 10⁻⁷ of coverage at the largest supports."""

UNIT_ROUNDOFF = 2.0**-53


def _gamma(k: int) -> float:
    return k * UNIT_ROUNDOFF / (1.0 - k * UNIT_ROUNDOFF)


def fft_kappa(n: int) -> float:
    """κ of Higham's Theorem 24.2 for length n = 2^t, twiddles accurate to μ = u, times :data:`FFT_SAFETY`."""
    t = max(1, int(n).bit_length() - 1)
    eta = UNIT_ROUNDOFF + _gamma(4) * (math.sqrt(2.0) + UNIT_ROUNDOFF)
    return FFT_SAFETY * t * eta / (1.0 - t * eta)


def fft_error_bound(n: int, kept: int, l1: tuple[float, float], l2: tuple[float, float]) -> float:
    """The ℓ¹ bound on the rounding error of the FFT convolution of length n on ``kept`` entries (module
    docstring), from upper bounds on the factors' ℓ¹ and ℓ² norms."""
    (la, lb), (a, b) = l1, l2
    kappa, root = fft_kappa(n), math.sqrt(n)
    d = kappa * root * (a * lb + b * la) + kappa**2 * n * a * b
    d += math.sqrt(2.0) * _gamma(2) * (la + kappa * root * a) * (1.0 + kappa) * root * b
    spectrum = root * la * b + d
    l2_error = (d + kappa * spectrum) / root + n * 2.0**-1074
    return math.sqrt(kept) * l2_error


def _norms(x: np.ndarray) -> tuple[float, float]:
    """Upper bounds on ‖x‖₁ and ‖x‖₂ of a non-negative vector (the float sums inflated past their rounding)."""
    inflate = 1.0 + 4.0 * x.size * UNIT_ROUNDOFF
    return float(x.sum()) * inflate, math.sqrt(float(x @ x) * inflate) * inflate


def convolve(a: np.ndarray, b: np.ndarray, top: int) -> tuple[np.ndarray, float]:
    """(a ∗ b)[0..top] for non-negative a, b, and an upper bound on its ℓ¹ rounding error (0 when direct)."""
    if a.size <= DIRECT_MAX and b.size <= DIRECT_MAX:
        return np.convolve(a, b)[: top + 1], 0.0
    same = b is a
    a, b = a[: top + 1], b[: top + 1]
    n = 1 << max(1, (a.size + b.size - 2).bit_length())  # n ≥ a.size + b.size − 1: no wrap-around
    fa = np.fft.rfft(a, n)
    fb = fa if same else np.fft.rfft(b, n)
    kept = min(top + 1, a.size + b.size - 1)
    out = np.maximum(np.fft.irfft(fa * fb, n)[:kept], 0.0)
    na = _norms(a)
    nb = na if same else _norms(b)
    return out, fft_error_bound(n, kept, (na[0], nb[0]), (na[1], nb[1]))


def convolve_laws(a: np.ndarray, a_error: float, b: np.ndarray, b_error: float, top: int
                  ) -> tuple[np.ndarray, float]:
    """(a ∗ b)[0..top] of two computed non-negative laws carrying ℓ¹ errors E_a, E_b, and the ℓ¹ error of the
    result: E_a L̂_b + E_b(L̂_a + E_a) plus the convolution's own rounding (module docstring)."""
    product, err = convolve(a, b, top)
    return product, err + (a_error * _norms(b)[0] + b_error * (_norms(a)[0] + a_error))


def convolution_power(law: np.ndarray, d: int, top: int) -> tuple[np.ndarray, float]:
    """The d-th convolution power of a non-negative ``law`` truncated at ``top`` (repeated squaring), and an
    upper bound on its ℓ¹ error (module docstring)."""
    if d < 1:
        raise ValueError(f"a convolution power needs d ≥ 1 (got {d})")
    base, base_err = law[: top + 1], 0.0
    result, result_err = None, 0.0
    while True:
        if d & 1:
            if result is None:
                result, result_err = base, base_err
            else:
                result, result_err = convolve_laws(result, result_err, base, base_err, top)
        d >>= 1
        if not d:
            return result, result_err
        squared, err = convolve(base, base, top)
        mass = _norms(base)[0]
        base, base_err = squared, err + base_err * (2.0 * mass + base_err)
