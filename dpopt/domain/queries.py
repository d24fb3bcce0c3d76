r"""Queries compiled from a spec: how to evaluate them on records, and their structure.

Counting queries (count, histogram, contingency table, marginals, linear) are linear
maps of the histogram ``h`` of the records over the cells of the attributes they use:
φ(X) = A h(X), with A a (d × m) matrix (sparse; :meth:`CountingQuery.dense` as an array). Cells
are ordered row-major, the first listed attribute varying slowest. Bounded sum and mean are the
numeric queries.

``evaluate`` works record by record (counting matches), independently of ``A``; the
brute-force sensitivity check relies on that independence.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

import numpy as np

from dpopt.core.decimals import written
from dpopt.core.memory import LABEL_BYTES, dense_bytes, require_memory
from dpopt.domain.kronecker import KroneckerWorkload, compile_terms
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.spec.models import (
    ContingencyTableQuery,
    CountQuery,
    HistogramQuery,
    LinearQuery,
    MarginalsQuery,
    KroneckerQuery as KroneckerSpec,
    MeanQuery,
    NumericAttribute,
    Spec,
    SumQuery,
)

if TYPE_CHECKING:
    from scipy import sparse

Record = Mapping[str, object]

INTEGER_VALUED_KINDS = frozenset({"count", "histogram", "contingency_table", "marginals"})
"""Query kinds whose answers are integers (counts of records; a linear query's matrix is the user's)."""

MAX_DECIMAL_SCALE = 2**20
"""Largest common denominator D of a ``linear`` query's decimal weights served by :func:`decimal_scale`."""

MAX_SCALED_ANSWER = 2**51
"""Largest |D·Wh| of :meth:`CountingQuery.answers` computed exactly (its quotient by D then identifies it,
:func:`dpopt.mechanisms.decimal_lattice.scaled_answers`)."""


def decimal_scale(matrix: np.ndarray) -> tuple[int, np.ndarray] | None:
    r"""The least common denominator D of a matrix's entries read as decimals, and the integer matrix D·W.

    Each float entry counts as the decimal of its shortest repr (:func:`dpopt.core.decimals.written`: the
    number the spec wrote, 0.1 is 1/10), so W = M/D with M an integer matrix and D = lcm of the entries'
    reduced denominators (a product of powers of 2 and 5 for decimals).

    Parameters
    ----------
    matrix : numpy.ndarray
        Finite float entries (a ``linear`` query's ``user_matrix``).

    Returns
    -------
    tuple of (int, numpy.ndarray) or None
        D and M (int64); None when D exceeds :data:`MAX_DECIMAL_SCALE` or an entry of M exceeds 2^31.
    """
    entries = [written(float(x)) for x in np.asarray(matrix, dtype=float).ravel()]
    scale = 1
    for entry in entries:
        scale = math.lcm(scale, entry.denominator)
        if scale > MAX_DECIMAL_SCALE:
            return None
    scaled = [int(entry * scale) for entry in entries]
    if any(abs(v) > 2**31 for v in scaled):
        return None
    return scale, np.array(scaled, dtype=np.int64).reshape(np.shape(matrix))


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
        linear query, the single attribute; a count has one empty group.
    labels : tuple of str
        One label per output coordinate.
    user_matrix : numpy.ndarray or None
        A linear query's own matrix (over the levels of its attribute).

    A itself is :attr:`matrix` (sparse, built on first use: scipy.sparse is not imported by
    stages that need only the structure, such as ``dpopt verify`` of a count) or
    :meth:`dense`; both are memory-guarded. Every query but ``linear`` is a stack of
    marginals, :attr:`workload`, which the sensitivity and release stages use instead of A.
    """

    kind: str
    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    groups: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]
    user_matrix: np.ndarray | None = field(default=None, repr=False)

    @property
    def dimension(self) -> int:
        """d, the number of output coordinates."""
        return len(self.labels)

    @property
    def cells(self) -> int:
        """m, the number of cells of the histogram (1 for a count)."""
        return math.prod(len(lv) for lv in self.levels)

    def _blocks(self) -> Iterator[tuple[np.ndarray, int]]:
        """For each group, its block size and the row of every cell in the group's own
        row-major table (a 0/1 block with one 1 per column)."""
        shape = tuple(len(lv) for lv in self.levels)
        m = self.cells
        coords = np.unravel_index(np.arange(m), shape) if shape else ()
        for group in self.groups:
            axes = [self.attributes.index(a) for a in group]
            group_shape = [shape[i] for i in axes]
            rows = np.ravel_multi_index([coords[i] for i in axes], group_shape) if group else np.zeros(m, int)
            yield rows, math.prod(group_shape)

    @cached_property
    def workload(self) -> MarginalWorkload | None:
        """The query as an implicit stack of marginals (:mod:`dpopt.domain.marginal_algebra`),
        None for a ``linear`` query (its matrix is the user's).

        A count is the marginal over no attribute, a histogram or contingency table the
        marginal over all of its attributes; nothing of the histogram's size is formed.
        """
        if self.user_matrix is not None:
            return None
        algebra = MarginalAlgebra(tuple(len(lv) for lv in self.levels))
        return MarginalWorkload(algebra, tuple(tuple(self.attributes.index(a) for a in g) for g in self.groups))

    @cached_property
    def matrix(self) -> sparse.csr_matrix:
        """A (d × m) as a sparse matrix.

        Raises
        ------
        MemoryLimitError
            When its entries (and the cell indices that build them) exceed the memory limit.
        """
        from scipy import sparse  # imported where used (start-up of `dpopt verify`)

        if self.user_matrix is not None:
            return sparse.csr_matrix(self.user_matrix)
        m = self.cells
        entries = m * (len(self.groups) + len(self.levels))
        require_memory(dense_bytes(entries, 3), f"the sparse {self.dimension} x {m} query matrix")
        return sparse.vstack([sparse.csr_matrix((np.ones(m), (rows, np.arange(m))), shape=(size, m))
                              for rows, size in self._blocks()]).tocsr()

    def dense(self) -> np.ndarray:
        """A (d × m) as a new dense array.

        Raises
        ------
        MemoryLimitError
            When it exceeds the memory limit (:func:`dpopt.core.memory.require_memory`).
        """
        if self.user_matrix is not None:
            return np.array(self.user_matrix, dtype=float)
        m = self.cells
        require_memory(dense_bytes(self.dimension, m), f"the dense {self.dimension} x {m} matrix of the {self.kind} query")
        out = np.zeros((self.dimension, m))
        offset = 0
        for rows, size in self._blocks():
            out[offset + rows, np.arange(m)] = 1.0
            offset += size
        return out

    @property
    def is_integer_valued(self) -> bool:
        return self.kind in INTEGER_VALUED_KINDS

    @property
    def integer_answers(self) -> bool:
        """The answers are integers on whole counts, and neighbouring answers differ by integer vectors: a counting
        kind, or a ``linear`` query whose matrix has whole entries (sums of whole multiples of counts)."""
        if self.kind == "linear":
            return bool(np.all(self.user_matrix == np.round(self.user_matrix)))
        return self.is_integer_valued

    @cached_property
    def scale(self) -> tuple[int, np.ndarray] | None:
        """A ``linear`` query's :func:`decimal_scale` (D and the integer matrix D·W); None for other kinds or
        beyond its bounds."""
        return None if self.user_matrix is None else decimal_scale(self.user_matrix)

    def answers(self, counts: np.ndarray) -> np.ndarray:
        r"""φ = A h for histogram rows ``counts`` (shape (m,) or (G, m)), as floats.

        A ``linear`` query with decimal weights (:attr:`scale` D > 1) on whole counts is computed exactly: the
        integers k = (D·W)h in int64 (every |(D·W)| h ≤ :data:`MAX_SCALED_ANSWER`, so no partial sum
        overflows), then k/D correctly rounded (IEEE division of two floats that hold k and D exactly); a
        lattice measurement recovers k from it (:func:`dpopt.mechanisms.decimal_lattice.scaled_answers`). Otherwise
        the floating-point product.
        """
        counts = np.asarray(counts, dtype=float)
        found = self.scale
        if found is not None and found[0] > 1 and np.all(counts >= 0) and np.all(counts == np.round(counts)):
            scale, integer = found
            bound = (np.abs(integer).astype(float) @ counts.T).T
            if np.all(bound <= MAX_SCALED_ANSWER):
                whole = counts.astype(np.int64)
                return (integer @ whole.T).T.astype(float) / float(scale)
        return np.asarray((self.matrix @ counts.T).T, dtype=float)

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
            return self.answers(h)
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
    r"""A bounded sum or mean of a numeric attribute.

    A mean over a public n is one number, Σx / n. A mean with ``data.privacy_unit`` (n is then not
    public) is the pair :math:`(\sum_i (x_i - m),\ n)`, m = (lower + upper)/2 the midpoint: the
    centred sum and the count, released together (the noise designed jointly over their person-level
    sensitivity space) and the mean :math:`m + \tilde S / \tilde n` obtained by post-processing
    (the way Tumult Analytics' ``average`` centres values, so that a value moves the sum by at most
    half the width).

    Attributes
    ----------
    kind : {'sum', 'mean'}
    attribute : str
    lower, upper : float
        The attribute's declared bounds.
    n : int or None
        The public dataset size (a mean without it is the centred pair above).
    """

    kind: str
    attribute: str
    lower: float
    upper: float
    n: int | None

    is_integer_valued = False

    @property
    def pair(self) -> bool:
        """True for a mean released as (centred sum, count)."""
        return self.kind == "mean" and self.n is None

    @property
    def dimension(self) -> int:
        return 2 if self.pair else 1

    @property
    def labels(self) -> tuple[str, ...]:
        return ("centered_sum", "count") if self.pair else ("value",)

    @property
    def midpoint(self) -> float:
        """m = (lower + upper) / 2, the centre of a mean's pair."""
        return (self.lower + self.upper) / 2

    @property
    def width(self) -> Fraction:
        """upper − lower, exactly."""
        return Fraction(self.upper) - Fraction(self.lower)

    def evaluate(self, records: Sequence[Record]) -> np.ndarray:
        values = [float(record[self.attribute]) for record in records]
        if self.pair:
            return np.array([float(sum(x - self.midpoint for x in values)), float(len(values))])
        total = float(sum(values))
        if self.kind == "sum":
            return np.array([total])
        return np.array([total / len(records)]) if records else np.array([0.0])


@dataclass(frozen=True)
class KroneckerQuery(CountingQuery):
    """A ``kronecker`` query: a :class:`CountingQuery` whose A is :attr:`kron` (a union of
    Kronecker products); ``groups`` are the terms' supports. It is not a stack of marginals
    (:attr:`workload` is None); A is formed only on request and memory-guarded."""

    kron: KroneckerWorkload | None = field(default=None, repr=False)

    @cached_property
    def workload(self) -> None:
        return None

    @cached_property
    def matrix(self) -> sparse.csr_matrix:
        from scipy import sparse  # imported where used (start-up of `dpopt verify`)

        return sparse.csr_matrix(self.kron.dense())

    def dense(self) -> np.ndarray:
        return self.kron.dense()

    @property
    def is_integer_valued(self) -> bool:
        """Counts, sums of counts, and a user's integer matrices give integers."""
        return all(f is None or bool(np.all(f == np.round(f))) for term in self.kron.terms for f in term)

    @cached_property
    def support_query(self) -> CountingQuery:
        """The ``marginals`` query of the terms' supports: the only counts a release computes
        (one table per distinct support, in order of first use)."""
        groups = tuple(dict.fromkeys(self.groups))
        labels = tuple(f"{g}:{i}" for g in groups for i in range(math.prod(
            len(self.levels[self.attributes.index(a)]) for a in g)))
        return CountingQuery("marginals", self.attributes, self.levels, groups, labels)

    def from_support(self, values: np.ndarray) -> np.ndarray:
        """The query's answers (..., d) from the answers (..., d') of :attr:`support_query`."""
        support = self.support_query
        tables = support.workload.tables(values)
        by_group = dict(zip(support.groups, tables))
        return self.kron.apply([by_group[g] for g in self.groups])

    def evaluate(self, records: Sequence[Record]) -> np.ndarray:
        """φ(X): the support marginals counted record by record, then the factors applied."""
        return self.from_support(self.support_query.evaluate(records))


def elementary_symmetric(sizes: Sequence[int], k: int) -> int:
    r"""The elementary symmetric polynomial :math:`e_k(n_1, \dots, n_p) = \sum_{|S| = k} \prod_{a \in S} n_a`:
    the number of cells of every marginal of k of p attributes (n_a levels each), without listing the
    :math:`\binom{p}{k}` groups (by :math:`e_j \leftarrow e_j + n_a e_{j-1}` over the attributes, exact integers)."""
    e = [1] + [0] * k
    for n in sizes:
        for j in range(k, 0, -1):
            e[j] += n * e[j - 1]
    return e[k]


def require_labels(dimension: int, what: str) -> None:
    """Refuse, before one is built, the ``dimension`` output labels of a query above the memory limit
    (:data:`dpopt.core.memory.LABEL_BYTES` each at least).

    Raises
    ------
    MemoryLimitError
        Naming the query and its number of outputs.
    """
    require_memory(dimension * LABEL_BYTES, f"the {dimension} output labels of {what}")


def linear_row_labels(attribute: str, levels: Sequence[str], matrix: np.ndarray) -> list[str]:
    """Names of a linear query's rows without ``labels``: a row of ones on a run of consecutive levels (in the
    order the spec lists them) and zeros elsewhere is ``attr=first..last`` (``attr=level`` for one level), any
    other row ``row i``; a name two rows would share is ``row i`` for each of them.

    Examples
    --------
    >>> linear_row_labels("age", ["0-17", "18-64", "65+"], np.array([[1, 1, 1], [0, 0, 1], [0, 2, 0]]))
    ['age=0-17..65+', 'age=65+', 'row 2']
    """
    names = []
    for i, row in enumerate(np.asarray(matrix, dtype=float)):
        ones = np.flatnonzero(row)
        run = ones.size and np.all(row[ones] == 1.0) and ones[-1] - ones[0] + 1 == ones.size
        first, last = (levels[ones[0]], levels[ones[-1]]) if run else (None, None)
        names.append(f"row {i}" if not run else f"{attribute}={first}" if first == last
                     else f"{attribute}={first}..{last}")
    return [f"row {i}" if names.count(name) > 1 else name for i, name in enumerate(names)]


def compile_query(spec: Spec) -> CountingQuery | NumericQuery:
    """Compile the spec's query into its evaluable, structured form.

    Raises
    ------
    MemoryLimitError
        The query's outputs (their labels), or the groups of ``all_of_size``, would exceed the memory limit:
        counted from the spec before any is built.
    SpecError
        A mean without ``data.n`` (nor a ``privacy_unit``: then it is the centred pair, see :class:`NumericQuery`);
        a ``kronecker`` query :func:`~dpopt.domain.kronecker.compile_terms` refuses.
    UnsupportedSpecError
        A ``kronecker`` query with invariants or a privacy unit.
    """
    q = spec.query
    attrs = spec.data.attributes
    if isinstance(q, (SumQuery, MeanQuery)):
        bounds: NumericAttribute = attrs[q.attribute]  # type: ignore[assignment]
        if isinstance(q, MeanQuery) and spec.data.n is None and spec.data.privacy_unit is None:
            raise SpecError("data.n", "is required for a mean query (the mean divides by a public n)")
        return NumericQuery(q.kind, q.attribute, bounds.min, bounds.max, spec.data.n)
    if isinstance(q, CountQuery):
        groups: tuple[tuple[str, ...], ...] = ((),)
    elif isinstance(q, (HistogramQuery, LinearQuery)):
        groups = ((q.attribute,),)
    elif isinstance(q, ContingencyTableQuery):
        groups = (tuple(q.attributes),)
    elif isinstance(q, MarginalsQuery):
        if q.all_of_size is not None:
            over = q.over if q.over is not None else [
                name for name, levels in attrs.items() if not isinstance(levels, NumericAttribute)]
            tables = math.comb(len(over), q.all_of_size)
            require_memory(dense_bytes(tables, q.all_of_size + 8), f"the {tables} attribute groups of all_of_size: "
                                                                   f"{q.all_of_size} over {len(over)} attributes")
            require_labels(elementary_symmetric([len(attrs[a]) for a in over], q.all_of_size),
                           f"all {tables} marginals of size {q.all_of_size}")
        groups = tuple(tuple(g) for g in q.groups(spec.data))
    elif isinstance(q, KroneckerSpec):
        used, levels, groups, labels, kron = compile_terms(spec)
        return KroneckerQuery(q.kind, used, levels, groups, labels, None, kron)
    else:  # pragma: no cover - the spec union is closed
        raise UnsupportedSpecError("query.kind", f"unknown query kind {q.kind}")
    used = tuple(dict.fromkeys(a for g in groups for a in g))
    levels = tuple(tuple(attrs[a]) for a in used)  # type: ignore[arg-type]
    if not isinstance(q, LinearQuery):
        sizes = {a: len(lv) for a, lv in zip(used, levels)}
        require_labels(sum(math.prod(sizes[a] for a in g) for g in groups), f"the {q.kind} query")
    labels = []
    for group in groups:
        group_levels = [levels[used.index(a)] for a in group]
        for cell in itertools.product(*group_levels):
            labels.append(",".join(f"{a}={v}" for a, v in zip(group, cell)) if group else "count")
    user = None
    if isinstance(q, LinearQuery):
        user = np.asarray(q.matrix, dtype=float)
        labels = list(q.labels) if q.labels is not None else linear_row_labels(q.attribute, levels[0], user)
    return CountingQuery(q.kind, used, levels, groups, tuple(labels), user)
