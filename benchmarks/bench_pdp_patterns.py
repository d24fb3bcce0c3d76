"""Benchmark: the exact pDP level of a person's moves (``gaussian`` on the lattice under pDP), against an earlier
revision.

Two person-level specs over attributes of 3 × 2 × 3 levels, (ε, δ) = (1, 10⁻³)-pDP, replace-one: the 2-way
marginals with a privacy unit of at most 3 rows (138 move patterns), and the 1-way marginals with at most 4 rows in
at most 2 cells, 3 per cell (256 patterns). For each tree, ``dpopt solve SPEC --json`` then ``dpopt verify`` of its
certificate run as fresh processes; printed: their CPU time (user + system of the child, imports included), the
σ_ℤ² found and the certified level, for this tree and, with ``--baseline REV``, for the tree of git revision REV
(``git archive`` into a temporary folder) in the same run, and the load average.

Run ``python benchmarks/bench_pdp_patterns.py [--baseline REV]``. Against the code before this work
(``--baseline ce9da87``; one run at load 8.6 on 2 cores): solve 19.95 → 2.02 s and 47.31 → 2.07 s, verify
2.97 → 1.82 s and 9.35 → 1.90 s of CPU, σ_ℤ² = 597 and 930 and the certified levels unchanged (a run at load 5:
19.52 → 1.85, 54.16 → 2.20, verify 3.21 → 1.55 and 11.51 → 1.40). Of this tree's verify, about 0.4 s are imports,
0.5–0.7 s the enumeration of the 2-way case's 663,310 cell sequences, 0.13 s (2-way) and 0.56 s (1-way) the levels.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import baseline_tree

ATTRIBUTES = {"a": ["x", "y", "z"], "b": ["u", "v"], "c": ["p", "q", "r"]}
CASES = {
    "2-way, <=3 rows": ({"kind": "marginals", "all_of_size": 2}, {"max_rows": 3}),
    "1-way, <=4 rows, <=2 cells, <=3 per cell": ({"kind": "marginals", "all_of_size": 1},
                                                 {"max_rows": 4, "max_groups": 2, "max_rows_per_group": 3}),
}


def spec(query: dict, unit: dict) -> dict:
    return {"dpopt": 1, "name": "person-level marginals under pDP",
            "data": {"attributes": ATTRIBUTES, "privacy_unit": {"id": "pid", **unit}},
            "query": query, "adjacency": {"kind": "replace_one"},
            "privacy": {"pdp": {"epsilon": 1, "delta": 1e-3}}, "mechanism": "gaussian", "utility": {"metric": "l2"}}


def _cpu(tree: Path, *args: str) -> tuple[float, str]:
    """CPU seconds (user + system) of ``python -m dpopt.cli ARGS`` run on ``tree``, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "dpopt.cli", *args], cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"dpopt {args[0]} failed on {tree}: {done.stdout[-500:]} {done.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="", help="a git revision to time in the same run")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trees = baseline_tree.trees(options.baseline, Path(folder))
        print(f"{'case':42s} {'tree':10s} {'solve s':>8s} {'verify s':>9s} {'sigma_Z^2':>10s}  level")
        for name, (query, unit) in CASES.items():
            path = Path(folder) / "spec.json"
            path.write_text(json.dumps(spec(query, unit)))
            for label, tree in trees.items():
                solve, out = _cpu(tree, "solve", str(path), "--json")
                certificate = Path(folder) / "certificate.json"
                certificate.write_text(out)
                verify, _ = _cpu(tree, "verify", str(certificate))
                record = json.loads(out)
                (check,) = [c for c in record["checks"] if c["claim"] == "privacy"]
                print(f"{name:42s} {label:10s} {solve:8.2f} {verify:9.2f} "
                      f"{record['mechanism']['parameters']['lattice_sigma2']:>10s}  "
                      f"{check['detail'].split('δ(v) ≤ ')[1].split(' ')[0]}", flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
