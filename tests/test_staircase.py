"""The staircase mechanism: closed forms against Geng & Viswanath and numerical integration,
the sampler, the exact per-coordinate privacy, and the spec pipeline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import dpopt
from dpopt.mechanisms.staircase import (
    StaircaseMechanism,
    l1_optimal_g,
    l2_optimal_g,
    steps_per_shift,
    usefulness_optimal_g,
)
from dpopt.noise.staircase import StaircaseNoise
from dpopt.sensitivity.patterns import shift_pattern


def numeric_moment(noise: StaircaseNoise, p: float) -> float:
    """E|X|^p by adaptive quadrature of the density, one piece per half-step (independent
    of the closed forms: only the density is used)."""
    d, g = noise.step, noise.g
    total = 0.0
    for k in range(int(60 / noise.epsilon0) + 40):
        for lo, hi in ((k * d, (k + g) * d), ((k + g) * d, (k + 1) * d)):
            if hi > lo:
                mid = (lo + hi) / 2
                total += 2 * integrate.quad(lambda x: x**p, lo, hi)[0] * float(noise.density(mid))
    return total


# ------------------------------------------------------- Geng & Viswanath optima
def test_l1_and_l2_optimal_steps_at_epsilon_1():
    # digest 004 §4.2 / T10 (standard G&V results, verified there): ε = 1, Δ = 1
    g1 = l1_optimal_g(1.0)
    g2 = l2_optimal_g(1.0)
    assert g1 == pytest.approx(0.377541, abs=1e-6)
    assert g2 == pytest.approx(0.416737, abs=1e-6)
    # G&V closed forms of the minima
    b = math.exp(-1.0)
    l1_min = math.exp(0.5) / (math.exp(1.0) - 1)
    l2_min = (2 ** (-2 / 3) * b ** (2 / 3) * (1 + b) ** (2 / 3) + b) / (1 - b) ** 2
    assert l1_min == pytest.approx(0.959517, abs=1e-6)
    assert l2_min == pytest.approx(1.918104, abs=1e-6)
    for g, p, target in ((g1, 1, l1_min), (g2, 2, l2_min)):
        noise = StaircaseNoise(1.0, 1.0, g)
        assert noise.abs_moment(p) == pytest.approx(target, rel=1e-12)  # series closed form
        assert numeric_moment(noise, p) == pytest.approx(target, rel=1e-9)  # numerical integration


@pytest.mark.parametrize("eps, g1, l1, g2, l2sq", [
    (3.0, 0.182426, 0.234821, 0.259906, 0.152674),  # digest T11
    (6.0, 0.047426, 0.049911, 0.105287, 0.014106),
])
def test_optima_at_other_epsilons(eps, g1, l1, g2, l2sq):
    assert l1_optimal_g(eps) == pytest.approx(g1, abs=1e-6)
    assert l2_optimal_g(eps) == pytest.approx(g2, abs=1e-6)
    assert StaircaseNoise(eps, 1.0, g1).abs_moment(1) == pytest.approx(l1, abs=2e-6)
    assert StaircaseNoise(eps, 1.0, l2_optimal_g(eps)).abs_moment(2) == pytest.approx(l2sq, abs=1e-6)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_closed_form_optimal_g_minimises_the_cost(eps):
    # the G&V formulas for g* against a numerical minimisation of the closed-form cost
    for p, g_star in ((1, l1_optimal_g(eps)), (2, l2_optimal_g(eps))):
        res = optimize.minimize_scalar(lambda g: StaircaseNoise(eps, 1.0, g).abs_moment(p),
                                       bounds=(0, 1), method="bounded", options={"xatol": 1e-10})
        assert res.x == pytest.approx(g_star, abs=1e-5)


def test_general_moment_series_matches_integration():
    noise = StaircaseNoise(1.3, 0.7, 0.4)
    for p in (1, 2, 1.5, 3):
        assert noise.abs_moment(p) == pytest.approx(numeric_moment(noise, p), rel=1e-8)


# --------------------------------------------------------------- usefulness
def test_usefulness_closed_form_and_optimality():
    # γ ≤ Δ: g = γ/Δ gives U = r(1−b)/(r + (1−r)b) (digest §4.2), T17: 0.936473 at ε = 5, r = 0.1
    eps, r = 5.0, 0.1
    noise = StaircaseNoise(eps, 1.0, usefulness_optimal_g(eps, 1.0, r))
    b = math.exp(-eps)
    assert noise.usefulness(r) == pytest.approx(r * (1 - b) / (r + (1 - r) * b), rel=1e-12)
    assert noise.usefulness(r) == pytest.approx(0.936473, abs=1e-6)
    # no other g does better (G&V: the staircase with g = γ/Δ is optimal for the 0/1 loss)
    for g in np.linspace(0, 1, 21):
        assert StaircaseNoise(eps, 1.0, g).usefulness(r) <= noise.usefulness(r) + 1e-12


def test_tail_is_the_integral_of_the_density():
    noise = StaircaseNoise(0.8, 1.5, 0.3)
    jumps = np.sort(np.concatenate([np.arange(0, 300, 1.5), np.arange(0, 300, 1.5) + 0.45]))
    total = 2 * sum(integrate.quad(lambda x: float(noise.density(x)), a, b)[0] for a, b in zip(jumps[:-1], jumps[1:]))
    assert total == pytest.approx(1.0, abs=1e-10)
    for x in (0.0, 0.2, 0.45, 1.5, 2.3, 7.0):
        pieces = np.union1d(jumps, [x])
        pieces = pieces[pieces >= x]
        tail = sum(integrate.quad(lambda y: float(noise.density(y)), a, b)[0] for a, b in zip(pieces[:-1], pieces[1:]))
        assert float(noise.tail(x)) == pytest.approx(tail, rel=1e-9, abs=1e-15)


# ------------------------------------------------------------------ sampler
def test_sampler_matches_the_law():
    noise = StaircaseNoise(2.0, 1.0, 0.3)
    x = noise.sample(np.random.default_rng(11), 400_000)

    def cdf(v):
        v = np.asarray(v, dtype=float)
        return np.where(v >= 0, 1 - noise.tail(v), noise.tail(-v))

    assert stats.kstest(x, cdf).pvalue > 0.01  # fixed seed
    n = x.size
    for p in (1, 2):
        est = np.abs(x) ** p
        se = est.std(ddof=1) / math.sqrt(n)
        assert abs(est.mean() - noise.abs_moment(p)) < 4 * se  # 4 standard errors
    hit = (np.abs(x) <= 0.4).mean()
    u = noise.usefulness(0.4)
    assert abs(hit - u) < 4 * math.sqrt(u * (1 - u) / n)


# ------------------------------------------------------------------ privacy
def test_density_ratio_costs_one_epsilon_per_step_crossed():
    # brute force on a grid: sup_x ln f(x) − ln f(x + s) = ε₀⌈s/Δ₀⌉ (module docstring)
    noise = StaircaseNoise(0.7, 1.0, 0.35)
    x = np.linspace(-12, 12, 240_001) + math.pi * 1e-6  # off the step boundaries (see below)
    for s in (0.05, 0.5, 1.0, 1.2, 2.0, 2.5):
        loss = np.max(np.abs(np.log(noise.density(x)) - np.log(noise.density(x + s))))
        assert loss == pytest.approx(0.7 * math.ceil(s / 1.0), abs=1e-12)


def _space(query, adjacency="replace_one", **data):
    spec = dpopt.load_spec({"dpopt": 1, "name": "t", "data": {"attributes": data}, "query": query,
                            "adjacency": adjacency, "privacy": {"pure": {"epsilon": 1.0}}})
    return dpopt.derive(spec)


def test_vector_budget_is_steps_crossed_not_l1():
    # histogram under replace-one: v = e_i − e_j moves two cells by 1
    pattern = shift_pattern(_space({"kind": "histogram", "attribute": "a"}, a=["x", "y", "z"]))
    assert steps_per_shift(pattern, 1.0) == 2
    # the Laplace-style budget (step Δ₁ = 2, ε₀ = ε) would pay ⌈1/2⌉ = 1 per moved cell: 2ε, not ε
    assert steps_per_shift(pattern, 2.0) == 2
    assert steps_per_shift(pattern, 0.5) == 4
    # a linear query with unequal entries: columns (1, 0), (0.5, 1), (0, 2)
    lin = shift_pattern(_space({"kind": "linear", "attribute": "a", "matrix": [[1, 0.5, 0], [0, 1, 2]]},
                               adjacency="add_remove", a=["x", "y", "z"]))
    assert steps_per_shift(lin, 1.0) == 2  # max(1, 1 + 1, 2)
    assert steps_per_shift(lin, 2.0) == 2  # (0.5, 1) still moves two coordinates
    assert steps_per_shift(lin, 0.5) == 4


def test_vector_loss_is_attained_coordinatewise():
    # two independent coordinates with shift (1, −1): the product density's log-ratio is the
    # sum of the coordinates' (they can be maximised separately), so ε = 2ε₀ exactly
    noise = StaircaseNoise(0.9, 1.0, 0.4)
    # offset so that no grid point sits on a step boundary (where x and x + 1 would round
    # to different sides of the jump in floating point)
    x = np.linspace(-6, 6, 12_001) + math.pi * 1e-5
    best1 = np.max(np.log(noise.density(x)) - np.log(noise.density(x + 1)))
    best2 = np.max(np.log(noise.density(x)) - np.log(noise.density(x - 1)))
    assert best1 + best2 == pytest.approx(2 * 0.9, abs=1e-12)


# ---------------------------------------------------------------- pipeline
def _spec(**overrides):
    # the continuous law (sampler: floating_point); its exact lattice measurement: tests/test_staircase_lattice.py
    spec = {"dpopt": 1, "name": "staircase test",
            "data": {"attributes": {"race": ["w", "b", "o"], "income": {"min": 0, "max": 1000}}, "n": 100},
            "query": {"kind": "histogram", "attribute": "race"}, "adjacency": "replace_one",
            "privacy": {"pure": {"epsilon": 2.0}}, "mechanism": "staircase", "utility": {"metric": "l1"},
            "sampler": "floating_point"}
    spec.update(overrides)
    return spec


def test_scalar_spec_solves_verifies_and_predicts():
    sol = dpopt.solve(_spec(query={"kind": "sum", "attribute": "income"}, privacy={"pure": {"epsilon": 1.0}}))
    mech = sol.mechanism
    assert mech.family == "staircase"
    assert mech.parameters["g"] == pytest.approx(0.377541, abs=1e-6)
    assert mech.parameters["step"] == 1000.0
    assert sol.certificate["utility"]["value"] == pytest.approx(959.517, abs=1e-3)  # 1000 × 0.959517
    assert dpopt.verify(sol.certificate).passed


def test_vector_spec_spends_half_the_budget_per_cell():
    sol = dpopt.solve(_spec(utility={"metric": "usefulness", "gamma": 0.5}))
    p = sol.mechanism.parameters
    assert p["epsilon0"] * 2 <= 2.0 and p["step"] == 1.0 and p["g"] == 0.5
    assert any(c["claim"] == "privacy" and "K = 2" in c["detail"] for c in sol.certificate["checks"])
    assert dpopt.verify(sol.certificate).passed


def test_release_has_the_query_shape():
    sol = dpopt.solve(_spec(utility={"metric": "l2"}))
    out = sol.mechanism.release([50.0, 30.0, 20.0], rng=np.random.default_rng(0))
    assert out.shape == (3,)


def test_tampered_certificate_fails():
    sol = dpopt.solve(_spec())
    data = sol.certificate.data
    data["mechanism"]["parameters"]["epsilon0"] = 1.5  # 2 × 1.5 = 3 > ε = 2
    result = dpopt.verify(data)
    assert not result.passed
    assert "privacy" in {c.claim for c in result.failed}


@pytest.mark.parametrize("overrides, reason", [
    ({"adjacency": {"kind": "hamming", "distance": 2}}, "generators of its hull"),
])
def test_unsupported_specs_say_why(overrides, reason):
    assert reason in StaircaseMechanism.supports(dpopt.compile(_spec(**overrides)))
