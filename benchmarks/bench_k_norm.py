"""K-norm sampling on the Semi-DP hulls of k×k tables with both one-way margins invariant.

For k = 2..5 the sensitivity space is derived by dpopt (a = 3: rectangles and 6-cycles),
its hull K built in the orthonormal coordinates of its span, and two exact samplers of
the uniform law on K are timed in the same run:

* the cone decomposition (``sample``): a cone over a boundary simplex by volume (for a hull
  built up to symmetry: a facet orbit's cone by volume, then a uniform group element), then
  a Dirichlet point in it;
* the paper's Algorithm 3 (``Polytope.sample_rejection``): uniform draws in the bounding
  box, kept when every facet inequality holds.

Building K (its facets and a triangulation of its boundary) is timed separately: with the
construction ``dpopt solve`` uses (up to the symmetry group of table moves from rank
``SYMMETRIC_HULL_MIN_RANK`` on; issue target 60 s at k = 5) under its deterministic work budget
``dpopt.mechanisms.k_norm.HULL_BUDGET`` and, as the baseline measured in the same run, the plain
construction without a budget (qhull for s ≤ 4, gift wrapping above; 54–153 s at k = 4 before).
When the budget is exceeded neither sampler can run (box rejection needs the facets too), and
``dpopt solve`` falls back to a norm ball; the row shows the budget's reason and the time to it.

Run: python benchmarks/bench_k_norm.py [--max-k 5] [--plain-max-k 4] [--seconds 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dpopt
from dpopt.geometry import HullBudgetExceeded, Polytope, SymmetricPolytope
from dpopt.mechanisms.k_norm import HULL_BUDGET, HullBody

TARGET_SECONDS = {5: 60.0}
"""Issue 18: the hull of the 5×5 table (s = 16) within 60 s."""


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


def timed(build):
    """(K, seconds) or (the budget's reason, seconds to it) when the build exceeds its budget."""
    start = time.perf_counter()
    try:
        K = build()
    except HullBudgetExceeded as exc:
        return str(exc), time.perf_counter() - start
    return K, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-k", type=int, default=5)
    parser.add_argument("--plain-max-k", type=int, default=4, help="largest k whose plain build is timed")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per sampler measurement")
    args = parser.parse_args()
    print(f"{'k':>2} {'s':>3} {'points':>6} {'|G|':>6} {'orbits':>6} {'facets':>7} {'simplices':>10} "
          f"{'build s':>9} {'plain s':>9} {'speed-up':>8} {'target':>7} {'cones/s':>11} {'box/s':>9} "
          f"{'box accept':>11} {'ratio':>7}  dpopt solve")
    for k in range(2, args.max_k + 1):
        space = table_space(k)
        vectors = space.vectors()
        body, build = timed(lambda: HullBody(vectors, space.span.basis(), HULL_BUDGET))
        K = None if isinstance(body, str) else body.polytope
        symmetric = isinstance(K, SymmetricPolytope)
        if symmetric and k <= args.plain_max_k:
            _, plain = timed(lambda: Polytope.from_points(K.points))
            plain_text, speed_up = format(plain, ".2f"), f"{plain / build:.1f}×"
        else:
            plain_text, speed_up = ("not run" if symmetric or K is None else "same"), "—"
        target = TARGET_SECONDS.get(k)
        met = "—" if target is None else ("met" if K is not None and build <= target else "NOT met")
        order = str(K.group_order) if symmetric else "—"
        if K is None:
            print(f"{k:>2} {space.rank:>3} {len(vectors):>6} {order:>6} {'—':>6} {'—':>7} {'—':>10} "
                  f"{build:>9.2f} {plain_text:>9} {speed_up:>8} {met:>7} {'—':>11} {'—':>9} "
                  f"{'—':>11} {'—':>7}  fallback ball: {body}")
            continue
        orbits = len(K.tight) if symmetric else "—"
        y = K.points
        rng = np.random.default_rng(k)
        cones, _ = rate(lambda K=K, rng=rng: len(K.sample(rng, 100_000)), args.seconds)
        # Algorithm 3 needs only the points and the facet normals, which both classes hold.
        boxed, _ = rate(lambda K=K, rng=rng: len(Polytope.sample_rejection(K, rng, 256)[0]), args.seconds)
        acceptance = K.volume / np.prod(2 * np.abs(y).max(axis=0))
        print(f"{k:>2} {space.rank:>3} {len(y):>6} {order:>6} {orbits:>6} {len(K.normals):>7} "
              f"{K.boundary_simplices:>10} {build:>9.2f} {plain_text:>9} {speed_up:>8} {met:>7} {cones:>11.0f} "
              f"{boxed:>9.1f} {acceptance:>11.2e} {cones / boxed:>6.0f}×  hull")


if __name__ == "__main__":
    main()
