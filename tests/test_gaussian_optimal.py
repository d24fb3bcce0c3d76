"""Optimal Gaussian covariance: known answers (Lee et al., Cho & Awan, Shoham & Rinott), the
reduced and generic programs against each other, and the dual bound.

Every expected covariance below is derived in the test from the paper's formula, never
taken from the code's output.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import ROOT, make_spec
from scipy import linalg, optimize

import dpopt
from dpopt.mechanisms.gaussian import ProjectedGaussianMechanism
from dpopt.mechanisms.gaussian_optimal import GaussianOptimalMechanism, mahalanobis_sensitivity
from dpopt.optimize.constraint_set import distinct_directions, extreme_points
from dpopt.optimize.covariance import Objective, dual_bound, optimal_covariance, target_mu
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy, Utility

OBJECTIVES = {
    "l2": lambda d: Objective("trace", np.eye(d)),
    "max_variance": lambda d: Objective("max_variance"),
    "ci_volume": lambda d: Objective("log_det"),
}


def centering(n: int) -> np.ndarray:
    return np.eye(n) - np.full((n, n), 1.0 / n)


def space_of(vectors) -> SensitivitySpace:
    return SensitivitySpace.from_vectors(np.asarray(vectors, float), method="test", adjacency="test", complete=True)


def design(vectors, objective, mu, **kw):
    space = space_of(vectors)
    return optimal_covariance(space.vectors(), space.span.basis(), objective, mu, **kw), space


# ---------------------------------------------------------------- Lee et al.
@pytest.mark.parametrize("metric", ["l2", "max_variance", "ci_volume"])
@pytest.mark.parametrize(
    "privacy, mu",
    [
        ({"gdp": {"mu": 1.0}}, 1.0),
        ({"zcdp": {"rho": 0.125}}, 0.5),  # μ = √(2ρ)
        # s*(1, 1e-5) = 0.2680511232: the analytic-Gaussian threshold (Shoham–Rinott digest §1)
        ({"approx": {"epsilon": 1.0, "delta": 1e-5}}, 0.2680511232),
    ],
)
def test_table_with_fixed_n_is_the_rank_deficient_gaussian(metric, privacy, mu):
    """Lee et al. (2022), Ex. 1: a table under replace-one gets N(0, (2/μ²)(I − J/p)); it is
    invariant under permuting cells, so every symmetric utility has this optimum."""
    # the continuous designs (on the lattice the projected Gaussian's noise is at the lattice variance)
    problem = dpopt.compile(make_spec(privacy=privacy, utility={"metric": metric}, sampler="floating_point"))
    mech = GaussianOptimalMechanism.design(problem)
    expected = 2.0 / mu**2 * centering(6)
    np.testing.assert_allclose(mech.covariance, expected, rtol=1e-8, atol=1e-9 * expected.max())
    projected = ProjectedGaussianMechanism.design(problem)
    np.testing.assert_allclose(mech.covariance, projected.noise_covariance(), rtol=1e-8, atol=1e-9 * expected.max())
    assert "closed form" in mech.design_info["method"]


@pytest.mark.parametrize("metric", ["l2", "max_variance", "ci_volume"])
def test_generic_sdp_reaches_the_rank_deficient_gaussian(metric):
    d = 5
    vectors = [np.eye(d)[i] - np.eye(d)[j] for i in range(d) for j in range(d) if i != j]
    result, space = design(vectors, OBJECTIVES[metric](d), 1.0, use_symmetry=False)
    assert result.method.startswith("SDP")
    np.testing.assert_allclose(result.covariance, 2.0 * centering(d), atol=1e-6)
    value = result.objective.value(result.covariance, space.rank)
    assert result.dual_bound <= value + 1e-9 and value - result.dual_bound <= 1e-6 * max(1.0, abs(value))


# --------------------------------------------------------------- Cho & Awan
def rectangle_moves(r: int, c: int) -> np.ndarray:
    """Prop. 32 of Cho & Awan (digest 003 §2.2): v_ijkl = +1 at (i,j),(k,l), −1 at (i,l),(k,j)."""
    out = set()
    for i, k in itertools.permutations(range(r), 2):
        for j, l in itertools.permutations(range(c), 2):
            m = np.zeros((r, c))
            m[i, j] += 1
            m[k, l] += 1
            m[i, l] -= 1
            m[k, j] -= 1
            out.add(tuple(m.ravel()))
    return np.array(sorted(out))


def six_cycles() -> np.ndarray:
    """The 12 moves of three records in a 3×3 table with both margins fixed (digest 003 pitfall 2):
    P_σ − P_{σ∘c} for every permutation σ and 3-cycle c (+1 at (i, σ(i)), −1 at (i, σ(c(i))))."""
    out = set()
    for sigma in itertools.permutations(range(3)):
        for cycle in ((1, 2, 0), (2, 0, 1)):
            m = np.zeros((3, 3))
            for i in range(3):
                m[i, sigma[i]] += 1
                m[i, sigma[cycle[i]]] -= 1
            out.add(tuple(m.ravel()))
    return np.array(sorted(out))


@pytest.mark.parametrize(
    "shape, vectors, l2_squared",
    [
        ((2, 3), rectangle_moves(2, 3), 4.0),  # Δ₂ = 2 (Prop. 32)
        ((3, 3), rectangle_moves(3, 3), 4.0),
        ((3, 3), np.vstack([rectangle_moves(3, 3), six_cycles()]), 6.0),  # Δ₂ = √6 with the six-cycles
    ],
    ids=["2x3 rectangles", "3x3 rectangles", "3x3 with six-cycles"],
)
@pytest.mark.parametrize("symmetry", [True, False], ids=["closed form", "SDP"])
def test_margins_invariant_is_the_projected_gaussian(shape, vectors, l2_squared, symmetry):
    """Cho & Awan, Algorithm 1: N(0, (Δ₂/μ)² P) with P = (I − J/r) ⊗ (I − J/c) (digest 003 §2.2)."""
    assert len(six_cycles()) == 12 and len(rectangle_moves(3, 3)) == 18  # the digest's counts
    mu = 1.0
    result, _ = design(vectors, Objective("trace", np.eye(vectors.shape[1])), mu,
                       table_shape=shape, use_symmetry=symmetry)
    expected = l2_squared / mu**2 * np.kron(centering(shape[0]), centering(shape[1]))
    if symmetry:
        assert "S_{}×S_{}".format(*shape) in result.method
        np.testing.assert_allclose(result.covariance, expected, atol=1e-9)
    else:
        # the solver stops at ~1e-8 on the objective; Σ is accurate to about the square root
        assert np.trace(result.covariance) == pytest.approx(np.trace(expected), rel=1e-7)
        np.testing.assert_allclose(result.covariance, expected, atol=1e-3 * expected.max())


def test_margins_spec_from_the_invariants_derivation():
    """The Semi-DP space derived from a spec with one-way margins invariant (issue 3's derive)."""
    problem = dpopt.compile(ROOT / "specs" / "table_3x3_margins_gdp.yaml")
    spec, space = problem.spec, problem.space
    assert float(space.l2_squared) == 6.0  # √6 with the six-cycles (digest 003 pitfall 2)
    mech = GaussianOptimalMechanism.design(problem)
    mu = spec.privacy.gdp.mu
    expected = 6.0 / mu**2 * np.kron(centering(3), centering(3))
    np.testing.assert_allclose(mech.covariance, expected, atol=1e-9)
    assert GaussianOptimalMechanism.noise_in_span
    # the released noise keeps every margin: rows and columns of each draw sum to 0
    z = mech.sample(200, np.random.default_rng(3)).reshape(200, 3, 3)
    assert np.abs(z.sum(axis=1)).max() < 1e-9 and np.abs(z.sum(axis=2)).max() < 1e-9


# ------------------------------------------------------------ Shoham–Rinott
def box(psi) -> np.ndarray:
    return np.array([np.array(s) * psi for s in itertools.product((-1.0, 1.0), repeat=len(psi))])


def shoham_rinott_covariance(psi, mu):
    """Digest 001 §2.2: ξ*_i = (‖ψ‖²/k)/ψ_i², σ = ‖ψ‖/s*; the recovered f has noise σ² Diag(ξ*)⁻¹."""
    psi = np.asarray(psi, float)
    k = psi.size
    xi = (psi @ psi / k) / psi**2
    sigma2 = (psi @ psi) / mu**2
    return np.diag(sigma2 / xi)


@pytest.mark.parametrize("symmetry", [True, False], ids=["closed form", "SDP"])
@pytest.mark.parametrize("psi", [(1.0, 2.0), (3.0, 4.0), (0.1, 1.0, 10.0), (0.5, 1.0, 2.0, 3.0)])
def test_box_volume_optimum_is_shoham_rinott_xi(psi, symmetry):
    mu = 0.7
    result, _ = design(box(psi), Objective("log_det"), mu, use_symmetry=symmetry)
    expected = shoham_rinott_covariance(psi, mu)
    value = result.objective.value(result.covariance, len(psi))
    assert value == pytest.approx(np.log(np.diag(expected)).sum(), abs=1e-9 if symmetry else 1e-6)
    # log det is flat at its optimum: the SDP's Σ is accurate to about √(its gap)
    np.testing.assert_allclose(result.covariance, expected, rtol=1e-9 if symmetry else 2e-3,
                               atol=(1e-12 if symmetry else 2e-3) * expected.max())


@pytest.mark.parametrize("psi, ratio", [((1.0, 2.0), 0.8), ((3.0, 4.0), 0.96), ((0.1, 1.0, 10.0), 0.00511841)])
def test_box_volume_ratio_to_isotropic(psi, ratio):
    """Digest 001 §6.2: Vol(CR_ξ*)/Vol(CR_ξ=1) (isotropic σ² = ‖ψ‖²/μ² on every coordinate)."""
    spec_privacy = Privacy(gdp={"mu": 1.0})
    result, space = design(box(psi), Objective("log_det"), target_mu(spec_privacy))
    iso = float(space.l2_squared) * np.eye(len(psi))
    got = math.sqrt(np.linalg.det(result.covariance) / np.linalg.det(iso))
    assert got == pytest.approx(ratio, rel=1e-6)


def test_box_recovered_noise_matches_the_digest_end_to_end_example():
    """Digest 001 §6.2: ψ = (0.01, 10), ε = 1, δ = 1e-5 → per-coordinate std (0.0527591, 52.759099)."""
    mu = target_mu(Privacy(approx={"epsilon": 1.0, "delta": 1e-5}))
    assert mu == pytest.approx(0.2680511232, rel=1e-9)
    result, _ = design(box((0.01, 10.0)), Objective("log_det"), mu)
    np.testing.assert_allclose(np.sqrt(np.diag(result.covariance)), [0.0527591, 52.759099], rtol=2e-6)


def test_box_spec_through_the_mechanism_and_verify():
    """A linear query whose columns are the vertices of the box [−1, 1] × [−2, 2] (add/remove: S = ±columns)."""
    vertices = box((1.0, 2.0))
    spec = make_spec(
        data={"attributes": {"cell": ["a", "b", "c", "d"]}},
        query={"kind": "linear", "attribute": "cell", "matrix": vertices.T.tolist()},
        adjacency={"kind": "add_remove"},
        privacy={"gdp": {"mu": 1.0}},
        mechanism="gaussian_optimal",
        utility={"metric": "ci_volume"},
    )
    sol = dpopt.solve(spec)
    np.testing.assert_allclose(sol.mechanism.covariance, shoham_rinott_covariance((1.0, 2.0), 1.0), rtol=1e-9)
    assert dpopt.verify(sol.certificate).passed


# ------------------------------------------------------ weights, multiple orbits
def test_weighted_per_coordinate_error_on_a_box():
    """min Σ w_i s_i s.t. Σ ψ_i²/s_i ≤ μ² (the box's vertices give one constraint on a diagonal Σ):
    Lagrange gives s_i = ψ_i (Σ_l ψ_l √w_l) / (μ² √w_i)."""
    psi, w, mu = np.array([1.0, 2.0, 3.0]), np.array([1.0, 4.0, 0.25]), 1.5
    objective = Objective.for_utility(Utility(metric="l2", weights=w.tolist()), 3)
    expected = psi * np.sum(psi * np.sqrt(w)) / (mu**2 * np.sqrt(w))
    for symmetry in (True, False):
        result, _ = design(box(psi), objective, mu, use_symmetry=symmetry)
        assert np.sum(w * np.diag(result.covariance)) == pytest.approx(np.sum(w * expected), rel=1e-7)
        # the SDP's Σ is accurate to about the square root of its objective accuracy
        np.testing.assert_allclose(result.covariance, np.diag(expected), atol=(1e-9 if symmetry else 1e-3) * expected.max())


@pytest.mark.parametrize("metric", ["l2", "max_variance", "ci_volume"])
def test_reduced_program_with_two_orbits_agrees_with_the_sdp(metric):
    """{e_i − e_j} ∪ {e_i}: two orbits of S_4 whose rows (‖Pv‖², ‖(I−P)v‖²) = (0, 2) and (1/4, 3/4)
    dominate neither other, so the reduced program has two constraints."""
    d = 4
    vectors = [np.eye(d)[i] - np.eye(d)[j] for i in range(d) for j in range(d) if i != j] + list(np.eye(d))
    sym, space = design(vectors, OBJECTIVES[metric](d), 1.0)
    sdp, _ = design(vectors, OBJECTIVES[metric](d), 1.0, use_symmetry=False)
    assert "reduced convex program" in sym.method and sdp.method.startswith("SDP")
    np.testing.assert_allclose(sym.covariance, sdp.covariance, atol=1e-3)  # √(solver accuracy), as above
    for result in (sym, sdp):
        value = result.objective.value(result.covariance, space.rank)
        assert result.dual_bound <= value + 1e-9
        assert abs(result.objective.gap(value, result.dual_bound)) < 1e-6


# ---------------------------------------------------------------- dual bound
def test_lagrangian_minimum_formula():
    """min_{B≻0} tr(MB⁻¹) + tr(YB) = 2 tr((M^{1/2} Y M^{1/2})^{1/2}), checked by direct minimisation."""
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    m, y = a @ a.T + 0.1 * np.eye(3), b @ b.T + 0.1 * np.eye(3)
    root = linalg.sqrtm(m).real
    closed = 2.0 * np.trace(linalg.sqrtm(root @ y @ root).real)

    def lagrangian(params):
        low = np.zeros((3, 3))
        low[np.tril_indices(3)] = params
        bmat = low @ low.T + 1e-12 * np.eye(3)
        return np.trace(m @ np.linalg.inv(bmat)) + np.trace(y @ bmat)

    best = min(
        optimize.minimize(lagrangian, x0, method="BFGS", options={"gtol": 1e-10}).fun
        for x0 in (np.eye(3)[np.tril_indices(3)], rng.normal(size=6))
    )
    assert best == pytest.approx(closed, rel=1e-6)


def test_dual_bound_never_exceeds_the_utility_of_a_feasible_covariance():
    """Weak duality with arbitrary multipliers, on a random space and workload."""
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(12, 4))
    space = space_of(vectors)
    basis = space.span.basis()
    w = rng.normal(size=(5, 4))
    objective = Objective("trace", w.T @ w)
    # a feasible Σ: isotropic with σ² = Δ₂²/μ²
    feasible = float(space.l2_squared) * np.eye(4)
    for _ in range(5):
        lam = rng.exponential(size=12)
        for obj, weights in ((objective, None), (Objective("max_variance"), rng.exponential(size=4)),
                             (Objective("log_det"), None)):
            bound = dual_bound(obj, vectors @ basis, lam, 1.0, basis, weights)
            assert bound <= obj.value(feasible, 4) + 1e-12


# ------------------------------------------------------- constraint reduction
def test_constraint_reduction():
    v = np.array([[1.0, 0.0], [-1.0, 0.0], [0.5, 0.0], [0.0, 2.0], [0.0, 0.0], [0.4, 0.5], [1.0, 2.0],
                  [1.0, -2.0]])
    distinct = distinct_directions(v)
    # 0 dropped; ±(1, 0) and (0.5, 0) merged into (1, 0); the others kept
    assert sorted(map(tuple, distinct)) == [(0.0, 2.0), (0.4, 0.5), (1.0, -2.0), (1.0, 0.0), (1.0, 2.0)]
    points, _, how = extreme_points(distinct)
    # conv(±·) is the rectangle [−1, 1] × [−2, 2]: only (1, ±2) (and their negatives) are vertices;
    # (1, 0) and (0, 2) are midpoints of its edges, (0.4, 0.5) is inside
    assert sorted(map(tuple, points)) == [(1.0, -2.0), (1.0, 2.0)]
    assert "LPs" in how


def test_dropped_constraints_are_implied():
    """The design on the reduced set satisfies every listed vector."""
    rng = np.random.default_rng(5)
    outer = rng.normal(size=(8, 3))
    inner = 0.3 * rng.normal(size=(30, 3))  # mostly inside conv(±outer)
    vectors = np.vstack([outer, inner])
    result, _ = design(vectors, Objective("trace", np.eye(3)), 1.0)
    sens = mahalanobis_sensitivity(result.covariance, vectors)
    assert sens.squared <= 1.0 + 1e-6
