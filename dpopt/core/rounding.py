"""Directed rounding of calibrated values until an exact check accepts them."""

from __future__ import annotations

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
