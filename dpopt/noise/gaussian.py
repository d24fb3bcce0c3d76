r"""The Gaussian law N(0, σ²): density :math:`e^{-x^2/(2\sigma^2)}/(\sigma\sqrt{2\pi})`, tail Φ(−x/σ)."""

from __future__ import annotations

import math

import numpy as np

from dpopt.core import normal
from dpopt.noise.marginal import Marginal


class GaussianMarginal(Marginal):
    """N(0, σ²)."""

    analytic_tail = True

    def __init__(self, sd: float):
        if not (sd > 0 and math.isfinite(sd)):
            raise ValueError(f"the standard deviation must be positive and finite (got {sd})")
        self.sd = float(sd)
        self.gaussian_sd = self.sd
        self.sub_gaussian = self.sd * self.sd

    @property
    def key(self) -> tuple:
        return ("gaussian", self.sd)

    @property
    def scale(self) -> float:
        return self.sd

    def log_density(self, x):
        z = np.asarray(x, dtype=float) / self.sd
        return -0.5 * z * z - math.log(self.sd) - 0.5 * math.log(2.0 * math.pi)

    def tail(self, x):
        return normal.ndtr(-np.asarray(x, dtype=float) / self.sd)


def expected_l1(sd) -> float:
    r"""E‖Z‖₁ for independent Z_i ~ N(0, sd_i²): :math:`\sqrt{2/\pi}\,\sum_i sd_i`."""
    return float(math.sqrt(2.0 / math.pi) * np.sum(sd))


def mean_usefulness(sd, gamma: float) -> float:
    r"""The mean over coordinates of P(|Z_i| ≤ γ), Z_i ~ N(0, sd_i²): :math:`\mathrm{erf}(\gamma/(\sqrt2\,sd_i))`
    (1 for a coordinate released exactly, sd_i = 0)."""
    sd = np.asarray(sd, dtype=float)
    with np.errstate(divide="ignore"):
        return float(np.mean(np.where(sd > 0, normal.erf(gamma / (np.sqrt(2.0) * sd)), 1.0)))
