"""Proven quantiles of linear combinations of independent noise (dpopt.certificate.linear_tails) and a plan's joint
design recording, and verify re-deriving, each query's intervals.

References, each independent of the code under test:
* the discrete Laplace pmf P(W = w) = (1 − r)/(1 + r)·r^{|w|}, r = e^{−1/b}: the law of a sum enumerated by brute
  force over every pair/triple of values up to |w| ≤ 400 (the cut mass r^{401}·2/(1 + r) < 1e-80 at b ≤ 2);
* the discrete Laplace as the difference of two i.i.d. geometric variables on {0, 1, …} with success 1 − r
  (numpy's sampler, not dpopt's): P(G₁ − G₂ = w) = (1 − r)²r^{|w|}/(1 − r²) = the pmf above;
* coverage by simulation: with c ≥ 0.95 the true coverage and N draws, the observed mean has s.d. ≤ √(0.95·0.05/N);
  each assertion allows 3 s.d. below 0.95.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt import solve
from dpopt.certificate.linear_tails import half_widths
from dpopt.certificate.per_cell import mapped_per_cell_errors
from dpopt.noise.discrete_laplace import DiscreteLaplaceMarginal
from dpopt.noise.laplace import LaplaceMarginal


def brute_force_quantile(b: float, coefficients: list[int], level: float) -> int:
    """The smallest whole h with P(|Σ c_k W_k| > h) ≤ 1 − level, W_k i.i.d. discrete Laplace(b), enumerated."""
    r = math.exp(-1.0 / b)
    w = np.arange(-400, 401)
    pmf = {0: 1.0}
    single = (1 - r) / (1 + r) * r ** np.abs(w)
    for c in coefficients:
        out: dict = {}
        for z, p in pmf.items():
            for v, q in zip(c * w, single):
                out[int(z + v)] = out.get(int(z + v), 0.0) + p * q
        pmf = {z: p for z, p in out.items() if p > 1e-30}
    h = 0
    while sum(p for z, p in pmf.items() if abs(z) > h) > 1 - level:
        h += 1
    return h


@pytest.mark.parametrize("b, coefficients, level", [(1.0, [1], 0.95), (2.0, [1, 1], 0.95), (1.5, [1, 2], 0.9),
                                                    (0.7, [1, 1, 1], 0.99)])
def test_lattice_convolution_gives_the_exact_quantile(b, coefficients, level):
    marginal = DiscreteLaplaceMarginal(b)
    h, how = half_widths(np.array([coefficients], float), (marginal,) * len(coefficients), level)
    assert h[0] == brute_force_quantile(b, coefficients, level) and "convolution" in how
    # one term: P(|W| > m) = 2r^{m+1}/(1 + r) in closed form
    if len(coefficients) == 1:
        r = math.exp(-1.0 / b)
        assert 2 * r ** (h[0] + 1) / (1 + r) <= 1 - level < 2 * r ** h[0] / (1 + r)


def test_rational_coefficients_are_convolved_on_a_finer_lattice():
    """0.5·W₁ + W₂ = (W₁ + 2W₂)/2: its quantile is half that of W₁ + 2W₂ (brute force)."""
    marginal = DiscreteLaplaceMarginal(1.0)
    h, how = half_widths(np.array([[0.5, 1.0]]), (marginal, marginal), 0.95)
    assert h[0] == brute_force_quantile(1.0, [1, 2], 0.95) / 2 and "convolution" in how


def test_chernoff_bound_is_valid_and_reduces_to_the_sub_gaussian_closed_form():
    """An irrational coefficient: the Chernoff route. The exact 95% quantile of |W₁/√2 + W₂| (W_k discrete Laplace,
    b = 1) by enumerating every pair |w| ≤ 60 (cut mass < 2·2e^{−61} < 1e-25) and sorting: the bound is at least it,
    and within 2× of it; all-Gaussian terms give the closed form √(2v ln(2/(1 − L)))."""
    marginal = DiscreteLaplaceMarginal(1.0)
    c = 1 / math.sqrt(2.0)
    h, how = half_widths(np.array([[c, 1.0]]), (marginal, marginal), 0.95)
    r = math.exp(-1.0)
    w = np.arange(-60, 61)
    pmf = (1 - r) / (1 + r) * r ** np.abs(w)
    z = np.abs(c * w[:, None] + w[None, :]).ravel()
    prob = (pmf[:, None] * pmf[None, :]).ravel()
    order = np.argsort(z)
    exact = z[order][np.searchsorted(np.cumsum(prob[order]), 0.95)]
    assert "Chernoff" in how and exact <= h[0] <= 2 * exact
    from dpopt.noise.gaussian import GaussianMarginal

    g = GaussianMarginal(2.0)
    h, _ = half_widths(np.array([[0.3, 1.0]]), (g, g), 0.95)
    assert h[0] == pytest.approx(math.sqrt(2 * 4.0 * (0.09 + 1.0) * math.log(40.0)), rel=1e-12)


def test_a_law_without_a_moment_bound_is_left_to_the_caller():
    class Bare(LaplaceMarginal):
        def log_mgf_bound(self, s):
            return None

    assert half_widths(np.array([[1.0, 1.0]]), (Bare(1.0), Bare(1.0)), 0.95) is None


def test_mapped_discrete_laplace_intervals_cover_by_simulation():
    """A plan's queries on a 6-cell histogram released with discrete Laplace noise (ε = 0.5): the total, a one-way
    cell, two cells. Each query's noise M·W is an integer combination, so its margin is the exact quantile
    (brute force above); 20,000 draws of W (numpy geometrics, not dpopt's sampler) cover each query's true value
    with probability ≥ 0.95 − 3·√(0.95·0.05/20,000) = 0.9454."""
    spec = {"dpopt": 1, "name": "six cells", "data": {"attributes": {"a": ["x", "y", "z"], "b": ["u", "v"]}},
            "query": {"kind": "contingency_table", "attributes": ["a", "b"]}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 0.5}}, "mechanism": "discrete_laplace"}
    sol = solve(spec)
    b = sol.mechanism.noise_law().marginals[0].b
    m = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]], float)
    block = mapped_per_cell_errors(sol.mechanism, m, ["total", "a=x", "x,u", "z,v"])
    assert "convolution" in block["method"] and "Monte Carlo" not in block["method"]
    h = np.array([c["margin_of_error"] for c in block["cells"]])
    assert h[2] == h[3] == brute_force_quantile(b, [1], 0.95) and h[1] == brute_force_quantile(b, [1, 1], 0.95)
    r = math.exp(-1.0 / b)
    rng = np.random.default_rng(20261206)
    w = rng.geometric(1 - r, (20_000, 6)) - rng.geometric(1 - r, (20_000, 6))
    covered = np.mean(np.abs(w @ m.T) <= h, axis=0)
    assert np.all(covered >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 20_000)), covered
    se = [c["standard_error"] for c in block["cells"]]
    assert se == pytest.approx(np.sqrt(m.sum(axis=1) * 2 * r / (1 - r) ** 2), rel=1e-9)  # E W² = 2r/(1 − r)²
