"""Benchmark: K-norm on L-cell histograms above rank 64 (the lattice cross-polytope, its echelon basis and the
excess-cost lower bound), against an earlier revision.

The cases: an L-cell histogram, replace-one or add/remove, pure ε = 1, ``utility: {metric: l2}``, with
``mechanism: k_norm`` (the lattice cross-polytope up to ``CROSS_MAX_RANK``, before this work up to rank 64),
``mechanism: k_norm`` with ``sampler: floating_point`` (the norm ball, whose certificate carries the greedy lower
bound ``k_norm.excess_cost``) and ``mechanism: auto``. Each case runs in a fresh interpreter; printed: the wall time
of ``dpopt.solve``, of ``dpopt.verify`` of its certificate (k_norm only), K (``norm_ball``), E‖Z‖² as the
certificate states it, whether it carries the idealized-numerics note, and the family ``auto`` chose; for this
tree and, with ``--baseline REV``, for the tree of git revision REV (``git archive`` into a temporary folder) in
the same run, with the ratio baseline/this tree of each time. A replace-one histogram above 271 cells cannot list
its differences (20·10⁶ entries) and keeps the l2 ball in both trees. ``--bound SIZES`` times
:func:`dpopt.mechanisms.k_norm.optimal_cost_lower_bound` alone (the ball's ``k_norm.excess_cost``) on the listed
differences of a replace-one histogram of each size, with its value (equal in both trees).

Run ``python benchmarks/bench_k_norm_cross.py [--sizes 100,200,500] [--adjacency replace_one,add_remove]
[--cases k_norm,floating_point,auto] [--repeat 2] [--baseline REV] [--bound 100,200]`` (the revision before this
work: e338315).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import baseline_tree

CHILD = """
import json, sys, time
import dpopt
size, adjacency, case = int(sys.argv[1]), sys.argv[2], sys.argv[3]
spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": [f"v{i}" for i in range(size)]}, "n": 1000},
        "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": adjacency},
        "privacy": {"pure": {"epsilon": 1.0}}, "utility": {"metric": "l2"},
        "mechanism": "auto" if case == "auto" else "k_norm"}
if case == "floating_point":
    spec["sampler"] = "floating_point"
start = time.perf_counter()
solution = dpopt.solve(spec)
solve = time.perf_counter() - start
verify, passed = None, None
if case != "auto":
    start = time.perf_counter()
    passed = bool(dpopt.verify(solution.certificate).passed)
    verify = time.perf_counter() - start
data = solution.certificate.data
print(json.dumps([solve, verify, passed, data["mechanism"]["family"],
                  data["mechanism"]["parameters"].get("norm_ball", "-"), data["utility"]["value"],
                  "idealized" in json.dumps(data)]))
"""

BOUND = """
import json, sys, time
import dpopt
from dpopt.mechanisms.k_norm import optimal_cost_lower_bound
size = int(sys.argv[1])
spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": [f"v{i}" for i in range(size)]}, "n": 1000},
        "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": "replace_one"},
        "privacy": {"pure": {"epsilon": 1.0}}}
space = dpopt.derive(dpopt.load_spec(spec))
vectors, basis = space.vectors(), space.span.basis()
start = time.perf_counter()
bound, _ = optimal_cost_lower_bound(vectors, basis, 1.0)
print(json.dumps([time.perf_counter() - start, bound]))
"""


def _run(tree: Path, size: int, adjacency: str, case: str, code: str = CHILD) -> list:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code, str(size), adjacency, case], cwd=tree, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _seconds(values: list[float | None]) -> str:
    return "-" if values[0] is None else "/".join(f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,200,500")
    parser.add_argument("--adjacency", default="replace_one,add_remove")
    parser.add_argument("--cases", default="k_norm,floating_point,auto")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--baseline", default="", help="a git revision to time in the same run")
    parser.add_argument("--bound", default="", help="sizes at which to time the excess-cost lower bound alone")
    options = parser.parse_args()
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        trees = baseline_tree.trees(options.baseline, Path(folder))
        print(f"{'cells':>5s} {'adjacency':11s} {'case':14s} {'tree':10s} {'solve s':>17s} {'verify s':>17s} "
              f"{'verified':>8s} {'family':>16s} {'K':>22s} {'E‖Z‖²':>11s} idealized")
        for size in (int(s) for s in options.sizes.split(",") if s):
            for adjacency in options.adjacency.split(","):
                for case in options.cases.split(","):
                    best = {}
                    for name, tree in trees.items():
                        runs = [_run(tree, size, adjacency, case) for _ in range(options.repeat)]
                        solve, verify = [r[0] for r in runs], [r[1] for r in runs]
                        _, _, passed, family, ball, value, idealized = runs[-1]
                        best[name] = (min(solve), None if verify[0] is None else min(verify))
                        print(f"{size:5d} {adjacency:11s} {case:14s} {name[:10]:10s} {_seconds(solve):>17s} "
                              f"{_seconds(verify):>17s} {passed!s:>8s} {family:>16s} {ball:>22s} {value:11.1f} "
                              f"{idealized}", flush=True)
                    if len(best) == 2:
                        (_, (s1, v1)), (_, (s0, v0)) = best.items()
                        ratio = f"solve {s0 / s1:.2f}x" + ("" if v1 is None else f", verify {v0 / v1:.2f}x")
                        print(f"{'':5s} {'':11s} {'':14s} {'ratio':10s} baseline/this tree (best of runs): {ratio}",
                              flush=True)
        for size in (int(s) for s in options.bound.split(",") if s):
            for name, tree in trees.items():
                seconds, bound = _run(tree, size, "replace_one", "bound", BOUND)
                print(f"lower bound, {size}-cell replace-one histogram, {name}: {seconds:.3f} s, value {bound!r}",
                      flush=True)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
