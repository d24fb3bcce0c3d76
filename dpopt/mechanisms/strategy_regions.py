r"""The confidence region of an integer-strategy measurement (``gaussian_optimal`` under ``ci_volume``, exact).

The measurement is y = Mx + η with an integer strategy M of k rows, η ~ N_ℤ(0, σ_ℤ²)^k i.i.d., and M B invertible
(k × k) on the span V = range(B) of the sensitivity space, k = dim V: the square M = round(c·Σ^{+1/2}) when V is
all of ℝ^d, else the k rows M = round(c·Λ_k^{-1/2}Q_kᵀ) (whitening on the span,
:func:`~dpopt.mechanisms.integer_strategy.span_root`). The release x̂ = x_⊥ + B(MB)⁻¹(y − Mx_⊥) (x_⊥ the public
component off V) is a bijection of y, and x̂ − x = B(MB)⁻¹η, so M(x − x̂) = −η. The region

.. math:: CR(\hat x) = \{\theta \in \hat x + V : \|M(\theta - \hat x)\|^2 \le \sigma_\mathbb{Z}^2\, r\}

covers x exactly when ‖η‖² ≤ σ_ℤ² r, i.e. Q = Σ_i η_i²/σ_ℤ² ≤ r: r is the radius of
:func:`~dpopt.stats.lattice_inference.lattice_region` for k i.i.d. coordinates of variance σ_ℤ², whose coverage
P(Q ≤ r) ≥ 1 − α is proven by convolution of the exact laws. The region is an ellipsoid of V, of deterministic
volume

.. math:: \mathrm{vol} = V_k\,(\sigma_\mathbb{Z}^2 r)^{k/2} / |\det(MB)|
   = V_k\,(\sigma_\mathbb{Z}^2 r)^{k/2}\,\sqrt{\det(A^\top A)} / |\det(MA)| ,

A an integer basis of V (d × k; A = I on ℝ^d): A = BT with T = BᵀA gives det(MA) = det(MB)·det T and
det(AᵀA) = det(T)², so both determinants are exact integers (:func:`~dpopt.core.integer_matrices.integer_determinant`) and only the
last square root and the product are floating point. The volume does not depend on which integer basis is taken.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.core.integer_matrices import independent_rows, integer_determinant
from dpopt.mechanisms.lattice import lattice_inference
from dpopt.stats.lattice_inference import EXACT_LAW, LatticeRegion
from dpopt.stats.log_volume import VolumeTerms, exp_or_inf


def integer_span_basis(vectors: np.ndarray, rank: int) -> np.ndarray:
    """A d × ``rank`` integer basis of the span of the integer rows ``vectors``: the first rows, in order, that are
    independent of those kept (:func:`~dpopt.core.integer_matrices.independent_rows`).

    Raises
    ------
    ValueError
        Rows that are not integers, or that span fewer than ``rank`` dimensions.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    if not np.array_equal(v, np.round(v)):
        raise ValueError("the span's generators are not integer vectors")
    rows = np.round(v).astype(np.int64)
    kept = independent_rows(rows, rank)
    if len(kept) < rank:
        raise ValueError(f"the generators span {len(kept)} dimensions, not {rank}")
    return rows[kept].T


@dataclass(frozen=True)
class StrategyRegion:
    """The region CR(x̂) of the module docstring.

    Attributes
    ----------
    region : LatticeRegion
        Its radius r and proven coverage, for k i.i.d. N_ℤ(0, σ_ℤ²) coordinates.
    strategy_determinant : int
        det(MA) (exact).
    basis_gram : int
        det(AᵀA) (exact).
    log_volume : float
        log(V_k (σ_ℤ² r)^{k/2} √det(AᵀA)/|det(MA)|).
    """

    region: LatticeRegion
    strategy_determinant: int
    basis_gram: int
    log_volume: float

    @property
    def volume(self) -> float:
        return exp_or_inf(self.log_volume)

    def describe(self) -> str:
        """The region, why it covers, and its volume, for a certificate (it begins with :data:`EXACT_LAW`)."""
        r = self.region
        k = len(r.sigma2s)
        return (f"{EXACT_LAW}: region {{θ ∈ x̂ + V : ‖M(θ − x̂)‖² ≤ σ_ℤ² r}}, σ_ℤ² = {r.sigma2s[0]}, r = {r.radius} "
                f"≈ {float(r.radius):.10g}; M(x − x̂) = −η with η ∈ ℤ^{k} i.i.d. N_ℤ(0, σ_ℤ²), so it covers x iff "
                f"‖η‖² ≤ σ_ℤ² r: proven coverage ≥ {r.coverage:.10f} ≥ 1 − α by convolution of the laws of "
                f"⌈η_i²/(σ_ℤ² h)⌉ (dpopt.stats.lattice_inference){r.stated_grid()}; volume V_{k} (σ_ℤ² r)^({k}/2) √det(AᵀA)/|det(MA)|, "
                f"det(MA) = {self.strategy_determinant}, det(AᵀA) = {self.basis_gram} in exact integers (A an "
                "integer basis of V; dpopt.mechanisms.strategy_regions)")

    def terms(self, strategy: np.ndarray, z: np.ndarray) -> VolumeTerms:
        """Per-draw Monte Carlo terms of released noise draws ``z`` = x̂ − x (rows) whose mean is the volume times
        P(Q ≤ r)/coverage (≥ the volume): η = Mz recovered by rounding (M z is η up to the reconstruction's
        rounding, far below ½), then 1{Q ≤ r}/coverage in units of this volume (finite in any dimension,
        :mod:`dpopt.stats.log_volume`)."""
        eta = np.rint(np.asarray(z, dtype=float) @ np.asarray(strategy, dtype=float).T)
        q = eta**2 @ (1.0 / np.array([float(s) for s in self.region.sigma2s]))
        return VolumeTerms(self.log_volume, (q <= float(self.region.radius)) / self.region.coverage)


def strategy_region(strategy: np.ndarray, sigma2: Fraction, span_basis: Callable[[], np.ndarray], alpha: float
                    ) -> StrategyRegion | str:
    """The region of the module docstring for the integer strategy M (k × d) and an integer basis A of the span
    (d × k, returned by ``span_basis``, called only once the radius is found), or why there is none: a convolution
    beyond its budget (:func:`~dpopt.stats.lattice_inference.lattice_region`: past about 2,000 coordinates at a
    large σ_ℤ²), a radius of 0, a strategy whose rows are not one per dimension of the span, or a singular MA."""
    m = np.asarray(strategy)
    found = lattice_inference("ci_volume", (Fraction(sigma2),) * m.shape[0], alpha)
    if isinstance(found, str):
        return found
    a = np.asarray(span_basis())
    if m.shape[0] != a.shape[1]:
        return f"the strategy has {m.shape[0]} rows, the span {a.shape[1]} dimensions (one row per dimension needed)"
    det_ma = integer_determinant(m.astype(object) @ a.astype(object))  # exact integers
    if det_ma == 0:
        return "the rounded strategy is singular on the span"
    gram = integer_determinant(a.astype(object).T @ a.astype(object))
    log_volume = found.log_volume + 0.5 * math.log(gram) - math.log(abs(det_ma))
    return StrategyRegion(found, det_ma, gram, log_volume)
