"""``query_scaling`` on a ``linear`` query with decimal weights, measured exactly on the decimal lattice.

Expected values come from independent derivations: D and the integer shifts D·WΔ from Fractions of the written
decimals; the privacy of the measurement (k_i + η_i, η_i ~ N_ℤ(0, σ_i²)) by brute-force sums of the discrete
Gaussian's pmf over the lattice (Rényi divergences, the hockey-stick δ(ε)); the utility and the variance from mpmath
sums of the discrete Gaussian's second moment, divided by D²; the released law from seeded draws within 4 standard
errors.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.audit import audit
from dpopt.mechanisms.base import IDEALIZED_NUMERICS

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written."""

PRIVACY = {"zcdp": {"rho": 0.5}, "gdp": {"mu": 1}, "approx": {"epsilon": 1, "delta": 1e-6}}


def spec(adjacency: str = "add_remove", definition: str = "zcdp") -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal query scaling", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in WEIGHTS]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]},
            "mechanism": "query_scaling", "utility": "l2"}


def integer_moves(adjacency: str) -> list[list[int]]:
    """The shifts D·WΔ (D = 4) over the adjacency's moves (e_j, or e_j − e_k), from Fractions."""
    d = math.lcm(*(Fraction(w).denominator for row in WEIGHTS for w in row))
    assert d == 4
    columns = [[int(Fraction(row[j]) * d) for row in WEIGHTS] for j in range(3)]  # (2, 0), (4, 1), (0, 6)
    if adjacency == "add_remove":
        return columns
    return [[a - b for a, b in zip(columns[j], columns[k])] for j, k in itertools.permutations(range(3), 2)]


def solved(adjacency="add_remove", definition="zcdp"):
    solution = dpopt.solve(spec(adjacency, definition))
    return solution, json.loads(solution.certificate.to_json())


def variances(certificate) -> list[Fraction]:
    return [Fraction(v) for v in certificate["mechanism"]["parameters"]["lattice_variances"]]


def pmf(sigma2: Fraction, support: np.ndarray) -> np.ndarray:
    """N_ℤ(0, σ²) on ``support`` (normalised over it; the mass beyond ±14σ is below e^{-98})."""
    p = np.exp(-support.astype(float) ** 2 / (2 * float(sigma2)))
    return p / p.sum()


def second_moment(sigma2: Fraction) -> float:
    with mpmath.workdps(30):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        weight = lambda k: mpmath.exp(-k * k / (2 * s2))
        return float(mpmath.nsum(lambda k: k * k * weight(k), [-mpmath.inf, mpmath.inf])
                     / mpmath.nsum(weight, [-mpmath.inf, mpmath.inf]))


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_rho_by_brute_force_renyi_divergences_of_the_integer_shifts(adjacency):
    """D_α(N_ℤ(0, σ²) ‖ N_ℤ(s, σ²)) summed over the coordinates of each shift s = D·WΔ, by sums of the pmf in 30
    digits: at most αρ = α/2 at several α."""
    _, certificate = solved(adjacency)
    sigma2 = variances(certificate)
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    with mpmath.workdps(30):
        for alpha in (1.5, 2, 4, 16):
            worst = 0
            for move in integer_moves(adjacency):
                divergence = 0
                for s, v in zip(move, sigma2):
                    s2 = mpmath.mpf(v.numerator) / v.denominator
                    half = int(14 * math.sqrt(v)) + 50
                    w = {k: mpmath.exp(-k * k / (2 * s2)) for k in range(-half, half + 1)}
                    total = mpmath.fsum(w.values())
                    divergence += mpmath.log(mpmath.fsum((w[k] / total) ** alpha * (w[k - s] / total) ** (1 - alpha)
                                                         for k in range(-half + abs(s), half - abs(s) + 1))) / (alpha - 1)
                worst = max(worst, divergence)
            assert worst <= alpha * mpmath.mpf("0.5")


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["approx", "gdp"])
def test_the_target_by_brute_force_hockey_stick_over_the_lattice(adjacency, definition):
    """δ(ε) = Σ_z max(0, P(z) − e^ε P(z − s)) over the 2-D lattice for every integer shift s: at most 10⁻⁶ at
    ε = 1 for (1, 10⁻⁶); at most the μ = 1 Gaussian profile at several ε for μ-GDP (a necessary condition)."""
    _, certificate = solved(adjacency, definition)
    sigma2 = variances(certificate)
    half = int(14 * math.sqrt(max(sigma2))) + 10
    support = np.arange(-half, half + 1)
    p = [pmf(v, support) for v in sigma2]
    joint = np.outer(p[0], p[1])
    for move in integer_moves(adjacency):
        shifted = np.outer(np.roll(p[0], move[0]), np.roll(p[1], move[1]))
        if definition == "approx":
            assert np.sum(np.maximum(0.0, joint - math.e * shifted)) <= 1e-6
        else:
            for eps in (0.0, 0.5, 1.0, 2.0):
                gaussian = (0.5 * math.erfc((eps - 0.5) / math.sqrt(2))
                            - math.exp(eps) * 0.5 * math.erfc((eps + 0.5) / math.sqrt(2)))
                assert np.sum(np.maximum(0.0, joint - math.exp(eps) * shifted)) <= gaussian + 1e-12


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_lattice_variances_cover_d_squared_times_the_design_and_the_cost_is_stated(adjacency):
    """Under ρ-zCDP σ_i² ≥ D²σ²/ξ_i (Fractions of the recorded floats); l2 = Σ_i Var N_ℤ(0, σ_i²)/D² (mpmath sums);
    exact_cost: the mean of Var/D² against the mean of σ²/ξ_i."""
    _, certificate = solved(adjacency)
    parameters = certificate["mechanism"]["parameters"]
    sigma, xi = Fraction(parameters["sigma"]), [Fraction(x) for x in parameters["xi"]]
    sigma2 = variances(certificate)
    assert all(v >= 16 * sigma**2 / x for v, x in zip(sigma2, xi))
    released = [second_moment(v) / 16 for v in sigma2]
    assert certificate["utility"]["value"] == pytest.approx(sum(released), rel=1e-9)
    continuous = sum(float(sigma**2 / x) for x in xi) / 2
    cost = parameters.get("exact_cost", {"ratio": 1.0, "exact": continuous, "continuous": continuous})
    assert cost["exact"] == pytest.approx(sum(released) / 2, rel=1e-9)
    assert cost["continuous"] == pytest.approx(continuous, rel=1e-12)


def test_the_released_values_lie_on_the_decimal_lattice_with_the_stated_variance():
    solution, certificate = solved("replace_one")
    query = dpopt.compile(spec("replace_one")).query
    counts = np.array([37.0, 12.0, 51.0])
    truth = [sum(Fraction(w) * int(c) for w, c in zip(row, counts)) for row in WEIGHTS]  # 30.5, 79.5
    released = solution.mechanism.release(np.tile(query.answers(counts), (20_000, 1)), np.random.default_rng(7))
    scaled = released * 4 - np.array([float(4 * v) for v in truth])
    assert np.all(scaled == np.round(scaled))
    for column, v in zip((scaled / 4).T, variances(certificate)):
        variance = second_moment(v) / 16
        se = math.sqrt(np.var(column**2) / column.size)  # the standard error of the mean of η²/D²
        assert abs(np.mean(column**2) - variance) <= 4 * se
        assert abs(np.mean(column)) <= 4 * math.sqrt(variance / column.size)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", list(PRIVACY))
def test_the_reproduction_configs_measure_exactly_and_verify(adjacency, definition):
    solution, certificate = solved(adjacency, definition)
    assert "idealized" not in json.dumps(certificate)
    assert IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(certificate).passed


def _forged(certificate: dict, **changes) -> dict:
    out = copy.deepcopy(certificate)
    out["mechanism"]["parameters"].update(changes)
    return out


def test_a_forged_lattice_fails_verify():
    _, certificate = solved("replace_one", "gdp")
    assert dpopt.verify(certificate).passed
    halved = [str(v / 2) for v in variances(certificate)]
    for changes in ({"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "164"},
                    {"lattice_l2_squared": "9"}, {"lattice_variances": halved},
                    {"exact_cost": {"metric": "variance", "exact": 1.0, "continuous": 1.0, "ratio": 1.0}}):
        assert not dpopt.verify(_forged(certificate, **changes)).passed, changes


def test_the_audit_passes_on_a_lattice_whose_float_shifts_are_not_quotients_by_d():
    query = {"kind": "linear", "attribute": "a", "matrix": [[0.1, 0.3, 0], [0, 0.2, 0.7]]}
    solution = dpopt.solve(spec("replace_one") | {"query": query})
    assert solution.mechanism.decimal.scale == 10
    assert audit(solution, draws=20_000).passed


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_a_privacy_unit_meets_rho_over_every_allowed_contribution(adjacency):
    """One person adds (or changes) a count vector v over the five clinics (at most 4 rows, 2 clinics, 3 rows a
    clinic); the scaled answers move by s = D·W(v − v′). ρ = max_s Σ_i s_i²/(2σ_i²) (CKS 2020, Thm 14, coordinates
    independent) over every allowed pair, in Fractions, is at most 1/2."""
    from test_decimal_privacy_unit import UNIT, WEIGHTS as CLINIC_WEIGHTS, spec as unit_spec

    integer = [[int(Fraction(w) * 4) for w in row] for row in CLINIC_WEIGHTS]
    allowed = [v for v in itertools.product(range(UNIT["max_rows_per_group"] + 1), repeat=5)
               if sum(v) <= UNIT["max_rows"] and sum(1 for c in v if c) <= UNIT["max_groups"]]
    others = allowed if adjacency == "replace_one" else [(0,) * 5]
    shifts = {tuple(sum(m * (a - b) for m, a, b in zip(row, v, w)) for row in integer) for v in allowed for w in others}
    solution = dpopt.solve(unit_spec(adjacency, "query_scaling"))
    certificate = json.loads(solution.certificate.to_json())
    sigma2 = variances(certificate)
    rho = max(sum(Fraction(s * s) / (2 * v) for s, v in zip(shift, sigma2)) for shift in shifts)
    assert certificate["mechanism"]["parameters"]["lattice_scale"] == 4 and rho <= Fraction(1, 2)
    assert "idealized" not in json.dumps(certificate) and dpopt.verify(certificate).passed
