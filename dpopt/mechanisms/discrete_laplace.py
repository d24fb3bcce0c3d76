r"""Discrete Laplace noise for integer-valued queries, sampled exactly (Canonne, Kamath & Steinke 2020).

The discrete Laplace distribution of scale b > 0 on the integers,

.. math:: P[Y = y] = \frac{1 - r}{1 + r}\, r^{|y|}, \qquad r = e^{-1/b},

added i.i.d. to each coordinate of a query with integer values and l1 sensitivity Δ₁
gives exactly ε = Δ₁/b (the privacy loss ratio P[y]/P[y − v] is at most e^{‖v‖₁/b}).
Targets: pure ε; (ε, δ) by the exact profile of the noise law, a finite sum for each move
pattern of the neighbouring differences (:mod:`dpopt.privacy.discrete_laplace`; through
pure ε, δ unused, when the differences cannot be listed); μ-GDP by the exact trade-off function of each
move pattern (the polygon of its privacy-loss law's vertices, :func:`~dpopt.privacy.discrete_laplace.discrete_laplace_gdp_mu`),
else through ε-DP (:mod:`dpopt.privacy.pure_conversion`); ρ-zCDP by the Rényi divergences
of each move pattern, calibrated on the peak of D_α/α (an interior order at small ρ) and
certified over intervals of orders, with ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4) as
the fallback when the differences are not listed.

The scale is a dyadic rational b = p/2^k and every draw is made in integer arithmetic
from uniform integers by the exact sampler of :mod:`dpopt.noise.discrete_laplace` (CKS
Algorithms 1 and 2), which also holds the law's moments.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 and 2.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below, written
from dpopt.core.checks import Check
from dpopt.core.roots import bisect_feasible
from dpopt.core.rounding import nudge_until
from dpopt.domain.queries import CountingQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import SCALE_MONOTONE_METRICS
from dpopt.mechanisms.integer_noise import (
    EXACT_SAMPLER_NOTE,
    IntegerNoiseMechanism,
    dyadic_ceil,
    move_patterns,
)
from dpopt.noise.discrete_laplace import (
    DiscreteLaplaceMarginal,
    discrete_laplace_moments,
    sample_discrete_laplace,
)
from dpopt.noise.law import ProductLaw
from dpopt.privacy.discrete_laplace import (
    discrete_laplace_delta,
    discrete_laplace_gdp_mu,
    discrete_laplace_delta_mp,
    discrete_laplace_kl_scale,
    discrete_laplace_renyi,
    discrete_laplace_zcdp_holds,
)
from dpopt.privacy.pure_conversion import epsilon_dp_check, pure_epsilon_for, pure_privacy_check
from dpopt.privacy.zcdp import renyi_peak
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")

MAX_SCALE = Fraction(2**40)


# ----------------------------------------------------------------------- privacy
def discrete_laplace_privacy_check(space: SensitivitySpace, scale: Fraction, privacy: Privacy) -> Check:
    """Check that discrete Laplace noise of scale b meets the target.

    pure: exact rational arithmetic on ε = Δ₁/b; approx: the exact profile of each move
    pattern in 60 digits (through ε = Δ₁/b, δ unused, when the differences are not listed);
    zcdp: (Δ₁/b)²/2 ≤ ρ in exact rationals, else the Rényi divergences of each move pattern
    over intervals of orders.
    """
    eps = Fraction(space.l1) / scale
    if privacy.definition == "gdp":
        mu = _gdp_mu(space, scale)
        if mu is not None:
            return Check(
                "privacy",
                "exact trade-off function of each move pattern: the polygon through the vertices (α_k, β_k) of the "
                "tests J ≥ k of the privacy-loss law, above G_μ iff every vertex is (Dong, Roth & Su 2022); "
                "μ = max_k Φ⁻¹(1 − α_k) − Φ⁻¹(β_k) over the patterns, 60 digits",
                bool(mu + GDP_MARGIN <= float_below(privacy.parameters["mu"])),
                f"μ = {mpmath.nstr(mu, 17)} vs μ = {privacy.parameters['mu']} (b = {scale})",
            )
        return pure_privacy_check(eps, privacy, "ε = Δ₁/b of discrete Laplace noise (Canonne, Kamath & Steinke "
                                  "2020), exact rational", f"Δ₁/b = {float(eps):.17g} (b = {scale})")
    patterns = move_patterns(space) if privacy.definition in ("approx", "zcdp") else None
    if privacy.definition == "zcdp" and patterns is not None and eps * eps / 2 > written(privacy.parameters["rho"]):
        passed, detail = discrete_laplace_zcdp_holds(scale, patterns, privacy.parameters["rho"])
        return Check(
            "privacy",
            "discrete-Laplace Rényi divergences D_α ≤ ρα for all α > 1 (geometric series, summed over the "
            "coordinates of each move pattern); D_α non-decreasing in α bounds each interval of orders (60 digits)",
            passed,
            f"{detail} (b = {scale})",
        )
    if patterns is None or privacy.definition == "zcdp":
        return epsilon_dp_check(Fraction(space.l1) / scale, privacy, "discrete Laplace noise on integer queries",
                                "Canonne, Kamath & Steinke 2020")
    p = privacy.parameters
    delta = max(discrete_laplace_delta_mp(float_below(p["epsilon"]), scale, t) for t in patterns)
    shown = ", ".join("(" + ", ".join(map(str, t)) + ")" for t in patterns[:6]) + (", …" if len(patterns) > 6 else "")
    return Check(
        "privacy",
        "exact discrete-Laplace profile δ(ε) = Σ_J P[J](1 − e^{ε − (‖Δ‖₁ − 2J)/b})₊, the loss of a move being "
        f"(‖Δ‖₁ − 2J)/b with J a finite integer sum, max over the move patterns |Δ| ∈ {{{shown}}}; 60 digits",
        bool(delta <= float_below(p["delta"])),
        f"δ(ε={p['epsilon']}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']} (b = {scale})",
    )


GDP_MARGIN = 1e-30
"""Added to the 60-digit μ of :func:`~dpopt.privacy.discrete_laplace.discrete_laplace_gdp_mu` before it is compared
with the target (its evaluation error is below 10⁻⁵⁰)."""


def _gdp_mu(space: SensitivitySpace, scale: Fraction):
    """The largest exact μ over the move patterns (:func:`~dpopt.privacy.discrete_laplace.discrete_laplace_gdp_mu`);
    None when the differences are not listed or a pattern's vertices are beyond 60 digits."""
    patterns = move_patterns(space)
    if patterns is None:
        return None
    mus = [discrete_laplace_gdp_mu(scale, t) for t in patterns]
    return None if any(m is None for m in mus) else max(mus)


def _gdp_scale(space: SensitivitySpace, mu: float, start: Fraction) -> Fraction | None:
    """The dyadic b below ``start`` (the ε-DP route's scale) whose exact trade-off functions meet μ-GDP: bisection
    in log b, rounded up and moved up until the 60-digit check accepts it; None when the patterns are not listed."""
    target = float_below(mu) - GDP_MARGIN

    def passes(b: float) -> bool:
        value = _gdp_mu(space, dyadic_ceil(Fraction(b)))
        return value is not None and value <= target

    hi = float(start)
    if not passes(hi):
        return None
    scale = dyadic_ceil(Fraction(bisect_feasible(passes, hi / 8.0, hi, steps=40, geometric=True)))
    for _ in range(4):
        if passes(float(scale)) and (value := _gdp_mu(space, scale)) is not None and value <= target:
            return scale
        scale = dyadic_ceil(scale * (1 + Fraction(1, 10**8)))
    return None


def _approx_scale(space: SensitivitySpace, epsilon: float, delta: float) -> Fraction | None:
    """The float64 root of max_patterns δ(ε; b) = δ (bisection in log b), or None if S is not listed."""
    patterns = move_patterns(space)
    if patterns is None:
        return None

    def passes(b: float) -> bool:
        return max(discrete_laplace_delta(epsilon, b, t) for t in patterns) <= delta

    hi = float(space.l1) / epsilon
    lo = hi / 2.0
    while passes(lo) and lo > 1e-12:
        lo /= 2.0
    return Fraction(bisect_feasible(passes, lo, hi, steps=80, geometric=True))


def _zcdp_scale(space: SensitivitySpace, rho: float) -> Fraction | None:
    """The dyadic b whose peak sup_α D_α/α (:func:`~dpopt.privacy.zcdp.renyi_peak`: at α → 1 for large
    ρ, at an interior order for small ρ) meets ρ(1 − 1e-8) for every move pattern, moved up until
    the interval-of-orders certificate accepts it; None when the differences are not listed or the
    certificate does not accept it within a few steps."""
    patterns = move_patterns(space)
    if patterns is None:
        return None

    def peak(b: float) -> float:
        scale = Fraction(b)
        return max(renyi_peak(lambda a, t=t: float(discrete_laplace_renyi(a, scale, t).mid()),
                              sum(t) / b, rho) for t in patterns)

    hi = float(space.l1) / math.sqrt(2.0 * rho)  # ε-DP ⇒ ε²/2-zCDP: enough
    lo = hi / 4.0
    hi = bisect_feasible(lambda b: peak(b) <= rho * (1 - 1e-8), lo, hi, steps=40, geometric=True)
    scale = dyadic_ceil(Fraction(hi))
    for _ in range(4):
        if discrete_laplace_zcdp_holds(scale, patterns, rho)[0]:
            return scale
        scale = dyadic_ceil(scale * (1 + Fraction(1, 10**8)))
    return None


def _ceil_sqrt(x: Fraction, q: int) -> Fraction:
    """The smallest p/q with (p/q)² ≥ x, exactly."""
    target = x * q * q  # p² ≥ target
    p = math.isqrt(math.ceil(target))
    while Fraction(p * p) < target:
        p += 1
    return Fraction(p, q)


def zcdp_scale_floor(space: SensitivitySpace, rho: float) -> float | None:
    """A floor on the scale the ρ-zCDP design of discrete Laplace noise takes (:meth:`DiscreteLaplaceMechanism.design`,
    whose argument :meth:`DiscreteLaplaceMechanism.utility_bound` states): the root of max_t KL = ρ over the move
    patterns, or Δ₁/√(2ρ) when they are not listed, less 10⁻⁹ relative; None out of the sampler's range."""
    patterns = move_patterns(space)
    if patterns is None:
        scale = float(space.l1) / math.sqrt(2.0 * rho)
    else:
        scale = discrete_laplace_kl_scale(patterns, rho)
    scale *= 1 - 1e-9
    return scale if math.isfinite(scale) and 0 < scale <= MAX_SCALE else None


class DiscreteLaplaceMechanism(IntegerNoiseMechanism):
    """i.i.d. discrete Laplace noise of scale b = p/2^k on each coordinate of an integer query."""

    family = "discrete_laplace"
    title = "Discrete Laplace (exact sampler)"

    def __init__(self, scale: Fraction, dimension: int):
        self.scale = Fraction(scale)
        if not 0 < self.scale <= MAX_SCALE:
            raise ValueError(
                f"discrete Laplace scale {self.scale} is outside (0, 2^40] (exact sampler range)"
            )
        self.dimension = int(dimension)

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec = problem.spec
        if not isinstance(problem.query, CountingQuery) or not problem.query.integer_answers:
            return ("discrete noise needs an integer-valued query (counts, histograms, tables, marginals, linear "
                    "queries with whole weights)")
        if spec.privacy.definition not in ("pure", "approx", "zcdp", "gdp"):
            return f"no {spec.privacy.definition} calibration for discrete Laplace noise in this version"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        r"""Under ρ-zCDP: the utility at the smallest scale the Kullback–Leibler limit allows.

        The design certifies every move pattern t (D_α ≤ ρα for α > 1, or (Δ₁/b)²/2 ≤ ρ,
        which implies it for ‖t‖₁ ≤ Δ₁: Bun & Steinke 2016, Prop. 1.4), so letting α → 1 its
        KL divergence (:func:`~dpopt.privacy.discrete_laplace.discrete_laplace_kl`, decreasing
        in b) is ≤ ρ: b is at least the root of max_t KL = ρ
        (:func:`~dpopt.privacy.discrete_laplace.discrete_laplace_kl_scale`); Δ₁/√(2ρ) when the
        moves are not listed (the design then uses that scale, rounded up). E|Y|, E Y² grow with
        b (r = e^{−1/b}: 2r/(1 − r²), 2r/(1 − r)²) and P(|Y| ≤ γ) = 1 − 2r^{⌊γ⌋+1}/(1 + r)
        falls, so the closed forms at that b (rounded down) bound the design for l1, l2 (any
        workload), max_variance and usefulness. None for other targets and metrics.
        """
        spec, space = problem.spec, problem.space
        if (spec.privacy.definition != "zcdp" or spec.utility.metric not in SCALE_MONOTONE_METRICS
                or cls.supports(problem) is not None or space.l1 == 0):
            return None
        scale = zcdp_scale_floor(space, spec.privacy.parameters["rho"])
        if scale is None:
            return None
        value = cls(Fraction(scale), space.dimension).expected_utility(spec.utility)
        return value.value if value.method == "closed form" else None

    @classmethod
    def design(cls, problem: Problem) -> DiscreteLaplaceMechanism:
        spec, space = problem.spec, problem.space
        p = spec.privacy.parameters
        if space.l1 == 0:
            raise CalibrationError("the l1 sensitivity is 0: there is nothing to protect with noise")
        start = _approx_scale(space, p["epsilon"], p["delta"]) if spec.privacy.definition == "approx" else None
        if start is not None:
            scale = dyadic_ceil(Fraction(nudge_until(
                float(dyadic_ceil(start)),
                lambda b: discrete_laplace_privacy_check(space, dyadic_ceil(Fraction(b)), spec.privacy).passed,
                up=True,
            )))
        elif "epsilon" in p:
            scale = dyadic_ceil(Fraction(space.l1) / written(p["epsilon"]))
        elif spec.privacy.definition == "gdp":  # ε-DP ⇒ μ-GDP (randomized response, Lee et al. 2022, eq. 12)
            scale = dyadic_ceil(Fraction(space.l1) / Fraction(pure_epsilon_for(spec.privacy)))
            tight = _gdp_scale(space, p["mu"], scale)  # the exact trade-off functions of the move patterns
            scale = tight if tight is not None and tight < scale else scale
        else:
            target = Fraction(space.l1) ** 2 / (2 * written(p["rho"]))  # b² ≥ Δ₁²/(2ρ)
            scale = _ceil_sqrt(target, dyadic_ceil(Fraction(math.sqrt(float(target)))).denominator)
            renyi = _zcdp_scale(space, p["rho"])
            scale = renyi if renyi is not None and renyi < scale else scale
        if scale > MAX_SCALE:
            raise CalibrationError(
                f"the discrete Laplace scale {float(scale):.6g} exceeds the exact sampler's 2^40"
            )
        mechanism = cls(scale, space.dimension)
        check = discrete_laplace_privacy_check(space, mechanism.scale, spec.privacy)
        if not check.passed:
            raise CalibrationError(f"discrete Laplace calibration failed its exact check ({check.detail})")
        return mechanism

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> DiscreteLaplaceMechanism:
        return cls(Fraction(parameters["scale_exact"]), space.dimension)

    @property
    def parameters(self) -> dict:
        return {"scale": float(self.scale), "scale_exact": str(self.scale)}

    def noise_law(self) -> ProductLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        return ProductLaw.iid(DiscreteLaplaceMarginal(float(self.scale)), self.dimension,
                              f"discrete Laplace^d, scale {self.scale}")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        draws = sample_discrete_laplace(
            rng, self.scale.numerator, self.scale.denominator, size * self.dimension
        )
        return draws.reshape(size, self.dimension)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [discrete_laplace_privacy_check(space, self.scale, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        eps = Fraction(space.l1) / self.scale
        return {
            "epsilon": float(eps),
            "epsilon_exact": str(eps),
            "rho": float(eps * eps / 2),
            "conversion": "exact: ε = Δ₁/b; ε-DP ⇒ ε²/2-zCDP",
        }

    def notes(self) -> list[str]:
        return [
            EXACT_SAMPLER_NOTE.format(algorithm=f"Algorithms 1–2, discrete Laplace of scale {self.scale}")
        ]

    def _abs_moments(self) -> tuple[float, float, float]:
        m = discrete_laplace_moments(float(self.scale))
        return m["mean_abs"], m["second_moment"], m["fourth_moment"]

    def _usefulness(self, gamma: float) -> float:
        return discrete_laplace_moments(float(self.scale), gamma)["within"]
