"""Exact privacy of the discrete families, their calibration, certificates and utilities.

Independent routes to every expected value:
* discrete Laplace: ε = Δ/b read off the pmf ratio sup_y P[y]/P[y - Δ];
* discrete Gaussian zCDP: Rényi divergences of N_Z(0, σ²) and N_Z(Δ, σ²) summed directly in
  60 digits, against αΔ²/(2σ²) (CKS 2020, Thm 14/Prop. 16: equality when (1 - α)Δ is an integer,
  Σ_y e^{-(y - c)²/(2σ²)} ≤ Σ_y e^{-y²/(2σ²)} otherwise);
* discrete Gaussian (ε, δ): the hockey-stick divergence Σ_y max(0, P[y] - e^ε P[y - Δ]) summed
  directly, against the closed form of CKS Thm 7 used by the certificate;
* moments: the dual (Poisson summation) series E[Y²] = σ² Σ_k (1 - 4π²σ²k²) e^{-2π²σ²k²} /
  Σ_k e^{-2π²σ²k²}, against the direct series.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import make_spec

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.discrete_gaussian import DiscreteGaussianMechanism, discrete_gaussian_privacy_check
from dpopt.mechanisms.discrete_laplace import DiscreteLaplaceMechanism
from dpopt.noise.discrete_gaussian import discrete_gaussian_moments
from dpopt.privacy.discrete_gaussian import discrete_gaussian_delta, discrete_gaussian_delta_mp
from dpopt.privacy.zcdp import zcdp_delta_cks

COUNT = {
    "dpopt": 1,
    "name": "count",
    "data": {"attributes": {"a": ["x", "y"]}},
    "query": {"kind": "count"},
    "adjacency": "add_remove",
}


def _direct_dg(sigma2, top):
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        ys = range(-top, top + 1)
        w = {y: mpmath.exp(-(mpmath.mpf(y) ** 2) / (2 * s2)) for y in ys}
        z = sum(w.values())
        return {y: w[y] / z for y in ys}


# ------------------------------------------------------------------ discrete Laplace
@pytest.mark.parametrize(
    "query,adjacency",
    [({"kind": "count"}, "add_remove"), ({"kind": "histogram", "attribute": "a"}, "replace_one")],
)
@pytest.mark.parametrize("epsilon", [0.5, 0.3])
def test_discrete_laplace_epsilon_is_the_pmf_ratio(query, adjacency, epsilon):
    sol = dpopt.solve(
        {
            **COUNT,
            "query": query,
            "adjacency": adjacency,
            "privacy": {"pure": {"epsilon": epsilon}},
            "mechanism": "discrete_laplace",
        }
    )
    b = Fraction(sol.mechanism.parameters["scale_exact"])
    r = math.exp(-1 / float(b))
    log_pmf = lambda y: math.log((1 - r) / (1 + r)) + abs(y) * math.log(r)
    # worst privacy loss over outputs y (per coordinate) and over the differences v of the space
    worst = max(
        sum(max(log_pmf(y) - log_pmf(y - int(v_i)) for y in range(-50, 51)) for v_i in v)
        for v in sol.space.vectors()
    )
    assert worst == pytest.approx(float(sol.space.l1 / b), rel=1e-9)
    assert worst <= epsilon * (1 + 1e-12)
    assert b >= sol.space.l1 / Fraction(epsilon)  # rounded up on the dyadic grid: the safe side


def test_discrete_laplace_zcdp_scale_uses_less_noise_than_the_epsilon_dp_bound():
    # calibrated on the Rényi divergences (tests/test_exact_calibration.py checks them and their tightness):
    # below the ε-DP ⇒ ε²/2-zCDP scale, whose ε²/2 ≤ ρ no longer holds, and certified by its check
    sol = dpopt.solve({**COUNT, "privacy": {"zcdp": {"rho": 0.3}}, "mechanism": "discrete_laplace"})
    b = Fraction(sol.mechanism.parameters["scale_exact"])
    assert (1 / b) ** 2 / 2 > Fraction(0.3)
    check = next(c for c in sol.certificate["checks"] if c["claim"] == "privacy")
    assert check["passed"] and "Rényi" in check["method"]


def test_discrete_laplace_utilities_equal_sums_over_the_pmf():
    mech = DiscreteLaplaceMechanism(Fraction(5, 2), 3)
    r = math.exp(-1 / 2.5)
    ys = np.arange(-400, 401)
    p = (1 - r) / (1 + r) * r ** np.abs(ys)
    assert mech._max_variance() == pytest.approx(float(np.sum(p * ys**2)), rel=1e-12)
    assert mech._expected_l1() == pytest.approx(3 * float(np.sum(p * np.abs(ys))), rel=1e-12)
    assert mech._usefulness(2.7) == pytest.approx(float(np.sum(p[np.abs(ys) <= 2.7])), rel=1e-12)
    assert mech._abs_moments()[2] == pytest.approx(float(np.sum(p * ys.astype(float) ** 4)), rel=1e-12)


@pytest.mark.parametrize("privacy", [{"pure": {"epsilon": 50.0}}, {"zcdp": {"rho": 2000.0}}])
def test_nearly_noiseless_targets_still_certify(privacy):
    # At ε = 50 the discrete noise is 0 with probability 1 - 3e-11 and every simulated draw is 0; the
    # sampler check then needs the standard error of the law itself (integer_noise module docstring).
    for family in ("discrete_laplace", "discrete_gaussian"):
        spec = make_spec(privacy=privacy, mechanism=family)
        if family == "discrete_gaussian" and "pure" in privacy:
            continue
        sol = dpopt.solve(spec)
        check = next(c for c in sol.certificate["checks"] if c["claim"] == "utility.sampler")
        assert check["passed"] and dpopt.verify(sol.certificate).passed


# ----------------------------------------------------------------- discrete Gaussian
@pytest.mark.parametrize(
    "sigma2,shift,alpha", [(Fraction(1), 1, 2), (Fraction(3, 2), 2, 3), (Fraction(1), 1, 1.5)]
)
def test_discrete_gaussian_renyi_divergence_is_at_most_alpha_rho(sigma2, shift, alpha):
    p = _direct_dg(sigma2, 80)
    with mpmath.workdps(60):
        a = mpmath.mpf(alpha)
        total = sum(p[y] ** a * p[y - shift] ** (1 - a) for y in range(-80 + shift, 81))
        divergence = mpmath.log(total) / (a - 1)
        bound = a * shift**2 / (2 * (mpmath.mpf(sigma2.numerator) / sigma2.denominator))
    if float((1 - alpha) * shift).is_integer():
        assert float(abs(divergence - bound)) < 1e-40
    else:
        assert divergence < bound


@pytest.mark.parametrize(
    "sigma2,shift", [(Fraction(1), 1), (Fraction(3, 2), 2), (Fraction(1173061, 65536), 1)]
)
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 2.0])
def test_discrete_gaussian_profile_equals_the_hockey_stick_divergence(sigma2, shift, epsilon):
    top = int(60 * math.sqrt(sigma2)) + 10
    p = _direct_dg(sigma2, top)
    with mpmath.workdps(60):
        e = mpmath.exp(epsilon)
        direct = sum(max(mpmath.mpf(0), p[y] - e * p[y - shift]) for y in range(-top + shift, top + 1))
    closed = discrete_gaussian_delta_mp(epsilon, sigma2, shift)
    with mpmath.workdps(80):
        assert closed >= direct - mpmath.mpf(10) ** -45  # an upper bound (up to the 60-digit sum) ...
        assert abs(closed - direct) < mpmath.mpf(10) ** -40  # ... that is tight
    assert discrete_gaussian_delta(epsilon, float(sigma2), shift) == pytest.approx(
        float(direct), rel=1e-8, abs=1e-300
    )


def test_discrete_gaussian_second_moment_matches_the_poisson_summation_series():
    for sigma2 in (0.25, 1.0, 2.0, 9.0):
        with mpmath.workdps(40):
            s = mpmath.mpf(sigma2)
            ks = range(-20, 21)
            num = sum(
                (1 - 4 * mpmath.pi**2 * s * k * k) * mpmath.exp(-2 * mpmath.pi**2 * s * k * k) for k in ks
            )
            den = sum(mpmath.exp(-2 * mpmath.pi**2 * s * k * k) for k in ks)
            dual = float(s * num / den)
        assert discrete_gaussian_moments(sigma2)["second_moment"] == pytest.approx(dual, rel=1e-12)


def test_zcdp_calibration_is_exact_when_the_target_is_dyadic():
    # table under add/remove: Δ₂² = 1; ρ = 1/8 ⇒ σ² = Δ₂²/(2ρ) = 4 exactly (CKS Thm 14)
    spec = make_spec(
        adjacency={"kind": "add_remove"}, privacy={"zcdp": {"rho": 0.125}}, mechanism="discrete_gaussian"
    )
    sol = dpopt.solve(spec)
    assert sol.mechanism.parameters["sigma_squared_exact"] == "4"
    assert sol.certificate["mechanism"]["privacy"]["rho_exact"] == "1/8"


def test_one_coordinate_approx_calibration_is_tight_on_the_exact_profile():
    spec = dpopt.load_spec(
        {**COUNT, "privacy": {"approx": {"epsilon": 1.0, "delta": 1e-6}}, "mechanism": "discrete_gaussian"}
    )
    sol = dpopt.solve(spec)
    sigma2 = Fraction(sol.mechanism.parameters["sigma_squared_exact"])
    assert discrete_gaussian_delta_mp(1.0, sigma2, 1) <= 1e-6
    smaller = sigma2 * Fraction(9999, 10000)
    assert not discrete_gaussian_privacy_check(sol.space, smaller, spec.privacy).passed
    assert any("Thm 7" in c["method"] for c in sol.certificate["checks"] if c["claim"] == "privacy")


def test_multi_coordinate_approx_is_calibrated_on_the_exact_profile_not_cks():
    spec = dpopt.load_spec(
        make_spec(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, mechanism="discrete_gaussian")
    )
    sol = dpopt.solve(spec)
    privacy = next(c for c in sol.certificate["checks"] if c["claim"] == "privacy")
    assert "exact discrete-Gaussian profile" in privacy["method"] and privacy["passed"]
    # less noise than the ρ-zCDP + CKS route needs: that route's ρ at this σ² misses the target
    rho = float(sol.space.l2_squared / (2 * Fraction(sol.mechanism.parameters["sigma_squared_exact"])))
    assert zcdp_delta_cks(1.0, rho) > 1e-6


def test_discrete_families_refuse_what_they_cannot_certify():
    linear = make_spec(
        query={"kind": "linear", "attribute": "race", "matrix": [[1, 0.5, 0], [0, 1, 1]]},
        privacy={"zcdp": {"rho": 0.5}},
    )
    sol = dpopt.solve(linear)
    reasons = {c.family: c.reason for c in sol.candidates}
    assert (
        "integer-valued" in reasons["discrete_gaussian"] and "integer-valued" in reasons["discrete_laplace"]
    )
    gdp = dpopt.solve(make_spec())
    assert "gdp" in {c.family: c.reason for c in gdp.candidates}["discrete_gaussian"]


def test_auto_compares_the_discrete_families_on_integer_queries():
    sol = dpopt.solve(make_spec(adjacency={"kind": "add_remove"}, privacy={"zcdp": {"rho": 0.5}}))
    feasible = {c.family for c in sol.candidates if c.feasible}
    assert {"discrete_gaussian", "gaussian"} <= feasible
    # discrete Laplace competes through its proven bound (the KL limit of its Rényi divergences), which
    # the discrete Gaussian beats: it is not designed, and its row says why
    laplace_row = next(c for c in sol.candidates if c.family == "discrete_laplace")
    assert laplace_row.reason.startswith("not designed: its utility bound")
    # Var N_Z(0, σ²) < σ² (Poisson summation above), so at equal σ the discrete Gaussian beats a floating-point
    # Gaussian on l2; the isotropic Gaussian measures exactly on the lattice under zCDP (sampler: exact), with
    # the same law N_Z(0, σ²) at the same dyadic σ², so the two tie and the winner measures exactly
    values = {c.family: c.utility.value for c in sol.candidates if c.feasible}
    assert values["gaussian"] == values["discrete_gaussian"]
    assert sol.mechanism.family in ("discrete_gaussian", "gaussian") and sol.mechanism.integer_noise


def test_certificates_name_the_sampler_and_verify(tmp_path):
    exact = dpopt.solve(
        make_spec(
            adjacency={"kind": "add_remove"}, privacy={"zcdp": {"rho": 0.5}}, mechanism="discrete_gaussian"
        )
    ).certificate
    notes = exact["mechanism"]["notes"]
    assert any("exact sampler" in n and "step-envelope" in n for n in notes)
    assert IDEALIZED_NUMERICS not in notes
    floating = dpopt.solve(
        make_spec(adjacency={"kind": "add_remove"}, privacy={"zcdp": {"rho": 0.5}}, mechanism="gaussian",
                  sampler="floating_point")
    ).certificate
    assert IDEALIZED_NUMERICS in floating["mechanism"]["notes"]
    assert dpopt.verify(exact).passed
    tampered = json.loads(exact.to_json())
    tampered["mechanism"]["parameters"]["sigma_squared_exact"] = "1/2"
    result = dpopt.verify(tampered)
    assert not result.passed and "privacy" in {c.claim for c in result.failed}


def test_discrete_release_is_integer_valued():
    mech = DiscreteGaussianMechanism(Fraction(9, 4), 6)
    noisy = mech.release(np.arange(6.0), rng=np.random.default_rng(3))
    assert np.array_equal(noisy, np.round(noisy))
