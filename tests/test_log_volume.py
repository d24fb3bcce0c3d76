"""ci_volume beyond the double range (issue 39): volumes carried as logarithms, the Monte Carlo check rescaled.

Sources of the expected values:

* **the d-ball's volume** π^{d/2} r^d / Γ(d/2 + 1) (Ball 1997, "An elementary introduction to modern convex
  geometry", Lecture 1), evaluated in 50-digit mpmath (its own Γ and log), at d = 500, 1,000, 2,000 where the
  volume itself is far beyond 1.8·10³⁰⁸;
* **the exact law of Q = Σ η_i²** for 600 i.i.d. N_ℤ(0, 1) coordinates (add-remove counts at ρ = 1/2: σ² =
  Δ₂²/(2ρ) = 1): the pmf exp(−k²/2)/Σ_j exp(−j²/2) of η, the law of η² convolved 600 times here in double precision
  (numpy), its 1 − α quantile q; the certified region is {Σ(y_i − θ_i)² ≤ q} (h = 1/σ²: no grid excess), volume
  V_600 q^300;
* **the continuous region** V_d (σ²t)^{d/2}, t the χ²_d quantile (scipy), in mpmath;
* **the Monte Carlo at 10²⁹⁰**: the importance weights' mean is the closed form (Anderson 2003, the region's volume;
  the estimator of :func:`dpopt.stats.inference.region_importance_weights`); the certificate's tolerance is 5
  standard errors (a fixed seed: it holds or fails reproducibly), so the test allows 5 SE.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.design.select import Candidate, select
from dpopt.mechanisms.base import UtilityValue
from dpopt.mechanisms.gaussian import GaussianMechanism
from dpopt.stats.inference import log_ci_volume, log_unit_ball_volume
from dpopt.stats.log_volume import LOG_DOUBLE_MAX, VolumeTerms, scaled_mean, scaled_moments, volume_text

ALPHA = 0.05


def _mp_log_ball(d: int, radius: float) -> mpmath.mpf:
    """log(π^{d/2} r^d / Γ(d/2 + 1)) in 50-digit mpmath."""
    with mpmath.workdps(50):
        return mpmath.log(mpmath.pi ** (mpmath.mpf(d) / 2) * mpmath.mpf(radius) ** d / mpmath.gamma(mpmath.mpf(d) / 2 + 1))


@pytest.mark.parametrize("d", [500, 1000, 2000])
@pytest.mark.parametrize("radius", [1.0, 30.0])
def test_log_ball_volume_matches_the_closed_form_beyond_the_double_range(d, radius):
    mine = log_unit_ball_volume(d) + d * math.log(radius)
    expected = float(_mp_log_ball(d, radius))
    assert mine == pytest.approx(expected, rel=1e-13, abs=1e-10)
    if radius > 1.0:
        assert expected > LOG_DOUBLE_MAX  # the volume itself is not a double


@pytest.mark.parametrize("d", [500, 1000, 2000])
def test_log_ci_volume_is_the_ball_of_radius_sigma_root_t(d):
    sigma, t = 1.3, float(stats.chi2.isf(ALPHA, d))
    expected = float(_mp_log_ball(d, sigma * math.sqrt(t)))
    assert log_ci_volume(d, 2.0 * d * math.log(sigma), ALPHA) == pytest.approx(expected, rel=1e-13)
    assert expected > LOG_DOUBLE_MAX


def _quantile_of_sum_of_squares(d: int, alpha: float) -> int:
    """The exact 1 − α quantile of Σ η_i², η_i i.i.d. N_ℤ(0, 1), by direct convolution (module docstring)."""
    k = np.arange(-40, 41)
    pmf = np.exp(-0.5 * k * k)
    pmf /= pmf.sum()
    top = 4 * d
    square = np.zeros(41 * 41)
    np.add.at(square, k * k, pmf)
    law = np.ones(1)
    for _ in range(d):
        law = np.convolve(law, square)[: top + 1]
    return int(np.searchsorted(np.cumsum(law), 1.0 - alpha))


def _histogram(cells: int, sampler: str | None = None) -> dict:
    spec = {"dpopt": 1, "name": f"{cells}-cell histogram", "data": {"attributes": {"a": [f"v{i}" for i in range(cells)]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": {"kind": "add_remove"},
            "privacy": {"zcdp": {"rho": 0.5}}, "mechanism": "gaussian", "utility": {"metric": "ci_volume", "alpha": ALPHA}}
    return spec if sampler is None else spec | {"sampler": sampler}


def test_600_cell_histogram_exact_region_solves_and_verifies():
    solution = dpopt.solve(_histogram(600))
    cert = solution.certificate
    assert cert["mechanism"]["parameters"]["sampler"] == "exact"
    q = _quantile_of_sum_of_squares(600, ALPHA)
    assert f"r = {q} " in cert["utility"]["method"]
    assert cert["utility"]["value"] is None  # e^875: beyond the double range, stated by its logarithm
    assert cert["utility"]["log_value"] == pytest.approx(float(_mp_log_ball(600, math.sqrt(q))), rel=1e-13)
    assert dpopt.verify(cert).passed


def test_600_cell_histogram_floating_point_region_is_the_closed_form():
    cert = dpopt.solve(_histogram(600, "floating_point")).certificate
    t = float(stats.chi2.isf(ALPHA, 600))
    assert cert["utility"]["log_value"] == pytest.approx(float(_mp_log_ball(600, math.sqrt(t))), rel=1e-13)
    assert {c["claim"]: c["passed"] for c in cert["checks"]}["utility.sampler"]


def test_forged_log_volume_fails_verification():
    cert = dpopt.solve(_histogram(600, "floating_point")).certificate
    forged = dpopt.Certificate(cert.data | {"utility": cert["utility"] | {"log_value": cert["utility"]["log_value"] - 1}})
    assert "utility" in {c.claim for c in dpopt.verify(forged).failed}


def test_monte_carlo_at_1e290_has_a_finite_standard_error_and_agrees():
    d = 400
    log_sigma = (290 * math.log(10) - log_ci_volume(d, 0.0, ALPHA)) / d  # the region's volume is 10²⁹⁰
    mechanism = GaussianMechanism(math.exp(log_sigma), d, sampler="floating_point")
    closed = mechanism.expected_utility(dpopt.load_spec(_histogram(d)).utility)
    assert closed.log_value == pytest.approx(290 * math.log(10), rel=1e-12)
    mc = mechanism._monte_carlo("ci_volume", None, None, draws=20_000, alpha=ALPHA)
    relative_se = math.expm1(mc.log_ci[1] - mc.log_value) / 1.96
    assert math.isfinite(mc.log_value) and 0 < relative_se < 0.5
    assert abs(math.exp(closed.log_value - mc.log_value) - 1.0) <= 5 * relative_se
    terms = np.asarray(mechanism._inference_draws("ci_volume", mechanism.sample(100, np.random.default_rng(1)),
                                                  ALPHA, None).terms) * 1e290
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.std(terms))  # the direct standard error of such terms overflows


def test_scaled_moments_are_the_direct_ones_bit_for_bit():
    """Scaling by a power of two is exact in binary floating point: in range, nothing changes."""
    x = np.random.default_rng(3).lognormal(5.0, 2.0, size=1001)
    mean, se, exponent = scaled_moments(x)
    assert math.ldexp(mean, exponent) == float(x.mean())
    assert math.ldexp(se, exponent) == float(x.std(ddof=1)) / math.sqrt(x.size)


def test_scaled_mean_of_batches_in_units_of_e_to_the_L():
    terms = np.array([0.5, 1.5, 1.0, 1.0])
    log_mean, relative_se = scaled_mean([VolumeTerms(1000.0, terms[:2]), VolumeTerms(1000.0 + math.log(2.0), terms[2:] / 2)])
    assert log_mean == pytest.approx(1000.0, rel=1e-15)  # mean 1 in units of e^1000
    assert relative_se == pytest.approx(np.std(terms, ddof=1) / 2.0, rel=1e-12)


def test_volume_beyond_range_is_null_in_json_and_stated_by_its_log():
    value = UtilityValue.volume(1000.0, "closed form")
    assert value.value == math.inf and value.score == 1000.0
    assert value.to_dict() == {"metric": "ci_volume", "value": None, "method": "closed form", "log_value": 1000.0}
    assert volume_text(1000.0, 4) == "1.970e+434"  # e^1000 = 10^434.294…, 10^0.294… = 1.970


def _candidate(family: str, log_value: float, exact: bool) -> Candidate:
    return Candidate(family, SimpleNamespace(exact_noise=exact), UtilityValue.volume(log_value, "closed form"))


def test_auto_compares_volumes_by_their_logarithm():
    """Both volumes are +inf as doubles; their logs differ: the smaller region wins, and the exact family is kept
    within the 0.1% margin (log(1.001) ≈ 0.0009995 in the log domain) only."""
    assert select([_candidate("a", 1001.0, False), _candidate("b", 1000.0, False)], "ci_volume").family == "b"
    assert select([_candidate("a", 1000.0, False), _candidate("b", 1000.0009, True)], "ci_volume").family == "b"
    assert select([_candidate("a", 1000.0, False), _candidate("b", 1000.0011, True)], "ci_volume").family == "a"


def test_span_region_expected_volume_at_600_cells_in_the_log_domain():
    """The full release's region on the sum-zero span (replace-one's V = 1^⊥, k = 599) of 600 i.i.d. N_ℤ(0, 1):
    E vol = V_k(σ²r)^{k/2}·E f(X), f(x) = (1 − x)₊^{k/2}, X = T²/(dσ²r), T = Σ η_i. f ≤ 1, and f is convex with
    E X = Var N_ℤ(0, 1)/(σ²r) (E T² = d·Var η), so Jensen gives E f(X) ≥ f(E X): the log of the summed Ẽ lies in
    [log V_k(σ²r)^{k/2} + (k/2)·log(1 − Var/(σ²r)), log V_k(σ²r)^{k/2}], up to the cut tails (dτ = 6·10⁻¹⁰,
    relative). Var N_ℤ(0, 1) = Σ k²e^{−k²/2}/Σ e^{−k²/2} in 30-digit mpmath; the radius and the ball from the
    600-cell region's own quantile (test above) and mpmath's Γ."""
    from fractions import Fraction

    from dpopt.mechanisms.lattice import lattice_inference
    from dpopt.stats.lattice_span_regions import span_region

    d, k = 600, 599
    region = span_region(lattice_inference("ci_volume", (Fraction(1),) * d, ALPHA), k, sum_zero=True)
    r = _quantile_of_sum_of_squares(d, ALPHA)
    assert region.full.radius == r
    largest = float(_mp_log_ball(k, math.sqrt(r)))
    with mpmath.workdps(30):
        terms = [mpmath.exp(-mpmath.mpf(j) ** 2 / 2) for j in range(-40, 41)]
        variance = float(sum(j * j * w for j, w in zip(range(-40, 41), terms)) / sum(terms))
    assert region.log_largest == pytest.approx(largest, rel=1e-13)
    assert largest + 0.5 * k * math.log(1.0 - variance / r) - 1e-9 <= region.log_volume <= largest + 1e-12
    assert region.log_volume > LOG_DOUBLE_MAX and region.expected_volume == math.inf
