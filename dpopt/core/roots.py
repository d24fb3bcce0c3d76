"""The bracketed bisections on a monotone feasibility predicate: on the reals, and on an exact grid."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable


def bisect_feasible(
    feasible: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    steps: int | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
    geometric: bool = False,
) -> float:
    r"""Shrink a bracket [lo, hi] of a monotone predicate and return its feasible end.

    ``feasible`` is false below a threshold x* and true above it, and ``feasible(hi)``
    holds; each step tests the midpoint (arithmetic :math:`(lo + hi)/2`, or geometric
    :math:`\sqrt{lo\,hi}` for a scale searched in log space) and keeps the half that
    still brackets x*. The returned ``hi`` is always feasible, so a calibration that
    takes it errs on the safe side.

    Parameters
    ----------
    feasible : callable
        The monotone predicate.
    lo, hi : float
        The bracket, ``feasible(hi)`` true.
    steps : int, optional
        A fixed number of halvings; otherwise halve while
        :math:`hi - lo > atol + rtol\cdot hi`.
    rtol, atol : float
        The stopping width when ``steps`` is not given.
    geometric : bool
        Use the geometric midpoint (``lo`` must then be positive).
    """
    def step(lo: float, hi: float) -> tuple[float, float]:
        mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
        return (lo, mid) if feasible(mid) else (mid, hi)

    if steps is not None:
        for _ in range(steps):
            lo, hi = step(lo, hi)
    else:
        while hi - lo > atol + rtol * hi:
            lo, hi = step(lo, hi)
    return hi


def smallest_on_grid(
    passes: Callable[[Fraction], bool],
    start: Fraction,
    grid: Callable[[Fraction], Fraction],
    *,
    steps: int,
    reach: int = 1 << 20,
) -> Fraction | None:
    """The smallest point of an exact grid at which a monotone predicate holds, to ``steps`` halvings.

    From ``grid(start)`` the bracket grows by 5/4 until ``passes`` holds (giving up beyond ``reach``·start) and
    shrinks by 4/5 while it still holds; the bisection then tests grid points ``grid((lo + hi)/2)`` (``grid``
    rounds up onto the grid) until the midpoint meets an end. The returned point always passes: a calibration that
    takes it errs on the safe side.

    Parameters
    ----------
    passes : callable
        False below a threshold, true above it (a privacy check as a function of a noise scale).
    start : Fraction
        The first guess (e.g. the continuous law's scale).
    grid : callable
        Rounds a positive rational up onto the grid (e.g. 21 significant bits).
    steps : int
        The most halvings.
    reach : int
        How far above ``start`` the bracket may grow.

    Returns
    -------
    Fraction or None
        The grid point found, or None when nothing up to ``reach``·start passes.
    """
    start = Fraction(start)
    hi = grid(start)
    while not passes(hi):
        hi = grid(hi * Fraction(5, 4))
        if hi > reach * start:
            return None
    lo = grid(hi * Fraction(4, 5))
    while passes(lo):
        hi, lo = lo, grid(lo * Fraction(4, 5))
    for _ in range(steps):
        mid = grid((lo + hi) / 2)
        if mid >= hi or mid <= lo:
            break
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi
