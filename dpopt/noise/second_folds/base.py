"""The law of the Laplace rate t = 1/b: the interface every second fold states, and the
quadrature of its inverse moments from the MGF (see :mod:`dpopt.noise.second_folds`)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from dpopt._lazy import lazy_module

integrate = lazy_module("scipy.integrate")
mpmath = lazy_module("mpmath")
special = lazy_module("scipy.special")

_LOG_HALF = math.log(0.5)


def as_array(u) -> np.ndarray:
    return np.asarray(u, dtype=float)


def is_scalar(u) -> bool:
    """True for a number (the optimisers' calls take the scalar paths): floats first, as
    ``np.ndim`` costs more than a scalar path's arithmetic."""
    return isinstance(u, (float, int)) or np.ndim(u) == 0


def gamma_ratio(a, p: float):
    """Γ(a − p)/Γ(a) for a > p, without cancelling huge log-gammas: a product for integer p,
    the asymptotic a^{−p}(1 + p(p+1)/(2a)) for a > 1e8 (relative error O(a^{−2}))."""
    a = np.asarray(a, dtype=float)
    if float(p).is_integer():
        out = np.ones_like(a)
        for j in range(1, int(p) + 1):
            out = out / (a - j)
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        small = np.exp(special.gammaln(np.minimum(a, 1e8) - p) - special.gammaln(np.minimum(a, 1e8)))
    return np.where(a > 1e8, a ** (-p) * (1 + p * (p + 1) / (2 * a)), small)


def mp_exact(x: float) -> mpmath.mpf:
    """The binary value of a float, exactly, as an mpmath number."""
    return mpmath.mpf(float(x))


class SecondFold(ABC):
    """The law of t = 1/b (a Laplace rate), t ≥ 0 almost surely, E[t] < ∞."""

    kind: ClassVar[str]

    # ------------------------------------------------------------------ facts
    @abstractmethod
    def log_mgf(self, u) -> np.ndarray:
        """ln M(u), vectorised."""

    @abstractmethod
    def dlog_mgf(self, u) -> np.ndarray:
        """M'(u)/M(u) = E[t e^{ut}]/E[e^{ut}], vectorised."""

    @abstractmethod
    def mgf_mp(self, u: mpmath.mpf) -> mpmath.mpf:
        """M(u) in mpmath at the working precision (closed form, independent of the numpy code)."""

    @abstractmethod
    def mgf_prime_mp(self, u: mpmath.mpf) -> mpmath.mpf:
        """M'(u) in mpmath at the working precision."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws of t."""

    @abstractmethod
    def scaled(self, c: float) -> SecondFold:
        """The law of c·t (c > 0)."""

    @property
    @abstractmethod
    def parameters(self) -> dict:
        """JSON-ready description, with ``kind``; :func:`fold_from_parameters` inverts it."""

    @property
    @abstractmethod
    def small_ball_exponent(self) -> float:
        """a with P(t ≤ x) ≍ x^a as x → 0 (``inf`` when t is bounded away from 0):
        E[t^{-p}] < ∞ iff a > p."""

    def _inverse_moment_closed(self, p: float) -> float | None:
        return None

    # --------------------------------------------------------------- derived
    def log_mgf_prime(self, u) -> np.ndarray:
        """ln M'(u) = ln M(u) + ln(M'(u)/M(u))."""
        return self.log_mgf(u) + np.log(self.dlog_mgf(u))

    def mgf(self, u) -> np.ndarray:
        return np.exp(self.log_mgf(u))

    def mgf_prime(self, u) -> np.ndarray:
        return np.exp(self.log_mgf_prime(u))

    def mean(self) -> float:
        """E[t] = M'(0)."""
        return float(self.dlog_mgf(0.0))

    def inverse_moment(self, p: float) -> float:
        r"""E[t^{-p}] for p > 0, ``inf`` when it diverges.

        Closed form where the family has one, else from the MGF (Table 1 of the paper,
        generalised): :math:`\mathbb E[t^{-p}] = \frac1{\Gamma(p)}\int_0^\infty x^{p-1} M(-x)\,dx`.
        """
        if not self.small_ball_exponent > p:
            return math.inf
        closed = self._inverse_moment_closed(p)
        if closed is not None:
            return float(closed)
        return inverse_moment_from_mgf(self, p)

    def noise_tail(self, x) -> np.ndarray:
        """P(Z > x) = ½ M(−x) for x ≥ 0 (eq. 11), Z the R²DP noise."""
        return 0.5 * np.exp(self.log_mgf(-np.abs(as_array(x))))

    def noise_log_density(self, x) -> np.ndarray:
        """ln f(x) = ln(½ M'(−|x|)) (eq. 10)."""
        return _LOG_HALF + self.log_mgf_prime(-np.abs(as_array(x)))

    def sample_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """R²DP noise: t from the second fold, then Laplace(1/t); t is discarded."""
        return rng.laplace(0.0, 1.0, size=size) / self.sample(rng, size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.parameters})"


def inverse_moment_from_mgf(fold: SecondFold, p: float) -> float:
    r""":math:`\frac1{\Gamma(p)}\int_0^\infty x^{p-1} M(-x)\,dx` by adaptive quadrature
    (valid when the integral converges, i.e. ``small_ball_exponent > p``)."""
    scale = 1.0 / fold.mean()

    def integrand(y: float) -> float:
        return float(np.exp((p - 1.0) * math.log(y) + fold.log_mgf(-y))) if y > 0 else 0.0

    total = 0.0
    edges = [0.0, scale, 10 * scale, 100 * scale, 1e4 * scale, math.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        # from the bulk outwards; a panel's absolute tolerance is relative to the total so far
        value, _ = integrate.quad(integrand, lo, hi, limit=200, epsabs=1e-14 * total, epsrel=1e-11)
        total += value
    return total / math.gamma(p)
