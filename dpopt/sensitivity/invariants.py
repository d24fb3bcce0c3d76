r"""Invariants: statistics published exactly, as linear maps C of the record histogram.

Semi-DP (Cho & Awan 2024, §3.1): an invariant T(X) is released without noise. With
t = T(X*) for the confidential X*, an adversary knows X lies in the conforming space

.. math:: \mathcal{D}_t = \{X \in \mathcal{X}^n : T(X) = t\},

and only datasets of :math:`\mathcal{D}_t` can still be protected from each other.

Every invariant dpopt accepts is a linear map of the histogram h(X) of the records over
the cells of the *record domain*: the attributes the query and the invariants read (the
query's attributes first, then the others in order of appearance; cells row-major):

* ``total``: T(X) = n, C = 1ᵀ;
* ``margins`` over attributes G: the marginal table of G, one row of C per cell of G;
* ``linear`` C·φ(X) = t: with φ(X) = A h(X) the query, the rows C·A.

The map is kept twice, on purpose: :meth:`InvariantDomain.invariant_matrix` (exact
integers, used by the structural routes) and :meth:`InvariantDomain.evaluate` (record by
record through the query's own evaluation, used by the brute-force route), so that the
two routes share no arithmetic.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.spec.models import LinearInvariant, MarginsInvariant, Spec, TotalInvariant

if TYPE_CHECKING:
    from scipy import sparse

Key = tuple[int, ...]


@dataclass(frozen=True)
class LinearRows:
    """A linear invariant C·φ(X) = t made exact: integer rows over the record-domain cells.

    Attributes
    ----------
    rows : tuple of tuple of int
        C·A scaled row by row by a positive integer so that every entry is an integer
        (scaling a row does not change which datasets share an invariant value).
    value : tuple of int or None
        The scaled t when the spec gives it and every scaled entry is an integer;
        None when the spec leaves t to the data.
    attainable : bool
        False when a given t scales to a non-integer (no dataset can have it).
    """

    rows: tuple[tuple[int, ...], ...]
    value: tuple[int, ...] | None
    attainable: bool = True


@dataclass(frozen=True)
class InvariantDomain:
    """The record domain of a spec with invariants, and its invariant map.

    Attributes
    ----------
    attributes : tuple of str
        The attributes read by the query or an invariant (the query's first).
    levels : tuple of tuple of str
        Their levels; cells of the domain are their product, row-major.
    query : CountingQuery
        The compiled query (over its own attributes).
    query_axes : tuple of tuple of int
        One group of axes per output block of the query (a marginal table each); empty
        tuple for a count; for a linear query, its single attribute.
    margin_groups : tuple of tuple of int
        The invariant margins as groups of axes, without repetitions or groups contained
        in another (their margins are implied).
    linear : tuple of LinearRows
        The linear invariants.
    n : int or None
        The public dataset size (``data.n``).
    """

    attributes: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    query: CountingQuery = field(repr=False)
    query_axes: tuple[tuple[int, ...], ...]
    margin_groups: tuple[tuple[int, ...], ...]
    linear: tuple[LinearRows, ...]
    n: int | None
    _invariants: tuple = field(repr=False, default=())

    # ------------------------------------------------------------------ shape
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(lv) for lv in self.levels)

    @property
    def cells(self) -> int:
        """m, the number of possible records."""
        return math.prod(self.shape)

    @property
    def covered_axes(self) -> frozenset[int]:
        """Axes some invariant margin reads."""
        return frozenset(a for g in self.margin_groups for a in g)

    @property
    def margins_only(self) -> bool:
        """True when the invariants are margins and totals only (no linear invariant)."""
        return not self.linear

    @property
    def disjoint_margins(self) -> bool:
        """True when no two margin groups share an attribute (an independence-type invariant)."""
        seen: set[int] = set()
        for group in self.margin_groups:
            if seen & set(group):
                return False
            seen |= set(group)
        return True

    @property
    def query_is_table(self) -> bool:
        """True when φ(X) = h(X): the query is the full table of the record domain."""
        return self.query.kind in ("histogram", "contingency_table") and self.query_axes == (
            tuple(range(len(self.attributes))),
        )

    @property
    def known_values(self) -> bool:
        """True when some invariant value is fixed by the spec (a linear ``value``)."""
        return any(lin.value is not None or not lin.attainable for lin in self.linear)

    # --------------------------------------------------------------- matrices
    def query_matrix(self) -> sparse.csr_matrix:
        """A (d × m): φ(X) = A h(X) over the record-domain cells (built from the axes)."""
        from scipy import sparse  # imported where used (start-up of `dpopt verify`)

        shape = self.shape
        m = self.cells
        if self.query.kind == "linear":
            (axis,) = self.query_axes[0]
            coords = np.unravel_index(np.arange(m), shape)
            lift = sparse.csr_matrix((np.ones(m), (coords[axis], np.arange(m))), shape=(shape[axis], m))
            return sparse.csr_matrix(self.query.user_matrix) @ lift
        blocks = []
        coords = np.unravel_index(np.arange(m), shape)
        for axes in self.query_axes:
            if not axes:
                blocks.append(sparse.csr_matrix(np.ones((1, m))))
                continue
            rows = np.ravel_multi_index([coords[a] for a in axes], [shape[a] for a in axes])
            size = math.prod(shape[a] for a in axes)
            blocks.append(sparse.csr_matrix((np.ones(m), (rows, np.arange(m))), shape=(size, m)))
        return sparse.vstack(blocks).tocsr()

    def invariant_matrix(self) -> np.ndarray:
        """C (integer, rows × m) with T(X) = C h(X): the total (fixed under replace-one),
        the margins, the linear rows.

        Dense: for the enumeration routes on small domains only.
        """
        shape = self.shape
        m = self.cells
        coords = np.unravel_index(np.arange(m), shape)
        rows = [np.ones((1, m), dtype=np.int64)]
        for group in self.margin_groups:
            index = np.ravel_multi_index([coords[a] for a in group], [shape[a] for a in group])
            block = np.zeros((math.prod(shape[a] for a in group), m), dtype=np.int64)
            block[index, np.arange(m)] = 1
            rows.append(block)
        for lin in self.linear:
            rows.append(np.array(lin.rows, dtype=np.int64).reshape(len(lin.rows), m))
        return np.vstack(rows)

    def value_filter(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows of C, required values) for the invariants whose value the spec fixes."""
        picked, values = [], []
        offset = 1 + sum(math.prod(self.shape[a] for a in g) for g in self.margin_groups)
        for lin in self.linear:
            if lin.value is not None:
                picked.extend(range(offset, offset + len(lin.rows)))
                values.extend(lin.value)
            offset += len(lin.rows)
        if not picked:
            return None
        return np.array(picked), np.array(values, dtype=np.int64)

    # ----------------------------------------------------------- record level
    def record(self, cell: int) -> dict[str, str]:
        """The record of a cell."""
        coords = np.unravel_index(cell, self.shape)
        return {name: self.levels[a][int(c)] for a, (name, c) in enumerate(zip(self.attributes, coords))}

    def evaluate(self, records: Sequence[Mapping[str, object]]) -> tuple:
        """T(X) computed record by record (counts, and C·φ(X) through the query's own
        evaluation), independently of :meth:`invariant_matrix`. Linear values are
        rounded to 12 significant digits (the query evaluates in floating point)."""
        out: list = []
        for invariant in self._invariants:
            if isinstance(invariant, TotalInvariant):
                out.append(len(records))
            elif isinstance(invariant, MarginsInvariant):
                counts: dict[tuple[str, ...], int] = defaultdict(int)
                for r in records:
                    counts[tuple(str(r[a]) for a in invariant.attributes)] += 1
                out.append(tuple(sorted(counts.items())))
            else:
                phi = self.query.evaluate(list(records))
                values = np.asarray(invariant.matrix, dtype=float) @ phi
                out.append(tuple(float(f"{v:.12g}") + 0.0 for v in values))
        return tuple(out)

    def conforms(self, value: tuple) -> bool:
        """Whether an :meth:`evaluate` value agrees with the invariant values the spec fixes."""
        for invariant, part in zip(self._invariants, value):
            if isinstance(invariant, LinearInvariant) and invariant.value is not None and part != tuple(
                float(f"{float(v):.12g}") + 0.0 for v in invariant.value
            ):
                return False
        return True


def _exact_rows(matrix: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(x)) for x in row] for row in np.atleast_2d(matrix)]


def _scale_to_integers(rows: list[list[Fraction]], values: list[Fraction] | None) -> LinearRows:
    scaled, scaled_values, attainable = [], [], True
    for i, row in enumerate(rows):
        lcm = math.lcm(*(x.denominator for x in row)) if row else 1
        ints = [int(x * lcm) for x in row]
        g = math.gcd(*ints) if any(ints) else 1
        scaled.append(tuple(v // g for v in ints))
        if values is not None:
            v = values[i] * lcm / g
            if v.denominator != 1:
                attainable = False
            scaled_values.append(int(v) if v.denominator == 1 else 0)
    return LinearRows(tuple(scaled), tuple(scaled_values) if values is not None and attainable else None, attainable)


def require_semi_adjacency(spec: Spec) -> None:
    """Invariants need the replace-one adjacency.

    Raises
    ------
    UnsupportedSpecError
        Adjacency other than ``replace_one`` (Semi-DP is defined on datasets of n records
        under the Hamming metric, Cho & Awan Def. 13; add/remove semi-adjacency is not
        worked out in the paper).
    """
    if spec.adjacency.kind != "replace_one":
        raise UnsupportedSpecError(
            "adjacency",
            "invariants (Semi-DP) are defined for datasets of n records under the replace-one "
            f"(Hamming) metric (Cho & Awan, Def. 13); use adjacency replace_one, not {spec.adjacency.kind} "
            "(the semi-adjacent parameter a(t) then sets how many records may differ)",
        )


def invariant_stage(spec: Spec, query: CountingQuery | NumericQuery) -> InvariantDomain | None:
    """The invariant stage of compilation: the record domain and invariant map of a spec with
    invariants; None without invariants, or for a sum or mean with the total only (fixed by
    replace-one, which is still checked: a numeric query has no record domain of cells).

    Raises
    ------
    UnsupportedSpecError, SpecError
        As :func:`invariant_domain`.
    """
    if not spec.invariants:
        return None
    if isinstance(query, NumericQuery) and all(isinstance(inv, TotalInvariant) for inv in spec.invariants):
        require_semi_adjacency(spec)
        return None
    return invariant_domain(spec, query)


def invariant_domain(spec: Spec, query: CountingQuery | NumericQuery) -> InvariantDomain:
    """The record domain and invariant map of a spec with invariants, over its compiled query
    (:func:`dpopt.domain.queries.compile_query`).

    Raises
    ------
    UnsupportedSpecError
        Adjacency other than ``replace_one`` (:func:`require_semi_adjacency`); margins or
        linear invariants of a numeric query.
    SpecError
        A linear invariant whose matrix does not fit the query's dimension.
    """
    require_semi_adjacency(spec)
    if isinstance(query, NumericQuery):
        raise UnsupportedSpecError(
            "invariants",
            f"a {query.kind} query supports only a 'total' invariant; margins and linear "
            "invariants need a counting query (count, histogram, contingency_table, marginals, linear)",
        )
    attributes = list(query.attributes)
    for invariant in spec.invariants:
        if isinstance(invariant, MarginsInvariant):
            attributes += [a for a in invariant.attributes if a not in attributes]
    levels = tuple(tuple(spec.data.attributes[a]) for a in attributes)  # type: ignore[arg-type]
    axis = {name: i for i, name in enumerate(attributes)}
    if query.kind == "count":
        query_axes: tuple[tuple[int, ...], ...] = ((),)
    else:
        query_axes = tuple(tuple(axis[a] for a in g) for g in query.groups)
    groups = []
    for invariant in spec.invariants:
        if isinstance(invariant, MarginsInvariant):
            group = tuple(sorted(axis[a] for a in invariant.attributes))
            if group not in groups:
                groups.append(group)
    maximal = tuple(g for g in groups if not any(set(g) < set(h) for h in groups))
    domain_shape = tuple(len(lv) for lv in levels)
    A = None
    linear = []
    for i, invariant in enumerate(spec.invariants):
        if not isinstance(invariant, LinearInvariant):
            continue
        C = np.asarray(invariant.matrix, dtype=float)
        if C.shape[1] != query.dimension:
            raise SpecError(
                f"invariants[{i}].matrix",
                f"has {C.shape[1]} columns but the query has dimension {query.dimension} (C acts on φ(X))",
            )
        if A is None:
            A = _exact_rows(_partial(query, query_axes, domain_shape).toarray())
        Cx = _exact_rows(C)
        CA = [[sum((c * a for c, a in zip(crow, col)), Fraction(0)) for col in zip(*A)] for crow in Cx]
        values = None if invariant.value is None else [Fraction(float(v)) for v in invariant.value]
        linear.append(_scale_to_integers(CA, values))
    return InvariantDomain(
        attributes=tuple(attributes),
        levels=levels,
        query=query,
        query_axes=query_axes,
        margin_groups=maximal,
        linear=tuple(linear),
        n=spec.data.n,
        _invariants=tuple(spec.invariants),
    )


def _partial(query: CountingQuery, query_axes, shape) -> sparse.csr_matrix:
    """The query matrix over a domain of the given shape (before the domain exists)."""
    stub = InvariantDomain(("",) * len(shape), tuple(tuple(map(str, range(s))) for s in shape), query,
                           query_axes, (), (), None)
    return stub.query_matrix()


# --------------------------------------------------------------- enumeration
def histograms(m: int, n: int) -> np.ndarray:
    """Every histogram of n records over m cells, shape (C(m+n−1, n), m), int64."""
    combos = np.array(list(itertools.combinations_with_replacement(range(m), n)), dtype=np.int64)
    if n == 0:
        return np.zeros((1, m), dtype=np.int64)
    out = np.zeros((len(combos), m), dtype=np.int64)
    rows = np.repeat(np.arange(len(combos)), n)
    np.add.at(out, (rows, combos.ravel()), 1)
    return out


def conforming_histograms(domain: InvariantDomain, n: int) -> Iterator[tuple[Key, np.ndarray]]:
    """The conforming spaces D_t at the histogram level: (t, histograms with T = t).

    Over all histograms of n records, grouped by t = C h (exact integers), keeping only
    the t that agree with the values the spec fixes.
    """
    H = histograms(domain.cells, n)
    C = domain.invariant_matrix()
    T = H @ C.T
    keep = np.ones(len(H), dtype=bool)
    fixed = domain.value_filter()
    if fixed is not None:
        rows, values = fixed
        keep &= np.all(T[:, rows] == values, axis=1)
    if any(not lin.attainable for lin in domain.linear):
        keep[:] = False
    H, T = H[keep], T[keep]
    if not len(H):
        return
    keys, inverse = np.unique(T, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(keys) + 1))
    for k in range(len(keys)):
        yield tuple(int(v) for v in keys[k]), H[order[bounds[k]:bounds[k + 1]]]
