"""Exact integer linear algebra on small integer matrices (python-flint's ``fmpz_mat``): determinants and the
choice of independent rows, where floating point could misjudge a rank or round a determinant."""

from __future__ import annotations

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
