r"""The law of a mechanism's emitted noise, stated for an independent privacy analysis.

``dpopt verify`` checks a family's privacy claim twice: once by the family's own
``privacy_checks`` (closed forms, exact or 60-digit arithmetic) and once by a *second
route* that knows nothing of the family's calibration: it takes the law of the noise the
mechanism emits and computes the privacy loss of that law at the neighbouring differences
the spec implies (:mod:`dpopt.privacy.pld`, :mod:`dpopt.certificate.second_route`). This
module is the small vocabulary in which a family states that law
(:meth:`dpopt.mechanisms.base.Mechanism.noise_law`):

* :class:`ProductLaw` — Z = B·W with W = (W_1, …, W_r) independent, each W_k a symmetric
  law on ℝ (or ℤ) whose density is non-increasing in |x| (:class:`~dpopt.noise.marginal.Marginal`), and B a
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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpopt.noise.marginal import Marginal


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
        Orthonormal columns; None for the identity (r = d); or, with ``projection``, a symmetric
        projection P (d × d, P² = P = Pᵀ, singular): Z = P·W is then the projection of d independent
        coordinates (the lattice stage of James–Stein, :mod:`dpopt.mechanisms.james_stein`).
    observed : ndarray of bool, shape (d,), optional
        The output coordinates that are released (None: all); the others carry no
        information and are ignored.
    description : str
        The law in words, for certificates.
    projection : bool
        ``basis`` is a projection P, not orthonormal columns. Both have BBᵀ the orthogonal projector onto
        range(B), so :meth:`coordinates` serves both: a shift v of Z in range(B) is the shift u = Bᵀv of W
        (B u = BBᵀv = v), and (Z, Z + v) is a post-processing of (W, W + u), so the privacy of the pair of W
        laws bounds it (for a projection, u = Pv = v). W is not a function of Z: the sampler's draws of W come
        from :meth:`~dpopt.mechanisms.base.Mechanism.latent_sample`, and Z has no product density.
    """

    marginals: tuple
    dimension: int
    basis: np.ndarray | None = None
    observed: np.ndarray | None = None
    description: str = ""
    projection: bool = False

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
        y = np.atleast_2d(np.asarray(points, dtype=float))
        if self.basis is None:
            return y[:, self._observed()], np.zeros(y.shape[0])
        if self.observed is not None:  # (a boolean index copies 10⁵ rows even when it keeps every column)
            y = y[:, self._observed()]
        b = np.asarray(self.basis, dtype=float)[self._observed()]
        w = y @ b
        return w, np.linalg.norm(y - w @ b.T, axis=1)

    def log_density(self, points: np.ndarray) -> np.ndarray:
        """Σ_k log f_k(w_k) for the rows of ``points`` (the density on the noise's support); not for a
        projection (Z = P·W has no product density)."""
        if self.projection:
            raise ValueError("a projected product law has no product density")
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
    preimage: dict | None = field(default=None)
    """How the inner stage's value is recovered from the output, up to finitely many candidates, when it can be
    (JSON: e.g. ``{"kind": "james_stein", ...}``, :func:`dpopt.mechanisms.shrinkage.stage_candidates`); intervals
    for the truth are then built around every candidate (:mod:`dpopt.certificate.intervals`)."""

    def log_density(self, points: np.ndarray) -> np.ndarray:
        return self.inner.log_density(points)
