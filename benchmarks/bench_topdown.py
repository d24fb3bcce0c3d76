"""TopDown at scale: 1 nation, 50 states, 3,000 counties, a 2×6 table per unit, 10 M records.

Generates the records (Parquet, in a temporary folder), then times ``release_hierarchy``
end to end (budget split, one solve per level, DuckDB counts, one ``Mechanism.release`` per
unit, TopDown post-processing, exact checks, Monte Carlo error table), and separately the
post-processing alone (diagonal noise: closed form; correlated noise: one QP per parent), against
the baseline route that solves one joint problem per parent (null-space least squares, cvxpy QP,
integer program), timed on a few states and extrapolated per parent.

Run: python benchmarks/bench_topdown.py [--records 10000000] [--error-draws 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from dpopt.postprocess import table_structure, topdown
from dpopt.postprocess.hierarchy import _per_parent
from dpopt.release import sources
from dpopt.release.hierarchy import release_hierarchy
from dpopt.spec.models import Postprocess

STATES, COUNTIES = 50, 3000

SPEC = {
    "dpopt": 1,
    "name": "bench: sex by age for the nation, 50 states, 3000 counties",
    "data": {"attributes": {"sex": ["0", "1"], "age": ["0", "1", "2", "3", "4", "5"]}},
    "query": {"kind": "contingency_table", "attributes": ["sex", "age"]},
    "adjacency": {"kind": "add_remove"},
    "privacy": {"zcdp": {"rho": 1.0}},
    "mechanism": "gaussian",
    "postprocess": {"nonnegative": True, "integer": True, "consistent": True},
    "geography": {"levels": ["state", "county"], "shares": "optimal", "weights": [1, 1, 2]},
}


def generate(path: Path, records: int, seed: int = 0) -> None:
    """Records with skewed county sizes (log-normal), written to Parquet by DuckDB."""
    rng = np.random.default_rng(seed)
    county_state = np.sort(np.concatenate([np.arange(STATES), rng.integers(0, STATES, COUNTIES - STATES)]))
    weight = rng.lognormal(0.0, 1.5, COUNTIES)
    county = rng.choice(COUNTIES, size=records, p=weight / weight.sum()).astype(np.int32)
    table = {
        "state": county_state[county].astype(np.int16),
        "county": (county_state[county] * 1000 + county).astype(np.int32),
        "sex": rng.integers(0, 2, records, dtype=np.int8),
        "age": rng.choice(6, size=records, p=[0.22, 0.16, 0.2, 0.25, 0.13, 0.04]).astype(np.int8),
    }
    con = sources.connect()
    con.register("records", table)
    con.execute(f"COPY records TO {sources.quote_literal(str(path))} (FORMAT parquet)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--error-draws", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "records.parquet"
        start = time.perf_counter()
        generate(data, args.records)
        print(f"generated {args.records:,} records in {time.perf_counter() - start:.1f} s")

        start = time.perf_counter()
        rel = release_hierarchy(SPEC, data, seed=1, insecure_seed=True, error_draws=0)
        total = time.perf_counter() - start
        print(f"release + TopDown, {len(rel.keys[1])} states, {len(rel.keys[2])} counties: {total:.1f} s "
              f"(target < 300 s); checks {'all hold' if all(c['passed'] for c in rel.block['checks']) else 'FAIL'}")

        structure = table_structure((2, 6))
        start = time.perf_counter()
        topdown(list(rel.noisy), list(rel.parents), structure)
        fast = time.perf_counter() - start
        print(f"TopDown post-processing alone (closed form, vectorised): {fast:.3f} s")

        correlated = 9.0 * np.eye(12) + 0.5  # a correlated noise covariance: NNLS is one QP per parent
        start = time.perf_counter()
        topdown(list(rel.noisy), list(rel.parents), structure, covariances=[correlated] * 3)
        print(f"TopDown with correlated noise (mean shift, one cvxpy QP per parent): {time.perf_counter() - start:.1f} s")

        nation_total = table_structure((2, 6), total=True)
        truth_totals = [t.sum(axis=1) for t in rel.tables[1:]]  # stand-ins for the published unit totals
        start = time.perf_counter()
        topdown(list(rel.noisy), list(rel.parents), nation_total, [int(rel.tables[0].sum())], unit_totals=truth_totals)
        print(f"TopDown with exact unit totals (two-way tables, QP and min-cost flow per parent): "
              f"{time.perf_counter() - start:.1f} s")

        few = 3
        keep = np.isin(rel.parents[1], np.arange(few))
        start = time.perf_counter()
        _per_parent(rel.noisy[2][keep], rel.parents[1][keep], rel.tables[1][:few], structure, None, Postprocess(), "numpy")
        per_parent = (time.perf_counter() - start) / few
        baseline = per_parent * (len(rel.keys[1]) + 1)
        print(f"baseline, one joint cvxpy + integer program per parent: {per_parent:.2f} s per state, "
              f"≈ {baseline:.0f} s for the hierarchy (extrapolated); closed form is {baseline / fast:.0f}× faster")

        if args.error_draws:
            start = time.perf_counter()
            release_hierarchy(SPEC, data, seed=1, insecure_seed=True, error_draws=args.error_draws)
            print(f"with the Monte Carlo error table ({args.error_draws} simulated releases): "
                  f"{time.perf_counter() - start:.1f} s")
    print("(timings on a shared 2-core machine: noisy)")


if __name__ == "__main__":
    main()
