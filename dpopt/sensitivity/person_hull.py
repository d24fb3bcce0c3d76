r"""The convex hull of a person's moves, from the vertices of the contribution polytope (no move listed).

A person's contribution :math:`v \in \mathbb{Z}_{\ge 0}^m` over the m cells of the query's histogram is *allowed*
when :math:`v_j \le c`, :math:`|\{j : v_j > 0\}| \le g` and :math:`\sum_j v_j \le k` (:mod:`dpopt.sensitivity.person`).
With :math:`g' = \min(g, m)`, R = min(k, c g′) and t = min(c, R) (:func:`~dpopt.sensitivity.person.most_rows`) the
same set is :math:`\bigcup_{|S| \le g'} P_S \cap \mathbb{Z}^m`,

.. math:: P_S = \{v : 0 \le v_j \le t \ (j \in S),\ v_j = 0 \ (j \notin S),\ \textstyle\sum_j v_j \le R\}

(on a support of g′ cells, v_j ≤ c bounds the sum by c g′, so Σ ≤ R is Σ ≤ k; and v_j ≤ Σ ≤ R makes v_j ≤ t the
cap c).

**Vertices.** A vertex of the box-and-budget polytope P_S makes |S| of its constraints tight. Without the budget,
every coordinate is 0 or t (f cells full, f t ≤ R); with it, all but one coordinate are 0 or t and the last is
:math:`r = R - f t`, strictly between 0 and t, on a cell of S besides the f full ones (so f + 1 ≤ |S| ≤ g′). Every
such point is an integer point of P_S, hence allowed, so

.. math:: \operatorname{conv}(\text{allowed}) = \operatorname{conv}\textstyle\bigcup_S P_S = \operatorname{conv} V,
          \qquad V = \{t\,1_F : |F| \le \min(g', \lfloor R/t \rfloor)\} \cup
          \{t\,1_F + r\,e_j : j \notin F,\ |F| = \lfloor R/t \rfloor < g',\ 0 < r < t\}

(:func:`contribution_supports`), of :math:`|V| = \sum_{f \le F} \binom{m}{f} (1 + [0 < R - ft < t,\ f < g'](m - f))`
points, F = min(g′, ⌊R/t⌋) (:func:`count_contribution_vertices`, counted without listing them, up to a limit).

**Moves.** A linear query A moves by ±A v (add/remove) or A(v − v′) (replace, v, v′ allowed). A linear map takes
hulls to hulls and conv P − conv P = conv(V − V), so

.. math:: \operatorname{conv} S = \operatorname{conv}(\pm A V) \ \text{(add/remove)}, \qquad
          \operatorname{conv} S = \operatorname{conv}\{A u - A u' : u, u' \in V\} \ \text{(replace)},

whose generators are themselves moves (V is allowed). Every supremum of a convex function over S (a norm, a gauge,
max |c_k| of a linear coordinate) is attained on them.

**Marginal workloads** (:func:`marginal_hull`). A e_j stacks one 1 per table, so A v is formed from the tables'
cell indices of the few cells of each vertex: nothing of size m × d. The generators are stated when
:math:`|V| \cdot d` (add/remove) or :math:`|V|^2 d` (replace) is at most
:data:`~dpopt.sensitivity.person.MAX_LISTED_ENTRIES` (:func:`vertex_limit`), counted before any is formed; as |V| > m, this also bounds
the domain (m d ≤ that budget). Checked against the hull of every move by brute force in
``tests/test_person_hull.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from dpopt.domain.marginal_algebra import MarginalWorkload


def contribution_supports(cells: int, rows: int, per_cell: int,
                          groups: int) -> Iterator[tuple[tuple[int, ...], int | None, int]]:
    """The vertices V of the module, as (full cells F, remainder cell j or None, remainder r): v = t 1_F + r e_j.

    ``rows``, ``per_cell``, ``groups``: R, t and g′ of :func:`dpopt.sensitivity.person.most_rows`.
    """
    for full in range(min(groups, rows // per_cell, cells) + 1):
        rest = rows - full * per_cell
        for chosen in itertools.combinations(range(cells), full):
            yield chosen, None, 0
            if 0 < rest < per_cell and full < groups:
                for j in sorted(set(range(cells)) - set(chosen)):
                    yield chosen, j, rest


def count_contribution_vertices(cells: int, rows: int, per_cell: int, groups: int, limit: int | None = None) -> int:
    """|V|: how many vertices :func:`contribution_supports` yields, without listing them (module docstring); with a
    ``limit``, the partial count once it exceeds it (the sum has up to R terms of huge binomials on a large domain)."""
    total = 0
    for full in range(min(groups, rows // per_cell, cells) + 1):
        rest = rows - full * per_cell
        extra = cells - full if 0 < rest < per_cell and full < groups else 0
        total += math.comb(cells, full) * (1 + extra)
        if limit is not None and total > limit:
            break
    return total


def vertex_limit(dimension: int, replace: bool, entries: int) -> int:
    """The most vertices whose generators fit ``entries`` numbers of ``dimension`` answers: |V|·d ≤ entries
    (add/remove), |V|²·d ≤ entries (replace)."""
    per_vertex = entries // max(dimension, 1)
    return math.isqrt(per_vertex) if replace else per_vertex


def marginal_hull(workload: MarginalWorkload, rows: int, per_cell: int, groups: int, replace: bool) -> np.ndarray:
    """Generators of conv S for a person's moves on a marginal workload (module docstring): the distinct non-zero
    ±A v (add/remove) or A u − A u′ (replace) over the vertices, shape (n, d)."""
    sizes = tuple(workload.algebra.sizes)
    cells = math.prod(sizes)
    levels = np.array(np.unravel_index(np.arange(cells), sizes)).T  # (m, attributes)
    index = np.stack([workload.offsets[i] + (np.ravel_multi_index(tuple(levels[:, list(block)].T),
                                                                  [sizes[a] for a in block]) if block else 0)
                      for i, block in enumerate(workload.blocks)], axis=1)  # (m, tables): A e_j's non-zeros
    vertices = list(contribution_supports(cells, rows, per_cell, groups))
    images = np.zeros((len(vertices), workload.dimension))
    for r, (chosen, extra, rest) in enumerate(vertices):
        for j in chosen:
            images[r, index[j]] += per_cell
        if extra is not None:
            images[r, index[extra]] += rest
    images = np.unique(images, axis=0)
    if replace:
        moves = (images[:, None, :] - images[None, :, :]).reshape(-1, workload.dimension)
    else:
        moves = np.vstack([images, -images])
    return np.unique(moves[np.any(moves != 0, axis=1)], axis=0)
