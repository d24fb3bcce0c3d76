"""The adaptive selection's pieces: the budget split, ε of the exponential mechanism, Kruskal's candidates,
and the sampler's law. Expected values are derived by hand in the comments (or by the definition of the
exponential mechanism), never copied from the code's output."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from conftest import ROOT

from dpopt.spec.synthesis import load_synthesis_spec
from dpopt.synthesis.adaptive import SCORE_BITS, candidates, exponential_mechanism, independent_table
from dpopt.synthesis.budget import budget_block, decimal_below, em_epsilon


def test_decimal_below_is_the_largest_twelve_digit_decimal_not_above():
    assert decimal_below(Fraction(1, 30)) == "0.0333333333333"  # 1/30 = 0.0333…, 12 significant digits, down
    assert decimal_below(Fraction(2, 3)) == "0.666666666666"  # rounded down, not to …667
    assert decimal_below(Fraction(1, 4)) == "0.25"  # exact decimals stay as they are


def test_em_epsilon_meets_rho_exactly_and_is_sqrt_8_rho():
    for rho in ("0.0025641025641", "0.5", "1e-06"):
        eps = em_epsilon(rho)
        assert Fraction(eps) ** 2 / 8 <= Fraction(rho)  # ε²/8-zCDP (Cesar & Rogers 2021) within the round's ρ
        assert abs(eps - math.sqrt(8 * float(rho))) <= 4 * math.ulp(eps)  # at most a few steps below √(8ρ)


def test_adaptive_budget_of_the_adult_spec_sums_exactly_below_the_target():
    spec = load_synthesis_spec(ROOT / "specs" / "synthesize_adult.yaml")
    block = budget_block(spec)
    # rho = 1/10 in thirds; 13 rounds (14 attributes, a spanning tree) share 1/30: 1/390 = 0.00256410256410…
    rhos = [p["rho"] for p in block["parts"]]
    assert rhos == ["0.0333333333333"] + ["0.0025641025641"] * 13 + ["0.0333333333333"]
    total = 2 * Fraction("0.0333333333333") + 13 * Fraction("0.0025641025641")
    assert Fraction(block["total"]["rho"]) == total < Fraction(1, 10)


def test_candidates_join_two_components():
    attributes = ["a", "b", "c", "d"]
    pairs = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")]
    assert candidates(attributes, pairs, []) == pairs
    # with a–b and b–c chosen, a, b, c are one component: only c–d joins two
    assert candidates(attributes, pairs, [("a", "b"), ("b", "c")]) == [("c", "d")]


def test_independent_table_is_the_product_of_the_published_margins():
    table = independent_table({"a": np.array([30.0, 10.0]), "b": np.array([20.0, 20.0])}, "a", "b")
    assert np.array_equal(table, [[15.0, 15.0], [5.0, 5.0]])  # 40 · (3/4, 1/4)ᵀ(1/2, 1/2)


def test_the_exponential_mechanism_draws_its_law():
    """Integer scores (0, 2, 4)·2^K, ε′ = 1, Δ = 1: P(i) ∝ exp(q_i/2) = (1, e, e²)/(1 + e + e²) =
    (0.090, 0.245, 0.665). 5,000 draws: each frequency within 4 standard errors √(p(1−p)/5000) ≤ 0.0067 (a
    two-sided 4σ band fails with probability < 10⁻⁴ per option), fixed seed. (The law is enumerated exactly in
    tests/test_exact_selection.py.)"""
    rng = np.random.default_rng(20261206)
    q = np.array([0.0, 2.0, 4.0])
    draws = np.array([exponential_mechanism([int(x) << SCORE_BITS for x in q], Fraction(1), 1, rng)
                      for _ in range(5_000)])
    law = np.exp(q / 2) / np.exp(q / 2).sum()
    freq = np.bincount(draws, minlength=3) / draws.size
    assert np.all(np.abs(freq - law) <= 4 * np.sqrt(law * (1 - law) / draws.size))
