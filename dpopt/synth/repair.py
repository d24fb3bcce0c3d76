r"""Exact agreement with the one-way margins and the spanning tree's two-way tables, restored last.

After :mod:`dpopt.synth.search` the records fit every table closely but none exactly. The repair walks
the tree of :mod:`dpopt.synth.tree` from its roots: a root's level counts are set to its one-way
counts; for each edge (p, c) in breadth-first order, within each group of records sharing the parent's
level a, the child's level counts are set to row a of :math:`P_{pc}`. Only the child's attribute
changes at an edge, so the parent's edge, fixed before, stays exact, and when the tables agree on
shared attributes (row sums :math:`m_a`) the child's one-way margin is exact as well.

In a group, the records in cells above their target count move to cells below it, as few as the
gap needs (half the group's L1 gap). Which records and which destinations: the moves that raise the
misfit of all other tables least (the costs :math:`\Delta` of :mod:`dpopt.synth.search`), accepted
cheapest first while both cells still have room; those left, if any, are matched at random.
"""

from __future__ import annotations

import numpy as np

from dpopt.synth.search import BATCH, Fit
from dpopt.synth.tree import Tree, allocate, edge_targets

ROUNDS = 8
"""Cost-ordered rounds before the remaining moves of a group are matched at random."""


def _fix(fit: Fit, k: int, groups: np.ndarray, targets: np.ndarray, rng: np.random.Generator) -> int:
    """Set the counts of attribute k within each group to ``targets`` (groups × levels, each row summing
    to its group's size), moving as few records as possible. Returns the records moved."""
    levels = targets.shape[1]
    moved = 0
    for attempt in range(ROUNDS + 1):
        current = np.bincount(groups * levels + fit.records[:, k], minlength=targets.size).reshape(targets.shape)
        surplus = np.maximum(current - targets, 0)
        deficit = np.maximum(targets - current, 0)
        if not surplus.any():
            break
        rows = np.nonzero(surplus[groups, fit.records[:, k]] > 0)[0]
        if attempt < ROUNDS:
            best, cost = np.empty(rows.size, dtype=np.int64), np.empty(rows.size)
            for start in range(0, rows.size, BATCH):
                part = rows[start:start + BATCH]
                delta = fit.costs(k, part) + rng.random((part.size, levels)) * 1e-6
                delta[deficit[groups[part]] <= 0] = np.inf
                best[start:start + BATCH] = np.argmin(delta, axis=1)
                cost[start:start + BATCH] = delta[np.arange(part.size), best[start:start + BATCH]]
            order = np.argsort(cost, kind="stable")
        else:
            best = np.full(rows.size, -1)
            order = rng.permutation(rows.size)
        left_out, left_in = surplus.copy(), deficit.copy()
        chosen, new = [], []
        for r in order.tolist():
            g, v = int(groups[rows[r]]), int(fit.records[rows[r], k])
            if left_out[g, v] <= 0:
                continue
            dest = int(best[r]) if best[r] >= 0 else int(np.flatnonzero(left_in[g])[0])
            if left_in[g, dest] <= 0:
                continue
            left_out[g, v] -= 1
            left_in[g, dest] -= 1
            chosen.append(rows[r])
            new.append(dest)
        if chosen:
            fit.move(k, np.asarray(chosen), np.asarray(new, dtype=np.int32))
            moved += len(chosen)
    return moved


def repair(fit: Fit, tree: Tree, rng: np.random.Generator) -> int:
    """Make the records tabulate exactly to every root's one-way counts and every tree edge's table
    (module docstring), by the tree's whole-number allocation (:func:`dpopt.synth.tree.allocate`).
    Returns the records' levels changed."""
    n = fit.records.shape[0]
    moved = 0
    for root in tree.roots:
        counts = allocate(tree.ones[root], n, fit.sizes[root])
        moved += _fix(fit, root, np.zeros(n, dtype=np.int64), counts[None, :], rng)
    for parent, child in tree.edges:
        groups = fit.records[:, parent].astype(np.int64)
        moved += _fix(fit, child, groups, edge_targets(tree, parent, child, groups, fit.sizes[child]), rng)
    return moved


def polish(fit: Fit, tree: Tree, rng: np.random.Generator) -> int:
    """Swaps that keep every exact table exact and lower the misfit of the others.

    Exchanging the levels v₁ ≠ v₂ of attribute k between two records that agree on every tree neighbour
    of k leaves each tree table that holds k unchanged (record 1 leaves cell (v₁, u) for (v₂, u), record 2
    the reverse) and every one-way margin too. Records whose best single move (:meth:`Fit.costs`) is
    v₁ → v₂ are paired with records of the same neighbour levels whose best move is v₂ → v₁, best gains
    first; a pair is kept only if the two moves, re-evaluated exactly one after the other, lower the
    misfit. One pass over the attributes; returns the swaps made.
    """
    neighbours: dict[int, list[int]] = {k: [] for k in range(len(fit.sizes))}
    for parent, child in tree.edges:
        neighbours[parent].append(child)
        neighbours[child].append(parent)
    n = fit.records.shape[0]
    swaps = 0
    for k in rng.permutation(len(fit.sizes)).tolist():
        if not fit.holding[k] or fit.sizes[k] < 2 or n < 2:
            continue
        around = sorted(neighbours[k])
        groups = (np.unique(fit.records[:, around], axis=0, return_inverse=True)[1].reshape(-1) if around
                  else np.zeros(n, dtype=np.int64))
        best, gain = np.empty(n, dtype=np.int64), np.empty(n)
        for start in range(0, n, BATCH):
            delta = fit.costs(k, np.arange(start, min(n, start + BATCH)))
            delta += rng.random(delta.shape) * 1e-6
            best[start:start + BATCH] = np.argmin(delta, axis=1)
            gain[start:start + BATCH] = delta[np.arange(delta.shape[0]), best[start:start + BATCH]]
        rows = np.nonzero(gain < -1e-3)[0]
        rows = rows[np.argsort(gain[rows], kind="stable")]
        own = fit.records[rows, k].astype(np.int64)
        wants: dict[tuple[int, int, int], list[int]] = {}
        for j, (g, a, b) in enumerate(zip(groups[rows].tolist(), own.tolist(), best[rows].tolist())):
            wants.setdefault((g, a, b), []).append(j)
        pairs = [(x, y) for (g, a, b), first in wants.items() if a < b
                 for x, y in zip(first, wants.get((g, b, a), []))]
        if not pairs:
            continue
        tables = []
        for i in fit.holding[k]:
            table = fit.tables[i]
            tables.append((fit.counts[i], table.target, table.weight ** 2,
                           table.strides[table.axes.index(k)], table.cells(fit.records[rows]).tolist()))
        levels = own.tolist()
        for x, y in pairs:
            shift = levels[y] - levels[x]  # x moves by +shift strides, y by −shift
            change = 0.0
            for counts, target, w2, stride, cells in tables:
                for r, step in ((x, shift), (y, -shift)):
                    old, new = cells[r], cells[r] + step * stride
                    change += w2 * (2.0 + 2.0 * float(counts[new] - target[new] - counts[old] + target[old]))
                    counts[old] -= 1.0
                    counts[new] += 1.0
            if change < -1e-9:
                fit.records[rows[x], k], fit.records[rows[y], k] = levels[y], levels[x]
                swaps += 1
                continue
            for counts, _, _, stride, cells in tables:
                for r, step in ((x, shift), (y, -shift)):
                    counts[cells[r]] += 1.0
                    counts[cells[r] + step * stride] -= 1.0
    return swaps
