"""Benchmark: wall time of ``dpopt solve`` and ``dpopt verify`` on every example spec (issue 26).

Each spec of ``specs/`` is solved and its certificate verified by the command line, each in a
fresh interpreter (so the figures include start-up, as a user sees them), one after the other;
the table is printed slowest first (solve + verify). The target is < 10 s for each (wall time).
Beside each wall time is the child's CPU time (user + system, from ``getrusage``): on a machine
shared with other jobs the wall time grows with the load average (printed before and after), the
CPU time much less.

Run ``python benchmarks/bench_examples.py [--only SUBSTRING] [--timeout SECONDS] [--python]``.
``--python`` times ``dpopt.solve`` and ``dpopt.verify`` instead, in one fresh interpreter per spec (CPU from
``time.process_time``, imports included). dpopt limits BLAS to one thread during a solve and a
verification (:mod:`dpopt.core.blas`), so ``OPENBLAS_NUM_THREADS`` need not be set any more.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 10.0


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(args: list[str], timeout: float) -> tuple[float, float, str]:
    """Wall and CPU time of ``python -m dpopt.cli ARGS``, and its status ("ok", "exit N" or "timeout")."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    try:
        done = subprocess.run([sys.executable, "-m", "dpopt.cli", *args], cwd=ROOT, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, _cpu_of_children() - cpu, "timeout"
    status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    return time.perf_counter() - start, _cpu_of_children() - cpu, status


PYTHON_CHILD = """
import json, sys, time
t0, w0 = time.process_time(), time.perf_counter()
import dpopt
solution = dpopt.solve(sys.argv[1])
t1, w1 = time.process_time(), time.perf_counter()
passed = dpopt.verify(solution.certificate).passed
t2, w2 = time.process_time(), time.perf_counter()
print(json.dumps([w1 - w0, t1 - t0, w2 - w1, t2 - t1, bool(passed)]))
"""


def _python(spec: Path, timeout: float) -> tuple[float, float, str, float, float, str]:
    """Wall and CPU time of ``dpopt.solve`` and ``dpopt.verify`` of ``spec`` in a fresh interpreter."""
    try:
        done = subprocess.run([sys.executable, "-c", PYTHON_CHILD, str(spec)], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return timeout, 0.0, "timeout", 0.0, 0.0, "timeout"
    if done.returncode != 0:
        return 0.0, 0.0, f"exit {done.returncode}", 0.0, 0.0, "not run"
    solve, solve_cpu, verify, verify_cpu, passed = json.loads(done.stdout.strip().splitlines()[-1])
    return solve, solve_cpu, "ok", verify, verify_cpu, "ok" if passed else "failed"


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the specs whose file name contains this")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per command")
    parser.add_argument("--python", action="store_true", help="time dpopt.solve and dpopt.verify from Python")
    options = parser.parse_args()
    rows = []
    before = _load()
    for spec in sorted((ROOT / "specs").glob("*.yaml")):
        if options.only not in spec.name:
            continue
        if options.python:
            solve, solve_cpu, solve_status, verify, verify_cpu, verify_status = _python(spec, options.timeout)
        else:
            with tempfile.TemporaryDirectory() as out:
                solve, solve_cpu, solve_status = _timed(["solve", str(spec), "--out", out], options.timeout)
                certificate = Path(out) / "certificate.json"
                verify, verify_cpu, verify_status = (_timed(["verify", str(certificate)], options.timeout)
                                                     if certificate.exists() else (0.0, 0.0, "no certificate"))
        rows.append((spec.name, solve, solve_cpu, solve_status, verify, verify_cpu, verify_status))
        print(f"  {spec.name}: solve {solve:.1f} s ({solve_status}), verify {verify:.1f} s ({verify_status})",
              file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -(r[1] + r[4]))
    print(f"{'spec':42s} {'solve s':>8s} {'(cpu)':>7s} {'verify s':>9s} {'(cpu)':>7s}  status")
    for name, solve, solve_cpu, solve_status, verify, verify_cpu, verify_status in rows:
        slow = " > target" if max(solve, verify) > TARGET_SECONDS else ""
        print(f"{name:42s} {solve:8.2f} {solve_cpu:7.2f} {verify:9.2f} {verify_cpu:7.2f}  "
              f"{solve_status}/{verify_status}{slow}")
    print(f"{before} before, {_load()} after (2 cores shared: wall times grow with it)")
    over = sum(1 for r in rows if max(r[1], r[4]) > TARGET_SECONDS)
    print(f"{len(rows)} specs; {over} over the {TARGET_SECONDS:g} s target for solve or verify")


if __name__ == "__main__":
    main()
