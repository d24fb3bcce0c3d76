"""``kind: kronecker`` queries (unions of Kronecker products) and the ``kronecker_gaussian`` family.

Every expected value has an independent source: the dense matrices written here with numpy
(``np.kron`` of ``np.tril``/``np.eye``/``np.ones``), brute-force enumeration of neighbouring
datasets (:func:`dpopt.sensitivity.enumerate.enumerate_space`, which evaluates the query record
by record), the dense SDP of ``gaussian_optimal`` on the same 1-D workload, and a grid search.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.domain.queries import compile_query
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.optimize.kronecker_strategy import optimal_factor, svd_bound, symmetric_factor
from dpopt.release.sources import answer, connect, open_source
from dpopt.sensitivity.enumerate import enumerate_space
from dpopt.sensitivity.kronecker_space import structural_rank

ROOT = Path(__file__).resolve().parents[1]
ATTRS = {"age": ["a", "b", "c", "d"], "sex": ["f", "m"], "r": ["x", "y", "z"]}
CASES = {
    "prefix x sex, ranges, a 2-way margin": [{"age": "prefix", "sex": "identity"}, {"age": {"ranges": 2}},
                                             {"sex": "identity", "r": "identity"}],
    "all ranges x r": [{"age": "ranges", "r": "identity"}],
    "a signed matrix, a margin, prefix": [{"age": {"matrix": [[1, -1, 0, 2], [0, 1, 1, -1]]}, "sex": "identity"},
                                          {"r": "identity"}, {"age": "prefix"}],
}


def spec(terms, adjacency="add_remove", mechanism="kronecker_gaussian", **extra) -> dict:
    data = {"attributes": ATTRS} | ({} if adjacency == "add_remove" else {"n": 3})
    return {"dpopt": 1, "name": "kronecker test", "data": data, "query": {"kind": "kronecker", "terms": terms},
            "adjacency": adjacency, "privacy": {"gdp": {"mu": 1.0}}, "mechanism": mechanism, **extra}


def dense_factor(factor, n: int) -> np.ndarray:
    """The factor written independently of dpopt."""
    if factor == "identity":
        return np.eye(n)
    if factor == "prefix":
        return np.tril(np.ones((n, n)))
    if factor == "ranges" or isinstance(factor, dict) and "ranges" in factor:
        width = n if factor == "ranges" else factor["ranges"]
        return np.array([[1.0 if i <= c <= j else 0.0 for c in range(n)]
                         for i in range(n) for j in range(i, min(n, i + width))])
    return np.array(factor["matrix"], dtype=float)


def dense_workload(terms) -> np.ndarray:
    """W over the used attributes (those some term names), in ATTRS order."""
    used = [a for a in ATTRS if any(a in t for t in terms)]
    rows = []
    for term in terms:
        block = np.ones((1, 1))
        for a in used:
            n = len(ATTRS[a])
            block = np.kron(block, dense_factor(term[a], n) if a in term else np.ones((1, n)))
        rows.append(block)
    return np.vstack(rows)


# ----------------------------------------------------------------------------------- spec
def test_sugar_expands_to_prefix_crossed_with_every_pair():
    q = compile_query(dpopt.load_spec(spec(None) | {"query": {"kind": "kronecker", "all_of_size": 2,
                                                              "crossed_with": {"age": "prefix"}}}))
    assert q.groups == (("age", "sex", "r"),)
    assert q.dimension == 4 * 2 * 3
    assert q.labels[:2] == ("age<=a,sex=f,r=x", "age<=a,sex=f,r=y")


@pytest.mark.parametrize("query, field", [
    ({"kind": "kronecker", "terms": [{"height": "prefix"}]}, "query.terms[0]"),
    ({"kind": "kronecker", "terms": [{"age": {"matrix": [[1, 1]]}}]}, "query.terms[0].age"),
    ({"kind": "kronecker", "terms": [{"age": "total"}]}, "query.terms"),
])
def test_bad_terms_name_their_field(query, field):
    with pytest.raises(SpecError) as err:
        compile_query(dpopt.load_spec(spec(None) | {"query": query}))
    assert err.value.field == field


def test_both_forms_and_invariants_are_refused():
    with pytest.raises(SpecError):
        dpopt.load_spec(spec([{"age": "prefix"}]) | {"query": {"kind": "kronecker", "terms": [{"age": "prefix"}],
                                                                "all_of_size": 1}})
    with pytest.raises(UnsupportedSpecError):
        dpopt.compile(spec([{"age": "prefix"}], "replace_one", invariants=[{"kind": "total"}]))


@pytest.mark.parametrize("name", CASES)
def test_answers_equal_the_dense_matrix_on_records(name):
    terms = CASES[name]
    q = compile_query(dpopt.load_spec(spec(terms)))
    rng = np.random.default_rng(3)
    records = [{a: levels[rng.integers(len(levels))] for a, levels in ATTRS.items()} for _ in range(30)]
    used = [a for a in ATTRS if any(a in t for t in terms)]
    cells = list(itertools.product(*(ATTRS[a] for a in used)))
    h = np.array([sum(tuple(r[a] for a in used) == c for r in records) for c in cells], dtype=float)
    np.testing.assert_allclose(q.evaluate(records), dense_workload(terms) @ h, atol=1e-12)
    np.testing.assert_allclose(q.dense(), dense_workload(terms), atol=0)


# ---------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("name", CASES)
def test_sensitivities_equal_enumeration(name, adjacency):
    s = dpopt.load_spec(spec(CASES[name], adjacency))
    derived, brute = dpopt.derive(s), enumerate_space(s, max_records=2)
    assert (derived.l1, derived.l2_squared, derived.linf) == (brute.l1, brute.l2_squared, brute.linf)
    assert derived.rank == brute.rank


@pytest.mark.parametrize("name", list(CASES)[:2])
def test_structural_rank_equals_the_dense_rank(name):
    q = compile_query(dpopt.load_spec(spec(CASES[name])))
    w = dense_workload(CASES[name])
    assert structural_rank(q.kron, replace=False) == np.linalg.matrix_rank(w)
    assert structural_rank(q.kron, replace=True) == np.linalg.matrix_rank(w - w.mean(axis=1, keepdims=True))


def test_structural_rank_refuses_row_spaces_that_do_not_commute():
    """On age, the signed matrix's row space (rank 2) and span(1) (the terms that sum age out) are
    neither nested nor orthogonal: their projectors do not commute."""
    q = compile_query(dpopt.load_spec(spec(CASES["a signed matrix, a margin, prefix"])))
    with pytest.raises(UnsupportedSpecError, match="do not commute"):
        structural_rank(q.kron, replace=False)


def test_hamming_scales_the_replace_one_hull():
    one = dpopt.derive(dpopt.load_spec(spec(CASES["all ranges x r"], "replace_one")))
    two = dpopt.derive(dpopt.load_spec(spec(CASES["all ranges x r"], "replace_one")
                                       | {"adjacency": {"kind": "hamming", "distance": 2}}))
    assert (two.l1, two.l2_squared, two.linf) == (2 * one.l1, 4 * one.l2_squared, 2 * one.linf)


# ----------------------------------------------------------------------------- strategy
def kron_all(factors) -> np.ndarray:
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def dense_strategy(m) -> np.ndarray:
    """A of a solved mechanism, written with numpy: ⊗A_k, or Σ_T √b_T ⊗_k (A_k on ordered attributes,
    I − J/n on the plain ones in T, J/n on the others) for the ANOVA form."""
    if m.coefficients is None:
        return kron_all(m.factors)
    ordered = dict(zip(m.split.ordered, m.factors))
    sizes = m.workload.sizes
    total = 0
    for t, b in m.coefficients.items():
        chosen = {m.split.plain[i] for i in t}
        total = total + np.sqrt(b) * kron_all([ordered[k] if k in ordered else
                                               np.eye(n) - 1 / n if k in chosen else np.full((n, n), 1 / n)
                                               for k, n in enumerate(sizes)])
    return total


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("name", CASES)
def test_design_equals_the_dense_path(name, adjacency):
    """Error, Δ₂(A)² and per-cell variances against dense W, A (:func:`dense_strategy`) and numpy, to 1e-9
    (least squares W(AᵀA)⁺Aᵀy: B is singular off the components the workload sees)."""
    m = dpopt.solve(spec(CASES[name], adjacency, sampler="floating_point")).mechanism  # the continuous design
    assert (m.coefficients is not None) == (adjacency == "add_remove")
    w, a = dense_workload(CASES[name]), dense_strategy(m)
    cov = m.sigma**2 * w @ np.linalg.pinv(a.T @ a) @ w.T
    assert m.expected_utility(dpopt.load_spec(spec(CASES[name], adjacency)).utility).value == pytest.approx(
        np.trace(cov), rel=1e-9)
    np.testing.assert_allclose(m.cell_variances(), np.diag(cov), rtol=1e-9)
    cols = a.T
    if adjacency == "add_remove":
        dense = (cols**2).sum(axis=1).max()
    else:
        dense = max(((cols[i] - cols[j]) ** 2).sum() for i in range(len(cols)) for j in range(len(cols)) if i != j)
    assert float(m._sensitivity_squared) == pytest.approx(dense, rel=1e-9)


def test_samples_follow_the_dense_covariance():
    """200,000 draws: each entry of the sample covariance within 5 standard errors, SE² of an entry
    being (C_ii C_jj + C_ij²)/n for Gaussian data."""
    terms = CASES["prefix x sex, ranges, a 2-way margin"]
    m = dpopt.solve(spec(terms, "replace_one", sampler="floating_point")).mechanism
    w, a = dense_workload(terms), kron_all(m.factors)
    cov = m.sigma**2 * w @ np.linalg.inv(a.T @ a) @ w.T
    n = 200_000
    z = m.sample(n, np.random.default_rng(11))
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(np.cov(z.T) - cov) <= 5 * se + 1e-12)


@pytest.mark.parametrize("factor", ["prefix", "ranges"])
def test_one_dimensional_case_equals_gaussian_optimal(factor):
    """One ordered attribute: the Kronecker design is the 1-D optimum, which gaussian_optimal's dense
    SDP also finds (its solver tolerance: 1e-6 relative)."""
    n = 8
    base = {"dpopt": 1, "name": "1-D", "data": {"attributes": {"x": [str(i) for i in range(n)]}},
            "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}}, "sampler": "floating_point"}
    ours = dpopt.solve(base | {"query": {"kind": "kronecker", "terms": [{"x": factor}]},
                               "mechanism": "kronecker_gaussian"})
    sdp = dpopt.solve(base | {"query": {"kind": "linear", "attribute": "x",
                                        "matrix": dense_factor(factor, n).tolist()}, "mechanism": "gaussian_optimal"})
    utility = dpopt.load_spec(base | {"query": {"kind": "count"}}).utility
    assert ours.mechanism.expected_utility(utility).value == pytest.approx(
        sdp.mechanism.expected_utility(utility).value, rel=1e-6)


def test_factor_dual_bound_certifies_the_prefix_optimum():
    g = np.tril(np.ones((20, 20))).T @ np.tril(np.ones((20, 20)))
    found = optimal_factor(g)
    assert found.lower_bound <= found.value <= found.lower_bound * (1 + 1e-8)
    assert np.diag(found.matrix.T @ found.matrix).max() <= 1 + 1e-12


def test_symmetric_closed_form_equals_a_grid_search():
    """g = 2I + 3J on 5 levels: min c₁/u + c₀/v over u(n−1)/n + v/n = 1 by a fine grid on u."""
    n, alpha, beta = 5, 2.0, 3.0
    a, b = symmetric_factor(alpha * np.eye(n) + beta * np.ones((n, n)))
    matrix = (a - b) * np.eye(n) + b * np.ones((n, n))
    x = matrix.T @ matrix
    value = np.trace((alpha * np.eye(n) + beta * np.ones((n, n))) @ np.linalg.inv(x))
    u = np.linspace(1e-3, n / (n - 1) - 1e-3, 200_001)
    v = n * (1 - u * (n - 1) / n)
    grid = (alpha * (n - 1) / u + (alpha + n * beta) / v).min()
    assert value == pytest.approx(grid, rel=1e-8)
    assert np.diag(x).max() == pytest.approx(1.0, rel=1e-12)


def test_svd_bound_equals_the_dense_nuclear_norm():
    terms = [{"age": "prefix", "sex": "identity"}, {"age": "prefix", "r": "identity"}]
    q = compile_query(dpopt.load_spec(spec(terms)))
    w = dense_workload(terms)
    sv = np.linalg.svd(w, compute_uv=False)
    nonzero = sv[sv > max(w.shape) * np.finfo(float).eps * sv[0]]
    # each computed σ_i is within max(m, n)·ε·σ₁ of the exact one (backward-stable SVD and Weyl); svd_bound
    # takes σ = √λ of eigenvalues within max(m, n)·ε·σ₁² of theirs, an error ≤ max(m, n)·ε·σ₁²/(2σ_r) for σ ≥ σ_r;
    # over the r nonzero values the nuclear norms differ by at most r·max(m, n)·ε·σ₁·(1 + σ₁/σ_r), and their
    # squares over N by 2·nuclear·that/N
    gap = len(nonzero) * max(w.shape) * np.finfo(float).eps * sv[0] * (1 + sv[0] / nonzero[-1])
    assert abs(svd_bound(q.kron) - sv.sum() ** 2 / w.shape[1]) <= 2 * sv.sum() * gap / w.shape[1]
    design = dpopt.solve(spec(terms)).mechanism.design_info
    assert design["svd_lower_bound"] <= design["expected_l2"] <= design["baselines"]["direct_least_squares"]


# ------------------------------------------------------------------------ release and CLI
def test_duckdb_answer_equals_record_by_record(tmp_path):
    terms = CASES["prefix x sex, ranges, a 2-way margin"]
    rng = np.random.default_rng(5)
    records = [{a: levels[rng.integers(len(levels))] for a, levels in ATTRS.items()} for _ in range(50)]
    path = tmp_path / "records.csv"
    path.write_text("age,sex,r\n" + "".join(f"{r['age']},{r['sex']},{r['r']}\n" for r in records))
    s = dpopt.load_spec(spec(terms))
    values, count = answer(connect(), open_source(path), s)
    assert count == 50
    np.testing.assert_allclose(values, compile_query(s).evaluate(records), atol=0)


def test_auto_compares_it_with_the_dense_optimum():
    """On 24 cells gaussian_optimal's full-covariance SDP runs and is at least as good as any
    Kronecker strategy (it optimises over every covariance): auto keeps the better one."""
    solution = dpopt.solve(spec(CASES["prefix x sex, ranges, a 2-way margin"], mechanism="auto"))
    rows = {c.family: c for c in solution.candidates}
    ours, sdp = rows["kronecker_gaussian"].utility.value, rows["gaussian_optimal"].utility.value
    assert sdp <= ours * (1 + 1e-6)
    assert solution.mechanism.family == "gaussian_optimal"


def test_cli_solve_verify_release(tmp_path, capsys):
    terms = CASES["prefix x sex, ranges, a 2-way margin"]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec(terms)))
    out = tmp_path / "out"
    assert main(["solve", str(path), "--out", str(out)]) == 0
    certificate = json.loads((out / "certificate.json").read_text())
    assert certificate["mechanism"]["family"] == "kronecker_gaussian"
    assert main(["verify", str(out / "certificate.json")]) == 0
    data = tmp_path / "records.csv"
    data.write_text("age,sex,r\na,f,x\nc,m,y\nd,m,z\n")
    capsys.readouterr()
    assert main(["release", str(path), "--data", str(data), "--seed", "3", "--insecure-seed"]) == 0


@pytest.mark.slow
def test_age_prefix_example_solves_and_verifies(tmp_path):
    """The specs/ example (771 million cells, 175,270 answers): about 10 s to solve with the report, 4 s to
    verify; A_age ⊗ B is within 6% of the SVD lower bound and below the product strategy."""
    out = tmp_path / "out"
    assert main(["solve", str(ROOT / "specs" / "range_marginals_age_prefix_zcdp.yaml"), "--out", str(out)]) == 0
    certificate = json.loads((out / "certificate.json").read_text())
    design = certificate["mechanism"]["parameters"]["design"]
    assert certificate["mechanism"]["family"] == "kronecker_gaussian"
    assert design["svd_lower_bound"] < design["expected_l2"] < design["baselines"]["direct_least_squares"]
    assert design["expected_l2"] < design["baselines"]["product_strategy"]
    assert design["expected_l2"] < 1.1 * design["svd_lower_bound"]  # the product strategy was 2.63× the bound
    assert math.isclose(certificate["utility"]["value"], design["expected_l2"], rel_tol=1e-12)
    assert main(["verify", str(out / "certificate.json")]) == 0


def test_verify_recomputes_the_strategy_and_refuses_an_under_noised_one():
    """A certificate whose first strategy factor is doubled (Δ₂(A) doubled, s unchanged) fails verify."""
    solution = dpopt.solve(spec(CASES["prefix x sex, ranges, a 2-way margin"], "replace_one", sampler="floating_point"))
    document = json.loads(solution.certificate.to_json())
    assert all(c.passed for c in dpopt.verify(document).checks)
    strategy = document["mechanism"]["parameters"]["strategy"][0]
    strategy["matrix"] = (2 * np.array(strategy["matrix"])).tolist()
    failed = {c.claim for c in dpopt.verify(document).checks if not c.passed}
    assert "privacy" in failed
