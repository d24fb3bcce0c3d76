"""``staircase`` on a ``linear`` query with decimal weights, measured exactly on the decimal lattice.

Expected values come from independent derivations: D and the integer shifts D·WΔ from Fractions of the written
decimals; the discrete staircase's pmf p(k) ∝ e^{−ε'L(k)}, L(k) = ⌊(|k| + m − r)/m⌋ (Geng & Viswanath's density
restricted to ℤ), written here from the recorded ε', m and r; pure ε as the exact maximum of the log-ratio
ε'·Σ_i (L(k_i − s_i) − L(k_i)) over a grid of outputs, in Fractions; the (ε, δ), Rényi and GDP targets by brute-force
sums of that pmf over the 2-D lattice; the utilities as direct sums of it, divided by D or D²; the released law from
seeded draws within 4 standard errors.
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

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written."""

PRIVACY = {"pure": {"epsilon": 1}, "approx": {"epsilon": 1, "delta": 1e-6}, "zcdp": {"rho": 0.5}, "gdp": {"mu": 1}}
UTILITIES = {"l2": "l2", "l1": "l1", "usefulness": {"metric": "usefulness", "gamma": 3}, "max_variance": "max_variance"}


def spec(adjacency: str = "add_remove", definition: str = "pure", utility="l2") -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal staircase", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": "staircase",
            "utility": utility}


def integer_moves(adjacency: str) -> list[list[int]]:
    """The shifts D·WΔ (D = 4) over the adjacency's moves (e_j, or e_j − e_k), from Fractions."""
    d = math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))
    assert d == 4
    columns = [[int(Fraction(row[j]) * d) for row in WEIGHTS] for j in range(3)]  # (2, 0), (4, 1), (0, 6)
    if adjacency == "add_remove":
        return columns
    return [[a - b for a, b in zip(columns[j], columns[k])] for j, k in itertools.permutations(range(3), 2)]


def law(certificate) -> tuple[Fraction, int, int]:
    """(ε', m, r) as recorded."""
    p = certificate["mechanism"]["parameters"]
    return Fraction(p["epsilon0_exact"]), int(p["step_units"]), int(p["boundary_units"])


def level(k, m: int, r: int):
    """L(k) = ⌊(|k| + m − r)/m⌋."""
    return (np.abs(k) + m - r) // m


def pmf(certificate, support: np.ndarray) -> np.ndarray:
    """p(k) ∝ e^{−ε'L(k)} on ``support`` (normalised over it: the caller's support holds all but e^{-60} of it)."""
    eps, m, r = law(certificate)
    p = np.exp(-float(eps) * level(support, m, r).astype(float))
    return p / p.sum()


def support_of(certificate) -> np.ndarray:
    """|k| ≤ 60m/ε' + m: the mass beyond is below e^{-60}."""
    eps, m, _ = law(certificate)
    half = int(60 * m / eps) + m
    return np.arange(-half, half + 1)


def solved(adjacency="add_remove", definition="pure", utility="l2"):
    solution = dpopt.solve(spec(adjacency, definition, utility))
    return solution, json.loads(solution.certificate.to_json())


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_pure_epsilon_by_the_exact_log_ratio_over_a_grid(adjacency):
    """max over outputs k and shifts s of log p(k)/p(k − s) = ε'·Σ_i (L(k_i − s_i) − L(k_i)), in Fractions, is at
    most ε = 1 (the levels are constant beyond the grid's ±(6 + 2m), so the maximum is on it)."""
    _, certificate = solved(adjacency)
    eps, m, r = law(certificate)
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    grid = range(-6 - 2 * m, 7 + 2 * m)
    loss = max(eps * sum(int(level(k - s, m, r)) - int(level(k, m, r)) for k, s in zip(ks, move))
               for move in integer_moves(adjacency) for ks in itertools.product(grid, repeat=2))
    assert 0 < loss <= 1


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["approx", "zcdp", "gdp"])
def test_the_scaled_measurement_meets_its_target_by_brute_force_sums(adjacency, definition):
    """Over the 2-D lattice, every integer shift s: δ(1) ≤ 10⁻⁶ for (1, 10⁻⁶); D_α ≤ αρ at several α for ρ = 1/2;
    δ(ε) at most the μ = 1 Gaussian profile at several ε (a necessary condition of μ-GDP)."""
    _, certificate = solved(adjacency, definition)
    support = support_of(certificate)
    p = pmf(certificate, support)
    joint = np.outer(p, p)
    for move in integer_moves(adjacency):
        shifted = np.outer(np.roll(p, move[0]), np.roll(p, move[1]))  # P(z − s); the wrapped tails are < e^{-60}
        if definition == "approx":
            assert np.sum(np.maximum(0.0, joint - math.e * shifted)) <= 1e-6
        elif definition == "zcdp":
            log_p, log_q = np.log(joint), np.log(shifted)
            for alpha in (1.01, 1.5, 2, 4, 16):
                terms = alpha * log_p + (1 - alpha) * log_q
                divergence = (terms.max() + math.log(np.sum(np.exp(terms - terms.max())))) / (alpha - 1)
                assert divergence <= alpha * 0.5
        else:
            for eps in (0.0, 0.5, 1.0, 2.0):
                gaussian = (0.5 * math.erfc((eps - 0.5) / math.sqrt(2))
                            - math.exp(eps) * 0.5 * math.erfc((eps + 0.5) / math.sqrt(2)))
                assert np.sum(np.maximum(0.0, joint - math.exp(eps) * shifted)) <= gaussian + 1e-12


@pytest.mark.parametrize("metric", list(UTILITIES))
def test_the_predicted_utility_is_the_discrete_law_scaled_by_d(metric):
    """l2 = 2·E η²/D², max_variance = E η²/D², l1 = 2·E|η|/D, usefulness = P(|η| ≤ γD = 12): sums of the pmf."""
    _, certificate = solved("replace_one", "pure", UTILITIES[metric])
    support = support_of(certificate)
    p = pmf(certificate, support)
    expected = {"l2": 2 * np.sum(p * support**2) / 16, "max_variance": np.sum(p * support**2) / 16,
                "l1": 2 * np.sum(p * np.abs(support)) / 4, "usefulness": np.sum(p[np.abs(support) <= 12])}[metric]
    assert certificate["utility"]["value"] == pytest.approx(expected, rel=1e-9)


def test_the_released_values_lie_on_the_decimal_lattice_with_the_laws_variance():
    solution, certificate = solved()
    query = dpopt.compile(spec()).query
    counts = np.array([37.0, 12.0, 5.0])
    truth = [sum(Fraction(w) * int(c) for w, c in zip(row, counts)) for row in WEIGHTS]  # 30.5, 10.5
    released = solution.mechanism.release(np.tile(query.answers(counts), (20_000, 1)), np.random.default_rng(11))
    scaled = released * 4 - np.array([float(4 * v) for v in truth])
    assert np.all(scaled == np.round(scaled))
    noise = (scaled / 4).ravel()
    support = support_of(certificate)
    variance = np.sum(pmf(certificate, support) * support**2) / 16
    se = math.sqrt(np.var(noise**2) / noise.size)
    assert abs(np.mean(noise**2) - variance) <= 4 * se
    assert abs(np.mean(noise)) <= 4 * math.sqrt(variance / noise.size)


def test_the_cost_is_the_discrete_laws_second_moment_against_the_continuous_staircase():
    """exact_cost: E η²/D² (a sum of the pmf) against the continuous staircase's E X² (Geng & Viswanath 2016,
    closed form from ε₀, Δ₀ = step and g as recorded)."""
    _, certificate = solved("replace_one")
    parameters = certificate["mechanism"]["parameters"]
    support = support_of(certificate)
    exact = np.sum(pmf(certificate, support) * support**2) / 16
    continuous = parameters["continuous"]
    b, delta, g = math.exp(-continuous["epsilon0"]), continuous["step"], continuous["g"]
    # E X² of the staircase density: ∫ x² f, f = a(γ) b^j on [jΔ, (j + g)Δ) and a b^{j+1} on [(j + g)Δ, (j + 1)Δ)
    mass = sum(2 * (g * delta * b**j + (1 - g) * delta * b ** (j + 1)) for j in range(2000))
    second = sum(2 * (b**j * ((j + g) ** 3 - j**3) + b ** (j + 1) * ((j + 1) ** 3 - (j + g) ** 3)) * delta**3 / 3
                 for j in range(2000)) / mass
    cost = parameters["exact_cost"]
    assert cost["exact"] == pytest.approx(exact, rel=1e-9)
    assert cost["continuous"] == pytest.approx(second, rel=1e-9)


@pytest.mark.parametrize("adjacency, definition, metric", [
    pytest.param(*config, marks=() if config[2] == "l2" else pytest.mark.slow)  # l2 in the default run
    for config in itertools.product(["add_remove", "replace_one"], PRIVACY, UTILITIES)])
def test_the_reproduction_configs_measure_exactly_and_verify(adjacency, definition, metric):
    solution, certificate = solved(adjacency, definition, UTILITIES[metric])
    assert "idealized" not in json.dumps(certificate)
    assert IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(certificate).passed


def _forged(certificate: dict, **changes) -> dict:
    out = copy.deepcopy(certificate)
    out["mechanism"]["parameters"].update(changes)
    return out


def test_a_forged_lattice_or_law_fails_verify():
    _, certificate = solved("replace_one")
    assert dpopt.verify(certificate).passed
    eps, _, _ = law(certificate)
    for changes in ({"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "164"},
                    {"lattice_l2_squared": "9"}, {"epsilon0_exact": str(2 * eps)}):
        assert not dpopt.verify(_forged(certificate, **changes)).passed, changes


def test_auto_under_pure_epsilon_takes_the_exact_staircase_on_max_variance():
    """Under ε = 1, add/remove, max_variance: the staircase (now exact) is the best candidate ``auto`` finds."""
    solution = dpopt.solve(spec("add_remove", "pure", "max_variance") | {"mechanism": "auto"})
    assert solution.mechanism.family == "staircase" and solution.mechanism.exact_noise
    assert "idealized" not in solution.certificate.to_json()
