"""Brute force over a person's contributions on tiny domains, for the person-level tests: every allowed contribution
listed, and the marginal tables as an explicit 0/1 matrix (independent of dpopt's derivations)."""

from __future__ import annotations

import itertools

import numpy as np


def allowed(cells: int, k: int, c: int | None, g: int | None) -> np.ndarray:
    """Every v in {0, …, c}^m with Σv ≤ k and at most g non-zero entries (brute force)."""
    c = k if c is None else min(c, k)
    return np.array([v for v in itertools.product(range(c + 1), repeat=cells)
                     if sum(v) <= k and (g is None or sum(1 for x in v if x) <= g)])


def marginal_matrix(sizes: tuple[int, ...], blocks: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The 0/1 matrix of the tables ``blocks`` over the cells of ``sizes`` (row-major), one row per table cell."""
    cells = list(itertools.product(*(range(n) for n in sizes)))
    rows = []
    for block in blocks:
        for key in itertools.product(*(range(sizes[a]) for a in block)):
            rows.append([int(tuple(cell[a] for a in block) == key) for cell in cells])
    return np.array(rows)
