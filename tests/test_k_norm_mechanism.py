"""The k_norm family end to end: specs, selection against Laplace, certificates, fallback.

Expected values and their sources:

* Laplace on a d-cell table under replace-one (exact on counts by default: discrete Laplace of scale t = Δ₁/ε,
  Δ₁ = 2, whose variance 2r/(1 − r)², r = e^{−1/t}, follows from its pmf); a count (both continuous) under add/remove: both Laplace and the K-norm
  on K = [−1, 1] are Laplace(1/ε) (Gamma(2) × U(−1, 1) has density ∝ e^{−ε|x|}), so the
  two predictions tie at 2/ε²;
* 2×2 table with margins: the noise is Laplace(2/ε) along u = (1, −1, −1, 1)/2, whose
  smallest 1 − α interval has length 2·(2/ε)·ln(1/α);
* the Semi-DP paper's Figure 3 expectations (digest §6.3): E‖Z‖₂ for k×k tables with both
  margins, K-norm on the paper's Prop. 32 set at ε against naive l1/l2/l∞ at ε/3;
* the fallback's lower bound must stay below the optimal K's exact cost (computed here
  with the hull, on spaces small enough to build it).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
import yaml
from conftest import ROOT

import dpopt
import dpopt.mechanisms.k_norm as k_norm_module
from dpopt.cli import main
from dpopt.design.k_norm_comparison import semi_dp_k_norm_comparison
from dpopt.geometry import BALL_KINDS
from dpopt.mechanisms.k_norm import BallBody, HullBody, KNormMechanism, _exact_gauge_bound
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.table_moves import paper_moves

SPECS = ["table_2x2_margins_pure", "table_3x4_margins_pure", "table_4x4_margins_pure", "table_replace_pure"]


def table_spec(k: int, epsilon: float = 1.0, margins: bool = True, **extra) -> dict:
    levels = [f"l{i}" for i in range(k)]
    spec = {"dpopt": 1, "name": f"{k}x{k}", "data": {"attributes": {"a": levels, "b": levels}, "n": 500},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": epsilon}}}
    if margins:
        spec["invariants"] = [{"kind": "margins", "attributes": ["a"]}, {"kind": "margins", "attributes": ["b"]}]
    spec.update(extra)
    return spec


def claims(certificate) -> dict:
    return {c["claim"]: c for c in certificate["checks"]}


@pytest.mark.parametrize("name", SPECS)
def test_spec_files_solve_and_verify_with_k_norm(name):
    sol = dpopt.solve(ROOT / "specs" / f"{name}.yaml")
    assert sol.mechanism.family == "k_norm" and sol.mechanism.parameters["norm_ball"] == "hull"
    checks = claims(sol.certificate)
    exact = sol.mechanism.parameters.get("sampler") == "exact"  # the lattice law: its own exact sensitivity check
    for claim in ("k_norm.lattice" if exact else "k_norm.sensitivity", "k_norm.cone_decomposition", "privacy"):
        assert checks[claim]["passed"]
    assert exact  # every example table measures on the lattice (the 4×4 one by the cone sampler)
    assert dpopt.verify(sol.certificate).passed


@pytest.mark.parametrize("name, cells", [("table_2x2_margins_pure", ["sex", "disability"]),
                                         ("table_replace_pure", ["race", "sex"])])
def test_release_keeps_what_the_adjacency_does_not_protect(name, cells, tmp_path, capsys):
    """Released through the CLI from the survey records: the margins (2×2 with invariants)
    or the total (replace-one) equal the true ones."""
    assert main(["release", str(ROOT / "specs" / f"{name}.yaml"), "--data",
                 str(ROOT / "specs" / "data" / "survey.csv"), "--seed", "3", "--insecure-seed"]) == 0
    released = json.loads(capsys.readouterr().out)["release"]
    spec = dpopt.load_spec(ROOT / "specs" / f"{name}.yaml")
    levels = [spec.data.attributes[a] for a in cells]
    rows = np.genfromtxt(ROOT / "specs" / "data" / "survey.csv", delimiter=",", names=True, dtype=None,
                         encoding="utf-8")
    truth = np.array([[np.sum((rows[cells[0]] == u) & (rows[cells[1]] == v)) for v in levels[1]]
                      for u in levels[0]], dtype=float)
    noisy = np.array([[released[f"{cells[0]}={u},{cells[1]}={v}"] for v in levels[1]] for u in levels[0]])
    assert noisy.sum() == pytest.approx(truth.sum(), abs=1e-9)
    assert np.array_equal(noisy, np.round(noisy))  # lattice noise on the integer counts
    if name == "table_replace_pure":  # on the 2×2 table P[Z = 0] = (1 − e^{−1})/(1 + e^{−1}) = 0.46: 0 is common
        assert not np.allclose(noisy, truth)
    if name == "table_2x2_margins_pure":
        assert np.allclose(noisy.sum(axis=0), truth.sum(axis=0)) and np.allclose(noisy.sum(axis=1), truth.sum(axis=1))


def test_auto_prefers_k_norm_to_laplace_on_a_rank_deficient_table():
    sol = dpopt.solve(ROOT / "specs" / "table_replace_pure.yaml")
    by_family = {c.family: c for c in sol.candidates}
    laplace, k_norm = by_family["laplace"].utility.value, by_family["k_norm"].utility.value
    # laplace on counts is exact: discrete Laplace of scale t = Δ₁/ε = 4, E η² = 2r/(1 − r)², r = e^{−1/t} (its pmf
    # (1 − r)/(1 + r)·r^{|k|}, CKS 2020), on 6 cells
    r = math.exp(-1 / 4)
    assert laplace == pytest.approx(6 * 2 * r / (1 - r) ** 2, rel=1e-12)
    assert k_norm < laplace and sol.mechanism.family == "k_norm"


def test_count_k_norm_is_laplace_and_ties():
    """S = {±1}: K = [−1, 1] and the K-norm noise is Laplace(1/ε); the selector keeps the
    first family listed on ties (laplace). Both continuous: sampler: floating_point."""
    sol = dpopt.solve({**yaml.safe_load((ROOT / "specs" / "count_add_remove.yaml").read_text()),
                       "sampler": "floating_point"})
    by_family = {c.family: c for c in sol.candidates}
    assert by_family["k_norm"].utility.value == pytest.approx(by_family["laplace"].utility.value, rel=1e-12)


def test_k_norm_serves_a_gdp_target_through_the_pure_conversion():
    # ε-DP ⇒ μ-GDP iff ε ≤ log(Φ(μ/2)/Φ(−μ/2)) = 0.8069653463 at μ = 1 (Lee et al. 2022, eq. 12)
    sol = dpopt.solve(table_spec(2, privacy={"gdp": {"mu": 1.0}}, mechanism="k_norm"))
    assert sol.mechanism.epsilon == pytest.approx(0.8069653463, abs=1e-10)


def test_ci_volume_of_the_2x2_segment():
    """Continuous law (sampler: floating_point): the Laplace interval 2·(2/ε)·ln 10 of a segment of length 2.
    Lattice law (the default): c discrete Laplace, P(|c| ≤ k) = 1 − 2r^{k+1}/(1 + r), r = e^{−ε′}, ε′ = 0.7 rounded
    down to 21 bits; the smallest k with coverage ≥ 0.9 is 3 (k = 2 covers 0.836), so the region is the segment
    c ∈ [−3, 3] along the move (1, −1, −1, 1), of length 2k·‖(1, −1, −1, 1)‖ = 6·2 = 12 in ℝ⁴ (the continuous
    segment's measure: its K has length 4)."""
    spec = table_spec(2, epsilon=0.7, mechanism="k_norm", utility={"metric": "ci_volume", "alpha": 0.1})
    sol = dpopt.solve({**spec, "sampler": "floating_point"})
    assert sol.certificate["utility"]["value"] == pytest.approx(2 * (2 / 0.7) * math.log(10), rel=1e-12)
    r = math.exp(-math.floor(0.7 * 2**21) / 2**21)
    k = next(k for k in range(100) if 1 - 2 * r ** (k + 1) / (1 + r) >= 0.9)
    assert k == 3 and 1 - 2 * r**3 / (1 + r) < 0.9
    assert dpopt.solve(spec).certificate["utility"]["value"] == pytest.approx(2.0 * k * 2.0, rel=1e-12)


def test_tampered_epsilon_fails_verification():
    cert = dict(dpopt.solve(table_spec(3)).certificate.data)
    cert["mechanism"] = json.loads(json.dumps(cert["mechanism"]))
    cert["mechanism"]["parameters"]["epsilon"] = 1.5
    result = dpopt.verify(cert)
    assert not result.passed and "privacy" in {c.claim for c in result.failed}


# -------------------------------------------------------------------- fallback
def test_fallback_ball_when_the_hull_is_out_of_budget(monkeypatch):
    """The 3×2 replace-one table's hull is the root polytope of 6 cells, 2^6 − 2 = 62 facets (the closed form of
    ``tests/test_k_norm_geometry.py``): a budget of 61 facets refuses it before any work, and says so."""
    monkeypatch.setattr(k_norm_module, "HULL_BUDGET", replace(k_norm_module.HULL_BUDGET, facets=61))
    spec = dpopt.load_spec(ROOT / "specs" / "table_replace_pure.yaml")  # s = 5
    sol = dpopt.solve(spec.model_copy(update={"mechanism": "k_norm", "sampler": "floating_point"}))
    mechanism = sol.mechanism
    assert mechanism.family == "k_norm" and mechanism.parameters["norm_ball"] in BALL_KINDS
    assert mechanism.parameters["optimal_k"] is False
    assert "62 facets, more than 61" in mechanism.parameters["fallback_reason"]
    assert any("NOT the optimal K" in note for note in sol.certificate["mechanism"]["notes"])
    excess = claims(sol.certificate)["k_norm.excess_cost"]
    assert excess["passed"] and "lower bound" in excess["detail"]
    space = sol.space
    vectors, basis = space.vectors(), space.span.basis()
    costs = {kind: KNormMechanism(0.5, BallBody.smallest(kind, space, vectors, basis), space)._expected_l2(None)
             for kind in BALL_KINDS}
    assert sol.certificate["utility"]["value"] == pytest.approx(min(costs.values()), rel=1e-12)
    assert dpopt.verify(sol.certificate).passed


def test_fallback_on_counts_is_the_exact_lattice_cross_polytope(monkeypatch):
    """The same fallback measured exactly (the default on counts): K = {Σ_k |c_k|/M_k ≤ 1} in the lattice
    coordinates c of the reduced echelon form R of S, so Z = cR with c_k independent discrete Laplace of scales
    M_k/ε′. The reference: R by sympy's rref of the listed vectors, M_k by the definition (the plain M = max‖v[J]‖₁
    unless s·max|v[J]_k| has the smaller product), Var of the discrete Laplace of scale t 2e^{−1/t}/(1 − e^{−1/t})²
    (CKS 2020), E‖Z‖² = Σ_k Var c_k ‖R_k‖²; and 200,000 exact draws, whose mean ‖Z‖² lies within 4 standard errors
    of it. The certificate states the floating-point ball's utility (the cost of exactness) and verifies; a
    tampered bound fails."""
    import sympy

    monkeypatch.setattr(k_norm_module, "HULL_BUDGET", replace(k_norm_module.HULL_BUDGET, facets=0))
    spec = dpopt.load_spec(ROOT / "specs" / "table_replace_pure.yaml")
    sol = dpopt.solve(spec.model_copy(update={"mechanism": "k_norm"}))
    mechanism, cert = sol.mechanism, sol.certificate.data
    params = cert["mechanism"]["parameters"]
    assert mechanism.exact_noise and params["norm_ball"] == "lattice_cross_polytope" and params["optimal_k"] is False
    assert "idealized" not in json.dumps(cert)
    vectors = np.unique(sol.space.vectors(), axis=0)
    rref, pivots = sympy.Matrix(vectors.astype(int).tolist()).rref()
    r = np.array(rref[:len(pivots), :].tolist(), dtype=float)
    c = np.abs(vectors[:, list(pivots)])
    s = len(pivots)
    plain, weighted = c.sum(axis=1).max(), s * c.max(axis=0)
    bounds = weighted if np.prod(weighted) < plain**s else np.full(s, plain)
    eps = Fraction(params["lattice_epsilon"])
    x = float(eps) / bounds
    variances = 2 * np.exp(-x) / (1 - np.exp(-x)) ** 2
    reference = float(variances @ np.sum(r**2, axis=1))
    assert cert["utility"]["value"] == pytest.approx(reference, rel=1e-12)
    assert params["continuous_ball"]["norm_ball"] in BALL_KINDS
    cost = params["exact_cost"]  # the cost of exactness against the floating-point ball: its value by a re-solve
    ball = dpopt.solve(spec.model_copy(update={"mechanism": "k_norm", "sampler": "floating_point"}))
    assert ball.mechanism.parameters["norm_ball"] == params["continuous_ball"]["norm_ball"]
    assert cost["exact"] == cert["utility"]["value"]
    assert cost["continuous"] == pytest.approx(ball.certificate.data["utility"]["value"], rel=1e-12)
    assert cost["ratio"] == pytest.approx(cost["exact"] / cost["continuous"], rel=1e-12)
    assert claims(sol.certificate)["mechanism.exact_cost"]["passed"]
    z = mechanism.sample(200_000, np.random.default_rng(7))
    sq = np.sum(z**2, axis=1)
    assert abs(sq.mean() - reference) <= 4 * sq.std() / math.sqrt(sq.size)
    assert dpopt.verify(cert).passed
    counts = np.arange(mechanism.dimension, dtype=float)
    released = mechanism.release(counts, np.random.default_rng(8))
    assert np.array_equal(released, np.round(released)) and released.sum() == counts.sum()  # Z ∈ span(S): Σ = 0
    stated = json.loads(json.dumps(cert))
    stated["mechanism"]["parameters"]["exact_cost"]["ratio"] = 1.0  # a cost the values do not give
    assert not dpopt.verify(stated).passed
    forged = json.loads(json.dumps(cert))
    forged["mechanism"]["parameters"]["l1_bounds" if "l1_bounds" in params else "l1_bound"] = (
        [1] * s if "l1_bounds" in params else 1)
    assert not dpopt.verify(forged).passed


def test_cross_polytope_ci_volume_beyond_its_budget_keeps_the_ball(monkeypatch):
    """ci_volume of the lattice cross-polytope needs its proven coverage, a convolution of (L + 1) levels per
    group of equal M_k: with the budget lowered to 10 levels (a 20-cell replace-one histogram, rank 19, needs
    about 50), the design keeps the floating-point ball and says why, instead of failing the family."""
    monkeypatch.setattr("dpopt.stats.k_norm_cross_coverage.MAX_CROSS_WORK", 10)
    cells = [f"c{i}" for i in range(20)]
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": cells}, "n": 1000},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "replace_one",
            "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm", "utility": {"metric": "ci_volume"}}
    sol = dpopt.solve(spec)
    assert sol.mechanism.lattice is None and sol.mechanism.parameters["norm_ball"] in BALL_KINDS
    assert any("proven coverage would convolve" in note for note in sol.certificate["mechanism"]["notes"])


@pytest.mark.parametrize("spec", [table_spec(3), table_spec(2, margins=False), ROOT / "specs" / "table_3x4_margins_pure.yaml"])
def test_lower_bound_is_below_the_optimal_cost(spec):
    space = dpopt.derive(dpopt.load_spec(spec))
    vectors, basis = space.vectors(), space.span.basis()
    optimal = KNormMechanism(1.0, HullBody(vectors, basis), space)._expected_l2(None)
    bound, _ = k_norm_module.optimal_cost_lower_bound(vectors, basis, 1.0)
    l2_ball = KNormMechanism(1.0, BallBody.smallest("l2", space, vectors, basis), space)._expected_l2(None)
    assert 0 < bound <= optimal <= l2_ball


def test_fallback_ball_privacy_checks():
    """l2: exact Δ₂² ≤ c²; a radius below the sensitivity fails the check."""
    space = dpopt.derive(dpopt.load_spec(table_spec(3)))
    basis = space.span.basis()
    good = BallBody.smallest("l2", space, space.vectors(), basis)
    assert Fraction(good.radius) ** 2 >= space.l2_squared
    assert good.sensitivity_check(space, space.vectors())[1].passed
    bad = BallBody("l2", good.radius * (1 - 1e-6), basis)
    assert not bad.sensitivity_check(space, space.vectors())[1].passed
    for kind in ("l1", "linf"):
        ball = BallBody.smallest(kind, space, space.vectors(), basis)
        assert ball.sensitivity_check(space, space.vectors())[1].passed
        shrunk = BallBody(kind, ball.radius * (1 - 1e-6), basis)
        assert not shrunk.sensitivity_check(space, space.vectors())[1].passed


# ------------------------------------------------------------- LP certificates
def test_exact_gauge_certificates():
    square = np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1]])
    assert _exact_gauge_bound(square, np.array([1.0, 0.0])) == Fraction(1)
    assert _exact_gauge_bound(square, np.array([0.25, 0.5])) == Fraction(1, 2)
    assert _exact_gauge_bound(square, np.array([3.0, 1.0])) == Fraction(3)
    flat = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])
    assert _exact_gauge_bound(flat, np.array([0.0, 0.0, 1.0])) is None


def test_non_vertex_vectors_are_certified_by_lp():
    """A linear query whose differences include the midpoint (1, 0) of the hull edge from
    (1, −1) to (1, 1): its K-norm is 1, certified by the LP and exact rational re-solve."""
    spec = {"dpopt": 1, "name": "linear", "data": {"attributes": {"x": ["a", "b", "c", "d"]}},
            "query": {"kind": "linear", "attribute": "x", "matrix": [[0, 1, 0, 1], [0, 0, 1, 1]]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "k_norm",
            "sampler": "floating_point"}  # the continuous law's LP route (the lattice law checks g(v) in integers)
    sol = dpopt.solve(spec)
    check = claims(sol.certificate)["k_norm.sensitivity"]
    assert check["passed"] and "4 others by LP" in check["detail"]
    assert dpopt.verify(sol.certificate).passed


# ----------------------------------------------------------- paper comparison
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0])
def test_figure_3_expected_costs_k2(epsilon):
    rows = semi_dp_k_norm_comparison(table_spec(2, epsilon=epsilon), draws=100_000)
    ours, l1, l2, linf = rows
    assert ours.mean_l2_norm.value == pytest.approx(2.0 / epsilon, rel=1e-12)  # s = 1: exact
    assert l1.mean_l2_norm.value == pytest.approx(15.057411 / epsilon, rel=1e-6)
    assert l2.mean_l2_norm.value == pytest.approx(16.970563 / epsilon, rel=1e-6)
    assert linf.mean_l2_norm.value == pytest.approx(16.828494 / epsilon, rel=1e-6)
    assert l1.epsilon == pytest.approx(epsilon / 3)


def test_figure_3_expected_costs_k3():
    """Paper's K (Prop. 32): 6.103040/ε; the correct space with 6-cycles: 7.160597/ε."""
    v = paper_moves(3, 3).astype(float)
    paper = SensitivitySpace.from_vectors(np.vstack([v, -v]), method="Prop. 32", adjacency="A_3", complete=True)
    spec = table_spec(3)
    for space, expected in ((paper, 6.103040), (None, 7.160597)):
        rows = semi_dp_k_norm_comparison(spec, semi_space=space, draws=100_000)
        lo, hi = rows[0].mean_l2_norm.ci
        assert lo <= expected <= hi
    naive = [row.mean_l2_norm.value for row in rows[1:]]
    assert naive == pytest.approx([23.988081, 38.183766, 51.351648], rel=1e-6)


def test_lower_bound_of_a_list_with_repeated_rows_is_the_bound_of_the_full_list():
    """optimal_cost_lower_bound runs its greedy choice on the first occurrence of each distinct row; the reference
    is the greedy choice on the whole list (k_norm_module._greedy_independent), which takes the first of equal
    rows too, so both choose the same vectors (compared to 1e-12: BLAS may round the longer list's products
    differently in the last bits)."""
    import math

    space = dpopt.derive(dpopt.load_spec(table_spec(3)))
    vectors, basis = space.vectors(), space.span.basis()
    rng = np.random.default_rng(3)
    repeated = np.vstack([vectors, vectors[rng.integers(0, len(vectors), 3 * len(vectors))], vectors[::-1]])
    y = repeated @ basis
    s = basis.shape[1]
    _, logdet = np.linalg.slogdet(y[k_norm_module._greedy_independent(y, s)])
    log_volume = s * math.log(2.0) + logdet - math.lgamma(s + 1)
    rho_squared = math.exp(2.0 * (log_volume - (0.5 * s * math.log(math.pi) - math.lgamma(0.5 * s + 1))) / s)
    bound, _ = k_norm_module.optimal_cost_lower_bound(repeated, basis, 1.0)
    assert bound == pytest.approx(s * (s + 1) * rho_squared, rel=1e-12)
