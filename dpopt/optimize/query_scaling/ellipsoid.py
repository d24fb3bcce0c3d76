"""The best linear adjustment over any sensitivity region: the minimum-volume (Löwner–John)
ellipsoid enclosing it, certified by a duality gap (Todd 2016, Ch. 2–3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.errors import SolverError
from dpopt.optimize.query_scaling.duality import GAP_TOLERANCE, polish_design
from dpopt.optimize.solve import solve_convex
from dpopt.sensitivity.subspace import span_of
from dpopt.stats.inference import ci_volume


@dataclass(frozen=True)
class LinearAdjustment:
    r"""The volume-optimal linear adjustment :math:`A = B^{1/2} U^\top` for a region K.

    Posing A f (r numbers) and answering with N(0, σ² I_r) is μ-GDP at σ = 1/μ, since
    :math:`\max_{v\in K}\|Av\|^2 = \max_v c^\top B c = 1` (c = Uᵀv); the analyst inverts
    with :math:`U B^{-1/2}`. Equivalently, the correlated noise
    :math:`N(0, U B^{-1}U^\top/\mu^2)` added to f itself (:meth:`noise_covariance`).

    Attributes
    ----------
    matrix : ndarray, shape (r, d)
        A.
    basis : ndarray, shape (d, r)
        U, an orthonormal basis of span(K); f's component off it never changes.
    shape : ndarray, shape (r, r)
        B = AᵀA in the coordinates of U.
    log_det : float
        log det B.
    duality_gap : float
        Certified bound on log det B* − log det B (the volume is within e^{gap/2} of optimal).
    sensitivity : float
        max_v ‖A v‖ over the generators, evaluated after the solve (≤ 1 + 1e-12).
    """

    matrix: np.ndarray
    basis: np.ndarray
    shape: np.ndarray
    log_det: float
    duality_gap: float
    sensitivity: float

    def apply(self, values) -> np.ndarray:
        """The adjusted query A f."""
        return self.matrix @ np.asarray(values, dtype=float).reshape(-1)

    def invert(self, release) -> np.ndarray:
        """The span component of f estimated from a release of A f: U B^{-1/2} M."""
        w, v = np.linalg.eigh(self.shape)
        return self.basis @ (v @ ((v.T @ np.asarray(release, dtype=float)) / np.sqrt(w)))

    def noise_covariance(self, mu: float) -> np.ndarray:
        """Σ = U B⁻¹ Uᵀ / μ²: correlated Gaussian noise with max_v vᵀΣ⁺v = μ² max_v cᵀBc ≤ μ² (μ-GDP)."""
        return self.basis @ np.linalg.inv(self.shape) @ self.basis.T / mu**2

    def log_volume(self, mu: float, alpha: float = 0.05) -> float:
        """log volume of the 1 − α confidence region for the span component of f (noise σ = 1/μ)."""
        r = self.basis.shape[1]
        return math.log(ci_volume(r, -self.log_det - 2.0 * r * math.log(mu), alpha))


def region_coordinates(vectors) -> tuple[np.ndarray, np.ndarray]:
    """(U, C): an orthonormal basis U of the span of the rows, and the rows' coordinates C = V U."""
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    basis = span_of(v.T).basis()
    if basis.shape[1] == 0:
        raise ValueError("the region is {0}: nothing changes between neighbours")
    coords = v @ basis
    coords = coords[np.linalg.norm(coords, axis=1) > 0]
    # ±v give the same constraint; keep one of each pair
    first = coords[np.arange(coords.shape[0]), np.argmax(np.abs(coords) > 1e-12, axis=1)]
    coords = coords * np.where(first < 0, -1.0, 1.0)[:, None]
    scale = float(np.abs(coords).max())
    _, keep = np.unique(np.round(coords / scale, 12), axis=0, return_index=True)
    return basis, coords[np.sort(keep)]


def minimum_volume_adjustment(vectors) -> LinearAdjustment:
    r"""The minimum-volume ellipsoid {x : xᵀBx ≤ 1} enclosing the region, centred at 0.

    Solves :math:`\max \log\det B` s.t. :math:`c_j^\top B c_j \le 1` (cvxpy, CLARABEL) in the
    coordinates of span(K), then (i) rescales B so the largest constraint is exactly 1 and
    (ii) certifies optimality with the dual bound
    :math:`g(u) = -\log\det(\sum_j u_j c_j c_j^\top) - r\log(r/\sum_j u_j)` for the
    multipliers u ≥ 0 (weak duality holds for any u ≥ 0, so the bound does not trust the
    solver).

    Parameters
    ----------
    vectors : array_like, shape (m, d)
        Generators of a sensitivity region symmetric about 0 (v and −v both present or
        implied); e.g. ``SensitivitySpace.vectors()``.

    Returns
    -------
    LinearAdjustment

    Raises
    ------
    SolverError
        If the program fails or the certified gap exceeds :data:`GAP_TOLERANCE`.

    Examples
    --------
    >>> box = [[s1, 2.0 * s2] for s1 in (-1, 1) for s2 in (-1, 1)]   # ψ = (1, 2)
    >>> adj = minimum_volume_adjustment(box)
    >>> np.round(np.diag(adj.basis @ adj.shape @ adj.basis.T), 6).tolist()   # Diag(1/(kψ²))
    [0.5, 0.125]
    """
    basis, c = region_coordinates(vectors)
    r = basis.shape[1]
    if r == 1:
        b = np.array([[1.0 / float(np.max(c[:, 0] ** 2))]])
        gap = 0.0
    else:
        import cvxpy as cp  # deferred, as in diagonal._solve_program

        bvar = cp.Variable((r, r), PSD=True)
        cons = [cp.sum(cp.multiply(c @ bvar, c), axis=1) <= 1]
        problem = cp.Problem(cp.Maximize(cp.log_det(bvar)), cons)
        solve_convex(problem, program="minimum-volume ellipsoid failed")
        if bvar.value is None or cons[0].dual_value is None:
            raise SolverError(f"minimum-volume ellipsoid failed (status {problem.status})")
        u = np.maximum(np.asarray(cons[0].dual_value, dtype=float), 0.0)
        if not u.any():
            raise SolverError("minimum-volume ellipsoid: multipliers certify nothing")
        polished = polish_design(c, u, diagonal=False)
        b, gap = min((_certify_ellipsoid(c, bvar.value, u), _certify_ellipsoid(c, None, polished)),
                     key=lambda pair: pair[1])
        if not gap <= GAP_TOLERANCE:
            raise SolverError(f"minimum-volume ellipsoid not certified: duality gap {gap:.3g}")
    w, v = np.linalg.eigh(b)
    matrix = (v * np.sqrt(w)) @ v.T @ basis.T
    full = np.atleast_2d(np.asarray(vectors, dtype=float))
    sensitivity = float(np.sqrt(np.max(np.sum((full @ matrix.T) ** 2, axis=1))))
    return LinearAdjustment(matrix, basis, b, float(np.sum(np.log(w))), gap, sensitivity)


def _certify_ellipsoid(c: np.ndarray, shape: np.ndarray | None, u: np.ndarray) -> tuple[np.ndarray, float]:
    """(feasible B, certified gap) from a shape (or, if None, B = V(u)⁻¹) and multipliers u ≥ 0."""
    r = c.shape[1]
    v = (c * u[:, None]).T @ c
    sign, logdet_v = np.linalg.slogdet(v)
    if shape is None:
        if sign <= 0:
            return np.eye(r), math.inf
        shape = np.linalg.inv(v)
    b = 0.5 * (shape + shape.T)
    if np.linalg.eigvalsh(b).min() <= 0 or sign <= 0:
        return np.eye(r), math.inf
    b = b / float(np.max(np.einsum("ij,jk,ik->i", c, b, c)))
    bound = -logdet_v - r * math.log(r / u.sum())
    return b, max(bound - float(np.linalg.slogdet(b)[1]), 0.0)


def adjustment_log_volume(vectors, matrix, mu: float = 1.0, alpha: float = 0.05) -> float:
    r"""log volume of the 1 − α region for f's span component when posing ``matrix`` · f.

    For a map A whose restriction AU to span(K) is invertible (U an orthonormal basis),
    calibrated to its own sensitivity :math:`\Delta_K(A) = \max_v\|Av\|` at μ-GDP:
    :math:`\log V_r + \tfrac r2\log t + r\log(\Delta_K(A)/\mu) - \log|\det AU|`.
    Use it to compare any two adjustments (diagonal ξ: A = Diag(ξ)^{1/2}) on one region.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=float))
    basis, _ = region_coordinates(v)
    a = np.atleast_2d(np.asarray(matrix, dtype=float))
    restricted = a @ basis
    if restricted.shape[0] != restricted.shape[1]:
        # a map with more outputs than the span's rank: its volume is that of AU's column space
        restricted = np.linalg.qr(restricted)[1]
    sign, logdet = np.linalg.slogdet(restricted)
    if sign == 0:
        raise ValueError("matrix does not determine the span component of f (singular on the span)")
    r = basis.shape[1]
    delta = float(np.sqrt(np.max(np.sum((v @ a.T) ** 2, axis=1))))
    return math.log(ci_volume(r, 2.0 * r * math.log(delta / mu) - 2.0 * logdet, alpha))
