"""A ``linear`` query with decimal weights, measured exactly on the decimal lattice (dpopt.mechanisms.decimal_lattice).

Expected values come from independent derivations: the common denominator D and the integer sensitivity from
Fractions of the written decimals; the privacy of the scaled measurement by brute-force sums of the discrete
Gaussian's pmf over the lattice (Rényi divergences, the hockey-stick δ(ε)); the utility from mpmath sums of the
discrete Gaussian's moments; the released law from seeded draws within 4 standard errors.
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
from conftest import cli_runner

import dpopt
from dpopt.audit import audit
from dpopt.domain.queries import CountingQuery, decimal_scale
from dpopt.errors import DataError
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.decimal_lattice import scaled_answers

WEIGHTS = [["0.5", "1", "0"], ["0", "0.25", "1.5"]]
"""The reproduction's matrix, as the decimals written."""

PRIVACY = {"zcdp": {"rho": 0.5}, "gdp": {"mu": 1}, "approx": {"epsilon": 1, "delta": 1e-6}}


def spec(adjacency: str = "add_remove", definition: str = "zcdp", utility="l2", weights=WEIGHTS,
         mechanism: str = "gaussian") -> dict:
    data = {"attributes": {"a": ["x", "y", "z"]}} | ({"n": 100} if adjacency == "replace_one" else {})
    return {"dpopt": 1, "name": "decimal linear", "data": data,
            "query": {"kind": "linear", "attribute": "a", "matrix": [[float(w) for w in row] for row in weights]},
            "adjacency": {"kind": adjacency}, "privacy": {definition: PRIVACY[definition]}, "mechanism": mechanism,
            "utility": utility}


def denominator(weights) -> int:
    """D: the least common multiple of the written decimals' denominators."""
    return math.lcm(*(Fraction(w).denominator for row in weights for w in row))


def integer_moves(adjacency: str) -> list[list[int]]:
    """The shifts D·WΔ of the scaled answers over the adjacency's moves (±e_j, or e_j − e_k), from Fractions."""
    d = denominator(WEIGHTS)
    columns = [[int(Fraction(row[j]) * d) for row in WEIGHTS] for j in range(3)]
    if adjacency == "add_remove":
        return columns
    return [[a - b for a, b in zip(columns[j], columns[k])] for j, k in itertools.permutations(range(3), 2)]


def pmf(sigma2: Fraction, support: np.ndarray) -> np.ndarray:
    """N_ℤ(0, σ²) on ``support`` (normalised over it; the mass beyond ±14σ is below e^{-98})."""
    p = np.exp(-support.astype(float) ** 2 / (2 * float(sigma2)))
    return p / p.sum()


def as_dict(solution) -> dict:
    return json.loads(solution.certificate.to_json())


def mechanism_of(adjacency: str, definition: str, utility="l2"):
    solution = dpopt.solve(spec(adjacency, definition, utility))
    return solution, solution.mechanism


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_scale_and_integer_sensitivity_are_those_of_the_written_decimals(adjacency):
    solution, mechanism = mechanism_of(adjacency, "zcdp")
    assert mechanism.sampler == "exact" and mechanism.decimal.scale == denominator(WEIGHTS) == 4
    expected = max(sum(s * s for s in move) for move in integer_moves(adjacency))
    assert mechanism.decimal.l2_squared == expected  # 36 (the column 4·(0, 1.5)) or 41 ((4, 1) − (0, 6))
    parameters = as_dict(solution)["mechanism"]["parameters"]
    assert parameters["lattice_scale"] == 4 and Fraction(parameters["lattice_l2_squared"]) == expected


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
def test_the_scaled_measurement_meets_rho_by_brute_force_renyi_divergences(adjacency):
    _, mechanism = mechanism_of(adjacency, "zcdp")
    sigma2 = mechanism.lattice_sigma2
    assert sigma2 >= 16 * Fraction(mechanism.sigma) ** 2  # σ_ℤ² ≥ D²σ²
    with mpmath.workdps(30):
        half = int(14 * math.sqrt(sigma2)) + 50
        z = [mpmath.mpf(k) for k in range(-half, half + 1)]
        weights = [mpmath.exp(-k * k / (2 * mpmath.mpf(sigma2.numerator) / sigma2.denominator)) for k in z]
        total = mpmath.fsum(weights)
        p = {int(k): w / total for k, w in zip(z, weights)}
        for alpha in (1.5, 2, 4, 16):
            worst = 0
            for move in integer_moves(adjacency):
                # D_α of a product is the sum over coordinates; the shifted pmf read on the same lattice
                divergence = sum(mpmath.log(mpmath.fsum(p[k] ** alpha * p[k - s] ** (1 - alpha)
                                                        for k in range(-half + abs(s), half - abs(s) + 1)))
                                 / (alpha - 1) for s in move)
                worst = max(worst, divergence)
            assert worst <= alpha * mpmath.mpf("0.5")  # ρ-zCDP: D_α ≤ αρ for every α


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["approx", "gdp"])
def test_the_scaled_measurement_meets_its_target_by_brute_force_hockey_stick(adjacency, definition):
    """δ(ε) = Σ_z max(0, P(z) − e^ε P(z − s)) over the 2-D lattice, for each move: at most 10⁻⁶ at ε = 1 for the
    (1, 10⁻⁶) target; at most the Gaussian profile δ_μ(ε) of μ = 1 at several ε for the GDP target (a necessary
    condition of μ-GDP)."""
    _, mechanism = mechanism_of(adjacency, definition)
    sigma2 = mechanism.lattice_sigma2
    half = int(14 * math.sqrt(sigma2)) + 10
    support = np.arange(-half, half + 1)
    p = pmf(sigma2, support)
    joint = np.outer(p, p)

    def delta(move, eps):
        shifted = np.outer(np.roll(p, move[0]), np.roll(p, move[1]))  # P(z − s): the tails beyond ±14σ are < e^-98
        return float(np.sum(np.maximum(0.0, joint - math.exp(eps) * shifted)))

    for move in integer_moves(adjacency):
        if definition == "approx":
            assert delta(move, 1.0) <= 1e-6
        else:
            for eps in (0.0, 0.5, 1.0, 2.0):
                gaussian = (0.5 * math.erfc((eps - 0.5) / math.sqrt(2))
                            - math.exp(eps) * 0.5 * math.erfc((eps + 0.5) / math.sqrt(2)))
                assert delta(move, eps) <= gaussian + 1e-12


def test_the_released_values_lie_on_the_decimal_lattice_with_the_stated_variance():
    _, mechanism = mechanism_of("add_remove", "zcdp")
    query = dpopt.compile(spec()).query
    counts = np.array([37.0, 12.0, 5.0])
    truth = [sum(Fraction(w) * int(c) for w, c in zip(row, counts)) for row in WEIGHTS]  # 30.5, 10.5
    answers = query.answers(counts)
    assert [Fraction(a) for a in answers] == truth  # exact: k/D with k = 122, 42
    released = mechanism.release(np.tile(answers, (20_000, 1)), np.random.default_rng(20261207))
    scaled = released * 4 - np.array([float(4 * t) for t in truth])
    assert np.all(scaled == np.round(scaled))  # ỹ/D − Wx ∈ (1/D)ℤ
    noise = (scaled / 4).ravel()
    sigma2 = mechanism.lattice_sigma2
    with mpmath.workdps(30):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        terms = lambda f: mpmath.nsum(lambda k: f(k) * mpmath.exp(-k * k / (2 * s2)), [-mpmath.inf, mpmath.inf])
        variance = float(terms(lambda k: k * k) / terms(lambda k: 1) / 16)
    se = math.sqrt(np.var(noise**2) / noise.size)  # the standard error of the mean of η²/D²
    assert abs(np.mean(noise**2) - variance) <= 4 * se
    assert abs(np.mean(noise)) <= 4 * math.sqrt(variance / noise.size)


@pytest.mark.parametrize("metric", ["l2", "max_variance", "l1", "usefulness"])
def test_the_predicted_utility_is_the_scaled_discrete_law(metric):
    utility = {"metric": "usefulness", "gamma": 1.0} if metric == "usefulness" else metric
    solution, mechanism = mechanism_of("add_remove", "gdp", utility)
    sigma2 = mechanism.lattice_sigma2
    with mpmath.workdps(30):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        weight = lambda k: mpmath.exp(-k * k / (2 * s2))
        norm = mpmath.nsum(weight, [-mpmath.inf, mpmath.inf])
        second = mpmath.nsum(lambda k: k * k * weight(k), [-mpmath.inf, mpmath.inf]) / norm
        expected = {"l2": 2 * second / 16, "max_variance": second / 16,
                    "l1": 2 * 2 * mpmath.nsum(lambda k: k * weight(k), [1, mpmath.inf]) / norm / 4,
                    "usefulness": mpmath.fsum(weight(k) for k in range(-4, 5)) / norm}[metric]  # |η| ≤ γD = 4
    assert as_dict(solution)["utility"]["value"] == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace_one"])
@pytest.mark.parametrize("definition", ["zcdp", "gdp", "approx"])
@pytest.mark.parametrize("metric", ["l2", "max_variance", "l1", "usefulness"])
def test_the_reproduction_configs_measure_exactly_and_verify(adjacency, definition, metric):
    utility = {"metric": "usefulness", "gamma": 1.0} if metric == "usefulness" else metric
    solution = dpopt.solve(spec(adjacency, definition, utility))
    text = solution.certificate.to_json()
    assert "idealized" not in text and IDEALIZED_NUMERICS not in " ".join(solution.mechanism.notes())
    assert as_dict(solution)["mechanism"]["parameters"]["lattice_scale"] == 4
    assert dpopt.verify(solution.certificate).passed


def _forged(certificate: dict, **changes) -> dict:
    out = copy.deepcopy(certificate)
    out["mechanism"]["parameters"].update(changes)
    return out


@pytest.mark.parametrize("changes", [{"lattice_scale": 2}, {"lattice_scale": 8, "lattice_l2_squared": "144"},
                                     {"lattice_sigma2": "9"}, {"lattice_l2_squared": "9"}])
def test_a_forged_scale_or_lattice_variance_fails_verify(changes):
    solution = dpopt.solve(spec())
    certificate = json.loads(solution.certificate.to_json())
    assert dpopt.verify(certificate).passed
    assert not dpopt.verify(_forged(certificate, **changes)).passed


@pytest.mark.parametrize("mechanism", ["gaussian", pytest.param("gaussian_optimal", marks=pytest.mark.slow),  # 9–13 s
                                       "laplace",
                                       pytest.param("staircase", marks=pytest.mark.slow),  # 11–17 s
                                       pytest.param("query_scaling", marks=pytest.mark.slow)])  # 8–11 s
def test_cli_solve_release_and_verify(tmp_path, mechanism, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec("replace_one", "approx", mechanism=mechanism)))
    data = tmp_path / "data.csv"
    data.write_text("a\n" + "x\n" * 50 + "y\n" * 30 + "z\n" * 20)
    run = cli_runner(capsys)
    assert run("solve", str(path), "--out", str(tmp_path / "out")).returncode == 0
    assert run("verify", str(tmp_path / "out" / "certificate.json")).returncode == 0
    released = run("release", str(path), "--data", str(data), "--out", str(tmp_path / "rel"), "--seed", "1",
                   "--insecure-seed")
    assert released.returncode == 0, released.stderr
    assert run("verify", str(tmp_path / "rel")).returncode == 0
    certificate = json.loads((tmp_path / "out" / "certificate.json").read_text())
    assert "idealized" not in json.dumps(certificate)
    assert certificate["mechanism"]["family"] == mechanism
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(_forged(certificate, lattice_scale=2)))
    assert run("verify", str(forged)).returncode != 0
    rows = (tmp_path / "rel" / "release.csv").read_text().splitlines()[1:]
    found = [float(row.split(",")[1]) for row in rows]
    truth = [0.5 * 50 + 30, 0.25 * 30 + 1.5 * 20]  # 55, 37.5 (exact in binary)
    assert len(found) == 2
    if mechanism != "gaussian_optimal":  # (k + η)/D on the lattice; gaussian_optimal publishes its least squares
        assert all((v - t) * 4 == round((v - t) * 4) for v, t in zip(found, truth))


def test_a_denominator_beyond_the_bound_keeps_floating_point_with_the_reason():
    weights = [["0.5", "1", "0"], [repr(2.0**-21), "0.25", "1.5"]]  # D = 2^21 > 2^20
    solution = dpopt.solve(spec(weights=weights))
    assert solution.mechanism.sampler == "floating_point"
    assert any("no decimal lattice" in note and "2^20" in note for note in solution.mechanism.notes())
    assert IDEALIZED_NUMERICS in " ".join(solution.mechanism.notes())


def test_decimal_scale_reads_the_written_decimals():
    scale, integer = decimal_scale(np.array([[0.1, 0.25], [1.5, 3.0]]))
    assert scale == 20 and integer.tolist() == [[2, 5], [30, 60]]  # lcm(10, 4, 2) = 20
    assert decimal_scale(np.array([[1 / 3]])) is None  # 0.3333333333333333: 10^16 > 2^20


def test_the_release_refuses_answers_that_are_not_quotients_by_d():
    with pytest.raises(DataError):
        scaled_answers(np.array([0.1 + 0.2]), 10)  # 0.30000000000000004 is not fl(k/10)
    assert scaled_answers(np.array([0.3, -2.25]), 20).tolist() == [6, -45]


def test_answers_of_a_decimal_query_are_correctly_rounded_quotients():
    query = dpopt.compile(spec(weights=[["0.1", "0.2", "0.3"], ["0.7", "0", "0.1"]])).query
    assert isinstance(query, CountingQuery)
    counts = np.array([[3, 7, 11], [1, 0, 2]], dtype=float)
    exact = [[sum(Fraction(w) * int(c) for w, c in zip(row, h)) for row in (["0.1", "0.2", "0.3"], ["0.7", "0", "0.1"])]
             for h in counts]
    assert query.answers(counts).tolist() == [[float(v) for v in row] for row in exact]


@pytest.mark.parametrize("mechanism", ["gaussian", "gaussian_optimal"])
def test_the_audit_shifts_decimal_answers_on_their_lattice(mechanism):
    # Weights 0.1, 0.3 (D = 10): the audit's shifted answer x + WΔ, formed in floating point, is 0.1 − 0.3 ≠
    # fl(−2/10); it must be snapped to k/D as the data's answers are (it raised the release's DataError), and the
    # exact measurement must then pass its audit (20,000 draws per dataset, the audit's own Clopper–Pearson bounds)
    spec = {"dpopt": 1, "name": "t", "data": {"attributes": {"a": ["x", "y", "z"]}, "n": 100},
            "query": {"kind": "linear", "attribute": "a", "matrix": [[0.1, 0.3, 0], [0, 0.2, 0.7]]},
            "adjacency": {"kind": "replace_one"}, "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": mechanism,
            "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    assert solution.mechanism.sampler == "exact" and solution.mechanism.decimal.scale == 10
    assert audit(solution, draws=20_000).passed
