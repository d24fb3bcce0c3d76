"""Benchmark: noise saved by calibrating on the exact privacy profile of each noise law (issue 20).

For each case the certified parameter of the exact-profile calibration is printed next to
the route it replaces, both measured in this run:

* ``discrete_gaussian`` on a 5-level histogram under replace-one (moves over two
  coordinates): the exact two-coordinate profile vs ρ-zCDP + CKS (the smallest ρ whose CKS
  δ meets the target, σ² = Δ₂²/(2ρ)), as variance ratios;
* ``laplace`` on a count: the exact Laplace profile vs pure ε (δ unused, b = Δ₁/ε), and under ρ-zCDP
  the Rényi divergences vs ε-DP ⇒ ε²/2-zCDP;
* ``discrete_laplace`` on a count and on the histogram: the exact profile vs pure ε, and under
  ρ-zCDP the Rényi divergences vs ε-DP ⇒ ε²/2-zCDP;
* the CKS conversion at tiny ρ: the bracket-free infimum vs Bun–Steinke;
* the time of one calibration (``design``) on the exact route.

Run ``python benchmarks/bench_exact_calibration.py``.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import dpopt
from dpopt.mechanisms.discrete_gaussian import DiscreteGaussianMechanism
from dpopt.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from dpopt.mechanisms.laplace import LaplaceMechanism
from dpopt.privacy.zcdp import zcdp_delta_cks, zcdp_epsilon_bun_steinke, zcdp_epsilon_cks

HISTOGRAM = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": list("abcde")}, "n": 100},
             "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "replace_one"}
COUNT = {"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x", "y"]}}, "query": {"kind": "count"},
         "adjacency": "add_remove"}


def design(family, base: dict, epsilon: float, delta: float):
    problem = dpopt.compile({**base, "privacy": {"approx": {"epsilon": epsilon, "delta": delta}},
                             "mechanism": family.family})
    start = time.perf_counter()
    mechanism = family.design(problem)
    return mechanism, problem.space, time.perf_counter() - start


def cks_sigma2(l2_squared: Fraction, epsilon: float, delta: float) -> float:
    """σ² of the ρ-zCDP + CKS route: the largest ρ with δ_CKS(ε; ρ) ≤ δ (geometric bisection)."""
    lo, hi = 1e-8, 50.0
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if zcdp_delta_cks(epsilon, mid) <= delta else (lo, mid)
    return float(l2_squared) / (2.0 * lo)


def main() -> None:
    print("discrete Gaussian, 5-level histogram, replace-one: σ² exact vs ρ-zCDP + CKS", flush=True)
    for epsilon, delta in ((1.0, 1e-6), (0.5, 1e-5), (2.0, 1e-9)):
        mech, space, seconds = design(DiscreteGaussianMechanism, HISTOGRAM, epsilon, delta)
        exact, cks = float(mech.sigma2), cks_sigma2(space.l2_squared, epsilon, delta)
        print(f"  (ε, δ) = ({epsilon:g}, {delta:g}): exact σ² = {exact:.4f}, CKS σ² = {cks:.4f}, "
              f"CKS spends {100 * (cks / exact - 1):+.1f}% variance; design {seconds:.2f} s")
    print("Laplace, count: scale b exact profile vs pure ε (δ unused)")
    for epsilon, delta in ((1.0, 0.05), (1.0, 1e-6), (0.1, 0.1)):
        mech, _, seconds = design(LaplaceMechanism, COUNT, epsilon, delta)
        pure = 1.0 / epsilon
        print(f"  (ε, δ) = ({epsilon:g}, {delta:g}): b = {mech.scale:.6f} vs {pure:.6f}, variance "
              f"{100 * ((mech.scale / pure) ** 2 - 1):+.2f}%; design {seconds * 1e3:.1f} ms")
    print("Laplace, count, ρ-zCDP: b from the Rényi divergences vs ε-DP ⇒ ε²/2-zCDP (b = 1/√(2ρ))")
    for rho in (0.05, 0.5, 2.0):
        problem = dpopt.compile({**COUNT, "privacy": {"zcdp": {"rho": rho}}, "mechanism": "laplace"})
        start = time.perf_counter()
        mech = LaplaceMechanism.design(problem)
        seconds = time.perf_counter() - start
        bs = 1.0 / math.sqrt(2.0 * rho)
        print(f"  ρ = {rho:g}: b = {mech.scale:.6f} vs {bs:.6f}, variance {100 * ((mech.scale / bs) ** 2 - 1):+.1f}%; "
              f"design {seconds:.2f} s")
    print("discrete Laplace: scale b exact profile vs pure ε")
    for name, base in (("count", COUNT), ("histogram", HISTOGRAM)):
        for epsilon, delta in ((1.0, 0.05), (1.0, 1e-6)):
            mech, space, seconds = design(DiscreteLaplaceMechanism, base, epsilon, delta)
            pure = float(space.l1) / epsilon
            print(f"  {name} (ε, δ) = ({epsilon:g}, {delta:g}): b = {float(mech.scale):.6f} vs {pure:.6f}; "
                  f"design {seconds * 1e3:.1f} ms")
        problem = dpopt.compile({**base, "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "discrete_laplace"})
        space = problem.space
        start = time.perf_counter()
        mech = DiscreteLaplaceMechanism.design(problem)
        print(f"  {name} ρ = 0.5: b = {float(mech.scale):.6f} vs {float(space.l1):.6f} (ε-DP ⇒ ε²/2-zCDP); "
              f"design {time.perf_counter() - start:.2f} s")
    print("CKS conversion at tiny ρ (ρ = 1e-10, δ = 1e-12)")
    eps, alpha = zcdp_epsilon_cks(1e-12, 1e-10)
    print(f"  CKS ε = {eps:.6g} at α = {alpha:.4g}; Bun–Steinke ε = {zcdp_epsilon_bun_steinke(1e-12, 1e-10):.6g}")


if __name__ == "__main__":
    main()
