"""Release plans: spec, allocation, composition, certificate and verification."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.noise.laplace import LaplaceMarginal
from dpopt.plan import load_plan, solve_plan, verify_plan
from dpopt.plan.allocate import allocate, closed_form_shares, convex_shares, model_objective
from dpopt.plan.compose import dominating_pair
from dpopt.privacy.pld import marginal_pld, product_pld


def make_plan(**overrides) -> dict:
    """A valid plan dict: a count and a 3-level histogram under ρ = 1/2, add/remove, Gaussian noise."""
    plan = {
        "dpopt": 1,
        "name": "plan",
        "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"]}},
        "queries": [{"query": {"kind": "count"}},
                    {"name": "by a", "query": {"kind": "histogram", "attribute": "a"}, "weight": 3}],
        "adjacency": "add_remove",
        "privacy": {"zcdp": {"rho": 0.5}},
        "mechanism": "gaussian",
    }
    plan.update(overrides)
    return plan


# ------------------------------------------------------------------------------ spec
def test_single_query_spec_is_a_plan_of_one():
    plan = load_plan({"dpopt": 1, "name": "c", "data": {"attributes": {"a": ["x"]}}, "query": {"kind": "count"},
                      "adjacency": "add_remove", "privacy": {"gdp": {"mu": 1.0}},
                      # at σ = 1 the exact lattice costs 9% (the discrete Gaussian's GDP slope), so auto would keep
                      # gaussian_optimal's floating-point design; the continuous σ is what this test derives
                      "sampler": "floating_point"})
    assert [q.name for q in plan.queries] == ["query"]
    sol = solve_plan(plan)
    # one Gaussian count at mu = 1 with sensitivity 1: sigma = 1/mu (Dong, Roth & Su 2022, Thm 2.7)
    assert sol.designs[0].share == 1.0
    assert sol.designs[0].mechanism.parameters["sigma"] == pytest.approx(1.0, rel=1e-12)


def test_default_names_and_bad_fields_are_named():
    assert [q.name for q in load_plan(make_plan()).queries] == ["q1", "by a"]
    bad = make_plan(queries=[{"query": {"kind": "histogram", "attribute": "nope"}}])
    with pytest.raises(SpecError, match=r"queries\[0\]\.query\.attribute"):
        load_plan(bad)
    with pytest.raises(SpecError, match="distinct"):
        load_plan(make_plan(queries=[{"name": "t", "query": {"kind": "count"}}] * 2))
    with pytest.raises(SpecError, match="sum to"):
        load_plan(make_plan(queries=[{"query": {"kind": "count"}, "share": 0.7},
                                     {"query": {"kind": "count"}, "share": 0.6}]))


def test_targets_and_metrics_a_plan_cannot_compose_are_refused():
    with pytest.raises(UnsupportedSpecError, match="privacy"):
        solve_plan(make_plan(privacy={"pdp": {"epsilon": 1.0, "delta": 0.01}}))
    plan = make_plan()
    plan["queries"][0]["utility"] = {"metric": "usefulness", "gamma": 1.0}
    with pytest.raises(UnsupportedSpecError, match=r"queries\[0\]\.utility"):
        solve_plan(plan)


def test_a_volume_beyond_the_double_range_is_refused_by_name():
    """A 600-cell histogram's 95% region lies beyond the double range: its share ρ_i ≤ 1/2 gives σ = 1/√(2ρ_i) ≥ 1,
    the radius σ·√χ²_{600, 0.95} ≥ √600, and the 600-ball of radius √600 has log volume
    300 log π + 300 log 600 − log Γ(301) ≈ 847 > log(1.8·10³⁰⁸) ≈ 709.8. No weighted total exists: the query is
    named, not summed as infinity."""
    plan = make_plan(queries=[{"query": {"kind": "count"}},
                              {"name": "wide", "query": {"kind": "histogram", "attribute": "a"},
                               "utility": {"metric": "ci_volume", "alpha": 0.05}}],
                     data={"attributes": {"a": [f"l{i}" for i in range(600)]}})
    with pytest.raises(UnsupportedSpecError, match=r"queries\[1\]\.utility: 'wide'.*double range"):
        solve_plan(plan)


# ------------------------------------------------------------------------ allocation
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_closed_form_equals_the_convex_program(p):
    rng = np.random.default_rng(7)
    b = rng.uniform(0.1, 10.0, size=6)
    closed = closed_form_shares(b, p)
    convex = convex_shares(b, np.full(6, p))
    np.testing.assert_allclose(convex, closed, rtol=2e-4)
    # the optimum value (Σ b_i^{1/(p+1)})^{p+1} (Hölder / Cauchy–Schwarz for p = 1), from the formula alone
    optimum = np.sum(b ** (1 / (p + 1))) ** (p + 1)
    assert model_objective(b, np.full(6, p), closed) == pytest.approx(optimum, rel=1e-12)
    assert model_objective(b, np.full(6, p), convex) == pytest.approx(optimum, rel=1e-6)


def test_mixed_exponents_use_the_convex_program_and_keep_fixed_shares():
    b, p = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 1.5])
    alloc = allocate(b, p, [None, 0.2, None])
    assert "convex program" in alloc.method
    assert alloc.shares[1] == 0.2 and sum(alloc.shares) == pytest.approx(1.0, abs=1e-12)
    # KKT: equal marginal costs p_i b_i s_i^{-p_i-1} over the free queries
    s = np.array(alloc.shares)
    marginal = p * b * s ** (-p - 1)
    assert marginal[0] == pytest.approx(marginal[2], rel=1e-3)


def test_gaussian_zcdp_allocation_by_hand():
    """Count (d = 1) and 3-level histogram (d = 3, weight 3), Δ₂ = 1, Gaussian σ² = 1/(2ρ_i):
    u_i = w_i d_i/(2ρ s_i), so s ∝ √(w_i d_i) = (1, 3)/4 and the total is (Σ√(w_i d_i/2))²/ρ = 16."""
    sol = solve_plan(make_plan())
    assert [d.share for d in sol.designs] == pytest.approx([0.25, 0.75], rel=1e-9)
    # counts under zCDP are measured exactly on the lattice: each σ² rounded up by at most 2^-20 (relative)
    assert 16.0 * (1 - 1e-12) <= sol.certificate["utility"]["value"] <= 16.0 * (1 + 2.0**-20)
    # equal split: 1/(2·0.25) + 3·3/(2·0.25) = 2 + 18 = 20
    assert 20.0 * (1 - 1e-12) <= sol.comparison["equal_split_weighted_total"] <= 20.0 * (1 + 2.0**-20)
    assert sol.comparison["ratio_optimal_to_equal"] == pytest.approx(0.8, rel=2.0**-19)


def test_fixed_shares_are_kept():
    plan = make_plan()
    plan["queries"][0]["share"] = 0.5
    sol = solve_plan(plan)
    assert [d.share for d in sol.designs] == pytest.approx([0.5, 0.5])


# ----------------------------------------------------------------------- composition
HETEROGENEOUS = make_plan(
    queries=[{"name": "table", "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "mechanism": "gaussian"},
             {"name": "count", "query": {"kind": "count"}, "mechanism": "laplace"}],
    privacy={"gdp": {"mu": 1.0}}, mechanism="auto")


@pytest.fixture(scope="module")
def heterogeneous():
    return solve_plan(HETEROGENEOUS)


def test_gaussian_and_laplace_compose_under_gdp(heterogeneous):
    sol = heterogeneous
    assert [d.mechanism.family for d in sol.designs] == ["gaussian", "laplace"]
    assert "convex program" in sol.allocation.method  # Laplace's μ-GDP utility is not a power 1 law
    mus = [d.target["gdp"]["mu"] for d in sol.designs]
    assert sum(m * m for m in mus) <= 1.0
    checks = {c["claim"]: c for c in sol.certificate["checks"]}
    assert checks["composition"]["passed"]
    result = verify_plan(sol.certificate)
    assert result.passed
    second = next(c for c in result.checks if c.claim == "composition.second_route")
    # the numerical route sees the Laplace count's true trade-off, more private than its μ-GDP bound
    assert second.detail.startswith("confirmed")


def test_lowering_one_sigma_fails_verify(heterogeneous):
    data = copy.deepcopy(heterogeneous.certificate.data)
    entry = data["queries"][0]
    entry["certificate"]["mechanism"]["parameters"]["sigma"] *= 0.9
    entry["parameters"]["sigma"] *= 0.9
    result = verify_plan(data)
    assert not result.passed
    assert any(c.claim.startswith("table.privacy") for c in result.failed)


def test_an_overspent_share_fails_verify(heterogeneous):
    """Raising one query's target (and its certificate to match) breaks the composition."""
    data = copy.deepcopy(heterogeneous.certificate.data)
    data["queries"][1]["target"] = {"gdp": {"mu": 0.9}}
    result = verify_plan(data)
    assert not result.passed


def test_laplace_l1_shift_on_one_coordinate_dominates():
    """The dominating pair used for i.i.d. Laplace noise: Lap(0, b) vs Lap(Δ₁, b) is less private
    than the product pair with the same ℓ1 shift spread over coordinates (checked here numerically
    with the rigorous PLD brackets: the spread pair's pessimistic δ(ε) ≤ the 1-D pair's optimistic)."""
    b = 1.0
    one = marginal_pld(LaplaceMarginal(b), 1.0)
    for shifts in ([0.5, 0.5], [0.7, 0.3], [0.25, 0.25, 0.5]):
        spread = product_pld([LaplaceMarginal(b)] * len(shifts), shifts)
        eps = np.linspace(0.0, 1.0, 21)
        assert (spread.upper.delta(eps) <= one.lower.delta(eps) + 1e-9).all()


def test_no_dominating_pair_is_reported_not_assumed():
    from dpopt.plan.solve import _design  # a design without solving the plan

    plan = load_plan(make_plan(queries=[{"query": {"kind": "histogram", "attribute": "a"}}],
                               mechanism="k_norm", privacy={"pure": {"epsilon": 1.0}}, adjacency="replace_one"))
    design = _design(plan, 0, {"pure": {"epsilon": 1.0}}, 1.0)
    assert isinstance(dominating_pair(design.mechanism, design.space), str)


def test_pure_plan_sums_epsilon():
    sol = solve_plan(make_plan(privacy={"pure": {"epsilon": 1.0}}, mechanism="laplace", sampler="floating_point"))
    eps = [d.target["pure"]["epsilon"] for d in sol.designs]
    assert sum(eps) <= 1.0 and sum(eps) == pytest.approx(1.0, rel=1e-9)
    # Laplace l2 error 2b²d with b = Δ₁/ε_i: power 2, so shares ∝ (w_i d_i)^(1/3) = (1, 9)^(1/3)
    r = 9 ** (1 / 3)
    assert [d.share for d in sol.designs] == pytest.approx([1 / (1 + r), r / (1 + r)], rel=1e-6)
    assert verify_plan(sol.certificate).passed


# --------------------------------------------------------------------------- joint design
OVERLAPPING = make_plan(queries=[
    {"name": "total", "query": {"kind": "count"}},
    {"name": "a", "query": {"kind": "histogram", "attribute": "a"}},
    {"name": "b", "query": {"kind": "histogram", "attribute": "b"}},
    {"name": "a x b", "query": {"kind": "contingency_table", "attributes": ["a", "b"]}},
], mechanism="auto")


@pytest.fixture(scope="module")
def overlapping():
    return solve_plan(OVERLAPPING)


def test_overlapping_queries_get_the_joint_design(overlapping):
    """The total, both one-way tables and the 3×2 table are all sums of the 6 cells. Isotropic
    noise σ² = 1/(2ρ) = 1 on the histogram (Δ₂ = 1 under add/remove) would cost Σ‖A_i P_i‖_F² = 6 + 6
    + 6 + 6 = 24; the optimal covariance can only do better, and separate noise does much worse."""
    cert = overlapping.certificate
    assert cert["design"] == "joint" and overlapping.joint is not None
    totals = {c["design"]: c["weighted_total"] for c in cert["candidates"]}
    joint = totals["joint: gaussian_optimal on the shared histogram"]
    assert joint <= 24.0 + 1e-9
    assert joint < totals["separate, optimal allocation"] < totals["separate, equal split"]
    assert cert["utility"]["value"] == pytest.approx(joint, rel=1e-9)
    assert verify_plan(cert).passed


def test_tampered_joint_covariance_fails_verify(overlapping):
    data = copy.deepcopy(overlapping.certificate.data)
    params = data["joint"]["certificate"]["mechanism"]["parameters"]
    params["covariance"] = (0.8 * np.asarray(params["covariance"])).tolist()
    assert not verify_plan(data).passed


def test_joint_rows_record_each_querys_intervals_and_verify_rederives_them():
    """Query i of a joint design with continuous noise (``sampler: floating_point``; the exact design's noise is
    the integer strategy's Rη) releases M_i(h + Z), Z ~ N(0, Σ) with Σ the certified covariance: cell j's noise
    is N(0, (M_i Σ M_iᵀ)_jj), so its SE is that root and its 95% half-width 1.96·SE (Φ⁻¹(0.975) from scipy). Each
    row records the block; a tampered half-width fails verify."""
    from scipy import stats

    solution = solve_plan({**OVERLAPPING, "sampler": "floating_point"})
    cert = solution.certificate
    sigma = np.asarray(cert["joint"]["certificate"]["mechanism"]["parameters"]["covariance"])
    for row, m in zip(cert["queries"], solution.joint.maps):
        se = np.sqrt(np.diag(m @ sigma @ m.T))
        block = row["per_cell"]
        assert [c["standard_error"] for c in block["cells"]] == pytest.approx(se, rel=1e-9)
        assert block["intervals"]["half_widths"] == pytest.approx(stats.norm.ppf(0.975) * se, rel=1e-9)
    data = copy.deepcopy(cert.data)
    data["queries"][1]["per_cell"]["intervals"]["half_widths"][0] *= 0.9
    assert not verify_plan(data).passed


def test_joint_release_is_consistent(overlapping, tmp_path):
    """Every query of a joint design is post-processing of one noisy histogram, so the released
    one-way table equals the row sums of the released two-way table."""
    from dpopt.plan.release import release_plan
    from dpopt.release import random_source

    rows = ["a,b"] + [f"{a},{b}" for a, b in zip("xyzxyzxx", "uvvuuvvu")]
    data = tmp_path / "records.csv"
    data.write_text("\n".join(rows) + "\n")
    _, doc, _ = release_plan(OVERLAPPING, data, random_source(5, insecure_seed=True))
    tables = {t["name"]: np.array(list(t["release"].values())) for t in doc["tables"]}
    np.testing.assert_allclose(tables["a"], tables["a x b"].reshape(3, 2).sum(axis=1), rtol=1e-9)
    np.testing.assert_allclose(tables["total"], tables["a x b"].sum(), rtol=1e-9)


# --------------------------------------------------------------------------------- audit
def test_audit_does_not_refute_a_plan_and_catches_an_under_counted_one(heterogeneous):
    """The Gaussian table and Laplace count of HETEROGENEOUS, composed to μ = 1: the audit's 95%
    lower bound on μ stays below 1. The same two queries each calibrated to the whole budget
    (composition ignored) are √2-GDP at best for the Gaussian pair alone (√(1² + 1²)); the audit
    refutes μ = 1 (200,000 draws per dataset: the bound's standard error is about 0.01)."""
    from dpopt.plan.audit import audit_composed, audit_plan
    from dpopt.plan.solve import _design

    result = audit_plan(heterogeneous, draws=200_000)
    assert result.audited and result.passed, result.to_dict()
    plan = heterogeneous.plan
    whole = [_design(plan, i, {"gdp": {"mu": 1.0}}, 1.0) for i in range(len(plan.queries))]
    under = audit_composed(plan, [d.spec for d in whole], [d.mechanism for d in whole], draws=200_000)
    assert not under.passed and under.lower_bound > 1.1, under.to_dict()


def test_audit_of_a_joint_plan(overlapping):
    from dpopt.plan.audit import audit_plan

    result = audit_plan(overlapping, draws=100_000)
    assert result.audited and result.passed, result.to_dict()


def test_single_query_verify_points_to_the_plan_verifier():
    from dpopt.certificate.verify import verify
    from dpopt.errors import CertificateError

    with pytest.raises(CertificateError, match="verify_plan"):
        verify(solve_plan(make_plan()).certificate)


def test_approx_plan_without_dominating_pair_is_certified_by_the_gdp_route():
    """A plan whose PLD route is unavailable (a mechanism with no dominating pair) is certified by
    μ = √Σμ_i² and the exact GDP profile: checked on two μ_i-GDP targets on either side of
    μ(1, 10⁻⁶) ≈ 0.2368 (the analytic Gaussian mechanism, Balle & Wang 2018, at δ = 10⁻⁶)."""
    from dpopt.plan.compose import gdp_route_check
    from dpopt.spec.models import Privacy

    target = Privacy(approx={"epsilon": 1.0, "delta": 1e-6})
    ok = gdp_route_check(target, [Privacy(gdp={"mu": 0.16}), Privacy(gdp={"mu": 0.17})], ["a", "b"])
    assert ok.passed  # √(0.16² + 0.17²) = 0.2335 < 0.2368
    over = gdp_route_check(target, [Privacy(gdp={"mu": 0.17}), Privacy(gdp={"mu": 0.17})], ["a", "b"])
    assert not over.passed  # 0.2404 > 0.2368
