"""Counting many marginals of many attributes in bounded memory (issue 38: synthesis at 30 attributes × 10⁶ records).

:func:`dpopt.release.sources.marginals_by_key` counts every table in one ``GROUPING SETS`` query. Computed over the
level codes in a subquery, DuckDB (2.0) held ~1 GB for the 435 pairs of 30 attributes × 10⁵ records and ~2 GB at
10⁶ (``benchmarks/bench_synthesize_scale.py``; the old query fails here at a 400 MB limit); over a temporary table
of the codes it needs under 200 MB at 10⁵. The test runs a smaller file under a DuckDB memory limit that the
subquery form exceeds, and checks every count against numpy's own tabulation (an independent count).
"""

from __future__ import annotations

import itertools

import numpy as np

from dpopt.problem import compile
from dpopt.release import sources

ATTRIBUTES, RECORDS, LEVELS = 30, 20_000, 3


def test_all_pairs_of_30_attributes_are_counted_under_a_memory_limit(tmp_path):
    rng = np.random.default_rng(0)
    data = rng.integers(0, LEVELS, size=(RECORDS, ATTRIBUTES))
    names = [f"a{j:02d}" for j in range(ATTRIBUTES)]
    path = tmp_path / "records.csv"
    np.savetxt(path, data, fmt="%d", delimiter=",", header=",".join(names), comments="")
    pairs = [list(p) for p in itertools.combinations(names, 2)]
    problem = compile({"dpopt": 1, "name": "all pairs", "adjacency": "add_remove",
                       "data": {"attributes": {a: list(range(LEVELS)) for a in names}},
                       "query": {"kind": "marginals", "attributes": pairs},
                       "privacy": {"zcdp": {"rho": 1.0}}, "utility": {"metric": "l2"}})
    con = sources.connect()
    con.execute("SET memory_limit = '150MB'")
    con.execute("SET threads = 1")
    value, records = sources.answer(con, sources.open_source(path), problem.spec, query=problem.query)
    assert records == RECORDS
    workload, used = problem.query.workload, list(problem.query.attributes)
    for s, table in zip(workload.sets, workload.tables(value)):
        a, b = (names.index(used[k]) for k in s)
        expected = np.bincount(data[:, a] * LEVELS + data[:, b], minlength=LEVELS * LEVELS).reshape(LEVELS, LEVELS)
        assert np.array_equal(table, expected), (used[s[0]], used[s[1]])
