"""Benchmark: the per-cell orbits of a K-norm histogram (:func:`dpopt.certificate.per_cell.cell_orbits`), against an
earlier revision.

The case a user hit: an L-cell histogram, replace-one, pure ε = 1, ``mechanism: k_norm``, ``utility: {metric: l2}``.
K-norm (the lattice cross-polytope up to rank 1,024, the floating-point ball above; the ball above rank 64 when this
benchmark was written) reports per-cell errors by a Monte Carlo pooled over the cell orbits of the L(L − 1) neighbouring differences; ``dpopt verify`` recomputes them. Each size runs in a fresh
interpreter; printed: the CPU time (``time.process_time``, imports excluded) of ``dpopt.solve``, of the
``cell_orbits`` calls within it, of ``dpopt.verify`` of its certificate, and a digest of the certificate's per-cell
block, for this tree and, with ``--baseline REV``, for the tree of git revision REV (``git archive`` into a
temporary folder) in the same run: the digests must agree. ``--orbits`` times ``cell_orbits`` alone on the
histogram's differences (no solve) at the sizes given.

Run ``python benchmarks/bench_cell_orbits.py [--sizes 40,70,100] [--baseline REV] [--orbits 100,300]`` (the
baseline before this work, 38b785c, takes minutes from 70 cells: O(L⁴)).
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

ROOT = baseline_tree.ROOT

CHILD = """
import hashlib, json, sys, time
import dpopt
from dpopt.certificate import per_cell
size = int(sys.argv[1])
spent = [0.0]
inner = per_cell.cell_orbits
def timed(*args):
    start = time.process_time()
    try:
        return inner(*args)
    finally:
        spent[0] += time.process_time() - start
per_cell.cell_orbits = timed
spec = {"dpopt": 1, "name": "k", "data": {"attributes": {"a": [f"v{i}" for i in range(size)]}, "n": 1000},
        "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": "replace_one"},
        "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": {"metric": "l2"}}
start = time.process_time()
solution = dpopt.solve(spec)
solve, in_solve = time.process_time() - start, spent[0]
start = time.process_time()
report = dpopt.verify(solution.certificate)
verify = time.process_time() - start
block = json.dumps(solution.certificate.data["utility"]["per_cell"], sort_keys=True)
print(json.dumps([solve, in_solve, verify, spent[0] - in_solve, bool(report.passed),
                  hashlib.sha256(block.encode()).hexdigest()[:12]]))
"""

ORBITS = """
import sys, time
import numpy as np
from dpopt.certificate.per_cell import cell_orbits
size = int(sys.argv[1])
eye = np.eye(size)
vectors = (eye[:, None, :] - eye[None, :, :]).reshape(-1, size)
vectors = vectors[np.any(vectors != 0, axis=1)]
for name, listed in (("replace-one", vectors), ("weighted, no symmetry", vectors * (1 + np.arange(size) / 1000))):
    start = time.process_time()
    orbits = cell_orbits([f"a=v{i}" for i in range(size)], listed)
    print(f"cell_orbits, {size} cells, {name} ({len(listed)} differences): {time.process_time() - start:.3f} s "
          f"CPU, {len(set(orbits.tolist()))} orbit(s)", flush=True)
"""


def _run(tree: Path, code: str, size: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", code, str(size)], cwd=tree, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="40,70,100")
    parser.add_argument("--baseline", default="", help="a git revision to time in the same run")
    parser.add_argument("--orbits", default="100,300", help="sizes at which to time cell_orbits alone")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trees = baseline_tree.trees(options.baseline, Path(folder))
        print(f"{'cells':>5s} {'tree':12s} {'solve s':>8s} {'orbits s':>9s} {'verify s':>9s} {'orbits s':>9s} "
              f"{'verified':>8s} {'per-cell digest':>16s}")
        for size in (int(s) for s in options.sizes.split(",") if s):
            for name, tree in trees.items():
                solve, in_solve, verify, in_verify, passed, digest = json.loads(
                    _run(tree, CHILD, size).splitlines()[-1])
                print(f"{size:5d} {name:12s} {solve:8.2f} {in_solve:9.2f} {verify:9.2f} {in_verify:9.2f} "
                      f"{passed!s:>8s} {digest:>16s}", flush=True)
    for size in (int(s) for s in options.orbits.split(",") if s):
        print(_run(ROOT, ORBITS, size), flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
