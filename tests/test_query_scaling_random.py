"""Random normal data (Shoham & Rinott, Sections 3–4): Random DP, H_g / H_f, the four analyses.

Oracles: the paper's Fact thresholds (printed), the digest's independent computation of
Table 1 (``papers/001_query_adjusting.md`` §4.4, computed with numpy/scipy by the digest's
author), Imhof's integral as a second route to the weighted-χ² tail, the paper's theorems
as inequalities on random covariances, and seeded Monte Carlo of the data-generating
process with tolerances derived in comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from dpopt.stats.random_dp import (
    BLOOD_TEST_COVARIANCE,
    TABLE_1,
    RandomDPDesign,
    WeightedChiSquare,
    fact_threshold,
)

EXAMPLES = {ex["example"]: ex for ex in TABLE_1}


def design(example: int, epsilon: float = 1.0) -> RandomDPDesign:
    ex = EXAMPLES[example]
    return RandomDPDesign.create(BLOOD_TEST_COVARIANCE, ex["n"], epsilon, ex["delta"], ex["gamma"])


def imhof_sf(weights, x: float) -> float:
    """P(Σ w_i X_i > x) by Imhof (1961): ½ + (1/π)∫₀^∞ sin θ(u)/(u ρ(u)) du.

    θ(u) = ½Σ arctan(w_i u) − ½xu, ρ(u) = Π(1 + w_i²u²)^{1/4}. The integrand is bounded by
    u^{−1−k/2}/Π√w_i, so the integral is cut at U where that tail is below 1e-10, and [0, U]
    is integrated with 30-point Gauss–Legendre on pieces of a quarter oscillation period.
    """
    w = np.asarray(weights, dtype=float)
    k = w.size
    upper = ((2.0 / k) / (1e-10 * np.prod(np.sqrt(w)))) ** (2.0 / k)
    piece = math.pi / x
    edges = np.arange(0.0, upper + piece, piece)
    nodes, wts = np.polynomial.legendre.leggauss(30)
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * np.diff(edges)
    u = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
    theta = 0.5 * np.arctan(np.outer(u, w)).sum(axis=1) - 0.5 * x * u
    rho = np.prod((1.0 + np.outer(u, w) ** 2) ** 0.25, axis=1)
    values = (np.sin(theta) / (u * rho)).reshape(mid.size, -1)
    return 0.5 + float(np.sum(half * (values @ wts))) / math.pi


# ------------------------------------------------------- weighted χ²
def test_weighted_chi_square_equal_weights_is_a_scaled_chi_square():
    q = WeightedChiSquare([2.0, 2.0, 2.0])
    for x in (0.5, 3.0, 20.0):
        assert q.sf(x) == pytest.approx(stats.chi2.sf(x / 2.0, 3), rel=1e-13)


def test_weighted_chi_square_agrees_with_imhof():
    lam = np.linalg.eigvalsh(BLOOD_TEST_COVARIANCE / 50)
    q = WeightedChiSquare(2.0 * lam / 50)
    for gamma in (0.1, 1e-2, 1e-3):
        x = q.isf(gamma)
        assert q.sf(x) == pytest.approx(gamma, rel=1e-10)
        assert imhof_sf(2.0 * lam / 50, x) == pytest.approx(gamma, rel=1e-6)


def test_weighted_chi_square_agrees_with_monte_carlo():
    # 400,000 draws at a 1% tail: SE = √(0.01·0.99/4e5) = 1.57e-4; tolerance 4 SE
    w = np.array([0.2, 0.5, 1.0, 3.0])
    x = WeightedChiSquare(w).isf(0.01)
    draws = np.random.default_rng(8).chisquare(1, size=(400_000, 4)) @ w
    assert abs(float(np.mean(draws > x)) - 0.01) <= 4 * math.sqrt(0.01 * 0.99 / 400_000)


def test_fact_thresholds_paper():
    # the paper prints 0.062 (k=6), 0.03 (10), 0.005 (20), 0.001 (30); the digest gives 6 decimals
    for k, printed, digest in (
        (6, 0.062, 0.061969),
        (10, 0.03, 0.029253),
        (20, 0.005, 0.004995),
        (30, 0.001, 0.000921),
    ):
        assert fact_threshold(k) == pytest.approx(digest, abs=5e-7)
        assert round(fact_threshold(k), len(str(printed)) - 2) == printed


# ------------------------------------------------------ Table 1 (digest §4.4)
PRIVACY_SETS = {  # example: (r², D(g), D(fg), C, C², λ̄·D(g)²)
    1: (27.856341, 1.055582, 8.899065, 6.874520, 47.259028, 27.577778),
    2: (38.258336, 1.237066, 10.429066, 8.496451, 72.189683, 37.875753),
    3: (38.258336, 1.237066, 10.429066, 8.496451, 72.189683, 37.875753),
    4: (38.258336, 0.874738, 5.214533, 4.248226, 18.047421, 9.468938),
}


@pytest.mark.parametrize("example", [1, 2, 3, 4])
def test_privacy_set_quantities(example):
    d = design(example)
    cond = d.theorem_3_3_condition()
    got = (d.r2, d.d_g, d.d_fg, d.c, cond["c2"], cond["mean_eigenvalue_times_dg2"])
    assert got == pytest.approx(PRIVACY_SETS[example], abs=6e-6)  # digest prints 6 decimals
    assert cond["c2_at_least_mean_eigenvalue_dg2"] and cond["gamma_below_fact_threshold"]


# example, ε: s*, σ_g, σ_fg, σ_f, [a], [b], [c], [d], Vol_g/Vol_fg, Vol_g/Vol_f (digest §4.4)
POWERS = """
1 0.1  0.138465 7.623431 64.269194 49.647896 0.0727 0.0947 0.1120 0.1325 6.542e-3 3.042e-2
1 0.25 0.236834 4.457050 37.575072 29.026710 0.0931 0.1394 0.1768 0.2258 6.963e-3 3.167e-2
1 0.5  0.374200 2.820903 23.781570 18.371242 0.1277 0.2169 0.2870 0.3885 7.957e-3 3.457e-2
1 1    0.606502 1.740444 14.672777 11.334707 0.2026 0.3666 0.4759 0.6499 1.090e-2 4.280e-2
1 2    0.992771 1.063269 8.963867 6.924580 0.3605 0.5825 0.6933 0.8743 2.038e-2 6.656e-2
1 3    1.323127 0.797794 6.725785 5.195663 0.5033 0.7048 0.7952 0.9383 3.421e-2 9.698e-2
1 5    1.889712 0.558594 4.709217 3.637866 0.7044 0.8237 0.8835 0.9721 7.165e-2 1.668e-1
1 10   3.018472 0.349707 2.948202 2.277484 0.8952 0.9182 0.9472 0.9862 1.864e-1 3.337e-1
2 0.1  0.049158 25.165256 212.155216 172.840647 0.0559 0.0614 0.0642 0.0690 6.347e-3 2.169e-2
2 0.25 0.107057 11.555199 97.415889 79.363711 0.0634 0.0772 0.0846 0.0979 6.421e-3 2.187e-2
2 0.5  0.194520 6.359571 53.614246 43.678968 0.0764 0.1062 0.1232 0.1558 6.637e-3 2.241e-2
2 1    0.353741 3.497098 29.482215 24.018854 0.1047 0.1742 0.2146 0.2999 7.371e-3 2.421e-2
2 2    0.639222 1.935268 16.315238 13.291855 0.1715 0.3269 0.4066 0.5893 9.958e-3 3.033e-2
2 3    0.897824 1.377850 11.615940 9.463386 0.2483 0.4649 0.5579 0.7729 1.404e-2 3.944e-2
2 5    1.363343 0.907378 7.649630 6.232074 0.4088 0.6522 0.7338 0.9151 2.680e-2 6.529e-2
2 10   2.345800 0.527354 4.445845 3.621984 0.7067 0.8388 0.8844 0.9750 8.099e-2 1.562e-1
4 0.1  0.040803 21.438174 127.798319 104.115961 0.0644 0.0820 0.0911 0.1069 6.355e-3 2.171e-2
4 0.25 0.091612 9.548285 56.919719 46.371903 0.0867 0.1405 0.1710 0.2274 6.464e-3 2.198e-2
4 0.5  0.169670 5.155521 30.733349 25.038140 0.1313 0.2726 0.3530 0.4983 6.800e-3 2.281e-2
4 1    0.313902 2.786656 16.611953 13.533585 0.2486 0.5867 0.7241 0.8971 7.999e-3 2.573e-2
4 2    0.576585 1.517103 9.043830 7.367914 0.5412 0.9307 0.9765 0.9990 1.253e-2 3.614e-2
4 3    0.817556 1.069942 6.378194 5.196248 0.7835 0.9907 0.9979 1.0000 2.017e-2 5.225e-2
4 5    1.256376 0.696239 4.150457 3.381334 0.9713 0.9997 0.9999 1.0000 4.503e-2 9.830e-2
4 10   2.196522 0.398238 2.373995 1.934069 0.9999 1.0000 1.0000 1.0000 1.450e-1 2.464e-1
"""
EXAMPLE_3_POWERS = {  # ε: [a], [b], [c], [d]; σ's as example 2
    0.1: (0.0584, 0.0678, 0.0725, 0.0803),
    0.25: (0.0695, 0.0946, 0.1078, 0.1315),
    0.5: (0.0895, 0.1478, 0.1806, 0.2424),
    1: (0.1358, 0.2817, 0.3619, 0.5120),
    2: (0.2521, 0.5682, 0.6916, 0.8753),
    3: (0.3861, 0.7677, 0.8633, 0.9734),
    5: (0.6367, 0.9301, 0.9665, 0.9979),
    10: (0.9299, 0.9909, 0.9959, 0.9999),
}


def _rows():
    for line in POWERS.strip().splitlines():
        ex, eps, *values = line.split()
        yield int(ex), float(eps), [float(v) for v in values]


@pytest.mark.parametrize("example", [1, 2, 4])
def test_table_1_sigmas_powers_and_volume_ratios(example):
    base = design(example)
    for ex, eps, values in _rows():
        if ex != example:
            continue
        d = base.at_epsilon(eps)
        s, sg, sfg, sf, a, b, c, dd, r_fg, r_f = values
        assert (d.s_star, d.sigma_g, d.sigma_fg, d.sigma_f) == pytest.approx((s, sg, sfg, sf), abs=6e-6), eps
        p = d.powers(EXAMPLES[example]["eta"])
        assert (p.naive_f, p.optimal_fg, p.optimal_f, p.adjusted_g) == pytest.approx(
            (a, b, c, dd), abs=5.1e-5
        ), eps
        assert d.volume_ratios() == pytest.approx((r_fg, r_f), rel=6e-4), eps  # 4 significant digits


def test_table_1_example_3_powers():
    base = design(3)
    for eps, expected in EXAMPLE_3_POWERS.items():
        p = base.at_epsilon(eps).powers(EXAMPLES[3]["eta"])
        assert (p.naive_f, p.optimal_fg, p.optimal_f, p.adjusted_g) == pytest.approx(expected, abs=5.1e-5), (
            eps
        )


def test_orderings_of_the_paper_hold_on_the_examples():
    # Thm 3.3(3)-(4) and 3.4(3): Vol_g ≤ Vol_fg, Vol_g ≤ Vol_f, π_g ≥ π_fg; Section 3.3: σ_f ≤ σ_fg
    for ex in (1, 2, 3, 4):
        base = design(ex)
        for eps in (0.1, 1.0, 10.0):
            d = base.at_epsilon(eps)
            p = d.powers(EXAMPLES[ex]["eta"])
            assert max(d.volume_ratios()) < 1.0
            assert p.adjusted_g > p.optimal_fg and p.optimal_f > p.optimal_fg and d.sigma_f < d.sigma_fg
            assert p.super_naive_size > 0.05  # the super-naive test's size is wrong (too large)


def test_c_scales_as_one_over_n():
    # ‖f(S)−f(S′)‖² ~ Σ (2λ_i(Σ)/n²) X_i, so C ∝ 1/n (digest: C(n=100) = C(n=50)/2)
    assert design(4).c == pytest.approx(design(2).c / 2.0, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_theorems_on_random_covariances(seed):
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(4, 4))
    cov = root @ root.T + 0.1 * np.eye(4)
    gamma = 1e-3  # below 1 − F_{χ²_4}(8) = 0.0916, so Thm 3.3(4) applies
    d = RandomDPDesign.create(cov, 30, 1.0, 1e-5, gamma)
    assert d.sigma_fg**2 == pytest.approx(d.eigenvalues.max() * d.sigma_g**2, rel=1e-12)  # Lemma 3.2
    assert d.c <= d.d_fg
    assert d.c**2 >= d.eigenvalues.mean() * d.d_g**2
    r_fg, r_f = d.volume_ratios()
    assert r_fg <= 1.0 and r_f <= 1.0
    eta = rng.normal(size=4)
    p = d.powers(eta)
    assert p.adjusted_g >= p.optimal_fg
    inv_root, root_ = d.whitening()
    assert inv_root @ d.sigma_n @ inv_root == pytest.approx(np.eye(4), abs=1e-10)
    assert inv_root @ root_ == pytest.approx(np.eye(4), abs=1e-10)


# ------------------------------------------------------------ Monte Carlo
def test_privacy_sets_have_probability_one_minus_gamma():
    # neighbours replace the last of n iid rows by a fresh one: Δf = (S_n − S_{n+1})/n.
    # 400,000 pairs at γ = 0.01: SE = √(0.01·0.99/4e5) = 1.57e-4; tolerance 4 SE.
    d = RandomDPDesign.create(BLOOD_TEST_COVARIANCE, 50, 1.0, 0.02, 0.01)
    rng = np.random.default_rng(11)
    mean = np.array([200.0, 50.0, 140.0, 120.0, 600.0, 90.0])  # μ* cancels in Δf
    rows = rng.multivariate_normal(mean, BLOOD_TEST_COVARIANCE, size=(400_000, 2))
    diff = (rows[:, 0] - rows[:, 1]) / 50
    tol = 4 * math.sqrt(0.01 * 0.99 / 400_000)
    assert abs(float(np.mean(d.in_h_g(diff))) - 0.99) <= tol
    assert abs(float(np.mean(d.in_h_f(diff))) - 0.99) <= tol


def test_size_power_and_coverage_by_simulating_the_data_example_1():
    # Example 1 at ε = 1: 20,000 datasets of n = 50 rows under each hypothesis; each statistic
    # is computed from its definition here (not from RandomDPDesign.powers). Tolerance 4 SE of a
    # proportion, ≤ 4·√(0.25/20000) = 0.0141.
    ex = EXAMPLES[1]
    d = design(1)
    reps, n, k = 20_000, ex["n"], 6
    eta = np.asarray(ex["eta"], dtype=float)
    rng = np.random.default_rng(5)
    chol = np.linalg.cholesky(BLOOD_TEST_COVARIANCE)
    prec = np.linalg.inv(d.sigma_n)
    z = special.ndtri(0.95)
    a, b = float(eta @ prec @ eta), float(np.sum((prec @ eta) ** 2))
    inv_root, root = d.whitening()
    expected = d.powers(eta)
    rates = {}
    for hyp, mu in (("H0", np.zeros(k)), ("H1", eta)):
        f = mu + (rng.normal(size=(reps, n, k)) @ chol.T).mean(axis=1)
        m_g = (f @ inv_root + rng.normal(0.0, d.sigma_g, (reps, k))) @ root  # Σ_n^{1/2} M_g
        m_fg = f + rng.normal(0.0, d.sigma_fg, (reps, k))
        m_f = f + rng.normal(0.0, d.sigma_f, (reps, k))
        lr = {}
        for name, m, cov in (
            ("g", m_g, (1 + d.sigma_g**2) * d.sigma_n),
            ("fg", m_fg, d.sigma_n + d.sigma_fg**2 * np.eye(k)),
            ("f", m_f, d.sigma_n + d.sigma_f**2 * np.eye(k)),
        ):
            u = np.linalg.solve(cov, eta)
            lr[name] = np.mean(m @ u > z * math.sqrt(eta @ u))
            if hyp == "H0":  # coverage of the 95% region for μ* = 0
                q = np.einsum("ij,jk,ik->i", m, np.linalg.inv(cov), m)
                rates[f"cover_{name}"] = np.mean(q <= stats.chi2.isf(0.05, k))
        naive = np.mean(m_f @ prec @ eta > z * math.sqrt(a + d.sigma_f**2 * b))
        rates[hyp] = (naive, lr["fg"], lr["f"], lr["g"])
    tol = 4 * math.sqrt(0.25 / reps)
    assert rates["H0"] == pytest.approx((0.05,) * 4, abs=4 * math.sqrt(0.05 * 0.95 / reps))
    assert rates["H1"] == pytest.approx(
        (expected.naive_f, expected.optimal_fg, expected.optimal_f, expected.adjusted_g), abs=tol
    )
    for name in ("g", "fg", "f"):
        assert abs(rates[f"cover_{name}"] - 0.95) <= 4 * math.sqrt(0.95 * 0.05 / reps)


def test_release_method_matches_the_stated_laws():
    # the library's own release() for a fixed f: its covariance is the noise part of the law,
    # σ_g²Σ_n for g (Σ_n^{1/2}·N(0, σ_g²I)) and σ_f²I for f. 20,000 releases each; an entry of a
    # sample covariance has SE ≤ max variance·√(2/n): tolerance 5 SE.
    d = design(1)
    rng = np.random.default_rng(9)
    f = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    draws = np.array([d.release(f, "g", rng) for _ in range(20_000)])
    expected = d.sigma_g**2 * d.sigma_n  # the noise part of (1+σ_g²)Σ_n (f is fixed here)
    assert np.cov(draws.T) == pytest.approx(
        expected, abs=5 * float(np.abs(expected).max()) * math.sqrt(2 / 20_000)
    )
    draws = np.array([d.release(f, "f", rng) for _ in range(20_000)])
    assert np.var(draws, axis=0) == pytest.approx(np.full(6, d.sigma_f**2), rel=5 * math.sqrt(2 / 20_000))
