"""The discrete staircase on a lattice: its law against the continuous density restricted to the lattice and
brute-force sums, its sampler by a goodness-of-fit test, its privacy loss by enumeration of shifts, and the exact
staircase designs on bounded sums, means and counts (solve, release, verify, tamper)."""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import dpopt
from dpopt.mechanisms.staircase_lattice import EXHAUSTIVE_STEPS, best_boundary
from dpopt.noise.discrete_laplace import discrete_laplace_moments
from dpopt.noise.discrete_staircase import DiscreteStaircase, DiscreteStaircaseMarginal
from dpopt.spec.models import Utility
from solved_specs import ROOT, solved

LAWS = [(Fraction(1, 2), 5, 2), (Fraction(3), 4, 4), (Fraction(7, 10), 6, 1), (Fraction(1), 1, 1),
        (Fraction(1048576, 1048575), 9, 4)]
"""(ε, m, r): a boundary inside the period, at its end (r = m), at its start (r = 1), the unit step (the
discrete Laplace), and a non-dyadic ε' = 1/t as the designs record it."""


def continuous_level(x: Fraction, step: Fraction, g: Fraction) -> int:
    """The exponent of b in Geng & Viswanath's staircase density at x, from its definition (b^j on [jΔ, (j+g)Δ),
    b^{j+1} on [(j+g)Δ, (j+1)Δ)), in exact rationals: independent of :meth:`DiscreteStaircase.level`."""
    y = abs(x) / step
    j = math.floor(y)
    return j if y - j < g else j + 1


def weight(eps: Fraction, m: int, r: int, k: int) -> mpmath.mpf:
    """b^{level} of the continuous density at x = k·h (h = 1/7, any spacing: Δ = m·h, g = r/m), in mpmath."""
    h = Fraction(1, 7)
    return _b(eps) ** continuous_level(k * h, m * h, Fraction(r, m))


def _b(eps: Fraction) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(eps.numerator) / eps.denominator)


def brute_sum(eps: Fraction, m: int, r: int, f, start: int = 1) -> mpmath.mpf:
    """Σ_{a ≥ start} f(a)·b^{level(a)} term by term, up to the a where the rest is below 10⁻³⁰ of the sum: the
    terms with level ≥ J sum to at most m·Σ_{j≥J} f((j+1)m)·b^j, which the stopping point makes negligible for
    f(a) ≤ a² (b^J·J²m³/(1 − b)³ < 10⁻³⁵)."""
    b = _b(eps)
    periods = 5
    while b**periods * (periods * m) ** 2 * m / (1 - b) ** 3 >= mpmath.mpf(10) ** -35:
        periods += 5
    return mpmath.fsum(f(a) * weight(eps, m, r, a) for a in range(start, periods * m + 1))


@pytest.mark.parametrize("eps, m, r", LAWS)
def test_the_law_is_the_staircase_density_restricted_to_the_lattice(eps, m, r):
    law = DiscreteStaircase(eps, m, r)
    with mpmath.workdps(40):
        z = 1 + 2 * brute_sum(eps, m, r, lambda a: 1)
        k = np.arange(-4 * m - 3, 4 * m + 4)
        expected = np.array([float(weight(eps, m, r, int(i)) / z) for i in k])
        # moments, P(|X| ≤ G) and P(X > x) by brute-force summation of the restricted density
        m1 = 2 * brute_sum(eps, m, r, lambda a: a) / z
        m2 = 2 * brute_sum(eps, m, r, lambda a: a * a) / z
        within = {g: (1 + 2 * sum(weight(eps, m, r, a) for a in range(1, g + 1))) / z for g in (0, 1, r, m, 3 * m + 1)}
        tails = {x: brute_sum(eps, m, r, lambda a: 1, start=x + 1) / z for x in (0, r, m + 2)}
    assert law.normaliser() == pytest.approx(float(z), rel=1e-13)
    assert law.pmf(k) == pytest.approx(expected, rel=1e-13)
    assert law.abs_moment(1) == pytest.approx(float(m1), rel=1e-12)
    assert law.abs_moment(2) == pytest.approx(float(m2), rel=1e-12)
    for g, value in within.items():
        assert law.within(g) == pytest.approx(float(value), rel=1e-12)
    for x, value in tails.items():
        assert float(law.upper_tail(x)) == pytest.approx(float(value), rel=1e-12)


def test_the_unit_step_is_the_discrete_laplace():
    # m = 1: p(k) ∝ e^{−ε|k|}, the discrete Laplace of scale 1/ε (CKS 2020; its closed forms in dpopt.noise)
    for eps in (Fraction(1, 3), Fraction(1), Fraction(5, 2)):
        law, dl = DiscreteStaircase(eps, 1, 1), discrete_laplace_moments(1 / float(eps), gamma=3)
        assert law.abs_moment(1) == pytest.approx(dl["mean_abs"], rel=1e-13)
        assert law.abs_moment(2) == pytest.approx(dl["second_moment"], rel=1e-13)
        assert law.within(3) == pytest.approx(dl["within"], rel=1e-13)


@pytest.mark.parametrize("eps, m, r", [(Fraction(1, 2), 5, 2), (Fraction(1048576, 1048575), 9, 4)])
def test_the_sampler_draws_the_law(eps, m, r):
    """Pearson's χ² over the cells |k| ≤ 30 one by one (both signs) and the two tails, 400,000 draws, fixed seed.

    Under the law the statistic is χ² with (cells − 1) degrees of freedom: a correct sampler is rejected with
    probability 10⁻⁶. Power: the same test against the law with the boundary moved by one point has noncentrality
    λ = N Σ (p₁ − p₀)²/p₀; it is asserted to be so large that the power exceeds 0.999 (λ above the 10⁻⁶ critical
    value by more than 4√(2(df + 2λ)), four standard deviations of the noncentral χ²)."""
    law = DiscreteStaircase(eps, m, r)
    n = 400_000
    draws = law.sample(np.random.default_rng(20261207), n)
    assert draws.dtype == np.int64
    edges = 30
    cells = np.arange(-edges, edges + 1)
    observed = np.concatenate([[np.sum(draws < -edges)], [np.sum(draws == c) for c in cells],
                               [np.sum(draws > edges)]])
    tail = float(law.upper_tail(edges))
    expected = n * np.concatenate([[tail], law.pmf(cells), [tail]])
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    df = len(expected) - 1
    critical = stats.chi2.isf(1e-6, df)
    assert statistic < critical
    other = DiscreteStaircase(eps, m, r + 1 if r < m else r - 1)
    alternative = n * np.concatenate([[float(other.upper_tail(edges))], other.pmf(cells),
                                      [float(other.upper_tail(edges))]])
    lam = float(np.sum((alternative - expected) ** 2 / expected))
    assert lam + df - critical > 4 * math.sqrt(2 * (df + 2 * lam))


@pytest.mark.parametrize("eps, m, r", LAWS)
def test_the_privacy_loss_of_every_shift_by_enumeration(eps, m, r):
    """max_k |ln p(k) − ln p(k − t)| over a window of outputs, for every integer shift t ∈ [−m, m] and beyond, from
    the continuous density's levels (exact rationals): ε for 0 < |t| ≤ m (attained at |t| = m), 2ε for
    m < |t| ≤ 2m — the claim ε·⌈|t|/m⌉ holds and is tight."""
    h = Fraction(1, 3)
    levels = {k: continuous_level(k * h, m * h, Fraction(r, m)) for k in range(-8 * m - 8, 8 * m + 9)}
    window = range(-5 * m - 4, 5 * m + 5)
    for t in range(-2 * m, 2 * m + 1):
        worst = max(abs(levels[k] - levels[k - t]) for k in window)
        assert worst == math.ceil(abs(t) / m)
        law = DiscreteStaircase(eps, m, r)
        law_worst = max(abs(int(law.level(k)) - int(law.level(k - t))) for k in window)
        assert law_worst == worst


def test_the_boundary_window_finds_the_best_boundary():
    # above EXHAUSTIVE_STEPS only a window around g*·m is searched: it must hold the global optimum (every r tried)
    m = EXHAUSTIVE_STEPS + 904
    for metric, moment in (("l2", 2), ("l1", 1)):
        utility = Utility(metric=metric)
        found, _ = best_boundary(Fraction(3, 4), m, Fraction(1), utility, lambda law: law.abs_moment(moment))
        values = [DiscreteStaircase(Fraction(3, 4), m, r).abs_moment(moment) for r in range(1, m + 1)]
        assert found.boundary == 1 + int(np.argmin(values))


def test_the_second_route_marginal_is_the_law():
    law = DiscreteStaircase(Fraction(1, 2), 5, 2)
    marginal = DiscreteStaircaseMarginal(law)
    assert np.exp(marginal.log_density(np.arange(-12, 13))) == pytest.approx(law.pmf(np.arange(-12, 13)), rel=1e-13)
    assert marginal.abs_moment(2) == pytest.approx(law.abs_moment(2), rel=1e-10)


# --------------------------------------------------------------------- sums and means
def _g_and_v_l1(epsilon: float, step: float) -> float:
    """E|X| of the l1-optimal continuous staircase: Δe^{ε/2}/(e^ε − 1) (Geng & Viswanath 2016, Thm 4)."""
    return step * math.exp(epsilon / 2) / math.expm1(epsilon)


def _g_and_v_l2(epsilon: float, step: float) -> float:
    """E X² of the l2-optimal continuous staircase: Δ²(2^{−2/3}b^{2/3}(1 + b)^{2/3} + b)/(1 − b)² (G&V, Thm 5)."""
    b = math.exp(-epsilon)
    return step**2 * (2 ** (-2 / 3) * b ** (2 / 3) * (1 + b) ** (2 / 3) + b) / (1 - b) ** 2


@pytest.mark.parametrize("name, expected", [
    ("staircase_sum_l1", _g_and_v_l1(1.0, 200000.0)),
    # (1, 10⁻⁶)-DP from ε₀-DP through randomized response: ε₀ = ln((e + δ)/(1 − δ)) (Kairouz et al.)
    ("mean_income_approx", _g_and_v_l2(math.log((math.e + 1e-6) / (1 - 1e-6)), 200.0)),
])
def test_the_example_sums_are_exact_at_the_continuous_error(name, expected):
    solution = solved(ROOT / "specs" / f"{name}.yaml")
    mechanism, certificate = solution.mechanism, solution.certificate.data
    assert mechanism.family == "staircase" and mechanism.exact_noise
    assert not any("idealized" in note for note in certificate["mechanism"]["notes"])
    assert certificate["utility"]["value"] == pytest.approx(expected, rel=2e-6)  # ε' = 1/t: 2⁻²⁰ below ε₀
    assert abs(certificate["mechanism"]["parameters"]["lattice_cost_ratio"] - 1) < 1e-5
    assert dpopt.verify(certificate).passed


def test_a_mean_is_released_on_its_lattice():
    mechanism = solved(ROOT / "specs" / "mean_income_approx.yaml").mechanism
    out = mechanism.release(np.full((2000, 1), 51234.56), np.random.default_rng(5)).ravel()
    unit = mechanism.lattice.unit  # h/n: every release is h(N + η)/n, its nearest double
    units = [Fraction(float(x)) / unit for x in out]
    assert all(abs(u - round(u)) < Fraction(1, 10**6) for u in units)
    # the noise's mean square against the law's E X², within 5 standard errors of the sample
    noise = out - 51234.56
    se = np.std(noise**2) / math.sqrt(noise.size)
    assert abs(np.mean(noise**2) - mechanism._max_variance()) < 5 * se


def _forged(certificate: dict, **edits) -> dict:
    forged = copy.deepcopy(certificate)
    for key, value in edits.items():
        forged["mechanism"]["parameters"][key] = value
    return forged


def _rejected(certificate: dict) -> bool:
    try:
        return not dpopt.verify(certificate).passed
    except dpopt.errors.CertificateError:
        return True


def test_verify_rejects_a_forged_discrete_staircase():
    certificate = solved(ROOT / "specs" / "staircase_sum_l1.yaml").certificate.data
    p = certificate["mechanism"]["parameters"]
    assert _rejected(_forged(certificate, epsilon0_exact=str(2 * Fraction(p["epsilon0_exact"]))))  # ε' doubled
    assert _rejected(_forged(certificate, step_units=p["step_units"] // 2))  # a step below Δ_u: K = 2
    assert _rejected(_forged(certificate, boundary_units=0))  # no such law
    lattice = dict(p["sum_lattice"], shift=p["sum_lattice"]["shift"] // 2)
    assert _rejected(_forged(certificate, sum_lattice=lattice, step_units=lattice["shift"]))  # Δ_u understated
    assert _rejected(_forged(certificate, continuous=dict(p["continuous"], g=0.5)))  # cost ratio not re-derived


def test_the_floating_point_request_keeps_the_continuous_law():
    solution = solved(ROOT / "specs" / "staircase_histogram_usefulness.yaml")
    assert not solution.mechanism.exact_noise  # sampler: floating_point, as its description says


PRIOR = [10, 2, 0]
"""A histogram prior with a small and an empty cell, so that the floor τ = 0.5 clips releases."""


@pytest.mark.parametrize("utility", [{"metric": "kl", "prior": PRIOR, "floor": 0.5},
                                     {"metric": "renyi", "prior": PRIOR, "floor": 0.5, "order": 2.0},
                                     {"metric": "renyi", "prior": PRIOR, "floor": 0.5, "order": 0.5}])
def test_prior_metrics_on_counts_are_summed_over_the_discrete_law(utility):
    """kl and renyi on a histogram: the exact discrete staircase, its metric summed over its pmf. Reference: the
    pmf b^{level}/Z from the continuous density's definition (:func:`weight`, normalised by brute force in 30
    digits, |k| ≤ 400 where b^{400/m} is far below 10⁻³⁰ at ε' ≥ 0.9), and the generalised divergences written
    from their definitions (:mod:`dpopt.noise.prior_metrics`: q = max(c + Z, τ)/C, C = Σc): KL = E Σ_i p_i ln(p_i/q_i)
    − p_i + q_i; Rényi = ln(1 + E Σ_i p_i^α q_i^{1−α} − αp_i − (1 − α)q_i)/(α − 1)."""
    spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1}}, "mechanism": "staircase", "utility": utility}
    solution = dpopt.solve(spec)
    assert solution.mechanism.exact_noise and "idealized" not in str(solution.certificate.data)
    p = solution.certificate.data["mechanism"]["parameters"]
    eps, m, r = Fraction(p["epsilon0_exact"]), p["step_units"], p["boundary_units"]
    with mpmath.workdps(30):
        ks = range(-400, 401)
        w = [weight(eps, m, r, abs(k)) for k in ks]
        z = mpmath.fsum(w)
        c = [mpmath.mpf(x) for x in PRIOR]
        total = mpmath.fsum(c)
        tau, alpha = mpmath.mpf(0.5), mpmath.mpf(utility.get("order", 1))
        bracket = mpmath.mpf(0)
        for k, wk in zip(ks, w):
            q = [max(ci + k, tau) / total for ci in c]
            if utility["metric"] == "kl":
                terms = [(ci / total) * mpmath.log(ci / total / qi) if ci > 0 else 0 for ci, qi in zip(c, q)]
                bracket += wk / z * mpmath.fsum(t - ci / total + qi for t, ci, qi in zip(terms, c, q))
            else:
                bracket += wk / z * mpmath.fsum((ci / total) ** alpha * qi ** (1 - alpha) - alpha * ci / total
                                                - (1 - alpha) * qi for ci, qi in zip(c, q))
        reference = bracket if utility["metric"] == "kl" else mpmath.log(1 + bracket) / (alpha - 1)
    assert solution.certificate.data["utility"]["value"] == pytest.approx(float(reference), rel=1e-9)
    assert dpopt.verify(solution.certificate.data).passed


# --------------------------------------------------------------------- counts
def _counts_spec(matrix, privacy, metric="l2", mechanism="staircase"):
    return {"dpopt": 1, "name": "weighted counts", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "linear", "attribute": "a", "matrix": matrix}, "adjacency": "add_remove",
            "privacy": privacy, "mechanism": mechanism, "utility": {"metric": metric}}


def test_counts_with_wide_moves_get_the_exact_discrete_staircase():
    # one record moves the answer by 3 (or 1): the step m = 3, pure ε = 1, K = 1
    solution = dpopt.solve(_counts_spec([[3, 1, 0]], {"pure": {"epsilon": 1}}, mechanism="auto"))
    mechanism, certificate = solution.mechanism, solution.certificate.data
    assert mechanism.family == "staircase" and mechanism.exact_noise
    p = certificate["mechanism"]["parameters"]
    assert (p["epsilon0_exact"], p["step_units"]) == ("1", 3)
    # its E X² by brute force over every boundary (the law summed in 30 digits): the design's r is the best one
    with mpmath.workdps(30):
        best = min(2 * brute_sum(Fraction(1), 3, r, lambda a: a * a)
                   / (1 + 2 * brute_sum(Fraction(1), 3, r, lambda a: 1)) for r in (1, 2, 3))
    assert certificate["utility"]["value"] == pytest.approx(float(best), rel=1e-12)
    assert certificate["utility"]["value"] < 2 * 3.0**2  # Laplace(Δ₁/ε = 3): E Z² = 18
    result = dpopt.verify(certificate)
    assert result.passed and "privacy.second_route" in [c.claim for c in result.checks if c.passed]
    out = mechanism.release(np.array([7.0]), np.random.default_rng(2))
    assert float(out[0]).is_integer()
    assert _rejected(_forged(certificate, step_units=1))  # K = 3 steps per move: 3ε


def test_the_unit_step_ties_with_the_discrete_laplace():
    # a histogram under add/remove: m = 1, the geometric law; auto keeps the family listed first (laplace)
    spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1}}, "mechanism": ["laplace", "staircase"], "utility": {"metric": "l2"}}
    solution = dpopt.solve(spec)
    values = {c.family: c.utility.value for c in solution.candidates if c.feasible}
    assert values["staircase"] == pytest.approx(values["laplace"], rel=1e-12)
    assert solution.mechanism.family == "laplace"
    assert values["staircase"] == pytest.approx(3 * discrete_laplace_moments(1.0)["second_moment"], rel=1e-12)


def test_a_zcdp_target_is_calibrated_on_the_discrete_profile():
    # ρ-zCDP on listed moves: the discrete staircase is calibrated on its own exact Rényi profile (through ε-DP it
    # cost 3% more than the continuous design here, which kept the floating-point law); now it is exact and better
    problem = {"zcdp": {"rho": 0.5}}
    solution = dpopt.solve(_counts_spec([[8, 0, 0], [0, 8, 8]], problem, metric="l1"))
    continuous = dpopt.solve(dict(_counts_spec([[8, 0, 0], [0, 8, 8]], problem, metric="l1"),
                                  sampler="floating_point"))
    assert solution.mechanism.exact_noise
    assert solution.certificate.data["utility"]["value"] < continuous.certificate.data["utility"]["value"]
    certificate = solution.certificate.data
    result = dpopt.verify(certificate)
    assert result.passed
    privacy = [c for c in result.checks if c.claim == "privacy"][0]
    assert privacy.method.startswith("exact discrete staircase privacy-loss distribution")
    p = certificate["mechanism"]["parameters"]
    # ε' above the ε-DP calibration's: pure ε = ρ-zCDP's conversion over K = 2 steps of m = 8 (one record moves two
    # counts by 8) would give ε' ≤ ε/2
    assert _rejected(_forged(certificate, epsilon0_exact=str(Fraction(p["epsilon0_exact"]) * Fraction(11, 10))))


def test_mallows_on_counts_is_the_discrete_laws_transport_cost():
    """W₁ on a histogram with integer prior values: μ (the values) and μ∗ν (values plus noise) both live on ℤ, so
    W₁ = ∫|F_μ − F_{μ∗ν}| = Σ_{x∈ℤ} |F_μ(x) − F_{μ∗ν}(x)| (the cdfs are constant on [x, x + 1)), with ν the pmf
    b^{level}/Z from the continuous density's definition (:func:`weight`, |k| ≤ 400, normalised in 30 digits). The
    spec's staircase is exact and its certified W₁ equals that sum (10⁻⁹ relative)."""
    prior = [1, 2, 3, 7]
    spec = {"dpopt": 1, "name": "h", "data": {"attributes": {"a": ["w", "x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1}}, "mechanism": "staircase",
            "utility": {"metric": "mallows", "prior": prior, "order": 1}}
    solution = dpopt.solve(spec)
    assert solution.mechanism.exact_noise and "idealized" not in str(solution.certificate.data)
    p = solution.certificate.data["mechanism"]["parameters"]
    eps, m, r = Fraction(p["epsilon0_exact"]), p["step_units"], p["boundary_units"]
    with mpmath.workdps(30):
        ks = list(range(-400, 401))
        w = [weight(eps, m, r, abs(k)) for k in ks]
        z = mpmath.fsum(w)
        nu = {k: wk / z for k, wk in zip(ks, w)}
        grid = range(min(prior) - 401, max(prior) + 402)
        mixture = {x: mpmath.fsum(nu.get(x - v, 0) for v in prior) / len(prior) for x in grid}
        f_mu = f_mix = mpmath.mpf(0)
        total = mpmath.mpf(0)
        for x in grid:
            f_mu += mpmath.mpf(prior.count(x)) / len(prior)
            f_mix += mixture[x]
            total += abs(f_mu - f_mix)
    assert solution.certificate.data["utility"]["value"] == pytest.approx(float(total), rel=1e-9)
    assert dpopt.verify(solution.certificate.data).passed
