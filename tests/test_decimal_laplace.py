"""``laplace`` on a ``linear`` query with decimal weights, measured exactly on the decimal lattice.

Expected values come from independent derivations: D and the integer shifts D·WΔ from Fractions of the written
decimals; pure ε as the exact maximum over a grid of outputs of the log-ratio Σ_i (|k_i − s_i| − |k_i|)/t of the
discrete Laplace pmf, in Fractions; the (ε, δ), Rényi and GDP targets by brute-force sums of the pmf over the 2-D
lattice; the utilities and the variance from the closed forms of the discrete Laplace law (geometric series), checked
against direct sums; the released law from seeded draws within 4 standard errors.
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
from dpopt.audit import audit
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written."""

PRIVACY = {"pure": {"epsilon": 1}, "approx": {"epsilon": 1, "delta": 1e-6}, "zcdp": {"rho": 0.5}, "gdp": {"mu": 1}}
UTILITIES = {"l2": "l2", "l1": "l1", "usefulness": {"metric": "usefulness", "gamma": 3}, "max_variance": "max_variance"}


def spec(adjacency: str = "add_remove", definition: str = "pure", utility="l2", mechanism: str = "laplace") -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal laplace", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": mechanism,
            "utility": utility}


def integer_moves(adjacency: str) -> list[list[int]]:
    """The shifts D·WΔ (D = 4) over the adjacency's moves (e_j, or e_j − e_k), from Fractions."""
    d = math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))
    assert d == 4
    columns = [[int(Fraction(row[j]) * d) for row in WEIGHTS] for j in range(3)]  # (2, 0), (4, 1), (0, 6)
    if adjacency == "add_remove":
        return columns
    return [[a - b for a, b in zip(columns[j], columns[k])] for j, k in itertools.permutations(range(3), 2)]


def pmf(t: Fraction, support: np.ndarray) -> np.ndarray:
    """The discrete Laplace pmf (1 − r)/(1 + r)·r^|k|, r = e^{−1/t}, on ``support``."""
    r = math.exp(-1 / float(t))
    return (1 - r) / (1 + r) * r ** np.abs(support).astype(float)


def solved(adjacency="add_remove", definition="pure", utility="l2"):
    solution = dpopt.solve(spec(adjacency, definition, utility))
    return solution, solution.mechanism, json.loads(solution.certificate.to_json())


@pytest.mark.parametrize("adjacency, l1", [("add_remove", 6), ("replace_one", 9)])
def test_pure_epsilon_is_the_integer_l1_sensitivity_over_t_by_brute_force(adjacency, l1):
    """ε = max_s ‖s‖₁/t for the integer shifts s = D·WΔ: the largest log-ratio log p(k)/p(k − s) over a grid of
    outputs k, in Fractions (the ratio is r^{|k| − |k − s|}, r = e^{−1/t}), is the target ε = 1 exactly (t = Δ₁ here:
    6 = ‖(0, 6)‖₁, 9 = ‖(4, −5)‖₁)."""
    _, mechanism, certificate = solved(adjacency)
    t = Fraction(certificate["mechanism"]["parameters"]["scale_exact"])
    assert max(sum(abs(s) for s in move) for move in integer_moves(adjacency)) == l1
    grid = range(-12, 13)
    loss = max(sum(Fraction(abs(k - s) - abs(k), 1) / t for k, s in zip(ks, move))
               for move in integer_moves(adjacency) for ks in itertools.product(grid, repeat=2))
    assert loss == Fraction(l1) / t == 1
    assert mechanism.decimal.scale == 4 and certificate["mechanism"]["parameters"]["lattice_scale"] == 4


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["approx", "zcdp", "gdp"])
def test_the_scaled_measurement_meets_its_target_by_brute_force_sums(adjacency, definition):
    """Over the 2-D lattice (±40t: the mass beyond is below e^{-40}), for every integer shift s: δ(1) ≤ 10⁻⁶ for
    (1, 10⁻⁶); the Rényi divergences D_α ≤ αρ at several α for ρ = 1/2; the hockey-stick δ(ε) at most the μ = 1
    Gaussian profile δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) at several ε (a necessary condition of μ-GDP)."""
    _, mechanism, certificate = solved(adjacency, definition)
    t = Fraction(certificate["mechanism"]["parameters"]["scale_exact"])
    half = int(40 * t)
    support = np.arange(-half, half + 1)
    p = pmf(t, support)
    joint = np.outer(p, p)
    for move in integer_moves(adjacency):
        shifted = np.outer(pmf(t, support - move[0]), pmf(t, support - move[1]))  # P(z − s)
        if definition == "approx":
            assert np.sum(np.maximum(0.0, joint - math.e * shifted)) <= 1e-6
        elif definition == "zcdp":
            log_p, log_q = np.log(joint), np.log(shifted)  # in logs: p^α q^{1−α} overflows in the far tails
            for alpha in (1.01, 1.5, 2, 4, 16):
                terms = alpha * log_p + (1 - alpha) * log_q
                divergence = (terms.max() + math.log(np.sum(np.exp(terms - terms.max())))) / (alpha - 1)
                assert divergence <= alpha * 0.5
        else:
            for eps in (0.0, 0.5, 1.0, 2.0):
                gaussian = (0.5 * math.erfc((eps - 0.5) / math.sqrt(2))
                            - math.exp(eps) * 0.5 * math.erfc((eps + 0.5) / math.sqrt(2)))
                assert np.sum(np.maximum(0.0, joint - math.exp(eps) * shifted)) <= gaussian + 1e-12


def test_the_released_values_lie_on_the_decimal_lattice_with_the_discrete_laws_variance():
    """(k + η)/D − Wx ∈ (1/D)ℤ, and the mean of its square is Var η/D² = 2r/(1 − r)²/16 (r = e^{−1/t}, the
    geometric series Σ k² r^|k|) within 4 standard errors of 20,000 × 2 seeded draws."""
    _, mechanism, certificate = solved()
    t = Fraction(certificate["mechanism"]["parameters"]["scale_exact"])
    query = dpopt.compile(spec()).query
    counts = np.array([37.0, 12.0, 5.0])
    truth = [sum(Fraction(w) * int(c) for w, c in zip(row, counts)) for row in WEIGHTS]  # 30.5, 10.5
    released = mechanism.release(np.tile(query.answers(counts), (20_000, 1)), np.random.default_rng(20261207))
    scaled = released * 4 - np.array([float(4 * v) for v in truth])
    assert np.all(scaled == np.round(scaled))
    noise = (scaled / 4).ravel()
    r = math.exp(-1 / float(t))
    variance = 2 * r / (1 - r) ** 2 / 16
    se = math.sqrt(np.var(noise**2) / noise.size)
    assert abs(np.mean(noise**2) - variance) <= 4 * se
    assert abs(np.mean(noise)) <= 4 * math.sqrt(variance / noise.size)


@pytest.mark.parametrize("metric", list(UTILITIES))
def test_the_predicted_utility_is_the_discrete_law_scaled_by_d(metric):
    """l2 = 2·E η²/D², max_variance = E η²/D², l1 = 2·E|η|/D, usefulness = P(|η| ≤ γD) = P(|η| ≤ 12), each as a
    direct sum of the pmf over |k| ≤ 40t (the mass beyond is below e^{-40})."""
    _, _, certificate = solved("replace_one", "pure", UTILITIES[metric])
    t = Fraction(certificate["mechanism"]["parameters"]["scale_exact"])
    support = np.arange(-int(40 * t), int(40 * t) + 1)
    p = pmf(t, support)
    expected = {"l2": 2 * np.sum(p * support**2) / 16, "max_variance": np.sum(p * support**2) / 16,
                "l1": 2 * np.sum(p * np.abs(support)) / 4, "usefulness": np.sum(p[np.abs(support) <= 12])}[metric]
    assert certificate["utility"]["value"] == pytest.approx(expected, rel=1e-9)


def test_the_cost_of_exactness_is_stated_against_the_continuous_design():
    """exact_cost: Var η/D² against 2b², b = Δ₁/ε of the continuous design on W (Δ₁ = 9/4 under replace-one, the
    l1 norm of (1, −1.25))."""
    _, mechanism, certificate = solved("replace_one")
    parameters = certificate["mechanism"]["parameters"]
    t = Fraction(parameters["scale_exact"])
    r = math.exp(-1 / float(t))
    cost = parameters["exact_cost"]
    assert parameters["design_scale"] == 2.25
    assert cost["continuous"] == pytest.approx(2 * 2.25**2, rel=1e-15)
    assert cost["exact"] == pytest.approx(2 * r / (1 - r) ** 2 / 16, rel=1e-12)
    assert cost["ratio"] == pytest.approx(cost["exact"] / cost["continuous"], rel=1e-15)
    assert cost["ratio"] < 1  # the discrete law's variance 2t² − 1/6 + O(t⁻²) is below Laplace's 2t²


@pytest.mark.parametrize("adjacency, definition, metric", [
    pytest.param(*config, marks=() if config[2] == "l2" else pytest.mark.slow)  # l2 in the default run
    for config in itertools.product(["add_remove", "replace_one"], PRIVACY, UTILITIES)])
def test_the_reproduction_configs_measure_exactly_and_verify(adjacency, definition, metric):
    solution, mechanism, certificate = solved(adjacency, definition, UTILITIES[metric])
    assert "idealized" not in json.dumps(certificate) and IDEALIZED_NUMERICS not in " ".join(mechanism.notes())
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(certificate).passed


def _forged(certificate: dict, **changes) -> dict:
    out = copy.deepcopy(certificate)
    out["mechanism"]["parameters"].update(changes)
    return out


@pytest.mark.parametrize("changes", [{"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "144"},
                                     {"lattice_l2_squared": "9"}, {"scale_exact": "5"},
                                     {"exact_cost": {"metric": "variance", "exact": 1.0, "continuous": 2.0,
                                                     "ratio": 0.5}}])
def test_a_forged_lattice_or_scale_fails_verify(changes):
    """D = 2 or 8 is not the weights' denominator; Δ_D² = 9 is not max ‖D·WΔ‖² = 41; t = 5 < 9 = Δ₁ breaks ε = 1;
    a cost other than the recomputed one."""
    _, _, certificate = solved("replace_one")
    assert dpopt.verify(certificate).passed
    assert not dpopt.verify(_forged(certificate, **changes)).passed


def test_sampler_floating_point_keeps_laplace_and_its_note():
    solution = dpopt.solve(spec() | {"sampler": "floating_point"})
    assert not solution.mechanism.exact_noise and IDEALIZED_NUMERICS in " ".join(solution.mechanism.notes())


def test_the_audit_passes_on_a_lattice_whose_float_shifts_are_not_quotients_by_d():
    # Weights 0.1, 0.3 (D = 10): the audit's shifted answer x + WΔ is snapped to k/D (0.1 − 0.3 ≠ fl(−2/10)); the
    # exact measurement passes its audit (20,000 draws per dataset, the audit's own Clopper–Pearson bounds)
    query = {"kind": "linear", "attribute": "a", "matrix": [[0.1, 0.3, 0], [0, 0.2, 0.7]]}
    solution = dpopt.solve(spec("replace_one") | {"query": query})
    assert solution.mechanism.decimal.scale == 10
    assert audit(solution, draws=20_000).passed


@pytest.mark.parametrize("mechanism", ["laplace", "staircase"])
def test_a_denominator_beyond_the_bound_keeps_floating_point_with_the_reason(mechanism):
    # 1/3 is the decimal 0.3333333333333333: D = 10^16 > 2^20
    query = {"kind": "linear", "attribute": "a", "matrix": [[0.5, 1, 0], [1 / 3, 0.25, 1.5]]}
    solution = dpopt.solve(spec(mechanism=mechanism) | {"query": query})
    notes = " ".join(solution.mechanism.notes())
    assert not solution.mechanism.exact_noise and IDEALIZED_NUMERICS in notes
    assert "no decimal lattice" in notes and "2^20" in notes


def test_a_privacy_unit_measures_at_the_person_level_l1_of_the_integer_shifts():
    """One person adds a count vector v over the five clinics (at most 4 rows, 2 clinics, 3 rows a clinic); the
    scaled answers move by D·Wv. Pure ε = 1 needs t = max ‖D·Wv‖₁ over every allowed v, by brute force: 23, at
    3 × east (0, 6) + 1 × south (4, 1)."""
    from test_decimal_privacy_unit import UNIT, WEIGHTS as CLINIC_WEIGHTS, spec as unit_spec

    d = math.lcm(*(Fraction(w).denominator for row in CLINIC_WEIGHTS for w in row))
    integer = [[int(Fraction(w) * d) for w in row] for row in CLINIC_WEIGHTS]
    allowed = [v for v in itertools.product(range(UNIT["max_rows_per_group"] + 1), repeat=5)
               if sum(v) <= UNIT["max_rows"] and sum(1 for c in v if c) <= UNIT["max_groups"]]
    l1 = max(sum(abs(sum(m * c for m, c in zip(row, v))) for row in integer) for v in allowed)
    assert (d, l1) == (4, 23)
    solution = dpopt.solve(unit_spec("add_remove", "laplace", {"pure": {"epsilon": 1}}))
    certificate = json.loads(solution.certificate.to_json())
    parameters = certificate["mechanism"]["parameters"]
    assert parameters["lattice_scale"] == 4 and Fraction(parameters["scale_exact"]) == l1
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
    assert not dpopt.verify(_forged(certificate, scale_exact="22")).passed
