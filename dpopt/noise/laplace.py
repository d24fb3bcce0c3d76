"""The Laplace law Laplace(0, b): density e^{−|x|/b}/(2b), tail ½e^{−x/b}."""

from __future__ import annotations

import math

import numpy as np

from dpopt.noise.marginal import Marginal


class LaplaceMarginal(Marginal):
    """Laplace(0, b): density e^{−|x|/b}/(2b)."""

    analytic_tail = True

    def __init__(self, scale: float):
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"the Laplace scale must be positive and finite (got {scale})")
        self.b = float(scale)
        self.mgf_radius = 1.0 / self.b

    @property
    def key(self) -> tuple:
        return ("laplace", self.b)

    @property
    def scale(self) -> float:
        return self.b

    def log_density(self, x):
        return -np.abs(np.asarray(x, dtype=float)) / self.b - math.log(2.0 * self.b)

    def tail(self, x):
        return 0.5 * np.exp(-np.asarray(x, dtype=float) / self.b)

    def log_mgf_bound(self, s: float) -> float:
        """log E e^{sW} = −log(1 − b²s²) for |s| < 1/b, exact (``inf`` beyond)."""
        bs = self.b * abs(s)
        return -math.log1p(-bs * bs) if bs < 1.0 else math.inf
