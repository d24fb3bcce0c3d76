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
