r"""Private quantiles by the exponential mechanism on a declared grid (McSherry & Talwar 2007).

For values :math:`x_1, \dots, x_n` in [a, b] and a grid :math:`g_1 < \dots < g_G` of [a, b], the
q-quantile is released as grid point :math:`g_j` with probability

.. math:: P[g_j] \propto \exp(\beta\, u_j), \qquad u_j = -\bigl|\,\#\{i : x_i \le g_j\} - q\,n\,\bigr| .

Adding or removing one row changes the rank #{x_i ≤ g_j} by at most 1 (by 1 exactly when the row is
≤ g_j) and qn by q, so :math:`|\Delta u_j| \le \max(q, 1 - q)` =: Δ for every j. A person with r
rows in a group moves that group's scores by ≤ rΔ, so the ratio of probabilities of any output is
at most :math:`e^{2\beta r \Delta}` (numerator and normaliser each by :math:`e^{\beta r\Delta}`); over
groups released with the same β a person with ≤ R rows in all (the person-level l1 bound of
:mod:`dpopt.sensitivity.person`) is protected at

.. math:: \varepsilon = 2\,\beta\,R\,\Delta ,

pure DP, whatever the data: β = ε/(2RΔ) is calibrated without looking at them.

**Exact sampling.** With q = a/c as written (0.9 is 9/10), the scores are the integers
:math:`s_j = c\,u_j = -|c\,\#\{x_i \le g_j\} - a n|`, moved by ≤ D = max(a, c − a) per row, and the law
∝ exp(λ s_j) with the rational λ = ε/(2RD) (β = λc per unit of rank) is drawn exactly by
:func:`dpopt.noise.exponential.sample_exponential` (uniform proposals accepted by Bernoulli(exp(−γ)) in integer
arithmetic; Canonne, Kamath & Steinke 2020, Algorithm 1).

Utility (data-independent): with u* the best score, :math:`P[u^* - u \ge (\ln G + s)/\beta] \le e^{-s}`
(McSherry & Talwar, Thm. 6, on the G grid points), hence the expected rank error beyond the best
grid point satisfies :math:`E[u^* - u] \le (\ln G + 1)/\beta` (integrating the tail).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.decimals import written
from dpopt.core.rounding import nudge_until
from dpopt.noise.exponential import sample_exponential


def grid(low: float, high: float, step: float | None = None, points: list[float] | None = None) -> np.ndarray:
    """The grid: the listed points (sorted, within [low, high]), or low, low + step, … ≤ high.

    Raises
    ------
    ValueError
        A point outside [low, high], or more than 10⁶ points.
    """
    if points is not None:
        out = np.unique(np.asarray(points, dtype=float))
        if out[0] < low or out[-1] > high:
            raise ValueError(f"grid points must lie within [{low:g}, {high:g}]")
        return out
    count = math.floor((high - low) / step + 1e-9) + 1
    if count > 10**6:
        raise ValueError(f"the grid has {count} points (at most 10⁶)")
    return low + step * np.arange(count)


def row_sensitivity(q: float) -> float:
    """Δ = max(q, 1 − q): how far one row moves any score u_j."""
    return max(q, 1.0 - q)


def exact_q(q: float) -> Fraction:
    """q as the decimal written (0.9 is 9/10: :func:`~dpopt.core.decimals.written`)."""
    return written(q)


def score_sensitivity(q: float) -> int:
    """D = max(a, c − a) for q = a/c: how far one row moves an integer score s_j = −|c·rank_j − a·n| (c·Δ)."""
    exact = exact_q(q)
    return max(exact.numerator, exact.denominator - exact.numerator)


def scale_for(epsilon: object, rows: int, q: float) -> Fraction:
    """λ = ε/(2RD): the law ∝ exp(λ s_j) on the integer scores is ε-DP for a person with ≤ R rows (module
    docstring; ε a Fraction or the decimal written)."""
    return written(epsilon) / (2 * rows * score_sensitivity(q))


def epsilon_of(scale: Fraction, rows: int, q: float) -> Fraction:
    """ε = 2λRD, the guarantee of scale λ on the integer scores, exactly."""
    return 2 * Fraction(scale) * rows * score_sensitivity(q)


def rank_scale(scale: Fraction, q: float) -> float:
    """β = λc (q = a/c), the scale per unit of rank error, as the largest float ≤ it (for the utility bound)."""
    beta = Fraction(scale) * exact_q(q).denominator
    return nudge_until(float(beta), lambda b: Fraction(b) <= beta, up=False)


def integer_scores(values: np.ndarray, points: np.ndarray, q: float) -> np.ndarray:
    """s_j = −|c·#{x_i ≤ g_j} − a·n| for q = a/c, in int64 (c times u_j).

    Raises
    ------
    ValueError
        c·n beyond 2^62.
    """
    exact = exact_q(q)
    n = len(values)
    if exact.denominator * (n + 1) >= 2**62:
        raise ValueError(f"{n} values at q = {exact} leave the integer scores' int64 range")
    ranks = np.searchsorted(np.sort(np.asarray(values, dtype=float)), points, side="right").astype(np.int64)
    return -np.abs(exact.denominator * ranks - exact.numerator * n)


def sample(values: np.ndarray, points: np.ndarray, q: float, scale: Fraction, rng: np.random.Generator,
           size: int | None = None) -> float | np.ndarray:
    """Grid points drawn with probability ∝ exp(λ s_j), exactly (:func:`dpopt.noise.exponential.sample_exponential`:
    integer scores, rational λ, integer arithmetic); one float, or ``size`` of them."""
    drawn = points[sample_exponential(integer_scores(values, points, q), Fraction(scale), rng, 1 if size is None
                                      else size)]
    return float(drawn[0]) if size is None else drawn


def rank_error_bound(beta: float, size: int) -> float:
    """(ln G + 1)/β: the bound on the expected rank error beyond the best of G grid points."""
    return (math.log(size) + 1.0) / beta
