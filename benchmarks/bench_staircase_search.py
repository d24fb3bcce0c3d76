"""Benchmark: the staircase's calibration on its exact privacy profile (issue 36), against an earlier revision.

The staircase raises ε₀ above the generic conversion until its exact profile meets an (ε, δ), ρ-zCDP or μ-GDP
target (:func:`dpopt.mechanisms.staircase._raise_epsilon0`), for each candidate step Δ₀. The case is the one that
took minutes: the three statistics of ``specs/age_summary_ci_volume.yaml`` (count, total age, seniors; add/remove,
five move patterns, 24 candidate steps) with the l2 workload of ``tests/test_auto_design.py``'s "age l2 workload".
Each design runs in a fresh interpreter; printed: its CPU time (``time.process_time``, imports excluded), ε₀, Δ₀
and the l2 error, for this tree and, with ``--baseline REV``, for the tree of git revision REV (``git archive``
into a temporary folder) in the same run: the certified numbers must agree.

Run ``python benchmarks/bench_staircase_search.py [--targets approx,zcdp,gdp] [--baseline REV]`` (the baseline
before this work, 5b05434, took 21.6 s and 23.5 s of CPU for (ε, δ) and ρ at load 15, against 1.6 s and 3.8 s; its μ-GDP
search takes many minutes).
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
TARGETS = {"approx": {"epsilon": 1.0, "delta": 1e-6}, "zcdp": {"rho": 0.5}, "gdp": {"mu": 1.0}}

CHILD = """
import json, sys, time
import dpopt
from dpopt.mechanisms.staircase import StaircaseMechanism
spec = dpopt.load_spec(sys.argv[1]).model_dump(mode="json", exclude_none=True)
spec = dpopt.load_spec({**spec, "mechanism": "staircase", "privacy": json.loads(sys.argv[2]),
                        "utility": {"metric": "l2", "workload": [[1, 0, 0], [0, 1, 0], [1, 0, -1]]}})
problem = dpopt.compile(spec)
start = time.process_time()
mechanism, value = StaircaseMechanism.design_with_value(problem)
print(json.dumps([time.process_time() - start, mechanism.parameters, value]))
"""


def _design(tree: Path, target: str) -> tuple[float, dict, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "specs" / "age_summary_ci_volume.yaml"),
                           json.dumps({target: TARGETS[target]})], cwd=tree, env=env, capture_output=True,
                          text=True, check=True)
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="approx,zcdp,gdp")
    parser.add_argument("--baseline", default="", help="a git revision to time in the same run")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trees = baseline_tree.trees(options.baseline, Path(folder))
        print(f"{'target':8s} {'tree':12s} {'CPU s':>8s}  {'epsilon0':>22s} {'step':>20s} {'l2':>20s}")
        for target in options.targets.split(","):
            for name, tree in trees.items():
                cpu, parameters, value = _design(tree, target)
                print(f"{target:8s} {name:12s} {cpu:8.2f}  {parameters['epsilon0']!r:>22s} "
                      f"{parameters['step']!r:>20s} {value!r:>20s}", flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
