r"""A correlated Gaussian design measured exactly: an integer strategy plus i.i.d. discrete Gaussian noise.

A design with noise N(0, Σ), range(Σ) = V (the span of the sensitivity space), is the least-squares
reconstruction of the measurement S x + N(0, I) with S = Σ^{+1/2}. On the lattice the strategy is rounded to an
integer matrix and the noise is discrete:

.. math:: y = M x + \eta, \qquad M = \mathrm{round}(c\,\Sigma^{+1/2}) \in \mathbb{Z}^{d\times d},
   \qquad \eta \sim N_\mathbb{Z}(0, \sigma_\mathbb{Z}^2)^d ,

computed in int64 from the integer counts x. Neighbouring datasets shift y by the integer vectors Mδ, so
(Canonne, Kamath & Steinke 2020, Theorem 14, and the certified GDP slope for μ-GDP and (ε, δ),
:mod:`dpopt.mechanisms.lattice`) the measurement meets the target with

.. math:: \mu^2 = \Delta_M^2 / v, \qquad \Delta_M^2 = \max_\delta \|M\delta\|_2^2 ,

v the effective variance of σ_ℤ² (σ_ℤ² itself under ρ-zCDP). Δ_M² is an integer computed exactly
(:func:`strategy_sensitivity`; ‖Mδ‖² is convex in δ, so its maximum over the hull of the neighbouring
differences is at a listed generator), and σ_ℤ² is the smallest lattice variance with Δ_M²/v ≤ μ_target².

The release is post-processing of the integers y and of the public component (I − P_V)x (integer sums that no
neighbour moves, :meth:`~dpopt.sensitivity.subspace.Subspace.invariant_component`; on a span of listed integer
moves the statistics Cx of an integer basis C of V^⊥, :mod:`dpopt.sensitivity.integer_complement`): with B an orthonormal basis
of V and G = BᵀMᵀMB,

.. math:: \hat x = (I - P_V)x + R\,(y - M(I - P_V)x), \qquad R = B G^{-1} B^\top M^\top ,

so that R M B = B and x̂ = x + Rη: the released noise has covariance Var N_ℤ(0, σ_ℤ²)·B G^{-1} Bᵀ. As c grows,
M/c → Σ^{+1/2}, Δ_M²/c² → μ_Σ² and c²BG^{-1}Bᵀ → Σ, so the design's cost is recovered; the rounding's cost is
the ratio of the two costs (:attr:`IntegerStrategy.cost_ratio`), stated in the certificate. Under μ-GDP c is
limited by the certified slope's range σ_ℤ² ≤ 2²⁸ (c ≲ 16384), under ρ-zCDP by :data:`ZCDP_SCALE` (the int64
sampler's range is 2³⁰).

For a confidence region (``ci_volume``) on a proper span V of dimension k the strategy has k rows,
M = round(c·Λ_k^{-1/2}Q_kᵀ) (:func:`span_root`, Σ = Q_kΛ_kQ_kᵀ): M B is k × k, the release
x_⊥ + B(MB)⁻¹(y − Mx_⊥) is a bijection of y, and the region of the k i.i.d. coordinates of η has a proven
coverage (:mod:`dpopt.mechanisms.strategy_regions`); the d rows of round(c·Σ^{+1/2}) would leave the residual
of y off MV unobserved. ‖Λ_k^{-1/2}Q_kᵀδ‖ = ‖Σ^{+1/2}δ‖ for δ ∈ V, so the privacy is certified as above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.mechanisms.lattice import GDP_TARGETS, discrete_variance, target_lattice_variance
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2
from dpopt.sensitivity.subspace import CLUSTER_RTOL, canonical_basis

ZCDP_SCALE = 2**13
"""c under ρ-zCDP: σ_ℤ² ≈ c²μ_Σ²/μ² = 2²⁶, well inside the sampler's 2³⁰, the rounding relative 2⁻¹³/|Σ^{+1/2}|."""

GDP_FIRST_SCALE = 2**10
"""c tried first under μ-GDP and (ε, δ): σ_ℤ² ≈ 2²⁰, whose certified slope takes about 10 ms of CPU to evaluate
(0.13 s at the range's end, 2²⁸). Kept when its rounding costs at most :data:`ROUNDING_BUDGET`; else the scales
:data:`GDP_SCAN` × √MAX_SIGMA2 (16384) are tried and the cheapest whose lattice variance is in range is kept (the rounding's
first-order cost is a maximum over the neighbouring differences of terms that vary erratically with c: on
``specs/age_cumulative_optimal_gdp.yaml`` from 0.12% to 0.36% over c ∈ [1700, 2048])."""

GDP_SCAN = tuple(np.linspace(0.85, 1.0, 64))

ROUNDING_BUDGET = 5e-4
"""Relative cost of the rounding (before the lattice variance's) at which the first scale is good enough."""

REFINE_MAX_DIMENSION = 32
"""Largest query dimension whose rounded strategy is refined entry by entry (:func:`refine_strategy`: d² entries a
sweep, each evaluated in O(m + d³))."""

REFINE_SWEEPS = 6
"""Sweeps of :func:`refine_strategy` at most."""

MAX_ENTRY = 2**20
"""Largest |M_ij| served: with counts below 2³⁰ and d ≤ 120, y = Mx stays far inside int64."""


def integer_strategy(root: np.ndarray, scale: int) -> np.ndarray:
    """M = round(scale·root) as int64 (``root`` = :func:`span_root`)."""
    return np.rint(scale * np.asarray(root, dtype=float)).astype(np.int64)


def span_root(covariance: np.ndarray, rows: bool = False) -> np.ndarray:
    """Σ^{+1/2} = Q_k Λ_k^{-1/2} Q_kᵀ (symmetric, d × d), or with ``rows`` its k rows Λ_k^{-1/2} Q_kᵀ (whitening on
    the span: k × d, the same ‖·δ‖ on every δ of the span), Λ_k the eigenvalues of Σ above 10⁻¹⁰ of the largest.

    The rows depend on the eigenvectors chosen within a repeated eigenvalue, which LAPACK picks differently on
    another BLAS kernel (an isotropic Σ on the sum-zero span of a 2 × 2 table: its integer rounding cost 0.08% on
    one machine, 0.11% on another). Within each cluster of eigenvalues closer than
    :data:`~dpopt.sensitivity.subspace.CLUSTER_RTOL` of the largest, Q's columns are replaced by the cluster span's
    :func:`~dpopt.sensitivity.subspace.canonical_basis` and scaled by the cluster's mean eigenvalue, so the strategy
    is a function of Σ up to rounding (a whitening exact to that relative tolerance; the privacy and the cost are
    computed from the rounded strategy itself)."""
    w, q = np.linalg.eigh(np.asarray(covariance, dtype=float))
    keep = w > 1e-10 * w.max()
    w, q = w[keep][::-1], q[:, keep][:, ::-1]
    if rows and len(w):
        error = 64.0 * max(q.shape) * np.finfo(float).eps / CLUSTER_RTOL  # as span_of's clusters (Wedin)
        cuts = np.flatnonzero(np.diff(w) < -CLUSTER_RTOL * w[0]) + 1
        blocks = list(zip([0, *cuts], [*cuts, len(w)]))
        q = np.concatenate([canonical_basis(q[:, a:b], error) for a, b in blocks], axis=1)
        w = np.concatenate([np.full(b - a, w[a:b].mean()) for a, b in blocks])
    scaled = q / np.sqrt(w)
    return scaled.T if rows else scaled @ q.T


def strategy_sensitivity(strategy: np.ndarray, vectors: np.ndarray) -> int:
    """Δ_M² = max over the rows δ of ``vectors`` of ‖Mδ‖², in exact integer arithmetic.

    Raises
    ------
    ValueError
        A row that is not an integer vector (the lattice needs integer shifts).
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    if not np.array_equal(v, np.round(v)) or np.abs(v).max(initial=0.0) > 2.0**20:
        raise ValueError("the neighbouring differences are not small integer vectors")
    m = np.asarray(strategy)
    if m.dtype.kind not in "iu":
        raise ValueError("the strategy is not an integer matrix")
    if np.abs(m).max(initial=0) > MAX_ENTRY:
        raise ValueError(f"a strategy entry exceeds {MAX_ENTRY} in magnitude")
    if not len(v):
        return 0
    shifts = v.astype(np.int64) @ m.T  # |entries| ≤ d·2^20·2^20 < 2^47: exact in int64
    rough = np.sum(shifts.astype(float) ** 2, axis=1)  # relative error ≤ (d + 2)·2⁻⁵³: the maximisers are within 1e-9
    rows = shifts[rough >= rough.max() * (1.0 - 1e-9)]
    return max(sum(int(s) * int(s) for s in row) for row in rows.tolist())


def reconstruction(strategy: np.ndarray, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, B G^{-1} Bᵀ): the least-squares map R = B G^{-1} BᵀMᵀ, G = BᵀMᵀMB, and the released noise's
    covariance per unit of noise variance (module docstring)."""
    mb = np.asarray(strategy, dtype=float) @ basis
    inverse = np.linalg.inv(mb.T @ mb)
    return basis @ inverse @ mb.T, basis @ inverse @ basis.T


def refine_strategy(strategy: np.ndarray, vectors: np.ndarray, basis: np.ndarray, cost, ceiling: float
                    ) -> np.ndarray:
    """Coordinate descent on the rounded strategy: each entry moved by ±1 when that lowers Δ_M²·cost(B G⁻¹Bᵀ)
    (the design's cost at the lattice variance the move allows) and keeps Δ_M² ≤ ``ceiling``, until a sweep
    changes nothing or :data:`REFINE_SWEEPS` sweeps. Entry-wise rounding errs by up to ½ in every entry, and the
    rounding's first-order cost is a maximum over the neighbouring differences; moving single entries against
    the worst differences recovers most of it (``specs/age_cumulative_optimal_gdp.yaml``: 0.12% → about 0.07%).
    The privacy does not depend on how M was found: it is certified from the M returned."""
    m = np.array(strategy, dtype=np.int64)
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    shifts = v @ m.T.astype(float)
    norms = np.sum(shifts**2, axis=1)

    def value(norms_now, matrix) -> float:
        return float(norms_now.max()) * cost(reconstruction(matrix, basis)[1])

    current = value(norms, m)
    for _ in range(REFINE_SWEEPS):
        changed = False
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                for step in (1, -1):
                    column = shifts[:, i] + step * v[:, j]
                    trial = norms - shifts[:, i] ** 2 + column**2
                    if trial.max() > ceiling:
                        continue
                    m[i, j] += step
                    candidate = value(trial, m)
                    if candidate < current * (1.0 - 1e-12):
                        current, norms, changed = candidate, trial, True
                        shifts[:, i] = column
                        break
                    m[i, j] -= step
        if not changed:
            break
    return m


@dataclass(frozen=True)
class IntegerStrategy:
    """The exact measurement of a correlated design (module docstring).

    Attributes
    ----------
    strategy : ndarray of int64, shape (d, d), or (k, d) on a k-dimensional span (``rows``)
        M.
    sensitivity_squared : int
        Δ_M².
    lattice_sigma2 : Fraction
        σ_ℤ².
    cost_ratio : float
        The design's cost at the released covariance over its cost at Σ (≥ 1 up to the SDP's tolerance).
    """

    strategy: np.ndarray
    sensitivity_squared: int
    lattice_sigma2: Fraction
    cost_ratio: float


def design_strategy(covariance: np.ndarray, vectors: np.ndarray, basis: np.ndarray, mu: float, target: str,
                    cost, rows: bool = False) -> IntegerStrategy | str:
    """The integer strategy for N(0, Σ) at the target μ (module docstring), or why there is none (no scale with
    its lattice variance in the exact sampler's range). Its cost ratio is stated, never a reason to refuse.

    ``cost`` maps a covariance to the design's objective, linear in the covariance's scale (a trace, a maximum
    variance, the geometric mean of the eigenvalues on the span). With ``rows`` the strategy is round(c·Λ_k^{-1/2}
    Q_kᵀ) of k = rank rows (:func:`span_root`; the confidence region on a proper span,
    :mod:`dpopt.mechanisms.strategy_regions`), else the square round(c·Σ^{+1/2}). Under μ-GDP and (ε, δ) the
    scales of :data:`GDP_FIRST_SCALE` are tried; a rounding that costs more than :data:`ROUNDING_BUDGET` is refined
    (:func:`refine_strategy`) up to :data:`REFINE_MAX_DIMENSION`.
    """
    root = span_root(covariance, rows)
    reference = cost(covariance)
    wanted = Fraction(mu) ** 2
    if target in GDP_TARGETS:
        scales = (GDP_FIRST_SCALE, *sorted({int(math.sqrt(float(MAX_SIGMA2)) * f) for f in GDP_SCAN}))
    else:
        scales = (ZCDP_SCALE,)
    best: tuple[float, np.ndarray, int] | None = None
    for scale in scales:
        m = integer_strategy(root, scale)
        if np.abs(m).max(initial=0) > MAX_ENTRY:
            break
        sens = strategy_sensitivity(m, vectors)
        _, unit = reconstruction(m, basis)
        ratio = float(sens) / float(wanted) * cost(unit) / reference
        in_range = target not in GDP_TARGETS or float(sens) / float(wanted) * (1 + 1e-3) <= float(MAX_SIGMA2)
        if in_range and (best is None or ratio < best[0]):
            best = (ratio, m, sens)
        if in_range and scale == scales[0] and ratio <= 1.0 + ROUNDING_BUDGET:
            break
    if best is None:
        return "no integer strategy with its lattice variance in the exact sampler's range"
    ratio, m, sens = best
    if ratio > 1.0 + ROUNDING_BUDGET and basis.shape[0] <= REFINE_MAX_DIMENSION:
        ceiling = float(MAX_SIGMA2) * float(wanted) / (1 + 1e-3) if target in GDP_TARGETS else math.inf
        m = refine_strategy(m, vectors, basis, cost, ceiling)
        sens = strategy_sensitivity(m, vectors)
        _, unit = reconstruction(m, basis)
        ratio = float(sens) / float(wanted) * cost(unit) / reference
    sigma2 = target_lattice_variance(Fraction(sens) / wanted, 1, target)
    if sigma2 is None:
        return "the strategy's lattice variance is outside the exact sampler's range"
    _, unit = reconstruction(m, basis)
    ratio = discrete_variance(sigma2) * cost(unit) / reference
    return IntegerStrategy(m, sens, sigma2, ratio)


def effective_covariance(strategy: np.ndarray, basis: np.ndarray, sigma2: Fraction) -> np.ndarray:
    """Var N_ℤ(0, σ_ℤ²)·B G^{-1} Bᵀ: the released noise's covariance."""
    return discrete_variance(sigma2) * reconstruction(strategy, basis)[1]


def rounding_note(ratio: float, metric: str | None = None) -> str:
    """The certificate's sentence on the rounding's cost (``metric`` ``ci_volume``: the region's volume)."""
    if not math.isfinite(ratio):
        return "the rounding's cost is not finite"
    if metric == "ci_volume":
        return (f"the integer strategy, the lattice variance and the discrete law's radius cost "
                f"{100 * (ratio - 1):.3g}% more volume than the continuous design (the region's volume over the "
                "ellipsoid of N(0, Σ))")
    return (f"the integer strategy M = round(c·Σ^(+1/2)) and the lattice variance cost {100 * (ratio - 1):.3g}% "
            "more than the continuous design (its objective at the released covariance over its value at Σ)")
