"""The ``marginal_gaussian`` family: the optimum of ``gaussian_optimal``'s SDP found in the ANOVA algebra.

Sources of the expected values:

* ``gaussian_optimal``'s dense SDP (:mod:`dpopt.optimize.covariance`, Clarabel on the listed
  sensitivity vectors): an independent solver of the same program, compared at 1e-6;
* the Li–Miklau SVD bound (tr √(WᵀW))²/(Nμ²) from numpy's singular values of the dense W;
* W G⁺ Wᵀ built densely from Kronecker products of I − J/n and J/n (sampler covariance,
  per-cell variances, privacy re-checked as max over the listed vectors of vᵀΣ⁺v).
"""

from __future__ import annotations

import copy
import itertools
import json
import math

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload
from dpopt.mechanisms import registry
from dpopt.optimize.marginal_covariance import optimal_coefficients

ATTRS = {"a": ["1", "2", "3"], "b": ["x", "y"], "c": ["p", "q", "r", "s"]}
ALL_2WAY = {"kind": "marginals", "attributes": [["a", "b"], ["a", "c"], ["b", "c"]]}
ALL_1WAY = {"kind": "marginals", "attributes": [["a"], ["b"], ["c"]]}
MIXED = {"kind": "marginals", "attributes": [["c"], ["b", "a"], ["a"]]}
TABLE = {"kind": "contingency_table", "attributes": ["a", "b"]}


def spec(query, adjacency="add_remove", privacy=None, mechanism="marginal_gaussian", attributes=ATTRS, **extra):
    """A spec of the continuous design (floating-point sampler: these tests compare it with dense algebra at
    1e-12; the exact lattice measurement, within 2^-20 of it, is tested in test_exact_measurement.py)."""
    return {"dpopt": 1, "name": "marginal test", "data": {"attributes": attributes, "n": 10}, "query": query,
            "adjacency": adjacency, "privacy": privacy or {"zcdp": {"rho": 1.0}}, "mechanism": mechanism,
            "utility": {"metric": "l2"}, "sampler": "floating_point", **extra}


def dense_workload(sizes, blocks) -> np.ndarray:
    """W = [M_S]_S over the row-major cells of the table (first attribute slowest)."""
    cells = list(itertools.product(*[range(n) for n in sizes]))
    rows = []
    for block in blocks:
        for key in itertools.product(*[range(sizes[k]) for k in block]):
            rows.append([float(all(cell[k] == v for k, v in zip(block, key))) for cell in cells])
    return np.array(rows)


def dense_noise_covariance(mechanism) -> np.ndarray:
    """W (Σ_T a_T E_T)⁺ Wᵀ from the mechanism's parameters, with dense Kronecker products."""
    p = mechanism.parameters
    names, sizes = p["attributes"], p["levels"]
    w = dense_workload(sizes, [[names.index(a) for a in b] for b in p["blocks"]])
    g_plus = 0.0
    for entry in p["coefficients"]:
        factors = [np.eye(n) - 1.0 / n if name in entry["component"] else np.full((n, n), 1.0 / n)
                   for name, n in zip(names, sizes)]
        e_t = factors[0]
        for f in factors[1:]:
            e_t = np.kron(e_t, f)
        g_plus = g_plus + e_t / entry["a"]
    return w @ g_plus @ w.T


# ------------------------------------------------------------------ (a) the dense SDP's optimum
DENSE_CASES = [
    (ALL_2WAY, "add_remove", {"zcdp": {"rho": 1.0}}),
    (ALL_2WAY, "replace_one", {"gdp": {"mu": 1.0}}),
    (ALL_2WAY, {"kind": "hamming", "distance": 2}, {"zcdp": {"rho": 0.5}}),
    (ALL_1WAY, "add_remove", {"gdp": {"mu": 0.5}}),
    (ALL_1WAY, "replace_one", {"zcdp": {"rho": 1.0}}),
    (MIXED, "replace_one", {"gdp": {"mu": 1.0}}),
    (MIXED, "add_remove", {"zcdp": {"rho": 2.0}}),
    (TABLE, "replace_one", {"zcdp": {"rho": 1.0}}),
    (TABLE, "add_remove", {"gdp": {"mu": 1.0}}),
]


@pytest.mark.parametrize("query,adjacency,privacy", DENSE_CASES)
def test_equals_the_dense_sdp(query, adjacency, privacy):
    solution = dpopt.solve(spec(query, adjacency, privacy, mechanism=["marginal_gaussian", "gaussian_optimal"]))
    values = {c.family: c.utility.value for c in solution.candidates}
    assert values["marginal_gaussian"] == pytest.approx(values["gaussian_optimal"], rel=1e-6)
    design = solution.candidates[0].mechanism.design_info
    assert design["lower_bound"] <= design["expected_l2"] and design["optimality_gap"] < 1e-6


# ------------------------------------------------------------------ (b) the SVD bound
def svd_bound(sizes, blocks, mu2) -> float:
    s = np.linalg.svd(dense_workload(sizes, blocks), compute_uv=False)
    return float(s.sum()) ** 2 / (math.prod(sizes) * mu2)


def test_add_remove_reaches_the_svd_bound():
    solution = dpopt.solve(spec(ALL_2WAY))
    expected = svd_bound((3, 2, 4), [(0, 1), (0, 2), (1, 2)], 2.0)
    assert expected == pytest.approx(25.42521050657616, rel=1e-12)  # the issue's dense SDP value 25.4252
    assert solution.certificate["utility"]["value"] == pytest.approx(expected, rel=1e-12)


def test_five_attribute_issue_workload_against_numpy_svd():
    sizes = (10, 2, 6, 5, 8)
    blocks = list(itertools.combinations(range(5), 2))
    design = optimal_coefficients(MarginalWorkload(MarginalAlgebra(sizes), tuple(blocks)), math.sqrt(2.0), False)
    assert design.error == pytest.approx(svd_bound(sizes, blocks, 2.0), rel=1e-10)
    assert design.error < 1222.3  # HDMM's marginal strategy on this workload (issue 25)


# ------------------------------------------------------------------ (c) sampler and variances
def test_sampler_covariance_and_cell_variances():
    mechanism = dpopt.solve(spec(MIXED, "replace_one")).mechanism
    sigma = dense_noise_covariance(mechanism)
    n = 200_000
    z = mechanism.sample(n, np.random.default_rng(11))
    empirical = z.T @ z / n
    # Var of an entry of the empirical second moment of a centred Gaussian: (Σ_ii Σ_jj + Σ_ij²)/n;
    # 15 × 15 = 225 entries, P(|N(0,1)| > 5) = 5.7e-7 each: a false alarm below 1.3e-4
    se = np.sqrt((np.outer(np.diag(sigma), np.diag(sigma)) + sigma**2) / n)
    assert np.max(np.abs(empirical - sigma) / se) < 5.0
    np.testing.assert_allclose(mechanism.cell_variances(), np.diag(sigma), rtol=1e-12)
    assert mechanism.expected_utility(dpopt.load_spec(spec(MIXED)).utility).value == pytest.approx(
        np.trace(sigma), rel=1e-12)


def test_privacy_equals_the_dense_mahalanobis_sensitivity():
    problem = dpopt.compile(spec(ALL_2WAY, "replace_one"))
    mechanism = registry()["marginal_gaussian"].design(problem)
    sigma = dense_noise_covariance(mechanism)
    v = problem.space.vectors()
    dense = max(float(x @ np.linalg.lstsq(sigma, x, rcond=None)[0]) for x in v)
    assert mechanism.privacy_summary(problem.space)["mu"] ** 2 == pytest.approx(dense, rel=1e-9)
    assert dense == pytest.approx(2.0, rel=1e-9)  # μ² = 2ρ, met with equality


# ------------------------------------------------------------------ (d) the privacy check
@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one", {"kind": "hamming", "distance": 2}])
def test_privacy_check_rejects_inflated_coefficients(adjacency):
    problem = dpopt.compile(spec(ALL_2WAY, adjacency))
    cls, space, privacy = registry()["marginal_gaussian"], problem.space, problem.spec.privacy
    params = copy.deepcopy(cls.design(problem).parameters)
    assert all(c.passed for c in cls.from_parameters(params, space).privacy_checks(space, privacy))
    for entry in params["coefficients"]:
        entry["a"] *= 1.001
    failed = [c.claim for c in cls.from_parameters(params, space).privacy_checks(space, privacy) if not c.passed]
    assert failed == ["privacy"]


def test_parameters_round_trip_through_json():
    problem = dpopt.compile(spec(MIXED, {"kind": "hamming", "distance": 2}))
    cls = registry()["marginal_gaussian"]
    params = json.loads(json.dumps(cls.design(problem).parameters))
    assert cls.from_parameters(params, problem.space).parameters == params


def test_a_missing_component_fails_the_range_check():
    problem = dpopt.compile(spec(ALL_2WAY, "replace_one"))
    cls = registry()["marginal_gaussian"]
    params = copy.deepcopy(cls.design(problem).parameters)
    params["coefficients"].pop()
    mech = cls.from_parameters(params, problem.space)
    assert not any(c.passed for c in mech.privacy_checks(problem.space, problem.spec.privacy))


# ------------------------------------------------------------------ (e) certificate and verify
def test_certificate_verifies_and_tampering_fails():
    cert = dpopt.solve(spec(ALL_2WAY, "replace_one")).certificate
    assert dpopt.verify(cert).passed
    tampered = copy.deepcopy(cert)
    tampered["mechanism"]["parameters"]["coefficients"][0]["a"] *= 1.01
    failed = {c.claim for c in dpopt.verify(tampered).failed}
    assert "privacy" in failed
    moved = copy.deepcopy(cert)
    moved["mechanism"]["parameters"]["adjacency"] = "add_remove"
    assert "mechanism.workload" in {c.claim for c in dpopt.verify(moved).failed}


def test_auto_prefers_it_before_the_dense_sdp():
    solution = dpopt.solve(spec(ALL_2WAY, "replace_one", mechanism="auto"))
    assert solution.mechanism.family == "marginal_gaussian"


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("change,words", [
    ({"privacy": {"pure": {"epsilon": 1.0}}}, "pure ε"),
    ({"query": {"kind": "linear", "attribute": "a", "matrix": [[1, 1, 0]]}}, "linear"),
    ({"utility": {"metric": "l2", "weights": [1.0] * 26}}, "weights"),
    ({"utility": {"metric": "l1"}}, "'l1'"),
])
def test_refusals_say_why(change, words):
    problem = dpopt.compile({**spec(ALL_2WAY), **change})
    reason = registry()["marginal_gaussian"].supports(problem)
    assert reason is not None and words in reason


# ------------------------------------------------------------------ (f) the CLI
def test_cli_solve_and_verify(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec(ALL_2WAY, "replace_one", {"approx": {"epsilon": 1.0, "delta": 1e-6}})))
    assert main(["solve", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    cert = json.loads((tmp_path / "o" / "certificate.json").read_text())
    assert cert["mechanism"]["family"] == "marginal_gaussian"
    assert main(["verify", str(tmp_path / "o" / "certificate.json")]) == 0


# ------------------------------------------------------------------ invariant margins (Semi-DP)
def test_invariant_margins_bound_the_semi_dp_sensitivity():
    invariants = [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]
    document = spec(ALL_2WAY, "replace_one", {"gdp": {"mu": 1.0}}, invariants=invariants)
    problem = dpopt.compile(document)
    mechanism = registry()["marginal_gaussian"].design(problem)
    assert mechanism.parameters["multiplier"] == problem.space.semi_adjacent_parameter
    assert {tuple(c["component"]) for c in mechanism.parameters["coefficients"]} == {
        ("c",), ("a", "b"), ("a", "c"), ("b", "c")}  # ∅, a, b are published by the invariants
    sigma = dense_noise_covariance(mechanism)
    v = problem.space.vectors()  # S_Semi listed by enumeration of conforming datasets
    dense = float(np.max(np.sum((v @ np.linalg.pinv(sigma, rcond=1e-10, hermitian=True)) * v, axis=1)))
    assert dense <= 1.0 + 1e-9  # a · max-pair seminorm bounds the exact Semi-DP sensitivity
    checks = mechanism.scope_checks(problem) + mechanism.privacy_checks(problem.space, problem.spec.privacy)
    assert all(c.passed for c in checks)


@pytest.mark.slow  # ~45 s: the certificate's second route over the 127,981 listed Semi-DP differences
def test_invariant_margins_certificate_verifies():
    invariants = [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]
    cert = dpopt.solve(spec(ALL_2WAY, "replace_one", {"gdp": {"mu": 1.0}}, invariants=invariants)).certificate
    assert dpopt.verify(cert).passed


# ------------------------------------------------------------------ (g) the design record, re-derived (issue 35)
@pytest.fixture(scope="module")
def designs() -> dict:
    """The certificates of all 2-way marginals of (3, 2, 4) at ρ = 1, add/remove and replace-one."""
    out = {}
    for adjacency in ("add_remove", "replace_one"):
        document = spec(ALL_2WAY, adjacency)
        del document["sampler"]  # the exact lattice sampler, the default: its verify takes 0.1 s
        out[adjacency] = dpopt.solve(document).certificate.data
    return out


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_design_record_equals_its_dense_derivation(designs, adjacency):
    """Every re-derived entry of the record against dense linear algebra on W (6 + 12 + 8 = 26 rows, 24 cells):
    σ² = Δ₂²/μ² with Δ₂² the largest ‖W(x − x')‖² over neighbouring one-record differences (brute force over the
    24 cells and their pairs), the rank of those differences, tr(WWᵀ) for the identity strategy (noise of
    variance Δ₂(I)²/μ² on each cell: 1 record add/remove, 2 replace-one), numpy's singular values for the SVD
    bound, tr Σ and max vᵀΣ⁺v of the dense noise covariance for the error and μ_Σ²."""
    from fractions import Fraction

    replace = adjacency == "replace_one"
    cert = designs[adjacency]
    info = cert["mechanism"]["parameters"]["design"]
    sizes, blocks, mu2 = (3, 2, 4), [(0, 1), (0, 2), (1, 2)], 2.0  # μ² = 2ρ
    w = dense_workload(sizes, blocks)
    cells = w.shape[1]
    eye = np.eye(cells)
    moves = ([eye[p] - eye[q] for p, q in itertools.combinations(range(cells), 2)] if replace
             else list(eye))
    diffs = np.array([w @ m for m in moves])
    l2_squared = float(np.max(np.sum(diffs * diffs, axis=1)))
    rank = int(np.linalg.matrix_rank(diffs))
    # 3 blocks; rank Σ_T m_T over {∅, a, b, c, ab, ac, bc} = 1 + 2 + 1 + 3 + 2 + 6 + 3, the total fixed under replace-one
    assert (l2_squared, rank) == ((6.0, 17) if replace else (3.0, 18))
    identity = (2.0 if replace else 1.0) / mu2 * float(np.trace(w @ w.T))
    assert info["target_mu"] == pytest.approx(math.sqrt(mu2), rel=1e-15)
    assert info["baselines"] == pytest.approx({"direct": l2_squared / mu2 * w.shape[0],
                                               "direct_least_squares": l2_squared / mu2 * rank,
                                               "identity_strategy": identity}, rel=1e-12)
    mechanism = registry()["marginal_gaussian"].from_parameters(cert["mechanism"]["parameters"],
                                                                dpopt.compile(cert["spec"]).space)
    sigma = dense_noise_covariance(mechanism)
    dense = float(np.max(np.sum((diffs @ np.linalg.pinv(sigma, rcond=1e-10, hermitian=True)) * diffs, axis=1)))
    assert float(Fraction(info["mu_sigma_squared"])) == pytest.approx(dense, rel=1e-9)
    assert info["expected_l2"] == pytest.approx(float(np.trace(sigma)), rel=1e-12)
    assert info["components"] == (6 if replace else 7)  # {∅, a, b, c, ab, ac, bc}, ∅ exact under replace-one
    if replace:
        assert "svd_bound" not in info
    else:
        assert info["svd_bound"] == pytest.approx(svd_bound(sizes, blocks, mu2), rel=1e-12)
        assert info["lower_bound"] == pytest.approx(info["svd_bound"], rel=1e-12)
    assert info["optimality_gap"] == pytest.approx(
        max(0.0, (np.trace(sigma) - info["lower_bound"]) / np.trace(sigma)), abs=1e-9)


DESIGN_EDITS = [("target_mu",), ("mu_sigma_squared",), ("expected_l2",), ("components",), ("sampler",),
                ("baselines", "direct"), ("baselines", "direct_least_squares"), ("baselines", "identity_strategy"),
                ("svd_bound",), ("lower_bound",), ("optimality_gap", 0.25)]
"""The re-derived entries (halved, renamed or −5 by :func:`conftest.edited`); the gap (3.7e-16 here, compared to
1e-9 absolute: a difference of two nearly equal floats) set to 0.25."""


def _forged(cert: dict, path: tuple, value) -> dict:
    """``cert`` with the design entry at ``path`` set to ``value`` in the mechanism and the chosen candidate."""
    from conftest import edited

    out = copy.deepcopy(cert)
    rows = [r["parameters"] for r in out["candidates"] if r["family"] == "marginal_gaussian" and "parameters" in r]
    for parameters in (out["mechanism"]["parameters"], *rows):
        block = parameters["design"]
        for key in path[:-1]:
            block = block[key]
        block[path[-1]] = edited(block[path[-1]]) if value is None else value
    return out


@pytest.mark.parametrize("path", DESIGN_EDITS, ids=lambda p: ".".join(map(str, p)))
def test_a_forged_design_entry_fails_verify(designs, path):
    cert = designs["add_remove"]
    value = path[-1] if isinstance(path[-1], float) else None
    forged = _forged(cert, path[:-1] if value is not None else path, value)
    assert "design.recorded" in {c.claim for c in dpopt.verify(forged).failed}


def test_the_untampered_designs_verify(designs):
    assert all(dpopt.verify(cert).passed for cert in designs.values())


@pytest.mark.parametrize("path,value", [(("mu_sigma_squared",), "1/2"), (("svd_bound",), 1.0),
                                        (("lower_bound",), 1e6), (("sampler",), "floating_point")])
def test_a_plausible_forgery_under_replace_one_fails_verify(designs, path, value):
    """A smaller μ_Σ², an SVD bound (none under replace-one), a dual bound above the achieved error, a sampler
    the design did not choose."""
    cert = designs["replace_one"]
    assert "design.recorded" in {c.claim for c in dpopt.verify(_forged(cert, path, value)).failed}
