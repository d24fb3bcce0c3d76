"""``kronecker_laplace``: pure-ε Kronecker strategies, checked against dense matrices and brute force.

Every expected value is computed here, independently of :mod:`dpopt.optimize.pure_kronecker`: the
strategy A = A_age ⊗ [θ_S M_S] and the workload W are formed densely on small domains from the recorded
parameters; the l1 sensitivity is the brute-force maximum over cells (pairs of cells under replace-one);
the error is 2b²·tr(W (AᵀA)⁻¹ Wᵀ) by dense linear algebra; the lower bound is the dense SVD of W.
The done-criterion figure 67,543 is HDMM's (issue 36: best of ``DefaultKron``, ``KronPIdentity`` and
``DefaultUnionKron`` over 5 seeds, scored by its ``expected_error``).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize

import dpopt
from dpopt.domain.kronecker import KroneckerWorkload
from dpopt.mechanisms.kronecker_laplace import KroneckerLaplaceMechanism, laplace_lower_bound
from dpopt.optimize import pure_kronecker
from dpopt.optimize.kronecker_anova import AnovaSplit
from dpopt.problem import compile as compile_problem

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "age": ["a0", "a1", "a2", "a3", "a4"],
    "sex": ["f", "m"],
    "region": ["n", "e", "s"],
}


def small_spec(size: int = 1, adjacency: str = "add_remove", epsilon: float = 1.0) -> dict:
    """The continuous design (floating-point sampler: these tests compare it with dense algebra; the exact
    discrete Laplace measurement on integer factors is tested in test_kronecker_laplace_exact.py)."""
    data = {"attributes": SMALL} | ({} if adjacency == "add_remove" else {"n": 50})
    return {"dpopt": 1, "name": "small prefix x marginals", "data": data,
            "query": {"kind": "kronecker", "all_of_size": size, "crossed_with": {"age": "prefix"}},
            "adjacency": adjacency, "privacy": {"pure": {"epsilon": epsilon}},
            "mechanism": "kronecker_laplace", "utility": "l2", "sampler": "floating_point"}


def dense_workload(size: int) -> np.ndarray:
    """W of the small spec: prefix(5) ⊗ (each group of ``size`` of sex, region: identity, others summed)."""
    prefix = np.tril(np.ones((5, 5)))
    blocks = []
    for group in itertools.combinations(("sex", "region"), size):
        factors = [np.eye(len(SMALL[a])) if a in group else np.ones((1, len(SMALL[a]))) for a in ("sex", "region")]
        blocks.append(np.kron(prefix, np.kron(*factors)))
    return np.vstack(blocks)


def dense_strategy(parameters: dict) -> np.ndarray:
    """A = A_age ⊗ [θ_S M_S]_S from the recorded parameters (sex, region plain; cells row-major)."""
    marginal = {(): np.ones((1, 6)), ("sex",): np.kron(np.eye(2), np.ones((1, 3))),
                ("region",): np.kron(np.ones((1, 2)), np.eye(3)), ("sex", "region"): np.eye(6)}
    b = np.vstack([m["weight"] * marginal[tuple(m["marginal"])] for m in parameters["strategy"]["marginals"]])
    (age,) = parameters["strategy"]["ordered"]
    assert age["attribute"] == "age"
    return np.kron(np.array(age["matrix"]), b)


@pytest.fixture(scope="module")
def solved():
    return {size: dpopt.solve(small_spec(size)) for size in (1, 2)}


@pytest.mark.parametrize("size", [1, 2])
def test_l1_sensitivity_is_the_brute_force_column_maximum(solved, size):
    m = solved[size].mechanism
    a = dense_strategy(m.parameters)
    brute = np.abs(a).sum(axis=0).max()
    assert float(pure_kronecker.l1_sensitivity(m.strategy, replace=False)) == pytest.approx(brute, rel=1e-12)
    # the certified ε is Δ₁/b with that Δ₁
    assert m.privacy_summary(solved[size].space)["epsilon"] == pytest.approx(brute / m.scale, rel=1e-12)


def test_replace_one_is_an_upper_bound_and_exact_for_the_identity(solved):
    """max over pairs of cells of ‖A(e_i − e_j)‖₁ (brute force over all 30·29 pairs) ≤ 2Δ₁; equal to
    2Δ₁ for the identity strategy (disjoint columns)."""
    m = solved[1].mechanism
    a = dense_strategy(m.parameters)
    pairs = max(np.abs(a[:, i] - a[:, j]).sum() for i in range(30) for j in range(30) if i != j)
    assert pairs <= float(pure_kronecker.l1_sensitivity(m.strategy, replace=True)) * (1 + 1e-12)
    split = AnovaSplit.of(m.workload)
    identity = pure_kronecker.baseline(m.workload, split, "identity")
    params = copy.deepcopy(m.parameters)
    params["strategy"] = {"ordered": [{"attribute": "age", "matrix": identity.factors[0].tolist()}],
                          "marginals": [{"marginal": ["sex", "region"], "weight": 1.0}]}
    a = dense_strategy(params)
    assert np.array_equal(a, np.eye(30))
    pairs = max(np.abs(a[:, i] - a[:, j]).sum() for i in range(30) for j in range(30) if i != j)
    assert float(pure_kronecker.l1_sensitivity(identity, replace=True)) == pairs == 2.0


@pytest.mark.parametrize("size", [1, 2])
def test_error_is_the_dense_least_squares_error(solved, size):
    m = solved[size].mechanism
    a, w = dense_strategy(m.parameters), dense_workload(size)
    dense = 2 * m.scale**2 * np.trace(w @ np.linalg.pinv(a.T @ a) @ w.T)
    assert solved[size].certificate["utility"]["value"] == pytest.approx(dense, rel=1e-9)


def test_replace_one_design_certifies_with_twice_the_sensitivity():
    solution = dpopt.solve(small_spec(1, adjacency="replace_one"))
    m = solution.mechanism
    a, w = dense_strategy(m.parameters), dense_workload(1)
    assert m.scale == pytest.approx(2 * np.abs(a).sum(axis=0).max(), rel=1e-12)  # ε = 1
    assert solution.certificate["utility"]["value"] == pytest.approx(
        2 * m.scale**2 * np.trace(w @ np.linalg.pinv(a.T @ a) @ w.T), rel=1e-9)
    assert all(c["passed"] for c in solution.certificate["checks"])


def test_sampler_draws_the_dense_covariance(solved):
    """Per-answer variances of 40,000 draws against diag(2b² W(AᵀA)⁻¹Wᵀ). Each answer is a linear image of
    Laplace variates (kurtosis ≤ 6), so the relative SE of a variance estimate is ≤ √(5/40,000) = 1.1%;
    6 SE = 6.7%, taken as 7%."""
    m = solved[2].mechanism
    a, w = dense_strategy(m.parameters), dense_workload(2)
    expected = 2 * m.scale**2 * np.diag(w @ np.linalg.pinv(a.T @ a) @ w.T)
    z = m.sample(40_000, np.random.default_rng(3))
    assert np.allclose(z.var(axis=0), expected, rtol=0.07)
    assert np.abs(z.mean(axis=0)).max() < 6 * np.sqrt(expected.max() / 40_000)


def test_pidentity_gradient_matches_finite_differences():
    g = np.tril(np.ones((7, 7))).T @ np.tril(np.ones((7, 7)))
    x = np.random.default_rng(0).uniform(0.1, 1.0, 2 * 7)
    f = lambda v: pure_kronecker.pidentity_loss(v, g, 2)[0]  # noqa: E731
    grad = lambda v: pure_kronecker.pidentity_loss(v, g, 2)[1]  # noqa: E731
    assert optimize.check_grad(f, grad, x) <= 1e-5 * np.linalg.norm(grad(x))


def test_pidentity_value_is_the_dense_trace():
    g = np.tril(np.ones((6, 6))).T @ np.tril(np.ones((6, 6)))
    theta = np.random.default_rng(1).uniform(0.0, 1.0, (2, 6))
    a = np.vstack([np.eye(6), theta]) / (1 + theta.sum(axis=0))
    assert np.abs(a).sum(axis=0) == pytest.approx(np.ones(6))
    assert pure_kronecker.pidentity_loss(theta.ravel(), g, 2)[0] == pytest.approx(
        np.trace(g @ np.linalg.inv(a.T @ a)), rel=1e-12)


def test_lower_bound_is_the_dense_svd_bound_and_below_every_laplace_strategy(solved):
    """(2/ε²)(Σσ_i(W))²/N from a dense SVD; below the design, the identity and hierarchical strategies
    and 20 random non-negative strategies scored here by dense least squares."""
    m = solved[2].mechanism
    w = dense_workload(2)
    bound = 2 * np.linalg.svd(w, compute_uv=False).sum() ** 2 / 30
    assert laplace_lower_bound(m.workload, 1.0) == pytest.approx(bound, rel=1e-9)
    info = m.design_info
    assert info["laplace_lower_bound"] == pytest.approx(bound, rel=1e-9)
    assert info["ratio_to_lower_bound"] == pytest.approx(info["expected_l2"] / bound, rel=1e-12)
    assert bound <= info["expected_l2"]
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.uniform(0.0, 1.0, (40, 30)) * (rng.uniform(size=(40, 30)) < 0.3) + np.eye(40, 30)
        error = 2 * np.abs(a).sum(axis=0).max() ** 2 * np.trace(w @ np.linalg.pinv(a.T @ a) @ w.T)
        assert bound <= error


def test_never_worse_than_identity_hierarchical_and_pidentity(solved):
    for solution in solved.values():
        base = solution.mechanism.design_info["baselines"]
        value = solution.certificate["utility"]["value"]
        for name in ("identity_strategy", "hierarchical_strategy", "p-identity_strategy"):
            assert value <= base[name] * (1 + 1e-12)


def test_identity_baseline_known_answer():
    """The issue's workload: age prefix (24) × each of (2, 5, 4, 3). The identity strategy adds Laplace(1)
    to each of the 2,880 cells; the answer 'age ≤ i, attribute = v' sums (i + 1)·120/n_t cells, so
    E‖Z‖² = 2·Σ_t Σ_v Σ_i (i + 1)·120/n_t = 2·4·300·120 = 288,000 (issue 36's 'measuring the histogram
    with Laplace and summing')."""
    prefix = np.tril(np.ones((24, 24)))
    sizes = (2, 5, 4, 3)
    terms = tuple((prefix,) + tuple(np.eye(n) if i == j else None for j, n in enumerate(sizes)) for i in range(4))
    names = tuple(("prefix",) + tuple("identity" if i == j else "total" for j in range(4)) for i in range(4))
    workload = KroneckerWorkload((24,) + sizes, terms, names)
    identity = pure_kronecker.baseline(workload, AnovaSplit.of(workload), "identity")
    assert 2 * pure_kronecker.unit_error(workload, AnovaSplit.of(workload), identity) == pytest.approx(288_000,
                                                                                                       rel=1e-12)


def test_example_spec_meets_hdmm_and_verifies():
    """Issue 36's done criterion: ≤ 67,543 (HDMM's figure), certificate verified independently."""
    solution = dpopt.solve(ROOT / "specs" / "range_marginals_age_prefix_pure.yaml")
    assert solution.mechanism.family == "kronecker_laplace"
    assert solution.certificate["utility"]["value"] <= 67_543
    report = dpopt.verify(solution.certificate)
    assert all(c.passed for c in report.checks if c.claim.startswith(("privacy", "mechanism", "utility")))


def test_tampered_scale_fails_and_parameters_round_trip(solved):
    solution = solved[1]
    m = solution.mechanism
    again = KroneckerLaplaceMechanism.from_parameters(m.parameters, solution.space)
    privacy = solution.spec.privacy
    assert [c.passed for c in again.privacy_checks(solution.space, privacy)] == [True, True]
    assert again._expected_l2(None) == m._expected_l2(None)
    params = copy.deepcopy(m.parameters)
    params["scale"] = m.scale * 0.999
    weak = KroneckerLaplaceMechanism.from_parameters(params, solution.space)
    assert not weak.privacy_checks(solution.space, privacy)[-1].passed


def test_refuses_targets_other_than_pure_and_other_queries():
    zcdp = compile_problem(small_spec(1) | {"privacy": {"zcdp": {"rho": 1}}})
    assert "pure" in KroneckerLaplaceMechanism.supports(zcdp)
    histogram = compile_problem(small_spec(1) | {"query": {"kind": "histogram", "attribute": "sex"}})
    assert "kronecker" in KroneckerLaplaceMechanism.supports(histogram)
    assert KroneckerLaplaceMechanism.supports(compile_problem(small_spec(1))) is None


def test_recorded_lower_bound_is_rechecked(solved):
    """``utility.lower_bound`` recomputes the bound from the compiled workload: a doubled recorded bound fails."""
    solution = solved[2]
    problem = compile_problem(small_spec(2))
    m = solution.mechanism
    check = next(c for c in m.scope_checks(problem) if c.claim == "utility.lower_bound")
    assert check.passed
    params = copy.deepcopy(m.parameters)
    params["design"]["laplace_lower_bound"] *= 2
    tampered = KroneckerLaplaceMechanism.from_parameters(params, solution.space)
    assert not next(c for c in tampered.scope_checks(problem) if c.claim == "utility.lower_bound").passed


@pytest.mark.slow
def test_auto_chooses_it_for_a_pure_kronecker_query():
    """``mechanism: auto`` on the example spec: the Laplace-on-answers and K-norm candidates are 6,193,152 and
    ~2·10⁶ (issue 36), the design 60,627, so auto must pick ``kronecker_laplace``."""
    import yaml

    spec = yaml.safe_load((ROOT / "specs" / "range_marginals_age_prefix_pure.yaml").read_text())
    solution = dpopt.solve(spec | {"mechanism": "auto"})
    assert solution.mechanism.family == "kronecker_laplace"
    assert solution.certificate["utility"]["value"] <= 67_543


@pytest.mark.parametrize("size", [1, 2])
def test_per_cell_errors_are_the_dense_variances_and_a_gauss_margin(solved, size):
    """SE² = diag(2b² W(AᵀA)⁺Wᵀ) by dense linear algebra; the margin is Gauss's inequality's √(4/(9·0.05))·SE
    (P(|Z| ≥ m) ≤ 4Var/(9m²) for a unimodal law about 0, m ≥ 2SE/√3)."""
    m = solved[size].mechanism
    a, w = dense_strategy(m.parameters), dense_workload(size)
    expected = 2 * m.scale**2 * np.diag(w @ np.linalg.pinv(a.T @ a) @ w.T)
    cells = solved[size].certificate["utility"]["per_cell"]["cells"]
    se = np.array([c["standard_error"] for c in cells])
    assert se**2 == pytest.approx(expected, rel=1e-9)
    assert [c["margin_of_error"] for c in cells] == pytest.approx(np.sqrt(4 / (9 * 0.05)) * se, rel=1e-12)
    assert "Gauss's inequality" in solved[size].certificate["utility"]["per_cell"]["method"]


def test_gauss_margin_covers_the_sampled_quantile(solved):
    """The bound holds on draws: the empirical 95% quantile of |Z_i| (40,000 draws, seed 5) is below the margin
    for every answer. The margin is 2.98 SE; a sum of weighted Laplace variates has kurtosis ≤ 6, so with 40,000
    draws the sampled quantile is within a few percent of the true one, itself ≤ 2.98 SE by the inequality."""
    m = solved[2].mechanism
    z = np.abs(m.sample(40_000, np.random.default_rng(5)))
    margins = np.array([c["margin_of_error"] for c in solved[2].certificate["utility"]["per_cell"]["cells"]])
    assert np.all(np.quantile(z, 0.95, axis=0) < margins)
