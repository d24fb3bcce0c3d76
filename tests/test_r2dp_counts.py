"""R²DP on counts: the discrete Laplace mixture, its exact sampler, its privacy on ℤ, its utilities and the family's
exact design (dpopt.mechanisms.r2dp_counts).

Expected values come from the definitions evaluated independently here: the pmf Σ_j w_j (1 − r_j)/(1 + r_j) r_j^{|k|}
(r_j = e^{−1/s_j}) summed in mpmath, the privacy loss as a brute-force maximum of the log pmf ratio over the
integers, the prior metrics as plain loops over the support, and the geometric law's closed forms.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
import yaml
from scipy import optimize, stats

import dpopt
from dpopt.mechanisms.base import IDEALIZED_NUMERICS
from dpopt.mechanisms.r2dp_counts import mallows_value
from dpopt.noise.discrete_laplace_mixture import DiscreteLaplaceMixture
from dpopt.noise.prior_metrics import kl_divergence, lattice_mallows_distance, renyi_divergence
from dpopt.optimize.r2dp_lattice_lp import lattice_objective, optimize_lattice_mixture
from dpopt.privacy.r2dp_lattice import mixture_epsilon_ball, pattern_epsilon_upper
from dpopt.sensitivity.patterns import ShiftPattern
from dpopt.spec.models import Utility

ROOT = Path(__file__).resolve().parents[1]
MIX = DiscreteLaplaceMixture((Fraction(1, 2), Fraction(3)), (1, 3))


def _pmf_mp(mixture: DiscreteLaplaceMixture, k: int) -> mpmath.mpf:
    """The definition: Σ_j w_j (1 − r_j)/(1 + r_j) r_j^{|k|}, r_j = e^{−1/s_j}, in mpmath."""
    total = sum(mixture.weights)
    out = mpmath.mpf(0)
    for s, n in zip(mixture.scales, mixture.weights):
        r = mpmath.exp(-mpmath.mpf(s.denominator) / s.numerator)
        out += mpmath.mpf(n) / total * (1 - r) / (1 + r) * r ** abs(k)
    return out


def test_pmf_and_tail_match_the_definition():
    with mpmath.workdps(40):
        ks = np.arange(-6, 7)
        assert MIX.pmf(ks) == pytest.approx([float(_pmf_mp(MIX, int(k))) for k in ks], rel=1e-12)
        assert float(mpmath.fsum(_pmf_mp(MIX, k) for k in range(-400, 401))) == pytest.approx(1.0, abs=1e-14)
        for x in (0, 2.5, 7):
            tail = mpmath.fsum(_pmf_mp(MIX, k) for k in range(math.floor(x) + 1, 400))
            assert float(MIX.tail(x)) == pytest.approx(float(tail), rel=1e-12)
        assert np.exp(MIX.log_pmf(ks)) == pytest.approx(MIX.pmf(ks), rel=1e-12)


def test_moments_match_brute_force_sums():
    with mpmath.workdps(40):
        terms = [(k, _pmf_mp(MIX, k)) for k in range(-600, 601)]
        expected = {"mean_abs": mpmath.fsum(abs(k) * p for k, p in terms),
                    "second_moment": mpmath.fsum(k * k * p for k, p in terms),
                    "fourth_moment": mpmath.fsum(k**4 * p for k, p in terms),
                    "within": mpmath.fsum(p for k, p in terms if abs(k) <= 1.5)}
    got = MIX.moments(1.5)
    for key, value in expected.items():
        assert got[key] == pytest.approx(float(value), rel=1e-12), key


def _prior_metrics_by_loops(mixture, prior, floor, order):
    """KL and the Rényi bracket of the clipped release max(c + Z, τ)/C, summed over |k| ≤ 400 with plain loops."""
    total = sum(prior)
    kl = bracket = 0.0
    for c in prior:
        p = c / total
        for k in range(-400, 401):
            w = float(_pmf_mp(mixture, k))
            q = max(c + k, floor) / total
            kl += w * ((p * math.log(p / q) if p > 0 else 0.0) - p + q)
            bracket += w * (p**order * q ** (1 - order) - order * p - (1 - order) * q)
    return kl, math.log(1 + bracket) / (order - 1)


@pytest.mark.parametrize("order", [2.0, 0.5])
def test_prior_metrics_match_plain_loops(order):
    prior, floor = [0, 1, 3, 40], 0.5  # counts near 0: the floor clips a large share of the releases
    kl, renyi = _prior_metrics_by_loops(MIX, prior, floor, order)
    assert kl_divergence(MIX, prior, floor) == pytest.approx(kl, rel=1e-10)
    assert renyi_divergence(MIX, prior, floor, order) == pytest.approx(renyi, rel=1e-10)


def test_sampler_law_and_component_frequencies():
    # 200,000 draws: χ² against the pmf with ends pooled at expected count < 5 (df ≈ 40); a correct sampler fails
    # at level 1e-4 with probability 1e-4 (fixed seed: reproducible). Power: the same test rejects the mixture with
    # its weights swapped (3:1 instead of 1:3), whose non-centrality n Σ (p' − p)²/p is in the thousands (checked)
    rng = np.random.default_rng(20261207)
    n = 200_000

    def chi2_pvalue(draws):
        ks = np.arange(-80, 81)
        p = np.array([float(_pmf_mp(MIX, int(k))) for k in ks])
        keep = p * n >= 5
        lo, hi = ks[keep].min(), ks[keep].max()
        expected = p[(ks >= lo) & (ks <= hi)].copy()
        expected[0] += 1.0 - p[ks <= hi].sum()  # the whole left tail, by symmetry of the right one
        expected[-1] += 1.0 - p[ks >= lo].sum()
        observed = np.bincount(np.clip(draws, lo, hi) - lo, minlength=hi - lo + 1)
        return stats.chisquare(observed, expected / expected.sum() * n).pvalue

    draws = MIX.sample(rng, n)
    assert draws.dtype == np.int64
    assert chi2_pvalue(draws) > 1e-4
    swapped = DiscreteLaplaceMixture(MIX.scales, (3, 1))
    with mpmath.workdps(30):
        ks = np.arange(-60, 61)
        p = np.array([float(_pmf_mp(MIX, int(k))) for k in ks])
        q = np.array([float(_pmf_mp(swapped, int(k))) for k in ks])
    assert n * np.sum((q - p) ** 2 / p) > 1000
    assert chi2_pvalue(swapped.sample(rng, n)) < 1e-4
    # the component: one uniform integer below N = 4, component 0 with probability 1/4 exactly (5 SE)
    share = np.mean(MIX.components(rng, n) == 0)
    assert abs(share - 0.25) <= 5 * math.sqrt(0.25 * 0.75 / n)


@pytest.mark.parametrize("shift", [1, 2, 3])
def test_privacy_loss_by_enumeration(shift):
    # the supremum of |ln p(k) − ln p(k + Δ)| over the integers, by brute force from the definition, is the closed
    # form ln a(0)/a(Δ), attained at k = 0 (or k = −Δ); the 256-bit ball contains it
    with mpmath.workdps(50):
        losses = {k: abs(mpmath.log(_pmf_mp(MIX, k) / _pmf_mp(MIX, k + shift))) for k in range(-300, 301)}
        worst = max(losses, key=losses.get)
        value = losses[worst]
        assert worst in (0, -shift)
        ball = mixture_epsilon_ball(MIX, shift)
        assert mpmath.mpf(ball.lower().str(60, radius=False)) <= value <= mpmath.mpf(ball.upper().str(60, radius=False))
        pattern = ShiftPattern((Fraction(shift),), np.array([[2]]))  # two coordinates moved by Δ
        upper = pattern_epsilon_upper(MIX, pattern)
        bound = mpmath.mpf(upper.numerator) / upper.denominator  # rigorous: above 2ε up to the 50-digit evaluation
        assert 2 * value - mpmath.mpf(10) ** -45 <= bound <= 2 * value + mpmath.mpf(10) ** -40


@pytest.mark.parametrize("metric", [{"metric": "l2"}, {"metric": "usefulness", "gamma": 0.5},
                                    {"metric": "usefulness", "gamma": 2.0}])
def test_the_lp_agrees_with_the_unit_shift_theorem(metric):
    # under unit shifts the geometric law is optimal among all mixtures (monotone likelihood ratio): the LP's dual
    # certificate, an independent route, finds the same
    objective = lattice_objective(Utility.model_validate(metric))
    t = np.logspace(-2, 2, 401) * 2.0
    scales = sorted({Fraction(1.0 / x) for x in t} | {Fraction(1, 2)})
    optimum = optimize_lattice_mixture(objective, 2.0, 1, scales)
    assert optimum.laplace_optimal


def _count_spec(**overrides):
    spec = {"dpopt": 1, "name": "r2dp counts", "data": {"attributes": {"a": ["x", "y"]}},
            "query": {"kind": "linear", "attribute": "a", "matrix": [[2, 0]]},  # integer answers, shifts of 2
            "adjacency": "add_remove", "privacy": {"pure": {"epsilon": 3.0}}, "mechanism": "r2dp",
            "utility": {"metric": "usefulness", "gamma": 0.5}}
    spec.update(overrides)
    return spec


@pytest.fixture(scope="module")
def shift_two():
    return dpopt.solve(_count_spec())


def test_shift_two_mixture_beats_the_discrete_laplace(shift_two):
    mechanism, cert = shift_two.mechanism, shift_two.certificate
    mixture = DiscreteLaplaceMixture.from_parameters(mechanism.parameters["mixture"])
    assert mechanism.exact_noise and len(mixture.scales) == 2
    with mpmath.workdps(40):
        value = float(_pmf_mp(mixture, 0))  # P(Z = 0): usefulness at γ = 0.5
        r = mpmath.exp(-mpmath.mpf(3) / 2)  # the geometric law at ε = 3 for shifts of 2: scale 2/3
        geometric = float((1 - r) / (1 + r))
    assert cert["utility"]["value"] == pytest.approx(value, rel=1e-12)
    assert value > 1.1 * geometric  # 0.715 against 0.635
    design = mechanism.parameters["design"]
    assert value <= design["bound_all_mixtures"] * (1 + 1e-9)
    assert IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    assert dpopt.verify(cert).passed


@pytest.mark.parametrize("tamper", ["swap_weights", "smaller_scale", "float_weight"])
def test_verify_rejects_a_forged_mixture(shift_two, tamper):
    data = copy.deepcopy(shift_two.certificate.data)
    mixture = data["mechanism"]["parameters"]["mixture"]
    if tamper == "swap_weights":  # more weight on the less private atom: ε > 3
        mixture["weights"] = mixture["weights"][::-1]
    elif tamper == "smaller_scale":
        mixture["scales"][0] = str(Fraction(mixture["scales"][0]) * Fraction(99, 100))
    else:
        mixture["weights"][0] = mixture["weights"][0] + 0.5
    result = dpopt.verify(data)
    assert not result.passed


def test_count_spec_is_exact_end_to_end():
    sol = dpopt.solve(ROOT / "specs" / "r2dp_count_usefulness.yaml")
    mechanism, cert = sol.mechanism, sol.certificate
    assert mechanism.parameters["sampler"] == "exact" and mechanism.exact_noise
    assert IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    # the geometric law at ε = 5: P(Z = 0) = (1 − e^{−5})/(1 + e^{−5}) = tanh(5/2); the scale is Δ/ε rounded up
    assert cert["utility"]["value"] == pytest.approx(math.tanh(2.5), rel=1e-5)
    assert cert["utility"]["value"] <= math.tanh(2.5)
    out = mechanism.release([12.0], rng=np.random.default_rng(5))
    assert out == np.round(out)
    with pytest.raises(dpopt.DataError):
        mechanism.release([12.5], rng=np.random.default_rng(5))
    assert dpopt.verify(cert).passed


def test_specs_the_lattice_does_not_serve_keep_the_continuous_design():
    base = _count_spec(query={"kind": "count"}, privacy={"pure": {"epsilon": 2.0}})
    floating = dpopt.solve({**base, "sampler": "floating_point"}).mechanism
    assert "second_fold" in floating.parameters and not floating.exact_noise
    assert any("no exact lattice measurement: the spec asks for sampler: floating_point" in n for n in floating.notes())


# ------------------------------------------------------------------ Mallows on the lattice
def _mixture_cdf_mp(mixture: DiscreteLaplaceMixture, x: int) -> mpmath.mpf:
    """P(Z ≤ x) on ℤ from the tail of each component: P(Z > m) = r^{m+1}/(1 + r) for m ≥ 0 (a geometric series of
    the pmf (1 − r)/(1 + r) r^{|k|}), and P(Z ≤ x) = P(Z > −x − 1) for x < 0 (symmetry)."""
    total = sum(mixture.weights)
    out = mpmath.mpf(0)
    for s, n in zip(mixture.scales, mixture.weights):
        r = mpmath.exp(-mpmath.mpf(s.denominator) / s.numerator)
        out += mpmath.mpf(n) / total * (1 - r ** (x + 1) / (1 + r) if x >= 0 else r ** (-x) / (1 + r))
    return out


def _w1_by_cdfs(mixture: DiscreteLaplaceMixture, prior: list[int], reach: int) -> float:
    """W_1(μ, μ∗ν) = ∫ |F_μ − F_{μ∗ν}| (the cdf form of W_1 on ℝ, not the quantile coupling): for integer prior
    values both cdfs are constant on [s, s + 1), so the integral is a sum over the integers s, |s| ≤ reach (beyond,
    the integrand is a geometric tail below 1e-40 for the scales used here), in mpmath."""
    n = len(prior)
    total = mpmath.mpf(0)
    for s in range(min(prior) - reach, max(prior) + reach + 1):
        f_mu = mpmath.mpf(sum(1 for x in prior if x <= s)) / n
        f_nu = sum(_mixture_cdf_mp(mixture, s - x) for x in prior) / n
        total += abs(f_mu - f_nu)
    return float(total)


@pytest.mark.parametrize("prior", [[1, 2, 3], [0, 0, 7, 2]])
def test_lattice_mallows_order_one_equals_the_cdf_integral(prior):
    utility = Utility(metric="mallows", prior=prior, order=1)
    expected = _w1_by_cdfs(MIX, prior, 400)  # scale 3: the tail beyond 400 is below e^{−133}
    # the truncation moves W_1 by ≤ 1e-12 (proven bound); float64 sums over ~10³ terms add ≤ 1e-13
    assert mallows_value(MIX, utility) == pytest.approx(expected, abs=2e-12)


def test_lattice_mallows_order_two_equals_the_transport_lp():
    # W_2² as the optimal transport LP (scipy's HiGHS) between μ and the truncated μ∗ν on the same atoms: an
    # independent optimisation, not the quantile coupling; both sides use the pmf on |k| ≤ K with the rest moved to
    # 0, so they agree to the LP's tolerance (1e-9 on the squared cost)
    prior, k = [1, 2, 3], 40
    mixture = DiscreteLaplaceMixture((Fraction(1, 2), Fraction(2)), (3, 1))
    pmf = mixture.pmf(np.arange(-k, k + 1))
    pmf[k] += 1.0 - pmf.sum()
    targets = np.arange(min(prior) - k, max(prior) + k + 1)
    nu = np.zeros(targets.size)
    for x in prior:
        nu[x + np.arange(-k, k + 1) - targets[0]] += pmf / len(prior)
    cost = (np.subtract.outer(np.array(prior, float), targets) ** 2).ravel()
    rows, m = len(prior), targets.size
    a_eq = np.vstack([np.kron(np.eye(rows), np.ones(m)), np.kron(np.ones(rows), np.eye(m))])
    b_eq = np.concatenate([np.full(rows, 1.0 / rows), nu])
    # the last target's equality is implied by the others (both margins total 1): dropped, so float64 rounding of
    # the totals cannot make the LP infeasible
    lp = optimize.linprog(cost, A_eq=a_eq[:-1], b_eq=b_eq[:-1], bounds=(0, None), method="highs")
    assert lp.status == 0
    assert lattice_mallows_distance(pmf, prior, 2.0) ** 2 == pytest.approx(lp.fun, abs=1e-9)


def test_tail_moment_bound_holds():
    # E|Z|^p 1{|Z| > K} summed in mpmath far enough (terms beyond 4000 are below e^{−1300}) against the bound
    mixture = DiscreteLaplaceMixture((Fraction(1, 2), Fraction(3)), (1, 3))
    for order, k in ((1.0, 20), (2.0, 40), (3.5, 60)):
        exact = 2 * sum(_pmf_mp(mixture, j) * mpmath.mpf(j) ** order for j in range(k + 1, 4000))
        bound = mixture.tail_moment_bound(order, k)
        # the bound is head/(1 − ρ) per component and the exact tail is at least its head term: the ratio is at most
        # 1/(1 − ρ) of the scale-3 component, ρ ≤ e^{−1/3}(62/61)^{3.5} = 0.7585 here, so below 4.2
        assert float(exact) <= bound <= 4.2 * float(exact)
        assert mixture.tail_moment_bound(order, mixture.moment_truncation(order, 1e-24)) <= 1e-24


def test_mallows_histogram_is_exact_end_to_end():
    spec = {"dpopt": 1, "name": "mallows", "data": {"attributes": {"a": ["x", "y", "z"]}},
            "query": {"kind": "histogram", "attribute": "a"}, "adjacency": "add_remove",
            "privacy": {"pure": {"epsilon": 1.0}}, "mechanism": "r2dp",
            "utility": {"metric": "mallows", "prior": [1, 2, 3], "order": 1}}
    sol = dpopt.solve(spec)
    mechanism, cert = sol.mechanism, sol.certificate
    assert mechanism.parameters["sampler"] == "exact" and mechanism.exact_noise
    assert IDEALIZED_NUMERICS not in cert["mechanism"]["notes"]
    law = DiscreteLaplaceMixture.from_parameters(mechanism.parameters["mixture"])
    # add/remove on a histogram moves one cell by 1: the discrete Laplace of scale 1/ε rounded up to a dyadic
    assert law.scales[0] >= 1 and law.scales[0] - 1 < Fraction(1, 2**19)
    assert cert["utility"]["value"] == pytest.approx(_w1_by_cdfs(law, [1, 2, 3], 200), abs=2e-12)
    assert dpopt.verify(cert).passed
    floating = dpopt.solve({**spec, "sampler": "floating_point"})
    assert "second_fold" in floating.mechanism.parameters and not floating.mechanism.exact_noise
    assert IDEALIZED_NUMERICS in floating.certificate["mechanism"]["notes"]


def test_mallows_under_larger_shifts_picks_the_least_candidate():
    spec = _count_spec(data={"attributes": {"a": ["x", "y", "z"]}},
                       query={"kind": "linear", "attribute": "a", "matrix": [[2, 0, 0], [0, 3, 0], [0, 0, 1]]},
                       privacy={"pure": {"epsilon": 1.0}},
                       utility={"metric": "mallows", "prior": [4, 0, 9], "order": 2})
    sol = dpopt.solve(spec)
    design = sol.mechanism.parameters["design"]
    assert set(design["mallows_candidates"]) == {"discrete_laplace", "lp_l1", "lp_l2"}
    law = DiscreteLaplaceMixture.from_parameters(sol.mechanism.parameters["mixture"])
    value = mallows_value(law, Utility(metric="mallows", prior=[4, 0, 9], order=2))
    assert value == min(design["mallows_candidates"].values()) == sol.certificate["utility"]["value"]
    assert IDEALIZED_NUMERICS not in sol.certificate["mechanism"]["notes"]
    assert dpopt.verify(sol.certificate).passed


def test_converted_targets_verify():
    sol = dpopt.solve(_count_spec(query={"kind": "count"}, privacy={"gdp": {"mu": 1.0}}, utility={"metric": "l2"}))
    assert sol.mechanism.parameters["sampler"] == "exact"
    assert dpopt.verify(sol.certificate).passed


def test_unequal_shifts_fill_the_budget():
    # person level: a person moves the 4 × 5 table by (3, 1), (2, 2), (1, 1, 1, 1), ... (l1 ≤ 4, l∞ = 3). The design
    # at ε/k for Δ∞ (k = 2 cells, shift 3: scale 6) is loose; one discrete Laplace atom of scale s has the loss
    # Σ_i |v_i|/s = Δ₁/s, so the budget is filled at s = Δ₁/ε = 4 (rounded up by the dyadic grid and the 2^-20 steps)
    spec = yaml.safe_load((ROOT / "specs" / "visits_person_level.yaml").read_text())
    sol = dpopt.solve({**spec, "mechanism": "r2dp", "privacy": {"pure": {"epsilon": 1.0}}})
    mixture = DiscreteLaplaceMixture.from_parameters(sol.mechanism.parameters["mixture"])
    assert mixture.scales == (mixture.scales[0],) and 4 <= mixture.scales[0] <= 4 * (1 + 1e-5)
    assert dpopt.verify(sol.certificate).passed


def test_verify_of_a_mixture_on_real_answers_fails_in_one_claim(shift_two):
    # a forged certificate: the mixture's parameters under a spec whose answers are not counts
    data = copy.deepcopy(shift_two.certificate.data)
    data["spec"]["query"]["matrix"] = [[0.5, 0]]
    result = dpopt.verify(data)
    assert not result.passed
