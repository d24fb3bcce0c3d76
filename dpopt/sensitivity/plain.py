r"""Structural derivation of the sensitivity space of a spec without invariants (closed forms).

Counting queries φ(X) = A h(X) (A is d × m, h the histogram over m cells):

* add/remove one record: S = {±A e_j}; the span is range(A).
* replace one record: S = {A(e_i − e_j) : i ≠ j}; the span is A·{sum-zero vectors}.
  For a histogram or contingency table (A = I): ‖·‖₁ = 2, ‖·‖₂² = 2, ‖·‖∞ = 1 and the
  span is the sum-zero subspace (rank m − 1). For g marginal tables: each record adds
  one to one cell of each table, so two records that differ in every attribute move
  every table with at least two cells: ‖·‖₁ = 2g′, ‖·‖₂² = 2g′, ‖·‖∞ = 1.
* The span of a marginal workload (every counting query but ``linear``) is built from its
  ANOVA components (:class:`dpopt.sensitivity.marginal_span.MarginalSpan`): range(W)
  under add/remove, range(W) without the grand total under replace-one; the difference
  vectors are listed only when there are few (nothing of the domain's size otherwise).
* A ``kronecker`` query (a union of Kronecker products): from its factors
  (:mod:`dpopt.sensitivity.kronecker_space`).
* Hamming distance k (same n): sums of k replacements; its hull is k·hull(S_replace)
  (min(k, n) when n is public), so all norms scale by that factor and the span is unchanged.

Bounded sum over [a, b]: add/remove gives sup|x| = max(|a|, |b|), replace gives b − a.
Bounded mean with public n: replace gives (b − a)/n.

With ``data.privacy_unit`` the unit is a person with all their rows: :mod:`dpopt.sensitivity.person`.

Every closed form is checked against brute-force enumeration on small domains
(:mod:`dpopt.sensitivity.enumerate`, ``tests/test_sensitivity.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.core.rows import unique_rows
from dpopt.domain.queries import CountingQuery, KroneckerQuery, NumericQuery
from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity.kronecker_space import derive_kronecker
from dpopt.sensitivity.marginal_span import MarginalSpan, workload_column
from dpopt.sensitivity.person import derive_person, describe_unit
from dpopt.sensitivity.space import SensitivitySpace, exact_norms
from dpopt.sensitivity.subspace import FullSpace, Subspace, SumZeroSpace, span_of
from dpopt.spec.models import Spec

_MAX_LISTED_ENTRIES = 20_000_000


def describe_adjacency(spec: Spec) -> str:
    if spec.data.privacy_unit is not None:
        return describe_unit(spec)
    adj = spec.adjacency
    if adj.kind == "add_remove":
        return "add or remove one record"
    if adj.kind == "replace_one":
        return "replace one record (n fixed)"
    return f"replace up to {adj.distance} records (n fixed)"


def hamming_factor(spec: Spec) -> int:
    """How many replacements neighbours may differ by: k, capped at a public n."""
    if spec.adjacency.kind != "hamming":
        return 1
    k = spec.adjacency.distance
    return min(k, spec.data.n) if spec.data.n is not None else k


def derive_plain(spec: Spec, query: CountingQuery | NumericQuery) -> SensitivitySpace:
    """Derive the sensitivity space of the spec's compiled query under its adjacency, ignoring invariants.

    Raises
    ------
    UnsupportedSpecError
        A mean under add/remove; a query that does not change between neighbours.
    """
    if spec.data.privacy_unit is not None:
        return derive_person(spec, query)
    if isinstance(query, NumericQuery):
        space = _numeric(spec, query)
    elif isinstance(query, KroneckerQuery):
        space = derive_kronecker(spec, query, describe_adjacency(spec), hamming_factor(spec))
    else:
        space = _counting(spec, query)
    if space.l2_squared == 0:
        raise UnsupportedSpecError(
            "query",
            "the query takes the same value on all neighbouring datasets (sensitivity 0); "
            "it can be published exactly and needs no mechanism",
        )
    return space


def _numeric(spec: Spec, query: NumericQuery) -> SensitivitySpace:
    factor = hamming_factor(spec)
    if spec.adjacency.kind == "add_remove":
        if query.kind == "mean":
            raise UnsupportedSpecError(
                "adjacency",
                "a mean under add_remove has no bounded sensitivity with a fixed public n; "
                "use replace_one, or release a sum and a count",
            )
        bound = max(abs(Fraction(query.lower)), abs(Fraction(query.upper)))
        how = "sup |x| over [min, max]"
    else:
        bound = query.width * factor
        how = "(max − min)" + (f" × {factor}" if factor > 1 else "")
        if query.kind == "mean":
            bound /= query.n
            how += " / n"
    value = float(bound)
    return SensitivitySpace(
        dimension=1,
        span=FullSpace(1),
        l1=bound,
        l2_squared=bound * bound,
        linf=bound,
        method=f"structural: bounded {query.kind}, sensitivity = {how}",
        adjacency=describe_adjacency(spec),
        complete=False,
        _vectors=lambda: np.array([[value], [-value]]),
    )


def _counting(spec: Spec, query: CountingQuery) -> SensitivitySpace:
    if query.workload is None:
        return _linear(spec, query)
    workload = query.workload
    d, m = query.dimension, query.cells
    if spec.adjacency.kind == "add_remove":
        g = len(query.groups)
        listed = m * d <= _MAX_LISTED_ENTRIES

        @functools.cache  # listed once per space: several families read them
        def columns() -> np.ndarray:
            if not listed:
                raise ValueError(f"too many difference vectors to list ({m} cells)")
            return _signed_columns(query.dense())

        span = FullSpace(d) if workload.rank() == d else MarginalSpan(workload)
        how = f"±A e_j; each record adds 1 to one cell of each of {g} table(s)"
        corner = (0,) * len(workload.algebra.sizes)
        return SensitivitySpace(d, span, Fraction(g), Fraction(g), Fraction(1), f"structural: {how}",
                                describe_adjacency(spec), complete=True, _vectors=columns, listable=listed,
                                _extremes=lambda: workload_column(workload, corner))
    moving = sum(1 for group in query.groups if _cells(query, group) >= 2)
    if query.kind in ("histogram", "contingency_table"):
        span = SumZeroSpace(d)
        how = "e_i − e_j over distinct cells"
    else:
        span = MarginalSpan(workload, without=((),))
        how = f"A(e_i − e_j); records differing in every attribute move all {moving} table(s)"
    l1, l2sq, linf = Fraction(2 * moving), Fraction(2 * moving), Fraction(min(moving, 1))
    sizes = workload.algebra.sizes
    # a record replaced by one that differs in every attribute moves every table with two cells or more
    far = hamming_factor(spec) * (workload_column(workload, (0,) * len(sizes))
                                  - workload_column(workload, tuple(n - 1 for n in sizes)))
    return _replaced(spec, query, span, (l1, l2sq, linf), how, lambda: far)


def _linear(spec: Spec, query: CountingQuery) -> SensitivitySpace:
    """A ``linear`` query: norms over the columns (pairs of columns) of the user's small matrix."""
    d = query.dimension
    dense = query.dense()
    if spec.adjacency.kind == "add_remove":
        l1, l2sq, linf = exact_norms(query.user_matrix.T)
        how = "±A e_j; norms are maxima over the columns of A"
        return SensitivitySpace(d, span_of(dense), l1, l2sq, linf, f"structural: {how}", describe_adjacency(spec),
                                complete=True, _vectors=lambda: _signed_columns(query.dense()))
    norms = exact_norms(_pair_differences(query.user_matrix))  # memory-guarded, so before the SVD
    span = span_of(dense, differences=True)
    return _replaced(spec, query, span, norms, "A(e_i − e_j); norms are maxima over pairs of columns of A", None)


def _replaced(spec: Spec, query: CountingQuery, span: Subspace, norms: tuple[Fraction, Fraction, Fraction],
              how: str, extremes: Callable[[], np.ndarray] | None) -> SensitivitySpace:
    """The replace-one (Hamming: scaled by k) space of a counting query with these one-replacement norms."""
    d, m = query.dimension, query.cells
    factor = hamming_factor(spec)
    l1, l2sq, linf = norms
    if factor > 1:
        l1, l2sq, linf = l1 * factor, l2sq * factor * factor, linf * factor
        how += f"; hull scaled by {factor} replacements"
    listed = m * (m - 1) * d <= _MAX_LISTED_ENTRIES

    @functools.cache  # listed once per space: several families read them
    def pairs() -> np.ndarray:
        if not listed:
            raise ValueError("too many difference vectors to list")
        return factor * np.unique(_pair_differences(query.dense()), axis=0)

    return SensitivitySpace(
        d, span, l1, l2sq, linf, f"structural: {how}", describe_adjacency(spec), complete=factor == 1,
        _vectors=pairs, _extremes=extremes, listable=listed,
    )


def _cells(query: CountingQuery, group: tuple[str, ...]) -> int:
    return int(np.prod([len(query.levels[query.attributes.index(a)]) for a in group]))


def _signed_columns(A: np.ndarray) -> np.ndarray:
    cols = A.T
    return unique_rows(np.vstack([cols, -cols]))


def _pair_differences(A: np.ndarray) -> np.ndarray:
    """Rows A e_i − A e_j for all i ≠ j (A is d × m).

    Raises
    ------
    MemoryLimitError
        When the m(m − 1) rows (and their row indices) exceed the memory limit.
    """
    d, m = A.shape
    require_memory(dense_bytes(m, m - 1, d + 2), f"the {m * (m - 1)} differences of pairs of columns of the "
                                                 f"{d} x {m} matrix of the linear query")
    cols = A.T
    i, j = np.nonzero(~np.eye(cols.shape[0], dtype=bool))
    return cols[i] - cols[j]
