"""The one bracketed bisection on a monotone feasibility predicate."""

from __future__ import annotations

import math
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
