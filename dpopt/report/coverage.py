r"""Intervals on a release in Python, and their coverage of the truth measured by simulation.

The interval beside every released value of a solved spec (the ``ci_95_low``, ``ci_95_high`` columns of
``release.csv``) is :func:`dpopt.intervals` (:mod:`dpopt.certificate.intervals`); here its coverage:

* :func:`table_coverage` — R independent releases of one true table (post-processed as the spec says: a
  table with invariants, or marginals in marginal space); for each cell-release, whether the interval holds
  the true value, and the same for the **naive** interval (published value ± the noise-stage margin of error);
* :func:`hierarchy_coverage` — the same for every level of a TopDown hierarchy.

Coverage is a mean of Bernoulli indicators: over N cell-releases its Monte Carlo standard error is
:math:`\sqrt{c(1-c)/N}`, reported as ``coverage_se`` (cell-releases of one release are correlated through the
post-processing but not through the interval, which is per cell; the binomial SE is that of independent
releases per cell, and a conservative guide for the pooled figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dpopt.certificate.intervals import cell_intervals
from dpopt.postprocess import Structure, postprocess_release, spec_structure, topdown
from dpopt.postprocess.marginals import noise_free_sets, postprocess_marginals, uses_marginal_space
from dpopt.postprocess.monte_carlo import monte_carlo_bounds
from dpopt.postprocess.table import mechanism_covariance
from dpopt.solve import Solution
from dpopt.spec.models import Postprocess

if TYPE_CHECKING:  # the release package loads DuckDB; a hierarchy's design is only read here
    from dpopt.release.hierarchy_design import HierarchySolution


@dataclass(frozen=True)
class Coverage:
    """Coverage of the truth over R simulated releases of one table (one level of a hierarchy).

    ``covered``, ``width``, ``naive_covered``, ``naive_width``, ``low``, ``high``, ``published``: (R, units, d)
    arrays over releases, units and cells; ``stage_width``: (d,) the noise-stage interval's width 2·m_i (the
    margin of error at 95%).
    """

    name: str
    truth: np.ndarray
    covered: np.ndarray = field(repr=False)
    width: np.ndarray = field(repr=False)
    naive_covered: np.ndarray = field(repr=False)
    naive_width: np.ndarray = field(repr=False)
    stage_width: np.ndarray = field(repr=False)
    low: np.ndarray = field(repr=False)
    high: np.ndarray = field(repr=False)
    published: np.ndarray = field(repr=False)

    @property
    def coverage(self) -> float:
        return float(self.covered.mean())

    @property
    def coverage_se(self) -> float:
        return math.sqrt(self.coverage * (1 - self.coverage) / self.covered.size)

    @property
    def per_cell(self) -> np.ndarray:
        """Coverage of each (unit, cell) over the releases."""
        return self.covered.mean(axis=0)

    def summary(self) -> dict:
        """The figures a report or benchmark prints."""
        return {
            "name": self.name, "releases": int(self.covered.shape[0]), "cell_releases": int(self.covered.size),
            "coverage": self.coverage, "coverage_se": self.coverage_se,
            "worst_cell_coverage": float(self.per_cell.min()),
            "mean_width": float(self.width.mean()), "noise_stage_width": float(np.broadcast_to(
                self.stage_width, self.width.shape[1:]).mean()),
            "naive_coverage": float(self.naive_covered.mean()),
            "naive_worst_cell_coverage": float(self.naive_covered.mean(axis=0).min()),
            "naive_mean_width": float(self.naive_width.mean()),
        }


def _measure(name, truth, noisy, published, per_cell, bounds=None) -> Coverage:
    """Coverage of ``truth`` (units, d) by the intervals of each release in ``noisy`` (or the ``bounds`` computed
    for each release) and the naive ones."""
    truth = np.asarray(truth, dtype=float)
    y, pub = np.stack(noisy), np.stack(published).astype(float)
    if bounds is None:
        low, high = cell_intervals(y, per_cell["intervals"])
    else:
        low, high = (np.stack(side) for side in zip(*bounds))
    moe = np.array([np.nan if c["margin_of_error"] is None else c["margin_of_error"] for c in per_cell["cells"]])
    return Coverage(name, truth, (low <= truth) & (truth <= high), high - low,
                    (pub - moe <= truth) & (truth <= pub + moe), np.broadcast_to(2 * moe, pub.shape), 2 * moe,
                    low, high, pub)


def table_coverage(solution: Solution, table, releases: int, rng: np.random.Generator, values=None) -> Coverage:
    """R releases of the true ``table`` (the histogram the spec's query reads; for a marginal query, its
    true answers) through ``solution.mechanism.release``, each post-processed as the spec's ``postprocess``
    says (none: the released values are published).

    Parameters
    ----------
    values : array, optional
        The invariant values t = C·table (computed from ``table`` when None).
    """
    spec, mechanism = solution.spec, solution.mechanism
    marginal = uses_marginal_space(solution.problem.query)
    if marginal:
        answers = np.asarray(table, dtype=float)
        exact = noise_free_sets(mechanism)
    else:
        structure = spec_structure(solution.problem)
        answers = structure.queries @ np.asarray(table, dtype=float)
    noisy, published = [], []
    for _ in range(releases):
        y = mechanism.release(answers, rng)
        noisy.append(y[None, :])
        if spec.postprocess is None:
            published.append(y[None, :])
        elif marginal:
            published.append(postprocess_marginals(solution.problem.query.workload, y, spec.postprocess, exact,
                                                   spec.data.n).answers[None, :])
        else:
            published.append(postprocess_release(solution, y, table=None if values is not None else table,
                                                 values=values).answers[None, :])
    per_cell = solution.certificate["utility"]["per_cell"]
    bounds = None
    if "monte_carlo" in (per_cell.get("intervals") or {}):  # each release's interval around its published value
        if values is None and not marginal and spec.invariants:
            values = spec_structure(solution.problem).invariant_values(np.asarray(table, dtype=float))
        bounds = [tuple(b[None, :] for b in monte_carlo_bounds(solution, p[0], None if marginal else values))
                  for p in published]
    return _measure("table", answers[None, :], noisy, published, per_cell, bounds)


def hierarchy_coverage(design: HierarchySolution, truth: list[np.ndarray], parents: list[np.ndarray], releases: int,
                       rng: np.random.Generator) -> list[Coverage]:
    """R releases of a hierarchy whose true tables are ``truth`` (nation first, units × d each; ``parents`` as
    :func:`dpopt.postprocess.topdown` takes them), post-processed top-down as ``dpopt release`` does; one
    :class:`Coverage` per level."""
    spec = design.spec
    options = spec.postprocess or Postprocess()
    structure = spec_structure(design.problem)
    covariances = [mechanism_covariance(s.mechanism)[0] for s in design.solutions]
    nation_values, totals = None, None
    if spec.geography.exact_totals:
        structure = Structure(structure.queries, structure.labels, np.ones((1, structure.cells), dtype=np.int64),
                              ("total",), structure.shape)
        nation_values = [int(truth[0].sum())]
        totals = [level.sum(axis=1).astype(np.int64) for level in truth[1:]]
    noisy = [[] for _ in truth]
    published = [[] for _ in truth]
    for _ in range(releases):
        draw = [np.vstack([s.mechanism.release(row, rng) for row in level.astype(float)])
                for s, level in zip(design.solutions, truth)]
        result = topdown(draw, parents, structure, nation_values, covariances, options=options, unit_totals=totals)
        for depth, (y, out) in enumerate(zip(draw, result.tables)):
            noisy[depth].append(y)
            published[depth].append(out)
    return [_measure(name, t, n, p, s.certificate["utility"]["per_cell"])
            for name, t, n, p, s in zip(design.names, truth, noisy, published, design.solutions)]


__all__ = ["Coverage", "hierarchy_coverage", "table_coverage"]
