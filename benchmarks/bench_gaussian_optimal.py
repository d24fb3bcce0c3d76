"""Benchmark: the optimal Gaussian covariance (family ``gaussian_optimal``).

1. A workload of dimension 30 with 500 sensitivity vectors (a linear query over 500 levels
   under add/remove: S = ±A e_j): solve the SDP and certify Σ (target: under 10 s), for each
   utility, with the gain over isotropic Gaussian noise measured in the same run.
2. Structure: tables under replace-one (and with one-way margins invariant) solved by the
   symmetry closed form, against the generic SDP on the same problem where it runs.

Run: ``python benchmarks/bench_gaussian_optimal.py``. Wall-clock and CPU seconds are both
printed (the machine may be shared).
"""

from __future__ import annotations

import time

import numpy as np

import dpopt
from dpopt.mechanisms.gaussian_optimal import GaussianOptimalMechanism, table_shape
from dpopt.optimize.covariance import Objective, optimal_covariance, target_mu


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def __str__(self):
        return f"{self.wall:6.2f} s wall ({self.cpu:5.2f} s CPU)"


def workload_30x500() -> None:
    rng = np.random.default_rng(1)
    d, m = 30, 500
    a = rng.integers(0, 2, size=(d, m)) * rng.uniform(0.5, 1.0, size=(1, m)).round(3)
    print(f"1. linear query, dimension {d}, {m} sensitivity vectors (±A e_j, add/remove), zCDP ρ = 0.5")
    for metric, extra in (("l2", {"workload": np.tril(np.ones((d, d))).tolist()}), ("ci_volume", {}),
                          ("max_variance", {})):
        spec = dpopt.load_spec({
            "dpopt": 1, "name": "bench", "data": {"attributes": {"x": [f"l{i}" for i in range(m)]}},
            "query": {"kind": "linear", "attribute": "x", "matrix": a.tolist()},
            "adjacency": {"kind": "add_remove"}, "privacy": {"zcdp": {"rho": 0.5}},
            "mechanism": "gaussian_optimal", "utility": {"metric": metric, **extra},
        })
        problem = dpopt.compile(spec)
        space = problem.space
        with Timer() as solve_and_certify:
            mech = GaussianOptimalMechanism.design(problem)
        with Timer() as recheck:
            checks = mech.privacy_checks(space, spec.privacy)
        info = mech.design_info
        label = {"l2": "prefix-sum workload", "ci_volume": "CI volume", "max_variance": "max variance"}[metric]
        print(f"   {label:20s} solve + certify {solve_and_certify}; re-check (verify) {recheck}; "
              f"checks {'pass' if all(c.passed for c in checks) else 'FAIL'}")
        print(f"   {'':20s} {info['method']}; constraints {info['constraints']['used']} used of "
              f"{info['constraints']['distinct']}; duality gap {info['duality_gap']:.2g}; "
              f"vs isotropic Gaussian: {'volume ' if metric == 'ci_volume' else ''}ratio "
              f"{info['vs_isotropic']['ratio']:.4g} ({'log pdet Σ ' if metric == 'ci_volume' else ''}"
              f"{info['objective_value']:.6g} vs {info['vs_isotropic']['utility']:.6g})")


def structure() -> None:
    print("2. structure: symmetry closed form vs generic SDP on the same problem (trace utility)")
    cases = [
        ("6x6 table, replace-one", {"a": [str(i) for i in range(6)], "b": [str(i) for i in range(6)]}, []),
        ("10x10 table, replace-one", {"a": [str(i) for i in range(10)], "b": [str(i) for i in range(10)]}, []),
        ("4x4 table, one-way margins invariant", {"a": [str(i) for i in range(4)], "b": [str(i) for i in range(4)]},
         [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]),
    ]
    for name, attributes, invariants in cases:
        spec = dpopt.load_spec({
            "dpopt": 1, "name": name, "data": {"attributes": attributes, "n": 100},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "invariants": invariants,
            "adjacency": {"kind": "replace_one"}, "privacy": {"gdp": {"mu": 1.0}}, "mechanism": "gaussian_optimal",
        })
        space = dpopt.derive(spec)
        vectors, basis = space.vectors(), space.span.basis()
        objective, mu = Objective("trace", np.eye(space.dimension)), target_mu(spec.privacy)
        with Timer() as closed:
            fast = optimal_covariance(vectors, basis, objective, mu, table_shape=table_shape(spec))
        line = f"   {name:38s} d={space.dimension:3d}, rank {space.rank:2d}, {len(vectors):5d} vectors: closed form {closed}"
        if space.rank <= 50:
            with Timer() as generic:
                slow = optimal_covariance(vectors, basis, objective, mu, use_symmetry=False)
            same = np.abs(slow.covariance - fast.covariance).max() / np.abs(fast.covariance).max()
            line += f"; generic SDP {generic} (×{generic.wall / max(closed.wall, 1e-9):.0f}; max rel. diff {same:.1g})"
        else:
            line += "; generic SDP not run (rank over 50)"
        print(line)


if __name__ == "__main__":
    workload_30x500()
    structure()
