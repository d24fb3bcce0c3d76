r"""Gaussian noise: isotropic N(0, σ²I) and projected N(0, σ²P) on the sensitivity span.

Privacy depends on σ only through μ = Δ₂/σ (Δ₂ the l2 sensitivity): the mechanism is
exactly μ-GDP, (ε, δ(ε; μ))-DP for the analytic-Gaussian profile, and μ²/2-zCDP
(Dong, Roth & Su 2022; Balle & Wang 2018; Bun & Steinke 2016). When the sensitivity
space spans a proper subspace V (rank-deficient: e.g. a table under replace-one, whose
total n is fixed), noise restricted to V, N(0, σ²P_V), has the same guarantee and a
smaller cost E‖Z‖² = σ² rank(V) instead of σ² d (Lee et al. 2022, Thm 2; Cho & Awan,
Algorithm 1). The component of φ(X) orthogonal to V is then released without noise;
it is constant over all datasets the adjacency connects.

**Exact measurement** (``sampler: exact``, the default, for counting queries under ρ-zCDP;
:mod:`dpopt.mechanisms.lattice`): the isotropic design releases x + η with the integer answers x and
η i.i.d. N_ℤ(0, σ_ℤ²), σ_ℤ² ≥ σ² a dyadic rational rounded up, sampled exactly; neighbouring answers
differ by integer vectors, so ρ = Δ₂²/(2σ_ℤ²) ≤ Δ₂²/(2σ²) (Canonne, Kamath & Steinke 2020, Theorem 14). Under
μ-GDP and (ε, δ) targets σ is designed for the target at the effective variance (σ_ℤ² ≥ σ²(σm)², m the certified
slope of :mod:`dpopt.privacy.discrete_gaussian_gdp`), and μ = Δ₂·m. Under (ε, δ)-pDP the isotropic design's σ_ℤ²
is calibrated on the exact pDP level of the discrete law per move pattern (:mod:`dpopt.mechanisms.lattice_pdp`; where the
patterns are not derived, on the sub-Gaussian bound at the exact max ‖v‖², which bounds every move's level) and
recorded. On the isotropic lattice ``ci_volume`` (span all of ℝ^d) and ``test_power`` (a whole-number shift) are the
discrete law's region and test (:mod:`dpopt.stats.lattice_inference`). On a proper span V, ``ci_volume`` is the region
of :mod:`dpopt.stats.lattice_span_regions`, of proven coverage: on the sum-zero span (at σ_ℤ² up to about 200) the
ball d‖P_V(ỹ − θ)‖² ≤ u from the exact law of d‖P_Vη‖², ỹ = x_⊥ + P_V y; else, for the full release y, the ball of V
of radius² σ_ℤ²r − ‖P_⊥η‖² (r the full-d radius, P_⊥η observed), for the projected release the ball of radius²
σ_ℤ²r; its cost against the continuous region on V is stated (``exact_cost``,
:mod:`dpopt.mechanisms.span_inference`). A ``linear`` query with decimal weights is measured on the decimal lattice
(:mod:`dpopt.mechanisms.decimal_lattice`): the integers D·Wx plus N_ℤ(0, σ_ℤ²) noise, σ_ℤ² ≥ D²σ² (under pDP
calibrated on the exact level of the integer shifts D·WΔ), released divided by D; its ``ci_volume`` is the discrete
law's region of the scaled answers, the volume times D^-d, and its ``test_power`` the discrete law's test of the
alternative times D, of the same power (:meth:`GaussianMechanism._decimal_inference`).
"""

from __future__ import annotations

import math
from dataclasses import replace as dataclass_replace
from fractions import Fraction

import numpy as np

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.domain.queries import CountingQuery
from dpopt.errors import UnsupportedSpecError
from dpopt.mechanisms.base import Mechanism, UtilityValue
from dpopt.mechanisms.decimal_lattice import (
    DECIMAL_LAW_NOTE,
    NOT_COUNTS,
    DecimalScale,
    decimal_lattice,
    decimal_scope_check,
    scaled_answers,
    scaled_shift,
)
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, cost_text, exact_cost, volume_cost
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_TARGETS,
    INFERENCE_METRICS,
    check_draws,
    discrete_variance,
    exact_refusal,
    inference_terms,
    integer_answers,
    lattice_inference,
    lattice_isotropic_check,
    lattice_privacy_summary,
    target_lattice_variance,
)
from dpopt.mechanisms.lattice_pdp import lattice_pdp_check, pdp_lattice_design
from dpopt.mechanisms.span_inference import span_cost_check, span_inference
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2
from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal, discrete_gaussian_moments, sample_discrete_gaussian
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import FullSpace, Subspace
from dpopt.spec.models import Privacy
from dpopt.stats.inference import log_ci_volume, power_from_noncentrality, region_importance_weights
from dpopt.stats.lattice_span_regions import ProjectedRegion, SpanRegion

_GAUSSIAN_TARGETS = ("gdp", "zcdp", "approx", "pdp")

CONTINUOUS_METRICS = INFERENCE_METRICS
"""Metrics whose prediction for continuous noise (a region's volume, the power of the continuous LR test) a lattice
measurement does not inherit: a design judged on one keeps the floating-point sampler unless the family derives
the metric from the discrete law (the isotropic Gaussian and query scaling on counting queries,
:func:`~dpopt.mechanisms.lattice.lattice_inference`; the isotropic and projected Gaussian's regions on a proper span,
:func:`~dpopt.mechanisms.span_inference.span_inference`)."""

MAX_LAW_BASIS_ENTRIES = 20_000_000
"""Entries of the span's basis above which the projected Gaussian states no noise law (160 MB; the
second route projects its sampler's draws on that basis)."""
MAX_IMAGE_CELLS = 2_000
"""Largest release whose projection P (cells²) a lattice family's ``linear_noise_image`` states densely
(:meth:`ProjectedGaussianMechanism.linear_noise_image`, James–Stein's stage)."""


class GaussianMechanism(Mechanism):
    """Isotropic Gaussian noise N(0, σ² I_d).

    ``span`` is the span V of the sensitivity space (R^d by default): ``ci_volume`` is
    measured on V (see :meth:`Mechanism.expected_utility`). ``sampler="exact"``: the lattice
    measurement of the module docstring, at the lattice variance derived from σ (under pDP, ``lattice_sigma2``:
    the variance calibrated on the discrete law's pDP level, :mod:`dpopt.mechanisms.lattice_pdp`). ``decimal``: the
    decimal lattice of a linear query with decimal weights (:mod:`dpopt.mechanisms.decimal_lattice`), measured at
    σ_ℤ² ≥ D²σ² (or the recorded ``lattice_sigma2``) and released divided by D.
    """

    family = "gaussian"
    title = "Gaussian, isotropic"
    lattice_metrics = INFERENCE_METRICS
    """Metrics derived from the discrete law on the lattice (:meth:`_lattice_inference`)."""

    def __init__(self, sigma: float, dimension: int, span: Subspace | None = None, sampler: str = "floating_point",
                 refusal: str | None = None, target: str = "zcdp", lattice_sigma2: Fraction | None = None,
                 decimal: DecimalScale | None = None):
        self.sigma = float(sigma)
        self.decimal = decimal if sampler == "exact" else None
        self.dimension = int(dimension)
        self.span = FullSpace(self.dimension) if span is None else span
        if sampler not in ("floating_point", "exact"):
            raise ValueError(f"sampler {sampler!r} (floating_point or exact)")
        self.sampler = sampler
        self.needs_integer_answers = self.integer_noise = sampler == "exact"  # x + η: whole numbers
        self.refusal = refusal
        self.target = "gdp" if target in GDP_TARGETS else target if target == "pdp" else "zcdp"  # the lattice privacy
        if sampler != "exact":
            self.lattice_sigma2 = None
        elif self.target == "pdp":
            if lattice_sigma2 is None:
                raise ValueError("a pDP lattice measurement needs its calibrated lattice variance")
            self.lattice_sigma2 = Fraction(lattice_sigma2)
        elif self.decimal is not None:
            self.lattice_sigma2 = (target_lattice_variance(Fraction(self.sigma) ** 2, self.decimal.scale, self.target)
                                   if lattice_sigma2 is None else Fraction(lattice_sigma2))
        else:
            self.lattice_sigma2 = target_lattice_variance(Fraction(self.sigma) ** 2, 1, self.target)
        if sampler == "exact" and self.lattice_sigma2 is None:
            raise ValueError("the lattice variance is beyond the exact sampler's range")
        # under pDP: Var N_ℤ(0, σ_ℤ²)/σ², the exact measurement's error against the continuous design's (Lemma 10, a
        # bound above the exact level: usually below 1)
        self.cost_ratio = (self._variance() / self.sigma**2 if sampler == "exact" and self.target == "pdp" else None)
        self.span_cost: dict | None = None  # ci_volume on a proper span: the region's cost (:meth:`_span_cost`)
        # on the decimal lattice: the exact_cost a certificate states (re-derived by :meth:`scope_checks`)
        self.stated_cost: dict | None = self._lattice_parameters().get(EXACT_COST_KEY) if self.decimal else None

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        privacy = problem.spec.privacy
        if privacy.definition not in _GAUSSIAN_TARGETS:
            return f"Gaussian noise cannot meet a {privacy.definition} target"
        return None

    @property
    def integer_release(self) -> bool:
        """x + η on the unit lattice is whole; the decimal lattice's (k + η)/D is not."""
        return self.integer_noise and self.decimal is None

    @classmethod
    def design(cls, problem: Problem) -> "GaussianMechanism":
        space = problem.space
        sigma = gaussian_sigma(space.l2_squared, problem.spec.privacy)
        refusal = lattice_reason(problem, sigma, inference=True, pdp=True)
        target = problem.spec.privacy.definition
        sigma2 = None
        decimal = None
        if refusal == NOT_COUNTS:
            found = decimal_lattice(problem, sigma)
            if isinstance(found, str):
                refusal = found
            elif target == "pdp":
                try:
                    sigma2, refusal = pdp_lattice_design(found.pdp_shifts(space), problem.spec.privacy,
                                                         sigma * found.scale)
                except ValueError as exc:
                    refusal = f"{NOT_COUNTS}; on the decimal lattice: {exc}"
                decimal = found
            else:
                refusal, decimal = None, found
        elif refusal is None and target == "pdp":
            sigma2, refusal = pdp_lattice_design(space, problem.spec.privacy, sigma)
        mechanism = cls(sigma, space.dimension, space.span, "exact" if refusal is None else "floating_point", refusal,
                        target, sigma2, decimal)
        if refusal is None and problem.spec.utility.metric in INFERENCE_METRICS:
            utility = problem.spec.utility
            found = mechanism._lattice_inference(utility.metric, utility.alpha, utility.alternative)
            if isinstance(found, str):  # the metric is not derived on the lattice: the continuous design
                return cls(sigma, space.dimension, space.span, "floating_point", found, target)
            mechanism.span_cost = mechanism._span_cost(utility)
        return mechanism

    def _lattice_inference(self, metric: str, alpha: float, alternative):
        """The region or test of ``metric`` for the lattice noise N_ℤ(0, σ_ℤ²)^d, or why not (a string): on all
        of R^d the discrete law's region or test (:func:`~dpopt.mechanisms.lattice.lattice_inference`); on a proper
        span V a region of proven coverage for this family's release, the full y or the projected one
        (:func:`~dpopt.mechanisms.span_inference.span_inference`)."""
        if self.decimal is not None:
            return self._decimal_inference(metric, alpha, alternative)
        if metric == "ci_volume" and self.span.rank != self.dimension:
            return span_inference(self.lattice_sigma2, self.span, alpha, full_release=not self.noise_in_span)
        return lattice_inference(metric, (self.lattice_sigma2,) * self.dimension, alpha, alternative)

    def _decimal_inference(self, metric: str, alpha: float, alternative=None):
        """On the decimal lattice, the discrete law's region or test of the d i.i.d. coordinates of η in the scaled
        units k = D·Wx (:func:`~dpopt.mechanisms.lattice.lattice_inference`): ``ci_volume`` the region's volume
        times D^-d in the released units; ``test_power`` the test of the alternative times D (of the same power:
        :func:`~dpopt.mechanisms.decimal_lattice.scaled_utility`); the region on a proper span: why not (a
        string)."""
        scale = self.decimal.scale
        if metric == "test_power":
            return lattice_inference(metric, (self.lattice_sigma2,) * self.dimension, alpha,
                                     scaled_shift(alternative, scale))
        if self.span.rank != self.dimension:
            return "the region on a proper span is derived on the unit lattice (a counting query)"
        found = lattice_inference(metric, (self.lattice_sigma2,) * self.dimension, alpha)
        if isinstance(found, str):
            return found
        return dataclass_replace(found, log_volume=found.log_volume - self.dimension * math.log(scale))

    def _utility(self, utility) -> UtilityValue | None:
        """On the lattice, ``ci_volume`` and ``test_power`` from the discrete law; on a proper span other than the
        sum-zero one the region's expected volume is a Monte Carlo estimate from the exact sampler (its coverage
        is proven all the same)."""
        if self.sampler != "exact" or utility.metric not in self.lattice_metrics:
            return None
        found = self._lattice_inference(utility.metric, utility.alpha, utility.alternative)
        if isinstance(found, str):
            raise UnsupportedSpecError("utility.metric", f"on the lattice: {found}")
        if isinstance(found, SpanRegion) and found.expected_volume is None:
            mc = self._monte_carlo(utility.metric, None, None, alpha=utility.alpha)
            return dataclass_replace(mc, method=f"{mc.method} of the expected volume of the region: "
                                     + found.describe())
        if utility.metric == "ci_volume":  # its log, in any dimension
            return UtilityValue.volume(found.log_volume, found.describe())
        return UtilityValue(utility.metric, found.power, found.describe())

    def _span_cost(self, utility) -> dict | None:
        """The cost of exactness of ``ci_volume`` on a proper span (:func:`~dpopt.mechanisms.exact_cost.volume_cost`:
        the region's predicted log-volume against the continuous region's on the span, :meth:`_log_ci_volume`);
        None for another metric, the full span or the floating-point sampler."""
        if self.sampler != "exact" or utility.metric != "ci_volume" or self.span.rank == self.dimension:
            return None
        return volume_cost(self.expected_utility(utility).log_value, self._log_ci_volume(utility.alpha))

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "GaussianMechanism":
        sigma2 = parameters.get("lattice_sigma2")
        scale = DecimalScale.from_parameters(parameters)
        mechanism = cls(parameters["sigma"], space.dimension, space.span, parameters.get("sampler", "floating_point"),
                        target=parameters.get("lattice_privacy", "zcdp"),
                        lattice_sigma2=None if sigma2 is None else Fraction(sigma2), decimal=scale)
        return mechanism.with_stated_cost(parameters)

    def with_stated_cost(self, parameters: dict) -> "GaussianMechanism":
        """This mechanism with the span region's cost its recorded ``parameters`` state (re-checked by
        :meth:`scope_checks`)."""
        stated = parameters.get(EXACT_COST_KEY)
        if isinstance(stated, dict) and stated.get("metric") == "ci_volume":
            self.span_cost = stated
        if self.decimal is not None:
            self.stated_cost = stated
        return self

    @property
    def parameters(self) -> dict:
        out = {"sigma": self.sigma, "sampler": self.sampler}
        if self.sampler == "exact" and self.target == "gdp":
            out["lattice_privacy"] = "gdp"
        return out | self._lattice_parameters()

    def _lattice_parameters(self) -> dict:
        """On the lattice: under pDP the calibrated σ_ℤ² and its cost against the continuous design (one
        coordinate's variance: ``lattice_cost_ratio`` and ``exact_cost``); under ``ci_volume`` on a proper span the
        region's cost in the spec's metric (``exact_cost``, in place of the variance's); else nothing."""
        out = {}
        if self.sampler == "exact" and self.target == "pdp":
            out = {"lattice_privacy": "pdp", "lattice_sigma2": str(self.lattice_sigma2),
                   "lattice_cost_ratio": self.cost_ratio,
                   EXACT_COST_KEY: exact_cost("variance", self._variance(), self.sigma**2)}
        if self.span_cost is not None:
            out[EXACT_COST_KEY] = dict(self.span_cost)
        if self.decimal is not None:
            out |= self.decimal.record(self._decimal_cost()) | {"lattice_sigma2": str(self.lattice_sigma2)}
        return out

    def _decimal_cost(self) -> dict:
        """On the decimal lattice: the released noise's variance Var N_ℤ(0, σ_ℤ²)/D² against σ²
        (:func:`~dpopt.mechanisms.exact_cost.exact_cost` of one coordinate's variance)."""
        return exact_cost("variance", self._variance(), self.sigma**2)

    def scope_checks(self, problem: Problem) -> list[Check]:
        """On the lattice: :func:`lattice_scope_check`, and the span region's stated cost re-derived
        (:func:`~dpopt.mechanisms.span_inference.span_cost_check`) when one is stated or due."""
        if self.sampler != "exact":
            return []
        if self.decimal is not None:
            return [decimal_scope_check(problem, self.decimal, self.sigma, self._decimal_cost(), self.stated_cost)]
        checks = [lattice_scope_check(problem)]
        due = self._span_cost(problem.spec.utility)
        if due is not None or self.span_cost is not None:
            checks.append(span_cost_check(self.span_cost, due))
        return checks

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.sampler == "exact":
            s2 = self.lattice_sigma2
            draws = sample_discrete_gaussian(rng, s2.numerator, s2.denominator, size * self.dimension).reshape(
                size, self.dimension).astype(float)
            return draws if self.decimal is None else draws / self.decimal.scale
        return rng.normal(0.0, self.sigma, size=(size, self.dimension))

    def sampler_check_draws(self, default: int) -> int:
        """On the lattice: :func:`~dpopt.mechanisms.lattice.check_draws` (d variates a draw)."""
        return check_draws(default, self.dimension) if self.sampler == "exact" else default

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: x + η in int64, then converted (post-processing); on the decimal lattice (k + η)/D with k = D·x
        recovered exactly (:func:`scaled_answers`); else φ(X) + Z in floating point."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        s2 = self.lattice_sigma2
        noise = sample_discrete_gaussian(rng, s2.numerator, s2.denominator, values.size).reshape(values.shape)
        if self.decimal is not None:
            return (scaled_answers(values, self.decimal.scale) + noise).astype(float) / self.decimal.scale
        return (integer_answers(values) + noise).astype(float)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.decimal is not None:
            return [self.decimal.privacy_check(space, self.lattice_sigma2, privacy)]
        if self.sampler == "exact" and self.target == "pdp":
            return [lattice_pdp_check(space, self.lattice_sigma2, privacy, projected=self.noise_in_span)]
        if self.sampler == "exact":
            return [lattice_isotropic_check(space.l2_squared, self.lattice_sigma2, privacy)]
        return [gaussian_privacy_check(space.l2_squared, self.sigma, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.sampler == "exact" and self.target == "pdp":
            rho = (Fraction(space.l2_squared) if self.decimal is None else self.decimal.l2_squared) / (
                2 * self.lattice_sigma2)
            return {"rho": float(rho), "rho_exact": str(rho),
                    "conversion": "the pDP level is the privacy check's (exact per move pattern, or the sub-Gaussian "
                                  "bound at max ‖v‖² where the patterns are not derived); ρ = Δ₂²/(2σ_ℤ²)-zCDP "
                                  "holds as well (CKS 2020, Thm 14)"}
        if self.decimal is not None:
            return lattice_privacy_summary(self.decimal.l2_squared, self.lattice_sigma2, self.target)
        if self.sampler == "exact":
            return lattice_privacy_summary(space.l2_squared, self.lattice_sigma2, self.target)
        mu = space.l2 / self.sigma
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {
                f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)
            },
            "conversion": "exact: μ = Δ₂/σ, analytic-Gaussian (ε, δ) profile",
        }

    def notes(self) -> list[str]:
        if self.sampler == "exact":
            pdp = ("; the pDP target is certified by the privacy check: the exact level P[|L| > ε] of the discrete "
                   "law per move pattern, or, where the patterns are not derived, its sub-Gaussian bound at max ‖v‖²; "
                   f"at {self.cost_ratio:.6f} times the continuous design's variance (Lemma 10)"
                   if self.target == "pdp" else "")
            cost = [] if self.span_cost is None else ["confidence region on the span: " + cost_text(self.span_cost)]
            if self.decimal is not None:
                cost = [self.decimal.note(), cost_text(self._decimal_cost())]
            return [EXACT_MEASUREMENT_NOTE + f" (lattice variance σ_ℤ² = {self.lattice_sigma2}{pdp})", *cost]
        return super().notes() + ([f"no exact lattice measurement: {self.refusal}"] if self.refusal else [])

    def noise_law(self) -> ProductLaw | str:
        """d i.i.d. N(0, σ²) coordinates (on the lattice: d i.i.d. N_ℤ(0, σ_ℤ²); on the decimal lattice no law is
        stated: the released noise η/D lives on (1/D)ℤ)."""
        if self.decimal is not None:
            return DECIMAL_LAW_NOTE
        if self.sampler == "exact":
            return ProductLaw.iid(DiscreteGaussianMarginal(float(self.lattice_sigma2)), self.dimension,
                                  f"N_ℤ(0, σ_ℤ²)^d, σ_ℤ² = {self.lattice_sigma2}")
        return ProductLaw.iid(GaussianMarginal(self.sigma), self.dimension, f"N(0, σ²I_d), σ = {self.sigma:.17g}")

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the decimal lattice (up to :data:`MAX_IMAGE_CELLS` cells): the released noise η/D, C = I/D, W = η
        i.i.d. N_ℤ(0, σ_ℤ²) (the per-cell errors by convolution on (1/D)ℤ); else None."""
        if self.decimal is None or self.dimension > MAX_IMAGE_CELLS:
            return None
        return (np.eye(self.dimension) / self.decimal.scale,
                (DiscreteGaussianMarginal(float(self.lattice_sigma2)),) * self.dimension)

    def _variance(self) -> float:
        """The variance of one coordinate of the noise (on the decimal lattice Var N_ℤ(0, σ_ℤ²)/D²)."""
        if self.sampler != "exact":
            return self.sigma**2
        return discrete_variance(self.lattice_sigma2) / self._unit() ** 2

    def _unit(self) -> int:
        """D on the decimal lattice (the released noise is η/D), else 1."""
        return 1 if self.decimal is None else self.decimal.scale

    def _covariance_diagonal(self) -> np.ndarray:
        return np.full(self.dimension, self._variance())

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return self._variance() * self.dimension
        return self._variance() * float(np.sum(workload**2))

    def _expected_l1(self) -> float:
        """d·E|Y| on the lattice (the discrete Gaussian's series), else √(2/π) Σ_i sd_i."""
        if self.sampler == "exact":
            return self.dimension * discrete_gaussian_moments(float(self.lattice_sigma2))["mean_abs"] / self._unit()
        return expected_l1(np.sqrt(self._covariance_diagonal()))

    def _usefulness(self, gamma: float) -> float:
        """P(|Y| ≤ γ) on the lattice (the discrete Gaussian's series), else the mean of erf(γ/(√2 sd_i))."""
        if self.sampler == "exact":
            return discrete_gaussian_moments(float(self.lattice_sigma2), gamma * self._unit())["within"]
        return mean_usefulness(np.sqrt(self._covariance_diagonal()), gamma)

    def _max_variance(self) -> float:
        return float(self._covariance_diagonal().max())

    def noise_covariance(self) -> np.ndarray:
        """The noise covariance as a dense d × d matrix (for :mod:`dpopt.stats.inference`)."""
        return self._variance() * np.eye(self.dimension)

    def _log_ci_volume(self, alpha: float) -> float:
        """log V_r (σ² t)^{r/2}: P_V Z ~ N(0, σ² I_r) on V for both the isotropic and the projected noise
        (:func:`~dpopt.stats.inference.log_ci_volume`; finite beyond the double range)."""
        return log_ci_volume(self.span.rank, 2.0 * self.span.rank * math.log(self.sigma), alpha)

    def _exact_shift(self, alternative: np.ndarray) -> bool:
        """Whether part of the shift lies off the noise's support (then it is seen exactly)."""
        if not self.noise_in_span:
            return False
        off = alternative - self.span.project(alternative)
        return bool(np.linalg.norm(off) > 1e-9 * max(1.0, float(np.linalg.norm(alternative))))

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float:
        if self._exact_shift(alternative):
            return 1.0
        return power_from_noncentrality(float(np.linalg.norm(alternative)) / self.sigma, alpha)

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: the LR test's rejections of η + Z (statistic ηᵀ(η+Z)/(σ‖η‖) > z₁₋α);
        ``ci_volume``: importance weights 1{‖P_V Z‖² ≤ σ²t}/p(P_V Z) (p the N(0, σ²I_r)
        density on V), whose mean is the region's volume. On the lattice: the discrete law's terms
        (:func:`~dpopt.mechanisms.lattice.inference_terms`; on a proper span the region's own terms,
        :mod:`dpopt.stats.lattice_span_regions`)."""
        if self.sampler == "exact" and metric in self.lattice_metrics:
            found = self._lattice_inference(metric, alpha, alternative)
            if isinstance(found, (SpanRegion, ProjectedRegion)):
                return found.terms(z, self.span.project)
            shift = alternative if self.decimal is None or alternative is None else scaled_shift(alternative,
                                                                                                 self._unit())
            return inference_terms(found, z * self._unit(), shift)  # the draws η/D and the shift in units of k
        if metric == "test_power":
            if self._exact_shift(alternative):
                return np.ones(z.shape[0])
            norm = float(np.linalg.norm(alternative))
            statistic = (alternative @ alternative + z @ alternative) / (self.sigma * norm)
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        r = self.span.rank
        q = np.sum(self.span.project(z) ** 2, axis=1) / self.sigma**2
        return region_importance_weights(q, r, 2.0 * r * math.log(self.sigma), alpha)


def counting_query(problem: Problem) -> bool:
    """The compiled query's answers are integer counts: a counting kind, or a ``linear`` query whose matrix has
    whole entries (sums of whole multiples of counts; neighbours then differ by integer vectors). Decimal weights:
    :func:`~dpopt.mechanisms.decimal_lattice.lattice_scale` (the ``gaussian`` family's decimal lattice)."""
    return isinstance(problem.query, CountingQuery) and problem.query.integer_answers


def lattice_scope_check(problem: Problem) -> Check:
    """A lattice measurement's scope: the query's answers are counts, so neighbouring answers differ by integer
    vectors."""
    return Check("mechanism.lattice", "exact measurement: the query is a counting query (integer answers, "
                 "integer neighbouring shifts)", counting_query(problem), f"query kind {problem.spec.query.kind}")


def lattice_reason(problem: Problem, sigma: float, inference: bool = False, pdp: bool = False) -> str | None:
    """Why an isotropic Gaussian measurement N(0, σ²I) of the answers keeps the floating-point sampler (None: it
    measures exactly on the lattice; also the Gaussian stage of :mod:`~dpopt.mechanisms.james_stein`).
    ``inference``: the caller derives ``ci_volume`` and ``test_power`` from the discrete law. ``pdp``: the caller
    releases x + η itself, or its projection P_V(x + η) (whose privacy loss is the same), and calibrates a pDP target
    on the discrete law (:func:`~dpopt.mechanisms.lattice_pdp.pdp_lattice_design`)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if spec.utility.metric in CONTINUOUS_METRICS and not inference:
        return f"the {spec.utility.metric} prediction is of the continuous Gaussian"
    if pdp and spec.privacy.definition == "pdp":
        return None if counting_query(problem) else "the query's answers are not integer counts"
    reason = exact_refusal(spec.privacy.definition, counting_query(problem))
    if reason is None and target_lattice_variance(Fraction(sigma) ** 2, 1, spec.privacy.definition) is None:
        reason = ("the lattice variance is outside the exact sampler's range (2^-9 to 2^60)"
                  + (f", or above {MAX_SIGMA2} where the GDP slope is certified"
                     if spec.privacy.definition in GDP_TARGETS else ""))
    return reason


class ProjectedGaussianMechanism(GaussianMechanism):
    """Gaussian noise on the span V of the sensitivity space: N(0, σ² P_V).

    Sampled as P_V z with z ~ N(0, σ² I) (the projector applied implicitly). ``sampler="exact"``: the counts
    are measured exactly, y = x + η with η i.i.d. N_ℤ(0, σ_ℤ²) (the isotropic lattice measurement, of the same
    privacy), and the release is (I − P_V)x + P_V y, the first part from integer sums no neighbour moves
    (:meth:`~dpopt.sensitivity.subspace.Subspace.invariant_component`), the second from the integers y alone. On the
    lattice, ``ci_volume`` is the projected release's region: d‖P_V(ỹ − θ)‖² ≤ u from the exact law of d‖P_Vη‖² on
    the sum-zero span, else ‖P_V(ỹ − θ)‖² ≤ σ_ℤ²r, of coverage at least the full-d region's
    (:mod:`dpopt.stats.lattice_span_regions`). Under (ε, δ)-pDP the lattice variance is the isotropic design's
    (``lattice_sigma2``): P_V y has the privacy loss of y itself (:mod:`dpopt.mechanisms.lattice_pdp`).
    """

    family = "projected_gaussian"
    title = "Gaussian, projected on the sensitivity span"
    noise_in_span = True
    lattice_metrics = ("ci_volume",)
    """On the lattice: the region of the projected release (:func:`~dpopt.mechanisms.span_inference.span_inference`)."""

    def __init__(self, sigma: float, space: SensitivitySpace, sampler: str = "floating_point",
                 refusal: str | None = None, target: str = "zcdp", lattice_sigma2: Fraction | None = None):
        super().__init__(sigma, space.dimension, None, sampler, refusal, target, lattice_sigma2)
        self.span = space.span
        self.integer_noise = False  # P_V y is not integer-valued
        if sampler == "exact" and self.span.invariant_component(np.zeros((1, self.dimension))) is None:
            raise ValueError(f"the {self.span.name} span has no exact invariant component")

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        reason = super().supports(problem)
        if reason is None and not problem.space.rank_deficient:
            return "the sensitivity space spans all of R^d: projection changes nothing (use gaussian)"
        return reason

    @classmethod
    def design(cls, problem: Problem) -> "ProjectedGaussianMechanism":
        privacy = problem.spec.privacy
        sigma = gaussian_sigma(problem.space.l2_squared, privacy)
        utility = problem.spec.utility
        refusal = lattice_reason(problem, sigma, inference=utility.metric in cls.lattice_metrics, pdp=True)
        span = problem.space.span
        if refusal is None and span.invariant_component(np.zeros((1, span.ambient))) is None:
            refusal = f"the component off the {span.name} span is not a function of integer sums the neighbours keep"
        target = privacy.definition
        sigma2 = None
        if refusal is None and target == "pdp":
            sigma2, refusal = pdp_lattice_design(problem.space, privacy, sigma)
        mechanism = cls(sigma, problem.space, "exact" if refusal is None else "floating_point", refusal, target,
                        sigma2)
        if refusal is None and utility.metric in cls.lattice_metrics:
            found = mechanism._lattice_inference(utility.metric, utility.alpha, utility.alternative)
            if isinstance(found, str):  # the region is not derived on the lattice: the continuous design
                return cls(sigma, problem.space, "floating_point", found, target)
            mechanism.span_cost = mechanism._span_cost(utility)
        return mechanism

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "ProjectedGaussianMechanism":
        sigma2 = parameters.get("lattice_sigma2")
        return cls(parameters["sigma"], space, parameters.get("sampler", "floating_point"),
                   target=parameters.get("lattice_privacy", "zcdp"),
                   lattice_sigma2=None if sigma2 is None else Fraction(sigma2)).with_stated_cost(parameters)

    @property
    def parameters(self) -> dict:
        out = {"sigma": self.sigma, "span_rank": self.span.rank, "span": self.span.name}
        if self.sampler == "exact":  # absent: floating point
            out["sampler"] = "exact"
            if self.target == "gdp":
                out["lattice_privacy"] = "gdp"
        return out | self._lattice_parameters()

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.sampler == "exact":
            return self.span.project(super()._sample(rng, size))
        return self.span.project(rng.normal(0.0, self.sigma, size=(size, self.dimension)))

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: (I − P_V)x from the invariant integer sums, plus P_V y, y = x + η in int64 (class docstring)."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        s2 = self.lattice_sigma2
        counts = integer_answers(values)
        measured = counts + sample_discrete_gaussian(rng, s2.numerator, s2.denominator, values.size).reshape(
            values.shape)
        return self.span.invariant_component(counts) + self.span.project(measured.astype(float))

    def noise_law(self) -> ProductLaw | str:
        """r i.i.d. N(0, σ²) coordinates in an orthonormal basis of the span (r = its rank); the
        reason it is not built when that d × r basis has more than :data:`MAX_LAW_BASIS_ENTRIES`, or on the
        lattice (P_V η is not a product law in any orthonormal basis)."""
        if self.sampler == "exact":
            return ("the exact lattice measurement's released noise P_V η is a projection of independent discrete "
                    "Gaussians, not a product law; its privacy is the exact check's (CKS 2020, Theorem 14; the "
                    "certified GDP slope)")
        if self.span.ambient * self.span.rank > MAX_LAW_BASIS_ENTRIES:
            return (f"the {self.span.ambient} x {self.span.rank} basis of the span is too large for the second "
                    f"route (more than {MAX_LAW_BASIS_ENTRIES} entries)")
        return ProductLaw((GaussianMarginal(self.sigma),) * self.span.rank, self.dimension, self.span.basis(), None,
                          f"N(0, σ²P_V) on the {self.span.rank}-dimensional span V, σ = {self.sigma:.17g}")

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the lattice (up to :data:`MAX_IMAGE_CELLS` cells): the released noise P_V η, C = P_V, W = η i.i.d.
        N_ℤ(0, σ_ℤ²). For the sum-zero span P_V = I − J/d (entries multiples of 1/d) and a margin kernel
        (I − J/r) ⊗ (I − J/c) (multiples of 1/(rc)) the per-cell errors take the exact quantile by convolution
        (:mod:`dpopt.certificate.linear_tails`). None otherwise."""
        if self.sampler != "exact" or self.dimension > MAX_IMAGE_CELLS:
            return None
        basis = self.span.basis()
        return basis @ basis.T, (DiscreteGaussianMarginal(float(self.lattice_sigma2)),) * self.dimension

    def cell_variances(self) -> np.ndarray | None:
        """On the lattice: Var (P_V η)_i = v·(P_V)_ii, v = Var N_ℤ(0, σ_ℤ²) (the per-cell errors, no law being
        stated); None otherwise."""
        return self._covariance_diagonal() if self.sampler == "exact" else None

    def notes(self) -> list[str]:
        return super().notes() + [
            f"noise lies in the {self.span.rank}-dimensional span of the sensitivity space; the "
            "component of the answer orthogonal to it is released exactly (it is the same on "
            "every dataset the adjacency connects, e.g. the total under replace_one)"
        ]

    def _covariance_diagonal(self) -> np.ndarray:
        return self._variance() * self.span.projector_diagonal()

    def _expected_l1(self) -> float | None:
        """√(2/π) Σ_i sd_i for the Gaussian P_V z; None on the lattice, where (P_V η)_i is a combination of
        discrete Gaussians with no closed form: the base class then estimates it by Monte Carlo from the exact
        sampler (:meth:`~dpopt.mechanisms.base.Mechanism.expected_utility`)."""
        return None if self.sampler == "exact" else super()._expected_l1()

    def _usefulness(self, gamma: float) -> float | None:
        """The mean of erf(γ/(√2 sd_i)) for the Gaussian P_V z; None on the lattice (Monte Carlo, as for l1)."""
        return None if self.sampler == "exact" else super()._usefulness(gamma)

    def noise_covariance(self) -> np.ndarray:
        basis = self.span.basis()
        return self._variance() * (basis @ basis.T)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        if workload is None:
            return self._variance() * self.span.rank
        return self._variance() * float(np.sum(self.span.project(workload) ** 2))
