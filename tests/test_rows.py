"""Exact grouping of equal rows by hashing (dpopt.core.rows) against numpy's lexical sort."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt.core import rows
from dpopt.core.rows import row_groups, unique_rows


def _partition(group: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(group == g).tolist()) for g in np.unique(group)}


@pytest.mark.parametrize("seed", range(5))
def test_same_partition_as_numpy_unique(seed):
    # independent reference: np.unique(axis=0) sorts the rows lexically and labels equal rows alike
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, size=(2000, 4)).astype(float) * rng.choice([0.5, 1.0, 3.0], size=(2000, 1))
    first, group = row_groups(a)
    _, expected = np.unique(a, axis=0, return_inverse=True)
    assert _partition(group) == _partition(expected.reshape(-1))
    assert np.array_equal(a[first][group], a)


def test_bytes_decide_equality():
    # −0.0 and 0.0 are equal floats but different bytes: callers normalise them (x + 0.0) first
    first, group = row_groups(np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, 1.0]]))
    assert len(first) == 2 and group[0] == group[2] != group[1]


def test_a_collision_falls_back_to_the_lexical_sort(monkeypatch):
    monkeypatch.setattr(rows, "_mix", lambda x: np.zeros_like(x))  # every row hashes alike
    a = np.array([[1, 2], [3, 4], [1, 2], [5, 6]], dtype=np.int64)
    first, group = row_groups(a)
    assert len(first) == 3 and group[0] == group[2] and len({group[0], group[1], group[3]}) == 3


def test_rows_of_other_item_sizes_are_refused():
    with pytest.raises(ValueError, match="8-byte"):
        row_groups(np.zeros((3, 2), dtype=np.float32))


@pytest.mark.parametrize("shape", [(0, 3), (1, 2), (40, 1), (200, 3), (500, 6)])
def test_unique_rows_is_numpys_unique_over_rows(shape):
    """unique_rows against the reference np.unique(a, axis=0): same rows in the same order, small integer
    entries so that rows repeat often, and a sign-flipped copy (−0.0 against 0.0) as the derivations make."""
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, size=shape).astype(float)
    a = np.vstack([a, -a])
    assert np.array_equal(unique_rows(a), np.unique(a, axis=0))
