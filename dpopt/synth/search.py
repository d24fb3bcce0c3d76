r"""Record-level local search: change one attribute of many records at a time to fit every table.

The records' misfit is the weighted squared distance of their tabulations from the targets,

.. math:: L(X) = \sum_t w_t^2 \,\| C_t(X) - T_t \|_2^2 ,

(:math:`w_t` the caller's confidence in table t, e.g. 1 / its standard error: L is then the Gaussian
log-likelihood of the release up to constants). Minimising it over record files is a Euclidean projection
of the published tables onto the tables that some record file has; that set holds the true tables, and a
projection onto a convex set holding them is non-expansive, which is why fitting the records to *every*
table removes noise the published tables still carry (the search is a heuristic over a finite set: it
approaches that projection, it does not certify it).

One step takes an attribute :math:`k` and, for a batch of records, the exact change of :math:`L` if a
record's level of :math:`k` went from :math:`v` to :math:`v'` alone: each table :math:`t \ni k` loses the
record from cell :math:`c_t(v)` and gains it in :math:`c_t(v')`, so with :math:`g = C_t - T_t`

.. math:: \Delta(v') = \sum_{t \ni k} w_t^2 \big( 1 - 2 g(c_t(v)) + 1 + 2 g(c_t(v')) \big),

and moves the records whose best :math:`\Delta` is negative. It is PrivSyn's Gradually Update Method
(Zhang et al., USENIX Security 2021, Sec. 5: update records, not a model, so the cost grows with the
tables' cells and the records, never the domain) made greedy per record: the update is a
coordinate-descent step of :math:`L`, not a fixed share of each table's gap.

Moves decided together can overshoot a cell that many records leave (or enter) at once, so the proposals
of a batch are taken best first, each only if it still lowers :math:`L` at the counts the moves before it
left (re-evaluated exactly): every move taken lowers :math:`L`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dpopt.synth.tables import Table

BATCH = 8192
"""The most records a batch of :meth:`Fit.step` holds (bounds the (records × levels) working array)."""


class Fit:
    """Records, their tabulation in every table, and the search steps on them.

    Parameters
    ----------
    tables : list of Table
    sizes : sequence of int
        Levels per attribute.
    records : numpy.ndarray of int32, shape (n, d)
        Updated in place.
    """

    def __init__(self, tables: Sequence[Table], sizes: Sequence[int], records: np.ndarray):
        self.tables = list(tables)
        self.sizes = tuple(sizes)
        self.records = records
        self.counts = [t.counts(records).astype(float) for t in self.tables]
        self.holding = {k: [i for i, t in enumerate(self.tables) if k in t.axes] for k in range(len(sizes))}

    def loss(self, which: Sequence[int] | None = None) -> float:
        """L over the tables ``which`` (all by default)."""
        which = range(len(self.tables)) if which is None else which
        return float(sum(self.tables[i].weight ** 2 * np.square(self.counts[i] - self.tables[i].target).sum()
                         for i in which))

    def costs(self, k: int, rows: np.ndarray) -> np.ndarray:
        """Δ(v') of the module docstring for the records ``rows`` (shape (rows, levels); 0 at their own level)."""
        levels = np.arange(self.sizes[k])
        own = self.records[rows, k].astype(np.int64)
        delta = np.zeros((rows.size, levels.size))
        leave = np.zeros(rows.size)
        for i in self.holding[k]:
            table, gap = self.tables[i], self.counts[i] - self.tables[i].target
            stride = table.strides[table.axes.index(k)]
            cell = table.cells(self.records[rows])
            leave += table.weight ** 2 * (1 - 2 * gap[cell])
            delta += (table.weight ** 2 * (1 + 2 * gap))[(cell - own * stride)[:, None] + levels[None, :] * stride]
        delta += leave[:, None]
        delta[np.arange(rows.size), own] = 0.0
        return delta

    def move(self, k: int, rows: np.ndarray, new: np.ndarray) -> None:
        """Move the records ``rows`` to levels ``new`` of attribute k, updating every count."""
        for i in self.holding[k]:
            table = self.tables[i]
            stride = table.strides[table.axes.index(k)]
            cell = table.cells(self.records[rows])
            self.counts[i] -= np.bincount(cell, minlength=table.target.size)
            self.counts[i] += np.bincount(cell + (new.astype(np.int64) - self.records[rows, k]) * stride,
                                          minlength=table.target.size)
        self.records[rows, k] = new

    def step(self, k: int, rng: np.random.Generator) -> int:
        """One step on attribute k (module docstring). Returns the records moved."""
        if not self.holding[k] or self.sizes[k] < 2:
            return 0
        n = self.records.shape[0]
        moved = 0
        for start in range(0, n, BATCH):
            moved += self._batch(k, np.arange(start, min(n, start + BATCH)), rng)
        return moved

    def _batch(self, k: int, rows: np.ndarray, rng: np.random.Generator) -> int:
        """Propose each record's best move (module docstring), then take the proposals best first, each only
        if it still lowers L at the counts its predecessors left (re-evaluated exactly, one by one)."""
        leave = np.zeros(rows.size)
        for i in self.holding[k]:
            cell = self.tables[i].cells(self.records[rows])
            leave += self.tables[i].weight ** 2 * (1 - 2 * (self.counts[i][cell] - self.tables[i].target[cell]))
        rows = rows[leave < 0]  # only a record whose cells hold too many can gain by leaving them
        if rows.size == 0:
            return 0
        delta = self.costs(k, rows)
        delta += rng.random(delta.shape) * 1e-6  # ties broken at random, not toward low levels
        best = np.argmin(delta, axis=1)
        value = delta[np.arange(rows.size), best]
        order = np.argsort(value, kind="stable")
        order = order[value[order] < -1e-3]
        if order.size == 0:
            return 0
        rows, best = rows[order], best[order]
        own = self.records[rows, k].astype(np.int64)
        tables = []
        for i in self.holding[k]:
            table = self.tables[i]
            stride = table.strides[table.axes.index(k)]
            cell = table.cells(self.records[rows])
            # Python lists of Python floats: the same IEEE double arithmetic as numpy's scalars, without their
            # per-element overhead in the one loop that must run record by record
            tables.append((self.counts[i].tolist(), table.target.tolist(), table.weight ** 2, cell.tolist(),
                           (cell + (best - own) * stride).tolist()))
        taken = []
        for r in range(rows.size):
            change = 0.0
            for counts, target, w2, old, new in tables:  # (g+1)² − g² + (g'−1)² − g'²
                change += w2 * (2.0 + 2.0 * (counts[new[r]] - target[new[r]]
                                             - counts[old[r]] + target[old[r]]))
            if change < -1e-9:
                for counts, _, _, old, new in tables:
                    counts[old[r]] -= 1.0
                    counts[new[r]] += 1.0
                taken.append(r)
        for i, (counts, *_) in zip(self.holding[k], tables):
            self.counts[i][:] = counts
        if taken:
            self.records[rows[taken], k] = best[taken]
        return len(taken)


def search(fit: Fit, rng: np.random.Generator, sweeps: int, progress: Callable[[str], None] | None = None,
           tolerance: float = 1e-3) -> int:
    """Sweeps of :meth:`Fit.step` over every attribute (in random order), one progress line each.

    Stops after ``sweeps`` sweeps, or sooner when a sweep lowers L by less than ``tolerance`` of it.
    Returns the sweeps run.
    """
    d = len(fit.sizes)
    for sweep in range(sweeps):
        start = fit.loss()
        moved = 0
        for k in rng.permutation(d):
            moved += fit.step(int(k), rng)
        end = fit.loss()
        if progress is not None:
            progress(f"record search: sweep {sweep + 1}, {moved:,} level changes, weighted squared misfit "
                     f"{start:,.0f} -> {end:,.0f}")
        if start - end <= tolerance * max(start, 1.0):
            return sweep + 1
    return sweeps
