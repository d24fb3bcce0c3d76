"""Pure-ε workloads (issue 36): dpopt's certified error against HDMM's templates, and its time.

Range and range × marginal rows (:func:`range_marginal_rows`): each workload is solved with
``dpopt.solve`` (``mechanism: kronecker_laplace``, ε = 1, add/remove) and its certificate verified with
``dpopt.verify``; CPU time of each (``time.process_time``). Beside the certified E‖Z‖² it prints:

* the identity strategy (Laplace(1/ε) on every cell, answers summed): 2/ε²·tr(WWᵀ), dense;
* **HDMM's best Kronecker template**, implemented here independently of dpopt (dense matrices on these
  small domains; McKenna et al., VLDB 2018, Sec. 6–7): ``KronPIdentity`` (a p-Identity factor
  [I; Θ]·diag(1/(1 + 1ᵀΘ)) per attribute, p = max(1, n // 16) as HDMM's default, optimised one factor
  at a time by L-BFGS-B with finite-difference gradients) and ``DefaultUnionKron`` (one Kronecker product
  per workload term: p-Identity on each attribute the term keeps, a total on the others; weights
  w_t ∝ e_t^{1/3}), each scored by full least squares, 2·Δ₁(A)²·tr(W(AᵀA)⁺Wᵀ)/ε², dense;
* the lower bound for Laplace matrix mechanisms, 2/ε²·(Σσᵢ(W))²/N, from a dense SVD of W.

Issue 36 quotes HDMM's own figure for the 1-way case: 67,543 (best of 5 seeds).

Run: python benchmarks/bench_pure_ranges.py (or bench_pure_marginals.py for every pure-ε row)
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure the dpopt of this tree, not an installed one

import dpopt  # noqa: E402

AGE = [f"{16 + 3 * i}-{18 + 3 * i}" for i in range(23)] + ["85+"]
CATEGORICAL = {"sex": ["female", "male"], "race": ["white", "black", "asian", "native", "other"],
               "region": ["north", "east", "south", "west"], "tenure": ["owned", "rented", "other"]}


def _spec(age_factor, size: int | None) -> dict:
    if size is None:
        query = {"kind": "kronecker", "terms": [{"age": age_factor}]}
        attributes = {"age": AGE}
    else:
        query = {"kind": "kronecker", "all_of_size": size, "crossed_with": {"age": age_factor}}
        attributes = {"age": AGE, **CATEGORICAL}
    return {"dpopt": 1, "name": "bench", "data": {"attributes": attributes}, "query": query,
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 1}}, "mechanism": "kronecker_laplace",
            "utility": "l2"}


def _age_matrix(factor) -> np.ndarray:
    n = len(AGE)
    if factor == "prefix":
        return np.tril(np.ones((n, n)))
    width = n if factor == "ranges" else factor["ranges"]
    rows = [(i, j) for i in range(n) for j in range(i, min(n, i + width))]
    out = np.zeros((len(rows), n))
    for r, (i, j) in enumerate(rows):
        out[r, i: j + 1] = 1
    return out


def _terms(age_factor, size: int | None) -> list[list[np.ndarray]]:
    """Per term, one dense factor per attribute (age first, then the categorical ones; a row of ones
    where the term sums the attribute out)."""
    age = _age_matrix(age_factor)
    if size is None:
        return [[age]]
    sizes = [len(v) for v in CATEGORICAL.values()]
    return [[age] + [np.eye(n) if k in group else np.ones((1, n)) for k, n in enumerate(sizes)]
            for group in itertools.combinations(range(len(sizes)), size)]


def _kron(factors) -> np.ndarray:
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def _pidentity(theta: np.ndarray) -> np.ndarray:
    return np.vstack([np.eye(theta.shape[1]), theta]) / (1 + theta.sum(axis=0))


def _fit(gram: np.ndarray, p: int, seed: int) -> np.ndarray:
    """min tr(G (AᵀA)⁻¹) over p-Identity A (L-BFGS-B, finite-difference gradient, one random start)."""
    n = gram.shape[0]

    def loss(x):
        a = _pidentity(x.reshape(p, n))
        return float(np.trace(gram @ np.linalg.inv(a.T @ a)))

    x0 = np.random.default_rng(seed).uniform(0, 1, p * n)
    x = optimize.minimize(loss, x0, method="L-BFGS-B", bounds=[(0, None)] * (p * n)).x
    return _pidentity(x.reshape(p, n))


def _laplace_error(w: np.ndarray, gram: np.ndarray, l1: float) -> float:
    """2·Δ₁(A)²·tr(W (AᵀA)⁺ Wᵀ) at ε = 1 from AᵀA (dense, N × N) and Δ₁ (add/remove: the largest column l1
    norm); the pseudo-inverse from an eigendecomposition (eigenvalues below 10⁻¹⁰ of the largest dropped)."""
    lam, u = np.linalg.eigh(gram)
    keep = lam > 1e-10 * lam.max()
    projected = w @ u[:, keep]
    return 2 * l1**2 * float(np.sum(projected**2 / lam[keep]))


def _column_l1(factors) -> float:
    """The largest column l1 norm of ⊗ factors: the product of the factors' (‖u ⊗ v‖₁ = ‖u‖₁‖v‖₁)."""
    return float(np.prod([np.abs(f).sum(axis=0).max() for f in factors]))


def hdmm_kron_pidentity(terms, seed: int) -> float:
    """``KronPIdentity``: ⊗_k p-Identity, each factor refitted for the others' traces (3 sweeps)."""
    attrs = len(terms[0])
    factors = [np.eye(f.shape[1]) for f in terms[0]]
    for _ in range(3):
        for k in range(attrs):
            traces = [np.prod([np.trace(t[j].T @ t[j] @ np.linalg.inv(factors[j].T @ factors[j]))
                               for j in range(attrs) if j != k]) for t in terms]
            gram = sum(c * t[k].T @ t[k] for c, t in zip(traces, terms))
            n = gram.shape[0]
            factors[k] = _fit(gram / np.abs(gram).max(), max(1, n // 16), seed + k) if n > 1 else np.eye(1)
    w = np.vstack([_kron(t) for t in terms])
    return _laplace_error(w, _kron([f.T @ f for f in factors]), _column_l1(factors))  # (⊗A)ᵀ(⊗A) = ⊗AᵀA


def hdmm_union_kron(terms, seed: int) -> float:
    """``DefaultUnionKron``: one product per term (p-Identity where the term keeps an attribute, a total
    where it sums it out), w_t ∝ e_t^{1/3}, scored by full least squares."""
    products, errors = [], []
    for t in terms:
        factors = [f if f.shape[0] == 1 else _fit(f.T @ f, max(1, f.shape[1] // 16), seed) for f in t]
        products.append(factors)
        errors.append(np.prod([np.trace(f.T @ f @ np.linalg.pinv(a.T @ a)) for f, a in zip(t, factors)]))
    weights = np.cbrt(errors) / np.cbrt(errors).sum()
    gram = sum(w * w * _kron([f.T @ f for f in p]) for w, p in zip(weights, products))
    # every product's columns have l1 norm 1 (p-Identity, totals), so a column of the union has Σ_t w_t = 1
    l1 = float(sum(w * _column_l1(p) for w, p in zip(weights, products)))
    return _laplace_error(np.vstack([_kron(t) for t in terms]), gram, l1)


RANGE_CASES = {
    "age prefix (24)": ("prefix", None),
    "age ranges (24, all)": ("ranges", None),
    "age prefix × 1-way of (2, 5, 4, 3)": ("prefix", 1),
    "age prefix × 2-way of (2, 5, 4, 3)": ("prefix", 2),
    "age ranges (width ≤ 6) × 1-way of (2, 5, 4, 3)": ({"ranges": 6}, 1),
}


def range_marginal_rows(seeds: int = 2) -> list[dict]:
    """The range and range × marginal rows (module docstring)."""
    rows = []
    for name, (factor, size) in RANGE_CASES.items():
        start = time.process_time()
        solution = dpopt.solve(_spec(factor, size))
        solve_cpu = time.process_time() - start
        start = time.process_time()
        verified = dpopt.verify(solution.certificate)
        verify_cpu = time.process_time() - start
        terms = _terms(factor, size)
        w = np.vstack([_kron(t) for t in terms])
        hdmm = min(min(hdmm_kron_pidentity(terms, s), hdmm_union_kron(terms, s)) for s in range(seeds))
        design = solution.mechanism.design_info
        rows.append({
            "case": name, "cells": w.shape[1], "answers": w.shape[0],
            "dpopt": solution.certificate["utility"]["value"],
            "identity": 2 * float(np.sum(w * w)),
            "hdmm_template": hdmm,
            "lower_bound": 2 * np.linalg.svd(w, compute_uv=False).sum() ** 2 / w.shape[1],
            "recorded_bound": design.get("laplace_lower_bound"),
            "solve_cpu": solve_cpu, "verify_cpu": verify_cpu,
            "verified": all(c.passed for c in verified.checks),
        })
    return rows


def print_range_rows(rows: list[dict]) -> None:
    print("| case | cells / answers | dpopt E‖Z‖² | identity | HDMM template (here) | dpopt / HDMM | lower bound "
          "| dpopt / bound | solve / verify CPU | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['cells']} / {r['answers']} | {r['dpopt']:,.0f} | {r['identity']:,.0f} | "
              f"{r['hdmm_template']:,.0f} | {r['dpopt'] / r['hdmm_template']:.3f} | {r['lower_bound']:,.0f} | "
              f"{r['dpopt'] / r['lower_bound']:.2f} | {r['solve_cpu']:.2f} s / {r['verify_cpu']:.2f} s | "
              f"{r['verified']} |")


if __name__ == "__main__":
    print_range_rows(range_marginal_rows())
