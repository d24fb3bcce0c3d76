"""R²DP timings (issue 7): the mixture LP on 2,000 values of 1/b (target < 1 s) and a
parametric optimisation for one (ε, Δ, γ) (target < 2 s), each against a baseline measured
in the same run: the same LP through scipy's HiGHS interface (no cvxpy), and the Gamma
family's closed-form 1-D search.

Run: python benchmarks/bench_r2dp.py
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
from scipy import optimize

import dpopt
from dpopt.optimize.r2dp_lp import mixture_lp, optimize_mixture
from dpopt.optimize.r2dp_objectives import l1_objective, usefulness_objective
from dpopt.optimize.r2dp_parametric import FAMILIES, optimize_family

CASES = ((5.0, 0.1), (3.0, 0.1), (8.0, 0.4))  # (ε, γ/Δ), Δ = 1


def _median_time(fn, repeat: int) -> tuple[float, object]:
    out, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out), result


def _linprog(lp) -> float:
    res = optimize.linprog(lp.costs, A_ub=lp.row[None, :], b_ub=[0.0], A_eq=np.ones((1, lp.s.size)), b_eq=[1.0],
                           bounds=(0, None), method="highs")
    return float(res.fun)


def main() -> None:
    print("Mixture LP over 2,000 values of 1/b (usefulness), median of 5:")
    for eps, gamma in CASES:
        obj = usefulness_objective(gamma)
        t_cvx, lp = _median_time(lambda: mixture_lp(obj, eps, 1.0, 2000), 5)
        t_scipy, fun = _median_time(lambda: _linprog(lp), 5)
        t_full, opt = _median_time(lambda: optimize_mixture(obj, eps, 1.0, 2000), 3)
        print(f"  ε={eps:g} γ/Δ={gamma:g}: grid {lp.s.size}: cvxpy/HiGHS {t_cvx * 1e3:7.1f} ms "
              f"(scipy linprog baseline {t_scipy * 1e3:6.1f} ms, {t_cvx / t_scipy:.1f}x); "
              f"LP U = {1 - float(lp.weights @ lp.costs):.6f} (linprog {1 - fun:.6f}); "
              f"full design (LP + two-atom polish + 60-digit re-check + dual bound + Laplace test) "
              f"{t_full * 1e3:7.1f} ms, U = {opt.value:.6f}")
    t_l1, opt = _median_time(lambda: optimize_mixture(l1_objective(), 8.0, 1.0, 2000), 3)
    print(f"  l1 at ε=8: full design {t_l1 * 1e3:.1f} ms, E|Z| = {opt.value:.6f}")

    print("Parametric search at ε = 5, γ/Δ = 0.1 (6 seeded starts, ε re-checked at 60 digits):")

    def closed_gamma():
        return optimize.minimize_scalar(lambda k: (1 + 0.1 * math.expm1(5.0 / (k + 1))) ** (-k),
                                        bounds=(0.5, 10), method="bounded")

    t_closed, _ = _median_time(closed_gamma, 5)
    print(f"  Gamma closed form U(k), 1-D search (baseline)   {t_closed * 1e3:8.2f} ms")
    for family in FAMILIES:
        starts = 3 if family == "ensemble" else 6
        t, res = _median_time(lambda f=family, n=starts: optimize_family(f, usefulness_objective(0.1), 5.0, 1.0,
                                                                          starts=n, seed=0), 1)
        flag = "" if t < 2.0 else "  (over 2 s)"
        print(f"  {family:18s} starts={starts}: {t:7.2f} s ({t / t_closed:8.0f}x baseline), "
              f"U = {res.value:.6f}, {res.evaluations} evaluations{flag}")

    spec = {"dpopt": 1, "name": "b", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 5.0}}, "mechanism": "r2dp",
            "utility": {"metric": "usefulness", "gamma": 0.1}}
    t_solve, sol = _median_time(lambda: dpopt.solve(spec), 3)
    t_verify, ver = _median_time(lambda: dpopt.verify(sol.certificate), 3)
    print(f"End to end (count, ε = 5, usefulness γ = 0.1): solve {t_solve:.2f} s, verify {t_verify:.2f} s "
          f"(passed: {ver.passed})")


if __name__ == "__main__":
    main()
