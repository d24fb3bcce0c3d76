r"""Person-level sensitivity: one person, with all their rows, added, removed or replaced.

A spec with ``data.privacy_unit: {id, max_rows: k, max_groups: g, max_rows_per_group: c}``
protects a person, not a row. After bounding (:mod:`dpopt.release.bounding`) a person's rows
form a vector :math:`v \in \mathbb{Z}_{\ge 0}^m` over the m cells of the query's histogram with

.. math:: v_j \le c, \qquad |\{j : v_j > 0\}| \le g, \qquad \textstyle\sum_j v_j \le k

(an absent bound is no constraint; g ≤ m always). The query moves by A v (add/remove) or
A(v − v′) (replace: one person's rows by another's, either possibly empty, so the replace
space contains the add/remove one).

Closed forms, derived here (A = I: count, histogram, contingency table). Let
:math:`R(p) = \min(k, c \min(g, p))` be the most rows a person can place in p cells and
:math:`t = \min(c, R)` the most in one cell. The vector that fills t rows in
:math:`\lfloor R/t \rfloor` cells and the remainder in one more majorizes every allowed v
(greedy filling under a per-coordinate cap and a total), so for every symmetric convex
norm it is the maximizer:

.. math:: \ell_1 = R, \qquad \ell_2^2 = \lfloor R/t \rfloor t^2 + (R \bmod t)^2, \qquad \ell_\infty = t .

Replace: :math:`|v_j - v'_j| \le \max(v_j, v'_j)`, so moving each cell to whichever of v, v′ is
larger (and zeroing the other) keeps both allowed and no norm decreases: disjoint supports are
optimal, and the norms are :math:`\max_{0 \le p \le m} N(p) \oplus N(m - p)` (sum for l1 and l2²,
max for l∞), N(p) the add/remove norms on p cells (p ≤ g suffices: N(p) = N(min(p, g))).

Marginal workloads (any c, including c below R: the tables cannot all concentrate at once)
and ``linear`` queries: :mod:`dpopt.sensitivity.person_structure`. The move patterns of tables and marginal
workloads (what a pDP level is summed over): :mod:`dpopt.sensitivity.person_patterns`.

Bounded sum over [a, b] (one cell, R = min(k, c)): add/remove :math:`R \max(|a|, |b|)`;
replace :math:`R(\max(b, 0) - \min(a, 0))` (a person's rows need not keep their number).

Mean over [a, b] (:class:`dpopt.domain.queries.NumericQuery`: the pair (Σ(x − m), n), m = (a + b)/2,
h = (b − a)/2): a person adds :math:`(s, n)` with n ≤ R and |s| ≤ nh, a set whose hull is the triangle
0, (±Rh, R). Add/remove: :math:`\ell_1 = R(h + 1),\ \ell_2^2 = R^2(h^2 + 1),\ \ell_\infty = R\max(h, 1)`.
Replace (differences of the vertices, among them (2Rh, 0)): :math:`\ell_1 = R\max(h + 1, 2h)`,
:math:`\ell_2^2 = R^2 \max(h^2 + 1, 4h^2)`, :math:`\ell_\infty = R\max(1, 2h)`. Released with Gaussian
noise of covariance diag(σ_S², σ_n²) the pair is ρ-zCDP when :math:`R^2 (h^2/σ_S^2 + 1/σ_n^2) \le 2ρ`
(add/remove: the Mahalanobis norm of the vertices), i.e. the budget split between the two; the split that
minimises the first-order variance of the mean in the worst case over its position in [a, b],
:math:`(σ_S^2 + h^2 σ_n^2)/n^2`, is the equal one, which ``utility: {metric: l2, weights: [1, h²]}``
asks of ``gaussian_optimal``.

Every form is checked against brute-force enumeration of small record sets in
``tests/test_person_level.py`` and ``tests/test_person_records.py``.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator
from fractions import Fraction

import numpy as np

from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity.marginal_span import MarginalSpan, workload_column
from dpopt.sensitivity.person_hull import count_contribution_vertices, marginal_hull, vertex_limit
from dpopt.sensitivity.person_patterns import MAX_PARTITION_PAIRS, MAX_SEQUENCES, count_marginal_sequences, \
    count_weight_tuples, marginal_patterns, table_patterns, weight_tuples
from dpopt.sensitivity.person_structure import MAX_PAIRS, MarginalStructure, contribution_vertices, \
    marginal_person_norms
from dpopt.sensitivity.space import SensitivitySpace, exact_norms
from dpopt.sensitivity.subspace import FullSpace, span_of
from dpopt.spec.models import PrivacyUnit, Spec

MAX_LISTED_ENTRIES = 2_000_000
"""Difference vectors are listed (for the families that read them) up to this many numbers in all."""


def describe_unit(spec: Spec) -> str:
    """The person-level adjacency in words, with the bounds rows are truncated to."""
    unit = spec.data.privacy_unit
    verb = "add or remove" if spec.adjacency.kind == "add_remove" else "replace"
    other = "" if spec.adjacency.kind == "add_remove" else " by another person's rows (either possibly none)"
    bounds = [f"≤ {n} {what}" for n, what in ((unit.max_rows, "rows"), (unit.max_groups, "groups (cells)"),
                                              (unit.max_rows_per_group, "rows per group")) if n is not None]
    return (f"{verb} one person (id column {unit.id}) with all their rows{other}, after bounding to "
            + ", ".join(bounds) + " per person")


def most_rows(unit: PrivacyUnit, cells: int) -> tuple[int, int, int]:
    """(R, t, g): the most rows a person keeps on ``cells`` cells, the most in one cell, the most cells."""
    groups = min(unit.max_groups or cells, cells)
    caps = [n for n in (unit.max_rows, None if unit.max_rows_per_group is None else unit.max_rows_per_group * groups)
            if n is not None]
    rows = min(caps)
    per_cell = min(unit.max_rows_per_group or rows, rows)
    return rows, per_cell, groups


def _greedy(rows: int, per_cell: int) -> tuple[Fraction, Fraction, Fraction]:
    """(l1, l2², l∞) of ``rows`` rows filled ``per_cell`` at a time (the majorizing contribution)."""
    if rows == 0:
        return Fraction(0), Fraction(0), Fraction(0)
    full, rest = divmod(rows, per_cell)
    return Fraction(rows), Fraction(full * per_cell**2 + rest**2), Fraction(per_cell)


def _on(unit: PrivacyUnit, p: int) -> tuple[Fraction, Fraction, Fraction]:
    """The add/remove norms N(p) of a person confined to p cells."""
    rows, per_cell, _ = most_rows(unit, p) if p else (0, 1, 0)
    return _greedy(rows, per_cell)


def _splits(unit: PrivacyUnit, cells: int) -> list[tuple[int, tuple[Fraction, Fraction, Fraction]]]:
    """(p, norms of N(p) ⊕ N(m − p)) for the splits p ≤ min(m, g, R) of the cells between two persons: a person
    uses at most min(g, R) cells (each holds a row), so N(p) = N(min(p, g, R)) and, N being nondecreasing, a
    larger p gives no larger sum (this keeps the search short for the stacked groups of a grouped release)."""
    rows, _, groups = most_rows(unit, cells)
    out = []
    for p in range(min(cells, groups, rows) + 1):
        a, b = _on(unit, p), _on(unit, cells - p)
        out.append((p, (a[0] + b[0], a[1] + b[1], max(a[2], b[2]))))
    return out


def table_norms(unit: PrivacyUnit, cells: int, replace: bool) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (l1, l2², l∞) of a person's contribution to an m-cell histogram (A = I), see the module."""
    if not replace:
        return _on(unit, cells)
    splits = [norms for _, norms in _splits(unit, cells)]
    return tuple(max(norms[i] for norms in splits) for i in range(3))


def contributions(unit: PrivacyUnit, cells: int, limit: int) -> Iterator[tuple[int, ...]]:
    """Every allowed contribution v on ``cells`` cells, by support size (v = 0 first), each support's cells and
    then its values in lexicographic order.

    Raises
    ------
    ValueError
        More than ``limit`` of them.
    """
    rows, per_cell, groups = most_rows(unit, cells)
    count = 0
    for support in range(min(groups, rows) + 1):  # each cell used holds a row at least
        for where in itertools.combinations(range(cells), support):
            for values in weight_tuples(support, per_cell, rows):
                count += 1
                if count > limit:
                    raise ValueError("too many contributions to list")
                v = [0] * cells
                for j, x in zip(where, values):
                    v[j] = x
                yield tuple(v)


def count_contributions(unit: PrivacyUnit, cells: int) -> int:
    r"""How many contributions :func:`contributions` lists, without listing them:
    :math:`\sum_{s} \binom{m}{s} N_s`, N_s the tuples in {1, …, t}^s summing to at most R
    (:func:`~dpopt.sensitivity.person_patterns.count_weight_tuples`)."""
    rows, per_cell, groups = most_rows(unit, cells)
    most = min(groups, rows)
    return sum(math.comb(cells, support) * n for support, n in enumerate(count_weight_tuples(per_cell, rows, most)))


def derive_person(spec: Spec, query: CountingQuery | NumericQuery) -> SensitivitySpace:
    """The person-level sensitivity space of the spec's compiled query (see the module).

    Raises
    ------
    UnsupportedSpecError
        A query kind or bound combination not derived (see :mod:`dpopt.sensitivity.person_structure`).
    """
    replace = spec.adjacency.kind != "add_remove"
    adjacency = describe_unit(spec)
    unit = spec.data.privacy_unit
    if isinstance(query, NumericQuery):
        return _sum(spec, query, unit, replace, adjacency)
    if query.kind == "marginals":
        return _marginals(query, unit, replace, adjacency)
    if query.kind == "linear":
        return _linear(query, unit, replace, adjacency)
    if query.kind not in ("count", "histogram", "contingency_table"):
        raise UnsupportedSpecError("query.kind", f"a {query.kind} query with a privacy_unit is not derived yet")
    m = query.cells
    l1, l2sq, linf = table_norms(unit, m, replace)
    rows, per_cell, groups = most_rows(unit, m)
    how = (f"person-level: a person keeps ≤ {rows} rows, ≤ {per_cell} per cell, in ≤ {groups} cells; "
           "greedy filling majorizes every allowed contribution"
           + ("; replace: disjoint supports" if replace else "")
           + "; move patterns: the allowed partitions"
           + (f" and unions of two (up to {MAX_PARTITION_PAIRS:,} pairs)" if replace else ""))

    @functools.cache  # listed once per space: several families read them
    def listed() -> np.ndarray:
        limit = MAX_LISTED_ENTRIES // max(m, 1)
        vs = np.array(list(contributions(unit, m, limit)), dtype=float)[1:]  # the first is v = 0
        if not replace:
            return np.vstack([vs, -vs])
        if len(vs) ** 2 > limit:
            raise ValueError("too many difference vectors to list")
        both = np.vstack([np.zeros((1, m)), vs])
        pairs = (both[:, None, :] - both[None, :, :]).reshape(-1, m)
        return np.unique(pairs[np.any(pairs != 0, axis=1)], axis=0)

    return SensitivitySpace(m, FullSpace(m), l1, l2sq, linf, how, adjacency, complete=True, _vectors=listed,
                            _extremes=lambda: _table_extremes(unit, m, replace),
                            _patterns=lambda: table_patterns(rows, per_cell, groups, m, replace))


def _table_extremes(unit: PrivacyUnit, m: int, replace: bool) -> np.ndarray:
    """Contributions attaining the norms: the greedy filling (replace: against the best disjoint other)."""

    def fill(p: int, start: int) -> np.ndarray:
        out = np.zeros(m)
        if p:
            rows, per_cell, _ = most_rows(unit, p)
            full, rest = divmod(rows, per_cell)
            out[start:start + full] = per_cell
            if rest:
                out[start + full] = rest
        return out

    if not replace:
        return fill(m, 0)[None, :]
    splits = _splits(unit, m)
    best = {max(splits, key=lambda split: split[1][i])[0] for i in range(3)}  # the split attaining each norm
    return np.array([fill(p, 0) - fill(m - p, p) for p in sorted(best)])


def _marginals(query: CountingQuery, unit: PrivacyUnit, replace: bool, adjacency: str) -> SensitivitySpace:
    """A person's moves on a marginal workload: the norms from the tables' structure
    (:mod:`dpopt.sensitivity.person_structure`), the move patterns by the row sequences of
    :func:`~dpopt.sensitivity.person_patterns.marginal_patterns` and the generators of Hull(S) by the images of the
    contribution polytope's vertices (:func:`~dpopt.sensitivity.person_hull.marginal_hull`), each when it fits its
    budget, counted first (no move listed)."""
    workload = query.workload
    rows, per_cell, groups = most_rows(unit, query.cells)
    structure = MarginalStructure(workload.algebra.sizes, workload.blocks)
    l1, l2sq, linf, fillings = marginal_person_norms(structure, rows, per_cell, replace)

    def extremes() -> np.ndarray:
        def answer(filling: list) -> np.ndarray:
            return sum((weight * workload_column(workload, cell) for cell, weight in filling),
                       np.zeros(workload.dimension))
        return np.array([answer(v) - answer(w) for v, w in fillings])

    span = FullSpace(query.dimension) if workload.rank() == query.dimension else MarginalSpan(workload)
    how = (f"person-level: ≤ {rows} rows, ≤ {per_cell} per cell, on cells differing in one attribute of the "
           f"fewest ({structure.loss}) tables; each of {len(structure.blocks)} table(s) sums to the rows"
           + ("; replace: the other person in disjoint cells of every table" if replace else ""))
    sizes = tuple(workload.algebra.sizes)
    sequences = count_marginal_sequences(sizes, rows, per_cell, groups, replace)
    patterns = None
    if sequences <= MAX_SEQUENCES:
        how += f"; move patterns from {sequences:,} cell sequences and weights up to relabelling the levels"
        patterns = functools.partial(marginal_patterns, sizes, tuple(workload.blocks), rows, per_cell, groups, replace)
    else:
        how += f"; move patterns not derived: {sequences:,} cell sequences and weights, above {MAX_SEQUENCES:,}"
    limit = vertex_limit(query.dimension, replace, MAX_LISTED_ENTRIES)
    vertices = count_contribution_vertices(query.cells, rows, per_cell, groups, limit)
    hull = None
    if vertices <= limit:
        how += (f"; hull generators: the images of the {vertices:,} vertices of the contribution polytope"
                + (" (differences of pairs)" if replace else ""))
        hull = functools.cache(functools.partial(marginal_hull, workload, rows, per_cell, groups, replace))
    else:
        how += (f"; hull generators not stated: more than {limit:,} contribution vertices (" + ("pairs of them " if
                replace else "") + f"× {query.dimension} answers above {MAX_LISTED_ENTRIES:,} numbers)")
    return SensitivitySpace(query.dimension, span, l1, l2sq, linf, how, adjacency, complete=False, _vectors=None,
                            _extremes=extremes, listable=False, _hull=hull, _patterns=patterns)


def _linear(query: CountingQuery, unit: PrivacyUnit, replace: bool, adjacency: str) -> SensitivitySpace:
    """A person's moves A v of a ``linear`` query: the norms and span from the images of the contribution polytope's
    vertices (every allowed v lies in their hull); every move listed (complete) when :func:`_listing` fits."""
    rows, per_cell, groups = most_rows(unit, query.cells)
    vertices = contribution_vertices(query.cells, rows, per_cell, groups)
    images = vertices @ query.user_matrix.T
    if replace:
        if len(images) ** 2 > MAX_PAIRS:
            raise UnsupportedSpecError("query.matrix", f"a linear query with a privacy_unit under replace has "
                                                       f"{len(images)}² vertex pairs to compare")
        vectors = (images[:, None, :] - images[None, :, :]).reshape(-1, images.shape[1])
    else:
        vectors = np.vstack([images, -images])
    vectors = np.unique(vectors[np.any(vectors != 0, axis=1)], axis=0)
    l1, l2sq, linf = exact_norms(vectors)
    how = (f"person-level: A v over the {len(vertices)} vertices v of a person's allowed rows per level "
           f"(≤ {rows} rows, ≤ {per_cell} per level, ≤ {groups} levels)" + ("; replace: pairs" if replace else ""))
    listing = _listing(query.user_matrix, unit, replace)
    if listing is None:
        return SensitivitySpace(query.dimension, span_of(vectors.T), l1, l2sq, linf, how, adjacency, complete=False,
                                _vectors=lambda: vectors)
    how += (f"; every move listed (the images of all {count_contributions(unit, query.cells)} allowed "
            "contributions" + (", differences of every pair)" if replace else ")"))
    return SensitivitySpace(query.dimension, span_of(vectors.T), l1, l2sq, linf, how, adjacency, complete=True,
                            _vectors=listing, _hull=lambda: vectors)


def _listing(matrix: np.ndarray, unit: PrivacyUnit, replace: bool) -> Callable[[], np.ndarray] | None:
    r"""Every move of a person under the workload ``matrix`` A (d × m), computed once when first read: ±A v over
    every allowed contribution v (add/remove), or A v − A v′ over every pair of distinct images (replace), each
    once. None when that does not fit :data:`MAX_LISTED_ENTRIES` numbers, counted before listing
    (:func:`count_contributions`: the n contributions' m entries and images' d, and under replace the n² pairs'
    d entries before deduplication).

    The pDP level and per-coordinate losses are summed over a move's coordinates, not convex in the move, so the
    hull's vertices (enough for a norm) do not certify them: every move is needed.
    """
    dimension, cells = matrix.shape
    count = count_contributions(unit, cells)
    if count * max(cells, dimension, 1) > MAX_LISTED_ENTRIES or \
            (replace and count * count * max(dimension, 1) > MAX_LISTED_ENTRIES):
        return None

    @functools.cache  # listed once per space: several families read them
    def listed() -> np.ndarray:
        contributions_ = np.array(list(contributions(unit, cells, count)), dtype=float)
        images = np.unique(contributions_ @ matrix.T, axis=0)  # v = 0 gives the zero image
        if replace:
            moves = (images[:, None, :] - images[None, :, :]).reshape(-1, dimension)
        else:
            moves = np.vstack([images, -images])
        return np.unique(moves[np.any(moves != 0, axis=1)], axis=0)

    return listed


def _sum(spec: Spec, query: NumericQuery, unit: PrivacyUnit, replace: bool, adjacency: str) -> SensitivitySpace:
    if query.pair:
        return _mean_pair(query, unit, replace, adjacency)
    rows, _, _ = most_rows(unit, 1)
    low, high = Fraction(query.lower), Fraction(query.upper)
    per_row = (max(high, 0) - min(low, 0)) if replace else max(abs(low), abs(high))
    bound = rows * per_row
    value = float(bound)
    how = f"person-level: ≤ {rows} rows × " + ("(max(b, 0) − min(a, 0))" if replace else "sup |x| over [a, b]")
    return SensitivitySpace(1, FullSpace(1), bound, bound * bound, bound, how, adjacency, complete=False,
                            _vectors=lambda: np.array([[value], [-value]]))


def _mean_pair(query: NumericQuery, unit: PrivacyUnit, replace: bool, adjacency: str) -> SensitivitySpace:
    """The mean's (centred sum, count): see the module; the hull's vertices are listed (complete=False)."""
    rows, _, _ = most_rows(unit, 1)
    half = query.width / 2
    corners = [(rows * half, Fraction(rows)), (-rows * half, Fraction(rows))]  # P's vertices besides 0
    if replace:
        vertices = [(a - c, b - d) for a, b in [(Fraction(0), Fraction(0)), *corners]
                    for c, d in [(Fraction(0), Fraction(0)), *corners] if (a, b) != (c, d)]
    else:
        vertices = corners + [(-a, -b) for a, b in corners]
    l1 = max(abs(a) + abs(b) for a, b in vertices)
    l2sq = max(a * a + b * b for a, b in vertices)
    linf = max(max(abs(a), abs(b)) for a, b in vertices)
    listed = np.array([[float(a), float(b)] for a, b in vertices])
    how = (f"person-level mean as (Σ(x − m), n), m the midpoint: ≤ {rows} rows, each moving the centred sum by "
           f"≤ (b − a)/2 = {half}" + ("; replace: differences of the hull's vertices" if replace else ""))
    return SensitivitySpace(2, FullSpace(2), l1, l2sq, linf, how, adjacency, complete=False,
                            _vectors=lambda: listed)


def grouped_norms(spec: Spec, query: CountingQuery | NumericQuery, groups: int,
                  per_row: Fraction | None = None) -> tuple[Fraction, Fraction, Fraction, str] | None:
    r"""Exact (l1, l2², l∞) of one person's contribution to a release grouped by one column: the per-group
    answers of ``groups`` groups stacked into one vector, and how it is derived; None where not derived.

    Bounding (:func:`dpopt.release.bounding.bound_contributions` with the grouping column) counts a
    person's cells *with their group key*: ≤ c rows in each (group, cell), ≤ g such pairs, ≤ k rows in all.
    The stacked vector of a count, histogram or table over m cells is therefore the histogram over the
    G·m (group, cell) pairs under the same bounds, and its norms are :func:`table_norms` on G·m cells.
    A sum over [a, b] has one cell per group: group j's sum moves by at most :math:`v_j \max(|a|, |b|)`
    (add/remove; v the person's rows per group), attained with every value at the endpoint of larger
    magnitude, so the norms are max(|a|, |b|) times those of the G-cell histogram. Under replace with
    0 ≤ a (or b ≤ 0) a group's sum moves by :math:`v_j x - v'_j x'` with x, x′ in [a, b], at most
    :math:`\max(v_j, v'_j) \max(|a|, |b|)` in magnitude, attained by disjoint supports and the endpoint of
    larger magnitude: the histogram's replace norms, scaled. Not derived here (None): a replace sum whose
    interval contains values of both signs (a person's and the other's rows may then add up in one group),
    means, marginals and linear queries.

    ``per_row`` (a sum only) replaces max(|a|, |b|) by another bound on one row's move of its group's answer with
    the same sign structure: the lattice unit u of a sum measured on a lattice
    (:attr:`dpopt.mechanisms.real_lattice.RealLattice.row_shift`), whose stacked sums of integers N_j move by at
    most v_j·u.
    """
    unit, replace = spec.data.privacy_unit, spec.adjacency.kind != "add_remove"
    if groups < 1:
        return None
    if isinstance(query, NumericQuery):
        low, high = Fraction(query.lower), Fraction(query.upper)
        if query.pair or (replace and low < 0 < high):
            return None
        scale = max(abs(low), abs(high)) if per_row is None else Fraction(per_row)
        l1, l2sq, linf = table_norms(unit, groups, replace)
        what = f"max(|a|, |b|) = {scale}" if per_row is None else f"{scale} lattice units per row"
        return (scale * l1, scale * scale * l2sq, scale * linf,
                f"stacked per-group sums: {what} × the person-level norms of a {groups}-cell histogram")
    if query.kind not in ("count", "histogram", "contingency_table"):
        return None
    l1, l2sq, linf = table_norms(unit, groups * query.cells, replace)
    return (l1, l2sq, linf, f"stacked per-group tables: the person-level norms of a histogram over "
                            f"{groups} × {query.cells} (group, cell) pairs")
