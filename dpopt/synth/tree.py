r"""A spanning tree of the published two-way margins and records drawn to agree with it exactly.

The pair table :math:`P_{ij}` of two attributes is read off the heaviest given table that holds both
(summed over its other attributes). Each pair that some table covers weighs its mutual information
:math:`I(i;j) = \sum_{a,b} p_{ab} \log \frac{p_{ab}}{p_{a\cdot}\,p_{\cdot b}}`, and the maximum spanning
tree (forest, when the covered pairs do not connect the attributes) of those weights is the
Chow–Liu tree of the published tables (Chow & Liu, IEEE Trans. Inf. Theory 14(3), 1968; MST, McKenna
et al., JPC 2021, selects the same tree from noisy one- and two-way margins).

Records are then drawn along the tree by **controlled allocation**, root first: the root's levels
are dealt out in exactly its one-way counts; for each edge (p, c) in breadth-first order, the records
whose parent level is a (:math:`m_a` of them) receive child levels in exactly the counts of row a of
:math:`P_{pc}` (rounded by largest remainders to sum to :math:`m_a` when the row does not already).
When the tables are whole numbers that agree on shared attributes, every row sums to :math:`m_a`,
so the records tabulate exactly to every tree edge and every one-way margin. Which record of a group
gets which level is random (the tree model's conditional independence); :mod:`dpopt.synth.search`
then fits the other tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpopt.synth.tables import Table


@dataclass(frozen=True)
class Tree:
    """A spanning forest of the attributes.

    Attributes
    ----------
    roots : tuple of int
        One root per component (an attribute no pair table connects is its own component).
    edges : tuple of (int, int)
        (parent, child) pairs in breadth-first order from the roots.
    pairs : dict
        (i, j) with i < j → the pair table :math:`P_{ij}` (float, shape (n_i, n_j)) of every tree edge.
    ones : dict
        i → the one-way target of every root (float, shape (n_i,)), or None where no table covers it.
    """

    roots: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    pairs: dict[tuple[int, int], np.ndarray]
    ones: dict[int, np.ndarray | None]

    def pair(self, parent: int, child: int) -> np.ndarray:
        """:math:`P_{pc}` with the parent's levels on axis 0."""
        return self.pairs[(parent, child)] if parent < child else self.pairs[(child, parent)].T


def marginal_of(table: Table, keep: Sequence[int]) -> np.ndarray:
    """A table's target summed onto the attributes ``keep`` (in domain order, each one of its axes)."""
    full = table.target.reshape(table.shape)
    drop = tuple(i for i, a in enumerate(table.axes) if a not in keep)
    return full.sum(axis=drop) if drop else full


def _source(tables: Sequence[Table], attrs: Sequence[int]) -> Table | None:
    """The heaviest table holding every attribute of ``attrs`` (smallest first among equal weights)."""
    holders = [t for t in tables if set(attrs) <= set(t.axes)]
    return max(holders, key=lambda t: (t.weight, -t.target.size)) if holders else None


def mutual_information(pair: np.ndarray) -> float:
    """I(i; j) of the distribution proportional to ``pair`` (0 for an empty table)."""
    total = pair.sum()
    if total <= 0:
        return 0.0
    p = pair / total
    outer = np.outer(p.sum(axis=1), p.sum(axis=0))
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / outer[mask])))


def spanning_tree(sizes: Sequence[int], tables: Sequence[Table], smallest: bool = False) -> Tree:
    """The maximum-mutual-information spanning forest of the pairs the tables cover (module docstring);
    with ``smallest``, the forest of the smallest pair tables (fewest cells, then most information)."""
    d = len(sizes)
    covered = {}
    for table in tables:
        for x in range(len(table.axes)):
            for y in range(x + 1, len(table.axes)):
                covered.setdefault((table.axes[x], table.axes[y]), None)
    weighted = []
    for i, j in covered:
        pair = marginal_of(_source(tables, (i, j)), (i, j))
        weighted.append(((-pair.size if smallest else 0, mutual_information(pair)), i, j, pair))
    weighted.sort(key=lambda w: (-w[0][0], -w[0][1], w[1], w[2]))
    parent = list(range(d))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    neighbours: dict[int, list[int]] = {k: [] for k in range(d)}
    pairs = {}
    for _, i, j, pair in weighted:
        a, b = find(i), find(j)
        if a != b:
            parent[a] = b
            neighbours[i].append(j)
            neighbours[j].append(i)
            pairs[(i, j)] = pair
    seen, roots, edges = set(), [], []
    for start in range(d):
        if start in seen:
            continue
        roots.append(start)
        seen.add(start)
        queue = [start]
        while queue:
            node = queue.pop(0)
            for nxt in sorted(neighbours[node]):
                if nxt not in seen:
                    seen.add(nxt)
                    edges.append((node, nxt))
                    queue.append(nxt)
    ones = {}
    for root in roots:
        source = _source(tables, (root,))
        ones[root] = None if source is None else marginal_of(source, (root,))
    return Tree(tuple(roots), tuple(edges), pairs, ones)


def held_tree(sizes: Sequence[int], tables: Sequence[Table]) -> Tree:
    """The forest the repair holds exactly when only ``tables`` are to be matched: the spanning forest of their pairs
    (smallest first), rooted only at attributes they hold (an attribute none holds is left free, not dealt uniformly).

    Raises
    ------
    ValueError
        When the tables' pairs hold a cycle (a forest cannot match every one of them).
    """
    tree = spanning_tree(sizes, tables, smallest=True)
    pairs = {(t.axes[x], t.axes[y]) for t in tables for x in range(len(t.axes)) for y in range(x + 1, len(t.axes))}
    if len(pairs) != len(tree.edges):
        raise ValueError("the tables' pairs of attributes hold a cycle: a spanning forest matches all of them only "
                         "when they hold none")
    roots = tuple(r for r in tree.roots if tree.ones[r] is not None)
    return Tree(roots, tree.edges, tree.pairs, {r: tree.ones[r] for r in roots})


def allocate(weights: np.ndarray | None, total: int, size: int) -> np.ndarray:
    """Whole counts summing to ``total``: ``weights`` itself when it is whole and sums to ``total``, else
    its largest-remainder rounding after scaling to ``total`` (uniform when there are no weights)."""
    if total <= 0:
        return np.zeros(size, dtype=np.int64)
    w = np.ones(size) if weights is None or weights.sum() <= 0 else np.asarray(weights, dtype=float)
    whole = np.round(w)
    if np.allclose(w, whole, rtol=0, atol=1e-9) and int(whole.sum()) == total:
        return whole.astype(np.int64)
    scaled = w * (total / w.sum())
    out = np.floor(scaled).astype(np.int64)
    short = total - int(out.sum())
    if short > 0:
        out[np.argsort(-(scaled - out), kind="stable")[:short]] += 1
    return out


def deal(groups: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Levels for records in ``groups`` (level of the parent, one per record): the records of group a
    receive level v exactly ``counts[a, v]`` times, in random order (each row sums to the group's size)."""
    order = rng.permutation(groups.size)
    order = order[np.argsort(groups[order], kind="stable")]
    levels = np.repeat(np.tile(np.arange(counts.shape[1]), counts.shape[0]), counts.reshape(-1))
    out = np.empty(groups.size, dtype=np.int32)
    out[order] = levels
    return out


def edge_targets(tree: Tree, parent: int, child: int, groups: np.ndarray, levels: int) -> np.ndarray:
    """Whole child counts per parent level (parent levels × child levels): row a of :math:`P_{pc}`
    allocated to the number of records with parent level a (its column sums where the row is empty)."""
    pair = tree.pair(parent, child)
    sizes_of = np.bincount(groups, minlength=pair.shape[0])
    return np.stack([allocate(pair[a] if pair[a].sum() > 0 else pair.sum(axis=0), int(sizes_of[a]), levels)
                     for a in range(pair.shape[0])])


def sample_tree(tree: Tree, sizes: Sequence[int], n: int, rng: np.random.Generator) -> np.ndarray:
    """Records drawn along the tree by controlled allocation (module docstring): int32, shape (n, d)."""
    records = np.zeros((n, len(sizes)), dtype=np.int32)
    for root in tree.roots:
        counts = allocate(tree.ones[root], n, sizes[root])
        records[:, root] = deal(np.zeros(n, dtype=np.int64), counts[None, :], rng)
    for parent, child in tree.edges:
        groups = records[:, parent].astype(np.int64)
        records[:, child] = deal(groups, edge_targets(tree, parent, child, groups, sizes[child]), rng)
    return records
