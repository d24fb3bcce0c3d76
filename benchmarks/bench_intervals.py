"""Benchmark: coverage and width of the intervals for true values, against the naive interval, on sparse tables.

For each case the script draws ``--releases`` independent releases of a known true table (sparse: most cells 0),
post-processes each as ``dpopt release`` does, and measures on the same releases

* dpopt's interval (``ci_95_low``/``ci_95_high``: the noise-stage value ± its 95% margin, cut to non-negative
  whole numbers; :mod:`dpopt.certificate.intervals`) and
* the naive interval: the published (post-processed) value ± the noise-stage 95% margin of error;

printing the coverage of all cell-releases (± its binomial standard error), the worst cell's coverage over the
releases, and the mean width (with the noise-stage interval's width 2·margin for comparison). Cases:

1. the issue's example (``specs/sparse_histogram_intervals_zcdp.yaml``: 20 cells 30, 30, 1 and seventeen 0,
   total exact, ρ = 0.05, non-negative + integer + consistent);
   the same with ``mechanism: auto`` (the default exact sampler: ``marginal_gaussian`` on the lattice, intervals
   from the sub-Gaussian bound);
   and the same with ``intervals: {method: monte_carlo, draws: 100}`` (approximate: around the published value,
   from releases simulated at the published table), with the coverage of the cells of 30, 30 and 1;
2. a 12 × 2 table without invariants (3 occupied cells), non-negative + integer;
3. the same table released by James–Stein shrinkage (rotated, n = 16 public, μ = 0.3): the interval built on the
   two stage values the shrunk release inverts to (no post-processing);
4. a 3-level hierarchy (``specs/hierarchy_topdown_zcdp.yaml``: nation, 3 states, 6 counties, 3 occupied cells of
   12 per county), TopDown;
5. all two-way marginals of 8 attributes (4 levels each, 28 tables, 448 counts; 200 skewed records),
   consistent, non-negative, integer in marginal space, measured exactly on the lattice (``sampler: exact``,
   the default: intervals from the sub-Gaussian bound of the discrete Gaussian).

The sparse tables are :mod:`dpopt.report.sparse_cases` (the tests' too).

Run ``python benchmarks/bench_intervals.py [--releases 60] [--seed 2026]``; every figure is measured in the run.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

import dpopt
from dpopt.release import solve_hierarchy, sources
from dpopt.report.coverage import hierarchy_coverage, table_coverage
from dpopt.report.sparse_cases import ISSUE_TRUTH, TABLE_12X2, skewed_records, sparse_hierarchy, table_12x2_truth

ROOT = Path(__file__).resolve().parents[1]


def issue_example(releases: int, rng):
    solution = dpopt.solve(ROOT / "specs/sparse_histogram_intervals_zcdp.yaml")
    return [("20-cell histogram, total exact (issue 37)", table_coverage(solution, ISSUE_TRUTH, releases, rng))]


def issue_example_exact(releases: int, rng):
    spec = yaml.safe_load((ROOT / "specs/sparse_histogram_intervals_zcdp.yaml").read_text())
    solution = dpopt.solve(spec | {"mechanism": "auto"})  # the default sampler: exact, on the lattice
    name = f"  the same, mechanism auto ({solution.mechanism.family}, {solution.mechanism.sampler})"
    return [(name, table_coverage(solution, ISSUE_TRUTH, releases, rng))]


def monte_carlo(releases: int, rng):
    spec = yaml.safe_load((ROOT / "specs/sparse_histogram_intervals_zcdp.yaml").read_text())
    solution = dpopt.solve(spec | {"intervals": {"method": "monte_carlo", "draws": 100}})
    return [("  the same, monte_carlo intervals (100 draws)", table_coverage(solution, ISSUE_TRUTH, releases, rng))]


def single_table(releases: int, rng):
    return [("12x2 table, no invariant", table_coverage(dpopt.solve(TABLE_12X2), table_12x2_truth(), releases, rng))]


def james_stein(releases: int, rng):
    spec = TABLE_12X2 | {"adjacency": "replace_one", "privacy": {"gdp": {"mu": 0.3}}, "mechanism": "james_stein",
                         "data": TABLE_12X2["data"] | {"n": 16}}
    spec.pop("postprocess")
    spec.pop("sampler")
    return [("12x2 table, James-Stein (rotated), n = 16", table_coverage(dpopt.solve(spec), table_12x2_truth(),
                                                                         releases, rng))]


def hierarchy(releases: int, rng):
    design = solve_hierarchy(yaml.safe_load((ROOT / "specs/hierarchy_topdown_zcdp.yaml").read_text()))
    truth, parents = sparse_hierarchy(rng, (3, 2), 12, 3)
    results = hierarchy_coverage(design, truth, parents, releases, rng)
    return [(f"hierarchy: {r.name}", r) for r in results]


def marginals(releases: int, rng):
    attributes = {f"x{i}": ["a", "b", "c", "d"] for i in range(8)}  # 65,536 cells: marginal space
    spec = {"dpopt": 1, "name": "8-attribute two-way marginals", "data": {"attributes": attributes},
            "query": {"kind": "marginals", "all_of_size": 2}, "adjacency": "add_remove",
            "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "marginal_gaussian",
            "postprocess": {"nonnegative": True, "integer": True, "consistent": True}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "people.csv"
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(list(attributes))
            writer.writerows(skewed_records(attributes, 200, 0.8, rng))  # level a 0.8, b 0.16, c 0.032, d 0.008
        solution = dpopt.solve(spec)
        truth, _ = sources.answer(sources.connect(), sources.open_source(path), solution.spec,
                                  query=solution.problem.query)
    name = f"8-attr 2-way marginals (448, {solution.mechanism.sampler})"
    return [(name, table_coverage(solution, truth, releases, rng))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    header = (f"{'case':46} {'cells':>5} {'coverage':>15} {'worst cell':>10} {'width':>7} {'stage width':>11}"
              f" {'naive cov.':>10} {'naive worst':>11} {'naive width':>11}")
    print(f"{args.releases} releases per case, seed {args.seed}; coverage ± binomial SE over all cell-releases")
    print(header)
    for case in (issue_example, issue_example_exact, monte_carlo, single_table, james_stein, hierarchy, marginals):
        start = time.perf_counter()
        for name, result in case(args.releases, rng):
            s = result.summary()
            print(f"{name:46} {result.truth.size:5d} {s['coverage']:8.4f} ± {s['coverage_se']:.4f} "
                  f"{s['worst_cell_coverage']:10.3f} {s['mean_width']:7.2f} {s['noise_stage_width']:11.2f} "
                  f"{s['naive_coverage']:10.4f} {s['naive_worst_cell_coverage']:11.3f} {s['naive_mean_width']:11.2f}")
            truth = np.asarray(result.truth, dtype=float).reshape(-1)
            occupied = np.flatnonzero(truth > 0)
            if len(occupied) <= 5:  # the cells post-processing biases most: their own coverage
                cover = result.per_cell.reshape(-1)
                print(f"{'':46} occupied cells (truth: coverage): " + ", ".join(
                    f"{truth[i]:g}: {cover[i]:.3f}" for i in occupied) + f"; zeros' worst {np.delete(cover, occupied).min():.3f}")
        print(f"{'':46} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
