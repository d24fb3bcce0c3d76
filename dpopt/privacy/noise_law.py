r"""The law of a mechanism's emitted noise, stated for an independent privacy analysis.

``dpopt verify`` checks a family's privacy claim twice: once by the family's own
``privacy_checks`` (closed forms, exact or 60-digit arithmetic) and once by a *second
route* that knows nothing of the family's calibration: it takes the law of the noise the
mechanism emits and computes the privacy loss of that law at the neighbouring differences
the spec implies (:mod:`dpopt.privacy.pld`, :mod:`dpopt.certificate.second_route`). This
module is the small vocabulary in which a family states that law
(:meth:`dpopt.mechanisms.base.Mechanism.noise_law`):

* :class:`ProductLaw` — Z = B·W with W = (W_1, …, W_r) independent, each W_k a symmetric
  law on ℝ (or ℤ) whose density is non-increasing in |x| (:class:`Marginal`), and B a
  d × r matrix with orthonormal columns (the identity by default). Covers i.i.d. noise
  (Gaussian, Laplace, staircase, R²DP, generalized Gaussian, the discrete laws), noise on
  a subspace (projected Gaussian, in an orthonormal basis of the span) and correlated
  Gaussian noise (in the eigenbasis of its covariance). Output coordinates a design does
  not release can be excluded (``observed``).
* :class:`GaugeLaw` — density ∝ exp(−ε‖z‖_K) on a subspace (the K-norm mechanism).
* :class:`PostProcessedLaw` — the release is a data-independent post-processing of
  φ(X) + Z with Z of an inner law (James–Stein shrinkage of a Gaussian release); the
  privacy of the inner release bounds that of the output.

Every marginal is *symmetric and unimodal* (density non-increasing in |x|): the second
route's bounds on the privacy loss over an interval use only that fact, plus log-concavity
where a marginal declares it.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy import special

TAIL_FLOOR = 1e-18
"""The window of a marginal is cut where P(W > x) falls below this (the rest is tail mass)."""


# ----------------------------------------------------------------------- marginals
class Marginal(ABC):
    """A symmetric law on ℝ (or on ℤ when ``lattice``) with density non-increasing in |x|.

    Subclasses state :meth:`log_density` (normalised; the pmf for a lattice law),
    :meth:`tail` (P(W > x) for x ≥ 0), ``scale`` (a typical |W|), ``key`` (equal keys mean
    equal laws) and whether the law is log-concave.
    """

    lattice: ClassVar[bool] = False
    log_concave: bool = True
    gaussian_sd: float | None = None
    """σ when the marginal is N(0, σ²): products of Gaussians are whitened to one coordinate."""
    analytic_tail: ClassVar[bool] = False
    """P(W > x) is analytic on x > 0 (no kink): :meth:`abs_moment` may use Gauss–Legendre panels."""

    @property
    @abstractmethod
    def key(self) -> tuple:
        """Identifies the law (equal keys: equal laws)."""

    @property
    @abstractmethod
    def scale(self) -> float:
        """A typical magnitude (sets grid resolutions)."""

    @abstractmethod
    def log_density(self, x) -> np.ndarray:
        """log f(x) (log pmf on ℤ for a lattice law), normalised."""

    @abstractmethod
    def tail(self, x) -> np.ndarray:
        """P(W > x) for x ≥ 0."""

    def cdf(self, x) -> np.ndarray:
        """P(W ≤ x), from :meth:`tail` on the far side (no cancellation)."""
        x = np.asarray(x, dtype=float)
        if self.lattice:
            x = np.floor(x)
            below = self.tail(np.maximum(-x - 1.0, 0.0))  # P(W ≤ x) = P(W ≥ −x) = P(W > −x − 1), x < 0
            return np.where(x >= 0, 1.0 - self.tail(np.maximum(x, 0.0)), below)
        return np.where(x >= 0, 1.0 - self.tail(np.abs(x)), self.tail(np.abs(x)))

    def window(self) -> float:
        """The smallest x (doubling, then bisection) with P(W > x) ≤ :data:`TAIL_FLOOR`, at most 10⁶·scale."""
        hi = self.scale
        while float(self.tail(hi)) > TAIL_FLOOR and hi < 1e6 * self.scale:
            hi *= 2.0
        lo = hi / 2.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if float(self.tail(mid)) > TAIL_FLOOR:
                lo = mid
            else:
                hi = mid
        return math.ceil(hi) if self.lattice else hi

    def abs_moment(self, p: float) -> float:
        r"""E|W|^p by numerical integration of the law.

        Continuous laws: :math:`\mathbb E|W|^p = \int_0^\infty p x^{p-1}\, 2P(W > x)\,dx`
        (integration by parts; the tail is continuous even where the density steps), over
        panels of width s/2 up to 200 s (s = :attr:`scale`), then geometric panels to the
        window: by 40-point Gauss–Legendre rules when the tail is analytic (accepted when the
        20-point rules agree to 10⁻¹², which holds for an entire integrand on panels of s/2),
        otherwise by adaptive quadrature (QUADPACK); lattice laws: the sum of |k|^p·pmf over
        the window.
        """
        top = self.window()
        if self.lattice:
            k = np.arange(-int(top), int(top) + 1, dtype=float)
            return float(np.sum(np.abs(k) ** p * np.exp(self.log_density(k))))
        s = self.scale
        edges = list(np.arange(0.0, min(top, 200.0 * s), 0.5 * s))
        while edges[-1] < top:
            edges.append(min(top, max(edges[-1] + 0.5 * s, 2.0 * edges[-1])))

        if self.analytic_tail:
            rules = [_panel_gauss_legendre(lambda x: p * x ** (p - 1.0) * 2.0 * self.tail(x), edges, n)
                     for n in (20, 40)]
            if abs(rules[1] - rules[0]) <= 1e-12 * abs(rules[1]):
                return rules[1]

        def integrand(x: float) -> float:
            return p * x ** (p - 1.0) * 2.0 * float(self.tail(x)) if x > 0 else 0.0

        from scipy import integrate  # imported where used (several numpy imports' time)

        total = 0.0
        with warnings.catch_warnings():  # a roundoff notice at 1e-11 is far below any use of the result
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            for a, b in zip(edges[:-1], edges[1:]):
                value, _ = integrate.quad(integrand, a, b, limit=200, epsabs=0.0, epsrel=1e-11)
                total += value
        return total

    def within(self, gamma: float) -> float:
        """P(|W| ≤ γ) = 1 − 2P(W > γ) (continuous; for a lattice law 1 − 2P(W > ⌊γ⌋))."""
        return float(1.0 - 2.0 * self.tail(math.floor(gamma) if self.lattice else gamma))

    def __repr__(self) -> str:
        args = ", ".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in self.key[1:])
        return f"{self.key[0]}({args})"


class GaussianMarginal(Marginal):
    """N(0, σ²)."""

    analytic_tail = True

    def __init__(self, sd: float):
        if not (sd > 0 and math.isfinite(sd)):
            raise ValueError(f"the standard deviation must be positive and finite (got {sd})")
        self.sd = float(sd)
        self.gaussian_sd = self.sd

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
        return special.ndtr(-np.asarray(x, dtype=float) / self.sd)


class LaplaceMarginal(Marginal):
    """Laplace(0, b): density e^{−|x|/b}/(2b)."""

    analytic_tail = True

    def __init__(self, scale: float):
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"the Laplace scale must be positive and finite (got {scale})")
        self.b = float(scale)

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


def _panel_gauss_legendre(f: Callable, edges: list[float], n: int) -> float:
    r"""Σ over panels [a, b] of the n-point Gauss–Legendre rule for ∫_a^b f (``f`` vectorised):
    :math:`\tfrac{b-a}2\sum_i w_i f\big(\tfrac{a+b}2 + \tfrac{b-a}2 t_i\big)` with the nodes
    t_i and weights w_i of :func:`numpy.polynomial.legendre.leggauss`."""
    t, w = np.polynomial.legendre.leggauss(n)
    a, b = np.asarray(edges[:-1]), np.asarray(edges[1:])
    half = (0.5 * (b - a))[:, None]
    x = (0.5 * (a + b))[:, None] + half * t
    return float(np.sum(half * w * np.asarray(f(x), dtype=float)))


class NoiseObjectMarginal(Marginal):
    """A symmetric law given by a family's own noise object.

    The object provides P(W > x) for x ≥ 0 and either ``log_density`` / ``logpdf`` or
    ``density`` (the :class:`dpopt.privacy.noise_metrics.SymmetricNoise` protocol).

    Parameters
    ----------
    noise : object
        The family's one-dimensional noise law.
    key : tuple
        Identifies the law.
    scale : float
        A typical |W|.
    log_concave : bool
        Whether the density is log-concave (then the privacy loss is monotone in x).
    tail : callable, optional
        P(W > x) for x ≥ 0 when the object's own ``tail`` has another convention.
    """

    def __init__(self, noise, key: tuple, scale: float, log_concave: bool, tail: Callable | None = None):
        self.noise = noise
        self._key = key
        self._scale = float(scale)
        self.log_concave = bool(log_concave)
        self._tail = tail if tail is not None else noise.tail
        for name in ("log_density", "logpdf", "noise_log_density"):
            if hasattr(noise, name):
                self._log_density = getattr(noise, name)
                break
        else:
            self._log_density = lambda x: np.log(noise.density(x))

    @property
    def key(self) -> tuple:
        return self._key

    @property
    def scale(self) -> float:
        return self._scale

    def log_density(self, x):
        with np.errstate(divide="ignore"):
            return np.asarray(self._log_density(np.asarray(x, dtype=float)), dtype=float)

    def tail(self, x):
        return np.asarray(self._tail(np.asarray(x, dtype=float)), dtype=float)


class DiscreteGaussianMarginal(Marginal):
    r"""N_ℤ(0, σ²): pmf ∝ exp(−k²/(2σ²)) on ℤ (Canonne, Kamath & Steinke 2020).

    Normalised by the sum over |k| ≤ ⌈40σ⌉ + 10 (the rest is below e^{−800}).
    """

    lattice = True

    def __init__(self, sigma2: float):
        if not (sigma2 > 0 and math.isfinite(sigma2)):
            raise ValueError(f"σ² must be positive and finite (got {sigma2})")
        self.sigma2 = float(sigma2)
        top = int(math.ceil(40.0 * math.sqrt(self.sigma2))) + 10
        k = np.arange(0, top + 1, dtype=float)
        half = np.exp(-k * k / (2.0 * self.sigma2))
        self._log_norm = math.log(2.0 * float(half[1:].sum()) + 1.0)
        pmf = half * math.exp(-self._log_norm)
        self._tail = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(W > k), k = 0..top

    @property
    def key(self) -> tuple:
        return ("discrete_gaussian", self.sigma2)

    @property
    def scale(self) -> float:
        return max(1.0, math.sqrt(self.sigma2))

    def log_density(self, x):
        k = np.asarray(x, dtype=float)
        return -k * k / (2.0 * self.sigma2) - self._log_norm

    def tail(self, x):
        k = np.clip(np.floor(np.asarray(x, dtype=float)), 0, self._tail.size - 1).astype(int)
        return self._tail[k]


class DiscreteLaplaceMarginal(Marginal):
    """Discrete Laplace of scale b on ℤ: pmf (1 − r)/(1 + r)·r^{|k|}, r = e^{−1/b}."""

    lattice = True

    def __init__(self, scale: float):
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"the discrete Laplace scale must be positive and finite (got {scale})")
        self.b = float(scale)

    @property
    def key(self) -> tuple:
        return ("discrete_laplace", self.b)

    @property
    def scale(self) -> float:
        return max(1.0, self.b)

    def log_density(self, x):
        k = np.abs(np.asarray(x, dtype=float))
        log_r = -1.0 / self.b
        return k * log_r + math.log(-math.expm1(log_r)) - math.log1p(math.exp(log_r))

    def tail(self, x):
        k = np.floor(np.asarray(x, dtype=float))
        return np.exp((k + 1.0) * (-1.0 / self.b)) / (1.0 + math.exp(-1.0 / self.b))


# ---------------------------------------------------------------------------- laws
@dataclass(frozen=True)
class ProductLaw:
    """Z = B·W on the observed output coordinates, W_k independent with law ``marginals[k]``.

    Parameters
    ----------
    marginals : tuple of Marginal
        r laws, one per coordinate of W.
    dimension : int
        d, the query dimension.
    basis : ndarray, shape (d, r), optional
        Orthonormal columns; None for the identity (r = d).
    observed : ndarray of bool, shape (d,), optional
        The output coordinates that are released (None: all); the others carry no
        information and are ignored.
    description : str
        The law in words, for certificates.
    """

    marginals: tuple
    dimension: int
    basis: np.ndarray | None = None
    observed: np.ndarray | None = None
    description: str = ""

    @classmethod
    def iid(cls, marginal: Marginal, dimension: int, description: str = "") -> ProductLaw:
        """d i.i.d. coordinates."""
        return cls((marginal,) * int(dimension), int(dimension), None, None, description)

    @property
    def rank(self) -> int:
        return len(self.marginals)

    @property
    def gaussian(self) -> bool:
        """Every marginal is Gaussian: the privacy loss of a shift v is that of N(0, 1) shifted by ‖Λ^{-1/2}Bᵀv‖."""
        return all(m.gaussian_sd is not None for m in self.marginals)

    @property
    def lattice(self) -> bool:
        return any(m.lattice for m in self.marginals)

    def _observed(self) -> np.ndarray:
        return np.ones(self.dimension, bool) if self.observed is None else np.asarray(self.observed, bool)

    def coordinates(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W, residual): Bᵀy on the observed coordinates for the rows y of ``points``, and
        ‖y − BBᵀy‖ over those coordinates (0 when y lies where the noise lives)."""
        y = np.atleast_2d(np.asarray(points, dtype=float))[:, self._observed()]
        if self.basis is None:
            return y, np.zeros(y.shape[0])
        b = np.asarray(self.basis, dtype=float)[self._observed()]
        w = y @ b
        return w, np.linalg.norm(y - w @ b.T, axis=1)

    def log_density(self, points: np.ndarray) -> np.ndarray:
        """Σ_k log f_k(w_k) for the rows of ``points`` (the density on the noise's support)."""
        w, _ = self.coordinates(points)
        out = np.zeros(w.shape[0])
        for k, m in enumerate(self.marginals):
            out += m.log_density(w[:, k])
        return out


@dataclass(frozen=True)
class GaugeLaw:
    """Density ∝ exp(−ε‖z‖_K) on the span of ``basis`` (d × s, orthonormal columns).

    ``gauge`` evaluates ‖z‖_K for the rows of z (points of the span). The radial part
    ‖Z‖_K then has the Gamma(s, rate ε) law (density ∝ r^{s−1}e^{−εr}).
    """

    epsilon: float
    gauge: Callable[[np.ndarray], np.ndarray]
    basis: np.ndarray
    dimension: int
    description: str = ""

    @property
    def rank(self) -> int:
        return int(np.asarray(self.basis).shape[1])

    def residual(self, points: np.ndarray) -> np.ndarray:
        """‖y − BBᵀy‖ for the rows y of ``points``."""
        y = np.atleast_2d(np.asarray(points, dtype=float))
        b = np.asarray(self.basis, dtype=float)
        return np.linalg.norm(y - (y @ b) @ b.T, axis=1)

    def log_density(self, points: np.ndarray) -> np.ndarray:
        """−ε‖y‖_K (up to the normalising constant) for the rows of ``points``."""
        return -self.epsilon * np.asarray(self.gauge(np.atleast_2d(np.asarray(points, dtype=float))), dtype=float)


@dataclass(frozen=True)
class PostProcessedLaw:
    """The release is ``operation`` applied to φ(X) + Z with Z ~ ``inner``.

    By the post-processing property the output is at least as private as φ(X) + Z, which
    the second route analyses. The family's ``sample`` draws Z (the inner stage).
    """

    inner: object
    operation: str
    description: str = field(default="")

    def log_density(self, points: np.ndarray) -> np.ndarray:
        return self.inner.log_density(points)
