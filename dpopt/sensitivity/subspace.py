r"""Linear subspaces of R^d: the span of a sensitivity space, with an implicit projector.

The projector :math:`P` onto the span is never formed as a dense d × d matrix unless
the subspace itself is given by a dense basis; structured subspaces (the whole space,
sum-zero vectors) project in O(d).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpopt.core.memory import dense_bytes, require_memory


class Subspace(ABC):
    """A subspace of R^d with an orthogonal projector applied implicitly."""

    ambient: int
    rank: int
    name: str

    @abstractmethod
    def project(self, x: np.ndarray) -> np.ndarray:
        """Orthogonal projection of the rows of ``x`` (shape (..., d)) onto the subspace."""

    @abstractmethod
    def basis(self) -> np.ndarray:
        """An orthonormal basis, shape (d, rank)."""

    @abstractmethod
    def projector_diagonal(self) -> np.ndarray:
        """diag(P), shape (d,)."""

    def invariant_component(self, counts: np.ndarray) -> np.ndarray | None:
        """(I − P)x for integer ``counts`` x (rows), computed from integer sums that every vector of the subspace
        leaves unchanged, so that neighbours whose difference lies in the subspace get the same floats bit for
        bit; None when the subspace has no such form (an exact lattice release then cannot use it)."""
        return None

    def require_basis_memory(self, copies: int = 1) -> None:
        """Refuse (:func:`~dpopt.core.memory.require_memory`) a dense basis whose construction
        takes ``copies`` d × rank arrays above the memory limit, before it is built."""
        require_memory(dense_bytes(copies, self.ambient, self.rank),
                       f"the dense {self.ambient} x {self.rank} basis of the {self.name} span")

    def contains(self, v: np.ndarray, tol: float = 1e-9) -> bool:
        """Whether every row of ``v`` lies in the subspace (relative tolerance)."""
        v = np.atleast_2d(np.asarray(v, dtype=float))
        scale = max(1.0, float(np.abs(v).max(initial=0.0)))
        return bool(np.abs(v - self.project(v)).max(initial=0.0) <= tol * scale)

    def describe(self) -> dict:
        return {"kind": self.name, "ambient_dimension": self.ambient, "rank": self.rank}


class FullSpace(Subspace):
    """R^d itself; P = I."""

    name = "full"

    def __init__(self, d: int):
        self.ambient = self.rank = d

    def project(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=float)

    def invariant_component(self, counts: np.ndarray) -> np.ndarray:
        """(I − P)x = 0: nothing is public."""
        return np.zeros(np.shape(counts))

    def basis(self) -> np.ndarray:
        self.require_basis_memory()
        return np.eye(self.ambient)

    def projector_diagonal(self) -> np.ndarray:
        return np.ones(self.ambient)


class SumZeroSpace(Subspace):
    """Vectors whose coordinates sum to zero; P = I − 11ᵀ/d (rank d − 1)."""

    name = "sum_zero"

    def __init__(self, d: int):
        self.ambient = d
        self.rank = d - 1

    def project(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return x - x.mean(axis=-1, keepdims=True)

    def invariant_component(self, counts: np.ndarray) -> np.ndarray:
        """(1ᵀx/d)·1 from the integer total 1ᵀx."""
        counts = np.asarray(counts)
        total = counts.astype(np.int64).sum(axis=-1, keepdims=True)
        return np.broadcast_to(total / self.ambient, counts.shape).astype(float)

    def basis(self) -> np.ndarray:
        self.require_basis_memory(copies=3)  # eye, the shifted copy, Q
        q, _ = np.linalg.qr(np.eye(self.ambient)[:, :-1] - 1.0 / self.ambient)
        return q

    def projector_diagonal(self) -> np.ndarray:
        return np.full(self.ambient, 1.0 - 1.0 / self.ambient)


class DenseSubspace(Subspace):
    """A subspace given by an orthonormal basis B (d × r); P = B Bᵀ applied as two products."""

    name = "dense_basis"

    def __init__(self, basis: np.ndarray):
        self._basis = np.asarray(basis, dtype=float)
        self.ambient, self.rank = self._basis.shape

    def project(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return (x @ self._basis) @ self._basis.T

    def basis(self) -> np.ndarray:
        return self._basis

    def projector_diagonal(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self._basis, self._basis)


def canonical_basis(basis: np.ndarray, error: float | None = None) -> np.ndarray:
    r"""The canonical orthonormal basis of the span of an orthonormal ``basis`` (d × r), whatever basis is given.

    The pivots p_1 < … < p_r are the first rows of U that are independent (greedily, in order; the
    same for UG, G invertible); E = U·U[p]⁻¹ (d × r) is then the transpose of the reduced row
    echelon form of Uᵀ (E[p] = I), a function of the subspace alone, and the result is the
    Gram–Schmidt orthonormalisation of E's columns in order (QR with a positive diagonal). An LAPACK SVD
    or eigendecomposition
    returns another U within a repeated singular value on another BLAS build or thread count; this
    basis then differs only by rounding.

    A row of U counts as independent when its distance to the earlier pivots' span exceeds
    ``error``, a bound on the error of U's entries: by default ``64·d·ε_mach``, a multiple of the
    rounding of an orthonormalisation in R^d; a cluster of singular vectors passes its own (:func:`span_of`).
    """
    u = np.asarray(basis, dtype=float)
    d, r = u.shape
    tolerance = 64.0 * d * np.finfo(float).eps if error is None else error
    pivots: list[int] = []
    frame = np.zeros((0, r))  # orthonormal rows spanning the pivots' rows of U
    for j in range(d):
        if len(pivots) == r:
            break
        row = u[j] - (frame @ u[j]) @ frame
        norm = float(np.sqrt(np.sum(row * row)))
        if norm > tolerance:
            pivots.append(j)
            frame = np.vstack([frame, row / norm])
    return _orthonormal_positive(np.linalg.solve(u[pivots].T, u.T).T)


def _orthonormal_positive(columns: np.ndarray) -> np.ndarray:
    """Q of the QR factorisation of ``columns`` (full column rank) with R's diagonal made positive:
    the Gram–Schmidt orthonormalisation of the columns in order, unique."""
    q, r = np.linalg.qr(columns)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


RANK_CACHE_ENTRIES = 65_536
"""Largest matrix (entries) whose exact rank is remembered by content (a Kronecker workload's terms repeat the same
factor: 28 prefix matrices of 85 × 85 in the range example)."""


def exact_rank(matrix: np.ndarray) -> int:
    """The rank of ``matrix`` with its binary floats read exactly (python-flint, in rationals); remembered for
    matrices of at most :data:`RANK_CACHE_ENTRIES` entries (by their bytes: the same floats, the same rank)."""
    matrix = np.ascontiguousarray(matrix, dtype=float)
    if matrix.size == 0:
        return 0
    if matrix.size <= RANK_CACHE_ENTRIES:
        return _cached_rank(matrix.tobytes(), matrix.shape)
    return _rank(matrix)


@lru_cache(maxsize=64)
def _cached_rank(data: bytes, shape: tuple[int, ...]) -> int:
    return _rank(np.frombuffer(data, dtype=float).reshape(shape))


def _rank(matrix: np.ndarray) -> int:
    from flint import fmpq, fmpq_mat  # imported where used: python-flint loads in ~0.1 s

    entries = [fmpq(*x.as_integer_ratio()) for x in matrix.ravel().tolist()]
    return int(fmpq_mat(*matrix.shape, entries).rank())


@dataclass(frozen=True)
class PivotCoordinates:
    r"""Exact coordinates on the span 𝒮 of some vectors: the entries in the span's pivot columns.

    The reduced row echelon form of the vectors (rows) has s nonzero rows R (s × d) with R[:, J] = I for
    the pivot columns J, and 𝒮 = {cR : c ∈ R^s}. A point y = cR of 𝒮 therefore has the coordinates
    c = y[J], its own entries: no arithmetic, so the same bits on every machine, unlike coordinates
    yB in an orthonormal basis B from an SVD, whose last bits depend on the BLAS kernel and thread
    count. The map c ↦ cR scales s-dimensional volume by the Gram factor √det(RRᵀ).

    Attributes
    ----------
    columns : tuple of int
        The pivot columns J, increasing.
    volume_factor : float
        √det(RRᵀ), from the determinant computed exactly in rationals.
    """

    columns: tuple[int, ...]
    volume_factor: float

    @property
    def rank(self) -> int:
        return len(self.columns)

    def of(self, points: np.ndarray) -> np.ndarray:
        """The coordinates y[J] of the rows y of ``points`` (points of the span)."""
        return np.asarray(points, dtype=float)[..., list(self.columns)]


def pivot_coordinates(vectors: np.ndarray) -> PivotCoordinates:
    """The :class:`PivotCoordinates` of the span of the rows of ``vectors``, their binary floats read
    exactly (python-flint's reduced row echelon form in rationals; the rank is the exact one)."""
    from flint import fmpq, fmpq_mat  # imported where used: python-flint loads in ~0.1 s

    rows = np.unique(np.asarray(vectors, dtype=float), axis=0)
    n, d = rows.shape
    entries = [fmpq(*x.as_integer_ratio()) for x in rows.ravel().tolist()]
    echelon, rank = fmpq_mat(n, d, entries).rref() if n else (fmpq_mat(0, d), 0)
    columns = tuple(next(j for j in range(d) if echelon[i, j] != 0) for i in range(rank))
    basis = fmpq_mat(rank, d, [echelon[i, j] for i in range(rank) for j in range(d)])
    gram = (basis * basis.transpose()).det() if rank else fmpq(1)
    return PivotCoordinates(columns, math.sqrt(Fraction(int(gram.p), int(gram.q))))


CLUSTER_RTOL = 1e-4
"""Singular values closer than this, relative to the largest, are treated as one repeated value whose singular
vectors :func:`span_of` replaces by the canonical basis of their span. Beyond it the singular vectors are
unique up to sign and accurate to ~64·max(k, d)·ε_mach/1e-4 ≈ 1e-10 (Wedin), well within the 10⁻⁹ that
recorded floats are compared at and the relative margin of a fallback ball's radius."""


def span_of(matrix: np.ndarray, rtol: float = 1e-10, *, differences: bool = False) -> Subspace:
    r"""The column span of ``matrix`` (d × k), with a canonical basis; ``FullSpace`` when it is all of R^d.

    ``differences=True`` spans the differences a_j − a_1 of the columns instead (W·{sum-zero vectors}:
    the span of a replace-one query).

    The rank is the numerical rank (singular values above ``rtol`` times the largest). The basis is the
    left singular vectors of ``matrix``, made canonical: each signed so that its first entry above
    rounding is positive, and, within a repeated singular value (a cluster closer than
    :data:`CLUSTER_RTOL`), where LAPACK returns another basis under another BLAS build or thread count,
    :func:`canonical_basis` of the cluster's span. So solve, release and verify draw and measure noise
    in the same basis on every machine (an l1 or l∞ ball's radius depends on the basis). Singular
    vectors rather than an echelon form of the columns: the l1 ball of the issue-35 Kronecker workload
    costs 3.3 times less in them.
    """
    matrix = np.asarray(matrix, dtype=float)
    d, k = matrix.shape
    if k - int(differences) <= 0 or d == 0:
        return DenseSubspace(np.zeros((d, 0)))
    vectors = matrix.T[1:] - matrix.T[:1] if differences else matrix.T
    _, s, vt = np.linalg.svd(vectors, full_matrices=False)
    rank = int(np.sum(s > rtol * max(s.max(initial=0.0), 1e-300)))
    if rank == d:
        return FullSpace(d)
    if rank == 0:
        return DenseSubspace(np.zeros((d, 0)))
    # Wedin: a cluster's span is within 64·max(k, d)·ε_mach·s_1/gap of the exact one, gap ≥ CLUSTER_RTOL·s_1
    error = 64.0 * max(vectors.shape) * np.finfo(float).eps / CLUSTER_RTOL
    cuts = np.flatnonzero(np.diff(s[:rank]) < -CLUSTER_RTOL * s[0]) + 1
    blocks = [canonical_basis(vt[a:b].T, error) for a, b in zip([0, *cuts], [*cuts, rank])]
    return DenseSubspace(np.concatenate(blocks, axis=1))
