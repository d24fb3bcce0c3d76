r"""Record-level local search: change one attribute of many records at a time to fit every table.

The records' misfit is the weighted L1 distance of their tabulations from the targets,

.. math:: L(X) = \sum_t w_t \,\| C_t(X) - T_t \|_1 ,

the quantity whose normalised form (total variation distance) measures a synthetic file. One step
takes an attribute :math:`k` and, for every record, the exact change of :math:`L` if the record's
level of :math:`k` went from :math:`v` to :math:`v'` alone: each table :math:`t \ni k` loses the record
from cell :math:`c_t(v)` and gains it in :math:`c_t(v')`, so

.. math:: \Delta(v') = \sum_{t \ni k} w_t \big( |C_t(c_t(v)) - 1 - T_t| - |C_t(c_t(v)) - T_t|
          + |C_t(c_t(v')) + 1 - T_t| - |C_t(c_t(v')) - T_t| \big),

and moves the records whose best :math:`\Delta` is negative. It is PrivSyn's Gradually Update
Method (Zhang et al., USENIX Security 2021, Sec. 5: update records, not a model, so the cost grows
with the tables' cells and the records, never the domain) made greedy per record: the update is the
coordinate-descent step of :math:`L`, not a fixed share of each table's gap.

Moves decided together can overshoot a cell that many records leave (or enter) at once; each is
kept with probability :math:`\min(1, \text{gap}/\text{movers})` of its most favourable source cell
and destination cell, times a global rate that halves whenever a step fails to lower :math:`L`
(the step is then undone). Every step therefore never increases :math:`L`.
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

    def step(self, k: int, rate: float, rng: np.random.Generator, batches: int) -> tuple[float, int, float]:
        """One step on attribute k (module docstring), over the records in ``batches`` random batches,
        the counts updated after each; the rate halves after a batch that was undone and grows by a
        quarter (up to 1) after one that lowered L. Returns (decrease of L, records moved, rate)."""
        if not self.holding[k] or self.sizes[k] < 2:
            return 0.0, 0, rate
        n = self.records.shape[0]
        gained, moved = 0.0, 0
        for rows in np.array_split(rng.permutation(n), max(1, min(batches, n // 1024), -(-n // BATCH))):
            gain, count = self._batch(k, np.sort(rows), rate, rng)
            if count < 0:
                rate *= 0.5
            elif count > 0:
                rate = min(1.0, rate * 1.25)
                gained += gain
                moved += count
        return gained, moved, rate

    def _batch(self, k: int, rows: np.ndarray, rate: float, rng: np.random.Generator) -> tuple[float, int]:
        leave = np.zeros(rows.size)
        for i in self.holding[k]:
            cell = self.tables[i].cells(self.records[rows])
            gap = self.counts[i][cell] - self.tables[i].target[cell]
            leave += self.tables[i].weight ** 2 * (1 - 2 * gap)
        rows = rows[leave < 0]  # only a record whose cells hold too many can gain by leaving them
        if rows.size == 0:
            return 0.0, 0
        delta = self.costs(k, rows)
        delta += rng.random(delta.shape) * 1e-6  # ties broken at random, not toward low levels
        best = np.argmin(delta, axis=1)
        good = delta[np.arange(rows.size), best] < -1e-3
        rows, new = rows[good], best[good]
        if rows.size == 0:
            return 0.0, 0
        chosen = rng.random(rows.size) < rate
        rows, new = rows[chosen], new[chosen]
        if rows.size == 0:
            return 0.0, 0
        before = self.loss(self.holding[k])
        old = self.records[rows, k].copy()
        self.move(k, rows, new)
        after = self.loss(self.holding[k])
        if after >= before:
            self.move(k, rows, old)
            return 0.0, -int(rows.size)
        return before - after, int(rows.size)


def search(fit: Fit, rng: np.random.Generator, sweeps: int, progress: Callable[[str], None] | None = None,
           tolerance: float = 1e-3, batches: int = 16) -> int:
    """Sweeps of :meth:`Fit.step` over every attribute (random order), each attribute with its own rate
    (doubled, up to 1, after a step that lowers L; halved after one that does not). Stops after ``sweeps``
    sweeps or when a sweep lowers L by less than ``tolerance`` of it. Returns the sweeps run."""
    d = len(fit.sizes)
    rates = np.full(d, 0.5)
    for sweep in range(sweeps):
        start = fit.loss()
        moved = 0
        for k in rng.permutation(d):
            _, count, rates[k] = fit.step(int(k), float(rates[k]), rng, batches)
            moved += count
        end = fit.loss()
        if progress is not None:
            progress(f"record search: sweep {sweep + 1}, {moved:,} level changes, weighted L1 misfit "
                     f"{start:,.0f} -> {end:,.0f}")
        if start - end <= tolerance * max(start, 1.0):
            return sweep + 1
    return sweeps
