r"""Linear subspaces of R^d: the span of a sensitivity space, with an implicit projector.

The projector :math:`P` onto the span is never formed as a dense d × d matrix unless
the subspace itself is given by a dense basis; structured subspaces (the whole space,
sum-zero vectors) project in O(d).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

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


def span_of(matrix: np.ndarray, rtol: float = 1e-10) -> Subspace:
    """The column span of ``matrix`` (d × k), by SVD; ``FullSpace`` when it is all of R^d."""
    matrix = np.asarray(matrix, dtype=float)
    d = matrix.shape[0]
    if matrix.size == 0:
        return DenseSubspace(np.zeros((d, 0)))
    u, s, _ = np.linalg.svd(matrix, full_matrices=False)
    rank = int(np.sum(s > rtol * max(s.max(initial=0.0), 1e-300)))
    if rank == d:
        return FullSpace(d)
    return DenseSubspace(u[:, :rank])
