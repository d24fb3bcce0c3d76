"""Benchmark: bounded sums and means measured exactly on a dyadic lattice against the floating-point samplers.

For each case (a spec and a family) the spec is solved twice in the same run, by default (exact where the lattice
costs at most 0.1%) and with ``sampler: floating_point``, and both mechanisms release the same answer RELEASES
times. Printed per case: the sampler chosen, the lattice (g, Δ_u) and the scale on it, the certified E Z² of each
and their ratio, the measured mean of (release − answer)² of each, and the CPU time of the releases (and of the
design) with the ratio exact / floating point.

Run ``python benchmarks/bench_exact_sums.py [--releases N]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import dpopt
from dpopt.spec.load import read_document

ROOT = Path(__file__).resolve().parents[1]


def _sum(privacy: dict, mechanism: str, lower: float = 0, upper: float = 200000, adjacency: str = "add_remove",
         query: str = "sum", n: int | None = None) -> dict:
    data = {"attributes": {"income": {"min": lower, "max": upper}}}
    if n is not None:
        data["n"] = n
    return {"dpopt": 1, "name": "bench", "data": data, "query": {"kind": query, "attribute": "income"},
            "adjacency": adjacency, "privacy": privacy, "mechanism": mechanism, "utility": {"metric": "l2"}}


def cases() -> list[tuple[str, dict]]:
    mean = read_document(ROOT / "specs" / "mean_income_approx.yaml")
    return [
        ("mean_income_approx.yaml, laplace", {**mean, "mechanism": "laplace"}),
        ("mean_income_approx.yaml, gaussian", {**mean, "mechanism": "gaussian"}),
        ("sum [0, 200000], pure ε = 1, laplace", _sum({"pure": {"epsilon": 1}}, "laplace")),
        ("sum [0, 200000], ρ = 0.5, laplace", _sum({"zcdp": {"rho": 0.5}}, "laplace")),
        ("sum [0, 200000], ρ = 0.5, gaussian", _sum({"zcdp": {"rho": 0.5}}, "gaussian")),
        ("sum [0, 200000], μ = 1, gaussian", _sum({"gdp": {"mu": 1}}, "gaussian")),
        ("sum [0, 1000], μ = 1, gaussian", _sum({"gdp": {"mu": 1}}, "gaussian", upper=1000)),
        ("sum [−0.3, 0.7], ε = 0.5, replace-one, laplace",
         _sum({"pure": {"epsilon": 0.5}}, "laplace", lower=-0.3, upper=0.7, adjacency="replace_one", n=100)),
    ]


def _timed(function):
    start = time.process_time()
    out = function()
    return out, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=100_000)
    args = parser.parse_args()
    print(f"{args.releases:,} releases of one answer per sampler; CPU seconds")
    for name, spec in cases():
        exact, t_exact = _timed(lambda: dpopt.solve(spec))
        floating, t_float = _timed(lambda: dpopt.solve({**spec, "sampler": "floating_point"}))
        mech = exact.mechanism
        answer = 123456.0 if spec["query"]["kind"] == "sum" else 98765.4321
        if hasattr(mech, "lattice"):
            answer = float(mech.lattice.answers(mech.lattice.units(np.array([answer])))[0])
        values = np.full((args.releases, 1), answer)
        out_e, r_exact = _timed(lambda: mech.release(values, np.random.default_rng(1)))
        out_f, r_float = _timed(lambda: floating.mechanism.release(values, np.random.default_rng(1)))
        u_e, u_f = exact.certificate["utility"]["value"], floating.certificate["utility"]["value"]
        print(f"\n{name}: default {'exact' if mech.exact_noise else 'floating point'}")
        if hasattr(mech, "lattice"):
            p = mech.parameters
            scale = p.get("lattice_scale") or f"σ_ℤ² = {p.get('lattice_sigma2')}"
            print(f"  lattice g = {p['sum_lattice']['granularity']}, Δ_u = {p['sum_lattice']['shift']}, scale {scale}")
        else:
            print(f"  kept floating point: {getattr(mech, 'refusal', None)}")
        print(f"  certified E Z²: default {u_e:.10g}, floating point {u_f:.10g}, ratio {u_e / u_f:.8f}")
        print(f"  measured E Z²: default {np.mean((out_e - answer) ** 2):.6g}, "
              f"floating point {np.mean((out_f - answer) ** 2):.6g}")
        print(f"  release CPU: {r_exact:.3f} s / {r_float:.3f} s ({r_exact / max(r_float, 1e-9):.1f}×); "
              f"design and certificate {t_exact:.2f} s / {t_float:.2f} s")


if __name__ == "__main__":
    main()
