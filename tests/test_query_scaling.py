"""Query scaling for fixed data (Shoham & Rinott, Section 2) and its extension to any region.

Oracles: the paper's theorems and closed forms, the digest's independent computation
(``papers/001_query_adjusting.md`` §6.2, marked "digest"), numerical optima found here by
SLSQP (an independent solver of the same problem), affine equivariance of the
minimum-volume ellipsoid, and seeded Monte Carlo with tolerances derived in comments.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, special

import dpopt
from dpopt.mechanisms.query_scaling import QueryScalingMechanism
from dpopt.optimize import query_scaling as qs
from dpopt.privacy.gaussian import gaussian_mu
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.stats.inference import confidence_region, likelihood_ratio_test

Z95 = special.ndtri(0.95)


def box_vertices(psi) -> np.ndarray:
    return np.array([np.multiply(s, psi) for s in itertools.product([-1.0, 1.0], repeat=len(psi))])


# ------------------------------------------------------------ Theorem 2.1
@pytest.mark.parametrize(
    "psi, xi_star, ratio",
    [  # digest §6.2 "Volume scaling"
        ([1, 2], [2.5, 0.625], 0.8),
        ([3, 4], [1.388889, 0.78125], 0.96),
        ([0.1, 1, 10], [3367.0, 33.67, 0.3367], 0.00511841),
        ([1, 1, 1], [1, 1, 1], 1.0),
    ],
)
def test_volume_optimal_xi_digest_targets(psi, xi_star, ratio):
    xi = qs.volume_optimal_xi(psi)
    assert xi == pytest.approx(xi_star, rel=2e-6)  # digest prints 6-7 significant digits
    assert qs.volume_ratio(psi) == pytest.approx(ratio, rel=1e-6)
    # same DP level as f: ψᵀDiag(ξ)ψ = ‖ψ‖² (Theorem 2.1(2))
    assert float(np.sum(xi * np.square(psi))) == pytest.approx(float(np.sum(np.square(psi))), rel=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_volume_optimal_xi_equals_numerical_optimum(seed):
    # independent: SLSQP on  min −Σ log ξ  s.t.  Σ ξ ψ² = ‖ψ‖²  (the appendix's problem)
    psi = np.random.default_rng(seed).uniform(0.2, 5.0, size=4)
    p2 = psi**2
    res = optimize.minimize(
        lambda x: -np.sum(np.log(x)),
        np.ones(4),
        method="SLSQP",
        constraints=[{"type": "eq", "fun": lambda x: x @ p2 - p2.sum()}],
        bounds=[(1e-9, None)] * 4,
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert res.success
    assert qs.volume_optimal_xi(psi) == pytest.approx(res.x, rel=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_volume_ratio_is_the_ratio_of_region_volumes_at_equal_privacy(seed):
    psi = np.random.default_rng(10 + seed).uniform(0.1, 3.0, size=5)
    sigma = 2.7  # any σ: both mechanisms have Δ(f_ξ)/σ = ‖ψ‖/σ
    v_star = qs.scaled_ci_volume(qs.volume_optimal_xi(psi), sigma, 0.05)
    v_one = qs.scaled_ci_volume(np.ones(5), sigma, 0.05)
    assert v_star / v_one == pytest.approx(qs.volume_ratio(psi), rel=1e-12)
    # AM–GM: ≤ 1, = 1 iff all ψ equal (Theorem 2.1(3))
    assert qs.volume_ratio(psi) < 1.0 and qs.volume_ratio(np.full(5, 1.7)) == pytest.approx(1.0, rel=1e-14)


def test_paper_volume_formula_eq6():
    # eq. (6): V_k (σ² t)^{k/2} det[Diag ξ]^{-1/2}, V_2 = π, t = χ²_{2,0.95} = −2 log 0.05
    # (the χ²_2 quantile in closed form)
    t = -2.0 * math.log(0.05)
    assert qs.scaled_ci_volume([2.0, 8.0], 1.5, 0.05) == pytest.approx(math.pi * 1.5**2 * t / 4.0, rel=1e-12)


# ------------------------------------------------------------ Theorem 2.4
@pytest.mark.parametrize(
    "psi, eta, sigma, xi_star, power, power_one",
    [  # digest §6.2 "Power scaling (α = 0.05)"
        ([1, 2], [1, 1], 1.0, [5, 0], 0.722812, 0.408797),
        ([1, 2], [1, 1], 2.0, [5, 0], 0.299159, 0.174187),
        ([3, 4], [1, 2], 1.0, [0, 1.5625], 0.803765, 0.722812),
    ],
)
def test_power_optimal_xi_digest_targets(psi, eta, sigma, xi_star, power, power_one):
    xi = qs.power_optimal_xi(psi, eta)
    assert xi == pytest.approx(xi_star, rel=1e-15)
    assert qs.scaled_test_power(xi, eta, sigma) == pytest.approx(power, abs=1e-6)
    assert qs.scaled_test_power(np.ones(2), eta, sigma) == pytest.approx(power_one, abs=1e-6)


def test_power_optimal_beats_every_feasible_xi():
    # brute force: 20,000 random ξ ≥ 0 on the same-DP simplex Σ ξ_i ψ_i² = ‖ψ‖² never exceed ξ*
    rng = np.random.default_rng(3)
    psi, eta = np.array([0.5, 1.0, 2.0, 3.0]), np.array([0.3, 1.0, 1.5, 2.0])
    v = rng.dirichlet(np.ones(4), size=20_000) * np.sum(psi**2)  # v_i = ξ_i ψ_i²
    xi = v / psi**2
    best = qs.power_optimal_xi(psi, eta)
    assert float((xi * eta**2).sum(axis=1).max()) <= float(best @ eta**2) * (1 + 1e-12)
    # its power is 1 − Φ(z − s*·|η_j*|/ψ_j*) at σ = ‖ψ‖/s* (digest §2.3, derived)
    s = gaussian_mu(1.0, 1e-5)
    sigma = float(np.linalg.norm(psi)) / s
    j = int(np.argmax(eta**2 / psi**2))
    assert qs.scaled_test_power(best, eta, sigma) == pytest.approx(
        special.ndtr(s * eta[j] / psi[j] - Z95), rel=1e-12
    )


# --------------------------------------------------------- end to end
def test_fixed_data_end_to_end_digest_example():
    # digest §6.2: ψ = (0.01, 10), ε = 1, δ = 1e-5
    d = qs.design_fixed_data([0.01, 10.0], 1.0, 1e-5)
    assert d.sensitivity == pytest.approx(10.000005, rel=1e-7)
    assert d.sigma == pytest.approx(37.306335, rel=1e-7)
    assert d.xi == pytest.approx([500000.5, 0.5000005], rel=1e-7)
    assert d.noise_sd == pytest.approx([0.0527591, 52.759099], rel=1e-6)
    assert d.ratio == pytest.approx(0.001999998, rel=1e-6)
    # σ is certified: δ(ε; Δ(f_ξ)/σ) ≤ δ in 60 digits, and it is Δ/s* up to the safe rounding
    assert dpopt.privacy.gaussian_delta_mp(1.0, d.sensitivity / d.sigma) <= 1e-5
    assert d.sigma == pytest.approx(d.sensitivity / 0.2680511232, rel=1e-9)


def test_fixed_data_power_design():
    d = qs.design_fixed_data([1.0, 2.0], 1.0, 1e-5, objective="test_power", eta=[1.0, 1.0])
    s = gaussian_mu(1.0, 1e-5)
    assert d.xi.tolist() == [5.0, 0.0]
    assert d.value == pytest.approx(special.ndtr(s * 1.0 / 1.0 - Z95), rel=1e-9)
    assert d.value > d.baseline


# -------------------------------------------------------- ξ = 0 and ψ = 0
def test_zero_sensitivity_coordinates_are_released_exactly():
    psi = [0.0, 1.0, 2.0]
    xi = qs.volume_optimal_xi(psi)
    assert math.isinf(xi[0]) and xi[1:] == pytest.approx([2.5, 0.625])  # c = ‖ψ‖²/k' with k' = 2
    assert qs.volume_ratio(psi) == 0.0  # the limit ψ_i → 0 of the paper's ratio
    assert qs.box_sensitivity(psi, xi) == pytest.approx(math.sqrt(5.0))
    with pytest.raises(ValueError, match="released exactly"):
        qs.box_sensitivity([0.5, 1.0], [np.inf, 1.0])
    # a shift on an exact coordinate is detected with certainty
    assert qs.scaled_test_power(xi, [1e-6, 0.0, 0.0], 1.0) == 1.0


def test_adjust_and_invert_round_trip():
    f = np.array([3.0, -2.0, 7.0, 1.0])
    xi = np.array([4.0, 0.25, np.inf, 0.0])
    adjusted = qs.adjust_query(f, xi)
    assert adjusted.tolist() == [6.0, -1.0, 7.0, 0.0]
    back = qs.invert_adjusted_release(adjusted, xi)
    assert back[:3].tolist() == [3.0, -2.0, 7.0] and math.isnan(back[3])  # ξ = 0: not asked
    with pytest.raises(ValueError):
        qs.adjust_query(f, [1.0, -1.0, 1.0, 1.0])


# ------------------------------------------- any region: diagonal programs
@pytest.mark.parametrize("psi", [[1.0, 2.0], [0.1, 1.0, 10.0], [0.5, 1.0, 2.0, 4.0]])
def test_diagonal_programs_on_a_box_are_the_paper_closed_forms(psi):
    box = box_vertices(psi)
    p2 = np.square(psi)
    vol = qs.optimal_diagonal_scaling(box, "ci_volume")
    assert vol.xi * p2.sum() == pytest.approx(qs.volume_optimal_xi(psi), rel=1e-12)
    eta = np.linspace(1.0, 2.0, len(psi))
    power = qs.optimal_diagonal_scaling(box, "test_power", eta=eta)
    assert power.xi * p2.sum() == pytest.approx(qs.power_optimal_xi(psi, eta), rel=1e-12)
    # l2 (Lagrange: w_i/ξ_i² = λψ_i²): ξ_i ∝ 1/ψ_i for unit weights, and with Σ ξ_i ψ_i² = 1,
    # ξ_i = 1/(ψ_i Σ_j ψ_j), so min Σ 1/ξ_i = (Σ ψ_i)² (Cauchy–Schwarz; SLSQP, used here before, stops
    # slightly outside the constraint with scipy 1.17 on psi = (0.1, 1, 10))
    l2 = qs.optimal_diagonal_scaling(box, "l2")
    assert np.sum(1.0 / l2.xi) == pytest.approx(np.sum(psi) ** 2, rel=1e-6)


def test_diagonal_volume_program_on_a_non_box_region():
    # two rows, neither dominating: the cvxpy path, certified by its duality gap, vs SLSQP
    region = np.array([[1.0, 3.0, 0.0], [2.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    d = qs.optimal_diagonal_scaling(region, "ci_volume")
    assert "convex program" in d.method and d.duality_gap <= 1e-9
    a = region**2
    res = optimize.minimize(
        lambda x: -np.sum(np.log(x)),
        np.full(3, 0.05),
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda x: 1.0 - a @ x}],
        bounds=[(1e-9, None)] * 3,
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert d.value == pytest.approx(-res.fun, abs=1e-6)
    assert float((a @ d.xi).max()) <= 1.0 + 1e-15


def test_power_lp_on_a_non_box_region_matches_vertex_enumeration():
    # the LP max Σ ξ_i η_i² s.t. Aξ ≤ 1 has a vertex optimum: enumerate every basis (k = 3)
    region = np.array([[1.0, 3.0, 0.0], [2.0, 1.0, 1.0], [0.0, 1.0, 2.0]])
    eta = np.array([1.0, 2.0, 1.5])
    d = qs.optimal_diagonal_scaling(region, "test_power", eta=eta)
    a = np.vstack([region**2, -np.eye(3)])
    b = np.concatenate([np.ones(3), np.zeros(3)])
    best = -np.inf
    for rows in itertools.combinations(range(6), 3):
        m = a[list(rows)]
        if abs(np.linalg.det(m)) < 1e-12:
            continue
        x = np.linalg.solve(m, b[list(rows)])
        if (a @ x <= b + 1e-12).all():
            best = max(best, float(eta**2 @ x))
    assert d.value == pytest.approx(best, rel=1e-9) and d.duality_gap <= 1e-9


# -------------------------------------- any region: minimum-volume ellipsoid
@pytest.mark.parametrize("psi", [[1.0, 2.0], [3.0, 4.0], [0.1, 1.0, 10.0], [0.5, 1.0, 2.0, 4.0]])
def test_minimum_volume_adjustment_on_a_box_is_xi_star(psi):
    adj = qs.minimum_volume_adjustment(box_vertices(psi))
    shape = adj.basis @ adj.shape @ adj.basis.T
    k = len(psi)
    # the MVEE of Π[−ψ_i, ψ_i] is Diag(1/(kψ²)) (the cube's is the ball of radius √k): Theorem 2.1's ξ*
    assert np.diag(shape) == pytest.approx(1.0 / (k * np.square(psi)), rel=1e-8)
    assert np.abs(shape - np.diag(np.diag(shape))).max() <= 1e-8 * np.abs(shape).max()
    assert adj.duality_gap <= 1e-9 and adj.sensitivity <= 1.0 + 1e-12


def test_minimum_volume_adjustment_is_affine_equivariant():
    # independent oracle: MVEE(R·box) = R·MVEE(box), i.e. B = R Diag(1/(kψ²)) Rᵀ for a rotation R
    psi = np.array([1.0, 3.0])
    theta = 0.6
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    region = box_vertices(psi) @ rot.T
    adj = qs.minimum_volume_adjustment(region)
    expected = rot @ np.diag(1.0 / (2 * psi**2)) @ rot.T
    assert adj.basis @ adj.shape @ adj.basis.T == pytest.approx(expected, abs=1e-9)


def test_minimum_volume_adjustment_beats_diagonal_scaling_on_non_box_regions():
    # rotated box: the paper's ξ* (from the per-coordinate widths) and the best diagonal ξ both lose
    theta = 0.6
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    regions = {
        "rotated box": box_vertices([1.0, 3.0]) @ rot.T,
        "prefix sums": np.vstack([np.tril(np.ones((5, 5))).T, -np.tril(np.ones((5, 5))).T]),
    }
    for name, region in regions.items():
        full = qs.adjustment_log_volume(region, qs.minimum_volume_adjustment(region).matrix)
        diag = qs.adjustment_log_volume(
            region, np.diag(np.sqrt(qs.optimal_diagonal_scaling(region, "ci_volume").xi))
        )
        heuristic = qs.adjustment_log_volume(
            region, np.diag(np.sqrt(qs.volume_optimal_xi(np.abs(region).max(axis=0))))
        )
        plain = qs.adjustment_log_volume(region, np.eye(region.shape[1]))
        assert full < diag - 0.1, name  # strictly better than every diagonal scaling
        assert diag <= heuristic + 1e-9 and diag <= plain + 1e-9, name
    # on the prefix-sum region the log-volume gain is large (≈ 4.02, a factor ≈ 56)
    region = regions["prefix sums"]
    gain = qs.adjustment_log_volume(region, np.eye(5)) - qs.adjustment_log_volume(
        region, qs.minimum_volume_adjustment(region).matrix
    )
    assert gain > 3.5


def test_minimum_volume_adjustment_noise_covariance_is_mu_gdp():
    # independent check of the map: Mahalanobis sensitivity max_v vᵀΣ⁺v (eigendecomposition) equals μ²
    region = np.vstack([np.tril(np.ones((4, 4))).T, -np.tril(np.ones((4, 4))).T])
    adj = qs.minimum_volume_adjustment(region)
    cov = adj.noise_covariance(mu=0.7)
    w, v = np.linalg.eigh(cov)
    pinv = (v[:, w > 1e-12] / w[w > 1e-12]) @ v[:, w > 1e-12].T
    worst = max(float(x @ pinv @ x) for x in region)
    assert worst == pytest.approx(0.7**2, rel=1e-9)
    f = np.array([1.0, 2.0, 3.0, 4.0])
    assert adj.invert(adj.apply(f)) == pytest.approx(f, rel=1e-10)


# ------------------------------------------------------------ the family
def _spec(**overrides) -> dict:
    spec = {
        "dpopt": 1,
        "name": "scaled",
        "data": {"attributes": {"g": ["a", "b", "c", "d"]}},
        "query": {"kind": "linear", "attribute": "g", "matrix": [[1, 1, 1, 1], [2, 5, 10, 20], [0, 0, 1, 1]]},
        "adjacency": {"kind": "add_remove"},
        "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-6}},
        "utility": {"metric": "ci_volume"},
        "sampler": "floating_point",  # the paper's continuous closed forms (the lattice's: test_lattice_inference)
    }
    spec.update(overrides)
    return spec


def test_family_design_is_the_box_optimum_when_one_generator_dominates():
    # columns (1, c, [c ≥ 10]): the last column (1, 20, 1) dominates, so the region acts as the
    # box ψ = (1, 20, 1)
    sol = dpopt.solve(_spec(mechanism=["gaussian", "query_scaling"]))
    mech = sol.mechanism
    assert mech.family == "query_scaling"
    psi = np.array([1.0, 20.0, 1.0])
    assert np.asarray(mech.parameters["xi"]) == pytest.approx(qs.volume_optimal_xi(psi), rel=1e-12)
    gauss = next(c for c in sol.candidates if c.family == "gaussian")
    assert mech.parameters["sigma"] == gauss.mechanism.sigma  # same sensitivity, same σ
    assert sol.certificate["utility"]["value"] / gauss.utility.value == pytest.approx(
        qs.volume_ratio(psi), rel=1e-9
    )
    assert dpopt.verify(sol.certificate).passed


def test_family_power_design_asks_one_coordinate():
    eta = [10.0, 30.0, 0.0]
    sol = dpopt.solve(_spec(utility={"metric": "test_power", "alternative": eta}, mechanism="query_scaling"))
    mech = sol.mechanism
    assert mech.family == "query_scaling"
    # j* = argmax η²/ψ² over ψ = (1, 20, 1): 100 vs 2.25 vs 0 → the count; ξ_j* = ‖ψ‖²/ψ_j² = 402
    assert mech.parameters["xi"] == [402.0, 0.0, 0.0]
    s = gaussian_mu(1.0, 1e-6)
    assert sol.certificate["utility"]["value"] == pytest.approx(special.ndtr(s * 10.0 / 1.0 - Z95), rel=1e-9)
    release = mech.release([100.0, 900.0, 40.0], rng=np.random.default_rng(0))
    assert np.isfinite(release[0]) and np.isnan(release[1:]).all()
    assert dpopt.verify(sol.certificate).passed


@pytest.mark.parametrize(
    "overrides, reason",
    [
        ({"privacy": {"pure": {"epsilon": 1.0}}}, "cannot meet a pure"),
        ({"utility": {"metric": "l1"}}, "designed for"),
        (
            {"query": {"kind": "histogram", "attribute": "g"}, "adjacency": {"kind": "replace_one"}},
            "coordinate subspace",
        ),
        ({"query": {"kind": "count"}}, "one coordinate"),
    ],
)
def test_family_says_why_it_does_not_apply(overrides, reason):
    assert reason in QueryScalingMechanism.supports(dpopt.compile(_spec(**overrides)))


def test_zero_coordinate_of_the_region_is_released_exactly():
    # a coordinate no neighbour changes: ξ = ∞, no noise, and the privacy check holds
    space = SensitivitySpace.from_vectors(
        np.array([[1.0, 0.0, 2.0], [-1.0, 0.0, -2.0], [1.0, 0.0, -2.0]]),
        method="test",
        adjacency="test",
        complete=False,
    )
    problem = dpopt.compile(_spec(query={"kind": "linear", "attribute": "g", "matrix": [[1, 1, 1, 1]] * 3}))
    spec = problem.spec
    mech = QueryScalingMechanism.design(replace(problem, space=space))  # the region above, not the derived one
    assert mech.parameters["xi"][1] is None
    assert all(c.passed for c in mech.privacy_checks(space, spec.privacy))
    assert mech.release([5.0, 7.0, 9.0], rng=np.random.default_rng(1))[1] == 7.0
    assert QueryScalingMechanism.from_parameters(mech.parameters, space).parameters == mech.parameters


def test_family_privacy_check_catches_tampered_parameters():
    problem = dpopt.compile(_spec())
    spec, space = problem.spec, problem.space
    mech = QueryScalingMechanism.design(problem)
    p = mech.parameters

    def passes(**change) -> bool:
        m = QueryScalingMechanism.from_parameters({**p, **change}, space)
        return all(c.passed for c in m.privacy_checks(space, spec.privacy))

    assert passes()
    assert not passes(sigma=p["sigma"] * (1 - 1e-12))
    assert not passes(xi=[p["xi"][0] * (1 + 1e-12)] + p["xi"][1:])
    assert not passes(xi=[None] + p["xi"][1:])  # releasing a changing coordinate exactly


# ------------------------------------------------------- Monte Carlo
def test_monte_carlo_coverage_size_and_power_of_the_scaled_release():
    # ψ = (0.01, 10) box, ε = 1, δ = 1e-5 (digest example); 2,000 seeded releases each, every
    # one through the public release → inference path. SE of a proportion p over n draws:
    # √(p(1−p)/n) ≤ 0.0112; tolerance 4 SE. (The certificate's utility.sampler check repeats the
    # power with 10⁵ draws.)
    n = 2_000
    d = qs.design_fixed_data([0.01, 10.0], 1.0, 1e-5)
    mech = QueryScalingMechanism(d.xi, d.sigma, "ci_volume")
    rng = np.random.default_rng(2026)
    truth = np.array([0.3, 40.0])
    cov = mech.noise_covariance()
    covered = sum(confidence_region(mech.release(truth, rng), cov, 0.05).contains(truth) for _ in range(n))
    assert abs(covered / n - 0.95) <= 4 * math.sqrt(0.95 * 0.05 / n)
    eta = np.array([0.15, 30.0])
    power = qs.scaled_test_power(d.xi, eta, d.sigma)
    rejections = {"H0": 0, "H1": 0}
    for hyp, mean in (("H0", truth), ("H1", truth + eta)):
        for _ in range(n):
            test = likelihood_ratio_test(mech.release(mean, rng), cov, truth, truth + eta, 0.05)
            rejections[hyp] += test.reject
        assert test.power == pytest.approx(power, rel=1e-12)
    assert abs(rejections["H0"] / n - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / n)
    assert abs(rejections["H1"] / n - power) <= 4 * math.sqrt(power * (1 - power) / n)
