"""(ε, δ)-probabilistic DP: Gaussian (Lemma 10 / Eq. 18), GG closed form (Corollary 8),
Monte Carlo (Corollary 7), and the pdp target through the pipeline.

Expected values: the digest of Liu (2019) (``papers/002_generalized_gaussian.md`` §4, §9.2),
numerical integration over the noise density (scipy.integrate.quad), and independent
derivations stated next to each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_spec
from scipy import integrate, optimize, stats

import dpopt
from dpopt.errors import CalibrationError
from dpopt.privacy.pdp import (
    PDP_CAVEAT,
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    clopper_pearson_upper,
    gaussian_calibrations,
    gaussian_pdp_bound,
    gaussian_pdp_level,
    gaussian_pdp_sigma,
    gaussian_pdp_sigma_exact,
    gg_pdp_bound_disjoint_mp,
    gg_pdp_level_scalar,
    gg_pdp_monte_carlo,
    gg_pdp_scale_disjoint,
    gg_pdp_scale_monte_carlo,
    gg_pdp_scale_scalar_exact,
)

# digest §4.4 table (Δ₂ = 1): (ε, δ) -> σ from Eq. 18
EQ18 = {
    (0.1, 0.01): 25.950964,
    (0.1, 0.05): 19.851510,
    (0.1, 0.10): 16.747096,
    (0.1, 0.25): 11.922856,
    (0.5, 0.01): 5.338961,
    (0.5, 0.05): 4.160296,
    (1.0, 0.01): 2.757174,
    (1.0, 0.05): 2.188437,
    (1.0, 0.25): 1.486671,
    (2.0, 0.01): 1.459237,
    (2.0, 0.25): 0.864394,
}


@pytest.mark.parametrize("target", EQ18, ids=[f"eps{e}-delta{d}" for e, d in EQ18])
def test_eq18_sigma_matches_digest(target):
    sigma = gaussian_pdp_sigma(*target, 1.0)
    assert sigma == pytest.approx(EQ18[target], abs=1e-6)
    assert gaussian_pdp_bound(sigma, target[0], 1.0) <= target[1]


def test_eq18_scales_with_sensitivity_and_is_monotone():
    assert gaussian_pdp_sigma(1.0, 0.05, 3.0) == pytest.approx(3 * 2.188437, abs=3e-6)
    sigmas_eps = [gaussian_pdp_sigma(e, 0.05, 1.0) for e in (0.1, 0.5, 1.0, 2.0)]
    sigmas_delta = [gaussian_pdp_sigma(1.0, d, 1.0) for d in (0.01, 0.05, 0.1, 0.25)]
    assert all(np.diff(sigmas_eps) < 0) and all(np.diff(sigmas_delta) < 0)  # digest §9.2 case 14


def test_lemma10_bound_against_numerical_integration():
    # at σ from Eq. 18 the Lemma 10 event {2|λ|Δ + Δ² > 2εσ²}, λ ~ N(0, σ²), has probability δ
    eps, delta = 0.5, 0.1
    sigma = gaussian_pdp_sigma(eps, delta, 1.0)
    cut = (2 * eps * sigma**2 - 1.0) / 2.0
    mass = 2 * integrate.quad(lambda x: stats.norm.pdf(x, scale=sigma), cut, np.inf)[0]
    assert mass == pytest.approx(delta, rel=1e-7)


def test_exact_gaussian_pdp_level_and_tight_sigma():
    # digest §4.4 tightness table: exact Pr(|L|>ε) at σ_pDP, and the tight σ
    assert gaussian_pdp_level(2.188437, 1.0, 1.0) == pytest.approx(0.032826, abs=1e-6)
    assert gaussian_pdp_level(25.950964, 0.1, 1.0) == pytest.approx(0.009470, abs=1e-6)
    assert gaussian_pdp_sigma_exact(1.0, 0.05, 1.0) == pytest.approx(2.018642, abs=1e-6)
    assert gaussian_pdp_sigma_exact(2.0, 0.25, 1.0) == pytest.approx(0.714052, abs=1e-6)
    # independent route: the loss of N(0, σ²) noise is L = (2eΔ + Δ²)/(2σ²) (e the noise); integrate |L| > ε
    sigma, eps = 2.0, 1.0
    lo, hi = (-2 * eps * sigma**2 - 1) / 2, (2 * eps * sigma**2 - 1) / 2
    mass = stats.norm.cdf(lo, scale=sigma) + stats.norm.sf(hi, scale=sigma)
    assert gaussian_pdp_level(sigma, eps, 1.0) == pytest.approx(mass, rel=1e-12)


def test_classical_and_analytic_comparison():
    # digest §9.2 case 4: Eq. 19 at (0.5, 0.05) and the ratio pDP/aDP
    assert classical_gaussian_sigma(0.5, 0.05, 1.0) == pytest.approx(5.074545, abs=1e-6)
    assert gaussian_pdp_sigma(0.5, 0.05, 1.0) / classical_gaussian_sigma(0.5, 0.05, 1.0) == pytest.approx(
        0.819836, abs=1e-6
    )
    with pytest.raises(CalibrationError, match="epsilon < 1"):
        classical_gaussian_sigma(1.5, 0.05, 1.0)
    table = gaussian_calibrations(1.0, 0.05)
    assert table["adp_classical"] is None
    assert table["pdp_exact"] < table["pdp_lemma10"]
    # the analytic Gaussian is exact for (ε, δ)-DP; the classical bound is above it (ε < 1)
    assert analytic_gaussian_sigma(0.5, 0.05, 1.0) < classical_gaussian_sigma(0.5, 0.05, 1.0)


# ---------------------------------------------------------------------- GG, Corollary 8
@pytest.mark.parametrize(
    "p, eps, delta, digest",
    [
        (2, 1.0, 0.05, 3.094918),
        (3, 1.0, 0.05, 4.662445),
        (4, 1.0, 0.05, 5.866930),
        (5, 1.0, 0.05, 6.842206),
        (3, 0.5, 0.01, 12.508590),
        (3, 2.0, 0.25, 1.657867),
        (3, 0.5, 0.25, 4.360001),
    ],
)
def test_corollary8_closed_form_matches_digest(p, eps, delta, digest):
    assert gg_pdp_scale_disjoint(eps, delta, p, 1.0) == pytest.approx(digest, abs=1e-6)


@pytest.mark.parametrize("eps, delta", [(0.1, 0.01), (0.5, 0.05), (1.0, 0.05), (2.0, 0.25)])
def test_gg_at_p2_reproduces_the_gaussian_pdp_bound(eps, delta):
    # digest §4.2: for p = 2, q = z²/2 and the closed form is Lemma 10 exactly (b = √2 σ)
    b = gg_pdp_scale_disjoint(eps, delta, 2, 1.0)
    assert b == pytest.approx(math.sqrt(2) * gaussian_pdp_sigma(eps, delta, 1.0), rel=1e-12)


@pytest.mark.parametrize("p", (1.5, 3, 4))
def test_corollary8_against_numerical_integration(p):
    # the bound's event {(|e|+Δ)^p − |e|^p > εb^p} = {|e| > t*}: integrate the GG density beyond t*
    eps, delta = 1.0, 0.05
    b = gg_pdp_scale_disjoint(eps, delta, p, 1.0)
    t_star = optimize.brentq(lambda t: (t + 1) ** p - t**p - eps * b**p, 0, 100 * b)
    density = stats.gennorm(p, scale=b).pdf
    mass = 2 * integrate.quad(density, t_star, np.inf)[0]
    assert mass == pytest.approx(delta, rel=1e-7)
    assert gg_pdp_bound_disjoint_mp(b, eps, p, 1.0) <= delta


def test_corollary8_is_monotone_in_p_for_small_delta():
    # digest §9.2 case 14 (true for δ ≤ 0.1, not universal): b grows with p
    for eps in (0.1, 1.0, 5.0):
        for delta in (1e-4, 0.01, 0.1):
            scales = [gg_pdp_scale_disjoint(eps, delta, p, 1.0) for p in (2, 3, 4, 5)]
            assert all(np.diff(scales) > 0)
    # the exception the digest records: ε = 0.1, δ = 0.25 (16.861, 17.508, 16.548, 15.190)
    exception = [gg_pdp_scale_disjoint(0.1, 0.25, p, 1.0) for p in (2, 3, 4, 5)]
    np.testing.assert_allclose(exception, [16.861465, 17.508, 16.548, 15.190], atol=1e-3)


def test_exact_scalar_gg_level():
    # digest §4.4: exact scalar pDP level at the Corollary 8 scale, and the tight b
    assert gg_pdp_level_scalar(4.662445, 1.0, 3, 1.0) == pytest.approx(0.032105, abs=2e-6)
    assert gg_pdp_level_scalar(5.866930, 1.0, 4, 1.0) == pytest.approx(0.031614, abs=2e-6)
    # p = 2: the exact scalar level is the Gaussian one (σ = b/√2), an independent closed form
    b = 3.0
    assert gg_pdp_level_scalar(b, 1.0, 2, 1.0) == pytest.approx(
        gaussian_pdp_level(b / math.sqrt(2), 1.0, 1.0), rel=1e-9
    )
    tight = gg_pdp_scale_scalar_exact(1.0, 0.05, 2, 1.0)
    assert tight == pytest.approx(math.sqrt(2) * gaussian_pdp_sigma_exact(1.0, 0.05, 1.0), rel=1e-8)
    # the digest's grid search gives 4.096822 for p = 3 (grid step ~1e-5)
    assert gg_pdp_scale_scalar_exact(1.0, 0.05, 3, 1.0) == pytest.approx(4.096822, abs=3e-5)


# ------------------------------------------------------------ GG, Monte Carlo (Cor. 7)
def test_monte_carlo_brackets_the_closed_form():
    # one coordinate: the exceedance probability is exactly Corollary 8's, so the Monte Carlo b
    # lies between the closed form at δ (it is a 99% upper-confidence calibration) and the
    # closed form at δ − 6 SE (SE = √(δ(1−δ)/n) = 4.9e-4 for n = 2e5, δ = 0.05: the
    # Clopper–Pearson margin ≈ 2.33 SE plus 4 SE of sampling error)
    result = gg_pdp_scale_monte_carlo(1.0, 0.05, 3, [(1.0,)])
    se = math.sqrt(0.05 * 0.95 / result.draws)
    assert (
        gg_pdp_scale_disjoint(1.0, 0.05, 3, 1.0)
        <= result.scale
        <= gg_pdp_scale_disjoint(1.0, 0.05 - 6 * se, 3, 1.0)
    )
    assert result.holds(0.05) and result.confidence == 0.99 and result.upper_bounds[0] <= 0.05


def test_monte_carlo_fig2_setting():
    # digest §9.2 case 7: r = 3, Δ = (1, 0.1, 0.05), Lemma 2's Δ_p, p = 3, ε = 1, δ = 0.05: b ≈ 4.81 (±2%)
    result = gg_pdp_scale_monte_carlo(1.0, 0.05, 3, [(1.0, 0.1, 0.05)])
    assert result.scale == pytest.approx(4.81, rel=0.02)
    # recounting on the recorded seed reproduces the certificate; a smaller b fails
    again = gg_pdp_monte_carlo(result.scale, 1.0, 3, [(1.0, 0.1, 0.05)], seed=result.seed)
    assert again.exceedances == result.exceedances and again.holds(0.05)
    assert not gg_pdp_monte_carlo(0.97 * result.scale, 1.0, 3, [(1.0, 0.1, 0.05)]).holds(0.05)


def test_monte_carlo_refuses_a_delta_it_cannot_certify():
    with pytest.raises(CalibrationError, match="too small"):
        gg_pdp_scale_monte_carlo(1.0, 1e-6, 3, [(1.0, 1.0)], draws=20_000)


def test_clopper_pearson_upper_bound():
    # k = 0: the bound solves (1 − u)^n = 1 − c, i.e. u = 1 − (1 − c)^(1/n)
    assert clopper_pearson_upper(0, 1000, 0.99) == pytest.approx(1 - 0.01 ** (1 / 1000), rel=1e-10)
    assert stats.binom.cdf(10, 1000, clopper_pearson_upper(10, 1000, 0.95)) == pytest.approx(0.05, rel=1e-8)


# ---------------------------------------------------------------- through the pipeline
def test_gaussian_family_under_pdp_uses_lemma10():
    # 3x2 table under add/remove: Δ₂ = 1, so σ = 2.188437 at (1, 0.05) (digest §4.4)
    sol = dpopt.solve(
        make_spec(
            adjacency="add_remove", privacy={"pdp": {"epsilon": 1.0, "delta": 0.05}}, mechanism="gaussian"
        )
    )
    assert sol.mechanism.sigma == pytest.approx(2.188437, abs=1e-6)
    assert sol.certificate["guarantee"]["definition"] == "pdp"
    assert "NOT the (ε, δ)-DP guarantee" in sol.certificate["guarantee"]["note"]
    assert dpopt.verify(sol.certificate).passed


def test_pdp_certificate_tampering_is_caught():
    sol = dpopt.solve(
        make_spec(
            adjacency="add_remove", privacy={"pdp": {"epsilon": 1.0, "delta": 0.05}}, mechanism="gaussian"
        )
    )
    data = sol.certificate.data
    tampered = {
        **data,
        "mechanism": {**data["mechanism"], "parameters": {"sigma": 0.9 * sol.mechanism.sigma}},
    }
    assert not dpopt.verify(tampered).passed
    no_note = {**data, "guarantee": {k: v for k, v in data["guarantee"].items() if k != "note"}}
    assert not dpopt.verify(no_note).passed


def test_other_targets_carry_no_pdp_note():
    sol = dpopt.solve(make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, mechanism="gaussian"))
    assert "note" not in sol.certificate["guarantee"]
    assert PDP_CAVEAT.startswith("probabilistic DP")


def test_remembered_coefficients_are_the_draws_own(monkeypatch):
    # the calibration reuses A_j of the same seeded draws (dpopt.privacy.pdp._coefficients): the same numbers as
    # computing them afresh, so the calibrated scale and its counts are those of the uncached path
    from dpopt.privacy import pdp

    profiles = ((1.0, 0.5),)
    fresh = [(i, pdp._polynomial_coefficients(u, np.asarray(profiles[i]), 3))
             for i, u in pdp._draws(3, profiles, 60_000, 7)]
    kept = list(pdp._coefficients(3, profiles, 60_000, 7))
    assert [i for i, _ in kept] == [i for i, _ in fresh]
    for (_, a), (_, b) in zip(kept, fresh):
        np.testing.assert_array_equal(a, b)
    cached = gg_pdp_scale_monte_carlo(1.0, 0.05, 3, list(profiles), draws=60_000, seed=7)
    monkeypatch.setattr(pdp, "CACHED_COEFFICIENTS", 0)
    uncached = gg_pdp_scale_monte_carlo(1.0, 0.05, 3, list(profiles), draws=60_000, seed=7)
    assert cached == uncached
