r"""Step 1 of TopDown: the table closest to the noisy answers in the mechanism's metric.

For a release y = A h + z with noise covariance Σ (d × d, possibly singular: a projected
Gaussian adds noise only on the span V of the sensitivity space), the generalised least
squares estimate of h under the invariants C h = t is

.. math::

    \hat h = \arg\min_h\ (y - A h)^\top \Sigma^{+} (y - A h)
    \quad\text{s.t.}\quad C h = t,\quad U_0^\top (A h - y) = 0,

U₀ an orthonormal basis of ker Σ: the components of y that carry no noise are reproduced
exactly (Aitken's generalised least squares, restricted to the support of the noise; the
Census TopDown algorithm, Abowd et al. 2022, §7, solves the same weighted problem with
the inverse variances as weights). With Σ = σ²I, A = I and a full-row-rank C this is the
orthogonal projection ĥ = y − Cᵀ(CCᵀ)⁻¹(Cy − t).

Solved by the null-space method: every h with E h = f (E = [C; U₀ᵀA]) is h₀ + N u (N a
basis of ker E), and u minimises ‖L(y − A h₀ − A N u)‖₂ with LᵀL = Σ⁺.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from dpopt.errors import SolverError
from dpopt.postprocess.structure import Structure

RANK_TOLERANCE = 1e-10
"""Eigenvalues of Σ (singular values of E) below this fraction of the largest count as 0."""


@dataclass(frozen=True)
class Metric:
    """The mechanism's metric: a square root L of Σ⁺ and the noiseless directions U₀.

    Attributes
    ----------
    whitening : numpy.ndarray
        L (r × d), LᵀL = Σ⁺ (r the rank of Σ).
    exact : numpy.ndarray
        U₀ (d × (d − r)), an orthonormal basis of ker Σ: released without noise.
    source : str
        Where Σ came from.
    """

    whitening: np.ndarray
    exact: np.ndarray
    source: str


def metric(covariance: np.ndarray | None, dimension: int, source: str | None = None) -> Metric:
    """The metric of noise with covariance Σ (isotropic when None).

    Coordinates with infinite variance (not released by the design) get weight 0; the
    eigen-decomposition runs on the released block.
    """
    if covariance is None:
        return Metric(np.eye(dimension), np.zeros((dimension, 0)), source or "isotropic (identity weights)")
    sigma = np.asarray(covariance, dtype=float)
    if sigma.shape != (dimension, dimension):
        raise ValueError(f"the covariance must be {dimension} × {dimension} (got {sigma.shape})")
    released = np.isfinite(np.diag(sigma))
    sub = sigma[np.ix_(released, released)]
    w, u = np.linalg.eigh((sub + sub.T) / 2)
    top = max(float(w.max()), 0.0) if w.size else 0.0
    keep = w > RANK_TOLERANCE * top if top > 0 else np.zeros(w.shape, bool)
    whitening = np.zeros((int(keep.sum()), dimension))
    whitening[:, released] = (u[:, keep] / np.sqrt(w[keep])).T
    exact = np.zeros((dimension, int((~keep).sum())))
    exact[released] = u[:, ~keep]
    return Metric(whitening, exact, source or "the mechanism's noise covariance (Σ⁺ on its support)")


def equality_system(structure: Structure, values: np.ndarray, noisy: np.ndarray, m: Metric) -> tuple[np.ndarray, np.ndarray]:
    """(E, f) with orthonormal rows spanning the constraints C h = t and U₀ᵀ A h = U₀ᵀ y.

    Raises
    ------
    SolverError
        The constraints contradict each other (e.g. an invariant value the noiseless part
        of the release disagrees with).
    """
    e = np.vstack([structure.constraints.astype(float), m.exact.T @ structure.queries])
    f = np.concatenate([values.astype(float), m.exact.T @ noisy])
    if e.shape[0] == 0:
        return e, f
    u, s, vt = np.linalg.svd(e, full_matrices=False)
    rank = int(np.sum(s > RANK_TOLERANCE * s[0])) if s.size and s[0] > 0 else 0
    e_r = vt[:rank]
    f_r = (u[:, :rank].T @ f) / s[:rank]
    residual = np.linalg.norm(e @ (e_r.T @ f_r) - f)
    if residual > 1e-6 * (1.0 + np.linalg.norm(f)):
        raise SolverError(f"the invariants are inconsistent (residual {residual:.3g}): no table meets them all")
    return e_r, f_r


def weighted_least_squares(noisy, structure: Structure, values, m: Metric) -> np.ndarray:
    """ĥ: the generalised least-squares table under the equality constraints (see module).

    Parameters
    ----------
    noisy : array (d,)
        The released answers y (NaN where a design releases nothing: weight 0).
    structure : Structure
    values : array (k,)
        The invariant values t.
    m : Metric

    Returns
    -------
    numpy.ndarray (m,)
        Minimum-norm in the directions the release does not determine (e.g. cells of a
        table released only through its margins).
    """
    y = np.nan_to_num(np.asarray(noisy, dtype=float).reshape(-1), nan=0.0)
    e, f = equality_system(structure, np.asarray(values), y, m)
    a = structure.queries
    h0 = e.T @ f if e.shape[0] else np.zeros(structure.cells)
    n = linalg.null_space(e) if e.shape[0] else np.eye(structure.cells)
    if n.shape[1] == 0:
        return h0
    la = m.whitening @ a
    u, *_ = np.linalg.lstsq(la @ n, m.whitening @ (y - a @ h0), rcond=None)
    return h0 + n @ u


def grouped_sum_projection(noisy: np.ndarray, groups: np.ndarray, totals: np.ndarray) -> np.ndarray:
    r"""Closed-form least squares under one sum constraint per group (equal weights within a group).

    .. math:: \hat x_i = y_i + (p_g - \textstyle\sum_{j \in g} y_j) / n_g

    the orthogonal projection onto {x : Σ_{j∈g} x_j = p_g}, vectorised over all groups
    (the WLS step of TopDown for the children of one parent, cell by cell, when the noise
    has the same variance for every child).

    Parameters
    ----------
    noisy : array (n,)
    groups : int array (n,)
        Group index of each entry, 0 … G − 1.
    totals : array (G,)
        p_g.
    """
    groups = np.asarray(groups)
    totals = np.asarray(totals, dtype=float)
    size = np.bincount(groups, minlength=len(totals))
    if np.any((size == 0) & (totals != 0)):
        raise ValueError("a group with a non-zero total has no entry")
    gap = (totals - np.bincount(groups, weights=noisy, minlength=len(totals))) / np.maximum(size, 1)
    return noisy + gap[groups]
