r"""Queries compiled from a spec: how to evaluate them on records, and their structure.

Counting queries (count, histogram, contingency table, marginals, linear) are linear
maps of the histogram ``h`` of the records over the cells of the attributes they use:
φ(X) = A h(X), with A a sparse (d × m) matrix. Cells are ordered row-major, the first
listed attribute varying slowest. Bounded sum and mean are the numeric queries.

``evaluate`` works record by record (counting matches), independently of ``A``; the
brute-force sensitivity check relies on that independence.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Sequence

import numpy as np
from scipy import sparse

from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.spec.models import (
    ContingencyTableQuery,
    CountQuery,
    HistogramQuery,
    LinearQuery,
    MarginalsQuery,
    MeanQuery,
    NumericAttribute,
    Spec,
    SumQuery,
)

Record = Mapping[str, object]

INTEGER_VALUED_KINDS = frozenset({"count", "histogram", "contingency_table", "marginals"})
"""Query kinds whose answers are integers (counts of records; a linear query's matrix is the user's)."""


@dataclass(frozen=True)
class CountingQuery:
    """A linear query of the histogram over the cells of ``attributes``.

    Attributes
    ----------
    kind : str
        The spec's query kind.
    attributes : tuple of str
        The categorical attributes whose cells index the histogram.
    levels : tuple of tuple of str
        Their levels.
    groups : tuple of tuple of str
        For tables/marginals: the attribute groups, one output block each; for a
        linear query, the single attribute; empty for a count.
    matrix : scipy.sparse.csr_matrix
        A (d × m).
    labels : tuple of str
        One label per output coordinate.
    """

    kind: str
    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    groups: tuple[tuple[str, ...], ...]
    matrix: sparse.csr_matrix = field(repr=False)
    labels: tuple[str, ...]
    user_matrix: np.ndarray | None = field(default=None, repr=False)

    @property
    def dimension(self) -> int:
        return self.matrix.shape[0]

    @property
    def cells(self) -> int:
        return self.matrix.shape[1]

    @property
    def is_integer_valued(self) -> bool:
        return self.kind in INTEGER_VALUED_KINDS

    def evaluate(self, records: Sequence[Record]) -> np.ndarray:
        """φ(X), counted record by record."""
        if self.kind == "count":
            return np.array([float(len(records))])
        if self.kind == "linear":
            (attribute,) = self.groups[0]
            index = {level: i for i, level in enumerate(self.levels[0])}
            h = np.zeros(len(index))
            for record in records:
                h[index[str(record[attribute])]] += 1
            return self.user_matrix @ h
        blocks = []
        for group in self.groups:
            group_levels = [self.levels[self.attributes.index(a)] for a in group]
            position = {cell: i for i, cell in enumerate(itertools.product(*group_levels))}
            counts = np.zeros(len(position))
            for record in records:
                counts[position[tuple(str(record[a]) for a in group)]] += 1
            blocks.append(counts)
        return np.concatenate(blocks)


@dataclass(frozen=True)
class NumericQuery:
    """A bounded sum or mean of a numeric attribute.

    Attributes
    ----------
    kind : {'sum', 'mean'}
    attribute : str
    lower, upper : float
        The attribute's declared bounds.
    n : int or None
        The public dataset size (required for a mean).
    """

    kind: str
    attribute: str
    lower: float
    upper: float
    n: int | None

    dimension = 1
    labels = ("value",)
    is_integer_valued = False

    @property
    def width(self) -> Fraction:
        """upper − lower, exactly."""
        return Fraction(self.upper) - Fraction(self.lower)

    def evaluate(self, records: Sequence[Record]) -> np.ndarray:
        total = float(sum(float(record[self.attribute]) for record in records))
        if self.kind == "sum":
            return np.array([total])
        return np.array([total / len(records)]) if records else np.array([0.0])


def compile_query(spec: Spec) -> CountingQuery | NumericQuery:
    """Compile the spec's query into its evaluable, structured form.

    Raises
    ------
    SpecError
        A mean without ``data.n``.
    """
    q = spec.query
    attrs = spec.data.attributes
    if isinstance(q, (SumQuery, MeanQuery)):
        bounds: NumericAttribute = attrs[q.attribute]  # type: ignore[assignment]
        if isinstance(q, MeanQuery) and spec.data.n is None:
            raise SpecError("data.n", "is required for a mean query (the mean divides by a public n)")
        return NumericQuery(q.kind, q.attribute, bounds.min, bounds.max, spec.data.n)
    if isinstance(q, CountQuery):
        groups: tuple[tuple[str, ...], ...] = ((),)
    elif isinstance(q, (HistogramQuery, LinearQuery)):
        groups = ((q.attribute,),)
    elif isinstance(q, ContingencyTableQuery):
        groups = (tuple(q.attributes),)
    elif isinstance(q, MarginalsQuery):
        groups = tuple(tuple(g) for g in q.attributes)
    else:  # pragma: no cover - the spec union is closed
        raise UnsupportedSpecError("query.kind", f"unknown query kind {q.kind}")
    used = tuple(dict.fromkeys(a for g in groups for a in g))
    levels = tuple(tuple(attrs[a]) for a in used)  # type: ignore[arg-type]
    shape = tuple(len(lv) for lv in levels)
    m = int(np.prod(shape)) if shape else 1
    blocks, labels = [], []
    for group in groups:
        axes = [used.index(a) for a in group]
        group_shape = [shape[i] for i in axes]
        block_size = int(np.prod(group_shape)) if group else 1
        # row of each cell: its position in the group's own row-major table
        coords = np.unravel_index(np.arange(m), shape) if shape else ()
        rows = (
            np.ravel_multi_index([coords[i] for i in axes], group_shape)
            if group
            else np.zeros(m, dtype=int)
        )
        blocks.append(sparse.csr_matrix((np.ones(m), (rows, np.arange(m))), shape=(block_size, m)))
        group_levels = [levels[i] for i in axes]
        for cell in itertools.product(*group_levels):
            labels.append(",".join(f"{a}={v}" for a, v in zip(group, cell)) if group else "count")
    matrix = sparse.vstack(blocks).tocsr()
    user = None
    if isinstance(q, LinearQuery):
        user = np.asarray(q.matrix, dtype=float)
        matrix = sparse.csr_matrix(user)
        labels = [f"row {i}" for i in range(user.shape[0])]
    return CountingQuery(q.kind, used, levels, groups, matrix, tuple(labels), user)
