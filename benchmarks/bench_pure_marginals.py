"""Pure-ε workloads against HDMM: dpopt's certified error, its lower bound, HDMM's error, and times.

Run ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_pure_marginals.py [CASE ...]`` (default: every
case). Each dpopt case is solved and verified in this process and prints the certified total squared
error E‖Z‖², the certified lower bound for every unbiased ε-DP mechanism
(:mod:`dpopt.optimize.marginal_pure_bound`) and the ratio, the CPU seconds of solve and verify, and
HDMM's error on the same workload.

**HDMM.** With ``HDMM_PYTHON`` set to an interpreter that imports dpcomp-org/hdmm (it needs
numpy < 2 and scipy ≤ 1.10, so its own virtual environment, e.g.
``python3 -m venv /opt/hdmm && /opt/hdmm/bin/pip install "numpy<2" "scipy<=1.10" git+https://github.com/dpcomp-org/hdmm``),
the real HDMM runs in that interpreter: ``templates.Marginals(domain, approx=False, seed=s)``
optimised on the workload for seeds 0–4, the best total squared Laplace error
``error.expected_error(W, A, eps)`` kept. Without it (or when it fails) the benchmark says so and
prints instead :func:`hdmm_marginals_reference`, an independent implementation of the same template
and loss (McKenna et al., VLDB 2018, Sec. 5: θ ∈ ℝ^{2^p} over every marginal, loss
(Σθ)²·tr(WᵀW (AᵀA)⁻¹), error 2·loss/ε², L-BFGS-B from θ ~ U(0, 1) for seeds 0–4, best kept),
written here with the Gram matrices' eigenvalues as Kronecker products of 2 × 2 matrices over bit
masks, not through dpopt's algebra.

Rows are grouped by workload kind, each kind in functions of its own: all k-way marginals in
:func:`marginal_rows` (printed by :func:`print_marginal_rows`); range and range × marginal rows in
``benchmarks/bench_pure_ranges.py``, printed after them when no case is named.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure the dpopt of this tree, not an installed one

HDMM_ISSUE_5ATTR = 35_300.0
"""HDMM's figure on all 2-way marginals of (10, 2, 6, 5, 8) at ε = 1 (issue 36, best of 5 seeds)."""


def marginal_spec(sizes: tuple[int, ...], k: int, epsilon: float = 1.0, adjacency="add_remove") -> dict:
    """All k-way marginals of a table with ``sizes`` levels, pure ε, ``marginal_laplace``."""
    names = [f"a{i}" for i in range(len(sizes))]
    return {
        "dpopt": 1,
        "name": f"all {k}-way marginals of {sizes}",
        "data": {"attributes": {name: [f"v{j}" for j in range(n)] for name, n in zip(names, sizes)}},
        "query": {"kind": "marginals", "all_of_size": k},
        "adjacency": adjacency,
        "privacy": {"pure": {"epsilon": epsilon}},
        "mechanism": "marginal_laplace",
        "utility": {"metric": "l2"},
    }


def marginal_cases() -> dict[str, dict]:
    """The marginal rows: name → {spec, sizes, blocks, epsilon}."""
    out = {}
    for name, sizes, k in [("5attr_2way", (10, 2, 6, 5, 8), 2),
                           ("6attr_3way", (10, 2, 6, 5, 8, 4), 3),
                           ("6attr_2way", (10, 2, 6, 5, 8, 4), 2),
                           ("7attr_2way", (4, 3, 2, 5, 6, 3, 4), 2)]:
        out[name] = {"spec": marginal_spec(sizes, k), "sizes": sizes,
                     "blocks": [list(b) for b in itertools.combinations(range(len(sizes)), k)], "epsilon": 1.0}
    return out


# ----------------------------------------------------------------------------- HDMM, independently
def hdmm_marginals_reference(sizes, blocks, epsilon: float, seeds=range(5)) -> float:
    r"""HDMM's marginal template error, computed here independently (module docstring).

    Marginal S (bit mask s) has Gram :math:`\bigotimes_{k\in S} I \otimes \bigotimes_{k\notin S} J`; on the
    ANOVA component T (bit mask t) its eigenvalue is :math:`\prod_k X_k[s_k, t_k]`,
    :math:`X_k = \begin{pmatrix} n_k & 0\\ 1 & 1\end{pmatrix}` (J has n_k on the constants, 0 on the
    sum-zero vectors; I has 1 on both), with multiplicity :math:`\prod_{k\in T}(n_k - 1)`.
    """
    from scipy import optimize

    p = len(sizes)
    masks = np.arange(2**p)
    eig = np.ones((2**p, 2**p))
    mult = np.ones(2**p)
    for k, n in enumerate(sizes):
        s_bit = (masks >> k) & 1
        x = np.array([[float(n), 0.0], [1.0, 1.0]])
        eig *= x[s_bit[:, None], s_bit[None, :]]
        mult *= np.where(s_bit == 1, n - 1.0, 1.0)
    w = np.zeros(2**p)
    for b in blocks:
        w[sum(1 << k for k in b)] = 1.0
    lam = eig.T @ w  # workload Gram eigenvalues per component
    seen = (lam > 0) & (mult > 0)
    c = mult[seen] * lam[seen]
    e = eig[:, seen]

    def loss(theta):
        kappa = e.T @ (theta * theta)
        if np.any(kappa <= 0):
            return np.inf, np.zeros_like(theta)
        s = theta.sum()
        r = float(np.sum(c / kappa))
        return s * s * r, 2 * s * r - s * s * (e @ (c / kappa**2)) * 2 * theta

    best = math.inf
    for seed in seeds:
        start = np.random.RandomState(seed).rand(2**p)
        found = optimize.minimize(loss, start, jac=True, method="L-BFGS-B", bounds=[(0, None)] * 2**p)
        best = min(best, loss(found.x)[0])
    return 2.0 * best / (epsilon * epsilon)


_HDMM_CHILD = """
import json, sys
import numpy as np
from hdmm import workload, templates, error
args = json.loads(sys.argv[1])
dom = tuple(args["sizes"])
W = workload.DimKMarginals(dom, args["k"])
best = None
for seed in range(5):
    temp = templates.Marginals(dom, approx=False, seed=seed)
    temp.optimize(W)
    err = error.expected_error(W, temp.strategy(), eps=args["epsilon"])
    best = err if best is None else min(best, err)
print(json.dumps({"error": float(best)}))
"""


def real_hdmm(case: dict) -> tuple[float | None, str]:
    """HDMM itself in ``HDMM_PYTHON`` (module docstring): (error, note); (None, why) when it cannot run."""
    python = os.environ.get("HDMM_PYTHON")
    if not python:
        return None, "HDMM_PYTHON is not set (HDMM needs numpy < 2 and scipy ≤ 1.10 in its own environment)"
    ks = {len(b) for b in case["blocks"]}
    if len(ks) != 1 or len(case["blocks"]) != math.comb(len(case["sizes"]), ks.pop()):
        return None, "only all-k-way marginal workloads are passed to HDMM here"
    k = len(case["blocks"][0])
    payload = json.dumps({"sizes": list(case["sizes"]), "k": k, "epsilon": case["epsilon"]})
    start = time.perf_counter()
    try:
        done = subprocess.run([python, "-c", _HDMM_CHILD, payload], capture_output=True, text=True, timeout=600,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"HDMM did not run: {exc}"
    if done.returncode != 0:
        return None, "HDMM failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])["error"], f"HDMM ran in {time.perf_counter() - start:.1f} s"


# ----------------------------------------------------------------------------- dpopt
def marginal_rows(names=None) -> list[dict]:
    """Solve and verify each marginal case in this process (CPU seconds, imports excluded); HDMM beside it."""
    import dpopt

    cases = marginal_cases()
    rows = []
    for name in names or list(cases):
        case = cases[name]
        start = time.process_time()
        solution = dpopt.solve(case["spec"])
        solve_s = time.process_time() - start
        start = time.process_time()
        verification = dpopt.verify(solution.certificate)
        verify_s = time.process_time() - start
        bounds = solution.mechanism.parameters.get("design", {}).get("lower_bounds", {})
        hdmm, note = real_hdmm(case)
        if hdmm is None:
            start = time.process_time()
            hdmm = hdmm_marginals_reference(case["sizes"], case["blocks"], case["epsilon"])
            note += f"; independent reference of HDMM's template (5 seeds) in {time.process_time() - start:.2f} CPU s"
        rows.append({
            "case": name,
            "dpopt": solution.certificate["utility"]["value"],
            "lower_bound": bounds.get("unbiased_pure"),
            "laplace_strategies_bound": bounds.get("laplace_strategies"),
            "hdmm": hdmm, "hdmm_note": note,
            "solve_cpu": solve_s, "verify_cpu": verify_s,
            "verified": verification.passed,
        })
    return rows


def print_marginal_rows(rows: list[dict]) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}; CPU seconds; peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print("| case | dpopt E‖Z‖² | lower bound (unbiased ε-DP) | ratio | Laplace-strategy bound | HDMM | dpopt / HDMM "
          "| solve / verify CPU | verified |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['dpopt']:,.1f} | {r['lower_bound']:,.1f} | {r['dpopt'] / r['lower_bound']:.2f} | "
              f"{r['laplace_strategies_bound']:,.1f} | {r['hdmm']:,.1f} | {r['dpopt'] / r['hdmm']:.3f} | "
              f"{r['solve_cpu']:.2f} s / {r['verify_cpu']:.2f} s | {r['verified']} |")
    for r in rows:
        print(f"{r['case']}: {r['hdmm_note']}")


if __name__ == "__main__":
    print_marginal_rows(marginal_rows(sys.argv[1:] or None))
    if not sys.argv[1:]:  # every case: the range and range × marginal rows too
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_pure_ranges import print_range_rows, range_marginal_rows

        print_range_rows(range_marginal_rows())
