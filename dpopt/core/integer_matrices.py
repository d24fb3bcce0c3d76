"""Exact integer linear algebra on small integer matrices (python-flint's ``fmpz_mat``): determinants and the
choice of independent rows, where floating point could misjudge a rank or round a determinant."""

from __future__ import annotations

import sys

import numpy as np


def _integer_rows(matrix) -> list[list[int]]:
    """The entries as Python integers (any size).

    Raises
    ------
    ValueError
        A non-integer entry.
    """
    raw = np.asarray(matrix).tolist()
    rows = [[int(v) for v in row] for row in raw]
    if any(v != w for row, given in zip(rows, raw) for v, w in zip(row, given)):
        raise ValueError("exact integer linear algebra needs integer entries")
    return rows


def integer_determinant(matrix) -> int:
    """det of a square integer matrix, exactly.

    Raises
    ------
    ValueError
        A matrix that is not square or has a non-integer entry.
    """
    from flint import fmpz_mat  # imported where used

    rows = _integer_rows(np.atleast_2d(matrix))
    if any(len(row) != len(rows) for row in rows):
        raise ValueError("the determinant needs a square matrix")
    return int(fmpz_mat(rows).det()) if rows and rows[0] else 1


def independent_rows(matrix, limit: int | None = None) -> list[int]:
    """The indices of the rows kept by scanning them in order and keeping each that is independent of those
    already kept (exact ranks), stopping once ``limit`` are kept.

    Raises
    ------
    ValueError
        A non-integer entry.
    """
    from flint import fmpz_mat  # imported where used

    rows = _integer_rows(np.atleast_2d(matrix))
    kept: list[int] = []
    for i in range(len(rows)):
        if limit is not None and len(kept) == limit:
            break
        if fmpz_mat([rows[j] for j in kept] + [rows[i]]).rank() > len(kept):
            kept.append(i)
    return kept


FLOAT_EXACT_BOUND = 2.0**52
"""A product of integer matrices is computed by floating-point BLAS when max_i Σ_k |a_ik|·max|b| stays below this
(half of 2^53, the margin covering the bound's own rounding): every partial sum of every entry is then an integer
that float64 represents exactly, whatever the summation order or fused multiply-adds."""

SPARSE_DENSITY = 0.125
"""A factor with at most this share of non-zero entries may be multiplied as a sparse int64 matrix (scipy.sparse)."""

SPARSE_IMPORT_WORK = 1 << 30
"""Dense multiply-adds (about 0.5 s) from which a sparse product is worth importing scipy.sparse (about 0.6 s);
below, it is used only when something has imported it already."""


def integer_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b exactly for integer arrays (int64 result): as sparse int64 matrices when a factor is sparse
    (:data:`SPARSE_DENSITY`) and scipy.sparse is loaded or worth loading (:data:`SPARSE_IMPORT_WORK`), else by
    float64 BLAS when the entries' bound max_i Σ_k |a_ik|·max|b| is below :data:`FLOAT_EXACT_BOUND`, else in Python
    integers. The bound bounds every partial sum too, so the sparse (below 2⁶²) and float routes are exact; the
    result does not depend on the route.

    Raises
    ------
    OverflowError
        A product that may leave the int64 range (the bound at 2⁶² or above).
    """
    a, b = np.atleast_2d(np.asarray(a, dtype=np.int64)), np.atleast_2d(np.asarray(b, dtype=np.int64))
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    bound = float(np.abs(a).sum(axis=1, dtype=float).max()) * float(np.abs(b).max())
    if not bound < 2.0**62:
        raise OverflowError("an integer matrix product may leave the int64 range")
    worth = "scipy.sparse" in sys.modules or a.size * b.shape[1] >= SPARSE_IMPORT_WORK
    if worth and min(np.count_nonzero(a) / a.size, np.count_nonzero(b) / b.size) <= SPARSE_DENSITY:
        from scipy import sparse  # imported where used

        return np.asarray((sparse.csr_array(a) @ sparse.csr_array(b)).toarray(), dtype=np.int64)
    if bound < FLOAT_EXACT_BOUND:
        return np.rint(a.astype(float) @ b.astype(float)).astype(np.int64)
    return (a.astype(object) @ b.astype(object)).astype(np.int64)
