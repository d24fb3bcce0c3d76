"""The ``marginal_laplace`` family: Laplace noise on weighted marginals, answered by least squares (pure ε).

Expected values come from dense matrices built here from the recorded weights: the strategy
A = [θ_S M_S], its l1 sensitivity max ‖A e_j‖₁ / max ‖A(e_i − e_j)‖₁ by enumeration of cells,
and the error 2b² tr(W (AᵀA)⁺ Wᵀ); and from Laplace's closed form 2(Δ₁/ε)²d for the baseline.
"""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms import registry
from test_marginal_gaussian import ALL_2WAY, MIXED, dense_workload, spec

PURE = {"pure": {"epsilon": 1.0}}


def design(query, adjacency):
    problem = dpopt.compile(spec(query, adjacency, PURE, mechanism="marginal_laplace"))
    return problem, registry()["marginal_laplace"].design(problem)


def dense_strategy(mechanism) -> tuple[np.ndarray, np.ndarray]:
    p = mechanism.parameters
    names, sizes = p["attributes"], p["levels"]
    w = dense_workload(sizes, [[names.index(a) for a in b] for b in p["blocks"]])
    a = np.vstack([s["weight"] * dense_workload(sizes, [[names.index(x) for x in s["marginal"]]])
                   for s in p["strategy"]])
    return w, a


@pytest.mark.parametrize("query,adjacency", [(ALL_2WAY, "add_remove"), (MIXED, "replace_one"),
                                             (ALL_2WAY, {"kind": "hamming", "distance": 2})])
def test_error_and_sensitivity_against_dense_matrices(query, adjacency):
    problem, mechanism = design(query, adjacency)
    w, a = dense_strategy(mechanism)
    b = mechanism.parameters["scale"]
    if adjacency == "add_remove":
        l1 = np.abs(a).sum(axis=0).max()
    else:
        k = 2 if isinstance(adjacency, dict) else 1
        l1 = k * max(np.abs(a[:, i] - a[:, j]).sum() for i, j in itertools.combinations(range(a.shape[1]), 2))
    assert float(Fraction(mechanism.parameters["design"]["l1_sensitivity"])) == pytest.approx(l1, rel=1e-12)
    assert l1 / b <= 1.0 + 1e-12  # ε = Δ₁/b
    gram = np.linalg.pinv(a.T @ a)
    if adjacency != "add_remove":  # the total is released exactly: the noise leaves out the constant direction
        n = a.shape[1]
        gram = gram - gram @ np.full((n, n), 1.0 / n)
    dense = 2 * b * b * np.trace(w @ gram @ w.T)
    assert mechanism.expected_utility(problem.spec.utility).value == pytest.approx(dense, rel=1e-9)


def test_beats_laplace_on_each_cell():
    problem, mechanism = design(ALL_2WAY, "add_remove")
    # Laplace on each of the 26 released cells, Δ₁ = 3 tables: 2 (3/ε)² · 26 = 468
    assert mechanism.expected_utility(problem.spec.utility).value < 468.0


def test_sampler_variances():
    problem, mechanism = design(MIXED, "add_remove")
    w, a = dense_strategy(mechanism)
    b = mechanism.parameters["scale"]
    expected = np.diag(2 * b * b * w @ np.linalg.pinv(a.T @ a) @ w.T)
    n = 100_000
    z = mechanism.sample(n, np.random.default_rng(5))
    # Z_i is a linear combination of independent Laplace variables: kurtosis ≤ 6 (Laplace's), so
    # Var Z_i² ≤ 5σ⁴ and the SE of the mean of Z_i² is ≤ √5 σ²/√n; 5 SE over 15 cells
    se = np.sqrt(5.0) * expected / np.sqrt(n)
    assert np.all(np.abs((z**2).mean(axis=0) - expected) <= 5 * se)


def test_certificate_verifies_and_inflated_weights_fail():
    cert = dpopt.solve(spec(ALL_2WAY, "add_remove", PURE, mechanism="marginal_laplace")).certificate
    assert dpopt.verify(cert).passed
    tampered = copy.deepcopy(cert)
    for entry in tampered["mechanism"]["parameters"]["strategy"]:
        entry["weight"] *= 1.001
    assert "privacy" in {c.claim for c in dpopt.verify(tampered).failed}


def test_refuses_other_targets():
    problem = dpopt.compile(spec(ALL_2WAY))
    assert "pure" in registry()["marginal_laplace"].supports(problem)
