"""GDP toolkit timings (Lee, Kim, Kwak & Jung 2022): Laplace calibration in GDP, the certified
μ-GDP check, James–Stein costs, a GDP table spec end to end — each against a baseline
measured in the same run.

Run: python benchmarks/bench_gdp_multivariate.py
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import numpy as np

import dpopt
from dpopt.mechanisms.james_stein import JamesSteinMechanism
from dpopt.privacy.gdp_check import gdp_margin
from dpopt.privacy.laplace_gdp import contingency_laplace_scale, laplace_scale_2d, laplace_scale_l1
from dpopt.privacy.tradeoff import contingency_laplace_tradeoff

ROOT = Path(__file__).resolve().parents[1]
MUS = (0.1, 0.3, 1.0, 3.0, 10.0)


def _median_time(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def main() -> None:
    closed = statistics.median(_median_time(lambda m=m: laplace_scale_l1(m, 2.0), 50) for m in MUS)
    alg1 = statistics.median(_median_time(lambda m=m: contingency_laplace_scale(m), 5) for m in MUS)
    generic = statistics.median(_median_time(lambda m=m: laplace_scale_2d(m, 1.0, 1.0), 2) for m in MUS)
    print(f"Laplace scale in GDP, median over mu in {MUS}:")
    print(f"  closed form b^Delta1 (Prop. 9)            {closed * 1e6:9.1f} us  (baseline)")
    print(f"  Algorithm 1, b~_mu (rtol 1e-12)            {alg1 * 1e3:9.2f} ms  ({alg1 / closed:,.0f} x)")
    print(f"  bisection on the certified check (1e-9)    {generic * 1e3:9.2f} ms  ({generic / alg1:.1f} x Algorithm 1)")

    checks = []
    for m in MUS:
        t = contingency_laplace_tradeoff(contingency_laplace_scale(m) * (1 + 1e-8))
        checks.append(_median_time(lambda t=t, m=m: gdp_margin(t, m), 5))
    nodes = [gdp_margin(contingency_laplace_tradeoff(contingency_laplace_scale(m) * (1 + 1e-8)), m).nodes for m in MUS]
    print(f"certified mu-GDP check at b~(1 + 1e-8): median {statistics.median(checks) * 1e3:.2f} ms, "
          f"max {max(checks) * 1e3:.2f} ms, grid points {min(nodes)}-{max(nodes)}")

    spec = dpopt.load_spec({"dpopt": 1, "name": "b", "data": {"attributes": {"a": [f"c{i}" for i in range(18)]}},
                            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "replace_one",
                            "privacy": {"gdp": {"mu": 0.1}}})
    space = dpopt.derive(spec)
    mech = JamesSteinMechanism(math.sqrt(2) / 0.1, space, "rotated")
    tables = np.random.default_rng(0).multinomial(500, np.full(18, 1 / 18), size=10_000).astype(float)
    per_closed = _median_time(lambda: mech.expected_l2_at(tables), 5) / tables.shape[0]
    per_release = _median_time(lambda: mech.release(tables, np.random.default_rng(1)), 5) / tables.shape[0]
    print(f"rJS (p = 18): closed-form cost {per_closed * 1e6:.2f} us/table vs one release "
          f"{per_release * 1e6:.2f} us/table (a Monte Carlo estimate needs ~1e4 releases)")

    dpopt.solve(ROOT / "specs" / "table_replace_gdp.yaml")  # warm imports
    base = _median_time(lambda: dpopt.solve(ROOT / "specs" / "table_replace_gdp.yaml"), 3)
    ours = _median_time(lambda: dpopt.solve(ROOT / "specs" / "table_age_sex_gdp.yaml"), 3)
    print(f"solve specs/table_replace_gdp.yaml (baseline) {base:.2f} s; specs/table_age_sex_gdp.yaml "
          f"{ours:.2f} s ({ours / base:.1f} x)")


if __name__ == "__main__":
    main()
