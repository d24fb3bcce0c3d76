"""Equal rows of a large matrix, found by hashing instead of a lexical sort.

``np.unique(a, axis=0)`` (or over a void view of the rows) sorts the rows as byte strings:
on 5·10⁵ rows of 15 floats (the Semi-DP sensitivity vectors of ``specs/census_part2_age_ranges_gdp.yaml``)
that costs seconds. :func:`row_groups` hashes each row to one 64-bit word (splitmix64's finaliser,
Steele, Lea & Flood 2014, applied column by column), groups the words with a 1-D sort, and
then *checks* that every row equals its group's first row byte for byte, so the grouping is
exact whatever the hash does: on a collision it falls back to the byte-string sort.
"""

from __future__ import annotations

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31))
_CHUNK = 1 << 14
"""Rows hashed and checked at a time (16384 rows of 15 words: 2 MB, within a cache)."""


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser z ← (z ⊕ z≫30)·c₁, (z ⊕ z≫27)·c₂, z ⊕ z≫31, elementwise (mod 2⁶⁴)."""
    x = (x ^ (x >> _SHIFTS[0])) * _MIX1
    x = (x ^ (x >> _SHIFTS[1])) * _MIX2
    return x ^ (x >> _SHIFTS[2])


def row_groups(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A partition of the rows of ``a`` (n × k, 8-byte items) into classes of byte-for-byte equal rows.

    Returns
    -------
    first : ndarray of int, shape (g,)
        The index of one row of each class (its first in the hash order or the lexical order).
    group : ndarray of int, shape (n,)
        The class of each row: ``a[i]`` and ``a[j]`` are equal byte for byte iff
        ``group[i] == group[j]``. The numbering of the classes is not specified.

    Examples
    --------
    >>> first, group = row_groups(np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]]))
    >>> len(first), bool(group[0] == group[2]), bool(group[0] == group[1])
    (2, True, False)
    """
    a = np.ascontiguousarray(a)
    if a.ndim != 2 or a.dtype.itemsize != 8:
        raise ValueError("row_groups needs a 2-D array of 8-byte items")
    words = a.view(np.uint64)
    n = words.shape[0]
    h = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, _CHUNK):  # a chunk's columns stay in cache
        block = words[lo:lo + _CHUNK]
        acc = np.full(block.shape[0], _GAMMA, dtype=np.uint64)
        for j in range(block.shape[1]):
            acc = _mix(acc * _MIX1 + block[:, j])
        h[lo:lo + _CHUNK] = acc
    _, first, group = np.unique(h, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    blocks = range(0, n, _CHUNK)
    if all(np.array_equal(words[first[group[lo:lo + _CHUNK]]], words[lo:lo + _CHUNK]) for lo in blocks):
        return first, group
    rows = words.view(np.dtype((np.void, 8 * words.shape[1]))).reshape(-1)  # a collision: the lexical sort
    _, first, group = np.unique(rows, return_index=True, return_inverse=True)
    return first, group.reshape(-1)


def unique_rows(a: np.ndarray) -> np.ndarray:
    """The distinct rows of a 2-D numeric array in lexicographic order (first column first), as
    ``np.unique(a, axis=0)`` returns them, by one stable :func:`numpy.lexsort`.

    Rows are compared as numbers (−0.0 equals 0.0; a class keeps its first row in the sorted order).
    numpy ≥ 2.3's ``np.unique`` imports ``numpy.ma`` on its first call (about 10 ms, a tenth of
    ``import numpy``): the small designs of a one-count solve use this instead.
    """
    a = np.asarray(a)
    if a.shape[0] < 2:
        return a.copy()
    ordered = a[np.lexsort(a.T[::-1])]
    keep = np.ones(ordered.shape[0], dtype=bool)
    keep[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    return ordered[keep]
