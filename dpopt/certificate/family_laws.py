"""Noise laws, for the second route, of families whose module does not state one.

A family states the law of its emitted noise with :meth:`Mechanism.noise_law`
(:mod:`dpopt.privacy.noise_law`); ``gaussian``, ``projected_gaussian`` and ``laplace`` do.
The families below were written before that hook existed. Their laws are assembled here
from the rebuilt mechanism's public parameters and its own one-dimensional noise objects
(no density is re-derived from a calibration), so that ``dpopt verify`` can analyse them
now. A family's own ``noise_law()`` always takes precedence: when a family module adds
one, its entry here is dead and should be deleted.

A builder returns the law, or the reason there is none: noise that is not additive and
independent of the data (the truncated and boundary-inflated generalized Gaussian) has no
law here, and such certificates say that the second route is not available.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpopt.mechanisms import Mechanism
from dpopt.privacy.noise_law import (
    DiscreteGaussianMarginal,
    DiscreteLaplaceMarginal,
    GaugeLaw,
    GaussianMarginal,
    NoiseObjectMarginal,
    PostProcessedLaw,
    ProductLaw,
)

_EIGEN_RTOL = 1e-12
"""Eigenvalues of a covariance below this fraction of the largest are taken as 0."""


def _james_stein(m) -> PostProcessedLaw:
    basis = None if m.basis is None else np.asarray(m.basis, dtype=float)
    k = m.dimension if basis is None else basis.shape[1]
    stage = ProductLaw((GaussianMarginal(m.sigma),) * k, m.dimension, basis, None,
                       f"Gaussian stage N(0, σ²BBᵀ), σ = {m.sigma:.17g}, rank {k}")
    return PostProcessedLaw(stage, f"James–Stein shrinkage ({m.variant})", stage.description)


def _gaussian_optimal(m) -> ProductLaw:
    w, q = np.linalg.eigh(np.asarray(m.covariance, dtype=float))
    keep = w > _EIGEN_RTOL * w.max()
    return ProductLaw(tuple(GaussianMarginal(float(np.sqrt(x))) for x in w[keep]), m.dimension, q[:, keep], None,
                      f"N(0, Σ) in the eigenbasis of Σ ({int(keep.sum())} positive eigenvalues)")


def _query_scaling(m) -> ProductLaw:
    xi = np.asarray(m.xi, dtype=float)
    noisy = np.flatnonzero(np.isfinite(xi) & (xi > 0))
    basis = np.zeros((m.dimension, noisy.size))
    basis[noisy, np.arange(noisy.size)] = 1.0
    marginals = tuple(GaussianMarginal(m.sigma / float(np.sqrt(xi[i]))) for i in noisy)
    return ProductLaw(marginals, m.dimension, basis, xi > 0,
                      f"N(0, σ²Diag(ξ)⁻¹), σ = {m.sigma:.17g}; ξ = ∞ exact, ξ = 0 not released")


def _discrete_gaussian(m) -> ProductLaw:
    return ProductLaw.iid(DiscreteGaussianMarginal(float(m.sigma2)), m.dimension,
                          f"discrete Gaussian N_Z(0, σ²)^d, σ² = {m.sigma2}")


def _discrete_laplace(m) -> ProductLaw:
    return ProductLaw.iid(DiscreteLaplaceMarginal(float(m.scale)), m.dimension,
                          f"discrete Laplace^d, scale {m.scale}")


def _staircase(m) -> ProductLaw:
    n = m.noise
    marginal = NoiseObjectMarginal(n, ("staircase", n.epsilon0, n.step, n.g), n.typical_scale, log_concave=False)
    return ProductLaw.iid(marginal, m.dimension, f"staircase^d (ε₀ = {n.epsilon0:.17g}, Δ₀ = {n.step:.17g}, "
                                                 f"g = {n.g:.17g})")


def _r2dp(m) -> ProductLaw:
    fold = m.fold
    marginal = NoiseObjectMarginal(fold, ("r2dp", repr(fold.parameters)), 1.0 / fold.mean(), log_concave=False,
                                   tail=fold.noise_tail)
    return ProductLaw.iid(marginal, m.dimension, f"R²DP noise^d (Laplace(1/t), t from the second fold {fold!r})")


def _generalized_gaussian(m) -> ProductLaw | str:
    if m.variant != "unbounded":
        return (f"the {m.variant} generalized Gaussian's noise depends on the true answer (it is not "
                "additive noise independent of the data)")
    n = m.noise
    marginal = NoiseObjectMarginal(n, ("generalized_gaussian", n.p, n.scale), n.scale, log_concave=n.p >= 1,
                                   tail=n.sf)
    return ProductLaw.iid(marginal, m.dimension, f"GG(0, b, p)^d, b = {n.scale:.17g}, p = {n.p}")


def _k_norm(m) -> GaugeLaw:
    body = m.body
    return GaugeLaw(m.epsilon, body.gauge, np.asarray(body.basis, dtype=float), m.dimension,
                    f"density ∝ exp(−ε‖z‖_K) on the {m.rank}-dimensional span, K = {body.kind}")


FAMILY_LAWS: dict[str, Callable[[Mechanism], object]] = {
    "james_stein": _james_stein,
    "gaussian_optimal": _gaussian_optimal,
    "query_scaling": _query_scaling,
    "discrete_gaussian": _discrete_gaussian,
    "discrete_laplace": _discrete_laplace,
    "staircase": _staircase,
    "r2dp": _r2dp,
    "generalized_gaussian": _generalized_gaussian,
    "k_norm": _k_norm,
}
