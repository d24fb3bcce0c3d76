"""The discrete staircase's exact privacy-loss distribution (dpopt.privacy.discrete_staircase_profile) against
brute-force enumeration over ℤ, its (ε, δ), zCDP and GDP checks against closed forms and direct sums, and the count
designs calibrated on it (solve, verify, tamper)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.privacy.discrete_staircase_profile import (
    discrete_delta,
    discrete_gdp,
    discrete_loss_pmf,
    discrete_move_pmf,
    discrete_renyi_estimate,
    discrete_tradeoff,
    discrete_zcdp,
)

WINDOW = 1500
"""Outputs |k| ≤ WINDOW enumerated by the brute force: the mass beyond is below 2b^{WINDOW/m}/(1 − b) < 10⁻⁴⁰ for
every (ε', m) below (b^{WINDOW/m} ≤ e^{−0.5·1500/8} ≈ 10⁻⁴¹)."""

LAWS = [(Fraction(1, 2), 1, 1, 1), (Fraction(3, 4), 3, 2, 1), (Fraction(3, 4), 3, 2, 5), (Fraction(1), 4, 1, 7),
        (Fraction(1), 4, 4, 2), (Fraction(5, 4), 8, 3, 8), (Fraction(2, 3), 5, 5, 13)]


def _brute(epsilon: Fraction, m: int, r: int):
    """p(k) = b^{L(k)}/Z on |k| ≤ WINDOW from the definition, Z summed over the window (40 digits)."""
    b = mpmath.exp(-mpmath.mpf(epsilon.numerator) / epsilon.denominator)
    ks = range(-WINDOW, WINDOW + 1)
    weights = {k: b ** ((abs(k) + m - r) // m) for k in ks}
    z = mpmath.fsum(weights.values())
    return {k: w / z for k, w in weights.items()}, (lambda k: (abs(k) + m - r) // m)


@pytest.mark.parametrize("epsilon, m, r, t", LAWS)
def test_the_loss_pmf_is_the_enumerated_law_of_the_loss(epsilon, m, r, t):
    with mpmath.workdps(40):
        p, level = _brute(epsilon, m, r)
        brute: dict[int, mpmath.mpf] = {}
        for k, mass in p.items():
            j = level(k - t) - level(k)  # ℓ(k)/ε' = L(k − t) − L(k), from the definition
            brute[j] = brute.get(j, 0) + mass
        pmf = discrete_loss_pmf(epsilon, m, r, t)
        assert set(pmf) == set(brute)
        assert max(abs(pmf[j] - brute[j]) for j in pmf) < mpmath.mpf(10) ** -38
        assert max(abs(j) for j in pmf) == -(-t // m)  # the loss reaches ⌈t/m⌉ε', the pure bound
        assert discrete_loss_pmf(epsilon, m, r, -t) == pmf  # p even: a shift by −t has the same law


def test_the_unit_step_is_the_discrete_laplace():
    # m = 1: p(k) ∝ b^{|k|}, a shift by 1 has loss +ε' on k ≤ 0 (mass 1/(1 + b)) and −ε' on k ≥ 1 (mass b/(1 + b))
    pmf = discrete_loss_pmf(Fraction(7, 10), 1, 1, 1)
    assert set(pmf) == {-1, 1}
    with mpmath.workdps(60):
        b = mpmath.exp(-mpmath.mpf(7) / 10)
        assert abs(pmf[1] - 1 / (1 + b)) < 1e-50 and abs(pmf[-1] - b / (1 + b)) < 1e-50


def _brute_delta(epsilon: float, law, move) -> mpmath.mpf:
    """δ(ε) = Σ_k (P(k) − e^ε Q(k))₊ over the product window, Q the law shifted by the move (the hockey-stick
    divergence's definition, no loss pmf involved)."""
    e, m, r = law
    p, _ = _brute(e, m, r)
    coordinates = [np.array([float(p.get(k, 0)) for k in range(-150, 151)]) for _ in move]
    shifted = [np.array([float(p.get(k - int(t), 0)) for k in range(-150, 151)]) for t in move]
    joint_p = np.einsum("i,j->ij", *coordinates) if len(move) == 2 else coordinates[0]
    joint_q = np.einsum("i,j->ij", *shifted) if len(move) == 2 else shifted[0]
    return float(np.sum(np.maximum(joint_p - np.exp(epsilon) * joint_q, 0.0)))


@pytest.mark.parametrize("law, move, epsilon", [((Fraction(1, 2), 1, 1), (1, 1), 0.3),
                                                ((Fraction(3, 4), 3, 2), (2, 3), 0.5),
                                                ((Fraction(1), 2, 1), (3,), 0.2)])
def test_delta_is_the_hockey_stick_divergence_of_the_enumerated_pair(law, move, epsilon):
    # the window ±150 holds all but 2e^{−ε'⌊150/m⌋}/(1 − b) ≤ 10⁻¹⁵ of the mass per coordinate (ε'/m ≥ 1/4); the
    # products then differ from the full sums by under 10⁻¹⁴, and double precision sums carry 10⁻¹³
    with mpmath.workdps(40):
        expected = _brute_delta(epsilon, law, move)
    delta, worst = discrete_delta(epsilon, law, [tuple(Fraction(t) for t in move)])
    assert float(delta) == pytest.approx(expected, abs=1e-12)
    assert expected > 1e-3  # not a vacuous comparison


def _laplace_renyi_over_alpha(epsilon: Fraction, coordinates: int) -> mpmath.mpf:
    """sup_α D_α/α of ``coordinates`` independent discrete Laplace (m = 1) coordinates each shifted by 1, from the
    closed form D_α = c·log((e^{(α−1)ε} + b·e^{−(α−1)ε})/(1 + b))/(α − 1) (loss +ε w.p. 1/(1 + b), −ε w.p.
    b/(1 + b)), maximised by mpmath's golden-section search on a bracket found on a grid."""
    e = mpmath.mpf(epsilon.numerator) / epsilon.denominator
    b = mpmath.exp(-e)

    def ratio(alpha):
        a = alpha - 1
        return coordinates * mpmath.log((mpmath.exp(a * e) + b * mpmath.exp(-a * e)) / (1 + b)) / a / alpha

    grid = [1 + mpmath.mpf(10) ** (x / 10) for x in range(-60, 31)]
    i = max(range(len(grid)), key=lambda i: ratio(grid[i]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    for _ in range(200):
        a, c = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        lo, hi = (lo, c) if ratio(a) > ratio(c) else (a, hi)
    return ratio((lo + hi) / 2)


def test_zcdp_certifies_the_closed_form_renyi_supremum():
    law, move = (Fraction(3, 4), 1, 1), (Fraction(1), Fraction(1))
    with mpmath.workdps(40):
        rho = float(_laplace_renyi_over_alpha(law[0], 2))
    assert discrete_renyi_estimate(law, [move]) == pytest.approx(rho, rel=1e-6)
    assert discrete_zcdp(rho * (1 + 1e-4), law, [move])[0]
    assert not discrete_zcdp(rho * (1 - 1e-4), law, [move])[0]
    # here the supremum is the Kullback–Leibler limit α → 1, KL = E_P[ℓ] = 2ε(1 − b)/(1 + b)
    b = mpmath.exp(-0.75)
    assert rho == pytest.approx(float(2 * 0.75 * (1 - b) / (1 + b)), rel=1e-6)


def test_the_tradeoff_kinks_are_the_neyman_pearson_tests_of_the_enumerated_pair():
    # T(α) at α = P[ℓ < l] is 1 − Q[ℓ < l] (reject where the loss is smallest), Q summed directly from p(k − t)
    law, t = (Fraction(3, 4), 3, 2), 4
    with mpmath.workdps(40):
        p, level = _brute(*law)
        losses = sorted({level(k - t) - level(k) for k in p})
        tradeoff = discrete_tradeoff(law, (Fraction(t),))
        for l in losses[1:]:
            alpha = float(mpmath.fsum(mass for k, mass in p.items() if level(k - t) - level(k) < l))
            q_low = float(mpmath.fsum(p.get(k - t, 0) for k in p if level(k - t) - level(k) < l))
            assert tradeoff(np.array([alpha]))[0] == pytest.approx(1 - q_low, abs=1e-12)


def test_gdp_certificate_brackets_the_estimated_mu():
    # the trade-off function itself is checked against the enumerated pair above; here the branch and bound
    # certifies just above the estimate μ(T) = sup_α Φ⁻¹(1 − α) − Φ⁻¹(T(α)) and refuses 1% below it
    law, move = (Fraction(3, 5), 1, 1), (Fraction(1), Fraction(1))
    from dpopt.privacy.gdp_check import mu_of_tradeoff

    mu = mu_of_tradeoff(discrete_tradeoff(law, move))
    assert discrete_gdp(mu * 1.001, law, [move])[0]
    assert not discrete_gdp(mu * 0.99, law, [move])[0]


def test_move_pmf_is_the_convolution_of_enumerated_coordinates():
    law = (Fraction(1, 2), 2, 1)
    with mpmath.workdps(40):
        p, level = _brute(*law)
        per = {}
        for t in (1, 3):
            per[t] = {}
            for k, mass in p.items():
                j = level(k - t) - level(k)
                per[t][j] = per[t].get(j, 0) + mass
        expected = {}
        for (i, x), (j, y) in itertools.product(per[1].items(), per[3].items()):
            expected[i + j] = expected.get(i + j, 0) + x * y
        pmf = discrete_move_pmf(*law, (Fraction(1), Fraction(3)))
        assert max(abs(pmf[j] - expected[j]) for j in expected) < mpmath.mpf(10) ** -38


# ----------------------------------------------------------------- designs
def _two_cells(privacy, sampler=None):
    spec = {"dpopt": 1, "name": "two cells", "data": {"attributes": {"a": ["x", "y"]}, "n": 100},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": "replace_one"},
            "privacy": privacy, "mechanism": "staircase", "utility": {"metric": "l1"}}
    return dict(spec, sampler=sampler) if sampler else spec


def _rejected(certificate) -> bool:
    try:
        return not dpopt.verify(certificate).passed
    except dpopt.errors.CertificateError:
        return True


def test_an_approx_target_on_two_cells_is_exact_on_its_profile_and_rejects_a_forged_epsilon():
    solution = dpopt.solve(_two_cells({"approx": {"epsilon": 1, "delta": 0.01}}))
    assert solution.mechanism.exact_noise
    certificate = solution.certificate.data
    p = certificate["mechanism"]["parameters"]
    assert p["step_units"] == 1  # the discrete Laplace: the only integer step on unit moves
    # the design's δ(1) is the brute-force hockey-stick divergence of its law, and within the target
    law = (Fraction(p["epsilon0_exact"]), 1, 1)
    with mpmath.workdps(40):
        delta = _brute_delta(1.0, law, (1, 1))
    assert delta <= 0.01
    assert Fraction(p["epsilon0_exact"]) > Fraction(1, 2)  # above the ε-DP calibration ε/K = 1/2
    continuous = dpopt.solve(_two_cells({"approx": {"epsilon": 1, "delta": 0.01}}, "floating_point"))
    assert certificate["utility"]["value"] < continuous.certificate.data["utility"]["value"]
    result = dpopt.verify(certificate)
    assert result.passed
    assert [c for c in result.checks if c.claim == "privacy"][0].method.startswith("exact discrete staircase")
    forged = {**certificate, "mechanism": {**certificate["mechanism"], "parameters": {
        **p, "epsilon0_exact": str(Fraction(p["epsilon0_exact"]) * Fraction(11, 10))}}}
    assert _rejected(forged)


@pytest.mark.parametrize("privacy", [{"gdp": {"mu": 1}}, {"zcdp": {"rho": 0.5}}])
def test_gdp_and_zcdp_on_two_integer_cells_are_exact_on_their_profile(privacy):
    # on ℤ the smallest step is 1 (the continuous design's are 1/4 and 1/3): exact is the default, the discrete law is
    # certified on its exact privacy-loss distribution and its cost is stated (tests/test_exact_cost.py)
    solution = dpopt.solve(_two_cells(privacy))
    assert solution.mechanism.exact_noise
    result = dpopt.verify(solution.certificate)
    assert result.passed
    assert [c for c in result.checks if c.claim == "privacy"][0].method.startswith("exact discrete staircase")


def test_the_profile_is_refused_beyond_its_enumeration_and_for_non_integer_shifts():
    from dpopt.privacy.discrete_staircase_profile import MAX_ENUMERATED, profile_feasible

    assert profile_feasible(3, [(Fraction(1), Fraction(8))])
    assert not profile_feasible(3, [(Fraction(1, 2),)])  # a shift off the lattice: the design goes through ε-DP
    assert not profile_feasible(MAX_ENUMERATED, [(Fraction(1),)])
    assert not profile_feasible(3, None)  # moves not listed
