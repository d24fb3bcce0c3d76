r"""The move patterns of a person's moves on tables and marginal workloads, without listing the moves.

The pDP level of i.i.d. integer noise depends on a move only through its *pattern*, the sorted non-zero
:math:`|\Delta_k|` (:func:`dpopt.mechanisms.integer_noise.move_patterns`), and is summed per move, not convex in it:
every move's pattern is needed, not only the hull's vertices. A person's contribution :math:`v \in
\mathbb{Z}_{\ge 0}^m` over the m cells of the histogram is *allowed* when :math:`v_j \le c`,
:math:`|\{j : v_j > 0\}| \le g` and :math:`\sum_j v_j \le k` (:mod:`dpopt.sensitivity.person`); add/remove moves the
answers by :math:`\pm A v`, replace by :math:`A(v - v')`, v, v′ allowed.

**The allowed set is downward closed**: 0 ≤ u ≤ v coordinatewise and v allowed give u allowed (each bound is
monotone). Hence a difference w = v − v′ of allowed contributions has allowed parts :math:`w^+ \le v` and
:math:`w^- \le v'`, and conversely every w whose parts are allowed is such a difference (v = w⁺, v′ = w⁻).

**Tables** (A = I: count, histogram, contingency table; :func:`table_patterns`). An allowed v has for pattern a
partition λ (its non-zero values) with parts ≤ c, at most min(g, m) parts and sum ≤ k, and every such partition is
one (put it on distinct cells). Add/remove: the patterns are exactly these partitions, λ ≠ ∅. Replace: w⁺ and w⁻
have disjoint supports, so the pattern of w is the union λ ∪ μ of their partitions, with |λ| + |μ| ≤ m; conversely
λ on |λ| cells and μ on |μ| others give a w with that pattern. The replace patterns are exactly the unions λ ∪ μ ≠ ∅
of two allowed partitions with |λ| + |μ| ≤ m: no pair of contributions is formed, and their number depends on k, c
and g, not on m.

**Marginal workloads** (:func:`marginal_patterns`; A stacks the tables :math:`M_{\mathcal T}`). By the
above, the replace moves are the A(w⁺ − w⁻) with w⁺, w⁻ allowed on disjoint supports (add/remove: A w⁺, w⁻ = 0).
Write such a pair as a sequence of q + q′ distinct cells, w⁺'s q first, and weights: a tuple in {1, …, c}^q summing
to at most k for w⁺, one for w⁻ (q, q′ ≤ min(g, R)). Permuting the levels of one attribute permutes the cells of
every table within the table, so it maps the allowed pairs onto themselves and keeps the pattern of the move.
Relabelling each attribute's levels by their first appearance in the sequence therefore maps every pair to one
whose every attribute column is a *restricted growth string* (each value at most one more than the largest
before it) with values below the attribute's levels: enumerating those sequences whose cells are distinct, with
every pair of weight tuples, meets every orbit, and the set of their patterns is exactly the set of patterns of all
moves. Their count, :math:`\sum_{q, q'} N_q N_{q'} \prod_a \sum_{j \le n_a} S(q + q', j)` (Stirling numbers of
the second kind, n_a the levels of attribute a, N_q the weight tuples), depends on k, c, g and the number of
attributes, not on the levels beyond q + q′; it is counted before any is listed (:func:`count_marginal_sequences`)
and beyond :data:`MAX_SEQUENCES` the patterns are not derived (the space keeps floating point, with the reason).
Table 𝒯's count at the cell of sequence cell i is Σ_j s_j [cells i and j agree on 𝒯's attributes] (s the signed
weights), taken once per distinct table cell: no matrix of the domain's size is formed.

Both sets are checked against a brute force over every contribution (pair) of small domains in
``tests/test_person_marginal_pdp.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from dpopt.sensitivity.person_structure import count_growth_strings, growth_strings

MAX_SEQUENCES = 1_000_000
"""(Cell sequence, weights) pairs :func:`marginal_patterns` enumerates at most."""

MAX_PARTITION_PAIRS = 1_000_000
"""Pairs of allowed partitions :func:`table_patterns` unites at most under replace."""

_CHUNK = 50_000
"""Moves evaluated at once (memory: a chunk holds (q + q′)² booleans per attribute and table per sequence)."""


def allowed_partitions(rows: int, per_cell: int, groups: int) -> list[tuple[int, ...]]:
    """Every partition (non-increasing tuple, ∅ included) with sum ≤ ``rows``, parts ≤ ``per_cell`` and at most
    ``groups`` parts: the patterns of the allowed contributions (module docstring)."""
    out: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...], largest: int, left: int) -> None:
        out.append(prefix)
        if len(prefix) < groups:
            for part in range(min(largest, left), 0, -1):
                grow(prefix + (part,), part, left - part)

    grow((), per_cell, rows)
    return out


def table_patterns(rows: int, per_cell: int, groups: int, cells: int,
                   replace: bool) -> list[tuple[int, ...]] | None:
    """The move patterns of a person's moves on an m-cell histogram (A = I), exactly (module docstring), sorted
    increasingly within each pattern as :func:`~dpopt.mechanisms.integer_noise.vector_patterns` states them; None
    under replace when more than :data:`MAX_PARTITION_PAIRS` pairs of partitions would be united.

    ``rows``, ``per_cell``, ``groups``: R, t and min(g, m) of :func:`dpopt.sensitivity.person.most_rows`.
    """
    parts = allowed_partitions(rows, per_cell, min(groups, cells))
    if not replace:
        return sorted(tuple(reversed(p)) for p in parts if p)
    if len(parts) ** 2 > MAX_PARTITION_PAIRS:
        return None
    found = {tuple(sorted(a + b)) for a, b in itertools.product(parts, repeat=2) if len(a) + len(b) <= cells}
    return sorted(found - {()})


def weight_tuples(support: int, per_cell: int, rows: int) -> Iterator[tuple[int, ...]]:
    """The tuples in {1, …, t}^support summing to at most R (t = ``per_cell``, R = ``rows``), in lexicographic
    order: the rows a person keeps in each of ``support`` distinct cells (a prefix too large for the remaining
    cells' one row each is not extended)."""
    if support == 0:
        yield ()
        return
    for first in range(1, min(per_cell, rows - (support - 1)) + 1):
        for rest in weight_tuples(support - 1, per_cell, rows - first):
            yield (first, *rest)


def count_weight_tuples(per_cell: int, rows: int, most: int) -> list[int]:
    """How many tuples :func:`weight_tuples` lists for each support 0, …, ``most``, without listing them: N_s(R)
    by the recursion N_s(r) = Σ_{x ≤ min(t, r)} N_{s−1}(r − x) on the rows r still free, N_0(r) = 1."""
    free, out = [1] * (rows + 1), [1]
    for _ in range(most):
        free = [sum(free[r - x] for x in range(1, min(per_cell, r) + 1)) for r in range(rows + 1)]
        out.append(free[rows])
    return out


def _supports(rows: int, groups: int, replace: bool) -> list[tuple[int, int]]:
    """The numbers (q, q′) of distinct cells of v and v′ (v′ = 0 under add/remove) the enumeration visits."""
    most = min(groups, rows)  # each cell used holds a row at least
    if replace:
        return [(q, other) for q in range(most + 1) for other in range(most + 1) if q + other]
    return [(q, 0) for q in range(1, most + 1)]


def count_marginal_sequences(sizes: tuple[int, ...], rows: int, per_cell: int, groups: int, replace: bool) -> int:
    """How many (cell sequence, weights) pairs :func:`marginal_patterns` enumerates, without listing them
    (module docstring)."""
    weights = count_weight_tuples(per_cell, rows, min(groups, rows))
    return sum(math.prod(count_growth_strings(q + other, n) for n in sizes) * weights[q] * weights[other]
               for q, other in _supports(rows, groups, replace))


def marginal_patterns(sizes: tuple[int, ...], blocks: tuple[tuple[int, ...], ...], rows: int, per_cell: int,
                      groups: int, replace: bool) -> list[tuple[int, ...]] | None:
    """The move patterns of a person's moves on the marginal tables ``blocks`` (attribute indices) over attributes
    of ``sizes`` levels, exactly, by the cell sequences of the module docstring; None beyond :data:`MAX_SEQUENCES`.

    ``rows``, ``per_cell``, ``groups``: R, t and min(g, m) of :func:`dpopt.sensitivity.person.most_rows` on the
    m = ∏ sizes cells.
    """
    if count_marginal_sequences(sizes, rows, per_cell, groups, replace) > MAX_SEQUENCES:
        return None
    found: set[tuple[int, ...]] = set()
    for q, other in _supports(rows, groups, replace):
        found |= _split_patterns(sizes, blocks, q, other, per_cell, rows)
    return sorted(found - {()})


def _split_patterns(sizes: tuple[int, ...], blocks: tuple[tuple[int, ...], ...], q: int, other: int, per_cell: int,
                    rows: int) -> set[tuple[int, ...]]:
    """The patterns of A(w⁺ − w⁻) over q + q′ distinct cells (each attribute's levels over them a restricted growth
    string), w⁺ on the first q with every weight tuple of :func:`weight_tuples`, w⁻ on the other q′."""
    length = q + other
    strings = [np.array(growth_strings(length, n), dtype=np.int64) for n in sizes]
    signed = np.array([w + tuple(-x for x in u) for w in weight_tuples(q, per_cell, rows)
                       for u in weight_tuples(other, per_cell, rows)], dtype=np.int64).T  # (length, K)
    earlier = np.tri(length, k=-1, dtype=bool)  # earlier[i, j]: j < i
    total = math.prod(len(s) for s in strings)
    chunk = max(1, _CHUNK // signed.shape[1])
    found: set[bytes] = set()
    for start in range(0, total, chunk):
        index = np.unravel_index(np.arange(start, min(start + chunk, total)), [len(s) for s in strings])
        # agree[a][r, i, j]: cells i and j of sequence r have the same level of attribute a
        agree = [s[i][:, :, None] == s[i][:, None, :] for s, i in zip(strings, index)]
        everywhere = np.ones((len(index[0]), length, length), bool)
        distinct = ~np.any(np.logical_and.reduce(agree, initial=True) & earlier, axis=(1, 2))
        values = []
        for block in blocks:
            together = (np.logical_and.reduce([agree[a] for a in block]) if block else everywhere)[distinct]
            counts = np.abs(together.astype(np.int64) @ signed)  # table counts at each cell's table cell
            counts[np.any(together & earlier, axis=2)] = 0  # each table cell once
            values.append(counts)
        moves = np.concatenate(values, axis=1).transpose(0, 2, 1).reshape(-1, len(blocks) * length)
        found.update(map(bytes, _unique_rows(np.sort(moves, axis=1))))
    width = len(blocks) * length
    return {tuple(int(x) for x in row if x) for row in np.frombuffer(b"".join(found), np.int32).reshape(-1, width)}


def _unique_rows(rows: np.ndarray) -> np.ndarray:
    """The distinct rows of an integer array, as int32 (a row-wise sort of raw bytes, not of records)."""
    rows = np.ascontiguousarray(rows, dtype=np.int32)
    return np.unique(rows.view(np.dtype((np.void, 4 * rows.shape[1]))).ravel()).view(np.int32).reshape(
        -1, rows.shape[1])
