r"""Laplace noise: i.i.d. Laplace(0, b) per coordinate, ε = Δ₁/b (Dwork et al. 2006).

Targets: pure ε (b = Δ₁/ε); approx (ε, δ) by the exact Laplace profile
δ(ε) = 1 − e^{(ε − Δ₁/b)/2}, the worst case over moves of l1 norm Δ₁ (see
:mod:`dpopt.privacy.laplace`), i.e. b = Δ₁/(ε − 2 log(1 − δ));
zCDP ρ by the Laplace Rényi divergences D_α ≤ ρα, summed over the coordinates of each listed
move pattern (else the one-axis move of norm Δ₁), certified on intervals of orders
(:func:`~dpopt.privacy.laplace.laplace_zcdp_holds`; Σ_k KL(|v_k|/b) = ρ, against ε₀ = √(2ρ)
by ε-DP ⇒ ε²/2-zCDP, which remains the fallback for small ρ);
μ-GDP by the tightest result the sensitivity space admits (Lee, Kim, Kwak & Jung 2022):
the exact 1-D trade-off (Prop. 9), the exact 2-D one when neighbours move at most two
coordinates (eq. 14; a contingency table is eq. 16, calibrated by Algorithm 1), else the
universal ε-DP ⇒ μ-GDP conversion (eq. 12) — see :mod:`dpopt.privacy.laplace_gdp`.

**Exact measurement on counts** (``sampler: exact``, the default, :class:`LaplaceOnCounts`): the integer answers
x plus η i.i.d. discrete Laplace of a dyadic scale t ≥ b, P[η = k] ∝ e^{−|k|/t}, sampled exactly in integer
arithmetic (Canonne, Kamath & Steinke 2020, Algorithms 1–2). The guarantee is certified for that law, as the
``discrete_laplace`` family certifies it (:func:`~dpopt.mechanisms.discrete_laplace.discrete_laplace_privacy_check`:
pure ε = Δ₁/t exactly against the decimal target as written; (ε, δ) by the exact profile of each move pattern; ρ-zCDP
by the Rényi divergences of each pattern; μ-GDP by the exact trade-off function of each pattern). Where the discrete
law needs a larger scale than b
(under μ-GDP, ρ-zCDP or (ε, δ) a unit shift of the discrete Laplace is randomized response, the worst ε-DP pair),
t is the discrete family's own calibration. The utility stated is the discrete law's,
E η² = 2e^{−1/t}/(1 − e^{−1/t})². ``sampler: floating_point`` keeps Laplace(b) and its note.

**Decimal weights** (:mod:`dpopt.mechanisms.decimal_lattice`): a ``linear`` query W = M/D measures the integers
k = D·Wx = Mx the same way, on the counting problem of M (:func:`~dpopt.mechanisms.decimal_counts.scaled_problem`:
neighbouring k differ by the integer vectors D·WΔ), at t ≥ D·b, and releases (k + η)/D. The
privacy checks are the discrete family's on the scaled space (pure ε = ‖D·WΔ‖₁/t exactly); the released noise η/D
has variance Var η/D², stated against 2b² as ``exact_cost``; D is recorded (``lattice_scale``) and re-derived by
``dpopt verify``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below
from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import SCALE_MONOTONE_METRICS, Mechanism
from dpopt.mechanisms.decimal_counts import scaled_problem
from dpopt.mechanisms.decimal_lattice import (
    NOT_COUNTS,
    DecimalScale,
    counts_lattice,
    counts_scope_check,
    scaled_answers,
)
from dpopt.mechanisms.discrete_laplace import MAX_SCALE as MAX_LATTICE_SCALE
from dpopt.mechanisms.discrete_laplace import DiscreteLaplaceMechanism, discrete_laplace_privacy_check
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, cost_text, exact_cost
from dpopt.mechanisms.gaussian import MAX_IMAGE_CELLS, counting_query, lattice_scope_check
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.mechanisms.lattice import integer_answers
from dpopt.noise.discrete_laplace import DiscreteLaplaceMarginal
from dpopt.noise.laplace import LaplaceMarginal
from dpopt.noise.law import ProductLaw
from dpopt.privacy.laplace import (
    laplace_delta_mp,
    laplace_epsilon,
    laplace_kl_scale,
    laplace_patterns,
    laplace_scale_for,
    laplace_scale_for_approx,
    laplace_scale_for_zcdp,
    laplace_zcdp_holds,
    laplace_zcdp_rho,
)
from dpopt.privacy.laplace_gdp import LaplaceGDPRoute, laplace_gdp_route
from dpopt.privacy.pure_conversion import epsilon_dp_check
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")


def laplace_privacy_check(
    l1: Fraction, scale: float, privacy: Privacy, space: SensitivitySpace | None = None
) -> Check:
    """Check that Laplace noise of scale b meets the target for Δ₁ = ``l1``.

    pure: exact rational arithmetic; approx: the exact Laplace profile at ε₀ = Δ₁/b (exact
    ratio, 60-digit exponential); zcdp: the Rényi divergences on order intervals in 60 digits
    (or the exact rational ε²/2 ≤ ρ). gdp: the route of
    :func:`~dpopt.privacy.laplace_gdp.laplace_gdp_route` for ``space`` (the universal
    conversion when no space is given), checked in 60-digit arithmetic or by the
    certified branch and bound of :func:`~dpopt.privacy.gdp_check.gdp_margin`.
    """
    eps = laplace_epsilon(l1, scale)
    definition, p = privacy.definition, privacy.parameters
    if definition == "gdp":
        route = laplace_gdp_route(space) if space is not None else LaplaceGDPRoute("universal", (), Fraction(l1))
        return _gdp_check(route, scale, float_below(p["mu"]))
    if definition == "approx":
        delta = laplace_delta_mp(float_below(p["epsilon"]), l1, scale)
        return Check(
            "privacy",
            "exact Laplace profile δ(ε) = max(0, 1 − e^{(ε − Δ₁/b)/2}) of the one-coordinate move of l1 norm "
            "Δ₁, the worst case over moves of that norm (Lee, Kim, Kwak & Jung 2022, Lemma 10, with the "
            "monotone tensor product); Δ₁/b exact, exponential in 60 digits",
            bool(delta <= float_below(p["delta"])),
            f"Δ₁/b = {float(eps):.17g}: δ(ε={p['epsilon']}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']}",
        )
    if definition == "zcdp":
        patterns = laplace_patterns(space) if space is not None else None
        passed, detail = laplace_zcdp_holds(l1, scale, p["rho"], patterns)
        which = ("summed over the coordinates of each listed move pattern" if patterns else
                 "the one-axis move of l1 norm Δ₁ being the worst case")
        return Check(
            "privacy",
            f"Laplace Rényi divergences D_α ≤ ρα for all α > 1 (Mironov 2017, Table II), {which}; D_α "
            "non-decreasing in α bounds each interval of orders (Arb balls), or ε-DP ⇒ ε²/2-zCDP in exact rationals",
            passed,
            detail,
        )
    return epsilon_dp_check(eps, privacy, "Laplace noise")


def _gdp_check(route: LaplaceGDPRoute, scale: float, mu: float) -> Check:
    result = route.check(scale, mu)
    return Check("privacy", result.method, result.passed, result.detail)


class LaplaceMechanism(Mechanism):
    """i.i.d. Laplace(0, b) noise on each of the d coordinates."""

    family = "laplace"
    title = "Laplace"

    def __init__(self, scale: float, dimension: int):
        self.scale = float(scale)
        self.dimension = int(dimension)

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        privacy = problem.spec.privacy
        if privacy.definition not in ("pure", "approx", "zcdp", "gdp"):
            return f"no {privacy.definition} calibration for Laplace noise in this version"
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        r"""The utility at the smallest scale the target allows, under μ-GDP and ρ-zCDP.

        μ-GDP: one coordinate of a neighbour moves by Δ∞ = max_v ‖v‖∞; its marginal is
        post-processing, so TV(Lap(0, b), Lap(Δ∞, b)) = 1 − e^{−Δ∞/(2b)} cannot exceed the
        μ-GDP pair's 2Φ(μ/2) − 1 (Dong, Roth & Su 2022: TV = sup_α 1 − α − T(α)), i.e.
        b ≥ Δ∞ / (−2 ln(2Φ(−μ/2))).

        ρ-zCDP: the design certifies every listed move pattern, or the one-axis move of l1 norm
        Δ₁ (D_α ≤ ρα for α > 1, or (Δ₁/b)²/2 ≤ ρ, which implies it: Bun & Steinke 2016, Prop.
        1.4); letting α → 1, each certified move's Kullback–Leibler divergence Σ_k KL(|v_k|/b),
        KL(ε₀) = ε₀ + e^{−ε₀} − 1 (Mironov 2017, Table II), is ≤ ρ and decreases in b, so b is at
        least the root of :func:`~dpopt.privacy.laplace.laplace_kl_scale`.

        l1, l2 (any workload), max_variance grow with b and usefulness falls, so the closed
        forms at that b (rounded down) bound every calibrated design; on counts (:class:`LaplaceOnCounts`) the
        discrete law's closed forms at that b, as its scale is t ≥ b and they are monotone in the scale too (on the
        decimal lattice at D·b, divided by D: t ≥ D·b). None for other targets and metrics.
        """
        spec, space = problem.spec, problem.space
        definition = spec.privacy.definition
        if definition not in ("gdp", "zcdp") or spec.utility.metric not in SCALE_MONOTONE_METRICS:
            return None
        if definition == "gdp":
            mu = spec.privacy.parameters["mu"]
            log_two_phi = math.log(2.0) + float(normal.log_ndtr(-mu / 2.0))  # ln 2Φ(−μ/2) < 0
            scale = float(space.linf) / (-2.0 * log_two_phi) * (1 - 1e-12)
        else:
            scale = laplace_kl_scale(spec.privacy.parameters["rho"], space.l1, laplace_patterns(space)) * (1 - 1e-9)
        if not (math.isfinite(scale) and scale > 0):
            return None
        lattice = exact_lattice(problem)  # the discrete law at t ≥ D·b ≥ D·this scale: its closed forms
        if isinstance(lattice, str):
            bound = cls(scale, space.dimension)
        else:
            unit = 1 if lattice is None else lattice.scale
            bound = LaplaceOnCounts(Fraction(scale) * unit, space.dimension, scale, lattice)
        value = bound.expected_utility(spec.utility)
        return value.value if value.method == "closed form" else None

    refusal: str | None = None
    """Why a bounded sum or mean (:mod:`dpopt.mechanisms.exact_sum`), or a linear query with decimal weights
    (:func:`exact_lattice`), keeps the floating-point sampler."""

    @classmethod
    def design(cls, problem: Problem) -> "LaplaceMechanism":
        """Laplace(b) at :meth:`design_scale`; on a counting query (unless ``sampler: floating_point``) the exact
        measurement of :class:`LaplaceOnCounts` at a dyadic scale t ≥ b (on a decimal lattice t ≥ D·b)."""
        scale = cls.design_scale(problem)
        lattice = exact_lattice(problem)
        if not isinstance(lattice, str):
            return LaplaceOnCounts.at_least(scale, problem, lattice)
        mechanism = cls(scale, problem.space.dimension)
        linear = getattr(problem.query, "user_matrix", None) is not None  # a decimal linear query: why not exact
        mechanism.refusal = lattice if linear and lattice.startswith(NOT_COUNTS) else None
        return mechanism

    @classmethod
    def design_scale(cls, problem: Problem) -> float:
        """The smallest Laplace scale b (in floating point, moved up until the exact check passes) that meets the
        spec's target on ``problem.space``."""
        spec, space = problem.spec, problem.space
        p = spec.privacy.parameters
        if spec.privacy.definition == "gdp":
            route, mu = laplace_gdp_route(space), float_below(p["mu"])  # the μ the certificate is checked at
            return nudge_until(route.scale(mu), lambda b: route.check(b, mu).passed, up=True)
        if spec.privacy.definition == "approx":
            scale = laplace_scale_for_approx(p["epsilon"], p["delta"], space.l1)
        elif spec.privacy.definition == "zcdp":
            scale = laplace_scale_for_zcdp(p["rho"], space.l1, laplace_patterns(space))
        else:
            scale = laplace_scale_for(p["epsilon"], space.l1)
        scale = nudge_until(scale, lambda b: laplace_privacy_check(space.l1, b, spec.privacy, space).passed, up=True)
        if not math.isfinite(scale):
            raise CalibrationError("the Laplace scale for this target is out of range")
        return scale

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "LaplaceMechanism":
        if parameters.get("sampler") == "exact":
            return LaplaceOnCounts(Fraction(parameters["scale_exact"]), space.dimension, parameters["design_scale"],
                                   DecimalScale.from_parameters(parameters), parameters.get(EXACT_COST_KEY))
        return cls(parameters["scale"], space.dimension)

    @property
    def parameters(self) -> dict:
        return {"scale": self.scale}

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.laplace(0.0, self.scale, size=(size, self.dimension))

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [laplace_privacy_check(space.l1, self.scale, privacy, space)]

    def notes(self) -> list[str]:
        return super().notes() + ([f"no exact lattice measurement: {self.refusal}"] if self.refusal else [])

    def noise_law(self) -> ProductLaw:
        """d i.i.d. Laplace(0, b) coordinates."""
        return ProductLaw.iid(LaplaceMarginal(self.scale), self.dimension, f"Laplace(0, b)^d, b = {self.scale:.17g}")

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """log p(z) up to a constant: −‖z‖₁ / b (rows of ``z``)."""
        return -np.abs(z).sum(axis=-1) / self.scale

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        eps = float(laplace_epsilon(space.l1, self.scale))
        rho, how = laplace_zcdp_rho(space.l1, self.scale, laplace_patterns(space))
        summary = {"epsilon": eps, "rho": rho, "conversion": f"ε = Δ₁/b; {how}"}
        route = laplace_gdp_route(space)
        try:
            summary["mu"] = route.mu(self.scale)
        except CalibrationError:  # a scale so small that μ is beyond floating point: no μ stated
            return summary
        summary["mu_route"] = route.description
        return summary

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = self.dimension if workload is None else float(np.sum(workload**2))
        return 2.0 * self.scale**2 * frob

    def _expected_l1(self) -> float:
        return self.scale * self.dimension

    def _usefulness(self, gamma: float) -> float:
        return -math.expm1(-gamma / self.scale)

    def _max_variance(self) -> float:
        return 2.0 * self.scale**2


def count_lattice_reason(problem: Problem) -> str | None:
    """Why a ``laplace`` design on ``problem`` keeps the floating-point sampler; None: it measures exactly
    (:class:`LaplaceOnCounts`): a counting query whose target the discrete Laplace family serves."""
    if problem.spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if not counting_query(problem):
        return NOT_COUNTS
    return DiscreteLaplaceMechanism.supports(problem)


def exact_lattice(problem: Problem) -> DecimalScale | str | None:
    """Where a ``laplace`` design on ``problem`` measures exactly: None on counts, a :class:`DecimalScale` on the
    decimal lattice of a linear query with decimal weights
    (:func:`~dpopt.mechanisms.decimal_lattice.counts_lattice`), else why it keeps the floating-point sampler."""
    reason = count_lattice_reason(problem)
    return counts_lattice(problem) if reason == NOT_COUNTS else reason


class LaplaceOnCounts(LaplaceMechanism):
    r"""The ``laplace`` design measured exactly on counts: x + η in integers, η i.i.d. discrete Laplace of a dyadic
    scale t ≥ b, the design's continuous scale (module docstring).

    The noise law, its sampler, its privacy check and its closed-form utilities are the ``discrete_laplace``
    family's at scale t (held in :attr:`lattice`, one place for each); this class adds the integer answers, the
    scope check (a counting query) and the design's b, which the certificate keeps to state the cost
    E‖η‖²/E‖Z‖² = [2e^{−1/t}/(1 − e^{−1/t})²]/(2b²).

    ``decimal``: the decimal lattice of a linear query with decimal weights
    (:mod:`dpopt.mechanisms.decimal_lattice`): the integers k = D·Wx plus η, t ≥ D·b, released as (k + η)/D; the
    privacy checks run on the scaled space of the integer shifts D·WΔ, the utilities are the discrete law's scaled
    by 1/D, and the cost Var η/D² against 2b² is stated (``exact_cost``, re-derived by :meth:`scope_checks`).
    """

    integer_noise = True
    needs_integer_answers = True

    def __init__(self, lattice_scale: Fraction, dimension: int, design_scale: float,
                 decimal: DecimalScale | None = None, stated_cost: dict | None = None):
        self.lattice = DiscreteLaplaceMechanism(lattice_scale, dimension)
        self.decimal = decimal
        super().__init__(float(lattice_scale / self._unit()), dimension)
        self.design_scale = float(design_scale)
        # on the decimal lattice: the exact_cost a certificate states (re-derived by :meth:`scope_checks`)
        self.stated_cost = None
        if decimal is not None:
            self.stated_cost = self.parameters.get(EXACT_COST_KEY) if stated_cost is None else stated_cost

    @classmethod
    def at_least(cls, scale: float, problem: Problem, decimal: DecimalScale | None = None) -> "LaplaceOnCounts":
        """The exact measurement at the smallest dyadic t ≥ ``scale`` (:func:`dyadic_ceil`, rounded up: the private
        direction) whose discrete law meets the target, else at the discrete family's own calibration if larger; on
        the ``decimal`` lattice t ≥ D·``scale`` on its scaled problem
        (:func:`~dpopt.mechanisms.decimal_counts.scaled_problem`).

        Raises
        ------
        CalibrationError
            The discrete law's exact check fails at the scale found (or the scale is beyond the sampler's 2^40).
        """
        counts = problem if decimal is None else scaled_problem(problem, decimal)
        space, privacy = counts.space, problem.spec.privacy
        t = dyadic_ceil(Fraction(scale) * (1 if decimal is None else decimal.scale))
        if not discrete_laplace_privacy_check(space, t, privacy).passed:
            t = max(t, DiscreteLaplaceMechanism.design(counts).scale)
        if t > MAX_LATTICE_SCALE:
            raise CalibrationError(f"the discrete Laplace scale {float(t):.6g} exceeds the exact sampler's 2^40")
        mechanism = cls(t, space.dimension, scale, decimal)
        check = discrete_laplace_privacy_check(space, t, privacy)
        if not check.passed:
            raise CalibrationError(f"the exact Laplace measurement failed its check ({check.detail})")
        return mechanism

    @property
    def integer_release(self) -> bool:
        """x + η on counts is whole; the decimal lattice's (k + η)/D is not."""
        return self.decimal is None

    def _unit(self) -> int:
        """D on the decimal lattice (the released noise is η/D), else 1."""
        return 1 if self.decimal is None else self.decimal.scale

    @property
    def parameters(self) -> dict:
        out = {"scale": self.scale, "scale_exact": str(self.lattice.scale), "sampler": "exact",
               "design_scale": self.design_scale}
        if self.decimal is not None:
            out |= self.decimal.record(self._decimal_cost())
        return out

    def _decimal_cost(self) -> dict:
        """The released noise's variance Var η/D² against the continuous design's 2b²
        (:func:`~dpopt.mechanisms.exact_cost.exact_cost` of one coordinate's variance)."""
        return exact_cost("variance", self._max_variance(), 2.0 * self.design_scale**2)

    def scope_checks(self, problem: Problem) -> list[Check]:
        if self.decimal is not None:
            return [counts_scope_check(problem, self.decimal, self._decimal_cost(), self.stated_cost)]
        return [lattice_scope_check(problem)]

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        draws = self.lattice.sample(size, rng)
        return draws if self.decimal is None else draws.astype(float) / self.decimal.scale

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """x + η in int64 (the answers refused in one line unless whole numbers), then converted; on the decimal
        lattice (k + η)/D with k = D·Wx recovered exactly
        (:func:`~dpopt.mechanisms.decimal_lattice.scaled_answers`)."""
        noise = self.lattice.sample(values.shape[0], rng).astype(np.int64)
        if self.decimal is not None:
            return (scaled_answers(values, self.decimal.scale) + noise).astype(float) / self.decimal.scale
        return (integer_answers(values) + noise).astype(float)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.decimal is None:
            return self.lattice.privacy_checks(space, privacy)
        try:
            scaled = self.decimal.scaled_space(space)
        except ValueError as error:
            return [Check("privacy", "discrete Laplace measurement on the decimal lattice", False, str(error))]
        return [Check(c.claim, f"on the decimal lattice (D = {self.decimal.scale}, the integer shifts D·WΔ of the "
                      f"space, largest ‖D·WΔ‖² the recorded Δ_D² = {self.decimal.l2_squared}): " + c.method,
                      c.passed, c.detail) for c in self.lattice.privacy_checks(scaled, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.decimal is None:
            return self.lattice.privacy_summary(space)
        return self.lattice.privacy_summary(self.decimal.scaled_space(space))

    def notes(self) -> list[str]:
        ratio = self.lattice._abs_moments()[1] / (2.0 * self.design_scale**2) / self._unit() ** 2
        where = "counts" if self.decimal is None else f"the decimal lattice (t on D·Wx, D = {self._unit()})"
        bound = "b" if self.decimal is None else "D·b"
        return self.lattice.notes() + [
            f"exact measurement of the Laplace design on {where}: discrete Laplace of scale t = "
            f"{self.lattice.scale} ≥ the continuous design's {bound} (b = {self.design_scale:.17g}); the guarantee "
            f"and the utility are the discrete law's (E η² = 2e^{{−1/t}}/(1 − e^{{−1/t}})², {ratio:.9g} times the "
            "continuous 2b²); sampler: floating_point keeps Laplace(b)"] + (
            [] if self.decimal is None else [self.decimal.note("the discrete Laplace noise"),
                                             cost_text(self._decimal_cost())])

    def noise_law(self) -> ProductLaw | str:
        """The discrete family's law on counts; on the decimal lattice no product law is stated (the released noise
        η/D lives on (1/D)ℤ: :meth:`linear_noise_image` states it)."""
        if self.decimal is not None:
            return ("no noise law stated on the decimal lattice: the released noise η/D lives on (1/D)ℤ (η i.i.d. "
                    f"discrete Laplace of scale {self.lattice.scale}); its privacy is the exact check's on the "
                    "integer shifts D·WΔ")
        return self.lattice.noise_law()

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the decimal lattice: the released noise η/D, C = I/D, W = η i.i.d. discrete Laplace of scale t (the
        per-cell errors by convolution on (1/D)ℤ); else None."""
        if self.decimal is None or self.dimension > MAX_IMAGE_CELLS:
            return None
        return (np.eye(self.dimension) / self.decimal.scale,
                (DiscreteLaplaceMarginal(float(self.lattice.scale)),) * self.dimension)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        return self.lattice._expected_l2(workload) / self._unit() ** 2

    def _expected_l1(self) -> float:
        return self.lattice._expected_l1() / self._unit()

    def _usefulness(self, gamma: float) -> float:
        return self.lattice._usefulness(gamma * self._unit())

    def _max_variance(self) -> float:
        return self.lattice._max_variance() / self._unit() ** 2
