r"""The convex hull K = Hull(S) inside span(S), and its norm ‖·‖_K (Cho & Awan, Lemma 29).

For a finite, symmetric S ∋ 0 spanning a subspace 𝒮 of dimension s, K is a norm ball of
𝒮. In orthonormal coordinates θ(v) = Bᵀv (B a d × s orthonormal basis of 𝒮) it is a
full-dimensional polytope of R^s:

* s = 1: the interval [−c, c], c = max |θ(v)|;
* s ≥ 2: the hull computed by qhull, facets written ⟨a_f, y⟩ ≤ 1 (0 is interior).

Two independent evaluations of the gauge ‖x‖_K = inf{c ≥ 0 : x ∈ cK} for x ∈ 𝒮:

* facets: ‖x‖_K = max_f ⟨a_f, θ(x)⟩;
* linear program: ‖x‖_K = min{Σλ_j : Σλ_j v_j = x, λ ≥ 0} over the points of S
  (valid because S = −S and 0 ∈ S), solved with HiGHS.

By construction sup_{v∈S} ‖v‖_K = 1 (Prop. 30).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.spatial import ConvexHull

from dpopt.errors import SolverError


@dataclass(frozen=True)
class SpanHull:
    """K = Hull(S) in orthonormal coordinates of span(S).

    Attributes
    ----------
    basis : ndarray, shape (d, s)
        Orthonormal basis B of span(S).
    points : ndarray, shape (k, s)
        θ(v) = Bᵀ v for every listed v ∈ S.
    vertices : ndarray, shape (r, s)
        The extreme points of K.
    normals : ndarray, shape (f, s)
        One row a_f per facet, K = {y : ⟨a_f, y⟩ ≤ 1 for all f}.
    volume : float
        The s-dimensional volume of K.
    """

    basis: np.ndarray
    points: np.ndarray
    vertices: np.ndarray
    normals: np.ndarray
    volume: float

    @property
    def dimension(self) -> int:
        return self.basis.shape[1]

    @classmethod
    def from_vectors(cls, vectors: np.ndarray, basis: np.ndarray) -> SpanHull:
        """The hull of the rows of ``vectors`` (a symmetric set containing 0), in the
        coordinates of the orthonormal ``basis`` (d × s) of their span.

        Raises
        ------
        ValueError
            If the set is not symmetric (S ≠ −S) or does not span ``basis``.
        """
        vectors = np.asarray(vectors, dtype=float)
        basis = np.asarray(basis, dtype=float)
        points = vectors @ basis
        if np.abs(points @ basis.T - vectors).max(initial=0.0) > 1e-9 * max(1.0, np.abs(vectors).max()):
            raise ValueError("the vectors do not lie in the span of the basis")
        own = {tuple(np.round(p, 9)) for p in points}
        if any(tuple(np.round(-p, 9)) not in own for p in points):
            raise ValueError("the hull norm needs a symmetric set (S = −S)")
        s = basis.shape[1]
        if s == 1:
            c = float(np.abs(points).max())
            return cls(basis, points, np.array([[-c], [c]]), np.array([[1.0 / c], [-1.0 / c]]), 2.0 * c)
        hull = ConvexHull(points)
        normals, offsets = hull.equations[:, :-1], hull.equations[:, -1]
        if np.any(offsets >= 0):
            raise ValueError("0 is not interior to the hull: the vectors do not span the basis")
        scaled = normals / -offsets[:, None]
        _, first = np.unique(np.round(scaled, 9), axis=0, return_index=True)  # qhull splits facets into simplices
        return cls(basis, points, points[hull.vertices], scaled[np.sort(first)], float(hull.volume))

    @classmethod
    def of_space(cls, space) -> SpanHull:
        """The hull of a :class:`~dpopt.sensitivity.space.SensitivitySpace` whose vectors
        can be listed (small spaces; ``space.vectors()`` raises otherwise)."""
        return cls.from_vectors(space.vectors(), space.span.basis())

    def coordinates(self, x: np.ndarray) -> np.ndarray:
        """θ(x) = Bᵀx for the rows of x."""
        return np.asarray(x, dtype=float) @ self.basis

    def norm(self, x: np.ndarray) -> np.ndarray:
        """‖x‖_K by the facets, for the rows of x (which must lie in the span)."""
        y = np.atleast_2d(self.coordinates(x))
        return np.maximum(0.0, (y @ self.normals.T).max(axis=1))

    def norm_lp(self, x: np.ndarray) -> float:
        """‖x‖_K by the linear program min Σλ s.t. Σλ_j θ(v_j) = θ(x), λ ≥ 0 (HiGHS).

        Raises
        ------
        SolverError
            If the solver reports failure (x outside the span, or a numerical problem).
        """
        y = self.coordinates(np.asarray(x, dtype=float).reshape(-1))
        res = linprog(np.ones(len(self.points)), A_eq=self.points.T, b_eq=y,
                      bounds=[(0, None)] * len(self.points), method="highs")
        if res.status != 0:
            raise SolverError(f"K-norm linear program failed: {res.message}")
        return float(res.fun)
