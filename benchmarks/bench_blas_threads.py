"""Benchmark: a solve and its verification under a synthetic load, OpenBLAS's default threads against one.

OpenBLAS starts one thread per core and lets waiting threads spin; on a machine whose cores are busy,
that spinning took ten times the CPU of the range example (issue 36: 35.8 s of CPU and 199 s of wall
time instead of 3.6 s and 17 s, at load 14 on two cores). :func:`dpopt.core.blas.one_blas_thread`
now limits BLAS to one thread during a solve and a verification, so both settings should cost the same.

The script starts ``--load`` busy loops (``python -c "while True: pass"``, stopped at the end), then
runs ``dpopt.solve`` and ``dpopt.verify`` on ``--spec`` in a fresh interpreter twice: with the
environment as it is, and with ``OPENBLAS_NUM_THREADS=1``; it prints the CPU and wall time of each
(CPU from ``time.process_time`` inside the child, imports included).

Run ``python benchmarks/bench_blas_threads.py [--spec PATH] [--load N] [--timeout SECONDS]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, os, sys, time
t0, w0 = time.process_time(), time.perf_counter()
import dpopt
solution = dpopt.solve(sys.argv[1])
t1, w1 = time.process_time(), time.perf_counter()
verification = dpopt.verify(solution.certificate)
t2, w2 = time.process_time(), time.perf_counter()
print(json.dumps({"solve_cpu": t1 - t0, "solve_wall": w1 - w0, "verify_cpu": t2 - t1, "verify_wall": w2 - w1,
                  "passed": bool(verification.passed), "family": solution.mechanism.family}))
"""


def _run(spec: str, env: dict, timeout: float) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, spec], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="specs/range_marginals_age_prefix_zcdp.yaml")
    parser.add_argument("--load", type=int, default=4, help="busy loops to start (0: none)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per run")
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("OPENBLAS_NUM_THREADS", None)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(options.load)]
    try:
        one = {**env, "OPENBLAS_NUM_THREADS": "1"}
        rows = [("default threads", _run(options.spec, env, options.timeout)),
                ("OPENBLAS_NUM_THREADS=1", _run(options.spec, one, options.timeout))]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"{options.spec} with {options.load} busy loops on {os.cpu_count()} cores "
          f"(load average {os.getloadavg()[0]:.1f} at the end)")
    for name, r in rows:
        print(f"  {name:24s} solve CPU {r['solve_cpu']:6.1f} s, wall {r['solve_wall']:6.1f} s; "
              f"verify CPU {r['verify_cpu']:6.1f} s, wall {r['verify_wall']:6.1f} s; {r['family']}, "
              f"{'verified' if r['passed'] else 'NOT VERIFIED'}")


if __name__ == "__main__":
    main()
