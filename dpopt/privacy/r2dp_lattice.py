r"""Exact pure-ε privacy of a discrete Laplace mixture on ℤ under integer shifts (R²DP on counts).

For p(k) = a(|k|) with a(n) = Σ_j w_j c_j r_j^n (c_j = tanh(1/(2s_j)) = (1 − r_j)/(1 + r_j), r_j = e^{−1/s_j};
:mod:`dpopt.noise.discrete_laplace_mixture`) and an integer shift Δ ≥ 1:

.. math:: \varepsilon(\Delta) = \sup_{k\in\mathbb Z} \ln\frac{p(k)}{p(k+\Delta)} = \ln\frac{a(0)}{a(\Delta)}
          = \ln\frac{\sum_j w_j c_j}{\sum_j w_j c_j r_j^{\Delta}},

attained at k = 0 (the output equal to the true answer). Proof: a is decreasing and log-convex on n ≥ 0 (a mixture
of geometric sequences: a(n)² ≤ a(n − 1)a(n + 1) by Cauchy–Schwarz), so the increments ln a(n) − ln a(n + 1) do
not increase with n. For k ≥ 0, ln a(k)/a(k + Δ) is a sum of Δ consecutive increments from n = k, largest at
k = 0. For k ≤ −Δ, p(k)/p(k + Δ) = a(|k|)/a(|k| − Δ) ≤ 1. For −Δ < k < 0, a(−k) ≤ a(0) and a(k + Δ) ≥ a(Δ).
The same argument at −Δ gives the same value (p is symmetric). It is the lattice form of Mohammady et al.'s
Thm 4.1, ε = ln(E[t]/E[t e^{−Δt}]), with the Laplace density's t replaced by the discrete law's normaliser
tanh(t/2).

ε(Δ) increases with Δ. One independent component per coordinate: the loss of an integer shift v is
Σ_i ε(|v_i|) (each coordinate's supremum is attained at once, at k_i = 0), so the exact ε is
max_{v∈S} Σ_i ε(|v_i|) (:class:`~dpopt.sensitivity.patterns.ShiftPattern`).

The certificate evaluates ε in Arb ball arithmetic (python-flint) from the exact rational scales and weights, and
compares the ball's upper end (an exact dyadic rational) with the target: a rigorous upper bound, not a
rounded value.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.rounding import ball_upper
from dpopt.noise.discrete_laplace_mixture import DiscreteLaplaceMixture
from dpopt.sensitivity.patterns import ShiftPattern

BALL_BITS = 256
"""Working precision of the Arb evaluation of ε(Δ)."""


def mixture_epsilon(scales, weights, shift: int) -> float:
    """ε(Δ) = ln a(0) − ln a(Δ) in floating point (log-sum-exp), for design: ``weights`` need not be normalised."""
    t = 1.0 / np.asarray(scales, dtype=float)
    log_w = np.log(np.asarray(weights, dtype=float)) + np.log(np.tanh(t / 2.0))
    top0, top1 = log_w.max(), (log_w - shift * t).max()
    return float(top0 + math.log(np.exp(log_w - top0).sum())
                 - top1 - math.log(np.exp(log_w - shift * t - top1).sum()))


def mixture_epsilon_ball(mixture: DiscreteLaplaceMixture, shift: int):
    """ε(Δ) = ln(Σ_j n_j c_j / Σ_j n_j c_j e^{−Δ/s_j}) as an Arb ball of :data:`BALL_BITS` bits that contains it."""
    from flint import arb, ctx, fmpq

    with ctx.workprec(BALL_BITS):
        top, bottom = arb(0), arb(0)
        for s, n in zip(mixture.scales, mixture.weights):
            rate = arb(fmpq(s.denominator, s.numerator))
            c = (rate / 2).tanh() * n
            top += c
            bottom += c * (-rate * int(shift)).exp()
        return (top / bottom).log()


def _upper(ball) -> Fraction:
    """The upper end of an Arb ball, exactly (rounded up at :data:`BALL_BITS` bits)."""
    from flint import ctx

    with ctx.workprec(BALL_BITS):
        return ball_upper(ball)


def integer_shifts(pattern: ShiftPattern) -> tuple[int, ...] | None:
    """The pattern's magnitudes as integers, or None when one is not a whole number."""
    if any(m.denominator != 1 for m in pattern.magnitudes):
        return None
    return tuple(int(m) for m in pattern.magnitudes)


def pattern_epsilon_upper(mixture: DiscreteLaplaceMixture, pattern: ShiftPattern) -> Fraction:
    """A rigorous upper bound (exact rational) on max_{v∈S} Σ_i ε(|v_i|): the upper end of each magnitude's ball,
    summed exactly over each row of the pattern.

    Raises
    ------
    ValueError
        A magnitude that is not a whole number (the lattice law is certified for integer shifts only).
    """
    shifts = integer_shifts(pattern)
    if shifts is None:
        raise ValueError("the discrete Laplace mixture is certified for integer shifts; a shift is not whole")
    return pattern.worst([_upper(mixture_epsilon_ball(mixture, m)) for m in shifts])


def ratio_sup_enumerated(mixture: DiscreteLaplaceMixture, shift: int, half_width: int | None = None) -> float:
    """Brute force: max over integers |k| ≤ W of |ln p(k) − ln p(k + Δ)| (W = ``half_width``, by default
    4Δ + 20·the largest scale), for the certificate's cross-check that the supremum is the closed form's."""
    width = half_width if half_width is not None else 4 * shift + math.ceil(20 * float(max(mixture.scales)))
    k = np.arange(-width, width + 1)
    return float(np.max(np.abs(mixture.log_pmf(k) - mixture.log_pmf(k + shift))))
