"""Directed rounding: calibrated values nudged until an exact check accepts them, and the upper end of an Arb ball
as an exact rational."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

from dpopt.errors import CalibrationError


def nudge_until(x: float, holds: Callable[[float], bool], up: bool, max_steps: int = 200) -> float:
    """Move ``x`` up (or down) by relative steps 4e-16, 8e-16, ... until ``holds(x)``.

    Calibration finds a root in floating point; the value certified is the first one
    along this walk that the independent (exact or 60-digit) check accepts.

    Raises
    ------
    CalibrationError
        If no accepted value is found within ``max_steps`` steps.
    """
    step = 4e-16
    for _ in range(max_steps):
        if holds(x):
            return x
        x = x * (1.0 + step) if up else x * (1.0 - step)
        step *= 2.0
    raise CalibrationError("the calibrated value could not be certified by the independent check")


def ball_upper(ball) -> Fraction:
    """The upper end of an Arb ball (python-flint ``arb``) as an exact dyadic rational, rounded up at the working
    precision in force: a proven upper bound of every number the ball holds."""
    man, exp = (int(v) for v in ball.upper().man_exp())
    return Fraction(man << exp) if exp >= 0 else Fraction(man, 1 << -exp)
