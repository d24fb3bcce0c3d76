"""Solving a release plan of 50 queries over a 20 × 20 × 5 table (target: under 30 s).

The plan (zCDP ρ = 1, add/remove): the total, the three one-way tables, the three two-way
tables, the full 2,000-cell table, and 42 range workloads (4 contiguous ranges each, over
one of the three attributes), with weights 1 to 3. The baseline measured in the same run is
the plain sum of the 50 single-query solves (``dpopt.solve``) at an equal split, i.e. what a
user splitting the budget by hand would run. Those certificates carry the second routes
(PLD of every query, Kolmogorov–Smirnov tests of every sampler coordinate); a plan's
certificate leaves them to ``dpopt verify``, whose time is printed too.

Prints the wall-clock time of ``solve_plan``, the baseline, the time of ``verify_plan``, the
ratio of the optimal allocation's weighted error to the equal split's, and the checks.

Run: python benchmarks/bench_plan.py
"""

from __future__ import annotations

import time

import numpy as np

import dpopt
from dpopt.plan import solve_plan, verify_plan
from dpopt.plan.spec import load_plan, query_spec

LEVELS = {"a": 20, "b": 20, "c": 5}


def ranges(levels: int, rng: np.random.Generator, rows: int = 4) -> list[list[int]]:
    out = []
    for _ in range(rows):
        lo, hi = sorted(rng.choice(levels + 1, size=2, replace=False))
        out.append([1 if lo <= k < hi else 0 for k in range(levels)])
    return out


def make_plan() -> dict:
    rng = np.random.default_rng(2026)
    queries = [{"name": "total", "query": {"kind": "count"}}]
    queries += [{"name": f"{x}", "query": {"kind": "histogram", "attribute": x}} for x in LEVELS]
    queries += [{"name": f"{x} x {y}", "query": {"kind": "contingency_table", "attributes": [x, y]}, "weight": 2}
                for x, y in (("a", "b"), ("a", "c"), ("b", "c"))]
    queries.append({"name": "a x b x c", "query": {"kind": "contingency_table", "attributes": ["a", "b", "c"]}})
    names = list(LEVELS)
    for k in range(42):
        attr = names[k % 3]
        queries.append({"name": f"ranges {k}", "weight": float(1 + k % 3),
                        "query": {"kind": "linear", "attribute": attr, "matrix": ranges(LEVELS[attr], rng)}})
    return {
        "dpopt": 1, "name": "benchmark plan: 50 queries over a 20x20x5 table",
        "data": {"attributes": {x: [f"{x}{i}" for i in range(n)] for x, n in LEVELS.items()}},
        "queries": queries, "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 1.0}},
        "mechanism": ["gaussian", "projected_gaussian", "laplace"],
    }


def main() -> None:
    document = make_plan()
    plan = load_plan(document)
    start = time.perf_counter()
    for i in range(len(plan.queries)):
        dpopt.solve(query_spec(plan, i, {"zcdp": {"rho": 1.0 / len(plan.queries)}}))
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    sol = solve_plan(document)
    elapsed = time.perf_counter() - start
    a = sol.certificate["allocation"]
    print(f"plan of {len(sol.designs)} queries over a 20x20x5 table: solve_plan {elapsed:.1f} s "
          f"(target < 30 s: {'met' if elapsed < 30 else 'NOT met'})")
    print(f"baseline, 50 single-query dpopt.solve at an equal split (with second routes): {baseline:.1f} s "
          f"(plan / baseline = {elapsed / baseline:.2f})")
    start = time.perf_counter()
    result = verify_plan(sol.certificate)
    print(f"verify_plan (every claim re-derived, second routes included): {time.perf_counter() - start:.1f} s, "
          f"{'holds' if result.passed else 'FAILED'} ({len(result.checks)} claims)")
    print(f"allocation: {a['method']}; weighted error optimal / equal split = {a['ratio_optimal_to_equal']:.4f}")
    for c in sol.certificate["checks"]:
        print(f"{c['claim']}: {'holds' if c['passed'] else 'FAILS'} ({c['detail'][:100]})")


if __name__ == "__main__":
    main()
