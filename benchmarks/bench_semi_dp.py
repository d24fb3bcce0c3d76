"""Benchmark: Semi-DP space and one projected Gaussian release for r×c tables with margins.

Target (issue 3): deriving the Semi-DP space (a(t), rank, l2 sensitivity, implicit
projector) and sampling one projected Gaussian release for an r×c table with both one-way
margins invariant: 10×10 under 1 s, 100×100 under 10 s; memory O(d), not O(d²).

Measured in the same run, as baselines:

* ``dense``: the same release through an explicit orthonormal basis B (d × rank) and
  P = B Bᵀ (d × d), where that fits in memory;
* ``listed``: listing S_Semi (all invariant-preserving moves) and taking its span by SVD,
  the generic route, for the 10×10 table.

Run ``python benchmarks/bench_semi_dp.py``.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

import dpopt
from dpopt.mechanisms.gaussian import ProjectedGaussianMechanism
from dpopt.sensitivity.subspace import span_of
from dpopt.sensitivity.table_moves import margin_moves


def table_spec(r: int, c: int) -> dpopt.Spec:
    return dpopt.load_spec({
        "dpopt": 1, "name": f"{r}x{c}",
        "data": {"attributes": {"row": [str(i) for i in range(r)], "col": [str(j) for j in range(c)]}},
        "query": {"kind": "contingency_table", "attributes": ["row", "col"]},
        "invariants": [{"kind": "margins", "attributes": ["row"]}, {"kind": "margins", "attributes": ["col"]}],
        "adjacency": "replace_one", "privacy": {"gdp": {"mu": 1.0}},
    })


def measured(fn, repeats: int = 3):
    """(result, best wall time of ``repeats`` untraced runs, peak traced bytes of one more run).

    tracemalloc slows Python-level allocation several-fold, so time and memory are taken
    in separate runs.
    """
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, min(seconds), peak


def listed_span():
    """The generic route for the 10×10 table: list S_Semi, take its span by SVD."""
    moves = margin_moves((10, 10), ((0,), (1,)), 3)
    return span_of(moves.T.astype(float)), len(moves)


def implicit_release(spec: dpopt.Spec, table: np.ndarray):
    problem = dpopt.compile(spec)
    space = problem.space
    mechanism = ProjectedGaussianMechanism.design(problem)
    noisy = mechanism.release(table.ravel(), rng=np.random.default_rng(0))
    return space, noisy


def dense_release(spec: dpopt.Spec, table: np.ndarray):
    space = dpopt.derive(spec)
    B = space.span.basis()
    P = B @ B.T
    sigma = space.l2  # μ = 1
    return table.ravel() + P @ np.random.default_rng(0).normal(0.0, sigma, size=table.size)


def main() -> None:
    targets = {10: 1.0, 100: 10.0}
    print(f"{'table':>9} {'d':>6} {'rank':>6} {'a':>2} {'l2':>7} {'time (s)':>9} {'peak MB':>8} {'peak/d (B)':>10}"
          f" {'dense time':>10} {'dense MB':>9}")
    for r in (10, 30, 50, 100):
        spec = table_spec(r, r)
        table = np.random.default_rng(1).integers(0, 50, size=(r, r)).astype(float)
        (space, noisy), seconds, peak = measured(lambda spec=spec, table=table: implicit_release(spec, table))
        margins_kept = np.allclose(noisy.reshape(r, r).sum(0), table.sum(0)) and np.allclose(
            noisy.reshape(r, r).sum(1), table.sum(1))
        d = r * r
        if d <= 2500:
            _, dense_s, dense_peak = measured(lambda spec=spec, table=table: dense_release(spec, table))
            dense = f"{dense_s:10.3f} {dense_peak / 2**20:9.1f}"
        else:
            dense = f"{'—':>10} {8 * d * d / 2**20:8.0f}+"  # P alone would take 8·d² bytes
        print(f"{r:>4}×{r:<4} {d:6d} {space.rank:6d} {space.semi_adjacent_parameter:2d} {space.l2:7.4f} "
              f"{seconds:9.3f} {peak / 2**20:8.2f} {peak / d:10.0f} {dense}"
              + ("" if margins_kept else "  MARGINS CHANGED")
              + (f"  target < {targets[r]:g} s: {'met' if seconds < targets[r] else 'MISSED'}" if r in targets else ""))
    spec = table_spec(10, 10)
    (span, count), listed_s, listed_peak = measured(listed_span, repeats=1)
    _, implicit_s, implicit_peak = measured(lambda: implicit_release(spec, np.zeros((10, 10))))
    print(f"\n10×10, listed route: {count} moves, span rank {span.rank}, {listed_s:.3f} s, "
          f"{listed_peak / 2**20:.1f} MB; implicit: {implicit_s:.3f} s, {implicit_peak / 2**20:.2f} MB "
          f"(time ratio {listed_s / implicit_s:.0f}×, memory ratio {listed_peak / implicit_peak:.0f}×)")


if __name__ == "__main__":
    main()
