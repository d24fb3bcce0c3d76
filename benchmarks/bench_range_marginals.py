"""Range/prefix × marginal workloads (issue 25): the ``kronecker_gaussian`` design at agency sizes.

Cases (each in a fresh interpreter, so that the peak memory is the case's own):

* ``age_prefix``: ``specs/range_marginals_age_prefix_zcdp.yaml`` — age (85 levels) prefix counts
  crossed with all 2-way marginals of 8 other attributes, 7.7·10^8 cells, 175,270 answers, ρ = 1,
  add/remove, ``mechanism: kronecker_gaussian`` (``auto`` adds the other families' refusals and
  the ``gaussian``/``projected_gaussian`` baselines, whose figures are printed here in closed form);
* ``age_ranges``: the same with every age range of width ≤ 10 instead of prefixes (770 rows per
  pair instead of 85);
* ``small``: ``specs/kronecker_age_ranges_sex_region_gdp.yaml`` (80 cells, replace-one, GDP μ = 1).

Figures per case: wall time of ``dpopt.solve`` and of ``dpopt.verify``, the child's peak resident
memory (``ru_maxrss``), the certified E‖Z‖² and, at the same target, in closed form:

* direct + least squares: N(0, Δ₂(W)²σ₁²) on every answer projected on the span, σ₁²Δ₂(W)²·rank;
* identity strategy: the N cells measured with N(0, Δ₂(I)²σ₁²), answers W x̂, σ₁²Δ₂(I)²·tr(WWᵀ);
* the product strategy ⊗A_k (add/remove, where the design is A_ordered ⊗ B with B in the ANOVA
  algebra of the plain attributes; the design's starting point);
* the SVD lower bound (add/remove; valid for every Gaussian strategy, generally not attained).

Run: python benchmarks/bench_range_marginals.py [--case NAME]
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

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure the dpopt of this tree, not an installed one


def _big(factor) -> dict:
    spec = yaml.safe_load((ROOT / "specs" / "range_marginals_age_prefix_zcdp.yaml").read_text())
    spec["query"]["crossed_with"] = {"age": factor}
    spec["mechanism"] = "kronecker_gaussian"
    return spec


CASES = {
    "age_prefix": lambda: _big("prefix"),
    "age_ranges": lambda: _big({"ranges": 10}),
    "small": lambda: yaml.safe_load((ROOT / "specs" / "kronecker_age_ranges_sex_region_gdp.yaml").read_text()),
}


def run_case(name: str) -> dict:
    """Solve and verify one case in this process; the figures as a dict."""
    import dpopt

    spec = CASES[name]()
    start = time.perf_counter()
    solution = dpopt.solve(spec)
    solved = time.perf_counter() - start
    start = time.perf_counter()
    verification = dpopt.verify(solution.certificate)
    verified = time.perf_counter() - start
    design = solution.mechanism.design_info
    problem = dpopt.compile(spec)
    return {
        "case": name,
        "cells": problem.query.kron.cells,
        "answers": problem.space.dimension,
        "rank": problem.space.rank,
        "solve_s": solved,
        "verify_s": verified,
        "verified": all(c.passed for c in verification.checks),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "certified_l2": design["expected_l2"],
        "direct_least_squares": design["baselines"]["direct_least_squares"],
        "identity_strategy": design["baselines"]["identity_strategy"],
        "product_strategy": design["baselines"].get("product_strategy"),
        "svd_lower_bound": design["svd_lower_bound"],
        "sweeps": design["sweeps"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.case)))
        return 0
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    for name in [args.case] if args.case else list(CASES):
        with tempfile.TemporaryDirectory():
            done = subprocess.run([sys.executable, __file__, "--case", name, "--child"], env=env,
                                  capture_output=True, text=True, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        bound = r["svd_lower_bound"]
        print(f"{r['case']}: {r['cells']:,} cells, {r['answers']:,} answers (rank {r['rank']:,}); "
              f"solve {r['solve_s']:.1f} s, verify {r['verify_s']:.1f} s ({'ok' if r['verified'] else 'FAILED'}), "
              f"peak {r['peak_mb']:.0f} MB, {r['sweeps']} sweeps")
        print(f"  certified E‖Z‖² {r['certified_l2']:.6g}; direct + least squares {r['direct_least_squares']:.6g} "
              f"(×{r['direct_least_squares'] / r['certified_l2']:.2f}); identity strategy {r['identity_strategy']:.6g} "
              f"(×{r['identity_strategy'] / r['certified_l2']:.3g}); "
              + ("" if r["product_strategy"] is None else
                 f"product strategy {r['product_strategy']:.6g} (×{r['product_strategy'] / r['certified_l2']:.2f}); ")
              + "SVD lower bound "
              + ("not available (non-commuting factors or replace-one)" if bound is None else
                 f"{bound:.6g} (certified error {r['certified_l2'] / bound:.2f}× the bound)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
