"""Foundation timings: certified Gaussian calibration at (ε, δ), and a small spec end to end.

Run: python benchmarks/bench_foundation.py
"""

from __future__ import annotations

import statistics
import time
from fractions import Fraction
from pathlib import Path

import dpopt
from dpopt.privacy.gaussian_calibration import gaussian_sigma

ROOT = Path(__file__).resolve().parents[1]


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    grid = [(eps, delta) for eps in (1e-3, 0.1, 1.0, 10.0, 50.0) for delta in (1e-15, 1e-10, 1e-6, 0.1)]
    specs = {(eps, delta): dpopt.load_spec({
        "dpopt": 1, "name": "bench", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
        "adjacency": "add_remove", "privacy": {"approx": {"epsilon": eps, "delta": delta}}}) for eps, delta in grid}
    per_target = []
    for key, spec in specs.items():
        per_target += _time(lambda: gaussian_sigma(Fraction(2), spec.privacy), 5)
    print(f"certified Gaussian sigma at (eps, delta), {len(grid)} targets x 5: "
          f"median {statistics.median(per_target) * 1e3:.2f} ms, max {max(per_target) * 1e3:.2f} ms")

    table = ROOT / "specs" / "table_replace_gdp.yaml"
    dpopt.solve(table)  # warm imports
    solve_times = _time(lambda: dpopt.solve(table), 20)
    print(f"solve specs/table_replace_gdp.yaml end to end (derive, design, certify) x 20: "
          f"median {statistics.median(solve_times) * 1e3:.1f} ms")
    mean = ROOT / "specs" / "mean_income_approx.yaml"
    solve_times = _time(lambda: dpopt.solve(mean), 20)
    print(f"solve specs/mean_income_approx.yaml ((eps, delta) target) x 20: "
          f"median {statistics.median(solve_times) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
