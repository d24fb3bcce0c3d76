"""``marginal_laplace`` on the lattice (the default): discrete Laplace noise on the integer marginals.

Expected values come from
- a brute force over every neighbouring pair of small count tables and a window of outputs of the measurement's
  pmf, ∏ (1 − r)/(1 + r) r^{|y − M_S x|} with r = e^{−1/t_S} (the log-ratio of two such pmfs is
  Σ_S Σ_cells (|y − M_S x'| − |y − M_S x|)/t_S, evaluated in integers and rationals);
- dense matrices built here (the least squares W (AᵀA)⁺Aᵀ of the weighted measurements);
- the variance of the discrete Laplace written as 1/(2 sinh²(1/(2t))) (the two-sided geometric series
  Σ_k k² r^{|k|}(1 − r)/(1 + r), summed differently from the code's 2r/(1 − r)²);
- the decimal target as written (1/10 for ``0.1``).
"""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.errors import DataError
from dpopt.mechanisms import registry
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.laplace_lattice import EXACT_LAPLACE_NOTE, lattice_scale
from dpopt.spec.models import Privacy
from test_marginal_gaussian import ATTRS, MIXED, dense_workload

PURE = {"pure": {"epsilon": 1.0}}
TINY = {"a": ["0", "1"], "b": ["0", "1"]}


def tiny_spec(adjacency: str, **extra) -> dict:
    return {"dpopt": 1, "name": "tiny", "data": {"attributes": TINY}, "adjacency": adjacency, "privacy": PURE,
            "query": {"kind": "marginals", "attributes": [["a"], ["b"]]}, "mechanism": "marginal_laplace",
            "utility": {"metric": "l2"}, **extra}


def spec(query, adjacency="add_remove", **extra) -> dict:
    return {"dpopt": 1, "name": "exact marginals", "data": {"attributes": ATTRS, "n": 10}, "query": query,
            "adjacency": adjacency, "privacy": PURE, "mechanism": "marginal_laplace", "utility": {"metric": "l2"},
            **extra}


@pytest.fixture(scope="module")
def mixed():
    """The exact design of the MIXED marginals of (3, 2, 4) under add/remove."""
    problem = dpopt.compile(spec(MIXED))
    return problem, registry()["marginal_laplace"].design(problem)


def hand_made(adjacency: str):
    """Weights θ_a = 1, θ_b = 1/2 at b = 2 on the two one-way marginals of a 2 × 2 table: t = 2 and 4 exactly."""
    problem = dpopt.compile(tiny_spec(adjacency))
    cls = registry()["marginal_laplace"]
    mechanism = cls(("a", "b"), problem.query.workload, adjacency == "replace_one", 1, {(0,): 1.0, (1,): 0.5}, 2.0,
                    None, "exact")
    return problem, mechanism


@pytest.mark.parametrize("adjacency,epsilon", [("add_remove", Fraction(3, 4)), ("replace_one", Fraction(3, 2))])
def test_privacy_loss_by_brute_force_over_neighbours_and_outputs(adjacency, epsilon):
    """Every pair of neighbouring tables with counts 0–2 in each of the 4 cells (add/remove: x' = x + e_j;
    replace-one: x' = x − e_i + e_j), every output y in [−4, 6]^4 of the two measured marginals: the largest
    log P(y | x)/P(y | x') is the certified ε, exactly (Σ_S Δ_S/t_S = 1/2 + 1/4, or 2/2 + 2/4), and it is attained."""
    problem, mechanism = hand_made(adjacency)
    assert mechanism.lattice == {(0,): Fraction(2), (1,): Fraction(4)}
    assert Fraction(mechanism.privacy_summary(problem.space)["epsilon_exact"]) == epsilon
    margins = [np.kron(np.eye(2), np.ones((1, 2))), np.kron(np.ones((1, 2)), np.eye(2))]  # M_a, M_b on cells ab
    weights = [2, 1]  # 4/t_S: 4 · log-ratio = 2 D_a + D_b, integers
    grid = np.array(list(itertools.product(range(-4, 7), repeat=2)))  # the outputs of one marginal
    eye = np.eye(4, dtype=int)
    worst = 0
    for x in map(np.array, itertools.product(range(3), repeat=4)):
        moves = ([x + eye[j] for j in range(4)] if adjacency == "add_remove" else
                 [x - eye[i] + eye[j] for i in range(4) for j in range(4) if i != j and x[i] > 0])
        for other in moves:
            for one, two in ((x, other), (other, x)):
                # D_S(y) = Σ_cells |y − M_S two| − |y − M_S one| on the grid; the joint output (y_a, y_b) has
                # 4 · log P(y | one)/P(y | two) = 2 D_a(y_a) + D_b(y_b), over all 121 × 121 outputs
                d = [np.abs(grid - m @ two).sum(axis=1) - np.abs(grid - m @ one).sum(axis=1) for m in margins]
                worst = max(worst, int((weights[0] * d[0][:, None] + weights[1] * d[1][None, :]).max()))
    worst = Fraction(worst, 4)
    assert worst == epsilon
    at = {e: Privacy.model_validate({"pure": {"epsilon": e}}) for e in (float(epsilon), float(epsilon) - 1e-9)}
    assert [mechanism.privacy_checks(problem.space, privacy)[0].passed for privacy in at.values()] == [True, False]


def test_measurement_noise_follows_the_discrete_laplace_pmf():
    """The mechanism's own draws η_S (t = 2 and 4) against (1 − r)/(1 + r) r^{|k|}: a χ² test on |k| ≤ 12 and the
    tail beyond, 100,000 draws each, fixed seed; a correct sampler fails with probability 10⁻³."""
    _, mechanism = hand_made("add_remove")
    noise = mechanism._lattice_noise(np.random.default_rng(11), 50_000)
    for s, t in mechanism.lattice.items():
        draws = noise[s].ravel()
        r = math.exp(-1.0 / float(t))
        ks = np.arange(-12, 13)
        probs = (1 - r) / (1 + r) * r ** np.abs(ks)
        observed = np.array([np.sum(draws == k) for k in ks] + [np.sum(np.abs(draws) > 12)])
        expected = np.append(probs, 1 - probs.sum()) * draws.size
        assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_release_is_the_least_squares_of_the_integer_measurements(mixed):
    """The release from the mechanism's integer draws η_S equals W (AᵀA)⁺Aᵀ[θ_S (M_S x + η_S)] built densely
    (the same generator state: release draws η first)."""
    problem, mechanism = mixed
    assert mechanism.sampler == "exact"
    p = mechanism.parameters
    names, sizes = p["attributes"], p["levels"]
    w = dense_workload(sizes, [[names.index(a) for a in b] for b in p["blocks"]])
    x = np.random.default_rng(2).integers(0, 50, w.shape[1])
    eta = mechanism._lattice_noise(np.random.default_rng(7), 1)
    a_rows, y = [], []
    for entry in p["strategy"]:
        s = tuple(sorted(names.index(n) for n in entry["marginal"]))
        m = dense_workload(sizes, [list(s)])
        a_rows.append(entry["weight"] * m)
        y.append(entry["weight"] * (m @ x + eta[s].ravel()))
    a = np.vstack(a_rows)
    expected = w @ np.linalg.pinv(a.T @ a) @ a.T @ np.concatenate(y)
    got = mechanism.release(w @ x, np.random.default_rng(7))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-8)


def test_error_uses_the_discrete_laplace_variance_and_is_below_the_continuous_one():
    """A contingency table is measured as itself (one marginal, θ = 1): each cell's noise is discrete Laplace(t),
    variance 1/(2 sinh²(1/(2t))) < 2b² (the continuous design's); the certified E‖Z‖² is 24 times it."""
    problem = dpopt.compile(spec({"kind": "contingency_table", "attributes": ["a", "b", "c"]}))
    mechanism = registry()["marginal_laplace"].design(problem)
    (t,) = mechanism.lattice.values()
    variance = 1.0 / (2.0 * math.sinh(1.0 / (2.0 * float(t))) ** 2)
    value = mechanism.expected_utility(problem.spec.utility).value
    assert value == pytest.approx(24 * variance, rel=1e-12)
    assert mechanism.design_info["lattice_error_ratio"] == pytest.approx(variance / (2 * mechanism.scale**2),
                                                                         rel=1e-12)
    assert mechanism.design_info["lattice_error_ratio"] < 1


def test_sampler_variances_on_the_lattice(mixed):
    """Per-cell Var Z_i of the exact sampler against the closed form (cell_law_groups): Z_i is a linear image of
    independent discrete Laplace variables (kurtosis ≤ 6, as for Laplace), so the SE of the mean of Z_i² is
    ≤ √5 σ²/√n; 5 SE over 15 cells, 40,000 draws."""
    problem, mechanism = mixed
    expected, _ = mechanism.cell_law_groups()
    n = 40_000
    z = mechanism.sample(n, np.random.default_rng(5))
    assert np.all(np.abs((z**2).mean(axis=0) - expected) <= 5 * np.sqrt(5.0) * expected / np.sqrt(n))


def test_verify_rejects_a_forged_lattice_scale_and_passes_the_real_one():
    cert = dpopt.solve(spec(MIXED, "replace_one")).certificate
    assert dpopt.verify(cert).passed
    assert EXACT_LAPLACE_NOTE in cert["mechanism"]["notes"] and IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    forged = copy.deepcopy(cert)
    entry = forged["mechanism"]["parameters"]["lattice"][0]
    entry["scale"] = str(Fraction(entry["scale"]) / 2)
    assert "privacy" in {c.claim for c in dpopt.verify(forged).failed}


def test_exact_check_compares_with_the_written_decimal():
    """ε = 0.1 is 1/10 as written; float(0.1) is 1/10 + 5.6·10⁻¹⁸. One marginal with Δ = 1: t = 10 gives 1/10
    (passes); t = 10(1 − 2⁻⁶⁰) gives 1/10 + 8.7·10⁻²⁰, which is within the binary reading but above the decimal."""
    problem = dpopt.compile(spec({"kind": "contingency_table", "attributes": ["a", "b"]}))
    mechanism = registry()["marginal_laplace"].design(problem)
    privacy = Privacy.model_validate({"pure": {"epsilon": 0.1}})
    rebuilt = []
    for t in (Fraction(10), Fraction(10) * (1 - Fraction(1, 2**60))):
        assert 1 / t <= Fraction(0.1)
        parameters = copy.deepcopy(mechanism.parameters)
        (parameters["lattice"][0])["scale"] = str(t)
        rebuilt.append(type(mechanism).from_parameters(parameters, problem.space))
    assert [m.privacy_checks(problem.space, privacy)[0].passed for m in rebuilt] == [True, False]


def test_floating_point_keeps_the_continuous_path_and_its_note():
    solution = dpopt.solve(spec(MIXED, sampler="floating_point"))
    parameters = solution.certificate["mechanism"]["parameters"]
    assert parameters["sampler"] == "floating_point" and "lattice" not in parameters
    assert IDEALIZED_NUMERICS in solution.certificate["mechanism"]["notes"]
    assert dpopt.verify(solution.certificate).passed
    exact = dpopt.solve(spec(MIXED)).mechanism
    assert exact.exact_noise and not solution.mechanism.exact_noise
    assert exact.weights == solution.mechanism.weights and exact.scale == solution.mechanism.scale


def test_exact_release_refuses_fractional_answers(mixed):
    problem, mechanism = mixed
    with pytest.raises(DataError, match="whole-number"):
        mechanism.release(np.full(mechanism.dimension, 0.5), np.random.default_rng(0))


def test_lattice_scale_rounds_up_to_sixteen_bit_numerators():
    """p/2^k ≥ x, p ≤ 2^16, and no finer grid would do: 2^k p is the ceiling of 2^k x."""
    for x in (Fraction(1, 3), Fraction(7), Fraction(123456, 7), Fraction(10**6, 3)):
        t = lattice_scale(x)
        assert t >= x
        assert t.numerator <= 2**16 or t.denominator == 1
        assert t.denominator == 1 or math.ceil(x * 2 * t.denominator) > 2**16
        assert t - x < Fraction(1, t.denominator)
