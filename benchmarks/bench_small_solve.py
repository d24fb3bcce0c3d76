"""Benchmark: the CPU of a one-count ``dpopt solve`` against ``python -c "import numpy"`` (issue 36).

Runs the two commands alternately, each in a fresh interpreter, ``--repeat`` times, and prints the
median CPU time (user + system, from ``getrusage`` of the children) of each and their ratio. The target
is a ratio ≤ 4: a small solve imports only the families that are candidates, and scipy's sub-packages
only when a family's numerics need them (:func:`dpopt._lazy.lazy_module`). CPU time, not wall time: on a
shared machine the wall time grows with the load average (printed), the CPU time much less. Bytecode
is written on a first, untimed run of each (a user's installation has its ``__pycache__``).

Run ``python benchmarks/bench_small_solve.py [--repeat N] [--spec PATH] [--out]`` (``--out`` times
``dpopt solve --out DIR``, which also writes the report and its four figures).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 4.0


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu(command: list[str], env: dict) -> float:
    """CPU seconds of one run of ``command`` (which must succeed)."""
    before = _child_cpu()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return _child_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (the median is kept)")
    parser.add_argument("--spec", default=str(ROOT / "specs" / "count_add_remove.yaml"))
    parser.add_argument("--out", action="store_true",
                        help="time `dpopt solve --out DIR` (report and figures)")
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    script = shutil.which("dpopt", path=str(Path(sys.executable).parent))
    solve = [script] if script else [sys.executable, "-m", "dpopt.cli"]
    numpy = [sys.executable, "-c", "import numpy"]
    with tempfile.TemporaryDirectory() as folder:
        out = ["--out", str(Path(folder) / "out")] if options.out else []
        command = solve + ["solve", options.spec] + out
        _cpu(numpy, env), _cpu(command, env)  # first runs write the bytecode caches
        load = os.getloadavg()[0]
        base, ours = [], []
        for k in range(options.repeat):
            base.append(_cpu(numpy, env))
            if options.out:
                shutil.rmtree(Path(folder) / "out", ignore_errors=True)
            ours.append(_cpu(command, env))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"python -c 'import numpy': median CPU {b:.3f} s over {options.repeat} runs")
    print(f"{' '.join(Path(c).name for c in command[:1])} {' '.join(command[1:3])}"
          f"{' --out DIR' if options.out else ''}: median CPU {o:.3f} s")
    print(f"ratio {o / b:.2f} (target ≤ {TARGET_RATIO:g}); load average {load:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
