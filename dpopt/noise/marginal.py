"""One-dimensional noise laws as the second route reads them: a symmetric law on ℝ (or ℤ)
with density non-increasing in |x|, stated by its log-density and tail (:class:`Marginal`),
with the CDF, the window, the absolute moments and P(|W| ≤ γ) derived from them; and a
family's own noise object seen as such a law (:class:`NoiseObjectMarginal`)."""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np

TAIL_FLOOR = 1e-18
"""The window of a marginal is cut where P(W > x) falls below this (the rest is tail mass)."""


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
    sub_gaussian: float | None = None
    """A variance proxy v with E e^{tW} ≤ e^{t²v/2} for every t (σ² for N(0, σ²) and for N_ℤ(0, σ²)), when one is
    proven; linear images of independent such marginals get proven tail bounds (:mod:`dpopt.certificate.per_cell`)."""
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
            tail = self.tail(np.where(x >= 0, x, -x - 1.0))  # P(W ≤ x) = P(W ≥ −x) = P(W > −x − 1), x < 0
            return np.where(x >= 0, 1.0 - tail, tail)
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

    mgf_radius: float = math.inf
    """Where :meth:`log_mgf_bound` is finite: |s| < ``mgf_radius`` (1/b for the Laplace laws)."""

    def log_mgf_bound(self, s: float) -> float | None:
        r"""An upper bound on the log moment generating function :math:`\log \mathbb E e^{sW}` (``inf`` where
        the expectation diverges), or None when none is stated: exact for N(0, σ²) (σ²s²/2), the proxy's
        v s²/2 for a ``sub_gaussian`` law; laws with a closed form override it (Laplace, discrete Laplace).
        Chernoff tail bounds of linear combinations use it (:mod:`dpopt.certificate.linear_tails`)."""
        if self.gaussian_sd is not None:
            return 0.5 * (self.gaussian_sd * s) ** 2
        if self.sub_gaussian is not None:
            return 0.5 * self.sub_gaussian * s * s
        return None

    def cut(self, tau: float) -> int:
        """For a lattice law: the smallest whole T with 2·P(W > T) ≤ τ (exponential search, then bisection), where
        a convolution of the law may cut it (the mass beyond, ≤ τ, then added to the bound it proves)."""
        hi = max(1, int(math.ceil(self.scale)))
        while 2.0 * float(self.tail(hi)) > tau:
            hi *= 2
        lo = -1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid >= 0 and 2.0 * float(self.tail(mid)) <= tau:
                hi = mid
            else:
                lo = mid
        return hi

    def within(self, gamma: float) -> float:
        """P(|W| ≤ γ) = 1 − 2P(W > γ) (continuous; for a lattice law 1 − 2P(W > ⌊γ⌋))."""
        return float(1.0 - 2.0 * self.tail(math.floor(gamma) if self.lattice else gamma))

    def __repr__(self) -> str:
        args = ", ".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in self.key[1:])
        return f"{self.key[0]}({args})"


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
    ``density`` (the :class:`dpopt.noise.prior_metrics.SymmetricNoise` protocol).

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
