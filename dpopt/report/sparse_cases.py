"""The sparse tables on which the coverage of intervals is measured: one builder for the report's simulation, the
benchmark (``benchmarks/bench_intervals.py``), the tests and the docs.

Sparse tables are where post-processing biases the published values most (non-negativity pushes zeros up, an
exact total pulls the large cells down), so an interval's coverage is checked there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ISSUE_TRUTH = np.array([0, 0, 30, 0, 0, 0, 30, 0, 0, 0, 0, 1] + [0] * 8, float)
"""The example of issue 37 (``specs/sparse_histogram_intervals_zcdp.yaml``): 20 cells, two of 30, one of 1."""

TABLE_12X2 = {"dpopt": 1, "name": "sparse 12x2", "data": {"attributes": {"a": [f"a{i}" for i in range(12)],
                                                                          "b": ["x", "y"]}},
              "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": "add_remove",
              "privacy": {"zcdp": {"rho": 0.1}}, "mechanism": "gaussian", "sampler": "floating_point",
              "postprocess": {"nonnegative": True, "integer": True, "consistent": True}}
"""A 12 × 2 table without invariants, post-processed to consistent non-negative whole numbers."""


def table_12x2_truth() -> np.ndarray:
    """The 12 × 2 table's truth: three occupied cells (12, 1, 3), 21 zeros."""
    truth = np.zeros(24)
    truth[[0, 5, 17]] = [12, 1, 3]
    return truth


def sparse_hierarchy(rng: np.random.Generator, children: Sequence[int], cells: int,
                     occupied: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A sparse hierarchy: a nation, ``children[l]`` units under every unit of level l; at the bottom ``occupied``
    cells of each unit hold 1 to 8 records (the others 0), every upper table the sum of its units.

    Returns
    -------
    truth, parents
        The true tables (nation first, units × cells) and each lower level's parent indices, as
        :func:`dpopt.report.coverage.hierarchy_coverage` takes them.
    """
    units, parents = [1], []
    for k in children:
        parents.append(np.repeat(np.arange(units[-1], dtype=np.int64), k))
        units.append(units[-1] * k)
    bottom = np.zeros((units[-1], cells))
    for row in bottom:
        row[rng.choice(cells, occupied, replace=False)] = rng.integers(1, 9, occupied)
    truth = [bottom]
    for parent, count in zip(reversed(parents), reversed(units[:-1])):
        truth.insert(0, np.vstack([truth[0][parent == u].sum(axis=0) for u in range(count)]))
    return truth, parents


def skewed_records(attributes: dict, records: int, p: float, rng: np.random.Generator) -> list[list[str]]:
    """``records`` rows over ``attributes`` (name → levels), each value independently the level of index
    min(G − 1, last) with G geometric(p) − 1: the first level with probability p, then geometrically fewer (a
    skewed table whose marginals have many zero cells)."""
    return [[levels[min(int(rng.geometric(p)) - 1, len(levels) - 1)] for levels in attributes.values()]
            for _ in range(records)]


__all__ = ["ISSUE_TRUTH", "TABLE_12X2", "skewed_records", "sparse_hierarchy", "table_12x2_truth"]
