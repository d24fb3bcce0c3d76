r"""Exact privacy of the discrete Gaussian (Canonne, Kamath & Steinke 2020).

The discrete Gaussian N_Z(0, σ²) on the integers has

.. math:: P[Y = y] = \frac{e^{-y^2/(2\sigma^2)}}{\sum_{z \in \mathbb{Z}} e^{-z^2/(2\sigma^2)}} .

* **zCDP** (CKS Thm 14): an integer-valued query with ‖q(x) − q(x′)‖₂ ≤ Δ₂ plus i.i.d.
  N_Z(0, σ²) noise per coordinate is ρ-zCDP with ρ = Δ₂²/(2σ²), as for the continuous
  Gaussian.
* **Exact (ε, δ) profile** for a difference of Δ ∈ ℤ in one coordinate (CKS Thm 7):

  .. math:: \delta(\varepsilon) = P\left[Y > \frac{\varepsilon\sigma^2}{\Delta} - \frac{\Delta}{2}\right]
            - e^{\varepsilon}\, P\left[Y > \frac{\varepsilon\sigma^2}{\Delta} + \frac{\Delta}{2}\right].

  (The privacy loss of output y is (Δ² − 2yΔ)/(2σ²); δ = P[L > ε] − e^ε P′[L > ε].)
* **Exact (ε, δ) profile of a move t ∈ ℤ^d** spread over several coordinates (i.i.d.
  noise per coordinate): the loss of output y is Σ_k (t_k² − 2t_k y_k)/(2σ²) =
  ‖t‖²/(2σ²) − S/σ² with S = Σ_k t_k Y_k, a function of the one integer S, so

  .. math:: \delta(\varepsilon) = P\left[S > \varepsilon\sigma^2 - \tfrac{\|t\|^2}{2}\right]
            - e^{\varepsilon}\, P\left[S > \varepsilon\sigma^2 + \tfrac{\|t\|^2}{2}\right],

  S the sum of independent t_k·N_Z(0, σ²) (under the neighbour S is shifted by ‖t‖²; S is
  symmetric). The law of S is an exact convolution of the coordinates' pmfs; it depends on
  the move only through the multiset {|t_k|} (:func:`move_pattern`). One coordinate gives
  back Thm 7.

:func:`discrete_gaussian_delta_mp` evaluates the profile as an upper bound in 80-digit
arithmetic by direct summation of the series with a bound on the truncated remainder;
:func:`discrete_gaussian_delta` is the float64 version used to search for σ. For moves
over several coordinates :func:`discrete_gaussian_move_delta` (float64, the search) and
:func:`discrete_gaussian_move_delta_mp` (50 digits, an upper bound with the truncation
bounded, the certificate) are the pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import mpmath
import numpy as np

_DIGITS = 80
_NEGLIGIBLE = mpmath.mpf(10) ** -90


def _series_from(m: int, sigma2: mpmath.mpf) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(S, R): S = Σ_{y=m}^{N} e^{−y²/(2σ²)} for m ≥ 0, and a bound R on the tail beyond N.

    Consecutive terms have ratio e^{−(2y+1)/(2σ²)}, decreasing in y, so the terms after y = N
    sum to at most w(N+1)/(1 − e^{−(2N+3)/(2σ²)}).
    """
    ratio = mpmath.exp(-(2 * m + 1) / (2 * sigma2))
    step = mpmath.exp(-1 / sigma2)
    w = mpmath.exp(-(mpmath.mpf(m) ** 2) / (2 * sigma2))
    total = mpmath.mpf(0)
    y = m
    while True:
        total += w
        w *= ratio  # w(y + 1)
        ratio *= step
        y += 1
        remainder = w / (1 - ratio)
        if remainder < _NEGLIGIBLE * total:
            return total, remainder


def _strict_tail_bounds(x: mpmath.mpf, sigma2: mpmath.mpf, half: tuple[mpmath.mpf, mpmath.mpf]):
    """Lower and upper bounds on Σ_{y > x} w(y), w unnormalised; ``half`` = (S, R) of Σ_{y ≥ 1}."""
    m = int(mpmath.floor(x)) + 1  # smallest integer > x
    if m >= 1:
        s, r = _series_from(m, sigma2)
        return s, s + r
    # Σ_{y ≥ m} = Σ_{y ≥ 1} + Σ_{y = m}^{0} = Σ_{y ≥ 1} + w(0) + Σ_{y = 1}^{−m} (by symmetry)
    head = mpmath.mpf(1) + sum(
        (mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * sigma2)) for y in range(1, -m + 1)), mpmath.mpf(0)
    )
    return half[0] + head, half[0] + half[1] + head


def discrete_gaussian_delta_mp(epsilon: float, sigma2: Fraction, shift: int) -> mpmath.mpf:
    """An upper bound on the exact δ(ε) of N_Z(0, σ²) against N_Z(shift, σ²), 80 digits (CKS Thm 7)."""
    if shift == 0:
        return mpmath.mpf(0)
    with mpmath.workdps(_DIGITS):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        d = mpmath.mpf(abs(shift))
        eps = mpmath.mpf(epsilon)
        half = _series_from(1, s2)  # Σ_{y ≥ 1}
        z_low = 1 + 2 * half[0]
        _, a_high = _strict_tail_bounds(eps * s2 / d - d / 2, s2, half)
        b_low, _ = _strict_tail_bounds(eps * s2 / d + d / 2, s2, half)
        return max(mpmath.mpf(0), (a_high - mpmath.exp(eps) * b_low) / z_low)


def discrete_gaussian_delta(epsilon: float, sigma2: float, shift: int) -> float:
    """δ(ε) of N_Z(0, σ²) against N_Z(shift, σ²) in float64 (for searching σ; see the mp version)."""
    if shift == 0:
        return 0.0
    d = abs(shift)
    sigma = math.sqrt(sigma2)
    a, b = epsilon * sigma2 / d - d / 2, epsilon * sigma2 / d + d / 2
    top = math.ceil(b + 40.0 * sigma + 2)
    y = np.arange(-top, top + 1, dtype=float)
    log_w = -(y * y) / (2.0 * sigma2)
    w = np.exp(log_w - log_w.max())
    z = w.sum()
    return max(0.0, (w[y > a].sum() - math.exp(epsilon) * w[y > b].sum()) / z)


def move_pattern(move: Sequence[float]) -> tuple[int, ...]:
    """The sorted non-zero |t_k| of an integer move: all the exact profile depends on.

    Raises
    ------
    ValueError
        A non-integer coordinate (the noise lives on ℤ; such a move is not protected).
    """
    values = [abs(float(v)) for v in move if v != 0]
    if any(v != round(v) for v in values):
        raise ValueError(f"a discrete Gaussian move must be an integer vector (got {list(move)})")
    return tuple(sorted(int(round(v)) for v in values))


def discrete_gaussian_move_delta(epsilon: float, sigma2: float, pattern: Sequence[int]) -> float:
    """δ(ε) of N_Z(0, σ²)^k against its shift by a move with |t_k| = ``pattern`` (float64, for searching σ).

    The law of S − t_k Y_k (the other coordinates) is a direct convolution of pmfs; the last
    coordinate enters through its tail, P[S > x] = Σ_s P[S' = s] P[t_k Y_k > x − s]. Terms
    beyond |y| = 40σ + 2 are below e^{−800} and left out.
    """
    pattern = tuple(int(v) for v in pattern if v)
    if not pattern:
        return 0.0
    if len(pattern) == 1:
        return discrete_gaussian_delta(epsilon, sigma2, pattern[0])
    norm2 = sum(v * v for v in pattern)
    top = math.ceil(40.0 * math.sqrt(sigma2) + 2)
    y = np.arange(-top, top + 1, dtype=float)
    pmf = np.exp(-(y * y) / (2.0 * sigma2))
    pmf /= pmf.sum()
    partial, low = np.array([1.0]), 0  # pmf of S' on low, low + 1, ...
    for t in pattern[:-1]:
        spread = np.zeros(2 * top * t + 1)
        spread[::t] = pmf
        partial, low = np.convolve(partial, spread), low - top * t
    s = low + np.arange(partial.size)
    tail = np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])  # P[Y ≥ −top + i]
    last = pattern[-1]

    def above(x: float) -> float:  # P[S > x] = Σ_s P[S' = s] P[Y > (x − s)/t]
        first = np.floor((x - s) / last).astype(np.int64) + 1  # smallest y with t·y > x − s
        index = np.clip(first + top, 0, tail.size - 1)
        return float(np.sum(partial * tail[index]))

    x = epsilon * sigma2
    return max(0.0, above(x - norm2 / 2.0) - math.exp(epsilon) * above(x + norm2 / 2.0))


_MOVE_DIGITS = 50
_MOVE_CUT = 130
"""Each coordinate is summed over |y| ≤ N with e^{−N²/(2σ²)} ≤ e^{−130} ≈ 3·10⁻⁵⁷ (the rest is bounded)."""

MOVE_MP_BUDGET = 4_000_000
"""Largest number of 50-digit products one certified move evaluation may take."""


def move_mp_cost(sigma2: float, pattern: Sequence[int]) -> int:
    """The number of products :func:`discrete_gaussian_move_delta_mp` takes for this pattern."""
    n = 2 * (math.isqrt(math.ceil(2 * _MOVE_CUT * sigma2)) + 2) + 1
    cost, width = 0, 1
    for t in tuple(pattern)[:-1]:
        cost += width * n
        width += (n - 1) * t
    return cost + 4 * width + n


def discrete_gaussian_move_delta_mp(epsilon: float, sigma2: Fraction, pattern: Sequence[int]) -> mpmath.mpf:
    r"""An upper bound on the exact δ(ε) of a move with |t_k| = ``pattern``, in 50-digit arithmetic.

    Independent of the float64 search (:func:`discrete_gaussian_move_delta`): unnormalised
    weights w(y) = e^{−y²/(2σ²)} on a box |y| ≤ N, summed exactly in 50 digits. With Z_N the
    box sum and R ≥ Σ_{|y|>N} w(y) (the geometric bound of the decreasing term ratio), the
    outputs outside the box weigh at most k·R·(Z_N + R)^{k−1}, so

    .. math:: \delta \le \frac{A_N + kR(Z_N+R)^{k-1}}{Z_N^k} - e^{\varepsilon}\frac{B_N}{(Z_N+R)^k},

    A_N, B_N the box sums of the two tail events of the module docstring.
    """
    pattern = tuple(int(v) for v in pattern if v)
    if not pattern:
        return mpmath.mpf(0)
    k = len(pattern)
    with mpmath.workdps(_MOVE_DIGITS):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        n = math.isqrt(math.ceil(2 * _MOVE_CUT * float(sigma2))) + 2
        half = [mpmath.exp(-mpmath.mpf(y * y) / (2 * s2)) for y in range(n + 2)]
        weights = half[n:0:-1] + half[: n + 1]  # y = −n .. n
        remainder = 2 * half[n + 1] / (1 - mpmath.exp(-(2 * n + 3) / (2 * s2)))
        z = mpmath.fsum(weights)
        partial, low = [mpmath.mpf(1)], 0
        for t in pattern[:-1]:
            out = [mpmath.mpf(0)] * (len(partial) + 2 * n * t)
            for i, a in enumerate(partial):
                for j, b in enumerate(weights):
                    out[i + j * t] += a * b
            partial, low = out, low - n * t
        last = pattern[-1]
        suffix = [mpmath.mpf(0)] * (2 * n + 2)  # suffix[i] = Σ_{y ≥ −n + i} w(y) in the box
        for i in range(2 * n, -1, -1):
            suffix[i] = suffix[i + 1] + weights[i]
        norm2 = sum(v * v for v in pattern)
        eps = mpmath.mpf(epsilon)

        def above(x: mpmath.mpf) -> mpmath.mpf:  # Σ_box w·1[S > x]
            total = mpmath.mpf(0)
            for i, a in enumerate(partial):
                first = int(mpmath.floor((x - (low + i)) / last)) + 1
                total += a * suffix[min(max(first + n, 0), 2 * n + 1)]
            return total

        a_box, b_box = above(eps * s2 - mpmath.mpf(norm2) / 2), above(eps * s2 + mpmath.mpf(norm2) / 2)
        outside = k * remainder * (z + remainder) ** (k - 1)
        upper = (a_box + outside) / z**k - mpmath.exp(eps) * b_box / (z + remainder) ** k
        return max(mpmath.mpf(0), upper)
