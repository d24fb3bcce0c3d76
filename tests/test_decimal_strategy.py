"""``gaussian_optimal`` on a ``linear`` query with decimal weights, measured exactly: the integer strategy M measures
the scaled answers k = D·Wx (y = Mk + η, η i.i.d. discrete Gaussian) and the least squares are divided by D.

Sources of the expected values:

* D and the shifts D·WΔ of the scaled answers: Fractions of the written decimals (the moves ±e_j under add/remove,
  e_j − e_k under replace-one), independently of dpopt's decimal reading;
* the strategy's sensitivity: the maximum of ‖M·D·WΔ‖² over those moves in Python integers;
* the privacy: ρ = Δ_M²/(2σ_ℤ²) in Fractions (Canonne, Kamath & Steinke 2020, Theorem 14); under μ-GDP and
  (ε, δ) the hockey-stick divergence δ(ε) = Σ_z max(0, P(z) − e^ε P(z − Ms)) of the 2-D product discrete Gaussian,
  summed over the whole lattice (for each z₁ the set of z₂ where the first term wins is a half-line, so the inner
  sum is two values of the 1-D distribution function);
  (checked against the plain 2-D double sum at a small σ²);
* the released covariance: Var N_ℤ(0, σ_ℤ²)·(MᵀM)⁻¹/D² (full span: x̂ = x + M⁻¹η/D), Var the discrete Gaussian's
  second moment summed directly over ±14σ, against a seeded Monte Carlo of the exact sampler within 4 standard
  errors.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written (D = 4)."""

PRIVACY = {"zcdp": {"rho": 0.5}, "gdp": {"mu": 1}, "approx": {"epsilon": 1, "delta": 1e-6}}

CONFIGS = list(itertools.product(["add_remove", "replace_one"], ["zcdp", "gdp", "approx"], ["l2", "max_variance"]))


def spec(adjacency: str = "add_remove", definition: str = "zcdp", metric="l2", mechanism="gaussian_optimal") -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal linear, optimal covariance", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": mechanism,
            "utility": metric}


D = math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))


def integer_moves(adjacency: str) -> list[list[int]]:
    """The shifts D·WΔ of the scaled answers over the adjacency's moves, from Fractions."""
    columns = [[int(Fraction(row[j]) * D) for row in WEIGHTS] for j in range(3)]
    if adjacency == "add_remove":
        return columns
    return [[a - b for a, b in zip(columns[j], columns[k])] for j, k in itertools.permutations(range(3), 2)]


_SOLVED: dict = {}


def solved(adjacency: str, definition: str, metric: str = "l2"):
    key = (adjacency, definition, metric)
    if key not in _SOLVED:
        _SOLVED[key] = dpopt.solve(spec(adjacency, definition, metric))
    return _SOLVED[key]


def strategy_shifts(mechanism, adjacency: str) -> list[list[int]]:
    """M·D·WΔ for every move, in Python integers."""
    m = [[int(v) for v in row] for row in mechanism.strategy.tolist()]
    return [[sum(a * b for a, b in zip(row, move)) for row in m] for move in integer_moves(adjacency)]


def hockey_stick(sigma2: Fraction, shift: list[int], epsilon: float) -> float:
    """δ(ε) between N_ℤ(0, σ²)² and its shift by ``shift`` (module docstring), in float64 over ±14σ + |shift|
    (the mass beyond is below e^-98)."""
    s1, s2 = shift
    if s2 == 0:
        s1, s2 = s2, s1
    if s2 < 0:  # z ↦ −z maps the pair (P, P(· − s)) to (P, P(· + s)): δ is that of −s
        s1, s2 = -s1, -s2
    if s2 == 0:
        return 0.0
    var = float(sigma2)
    half = int(14 * math.sqrt(var)) + abs(s1) + abs(s2) + 2
    support = np.arange(-half, half + 1)
    p = np.exp(-support.astype(float) ** 2 / (2 * var))
    p /= p.sum()
    cdf = np.concatenate([[0.0], np.cumsum(p)])  # cdf[i] = P(Z < support[i]) = P(Z ≤ support[i] − 1)

    def below(t: np.ndarray) -> np.ndarray:
        """P(Z ≤ t) for integer arrays t."""
        return cdf[np.clip(t + half + 1, 0, 2 * half + 1)]

    a = p  # P₁(z₁)
    shifted = np.roll(p, s1)  # P₁(z₁ − s₁); the wrapped entries are beyond 14σ
    b = math.exp(epsilon) * shifted
    with np.errstate(divide="ignore"):
        r = np.log(b) - np.log(a)  # a P(z₂) > b P(z₂ − s₂) ⇔ (s₂² − 2z₂s₂)/(2σ²) > r ⇔ z₂ < (s₂² − 2σ²r)/(2s₂)
    t = (s2 * s2 - 2 * var * r) / (2 * s2)
    last = np.where(np.isfinite(t), np.ceil(np.nan_to_num(t)) - 1, np.where(t > 0, half, -half - 1)).astype(np.int64)
    last = np.clip(last, -half - 1, half)
    inner = a * below(last) - b * below(last - s2)
    return float(np.sum(np.maximum(inner, 0.0)))


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["zcdp", "gdp", "approx"])
def test_the_strategy_sensitivity_is_the_integer_maximum_over_the_scaled_moves(adjacency, definition):
    mechanism = solved(adjacency, definition).mechanism
    assert mechanism.sampler == "exact" and mechanism.decimal.scale == D == 4
    assert mechanism.decimal.l2_squared == max(sum(s * s for s in move) for move in integer_moves(adjacency))
    brute = max(sum(s * s for s in shift) for shift in strategy_shifts(mechanism, adjacency))
    assert mechanism.strategy_sensitivity_squared == brute
    if definition == "zcdp":
        assert Fraction(brute) / (2 * mechanism.lattice_sigma2) <= Fraction(1, 2)  # ρ = Δ_M²/(2σ_ℤ²) ≤ 0.5


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["gdp", "approx"])
def test_the_measurement_meets_its_target_by_the_hockey_stick_over_the_lattice(adjacency, definition):
    """(1, 10⁻⁶): δ(1) ≤ 10⁻⁶ for every move; μ = 1: δ(ε) at most the Gaussian profile δ_μ(ε) at several ε (a
    necessary condition of μ-GDP). The 10⁻¹² allowance covers the float64 sums."""
    mechanism = solved(adjacency, definition).mechanism
    for shift in strategy_shifts(mechanism, adjacency):
        if definition == "approx":
            assert hockey_stick(mechanism.lattice_sigma2, shift, 1.0) <= 1e-6 + 1e-12
        else:
            for eps in (0.0, 0.5, 1.0, 2.0):
                gaussian = (0.5 * math.erfc((eps - 0.5) / math.sqrt(2))
                            - math.exp(eps) * 0.5 * math.erfc((eps + 0.5) / math.sqrt(2)))
                assert hockey_stick(mechanism.lattice_sigma2, shift, eps) <= gaussian + 1e-12


@pytest.mark.parametrize("shift", [[3, -2], [0, 5], [-4, 0], [2, 7]])
def test_the_half_line_sum_is_the_plain_double_sum(shift):
    sigma2 = Fraction(9, 4)
    half = 40  # 14σ + |shift| + 2 < 40: the wrapped and cut-off mass is below e^-98
    z = np.arange(-half, half + 1)
    p = np.exp(-z.astype(float) ** 2 / (2 * float(sigma2)))
    p /= p.sum()
    for eps in (0.0, 0.3, 1.0):
        joint = np.outer(p, p)
        shifted = np.outer(np.roll(p, shift[0]), np.roll(p, shift[1]))
        plain = float(np.sum(np.maximum(0.0, joint - math.exp(eps) * shifted)))
        assert hockey_stick(sigma2, shift, eps) == pytest.approx(plain, rel=1e-9, abs=1e-15)


def test_the_hockey_stick_sum_detects_a_doubled_shift():
    """The sum above can fail: the GDP design's largest shift doubled exceeds δ_μ(0) of μ = 1."""
    mechanism = solved("add_remove", "gdp").mechanism
    worst = max(strategy_shifts(mechanism, "add_remove"), key=lambda s: s[0] ** 2 + s[1] ** 2)
    gaussian = 0.5 * math.erfc(-0.5 / math.sqrt(2)) - 0.5 * math.erfc(0.5 / math.sqrt(2))
    assert hockey_stick(mechanism.lattice_sigma2, [2 * s for s in worst], 0.0) > gaussian + 1e-3


def discrete_second_moment(sigma2: Fraction) -> float:
    """E η² of N_ℤ(0, σ²) by direct summation over |k| ≤ 14σ + 10 in float64 (the mass beyond is below e^-98)."""
    half = int(14 * math.sqrt(sigma2)) + 10
    k = np.arange(-half, half + 1, dtype=float)
    weight = np.exp(-k * k / (2 * float(sigma2)))
    return float(np.sum(k * k * weight) / np.sum(weight))


@pytest.mark.parametrize("adjacency, definition", [("add_remove", "zcdp"), ("replace_one", "gdp")])
def test_the_released_covariance_is_the_scaled_least_squares_and_matches_the_sampler(adjacency, definition):
    mechanism = solved(adjacency, definition).mechanism
    m = mechanism.strategy.astype(float)
    expected = discrete_second_moment(mechanism.lattice_sigma2) * np.linalg.inv(m.T @ m) / D**2
    np.testing.assert_allclose(mechanism.released_covariance, expected, rtol=1e-9)
    query = dpopt.compile(spec(adjacency, definition)).query
    counts = np.array([37.0, 12.0, 5.0])
    truth = np.array([float(sum(Fraction(w) * int(c) for w, c in zip(row, counts))) for row in WEIGHTS])
    draws = 20_000
    errors = mechanism.release(np.tile(query.answers(counts), (draws, 1)), np.random.default_rng(20261207)) - truth
    squared = np.sum(errors**2, axis=1)
    # E‖e‖² = tr Cov; its standard error from the draws' own spread
    assert abs(squared.mean() - np.trace(expected)) <= 4 * squared.std() / math.sqrt(draws)
    for i in range(2):
        assert abs(errors[:, i].mean()) <= 4 * math.sqrt(expected[i, i] / draws)
        cell = errors[:, i] ** 2
        assert abs(cell.mean() - expected[i, i]) <= 4 * cell.std() / math.sqrt(draws)


def test_the_release_is_the_integer_measurement_solved_and_divided_by_d():
    mechanism = solved("add_remove", "zcdp").mechanism
    query = dpopt.compile(spec()).query
    counts = np.array([3, 7, 11])
    k = [sum(int(Fraction(w) * D) * int(c) for w, c in zip(row, counts)) for row in WEIGHTS]  # D·Wx, integers
    released = mechanism.release(query.answers(counts.astype(float)), np.random.default_rng(7))
    s2 = mechanism.lattice_sigma2
    eta = sample_discrete_gaussian(np.random.default_rng(7), s2.numerator, s2.denominator, 2)
    y = mechanism.strategy @ np.array(k) + eta  # integers
    np.testing.assert_allclose(released, np.linalg.solve(mechanism.strategy.astype(float), y) / D, rtol=1e-12)


@pytest.mark.parametrize("adjacency, definition, metric", CONFIGS)
def test_the_reproduction_configs_measure_exactly_and_verify(adjacency, definition, metric):
    solution = solved(adjacency, definition, metric)
    text = solution.certificate.to_json()
    assert "idealized" not in text and IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    parameters = json.loads(text)["mechanism"]["parameters"]
    assert parameters["sampler"] == "exact" and parameters["lattice_scale"] == D
    cost = parameters["design"]["exact_cost"]
    assert cost["metric"] == metric and float(cost["ratio"]) <= 1.001  # the 0.1%
    assert dpopt.verify(solution.certificate).passed


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["zcdp", "gdp"])
def test_auto_on_the_reproduction_is_exact(adjacency, definition):
    solution = dpopt.solve(spec(adjacency, definition, "l2", "auto"))
    assert solution.mechanism.family == "gaussian_optimal" and solution.mechanism.sampler == "exact"
    assert "idealized" not in solution.certificate.to_json()


def _forged(certificate: dict, **changes) -> dict:
    out = copy.deepcopy(certificate)
    out["mechanism"]["parameters"].update(changes)
    return out


def test_a_forged_scale_or_strategy_fails_verify():
    certificate = json.loads(solved("replace_one", "gdp").certificate.to_json())
    assert dpopt.verify(certificate).passed
    parameters = certificate["mechanism"]["parameters"]
    strategy = copy.deepcopy(parameters["strategy"])
    strategy[0][0] += 64
    doubled = [[2 * v for v in row] for row in parameters["strategy"]]
    restated = 4 * parameters["strategy_sensitivity_squared"]
    for changes in ({"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "164"},
                    {"lattice_l2_squared": "36"}, {"strategy": strategy},
                    {"strategy": doubled, "strategy_sensitivity_squared": restated}):
        assert not dpopt.verify(_forged(certificate, **changes)).passed, changes
    dropped = copy.deepcopy(certificate)
    del dropped["mechanism"]["parameters"]["lattice_scale"]
    assert not dpopt.verify(dropped).passed  # read as integer counts: the query's answers are not


def test_the_l2_designs_parameters_fail_a_ci_volume_spec():
    """The l2 design's exact parameters read for a ci_volume spec: D re-derives, but the stated cost is of l2."""
    from dpopt.mechanisms.exact_cost import EXACT_COST_CLAIM
    from dpopt.mechanisms.gaussian_optimal import GaussianOptimalMechanism

    parameters = json.loads(solved("add_remove", "zcdp").certificate.to_json())["mechanism"]["parameters"]
    for metric, holds in (("l2", True), ({"metric": "ci_volume", "alpha": 0.05}, False)):
        problem = dpopt.compile(spec(metric=metric))
        mechanism = GaussianOptimalMechanism.from_parameters(parameters, problem.space)
        checks = {c.claim: c.passed for c in mechanism.scope_checks(problem)}
        assert checks["mechanism.lattice"] and checks[EXACT_COST_CLAIM] is holds


def test_ci_volume_on_a_proper_span_keeps_the_floating_point_sampler_with_the_reason():
    """Three decimal rows of full rank under replace-one: the moves W(e_i − e_j) span a plane of ℝ³."""
    case = spec("replace_one", metric={"metric": "ci_volume", "alpha": 0.05})
    case["query"]["matrix"] = [[0.5, 1, 0], [0, 0.25, 1.5], [1, 0, 0.5]]
    solution = dpopt.solve(case)
    assert solution.mechanism.sampler == "floating_point"
    assert any("decimal lattice" in note and "full span only" in note for note in solution.mechanism.notes())


@pytest.mark.parametrize("weights, reason", [([[1, 0.000001, 0], [0, 1, 0.5]], "singular"),
                                             ([[3, 0.000001, 0], [0, 1, 0.5]], "not small integer vectors")])
def test_a_huge_integer_sensitivity_keeps_floating_point_with_the_reason(weights, reason):
    """D = 10⁶ and D·W entries 10⁶ (3·10⁶): the strategy's entries c·μ/Δ_D round to a singular matrix (the
    shifts exceed the strategy check's 2^20); the design says so and still verifies."""
    case = spec()
    case["query"]["matrix"] = weights
    solution = dpopt.solve(case)
    assert solution.mechanism.sampler == "floating_point"
    assert any("decimal lattice D = 1000000" in note and reason in note for note in solution.mechanism.notes())
    assert dpopt.verify(solution.certificate).passed


def test_a_grouped_release_measures_exactly_and_verifies(tmp_path):
    from dpopt.release import release_groups

    case = spec()
    case["data"]["attributes"]["g"] = ["p", "q", "r"]
    data = tmp_path / "data.csv"
    data.write_text("a,g\n" + "".join(f"{'xyz'[i % 3]},{'pqr'[(i // 3) % 3]}\n" for i in range(300)))
    out = release_groups(case, data, "g", seed=3, insecure_seed=True)
    assert out.mechanism.family == "gaussian_optimal" and out.mechanism.sampler == "exact"
    assert out.mechanism.decimal.scale == D
    assert "idealized" not in out.certificate.to_json() and dpopt.verify(out.certificate).passed
