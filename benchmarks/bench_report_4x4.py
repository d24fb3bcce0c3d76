"""The 4×4 table with both margins under pure ε (issue 19): ``dpopt solve --out`` against
``dpopt report`` of the same spec, wall clock, each in a fresh process.

Before issue 19 the report re-designed the K-norm mechanism (its hull, then the fallback ball)
at every point of the utility-versus-budget curve: 63 s to solve, 83 s to report. The report
now scales the calibrated mechanism (exact for K-norm under pure ε), so it costs one solve
plus the figures and the audit; the target is a report in less than 2× the solve time.

Run: ``python benchmarks/bench_report_4x4.py`` (prints both times and their ratio; the times
are noisy when other jobs share the CPU).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "table_4x4_margins_pure.yaml"


def _timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dpopt.cli", *args], check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        solve = _timed("solve", str(SPEC), "--out", folder, "--quiet")
        report = _timed("report", str(SPEC), "--out", str(Path(folder) / "report.html"))
    print(f"solve --out: {solve:.1f} s   report (solve + figures + 50,000-draw audit): {report:.1f} s   "
          f"ratio {report / solve:.2f} (target < 2)")


if __name__ == "__main__":
    main()
