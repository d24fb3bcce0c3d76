"""``test_power``, ``kl``, ``renyi``, ``mallows`` and query scaling's ``ci_volume`` of a ``linear`` query with decimal
weights, measured exactly on the decimal lattice (dpopt.mechanisms.decimal_lattice.scaled_utility).

Expected values come from the integer problem built independently here: the spec whose matrix is M = D·W (from
Fractions of the written decimals), its alternative, prior and floor times D, solved as a counting query; the
decimal design's value is that one mapped by the derivation (the release is (k + z)/D and y ↦ y/D is a bijection):
the test's power and the two divergences unchanged, the Mallows distance divided by D (W_p(Dμ, Dν) = D·W_p(μ, ν)),
a region's volume divided by D^r (r = 2 noisy coordinates). The staircase's ``kl`` and ``renyi`` are also summed
directly from its recorded law (p(k) ∝ e^{−ε'⌊(|k| + m − r)/m⌋}) on the released values c + k/D.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import cli_runner

import dpopt

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written (D = 4)."""

HALVES = [["0.5", "1", "0"], ["0", "0.5", "1"]]
"""A matrix with D = 2 (r2dp's kl and renyi sums over ℤ stay within its term budget on it)."""

PRIVACY = {"pure": {"epsilon": 1}, "approx": {"epsilon": 1, "delta": 1e-6}, "zcdp": {"rho": 0.5}, "gdp": {"mu": 1},
           "pdp": {"epsilon": 1, "delta": 1e-3}}

UTILITIES = {"test_power": {"metric": "test_power", "alternative": ["0.5", "0.25"]},
             "kl": {"metric": "kl", "prior": ["5", "3.5"], "floor": "0.5"},
             "renyi": {"metric": "renyi", "prior": ["5", "3.5"], "floor": "0.5", "order": 2},
             "mallows": {"metric": "mallows", "prior": ["5", "3.5"], "order": 2},
             "ci_volume": {"metric": "ci_volume"}}
"""The metrics, their numbers as the decimals written."""

POWER = {"test_power": 0, "kl": 0, "renyi": 0, "mallows": 1, "ci_volume": 2}
"""The power of D by which the integer problem's value exceeds the release's (module docstring)."""


def denominator(weights) -> int:
    return math.lcm(*(Fraction(w).denominator for row in weights for w in row))


def spec(weights, family: str, definition: str, metric: str, adjacency: str = "add_remove", scale: int = 1) -> dict:
    """The decimal spec (scale 1), or the integer problem: matrix, alternative, prior and floor times ``scale``."""
    times = lambda w: float(Fraction(w) * scale)
    utility = {key: ([times(v) for v in value] if key in ("alternative", "prior") else
                     times(value) if key == "floor" else value)
               for key, value in UTILITIES[metric].items()}
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal metrics", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[times(w) for w in row] for row in weights]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": family,
            "utility": utility}


def solved(specification: dict) -> tuple[dict, dict]:
    solution = dpopt.solve(specification)
    certificate = json.loads(solution.certificate.to_json())
    assert "idealized" not in json.dumps(certificate)  # exact on both sides
    return solution, certificate


CASES = [
    ("gaussian", "zcdp", "test_power", "add_remove", WEIGHTS),
    pytest.param("gaussian", "gdp", "test_power", "replace_one", WEIGHTS, marks=pytest.mark.slow),
    pytest.param("gaussian", "approx", "test_power", "add_remove", WEIGHTS, marks=pytest.mark.slow),
    ("gaussian", "pdp", "test_power", "add_remove", WEIGHTS),
    ("staircase", "pure", "kl", "add_remove", WEIGHTS),
    ("staircase", "zcdp", "renyi", "replace_one", WEIGHTS),
    ("staircase", "pure", "mallows", "add_remove", WEIGHTS),
    pytest.param("staircase", "approx", "kl", "replace_one", WEIGHTS, marks=pytest.mark.slow),
    ("r2dp", "zcdp", "mallows", "add_remove", WEIGHTS),
    ("r2dp", "zcdp", "kl", "add_remove", HALVES),
    pytest.param("r2dp", "pure", "renyi", "replace_one", HALVES, marks=pytest.mark.slow),
    ("query_scaling", "zcdp", "ci_volume", "add_remove", WEIGHTS),
    pytest.param("query_scaling", "gdp", "ci_volume", "replace_one", WEIGHTS, marks=pytest.mark.slow),
    ("query_scaling", "approx", "test_power", "replace_one", WEIGHTS),
]


@pytest.mark.parametrize(("family", "definition", "metric", "adjacency", "weights"), CASES)
def test_the_decimal_value_is_the_integer_problems_mapped_and_verifies(family, definition, metric, adjacency,
                                                                        weights):
    d = denominator(weights)
    solution, certificate = solved(spec(weights, family, definition, metric, adjacency))
    _, integer = solved(spec(weights, family, definition, metric, adjacency, scale=d))
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == d
    assert "lattice_scale" not in integer["mechanism"]["parameters"]  # the integer problem is a counting query
    expected = integer["utility"]["value"] / d ** POWER[metric]
    assert certificate["utility"]["value"] == pytest.approx(expected, rel=1e-9)
    assert dpopt.verify(solution.certificate).passed


def staircase_law(certificate) -> tuple[np.ndarray, np.ndarray]:
    """The recorded discrete staircase (ε', m, r): its support |k| ≤ 60m/ε' + m (the mass beyond is below e^{-60})
    and pmf p(k) ∝ e^{−ε'⌊(|k| + m − r)/m⌋}."""
    p = certificate["mechanism"]["parameters"]
    eps, m, r = Fraction(p["epsilon0_exact"]), int(p["step_units"]), int(p["boundary_units"])
    half = int(60 * m / eps) + m
    k = np.arange(-half, half + 1)
    weights = np.exp(-float(eps) * ((np.abs(k) + m - r) // m).astype(float))
    return k, weights / weights.sum()


@pytest.mark.parametrize("metric", ["kl", "renyi"])
def test_the_staircase_divergence_is_the_sum_over_the_released_values(metric):
    """E Σ_i p_i ln(p_i/q_i) − p_i + q_i, and 1/(α − 1) ln(1 + E Σ_i p_i^α q_i^{1−α} − αp_i − (1 − α)q_i), with
    q_i = max(c_i + k/D, τ)/C over the recorded law of k (the release in answer units: prior 5, 3.5, floor 0.5)."""
    _, certificate = solved(spec(WEIGHTS, "staircase", "pure", metric))
    k, pmf = staircase_law(certificate)
    prior, floor = np.array([5.0, 3.5]), 0.5
    total = prior.sum()
    p = prior[:, None] / total
    q = np.maximum(prior[:, None] + k[None, :] / 4, floor) / total
    if metric == "kl":
        expected = float(np.sum((p * np.log(p / q) - p + q) @ pmf))
    else:
        alpha = 2.0
        bracket = float(np.sum((p**alpha * q ** (1 - alpha) - alpha * p - (1 - alpha) * q) @ pmf))
        expected = math.log1p(bracket) / (alpha - 1)
    assert certificate["utility"]["value"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("family", "definition", "metric", "alternative", "reason"), [
    ("gaussian", "zcdp", "test_power", [0.3, 0.1], "whole-number shift"),  # 4·0.3 = 1.2 is not whole
    ("r2dp", "pure", "kl", None, "terms"),  # the counts path's own budget: its kl sums on ℤ at the scale for D·WΔ
])
def test_what_is_not_mapped_keeps_floating_point_with_the_reason(family, definition, metric, alternative, reason):
    specification = spec(WEIGHTS, family, definition, metric)
    if alternative is not None:
        specification["utility"]["alternative"] = alternative
    solution = dpopt.solve(specification)
    assert solution.mechanism.exact_noise is False
    assert any(reason in note and "lattice" in note for note in solution.mechanism.notes())


@pytest.mark.parametrize("family, metric", [("staircase", "kl"),
                                            pytest.param("gaussian", "test_power", marks=pytest.mark.slow)])
def test_cli_solve_and_verify(tmp_path, family, metric, capsys):
    path = tmp_path / "spec.json"
    definition = "pure" if family == "staircase" else "zcdp"
    path.write_text(json.dumps(spec(WEIGHTS, family, definition, metric)))
    run = cli_runner(capsys)
    solved_run = run("solve", str(path), "--out", str(tmp_path / "out"))
    assert solved_run.returncode == 0, solved_run.stderr
    assert run("verify", str(tmp_path / "out" / "certificate.json")).returncode == 0
    certificate = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert "idealized" not in json.dumps(certificate) and certificate["mechanism"]["parameters"]["lattice_scale"] == 4
