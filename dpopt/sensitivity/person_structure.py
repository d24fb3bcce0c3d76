r"""Person-level norms of marginal workloads and ``linear`` queries (companion of :mod:`dpopt.sensitivity.person`).

A person keeps R rows at most, at most t in one cell of the histogram over the query's
attributes, in q = ⌈R/t⌉ cells at most (R, t from :func:`dpopt.sensitivity.person.most_rows`);
v ∈ ℤ_{≥0}^m counts their rows per cell.

**Marginal workloads** (T tables; table :math:`\mathcal T` answers :math:`M_{\mathcal T} v`). Let
:math:`\tau(a)` be the number of tables holding attribute a, L = min τ(a) over the attributes with
two levels or more, T₁ the tables with one cell (the count, or single-level attributes only) and
:math:`T_\mathrm{mov} = T - T_1`. Then

.. math::
    \sum_{\mathcal T} \|M_{\mathcal T} v\|_2^2 = \sum_{j, j'} v_j v_{j'} \kappa(j, j'),

κ(j, j') the number of tables on whose attributes cells j and j′ agree: κ(j, j) = T, and two
distinct cells differ on some attribute a, so κ ≤ T − L. With s = Σ v and
:math:`G(s) = \lfloor s/t \rfloor t^2 + (s \bmod t)^2` (the largest ‖v‖², greedy filling),

.. math::
    \sum_{\mathcal T} \|M_{\mathcal T} v\|_2^2 \le T s^2 - L (s^2 - \|v\|^2)
    \le B(s) + T_1 s^2, \qquad B(s) = (T_\mathrm{mov} - L) s^2 + L\, G(s),

attained (so exact) by the greedy v on ⌈s/t⌉ cells that differ in one attribute a with
τ(a) = L and at least ⌈s/t⌉ levels: every pair of them loses exactly L tables. So under
add/remove :math:`\ell_2^2 = B(R) + T_1 R^2`; :math:`\ell_1 = T R` (each table sums to s);
:math:`\ell_\infty = \max_{\mathcal T} \min(R, t\, m / m_{\mathcal T})` (a marginal cell gathers
the m/m_𝒯 cells that agree on its attributes, t rows in each at most). With t ≥ R (q = 1) these
are the one-cell forms TR, TR², R. When no such attribute has enough levels the bound may not be
attained; under add/remove the maximum is then found by exhaustive search over the placements of the
greedy filling's cells (:meth:`MarginalStructure.searched`: Σ‖M v‖² is convex and, its kernel κ being
non-negative, increasing in v, so the greedy weights on some ⌈R/t⌉ distinct cells attain it).

**Replace** (v by v′): for x, y ≥ 0, ‖x − y‖² ≤ ‖x‖² + ‖y‖² (equality iff disjoint supports), and a
one-cell table moves by s − s′, so :math:`\ell_2^2 \le \max_{0 \le s, s' \le R} B(s) + B(s') + T_1 (s - s')^2`
(a search over (R+1)² integer pairs: G is not convex), attained when a v′ attaining B(s′) can be
placed so that every table with two cells or more sees v and v′ in disjoint cells; likewise
:math:`\ell_1 = R \max(T, 2 T_\mathrm{mov})` and ℓ∞ is the add/remove one (v′ = 0). The
placement is constructed and checked table by table (:func:`_separated`); where none is found
the spec is refused in one line rather than certified on a bound that may not be attained.

**Linear queries** (A the user's r × m matrix): the allowed v are the integer points of a union
of polytopes :math:`P_S = \{0 \le v \le t \text{ on } S,\ 0 \text{ off } S,\ \sum v \le R\}` over the
supports |S| ≤ g, whose vertices are the v with every coordinate 0 or t except at most one, the
remainder R − t·#full (box and one integral budget constraint). ‖Av‖ (‖A(v − v′)‖) is convex, so
its maximum over the set is attained at such vertices (pairs of vertices): they are listed and the
norms evaluated exactly (:func:`dpopt.sensitivity.space.exact_norms`). The proof that they generate the hull of every
allowed v, and their count: :mod:`dpopt.sensitivity.person_hull`.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity.person_hull import contribution_supports, count_contribution_vertices

MAX_VERTICES = 5_000
"""A linear query's contribution vertices are listed up to this many."""

MAX_PLACEMENTS = 200_000
"""Placements of a person's cells searched for a marginal workload's l2 when no closed form is attained."""

MAX_PAIRS = 1_000_000
"""Under replace, differences of up to this many pairs of vertices are formed."""


def greedy_l2sq(rows: int, per_cell: int) -> int:
    """G(s): the largest ‖v‖² of ``rows`` rows, at most ``per_cell`` in a cell (full cells, then the rest)."""
    full, rest = divmod(rows, per_cell)
    return full * per_cell**2 + rest**2


def greedy_weights(rows: int, per_cell: int) -> list[int]:
    """The rows per cell of the greedy filling: ``per_cell`` in each full cell, then the remainder."""
    full, rest = divmod(rows, per_cell)
    return [per_cell] * full + ([rest] if rest else [])


class MarginalStructure:
    """The tables of a marginal workload over attributes of ``sizes`` levels, as the derivation reads them.

    Parameters
    ----------
    sizes : tuple of int
        Levels of each attribute of the histogram.
    blocks : tuple of tuple of int
        Each table's attributes (indices into ``sizes``).
    """

    def __init__(self, sizes: tuple[int, ...], blocks: tuple[tuple[int, ...], ...]):
        self.sizes, self.blocks = sizes, blocks
        self.cells = math.prod(sizes)
        self.moving = [b for b in blocks if math.prod(sizes[a] for a in b) >= 2]
        self.single = len(blocks) - len(self.moving)
        tau = {a: sum(a in b for b in blocks) for a in range(len(sizes)) if sizes[a] >= 2}
        self.loss = min(tau.values(), default=0)
        self.cheapest = [a for a, n in tau.items() if n == self.loss]

    def moving_bound(self, rows: int, per_cell: int) -> int:
        """B(s) of the module: the most Σ‖M v‖² over the tables with two cells or more, s = ``rows``."""
        return (len(self.moving) - self.loss) * rows**2 + self.loss * greedy_l2sq(rows, per_cell)

    def largest_cell(self, rows: int, per_cell: int) -> int:
        """ℓ∞: the most rows one marginal cell can gather."""
        return max(min(rows, per_cell * (self.cells // math.prod(self.sizes[a] for a in b))) for b in self.blocks)

    def spread(self, rows: int, per_cell: int, attribute: int, levels: list[int], base: list[int]) -> list:
        """The greedy filling of ``rows`` rows on cells equal to ``base`` but on ``attribute`` (these levels)."""
        cells = []
        for level, weight in zip(levels, greedy_weights(rows, per_cell)):
            cell = list(base)
            cell[attribute] = level
            cells.append((tuple(cell), weight))
        return cells

    def concentrated(self, rows: int, per_cell: int) -> list:
        """The greedy filling of ``rows`` rows, one cell of the largest-fiber table first (attains ℓ∞)."""
        block = min(self.blocks, key=lambda b: math.prod(self.sizes[a] for a in b))
        free = [a for a in range(len(self.sizes)) if a not in block]
        others = itertools.product(*(range(self.sizes[a]) for a in free))
        cells = []
        for weight, levels in zip(greedy_weights(rows, per_cell), others):
            cell = [0] * len(self.sizes)
            for a, level in zip(free, levels):
                cell[a] = level
            cells.append((tuple(cell), weight))
        return cells

    def best_add(self, rows: int, per_cell: int) -> list | None:
        """A filling attaining B(s) (cells differing in one cheapest attribute), None when none has enough levels."""
        q = -(-rows // per_cell)
        if q <= 1:
            return [((0,) * len(self.sizes), rows)] if rows else []
        for a in self.cheapest:
            if self.sizes[a] >= q:
                return self.spread(rows, per_cell, a, list(range(q)), [0] * len(self.sizes))
        return None

    def searched(self, rows: int, per_cell: int) -> tuple[int, list] | None:
        """The largest Σ‖M v‖² over every placement of the greedy filling's ⌈R/t⌉ cells, with a filling attaining
        it, by exhaustive search up to relabelling the levels of each attribute (each attribute's levels over
        the cells as a restricted growth string); None beyond :data:`MAX_PLACEMENTS` placements."""
        weights = np.array(greedy_weights(rows, per_cell), dtype=float)
        q = len(weights)
        if math.prod(count_growth_strings(q, n) for n in self.sizes) > MAX_PLACEMENTS:
            return None  # counted before any is listed: with q = 50 cells they would not fit in memory
        patterns = [growth_strings(q, n) for n in self.sizes]
        best, where = -1.0, None
        for choice in itertools.product(*patterns):
            cells = list(zip(*choice))
            if len(set(cells)) < q:  # two cells equal on every attribute are one cell
                continue
            agree = [np.equal.outer(levels, levels) for levels in choice]
            value = sum(weights @ np.logical_and.reduce([agree[a] for a in block] or [np.ones((q, q), bool)])
                        @ weights for block in self.blocks)
            if value > best:
                best, where = value, cells
        return int(round(best)), [(cell, int(w)) for cell, w in zip(where, weights)]

    def _separated(self, v: list, w: list) -> bool:
        """Every table with two cells or more sees v and w in disjoint cells."""
        for block in self.moving:
            seen = {tuple(cell[a] for a in block) for cell, _ in v}
            if any(tuple(cell[a] for a in block) in seen for cell, _ in w):
                return False
        return True

    def best_pair(self, rows: int, other: int, per_cell: int) -> tuple[list, list] | None:
        """Fillings v (sum ``rows``) and v′ (sum ``other``) attaining B each, in disjoint cells of every moving
        table; None when this construction finds none (v on the low levels, v′ on the top ones)."""
        v = self.best_add(rows, per_cell)
        if v is None:
            return None
        if other == 0 or not v:
            return (v, []) if other == 0 else None
        q = -(-other // per_cell)
        top = [n - 1 for n in self.sizes]
        attributes = self.cheapest if q > 1 else [0]
        for b in attributes:
            if self.sizes[b] < q:
                continue
            for levels in (list(range(self.sizes[b] - q, self.sizes[b])), list(range(q))):
                w = self.spread(other, per_cell, b, levels, top)
                if self._separated(v, w):
                    return v, w
        return None


def marginal_person_norms(structure: MarginalStructure, rows: int, per_cell: int, replace: bool):
    """Exact (l1, l2², l∞) and the fillings attaining them (lists of (cell, rows) pairs, v − v′ as a pair).

    Raises
    ------
    UnsupportedSpecError
        No cheapest attribute has ⌈R/t⌉ levels and (add/remove) the placements are too many to search, or
        (replace) no separated placement is found: the bound of the module may then not be attained.
    """
    s_max, T, T1 = rows, len(structure.blocks), structure.single
    linf = structure.largest_cell(rows, per_cell)
    field = "data.privacy_unit.max_rows_per_group"
    best = structure.best_add(s_max, per_cell)
    searched = structure.searched(rows, per_cell) if best is None and not replace else None
    if best is None and searched is None:
        raise UnsupportedSpecError(field, (
            f"marginals with ≤ {per_cell} rows per cell and ≤ {rows} in all: no attribute in the fewest tables has "
            f"{-(-rows // per_cell)} levels to spread a person's cells over (and the placements are too many to "
            "search, or the adjacency is replace), so the exact person-level l2 is not derived; raise "
            "max_rows_per_group or release each table as a contingency_table"))
    l2sq = structure.moving_bound(rows, per_cell) + T1 * rows**2 if searched is None else searched[0]
    extremes = [(best if searched is None else searched[1], []),
                (structure.concentrated(min(rows, linf), per_cell), [])]
    if not replace:
        return Fraction(T * rows), Fraction(l2sq), Fraction(linf), extremes
    bound = {(s, o): structure.moving_bound(s, per_cell) + structure.moving_bound(o, per_cell) + T1 * (s - o) ** 2
             for s in range(s_max + 1) for o in range(s + 1)}  # symmetric in (s, s′)
    top = max(bound.values())
    pair = next((p for p in (structure.best_pair(s, o, per_cell) for (s, o), b in bound.items() if b == top)
                 if p is not None), None)
    l1_pair = (best, []) if T >= 2 * len(structure.moving) else structure.best_pair(rows, rows, per_cell)
    if pair is None or l1_pair is None:
        raise UnsupportedSpecError(field, (
            f"marginals under replace with ≤ {per_cell} rows per cell and ≤ {rows} in all: two persons' cells cannot be "
            "placed apart in every table here, so the exact replace l2 is not derived; use add_remove, or raise "
            "max_rows_per_group"))
    l1 = rows * max(T, 2 * len(structure.moving))
    return Fraction(l1), Fraction(top), Fraction(linf), [pair, l1_pair, *extremes[1:]]


def contribution_vertices(cells: int, rows: int, per_cell: int, groups: int) -> np.ndarray:
    """The vertices of the module's polytopes P_S (with 0), dense: ``per_cell`` in each of up to ⌊R/t⌋ cells
    (and ``groups``), plus the remainder in one more cell when allowed
    (:func:`~dpopt.sensitivity.person_hull.contribution_supports`).

    Raises
    ------
    UnsupportedSpecError
        More than :data:`MAX_VERTICES` of them.
    """
    if count_contribution_vertices(cells, rows, per_cell, groups, MAX_VERTICES) > MAX_VERTICES:
        raise UnsupportedSpecError("query.matrix", f"a linear query with a privacy_unit over {cells} levels "
                                                   f"has over {MAX_VERTICES} contribution vertices to list")
    out = []
    for chosen, extra, rest in contribution_supports(cells, rows, per_cell, groups):
        v = np.zeros(cells)
        v[list(chosen)] = per_cell
        if extra is not None:
            v[extra] = rest
        out.append(v)
    return np.array(out)


def count_growth_strings(length: int, most: int) -> int:
    r"""How many strings :func:`growth_strings` lists: :math:`\sum_{k \le \text{most}} S(\text{length}, k)`, the
    partitions of ``length`` cells into at most ``most`` blocks (Stirling numbers of the second kind, by
    :math:`S(n, k) = k S(n-1, k) + S(n-1, k-1)`), counted without listing them."""
    row = [1] + [0] * most  # S(0, k)
    for _ in range(length):
        row = [0] + [k * row[k] + row[k - 1] for k in range(1, most + 1)]
    return sum(row)


def growth_strings(length: int, most: int) -> list[tuple[int, ...]]:
    """Every restricted growth string of ``length`` with values below ``most``: the levels of one attribute over
    the cells, up to relabelling (each new level is the next unused one)."""
    out = [()]
    for _ in range(length):
        out = [s + (x,) for s in out for x in range(min(most, max(s, default=-1) + 2))]
    return out
