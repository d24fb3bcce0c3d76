r"""The unit balls of l1, l2 and l∞ in R^s: exact uniform samplers and their moments.

Uniform sampling, exact in any dimension s (no rejection):

* l2: a direction Z/‖Z‖₂ with Z ~ N(0, I_s), times a radius V^{1/s}, V ~ U(0, 1)
  (P(‖U‖₂ ≤ t) = t^s);
* l∞: s independent U(−1, 1) coordinates;
* l1: (E_1, …, E_s)/(E_1 + … + E_{s+1}) with E_i i.i.d. Exp(1) is uniform on the simplex
  {x ≥ 0, Σx ≤ 1} (it is the first s coordinates of a Dirichlet(1, …, 1) vector), and
  independent random signs spread it over the 2^s orthants.

Moments of U uniform on the ball (each coordinate has the same law):

* l2: U_i has density ∝ (1 − x²)^{(s−1)/2}, so E U_i² = 1/(s+2) and
  E|U_i| = 2 / ((s+1) B(1/2, (s+1)/2));
* l∞: E U_i² = 1/3, E|U_i| = 1/2;
* l1: |U_i| ~ Beta(1, s) (a Dirichlet marginal), so E U_i² = 2/((s+1)(s+2)) and
  E|U_i| = 1/(s+1).

E‖U‖₂ is s/(s+1) for the l2 ball. For l∞ and l1 it is evaluated by one-dimensional
numerical integration of

.. math:: \mathbb{E}\sqrt{Q} = \frac{1}{2\sqrt{\pi}} \int_0^\infty
          \bigl(1 - \mathbb{E}e^{-tQ}\bigr)\, t^{-3/2}\, dt, \qquad Q = \|X\|_2^2,

where :math:`\mathbb{E}e^{-tQ} = \varphi(t)^s` for i.i.d. coordinates: U(−1, 1) has
φ(t) = √π erf(√t)/(2√t), Laplace(0, 1) has φ(t) = √(π/(4t)) erfcx(1/(2√t)). The l1 ball
is reached through the Laplace vector L = R·U, R ~ Gamma(s + 1) independent of U uniform
on the l1 ball (the density of L is ∝ e^{−‖x‖₁}), so E‖U‖₂ = E‖L‖₂/(s + 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core import normal

BallKind = Literal["l1", "l2", "linf"]

integrate = lazy_module("scipy.integrate")
special = lazy_module("scipy.special")


BALL_KINDS: tuple[str, ...] = ("l1", "l2", "linf")


def _mean_sqrt_sum_of_squares(log_phi, s: int) -> float:
    """E√Q for Q = Σ_{i≤s} X_i², X_i i.i.d. with log E e^{−tX²} = ``log_phi(t)``."""

    def integrand(t: float) -> float:
        return -math.expm1(s * log_phi(t)) * t**-1.5

    head, _ = integrate.quad(integrand, 0.0, 1.0, limit=200, epsabs=1e-14, epsrel=1e-10)
    tail, _ = integrate.quad(integrand, 1.0, math.inf, limit=200, epsabs=1e-14, epsrel=1e-10)
    return (head + tail) / (2.0 * math.sqrt(math.pi))


def _log_phi_uniform(t: float) -> float:
    """log E e^{−tU²}, U ~ U(−1, 1)."""
    r = math.sqrt(t)
    return math.log(math.sqrt(math.pi) * math.erf(r) / (2.0 * r)) if r > 1e-8 else -t / 3.0


def _log_phi_laplace(t: float) -> float:
    """log E e^{−tL²}, L ~ Laplace(0, 1)."""
    return 0.5 * math.log(math.pi / (4.0 * t)) + math.log(normal.erfcx(1.0 / (2.0 * math.sqrt(t))))


@dataclass(frozen=True)
class LpBall:
    """The unit ball {y ∈ R^s : ‖y‖_p ≤ 1} for p ∈ {1, 2, ∞}.

    Examples
    --------
    >>> ball = LpBall("l1", 3)
    >>> ball.sample(np.random.default_rng(0), 5).shape
    (5, 3)
    >>> round(ball.coordinate_second_moment, 12)   # 2/((s+1)(s+2))
    0.1
    """

    kind: BallKind
    dimension: int

    def __post_init__(self):
        if self.kind not in BALL_KINDS:
            raise ValueError(f"kind must be one of {BALL_KINDS} (got {self.kind!r})")
        if int(self.dimension) != self.dimension or self.dimension < 1:
            raise ValueError(f"dimension must be a positive integer (got {self.dimension})")

    @property
    def _p(self) -> float:
        return {"l1": 1.0, "l2": 2.0, "linf": math.inf}[self.kind]

    def gauge(self, y: np.ndarray) -> np.ndarray:
        """‖y‖_p for the rows of ``y``."""
        return np.linalg.norm(np.atleast_2d(np.asarray(y, dtype=float)), ord=self._p, axis=1)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent uniform points of the ball, shape (size, s)."""
        s = self.dimension
        if self.kind == "linf":
            return rng.uniform(-1.0, 1.0, size=(size, s))
        if self.kind == "l2":
            z = rng.standard_normal((size, s))
            radius = rng.random(size) ** (1.0 / s)
            return z * (radius / np.linalg.norm(z, axis=1))[:, None]
        e = rng.standard_exponential((size, s + 1))
        signs = rng.integers(0, 2, size=(size, s)) * 2.0 - 1.0
        return signs * e[:, :s] / e.sum(axis=1, keepdims=True)

    @property
    def log_volume(self) -> float:
        """log vol: l1 2^s/s!, l2 π^{s/2}/Γ(s/2 + 1), l∞ 2^s."""
        s = self.dimension
        if self.kind == "l1":
            return s * math.log(2.0) - math.lgamma(s + 1)
        if self.kind == "l2":
            return 0.5 * s * math.log(math.pi) - math.lgamma(0.5 * s + 1)
        return s * math.log(2.0)

    @property
    def coordinate_second_moment(self) -> float:
        """E U_i² (the same for every coordinate; E[UUᵀ] is this times I)."""
        s = self.dimension
        return {"l1": 2.0 / ((s + 1) * (s + 2)), "l2": 1.0 / (s + 2), "linf": 1.0 / 3.0}[self.kind]

    @property
    def coordinate_mean_abs(self) -> float:
        """E|U_i|."""
        s = self.dimension
        if self.kind == "l2":
            return 2.0 / ((s + 1) * special.beta(0.5, 0.5 * (s + 1)))
        return 1.0 / (s + 1) if self.kind == "l1" else 0.5

    def mean_l2_norm(self) -> tuple[float, str]:
        """E‖U‖₂ and how it was obtained (exact for l2, numerical integration otherwise)."""
        s = self.dimension
        if self.kind == "l2":
            return s / (s + 1.0), "exact: s/(s+1)"
        if self.kind == "linf":
            return _mean_sqrt_sum_of_squares(_log_phi_uniform, s), "numerical integration of E√Q"
        laplace = _mean_sqrt_sum_of_squares(_log_phi_laplace, s)
        return laplace / (s + 1.0), "numerical integration of E√Q for a Laplace vector, / (s+1)"
