"""K-norm sampling on the Semi-DP hulls of k×k tables with both one-way margins invariant.

For k = 2..5 the sensitivity space is derived by dpopt (a = 3: rectangles and 6-cycles),
its hull K built in the orthonormal coordinates of its span, and two exact samplers of
the uniform law on K are timed in the same run:

* the cone decomposition (``Polytope.sample``): a cone over a boundary simplex by volume,
  then a Dirichlet point in it;
* the paper's Algorithm 3 (``Polytope.sample_rejection``): uniform draws in the bounding
  box, kept when every facet inequality holds.

Building K (its facets and a triangulation of its boundary) is timed separately, under a
budget; when it is exceeded neither sampler can run (box rejection needs the facets too),
and ``dpopt solve`` falls back to a norm ball (its own budget is
``dpopt.mechanisms.k_norm.HULL_BUDGET_SECONDS``).

Run: python benchmarks/bench_k_norm.py [--max-k 5] [--facet-budget 600] [--seconds 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dpopt
from dpopt.geometry import HullBudgetExceeded, Polytope
from dpopt.mechanisms.k_norm import HULL_BUDGET_SECONDS


def table_space(k: int):
    levels = [str(i) for i in range(k)]
    spec = dpopt.load_spec({
        "dpopt": 1, "name": f"{k}x{k}", "data": {"attributes": {"row": levels, "col": levels}, "n": 500},
        "query": {"kind": "contingency_table", "attributes": ["row", "col"]},
        "invariants": [{"kind": "margins", "attributes": ["row"]}, {"kind": "margins", "attributes": ["col"]}],
        "adjacency": "replace_one", "privacy": {"pure": {"epsilon": 1.0}}})
    return dpopt.derive(spec)


def rate(draw, seconds: float) -> tuple[float, int]:
    """Samples per second of ``draw()`` (which returns how many it produced), run for ≥ ``seconds``."""
    produced, start = 0, time.perf_counter()
    while True:
        produced += draw()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return produced / elapsed, produced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-k", type=int, default=5)
    parser.add_argument("--facet-budget", type=float, default=600.0, help="seconds allowed to build K")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per sampler measurement")
    args = parser.parse_args()
    print(f"{'k':>2} {'s':>3} {'points':>6} {'facets':>7} {'simplices':>10} {'build s':>9} "
          f"{'cones/s':>11} {'box/s':>9} {'box accept':>11} {'ratio':>9}  dpopt solve")
    for k in range(2, args.max_k + 1):
        space = table_space(k)
        vectors = space.vectors()
        y = vectors @ space.span.basis()
        start = time.perf_counter()
        try:
            K = Polytope.from_points(y, budget_seconds=args.facet_budget)
        except HullBudgetExceeded as exc:
            print(f"{k:>2} {space.rank:>3} {len(y):>6} {'—':>7} {'—':>10} {'> ' + format(args.facet_budget, 'g'):>9} "
                  f"{'—':>11} {'—':>9} {'—':>11} {'—':>9}  fallback ball ({exc})")
            continue
        build = time.perf_counter() - start
        rng = np.random.default_rng(k)
        cones, _ = rate(lambda K=K, rng=rng: len(K.sample(rng, 100_000)), args.seconds)
        boxed, _ = rate(lambda K=K, rng=rng: len(K.sample_rejection(rng, 256)[0]), args.seconds)
        acceptance = K.volume / np.prod(2 * np.abs(y).max(axis=0))
        decision = "hull" if build <= HULL_BUDGET_SECONDS else f"fallback ball (build > {HULL_BUDGET_SECONDS:g} s)"
        print(f"{k:>2} {space.rank:>3} {len(y):>6} {len(K.normals):>7} {len(K.simplices):>10} {build:>9.2f} "
              f"{cones:>11.0f} {boxed:>9.1f} {acceptance:>11.2e} {cones / boxed:>8.0f}×  {decision}")


if __name__ == "__main__":
    main()
