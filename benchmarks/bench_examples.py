"""Benchmark: wall time of ``dpopt solve`` and ``dpopt verify`` on every example spec (issue 26).

Each spec of ``specs/`` is solved and its certificate verified by the command line, each in a
fresh interpreter (so the figures include start-up, as a user sees them), one after the other;
the table is printed slowest first (solve + verify). The target is < 10 s for each.

Run ``python benchmarks/bench_examples.py [--only SUBSTRING] [--timeout SECONDS]``; set
``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`` on a shared machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 10.0


def _timed(args: list[str], timeout: float) -> tuple[float, str]:
    """Wall time of ``python -m dpopt.cli ARGS`` and its status ("ok", "exit N" or "timeout")."""
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "dpopt.cli", *args], cwd=ROOT, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, "timeout"
    status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    return time.perf_counter() - start, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the specs whose file name contains this")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per command")
    options = parser.parse_args()
    rows = []
    for spec in sorted((ROOT / "specs").glob("*.yaml")):
        if options.only not in spec.name:
            continue
        with tempfile.TemporaryDirectory() as out:
            solve, solve_status = _timed(["solve", str(spec), "--out", out], options.timeout)
            certificate = Path(out) / "certificate.json"
            verify, verify_status = (_timed(["verify", str(certificate)], options.timeout)
                                     if certificate.exists() else (0.0, "no certificate"))
        rows.append((spec.name, solve, solve_status, verify, verify_status))
        print(f"  {spec.name}: solve {solve:.1f} s ({solve_status}), verify {verify:.1f} s ({verify_status})",
              file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -(r[1] + r[3]))
    print(f"{'spec':42s} {'solve s':>8s} {'verify s':>9s}  status")
    for name, solve, solve_status, verify, verify_status in rows:
        slow = " > target" if max(solve, verify) > TARGET_SECONDS else ""
        print(f"{name:42s} {solve:8.2f} {verify:9.2f}  {solve_status}/{verify_status}{slow}")
    over = sum(1 for r in rows if max(r[1], r[3]) > TARGET_SECONDS)
    print(f"{len(rows)} specs; {over} over the {TARGET_SECONDS:g} s target for solve or verify")


if __name__ == "__main__":
    main()
