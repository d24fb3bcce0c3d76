"""The ``kronecker_gaussian`` strategy A_ordered ⊗ B with B in the ANOVA algebra (add/remove).

References, each independent of the code under test: dense W and the dense strategy written with numpy
(:func:`test_kronecker_workloads.dense_strategy`), the product strategy evaluated densely from the factors
of :func:`~dpopt.optimize.kronecker_strategy.optimal_kronecker`, ``gaussian_optimal``'s dense SDP (the
optimum over every Gaussian noise covariance; solver tolerance 1e-6 relative), and the SVD bound as the
dense nuclear norm of W.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpopt
from dpopt.certificate.claims import utility_claims
from dpopt.domain.queries import compile_query
from dpopt.mechanisms import kronecker_gaussian
from dpopt.optimize.kronecker_strategy import optimal_kronecker
from test_kronecker_workloads import CASES, dense_strategy, dense_workload, kron_all, spec


def sdp_error(terms) -> float:
    """gaussian_optimal on the dense W of the same terms (a ``linear`` query over the product of the attributes
    the terms use, which is what dense_workload writes), at the same μ = 1 target."""
    used = [a for a in ("age", "sex", "r") if any(a in t for t in terms)]
    levels = {"age": 4, "sex": 2, "r": 3}
    n = int(np.prod([levels[a] for a in used]))
    base = {"dpopt": 1, "name": "dense", "data": {"attributes": {"cell": [str(i) for i in range(n)]}},
            "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}}
    solution = dpopt.solve(base | {"query": {"kind": "linear", "attribute": "cell",
                                             "matrix": dense_workload(terms).tolist()},
                                   "mechanism": "gaussian_optimal"})
    return solution.mechanism.expected_utility(dpopt.load_spec(base | {"query": {"kind": "count"}}).utility).value


@pytest.mark.parametrize("name", ["prefix x sex, ranges, a 2-way margin", "a signed matrix, a margin, prefix"])
def test_between_the_dense_optimum_and_the_product_strategy(name):
    """SVD bound ≤ SDP optimum ≤ ours ≤ the product strategy (all dense), ours strictly better here."""
    terms = CASES[name]
    m = dpopt.solve(spec(terms, sampler="floating_point")).mechanism
    assert m.coefficients is not None
    w = dense_workload(terms)
    ours = m.sigma**2 * np.trace(w @ np.linalg.pinv(dense_strategy(m).T @ dense_strategy(m)) @ w.T)
    product = kron_all(optimal_kronecker(compile_query(dpopt.load_spec(spec(terms))).kron).factors)
    # the product strategy at the same μ: its Δ₂² is its max column norm², σ² scales with it
    product_error = (product**2).sum(axis=0).max() * np.trace(w @ np.linalg.inv(product.T @ product) @ w.T)
    svd = np.linalg.svd(w, compute_uv=False).sum() ** 2 / w.shape[1]
    sdp = sdp_error(terms)
    assert svd <= sdp * (1 + 1e-6)
    assert sdp <= ours * (1 + 1e-6)
    assert ours < product_error * (1 - 1e-3)


def test_only_plain_attributes_reach_the_svd_bound_and_the_sdp():
    """Marginals only (no ordered attribute): B alone, whose closed form attains the SVD bound, which the
    dense SDP also attains (Li–Miklau; marginal_covariance's add/remove closed form)."""
    terms = [{"sex": "identity", "r": "identity"}, {"age": "identity"}, {"age": "identity", "sex": "identity"}]
    m = dpopt.solve(spec(terms, sampler="floating_point")).mechanism
    assert m.factors == () and m.coefficients is not None
    w = dense_workload(terms)
    svd = np.linalg.svd(w, compute_uv=False).sum() ** 2 / w.shape[1]
    assert m.design_info["expected_l2"] == pytest.approx(svd, rel=1e-9)
    assert m.design_info["expected_l2"] == pytest.approx(sdp_error(terms), rel=1e-6)


def test_samples_follow_the_dense_covariance():
    """200,000 draws of the ANOVA sampler (B singular off the closure): each entry of the sample covariance
    within 5 standard errors, SE² of an entry being (C_ii C_jj + C_ij²)/n for Gaussian data."""
    terms = CASES["a signed matrix, a margin, prefix"]
    m = dpopt.solve(spec(terms, sampler="floating_point")).mechanism
    w, a = dense_workload(terms), dense_strategy(m)
    cov = m.sigma**2 * w @ np.linalg.pinv(a.T @ a) @ w.T
    n = 200_000
    z = m.sample(n, np.random.default_rng(12))
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(np.cov(z.T) - cov) <= 5 * se + 1e-12)


def medium_spec() -> dict:
    """Age prefix (30 levels) × the six 2-way margins of four 4-level attributes: 2,880 answers."""
    four = ["a", "b", "c", "d"]
    return {"dpopt": 1, "name": "medium", "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}},
            "data": {"attributes": {"age": [str(i) for i in range(30)]} | {x: four for x in ("p", "q", "s", "t")}},
            "query": {"kind": "kronecker", "all_of_size": 2, "crossed_with": {"age": "prefix"}},
            "mechanism": "kronecker_gaussian", "sampler": "floating_point"}  # the continuous sampler's claim


@pytest.mark.parametrize("scale, passes", [(1.0, True), (1.02, False)])
def test_the_sampler_claim_at_its_fewest_draws_catches_a_wrong_scale(monkeypatch, scale, passes):
    """At 200 draws (the fewest the claim takes): the true sampler passes; one whose noise is 2% too large
    (E‖Z‖² 4.04% too large) fails. 5 SE here: ‖Z‖² has relative s.d. √(2 tr Σ²)/tr Σ ≤ √(2/r_eff) with an
    effective rank r_eff in the hundreds (2,880 answers of rank 2,440), i.e. ≲ 0.08 per draw, ≲ 0.6% over
    200 draws, 5 SE ≲ 3% < 4.04%."""
    s = dpopt.load_spec(medium_spec())
    m = dpopt.solve(s).mechanism
    monkeypatch.setattr(kronecker_gaussian, "CHECK_NORMALS", 1)
    assert m.sampler_check_draws(2_000) == kronecker_gaussian.MIN_CHECK_DRAWS == 200
    original = type(m)._anova_term_noise
    monkeypatch.setattr(type(m), "_anova_term_noise",
                        lambda self, rng, size: (scale * b for b in original(self, rng, size)))
    (check,) = utility_claims(s, m)
    assert check.passed is passes
    assert "200 draws" in check.method


def test_verify_recomputes_the_anova_sensitivity_and_refuses_an_under_noised_one():
    """A certificate whose ANOVA coefficients are all quadrupled (Δ₂(A)² = Σ_T b_T m_T/N_P quadrupled, s
    unchanged) fails verify; the one the solve wrote passes."""
    solution = dpopt.solve(spec(CASES["prefix x sex, ranges, a 2-way margin"], sampler="floating_point"))
    document = json.loads(solution.certificate.to_json())
    assert all(c.passed for c in dpopt.verify(document).checks)
    for entry in document["mechanism"]["parameters"]["anova"]:
        entry["coefficient"] *= 4
    failed = {c.claim for c in dpopt.verify(document).checks if not c.passed}
    assert "privacy" in failed
