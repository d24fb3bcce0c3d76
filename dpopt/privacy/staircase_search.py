r"""The staircase's privacy-loss pmf in double precision, for *searching* ε₀ (never for certifying it).

The exact profile (:mod:`dpopt.privacy.staircase_profile`) sums the same pieces in 60-digit arithmetic:
on x ≤ 0 and x ≥ m the loss L(x) = ε₀(n(|x − m|) − n(|x|)) is periodic with period Δ₀ and the density
f = a·b^{n(|x|)} (b = e^{−ε₀}, a = (1 − b)/(2Δ₀(g + (1 − g)b))) falls by b per period, so those pieces
weigh 1/(1 − b) times one period; [0, m) is finite; between consecutive break points (g + k)Δ₀ and
m ± (g + k)Δ₀ both L and f are constant, so each mass is a density times a length. Here the break points
of a piece are one numpy array, the masses one ``bincount``, and a move's pmf the ``np.convolve`` of its
coordinates' pmfs (independent coordinates add their losses). A break point that rounding moves by
one unit in the last place opens or shuts an interval of length ~10⁻¹⁶Δ₀, whose mass is below 10⁻¹⁵;
the sums then carry relative errors of order 10⁻¹⁴. That is ample to steer a bisection over ε₀ (a
search takes ~200 profile evaluations; the 60-digit ones took ~0.04 s each), and every ε₀ a design keeps
is then certified on the 60-digit profile (:func:`dpopt.mechanisms.staircase.exact_delta` and its
siblings), which also decides the certificate's check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np


def loss_pmf(epsilon0: float, step: float, g: float, shift: float) -> tuple[int, np.ndarray]:
    """P[L = jε₀] of one staircase coordinate (ε₀, Δ₀ = ``step``, g) against its shift by m = ``shift`` > 0,
    in double precision (module docstring): ``(j0, masses)`` with ``masses[i]`` = P[L = (j0 + i)ε₀]."""
    d0, m = float(step), float(shift)
    b = math.exp(-epsilon0)
    one_minus_b = -math.expm1(-epsilon0)
    a = one_minus_b / (2.0 * d0 * (g + (1.0 - g) * b))
    period = 1.0 / one_minus_b
    losses, masses = [], []
    for lo, hi, weight in ((-d0, 0.0, period), (0.0, m, 1.0), (m, m + d0, period)):
        points = [np.array([lo, hi])]
        for origin in (0.0, m):
            for sign in (1.0, -1.0):  # origin + sign·(g + k)Δ₀ ∈ (lo, hi) ⇔ k strictly between these two
                ends = sorted((sign * (lo - origin) / d0 - g, sign * (hi - origin) / d0 - g))
                k = np.arange(max(0, math.floor(ends[0])), math.ceil(ends[1]) + 1, dtype=float)
                p = origin + sign * (g + k) * d0
                points.append(p[(p > lo) & (p < hi)])
        edges = np.unique(np.concatenate(points))
        x = 0.5 * (edges[:-1] + edges[1:])
        drops = np.floor(np.abs(x) / d0 - g) + 1.0
        losses.append((np.floor(np.abs(x - m) / d0 - g) + 1.0 - drops).astype(np.int64))
        masses.append(weight * a * np.power(b, drops) * np.diff(edges))
    j, mass = np.concatenate(losses), np.concatenate(masses)
    j0 = int(j.min())
    return j0, np.bincount(j - j0, weights=mass)


def move_pmf(epsilon0: float, step: float, g: float, shifts: Sequence[float | Fraction]) -> tuple[int, np.ndarray]:
    """``(j0, masses)`` of i.i.d. staircase noise against a move whose non-zero |v_i| are ``shifts``: the
    convolution of the coordinates' :func:`loss_pmf` (each distinct shift computed once)."""
    j0, law = 0, np.ones(1)
    cache: dict[float, tuple[int, np.ndarray]] = {}
    for m in shifts:
        m = abs(float(m))
        if m:
            if m not in cache:
                cache[m] = loss_pmf(epsilon0, step, g, m)
            k0, coordinate = cache[m]
            j0, law = j0 + k0, np.convolve(law, coordinate)
    return j0, law


def delta(epsilon: float, epsilon0: float, law: tuple[int, np.ndarray]) -> float:
    r"""δ(ε) = Σ_j P[L = jε₀](1 − e^{ε − jε₀})₊ of a move's pmf (:func:`move_pmf`), in double precision
    (ε − jε₀ from the exact binary values where it is small: rounded off there, it would carry the whole
    error of its term)."""
    j0, masses = law
    j = j0 + np.arange(masses.size)
    gap = epsilon - j * epsilon0
    near = np.flatnonzero(np.abs(gap) < 1e-3)  # ε − jε₀ rounded off: those few exactly, from the binary values
    gap[near] = [float(Fraction(epsilon) - int(k) * Fraction(epsilon0)) for k in j[near]]
    tail = gap < 0
    return float(np.sum(masses[tail] * -np.expm1(gap[tail])))


def kl(epsilon0: float, law: tuple[int, np.ndarray]) -> float:
    """KL(P‖Q) = E_P[L] = Σ_j P[L = jε₀]·jε₀ of a move's pmf (:func:`move_pmf`), in double precision."""
    j0, masses = law
    return float(np.dot(masses, j0 + np.arange(masses.size)) * epsilon0)
