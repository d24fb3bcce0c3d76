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


def beta_for(epsilon: object, rows: int, q: float) -> float:
    """The largest float β ≈ ε/(2RΔ) for a person with ≤ R rows (see the module) whose guarantee
    :func:`epsilon_of` is at most ε exactly: ε a Fraction or the decimal written
    (:func:`~dpopt.core.decimals.written`: ε = 0.1 is 1/10)."""
    target = written(epsilon)
    beta = float(target / (2 * rows * _exact_sensitivity(q)))
    return nudge_until(beta, lambda b: epsilon_of(b, rows, q) <= target, up=False)


def epsilon_of(beta: float, rows: int, q: float) -> Fraction:
    """ε = 2βRΔ, the guarantee of scale β, exactly (Δ = max(q, 1 − q) of the binary values of β and q)."""
    return 2 * Fraction(beta) * rows * _exact_sensitivity(q)


def _exact_sensitivity(q: float) -> Fraction:
    """Δ = max(q, 1 − q) in rationals (1.0 − q may round in floating point)."""
    exact = Fraction(q)
    return max(exact, 1 - exact)


def scores(values: np.ndarray, points: np.ndarray, q: float) -> np.ndarray:
    """u_j = −|#{x_i ≤ g_j} − qn| for every grid point."""
    ranks = np.searchsorted(np.sort(np.asarray(values, dtype=float)), points, side="right")
    return -np.abs(ranks - q * len(values))


def probabilities(values: np.ndarray, points: np.ndarray, q: float, beta: float) -> np.ndarray:
    """The mechanism's output law on the grid, exp(βu_j)/Σ exp(βu_k) (shifted by the best score)."""
    weighted = beta * scores(values, points, q)
    p = np.exp(weighted - weighted.max())
    return p / p.sum()


def sample(values: np.ndarray, points: np.ndarray, q: float, beta: float, rng: np.random.Generator) -> float:
    """One grid point drawn from :func:`probabilities` by inverting its CDF at a uniform of ``rng``."""
    cdf = np.cumsum(probabilities(values, points, q, beta))
    index = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return float(points[min(index, len(points) - 1)])


def rank_error_bound(beta: float, size: int) -> float:
    """(ln G + 1)/β: the bound on the expected rank error beyond the best of G grid points."""
    return (math.log(size) + 1.0) / beta
