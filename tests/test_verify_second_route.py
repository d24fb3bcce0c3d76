"""The second route of ``dpopt verify``: privacy from the noise law, sampler vs law, costs by integration.

Expected values come from closed forms derived independently of the numerical route:
the analytic-Gaussian profile (Balle & Wang 2018, Thm 8), the Laplace profile
δ(ε) = 1 − e^{−(ε₀ − ε)/2} (derived in the comment of its test), the Rényi divergence of
Gaussians αμ²/2 (Mironov 2017, Prop. 3), the exact two-coordinate Laplace trade-off of
Lee et al. (2022, eq. 16, :mod:`dpopt.privacy.tradeoff`), the Gaussian privacy-loss law
N(μ²/2, μ²) (Dong, Roth & Su 2022, §2), and scipy's distributions.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import make_spec
from scipy import special, stats
from solved_specs import SPECS, solved

import dpopt
from dpopt.certificate.second_route import (
    NOT_AVAILABLE,
    evaluate,
    is_not_available,
    noise_law_of,
    privacy_claim,
    sampler_claim,
    second_route_claims,
    utility_claim,
)
from dpopt.cli import main
from dpopt.mechanisms import registry
from dpopt.mechanisms.k_norm import KNormMechanism
from dpopt.mechanisms.laplace import LaplaceMechanism
from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal
from dpopt.noise.discrete_laplace import DiscreteLaplaceMarginal
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.laplace import LaplaceMarginal
from dpopt.noise.marginal import NoiseObjectMarginal
from dpopt.privacy.gaussian import gaussian_delta
from dpopt.privacy.pld import marginal_pld, product_pld, profile_tradeoff
from dpopt.privacy.tradeoff import contingency_laplace_tradeoff
from dpopt.spec.models import Privacy

SECOND_ROUTE = ("privacy.second_route", "privacy.second_route.sampler", "utility.integration")


# ------------------------------------------------------------------ the PLD bracket
@pytest.mark.parametrize("mu", [0.25, 1.0, 3.0])
def test_gaussian_bracket_holds_the_analytic_profile(mu):
    b = marginal_pld(GaussianMarginal(1.0), mu, 1e-4 * mu)
    for eps in (0.0, 0.5, 1.0, 2.0, 4.0):
        exact = gaussian_delta(eps, mu)
        lo, hi = b.lower.delta(eps)[0], b.upper.delta(eps)[0]
        assert lo <= exact <= hi
        if exact > 1e-9:
            assert hi - lo <= 0.01 * exact  # the bracket resolves δ to 1%


def test_laplace_bracket_holds_the_closed_form_profile():
    # One Laplace(1) coordinate shifted by ε₀: L = ε₀ on y ≤ 0 (mass 1/2), ε₀ − 2y on
    # (0, ε₀), −ε₀ beyond; E[(1 − e^{ε−L})₊] = ½(1 − e^{ε−ε₀}) + ½(1 − e^{−u})² with
    # u = (ε₀ − ε)/2, i.e. δ(ε) = 1 − e^{−(ε₀ − ε)/2} for 0 ≤ ε ≤ ε₀.
    eps0 = 1.3
    b = marginal_pld(LaplaceMarginal(1.0), eps0, 1e-4)
    for eps in (0.0, 0.4, 1.0):
        exact = 1.0 - math.exp(-(eps0 - eps) / 2.0)
        assert b.lower.delta(eps)[0] <= exact <= b.upper.delta(eps)[0]
        assert b.upper.delta(eps)[0] - b.lower.delta(eps)[0] <= 1e-3 * exact
    assert b.lower.max_loss() == pytest.approx(eps0, abs=1e-4)  # ess sup L = ε₀


def test_two_laplace_coordinates_match_the_exact_table_tradeoff():
    # A contingency table under replace-one moves two cells by ±1: Laplace(b) noise has the
    # exact trade-off T of Lee et al. (2022) eq. 16; its profile is δ(ε) = sup_α 1 − T(α) − e^ε α.
    b = 1.5
    bracket = product_pld([LaplaceMarginal(b)] * 2, [1.0, -1.0], 1e-4)
    alpha = np.concatenate([np.logspace(-12, -1, 4000), np.linspace(0.1, 1.0, 4000)])
    curve = contingency_laplace_tradeoff(b)(alpha)
    for eps in (0.0, 0.3, 0.9):
        exact = float(np.max(1.0 - curve - math.exp(eps) * alpha))
        lo, hi = bracket.lower.delta(eps)[0], bracket.upper.delta(eps)[0]
        assert lo - 1e-6 <= exact <= hi + 1e-6  # 1e-6: the α grid of the supremum


def test_renyi_of_the_gaussian_is_alpha_mu_squared_over_two():
    mu = 1.2
    b = marginal_pld(GaussianMarginal(1.0), mu, 1e-4 * mu)
    orders = np.array([1.5, 2.0, 4.0])
    assert np.allclose(b.lower.renyi(orders), orders * mu * mu / 2, rtol=1e-3)
    # at high orders the tilted law sits near the window's edge: the optimistic side stays a
    # lower bound but loses tightness
    high = np.array([8.0, 30.0])
    assert np.all(b.lower.renyi(high) <= high * mu * mu / 2)


def test_composed_discrete_gaussian_renyi_is_exact():
    # Canonne, Kamath & Steinke (2020), Prop. 5: for an integer shift t the Rényi divergence of
    # N_Z(0, σ²) and N_Z(t, σ²) equals the continuous one, αt²/(2σ²); two coordinates shifted
    # by ±1 with σ² = 2 give α/2. High orders weigh the largest losses most: the composition
    # must not put spurious mass there (an FFT's round-off did).
    m = DiscreteGaussianMarginal(2.0)
    bracket = product_pld([m, m], [1.0, -1.0], 1.4e-4)
    orders = np.array([2.0, 7.3, 20.0])
    lower = bracket.lower.renyi(orders)
    assert np.all(lower <= orders / 2 * (1 + 1e-9))
    assert np.allclose(lower[:2], orders[:2] / 2, rtol=1e-3)  # at α = 20 the window's edge shows


def test_the_exact_rho_of_a_large_discrete_gaussian_is_not_refuted_by_rounding():
    # ρ = 5·10⁻⁷ on a count (Δ₂² = 1): σ² = 1/(2ρ) = 10⁶, a dyadic lattice variance met with equality, and the
    # discrete Gaussian's D_α/α is exactly ρ (CKS 2020, Prop. 5). Near α = 1 the evaluation's rounding, divided by
    # (α − 1)α, exceeds 10⁻⁹ of ρ: the route must confirm or stay consistent, never refute (it refuted at
    # −6.6·10⁻⁹). A twice smaller variance (ρ doubled) must still be refuted.
    spec = make_spec(query={"kind": "histogram", "attribute": "race"}, adjacency="add_remove",
                     privacy={"zcdp": {"rho": 5e-7}}, mechanism="gaussian", utility={"metric": "l2"})
    solution = dpopt.solve(spec)
    assert solution.mechanism.lattice_sigma2 == 10**6
    assert dpopt.verify(solution.certificate).passed
    forged = copy.deepcopy(solution.certificate.data)
    forged["mechanism"]["parameters"]["sigma"] /= math.sqrt(2)
    failed = {c.claim for c in dpopt.verify(forged).failed}
    assert "privacy.second_route" in failed


def test_probabilistic_dp_level_of_the_gaussian():
    # L ~ N(μ²/2, μ²) under P: P(|L| > ε) = Φ((μ²/2 − ε)/μ) + Φ((−ε − μ²/2)/μ).
    mu, eps = 0.8, 1.0
    exact = special.ndtr((mu * mu / 2 - eps) / mu) + special.ndtr((-eps - mu * mu / 2) / mu)
    b = marginal_pld(GaussianMarginal(1.0), mu, 1e-4 * mu)
    v = evaluate(b, Privacy.model_validate({"pdp": {"epsilon": eps, "delta": exact * 1.01}}))
    assert v.lower <= exact <= v.upper and v.status == "confirmed"
    assert evaluate(b, Privacy.model_validate({"pdp": {"epsilon": eps, "delta": exact * 0.99}})).refuted


def test_discrete_laplace_loss_is_exact_on_the_lattice():
    b = marginal_pld(DiscreteLaplaceMarginal(2.0), 3, 1e-4)
    assert b.lower.max_loss() == pytest.approx(1.5, abs=1e-4)  # |t|/b
    assert b.upper.max_loss() == pytest.approx(1.5, abs=1e-4)


def test_profile_tradeoff_of_pure_dp_is_the_pure_dp_curve():
    # (ε, 0)-DP alone gives f(α) = max(0, 1 − e^ε α, e^{−ε}(1 − α)) (Dong, Roth & Su eq. 2.6).
    alpha = np.linspace(0, 1, 11)
    eps = 0.7
    expected = np.maximum(np.maximum(0, 1 - math.exp(eps) * alpha), math.exp(-eps) * (1 - alpha))
    assert np.allclose(profile_tradeoff(alpha, [eps], [0.0]), expected)


# ------------------------------------------------------------------------ marginals
def test_marginals_agree_with_scipy_and_direct_sums():
    x = np.array([0.0, 0.3, 2.0, 7.5])
    assert np.allclose(GaussianMarginal(1.7).tail(x), stats.norm(scale=1.7).sf(x), rtol=1e-12)
    assert np.allclose(LaplaceMarginal(0.6).tail(x), stats.laplace(scale=0.6).sf(x), rtol=1e-12)
    k = np.arange(-60, 61, dtype=float)
    raw = np.exp(-k * k / 8.0)
    dg = DiscreteGaussianMarginal(4.0)
    assert np.allclose(np.exp(dg.log_density(k)), raw / raw.sum(), rtol=1e-12)
    assert dg.tail(2.0) == pytest.approx(raw[k > 2].sum() / raw.sum(), rel=1e-12)
    r = math.exp(-1 / 3)
    dl = DiscreteLaplaceMarginal(3.0)
    assert np.allclose(np.exp(dl.log_density(k)), (1 - r) / (1 + r) * r ** np.abs(k), rtol=1e-12)
    assert dl.cdf(np.array([-1.0]))[0] == pytest.approx(((1 - r) / (1 + r) * r ** np.abs(k))[k <= -1].sum())


def test_moments_by_integration_match_closed_forms():
    assert GaussianMarginal(2.0).abs_moment(2) == pytest.approx(4.0, rel=1e-9)
    assert GaussianMarginal(2.0).abs_moment(1) == pytest.approx(2.0 * math.sqrt(2 / math.pi), rel=1e-9)
    assert LaplaceMarginal(1.5).abs_moment(2) == pytest.approx(2 * 1.5**2, rel=1e-9)
    gg = stats.gennorm(3.0, scale=1.2)  # a generalized Gaussian object with logpdf/sf
    m = NoiseObjectMarginal(gg, ("gennorm", 3.0), 1.2, True, tail=gg.sf)
    assert m.abs_moment(2) == pytest.approx(gg.var(), rel=1e-9)


# ------------------------------------------------------------------ every example spec
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_spec_states_the_second_route(path):
    """Each certificate carries the three second-route claims: made and passed, or an explicit N/A."""
    sol = solved(path)
    checks = {c["claim"]: c for c in sol.certificate["checks"]}
    for claim in SECOND_ROUTE:
        assert claim in checks and checks[claim]["passed"]
    law = noise_law_of(sol.mechanism)
    if not isinstance(law, str):  # a law: the privacy claim was made, not skipped
        assert not is_not_available(checks["privacy.second_route"])
        assert not is_not_available(checks["privacy.second_route.sampler"])


def _stricter(privacy: Privacy) -> Privacy:
    """A target the certified mechanism should not meet: half the ε or μ, a quarter of ρ."""
    d, p = privacy.definition, dict(privacy.parameters)
    if d == "gdp":
        p["mu"] /= 2
    elif d == "zcdp":
        p["rho"] /= 4
    else:
        p["epsilon"] /= 2
    return Privacy.model_validate({d: p})


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_second_route_refutes_a_stricter_target(path):
    """The route has power: each certified mechanism is refuted against half its ε or μ (ρ/4).

    Calibrations are tight for the claimed target, so the true ε, μ of the noise is near it
    and far above half of it; a route that passed everything would fail here.
    """
    sol = solved(path)
    law = noise_law_of(sol.mechanism)
    if isinstance(law, str):
        pytest.skip(law)
    check = privacy_claim(law, sol.space, _stricter(sol.spec.privacy))
    if is_not_available(check):
        pytest.skip(check.detail)
    assert not check.passed, check.detail


def test_every_family_has_a_law_or_a_stated_reason():
    """Every registered family, on the smallest example spec it supports (the fewest answers, then the name): a law,
    or the reason. Smallest first: k_norm on the first spec by name, a 16-cell replace-one histogram, refuses its hull
    (the root polytope's 2^16 − 2 facets exceed ``HULL_BUDGET``, before any work) and falls back to a ball."""
    seen = set()
    problems = sorted((dpopt.compile(path) for path in SPECS), key=lambda p: (p.query.dimension, p.spec.name))
    for problem in problems:
        if seen == set(registry()):
            break  # every family has its case
        spec, space = problem.spec, problem.space
        for family, cls in registry().items():
            if family in seen or cls.supports(problem) is not None:
                continue
            try:
                mechanism = cls.design(problem)
            except dpopt.DpoptError:
                continue
            seen.add(family)
            claims = second_route_claims(spec, space, mechanism)
            assert [c.claim for c in claims] == list(SECOND_ROUTE)
            assert all(c.passed for c in claims), [c.detail for c in claims if not c.passed]
            assert all(c.method == NOT_AVAILABLE and c.detail for c in claims if is_not_available(c))


# ------------------------------------------------------------------------- tampering
def _cert(**overrides) -> dict:
    return copy.deepcopy(dpopt.solve(make_spec(**overrides)).certificate.data)


@pytest.mark.parametrize("sampler, key", [("floating_point", "scale"), ("exact", "scale_exact")])
def test_edited_laplace_scale_fails_the_second_route_too(sampler, key):
    cert = _cert(privacy={"approx": {"epsilon": 1.0, "delta": 1e-6}}, mechanism="laplace", sampler=sampler)
    scale = cert["mechanism"]["parameters"][key]
    cert["mechanism"]["parameters"][key] = scale / 2 if sampler == "floating_point" else str(Fraction(scale) / 2)
    failed = {c.claim for c in dpopt.verify(cert).failed}
    assert {"privacy", "privacy.second_route"} <= failed


def test_edited_gaussian_sigma_fails_the_second_route_too():
    cert = _cert(mechanism="gaussian")
    cert["mechanism"]["parameters"]["sigma"] *= 0.9
    failed = {c.claim for c in dpopt.verify(cert).failed}
    assert {"privacy", "privacy.second_route"} <= failed


def _continuous_k_norm(stem: str):
    """The spec solved with ``sampler: floating_point``: the continuous K-norm law, whose density the second route
    reads (the lattice law, the default on counts, has none: its privacy is the exact check's)."""
    spec = dpopt.load_spec(next(p for p in SPECS if p.stem == stem))
    return dpopt.solve(spec.model_copy(update={"sampler": "floating_point"}))


def test_edited_k_norm_epsilon_fails_the_second_route_too():
    cert = copy.deepcopy(_continuous_k_norm("table_2x2_margins_pure").certificate.data)
    assert cert["mechanism"]["family"] == "k_norm"
    cert["mechanism"]["parameters"]["epsilon"] *= 1.5
    failed = {c.claim for c in dpopt.verify(cert).failed}
    assert "privacy.second_route" in failed


# ------------------------------------------------------------- sampler and integration
class _WrongGammaShape(KNormMechanism):
    """R drawn from Gamma(s, rate ε) instead of Gamma(s + 1): density ∝ ‖z‖^{-1}e^{−ε‖z‖}, not ε-DP."""

    def _radius(self, rng, size):
        return rng.gamma(self.rank, 1.0 / self.epsilon, size=size)


@pytest.mark.parametrize("stem", ["table_2x2_margins_pure", "table_3x4_margins_pure"])
def test_sampler_check_catches_a_wrong_gamma_shape(stem):
    sol = _continuous_k_norm(stem)
    m = sol.mechanism
    broken = _WrongGammaShape(m.epsilon, m.body, sol.space, m.fallback_reason)
    assert sampler_claim(noise_law_of(m), m).passed
    assert not sampler_claim(noise_law_of(broken), broken).passed


class _UnderNoisedLaplace(LaplaceMechanism):
    """Declares Laplace(b) but draws Laplace(0.8 b)."""

    def _sample(self, rng, size):
        return rng.laplace(0.0, 0.8 * self.scale, size=(size, self.dimension))


def test_sampler_check_catches_an_under_noised_sampler():
    sol = dpopt.solve(make_spec(privacy={"pure": {"epsilon": 1.0}}, mechanism="laplace"))
    broken = _UnderNoisedLaplace(sol.mechanism.scale, sol.mechanism.dimension)
    check = sampler_claim(noise_law_of(broken), broken)
    assert not check.passed and "p-value" in check.detail


class _WrongClosedForm(LaplaceMechanism):
    def _expected_l2(self, workload):
        return 1.01 * super()._expected_l2(workload)


def test_integration_catches_a_wrong_closed_form():
    sol = dpopt.solve(make_spec(privacy={"pure": {"epsilon": 1.0}}, mechanism="laplace"))
    good = utility_claim(noise_law_of(sol.mechanism), sol.spec, sol.mechanism)
    assert good.passed and not is_not_available(good)
    broken = _WrongClosedForm(sol.mechanism.scale, sol.mechanism.dimension)
    assert not utility_claim(noise_law_of(broken), sol.spec, broken).passed


class _NoLaw(LaplaceMechanism):
    """A family that states no law (its ``family`` is inherited, so it is not registered)."""

    def noise_law(self):
        return None


def test_a_family_without_a_law_gets_explicit_not_available_lines():
    sol = dpopt.solve(make_spec(privacy={"pure": {"epsilon": 1.0}}, mechanism="laplace"))
    claims = second_route_claims(sol.spec, sol.space, _NoLaw(sol.mechanism.scale, sol.mechanism.dimension))
    assert [c.claim for c in claims] == list(SECOND_ROUTE)
    assert all(is_not_available(c) and "states no noise law" in c.detail for c in claims)


def test_cli_verify_prints_not_available(tmp_path, capsys):
    path = next(p for p in SPECS if p.stem == "committee_mean_truncated_gg")  # noise depends on the answer
    cert = tmp_path / "certificate.json"
    solved(path).certificate.write(cert)
    assert main(["verify", str(cert)]) == 0
    out = capsys.readouterr().out
    assert "N/A   privacy.second_route:" in out and "not available" in out.splitlines()[-1]
