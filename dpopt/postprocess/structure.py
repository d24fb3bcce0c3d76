r"""Which cells make which released numbers: the structure a post-processed table must respect.

A release observes a table (a histogram) h ∈ ℕ^m through one or several linear queries
y = A h + z (A stacks the 0/1 matrices of every released table, e.g. a two-way table and its
margins), and publishes some statistics exactly: the invariants C h = t (C an integer
matrix, t integers, e.g. margins and the total). Post-processing estimates h from y so that
every released number is one cell sum of one table, C h = t holds exactly, h ≥ 0 and h is
integral; then A h is integral too (A has 0/1 entries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dpopt.domain.queries import CountingQuery
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.problem import Problem


@dataclass(frozen=True)
class Structure:
    """The linear structure of a release over the m cells of one table.

    Attributes
    ----------
    queries : numpy.ndarray
        A (d × m), 0/1 entries: released coordinate i is the sum of the cells where row i is 1.
    labels : tuple of str
        One label per released coordinate.
    constraints : numpy.ndarray
        C (k × m), int64: the invariants C h = t (k may be 0).
    constraint_names : tuple of str
        One name per row of C (e.g. ``"total"``, ``"margin sex=female"``).
    shape : tuple of int
        The table's shape (its cells are row-major, first attribute slowest).
    margins : tuple of tuple of int
        The groups of axes whose margins are rows of C (used to pick the rounding route).
    """

    queries: np.ndarray = field(repr=False)
    labels: tuple[str, ...]
    constraints: np.ndarray = field(repr=False)
    constraint_names: tuple[str, ...]
    shape: tuple[int, ...]
    margins: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        m = math.prod(self.shape)
        if self.queries.shape[1] != m or self.constraints.shape[1] != m:
            raise ValueError(f"queries and constraints must have {m} columns (the cells of a {self.shape} table)")
        if not np.array_equal(self.queries, self.queries.astype(bool)):
            raise UnsupportedSpecError("query", "post-processing to integers needs a counting query (0/1 rows)")

    @property
    def cells(self) -> int:
        return math.prod(self.shape)

    def invariant_values(self, table) -> np.ndarray:
        """t = C h for a table h of whole counts, in exact integer arithmetic."""
        h = np.asarray(table)
        if not np.array_equal(h, np.round(h)):
            raise ValueError("the table must hold whole counts")
        return exact_product(self.constraints, h.astype(np.int64))


def exact_product(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` for integer arrays, in Python integers (no int64 overflow)."""
    rows = np.asarray(matrix, dtype=np.int64).astype(object)
    return rows.dot(np.asarray(vector, dtype=np.int64).astype(object))


def margin_rows(shape: Sequence[int], axes: Sequence[int]) -> np.ndarray:
    """The 0/1 matrix (∏ shape[axes] × ∏ shape) of the margin of a table over ``axes``."""
    m = math.prod(shape)
    coords = np.unravel_index(np.arange(m), tuple(shape))
    rows = np.ravel_multi_index([coords[a] for a in axes], [shape[a] for a in axes]) if axes else np.zeros(m, int)
    out = np.zeros((math.prod(shape[a] for a in axes), m), dtype=np.int64)
    out[rows, np.arange(m)] = 1
    return out


def table_structure(
    shape: Sequence[int],
    margins: Sequence[Sequence[int]] = (),
    total: bool = False,
    queries: Sequence[Sequence[int]] | None = None,
) -> Structure:
    """The structure of a table released cell by cell (or through margin tables), with invariants.

    Parameters
    ----------
    shape : sequence of int
        The table's shape.
    margins : sequence of axis groups
        Invariant margins (each a group of axes whose margin table is published exactly).
    total : bool
        Whether the grand total is invariant.
    queries : sequence of axis groups, optional
        The released tables as margins of the full table (``()`` for the total); the full
        table by default.

    Examples
    --------
    >>> s = table_structure((2, 3), margins=[(0,), (1,)])
    >>> s.constraints.shape
    (5, 6)
    """
    shape = tuple(int(k) for k in shape)
    groups = [tuple(range(len(shape)))] if queries is None else [tuple(g) for g in queries]
    a = np.vstack([margin_rows(shape, g) for g in groups]).astype(float)
    labels = tuple(
        f"{'×'.join(map(str, g)) or 'total'}[{i}]" for g in groups for i in range(math.prod(shape[x] for x in g))
    )
    rows, names = [], []
    if total:
        rows.append(np.ones((1, math.prod(shape)), dtype=np.int64))
        names.append("total")
    for g in margins:
        block = margin_rows(shape, tuple(g))
        rows.append(block)
        names += [f"margin {tuple(g)}[{i}]" for i in range(block.shape[0])]
    c = np.vstack(rows) if rows else np.zeros((0, math.prod(shape)), dtype=np.int64)
    return Structure(a, labels, c, tuple(names), shape, tuple(tuple(g) for g in margins))


def spec_structure(problem: Problem) -> Structure:
    """The structure of a spec's release: its counting query and its invariants, read from the
    compiled spec (:func:`dpopt.compile`).

    With invariants (replace-one, Semi-DP) C is the invariant map of
    :class:`dpopt.sensitivity.invariants.InvariantDomain`: the total (fixed by the
    neighbourhood), the invariant margins and the linear invariants, all over the cells of
    the record domain; without invariants, C is the total when ``data.n`` is public, else
    empty.

    Raises
    ------
    UnsupportedSpecError
        A numeric query, or a linear query with a user matrix (not a count of cells).
    """
    spec, query, domain = problem.spec, problem.query, problem.domain
    if not isinstance(query, CountingQuery) or not query.is_integer_valued:
        raise UnsupportedSpecError(
            "postprocess",
            "integer, consistent tables need a counting query (count, histogram, contingency_table, marginals)",
        )
    if domain is not None:
        a = np.asarray(domain.query_matrix().toarray(), dtype=float)
        c = domain.invariant_matrix()
        names = ["total"] + [f"invariant row {i}" for i in range(1, c.shape[0])]
        return Structure(a, tuple(query.labels), c, tuple(names), domain.shape, domain.margin_groups)
    shape = tuple(len(levels) for levels in query.levels) or (1,)
    a = query.dense()
    if spec.data.n is not None:
        return Structure(a, tuple(query.labels), np.ones((1, a.shape[1]), dtype=np.int64), ("total",), shape)
    return Structure(a, tuple(query.labels), np.zeros((0, a.shape[1]), dtype=np.int64), (), shape)


def check_values(structure: Structure, values) -> np.ndarray:
    """The invariant values t as int64, one per row of C.

    Raises
    ------
    SpecError
        Wrong length or non-integral values.
    """
    t = np.asarray([] if values is None else values, dtype=float).reshape(-1)
    if t.size != structure.constraints.shape[0]:
        raise SpecError("invariant values", f"need {structure.constraints.shape[0]} values (one per row of C), got {t.size}")
    if not np.array_equal(t, np.round(t)):
        raise SpecError("invariant values", "invariants of counts must be whole numbers")
    return t.astype(np.int64)
