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

:func:`discrete_gaussian_delta_mp` evaluates the profile as an upper bound in 80-digit
arithmetic by direct summation of the series with a bound on the truncated remainder;
:func:`discrete_gaussian_delta` is the float64 version used to search for σ.
"""

from __future__ import annotations

import math
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


def discrete_gaussian_moments(sigma2: float, gamma: float | None = None) -> dict[str, float]:
    """E|Y|, E[Y²], E[Y⁴] and, given γ, P(|Y| ≤ γ) of N_Z(0, σ²), by summing the series in float64.

    Terms beyond |y| = 40σ + 2 are below e^{−800} of the largest and are left out.
    """
    top = math.ceil(40.0 * math.sqrt(sigma2) + 2)
    y = np.arange(-top, top + 1, dtype=float)
    w = np.exp(-(y * y) / (2.0 * sigma2))
    w /= w.sum()
    out = {
        "mean_abs": float(np.sum(w * np.abs(y))),
        "second_moment": float(np.sum(w * y * y)),
        "fourth_moment": float(np.sum(w * y**4)),
    }
    if gamma is not None:
        out["within"] = float(np.sum(w[np.abs(y) <= gamma]))
    return out
