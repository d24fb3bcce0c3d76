"""Benchmark: ``dpopt solve`` and ``dpopt verify`` of every example spec, from the CLI and from Python (issues 26, 36).

Each spec of ``specs/`` is solved and its certificate verified, each command in a fresh interpreter (so the
figures include start-up, as a user sees them), one spec after the other; the tables are printed slowest
first. The target is < 5 s for each solve and each verify on an idle 2-core machine. Each row gives the CPU
time (user + system of the child, from ``getrusage``) beside the wall time: on a machine shared with other
jobs the wall time grows with the load average (printed before and after), the CPU time much less, so the
verdict column judges the CPU time.

* **CLI** (``--mode cli``): ``dpopt solve SPEC --out DIR`` (report and figures included) into a temporary
  folder, then ``dpopt verify DIR/certificate.json``. A spec with a ``synthesize`` block runs the command its
  description states (``dpopt synthesize SPEC --data FILE --out DIR``) and ``dpopt verify DIR``.
* **Python** (``--mode python``): ``dpopt.solve`` and ``dpopt.verify`` in a fresh interpreter per spec, CPU from
  ``time.process_time`` (imports included); plans, hierarchies, private-key specs and synthesis specs through
  their own functions (``solve_plan``/``verify_plan``, ``solve_hierarchy``/``verify_hierarchy_release``, the
  selection ``certify``/``verify_selection``, ``dpopt.synthesize``/``verify_synthesis``).
* **Small solve** (``--mode small``, issue 36): the median CPU of ``dpopt solve specs/count_add_remove.yaml``
  against the median CPU of ``python -c "import numpy"``, run alternately ``--repeat`` times in the same run
  (bytecode written on a first untimed run of each). Target: ratio ≤ 4.

``--mode all`` (the default) runs the three. dpopt limits BLAS to one thread during a solve and a verification
(:mod:`dpopt.core.blas`), so ``OPENBLAS_NUM_THREADS`` need not be set.

Run ``python benchmarks/bench_examples.py [--mode all|cli|python|small] [--only SUBSTRING] [--skip SUBSTRING]
[--timeout SECONDS] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 5.0
TARGET_RATIO = 4.0
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as an installation runs


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str], timeout: float) -> tuple[float, float, str]:
    """Wall and CPU time of ``command``, and its status ("ok", "exit N" or "timeout")."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    try:
        done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, _cpu_of_children() - cpu, "timeout"
    status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    return time.perf_counter() - start, _cpu_of_children() - cpu, status


def _dpopt(*args: str) -> list[str]:
    return [sys.executable, "-m", "dpopt.cli", *args]


def _synthesis_data(spec: Path) -> str | None:
    """The ``--data`` file a synthesis spec's description names, or None for another spec."""
    text = spec.read_text(encoding="utf-8")
    if not re.search(r"^synthesize:", text, re.MULTILINE):
        return None
    found = re.search(r"dpopt synthesize \S+ --data (\S+)", text)
    return found.group(1) if found else ""


def _cli(spec: Path, timeout: float) -> tuple:
    """(solve wall, cpu, status, verify wall, cpu, status) of the spec through the command line."""
    data = _synthesis_data(spec)
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "out")
        if data is None:
            solve = _timed(_dpopt("solve", str(spec), "--out", out), timeout)
            target = Path(out) / "certificate.json"
        else:
            solve = _timed(_dpopt("synthesize", str(spec), "--data", data, "--out", out), timeout)
            target = Path(out)
        verify = _timed(_dpopt("verify", str(target)), timeout) if target.exists() else (0.0, 0.0, "not run")
    return (*solve, *verify)


PYTHON_CHILD = """
import json, sys, time
t0, w0 = time.process_time(), time.perf_counter()
import dpopt
from dpopt.cli import _is_hierarchy, _is_plan, _is_selection
spec, data = sys.argv[1], sys.argv[2]
if data:
    from dpopt.synthesis.certificate import verify_synthesis
    certificate, check = dpopt.synthesize(spec, data).certificate, verify_synthesis
elif _is_selection(spec):
    from dpopt.selection import verify_selection
    from dpopt.selection.design import certify
    from dpopt.spec.selection import load_selection_spec
    certificate, check = certify(load_selection_spec(spec)), verify_selection
elif _is_plan(spec):
    from dpopt.plan import solve_plan, verify_plan
    certificate, check = solve_plan(spec).certificate, verify_plan
elif _is_hierarchy(spec):
    from dpopt.certificate.hierarchy_release import verify_hierarchy_release
    from dpopt.release.hierarchy_design import solve_hierarchy
    certificate, check = solve_hierarchy(spec).certificate(), verify_hierarchy_release
else:
    certificate, check = dpopt.solve(spec).certificate, dpopt.verify
t1, w1 = time.process_time(), time.perf_counter()
passed = check(certificate).passed
t2, w2 = time.process_time(), time.perf_counter()
print("BENCH " + json.dumps([w1 - w0, t1 - t0, w2 - w1, t2 - t1, bool(passed)]))
"""


def _python(spec: Path, timeout: float) -> tuple:
    """(solve wall, cpu, status, verify wall, cpu, status) of the spec from Python, in a fresh interpreter."""
    data = _synthesis_data(spec) or ""
    try:
        done = subprocess.run([sys.executable, "-c", PYTHON_CHILD, str(spec), data], cwd=ROOT, env=ENV,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return timeout, 0.0, "timeout", 0.0, 0.0, "timeout"
    if done.returncode != 0:
        return 0.0, 0.0, f"exit {done.returncode}", 0.0, 0.0, "not run"
    line = [x for x in done.stdout.splitlines() if x.startswith("BENCH ")][-1]  # a family may print too
    solve, solve_cpu, verify, verify_cpu, passed = json.loads(line[len("BENCH "):])
    return solve, solve_cpu, "ok", verify, verify_cpu, "ok" if passed else "failed"


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _table(title: str, run, specs: list[Path], timeout: float) -> None:
    before = _load()
    rows = []
    for spec in specs:
        row = run(spec, timeout)
        rows.append((spec.name, *row))
        print(f"  {title} {spec.name}: solve {row[1]:.2f} s CPU ({row[2]}), verify {row[4]:.2f} s CPU ({row[5]})",
              file=sys.stderr, flush=True)
    rows.sort(key=lambda r: -(r[2] + r[5]))
    print(f"\n{title}: solve and verify of every example spec, slowest first (CPU and wall seconds)")
    print(f"{'spec':44s} {'solve cpu':>9s} {'wall':>7s} {'verify cpu':>10s} {'wall':>7s}  status")
    for name, solve, solve_cpu, solve_status, verify, verify_cpu, verify_status in rows:
        over = " > 5 s CPU" if max(solve_cpu, verify_cpu) > TARGET_SECONDS else ""
        print(f"{name:44s} {solve_cpu:9.2f} {solve:7.2f} {verify_cpu:10.2f} {verify:7.2f}  "
              f"{solve_status}/{verify_status}{over}")
    over = sum(1 for r in rows if max(r[2], r[5]) > TARGET_SECONDS)
    failed = sum(1 for r in rows if (r[3], r[6]) != ("ok", "ok"))
    print(f"{len(rows)} specs; {over} over the {TARGET_SECONDS:g} s CPU target for solve or verify; {failed} not ok; "
          f"{before} before, {_load()} after (2 cores shared: wall times grow with it)")


def small_solve(repeat: int) -> None:
    """The median CPU of a one-count ``dpopt solve`` against ``python -c "import numpy"``, same run."""
    script = shutil.which("dpopt", path=str(Path(sys.executable).parent))
    solve = ([script] if script else _dpopt()) + ["solve", str(ROOT / "specs" / "count_add_remove.yaml")]
    numpy = [sys.executable, "-c", "import numpy"]
    _timed(numpy, 60), _timed(solve, 60)  # the first runs write the bytecode caches
    load = os.getloadavg()[0]
    base, ours = [], []
    for _ in range(repeat):
        base.append(_timed(numpy, 60)[1])
        ours.append(_timed(solve, 60)[1])
    b, o = statistics.median(base), statistics.median(ours)
    print(f"\nsmall solve: `python -c 'import numpy'` median CPU {b:.3f} s, `dpopt solve specs/count_add_remove.yaml` "
          f"median CPU {o:.3f} s over {repeat} alternating runs: ratio {o / b:.2f} (target ≤ {TARGET_RATIO:g}); "
          f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("all", "cli", "python", "small"), default="all")
    parser.add_argument("--only", default="", help="only the specs whose file name contains this (or one of "
                                                   "several, comma-separated)")
    parser.add_argument("--skip", default="", help="leave out the specs whose file name contains this (or one of "
                                                   "several, comma-separated)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per command")
    parser.add_argument("--repeat", type=int, default=9, help="runs of each command for the small solve")
    options = parser.parse_args()
    parts = options.only.split(",")
    skipped = [p for p in options.skip.split(",") if p]
    specs = [s for s in sorted((ROOT / "specs").glob("*.yaml"))
             if any(p in s.name for p in parts) and not any(p in s.name for p in skipped)]
    if options.mode in ("all", "small"):
        small_solve(options.repeat)
    if options.mode in ("all", "cli"):
        _table("CLI", _cli, specs, options.timeout)
    if options.mode in ("all", "python"):
        _table("Python", _python, specs, options.timeout)


if __name__ == "__main__":
    main()
