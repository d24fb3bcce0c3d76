r"""Query scaling (Shoham & Rinott): Gaussian noise on the adjusted query Diag(ξ)^{1/2}φ, inverted.

The agency answers the adjusted query :math:`\mathrm{Diag}(\xi)^{1/2}\varphi(X) + U`,
:math:`U \sim N(0, \sigma^2 I)`; the release is the analyst's inverse transform
:math:`\mathrm{Diag}(\xi)^{-1/2}(\cdot)`, an unbiased estimate of φ(X) with noise
:math:`N(0, \sigma^2\mathrm{Diag}(\xi)^{-1})`. So, to a user, this family is "the Gaussian
mechanism with per-coordinate noise chosen for the analysis": ξ is optimised for the
spec's utility (``ci_volume``: smallest confidence region; ``test_power``: most powerful
test against ``utility.alternative``; ``l2``: smallest expected squared error of the
workload) over the spec's derived sensitivity space, by
:func:`dpopt.optimize.query_scaling.optimal_diagonal_scaling` (closed forms on a box,
certified convex programs otherwise). ξ is normalised as in the paper, so that the
adjusted query has the same l2 sensitivity as φ (max over the generators of
Σ ξ_i v_i² = Δ₂²); σ is then calibrated like the isotropic Gaussian's.

Coordinates that never change between neighbours are released exactly (ξ_i = ∞, shown
as ``null`` in the parameters); coordinates a ``test_power`` design does not ask for
(ξ_i = 0) are not released (NaN, ``null`` in a release file). The family needs the
sensitivity span to be a coordinate subspace (otherwise a diagonal scaling would put
noise on a direction that never changes; ``projected_gaussian`` / ``gaussian_optimal``
handle those spaces).

Privacy: the release is a post-processing of a Gaussian mechanism on the adjusted query,
whose l2 sensitivity :math:`\Delta(f_\xi)^2 = \max_v \sum_i \xi_i v_i^2` is evaluated exactly
(rationals) over the generators of the sensitivity hull; the target is then checked as
for the isotropic Gaussian (μ = Δ(f_ξ)/σ).

**Exact measurement** (``sampler: exact``, the default, on counting queries; lattice variances in the exact
sampler's range): each noisy coordinate is measured as x_i + η_i with the integer count
x_i and η_i ~ N_ℤ(0, σ_i²), σ_i² the dyadic variance whose effective variance v_i is at least the design's σ²/ξ_i
(:func:`~dpopt.mechanisms.lattice.target_lattice_variance`; v_i = σ_i² under ρ-zCDP, 1/m_i² under μ-GDP and
(ε, δ), m_i the certified slope of :mod:`dpopt.privacy.discrete_gaussian_gdp`), sampled exactly. Neighbours
shift the counts by integer vectors v, so the measurement is μ-GDP (ρ-zCDP with ρ = μ²/2, CKS 2020 Theorem 14)
with μ² = max_v Σ_i v_i²/v_i, the design's own sensitivity Δ(f_ξ)²/σ² at the effective variances, evaluated
exactly in rationals (:func:`~dpopt.mechanisms.lattice.lattice_privacy_check`). The lattice variances are
re-derived from σ and ξ by ``dpopt verify`` (claim ``query_scaling.lattice_variances``). The ``ci_volume`` and
``test_power`` designs keep ξ and σ of the continuous formulas and predict the region and the test of the discrete
law (:mod:`dpopt.stats.lattice_inference`: coverage ≥ 1 − α and level ≤ α proven, the power a proven lower bound);
a fractional alternative keeps the floating-point sampler.

**Decimal weights** (:mod:`dpopt.mechanisms.decimal_lattice`; ``l2``, ``ci_volume``, ``test_power``): a ``linear``
query W = M/D measures the integers k = D·Wx the same way, k_i + η_i with σ_i² the dyadic variance whose effective
variance is at least D²σ²/ξ_i, and releases (k + η)/D. Neighbouring k differ by the integer shifts D·WΔ
(:meth:`~dpopt.mechanisms.decimal_lattice.DecimalScale.scaled_space`), so μ² = max_v Σ_i (D·v_i)²/v_i in rationals
over them; the released variances are Var N_ℤ(0, σ_i²)/D², their mean over the noisy coordinates stated against
that of σ²/ξ_i (``exact_cost``); D is recorded (``lattice_scale``) and re-derived by ``dpopt verify``. The region
and the test are the discrete law's for the integers k: the region of θ = Wx is {θ : Dθ in the region of k}, of
volume D^-r times it (r noisy coordinates), and the test of the alternative a is the test of D·a on k + η (the
bijection y ↦ y/D keeps the likelihood ratio, so the power is the same; D·a must be whole, as on counts).
"""

from __future__ import annotations

import math
from dataclasses import replace as dataclass_replace

import numpy as np

from fractions import Fraction

from dpopt.core import normal
from dpopt.core.checks import Check
from dpopt.errors import UnsupportedSpecError
from dpopt.mechanisms.base import Mechanism, UtilityValue
from dpopt.mechanisms.decimal_lattice import (
    NOT_COUNTS,
    DecimalScale,
    counts_lattice,
    counts_scope_check,
    scaled_answers,
    scaled_shift,
)
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, cost_text, exact_cost
from dpopt.mechanisms.gaussian import counting_query, lattice_scope_check
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_TARGETS,
    INFERENCE_METRICS,
    check_draws,
    discrete_variance,
    effective_variance,
    exact_refusal,
    inference_terms,
    integer_answers,
    lattice_inference,
    lattice_privacy_check,
    target_lattice_variance,
)
from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal, discrete_gaussian_moments, sample_discrete_gaussian
from dpopt.noise.gaussian import GaussianMarginal, expected_l1, mean_usefulness
from dpopt.noise.law import ProductLaw
from dpopt.optimize.query_scaling import (
    OBJECTIVES,
    adjust_query,
    adjusted_l2_squared,
    invert_adjusted_release,
    optimal_diagonal_scaling,
    scaled_log_ci_volume,
    scaled_test_power,
)
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy
from dpopt.stats.inference import region_importance_weights

_GAUSSIAN_TARGETS = ("gdp", "zcdp", "approx")


def _workload_weights(workload) -> np.ndarray | None:
    """w_i = ‖W e_i‖², the weight of coordinate i's variance in E‖W Z‖²."""
    return None if workload is None else np.sum(np.asarray(workload, dtype=float) ** 2, axis=0)


class QueryScalingMechanism(Mechanism):
    """Gaussian noise N(0, σ² Diag(ξ)⁻¹) = the inverse transform of a scaled query's Gaussian release."""

    family = "query_scaling"
    title = "Gaussian on a scaled query Diag(ξ)^½φ, inverted (Shoham–Rinott)"
    noise_in_span = True

    def __init__(self, xi, sigma: float, objective: str, design_note: str | None = None,
                 lattice: tuple[Fraction | None, ...] | None = None, target: str = "zcdp", refusal: str | None = None,
                 decimal: DecimalScale | None = None, stated_cost: dict | None = None):
        self.xi = np.asarray(xi, dtype=float).reshape(-1)
        if np.isnan(self.xi).any() or (self.xi < 0).any():
            raise ValueError("xi must be non-negative (0: not asked, inf: released exactly)")
        self.sigma = float(sigma)
        self.objective = objective
        self.dimension = self.xi.size
        self.design_note = design_note
        self.lattice = None if lattice is None else tuple(None if v is None else Fraction(v) for v in lattice)
        """σ_i² of each noisy coordinate on the lattice (None elsewhere); None: the floating-point sampler."""
        if self.lattice is not None and [v is not None for v in self.lattice] != list(self._noisy()):
            raise ValueError("a lattice variance is needed for each noisy coordinate (ξ finite and > 0), only there")
        self.sampler = "floating_point" if self.lattice is None else "exact"
        self.decimal = decimal if self.lattice is not None else None
        """The decimal lattice of a linear query with decimal weights (module docstring); None on counts."""
        self.needs_integer_answers = self.lattice is not None
        self.integer_noise = self.needs_integer_answers and not (self.xi == 0).any() and self.decimal is None
        """Released as int64 (:mod:`dpopt.release.blocks`) unless a coordinate is not asked (NaN marks it) or the
        release is (k + η)/D."""
        self.target = "gdp" if target in GDP_TARGETS else "zcdp"
        self.refusal = refusal
        # on the decimal lattice: the exact_cost a certificate states (re-derived by :meth:`scope_checks`)
        self.stated_cost = None
        if self.decimal is not None:
            self.stated_cost = self.parameters.get(EXACT_COST_KEY) if stated_cost is None else stated_cost

    def _unit(self) -> int:
        """D on the decimal lattice (the released noise is η/D), else 1."""
        return 1 if self.decimal is None else self.decimal.scale

    def _noisy(self) -> np.ndarray:
        """The coordinates that carry noise: ξ finite and positive."""
        return (self.xi > 0) & np.isfinite(self.xi)

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, space = problem.spec, problem.space
        if spec.privacy.definition not in _GAUSSIAN_TARGETS:
            return f"Gaussian noise cannot meet a {spec.privacy.definition} target"
        metric = spec.utility.metric
        if metric not in OBJECTIVES:
            return f"query scaling is designed for {', '.join(OBJECTIVES)}, not {metric}"
        if space.dimension < 2:
            return "the query has one coordinate: scaling it changes nothing (Shoham & Rinott need k > 1)"
        if spec.invariants and metric == "test_power":
            return ("a test_power design leaves coordinates unreleased, so the release would not keep "
                    "the invariants")
        # a coordinate subspace has projector diagonal in {0, 1} (each e_i inside it or orthogonal to it)
        diagonal = space.span.projector_diagonal()
        if not np.all((np.abs(diagonal) <= 1e-9) | (np.abs(diagonal - 1.0) <= 1e-9)):
            return (
                "the sensitivity span is not a coordinate subspace, so a diagonal scaling would add noise "
                "to a direction that never changes (use projected_gaussian or gaussian_optimal)"
            )
        vectors = space.listed()  # the design and its checks read the listed vectors, not only a stated hull
        if vectors is None:
            return "the sensitivity space is too large to list its vectors"
        changing = (np.asarray(vectors) != 0).any(axis=0)
        if int(changing.sum()) != space.rank:
            return "the listed generators do not span the sensitivity space"
        weights = _workload_weights(spec.utility.workload)
        if weights is not None and weights.size == space.dimension and not (weights[changing] > 0).all():
            return "the workload ignores a coordinate of the query; remove it from the query"
        return None

    @classmethod
    def design(cls, problem: Problem) -> "QueryScalingMechanism":
        """ξ optimal for the spec's metric, scaled so that Δ(f_ξ) = Δ(f); σ certified for Δ(f_ξ)."""
        spec, space = problem.spec, problem.space
        vectors = space.vectors()
        u = spec.utility
        scaling = optimal_diagonal_scaling(
            vectors, u.metric, eta=u.alternative, weights=_workload_weights(u.workload)
        )
        xi = scaling.xi.copy()
        finite = np.isfinite(xi)
        xi[finite] *= float(space.l2_squared)
        noisy = (xi > 0) & finite
        if (noisy == finite).all() and xi[noisy].max() <= xi[noisy].min() * (1.0 + 1e-9):
            xi[noisy] = 1.0  # the optimum is the plain query (up to rounding): state it exactly
        sigma = gaussian_sigma(adjusted_l2_squared(vectors, xi), spec.privacy)
        note = (
            f"ξ optimises {u.metric} over the sensitivity hull by {scaling.method}"
            + (f"; certified duality gap {scaling.duality_gap:.2g}" if scaling.duality_gap else "")
        )
        lattice, refusal, decimal = _lattice_variances(problem, xi, sigma)
        mechanism = cls(xi, sigma, u.metric, note, lattice, spec.privacy.definition, refusal, decimal)
        if lattice is not None and u.metric in INFERENCE_METRICS:
            found = mechanism._lattice_inference(u.metric, u.alpha, u.alternative)
            if isinstance(found, str):
                return cls(xi, sigma, u.metric, note, None, spec.privacy.definition, found)
        return mechanism

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> "QueryScalingMechanism":
        xi = [math.inf if x is None else float(x) for x in parameters["xi"]]
        if len(xi) != space.dimension:
            raise ValueError(f"xi has {len(xi)} entries for a query of dimension {space.dimension}")
        lattice = parameters.get("lattice_variances")
        return cls(xi, parameters["sigma"], parameters["objective"],
                   lattice=None if lattice is None else [None if v is None else Fraction(v) for v in lattice],
                   target=parameters.get("lattice_privacy", "zcdp"), decimal=DecimalScale.from_parameters(parameters),
                   stated_cost=parameters.get(EXACT_COST_KEY))

    @property
    def parameters(self) -> dict:
        out = {
            "xi": [None if math.isinf(x) else float(x) for x in self.xi],
            "sigma": self.sigma,
            "objective": self.objective,
        }
        if self.lattice is not None:  # absent: floating point
            out |= {"sampler": "exact", "lattice_variances": [None if v is None else str(v) for v in self.lattice]}
            if self.target == "gdp":
                out["lattice_privacy"] = "gdp"
        if self.decimal is not None:
            out |= self.decimal.record(self._decimal_cost())
        return out

    def _decimal_cost(self) -> dict:
        """On the decimal lattice: the mean released variance Var N_ℤ(0, σ_i²)/D² over the noisy coordinates against
        the mean of the design's σ²/ξ_i (:func:`~dpopt.mechanisms.exact_cost.exact_cost` of the variance)."""
        noisy = self._noisy()
        continuous = float(np.mean(self.sigma**2 / self.xi[noisy]))
        return exact_cost("variance", float(np.mean(self._variances()[noisy])), continuous)

    def scope_checks(self, problem: Problem) -> list[Check]:
        """On the lattice: the query is a counting query (:func:`~dpopt.mechanisms.gaussian.lattice_scope_check`);
        on the decimal lattice D, Δ_D² and the stated cost re-derived
        (:func:`~dpopt.mechanisms.decimal_lattice.counts_scope_check`)."""
        if self.decimal is not None:
            return [counts_scope_check(problem, self.decimal, self._decimal_cost(), self.stated_cost)]
        return [lattice_scope_check(problem)] if self.lattice is not None else []

    def _variances(self) -> np.ndarray:
        """The noise variance per coordinate: σ²/ξ_i (on the lattice Var N_ℤ(0, σ_i²), divided by D² on the decimal
        lattice); 0 when released exactly, ∞ when not asked."""
        if self.lattice is not None:
            return np.array([discrete_variance(v) / self._unit() ** 2 if v is not None
                             else (0.0 if math.isinf(x) else math.inf) for v, x in zip(self.lattice, self.xi)])
        with np.errstate(divide="ignore"):
            return np.where(np.isinf(self.xi), 0.0, self.sigma**2 / self.xi)

    def noise_law(self) -> ProductLaw | str:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`); on the
        decimal lattice none is stated (the released noise η/D lives on (1/D)ℤ: :meth:`linear_noise_image`)."""
        if self.decimal is not None:
            return ("no noise law stated on the decimal lattice: the released noise η_i/D lives on (1/D)ℤ (η_i ~ "
                    "N_ℤ(0, σ_i²)); its privacy is the exact check's on the integer shifts D·WΔ")
        xi = np.asarray(self.xi, dtype=float)
        noisy = np.flatnonzero(np.isfinite(xi) & (xi > 0))
        basis = np.zeros((self.dimension, noisy.size))
        basis[noisy, np.arange(noisy.size)] = 1.0
        if self.lattice is not None:
            marginals = tuple(DiscreteGaussianMarginal(float(self.lattice[i])) for i in noisy)
            return ProductLaw(marginals, self.dimension, basis, xi > 0,
                              "N_ℤ(0, σ_i²) per noisy coordinate, σ_i² = "
                              + ", ".join(str(self.lattice[i]) for i in noisy) + "; ξ = ∞ exact, ξ = 0 not released")
        marginals = tuple(GaussianMarginal(self.sigma / float(np.sqrt(xi[i]))) for i in noisy)
        return ProductLaw(marginals, self.dimension, basis, xi > 0,
                          f"N(0, σ²Diag(ξ)⁻¹), σ = {self.sigma:.17g}; ξ = ∞ exact, ξ = 0 not released")

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the decimal lattice: the released noise η/D on the noisy coordinates, C the d × r matrix with 1/D at
        each noisy coordinate, W = η_i ~ N_ℤ(0, σ_i²) (the per-cell errors by convolution on (1/D)ℤ); else None."""
        if self.decimal is None:
            return None
        noisy = np.flatnonzero(self._noisy())
        image = np.zeros((self.dimension, noisy.size))
        image[noisy, np.arange(noisy.size)] = 1.0 / self.decimal.scale
        return image, tuple(DiscreteGaussianMarginal(float(self.lattice[i])) for i in noisy)

    def _lattice_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` rows of exact integer noise: N_ℤ(0, σ_i²) on the noisy coordinates, 0 elsewhere (int64)."""
        out = np.zeros((size, self.dimension), dtype=np.int64)
        for i, v in enumerate(self.lattice):
            if v is not None:
                out[:, i] = sample_discrete_gaussian(rng, v.numerator, v.denominator, size)
        return out

    def sampler_check_draws(self, default: int) -> int:
        """On the lattice: :func:`~dpopt.mechanisms.lattice.check_draws` (d variates a draw)."""
        return check_draws(default, self.dimension) if self.lattice is not None else default

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.lattice is not None:
            z = self._lattice_noise(rng, size).astype(float) / self._unit()
            z[:, self.xi == 0] = np.nan
            return z
        sd = np.sqrt(self._variances())
        z = rng.normal(size=(size, self.dimension)) * np.where(np.isinf(sd), 0.0, sd)
        z[:, np.isinf(sd)] = np.nan
        return z

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        vectors = space.vectors()
        exact = np.isinf(self.xi)
        moving = np.flatnonzero(exact & (np.asarray(vectors) != 0).any(axis=0))
        exact_check = Check(
            "query_scaling.exact_coordinates",
            "every generator of the sensitivity hull is exactly 0 on the coordinates released without noise",
            moving.size == 0,
            f"{int(exact.sum())} exact coordinate(s)"
            + (f"; changing: {moving.tolist()}" if moving.size else ""),
        )
        if moving.size:
            return [exact_check, Check("privacy", "Gaussian noise on the adjusted query", False,
                                       "a coordinate released exactly changes between neighbours")]
        if self.decimal is not None:
            try:
                vectors = self.decimal.scaled_space(space).vectors()
            except ValueError as error:
                return [exact_check, Check("privacy", "exact measurement on the decimal lattice", False, str(error))]
        if self.lattice is not None:
            return [exact_check, self._lattice_design_check(privacy), self._lattice_check(vectors, privacy)]
        adjusted = adjusted_l2_squared(vectors, self.xi)
        check = gaussian_privacy_check(adjusted, self.sigma, privacy)
        return [
            exact_check,
            Check(
                check.claim,
                check.method + f"; Δ₂ here is that of the adjusted query, Δ(f_ξ)² = max_v Σ ξ_i v_i² "
                f"evaluated exactly over the {len(vectors)} generators",
                check.passed,
                check.detail + f"; Δ(f_ξ)² = {float(adjusted):.17g}",
            ),
        ]

    def _effective_variances(self, definition: str) -> list[Fraction | None] | None:
        """v_i = :func:`~dpopt.mechanisms.lattice.effective_variance` of each lattice variance (None off the
        noisy coordinates); None when a slope is not certified."""
        out = [None if v is None else effective_variance(v, definition) for v in self.lattice]
        return None if any(e is None for e, v in zip(out, self.lattice) if v is not None) else out

    def _lattice_mu_squared(self, vectors, definition: str) -> Fraction | None:
        """μ² = max_v Σ_i v_i²/v_i over the listed neighbouring differences, exact in rationals (rows within 1e-9 of
        the float maximum re-evaluated exactly, as :func:`adjusted_l2_squared` does); None when a slope is not
        certified."""
        effective = self._effective_variances(definition)
        if effective is None:
            return None
        v = np.atleast_2d(np.asarray(vectors, dtype=float))
        cols = [i for i, e in enumerate(effective) if e is not None]
        weights = np.zeros(self.dimension)
        weights[cols] = [1.0 / float(effective[i]) for i in cols]
        values = (v**2) @ weights
        top = float(values.max(initial=0.0))
        rows = np.flatnonzero(values >= top * (1 - 1e-9))
        return max((sum((Fraction(v[r, i]) ** 2 / effective[i] for i in cols), Fraction(0)) for r in rows),
                   default=Fraction(0))

    def _lattice_design_check(self, privacy: Privacy) -> Check:
        """The recorded lattice variances are the design's: σ_i² of σ²/ξ_i (:func:`_lattice_of`), so that σ and ξ,
        which the certificate also records, describe the noise."""
        expected = _lattice_of(self.xi, self.sigma, privacy.definition, self._unit())
        return Check("query_scaling.lattice_variances", "each lattice variance σ_i² is the dyadic rounding of the "
                     "design's σ²/ξ_i (D²σ²/ξ_i on the decimal lattice) for the target (target_lattice_variance), "
                     "re-derived from σ and ξ",
                     expected == self.lattice, "equal" if expected == self.lattice else
                     f"recorded {[None if v is None else str(v) for v in self.lattice]}, derived "
                     f"{None if expected is None else [None if v is None else str(v) for v in expected]}")

    def _lattice_check(self, vectors, privacy: Privacy) -> Check:
        mu_squared = self._lattice_mu_squared(vectors, privacy.definition)
        if mu_squared is None:
            return Check("privacy", "exact lattice measurement", False,
                         "a lattice variance is beyond the certified GDP slope's range")
        where = ("" if self.decimal is None else f" (the integer shifts D·WΔ of the decimal lattice, D = "
                                                 f"{self.decimal.scale})")
        return lattice_privacy_check(mu_squared, privacy, f"max_v Σ_i v_i²/v_i over the {len(vectors)} listed "
                                     f"neighbouring differences{where} (exact rationals)")

    def notes(self) -> list[str]:
        if self.lattice is not None:
            decimal = ([] if self.decimal is None else
                       [self.decimal.note("the discrete Gaussian noise N_ℤ(0, σ_i²)"), cost_text(self._decimal_cost())])
            return [EXACT_MEASUREMENT_NOTE + " (lattice variances σ_i² = "
                    + ", ".join(str(v) for v in self.lattice if v is not None) + ")"] + decimal + self._design_notes()
        return super().notes() + ([f"no exact lattice measurement: {self.refusal}"] if self.refusal else []) + \
            self._design_notes()

    def _design_notes(self) -> list[str]:
        out = [
            "the design's noise N(0, σ² Diag(ξ)⁻¹) (Shoham & Rinott) is measured exactly, each noisy count as "
            "x_i + N_ℤ(0, σ_i²) with effective variance at least σ²/ξ_i" if self.lattice is not None else
            (
                "the agency answers the adjusted query Diag(ξ)^½ φ(X) + N(0, σ²I) (Shoham & Rinott); the "
                "release is its inverse transform Diag(ξ)^-½(·), an unbiased estimate of φ(X) with noise "
                "N(0, σ² Diag(ξ)⁻¹)"
            )
        ]
        exact = np.flatnonzero(np.isinf(self.xi))
        if exact.size:
            out.append(f"coordinates {exact.tolist()} never change between neighbours: released exactly")
        unasked = np.flatnonzero(self.xi == 0)
        if unasked.size:
            out.append(f"coordinates {unasked.tolist()} are not asked (ξ = 0) and not released: the "
                       f"{self.objective} design spends the whole budget on the others")
        if self.design_note:
            out.append(self.design_note)
        return out

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.lattice is not None:
            vectors = space.vectors() if self.decimal is None else self.decimal.scaled_space(space).vectors()
            mu_squared = self._lattice_mu_squared(vectors, self.target)
            mu = math.sqrt(float(mu_squared))
            if self.target != "gdp":
                return {"rho": float(mu_squared / 2), "rho_exact": str(mu_squared / 2),
                        "conversion": "exact: ρ = max_v Σ_i v_i²/(2σ_i²) on the lattice (CKS 2020, Thm 14)"}
            return {"mu": mu, "rho": mu * mu / 2.0,
                    "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
                    "conversion": "exact: μ² = max_v Σ_i v_i² m_i² on the lattice (m_i the certified GDP slope of "
                                  "N_ℤ(0, σ_i²)), analytic-Gaussian (ε, δ) profile"}
        mu = math.sqrt(float(adjusted_l2_squared(space.vectors(), self.xi))) / self.sigma
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ = Δ(f_ξ)/σ, analytic-Gaussian (ε, δ) profile",
        }

    # ------------------------------------------------------------ release
    def _adjusted_release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """What the agency publishes for each row φ of ``values`` (m × d): Diag(ξ)^½ φ + N(0, σ²I)
        on the asked, changing coordinates; the exact coordinates unchanged; NaN for coordinates not asked."""
        noisy = (self.xi > 0) & np.isfinite(self.xi)
        draws = rng.normal(0.0, self.sigma, values.shape)
        adjusted = adjust_query(values.ravel(), np.tile(self.xi, values.shape[0])).reshape(values.shape)
        out = adjusted + np.where(noisy, draws, 0.0)
        out[:, self.xi == 0] = np.nan
        return out

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The inverse transform of the adjusted release: φ + N(0, σ² Diag(ξ)⁻¹), NaN where not asked; on the
        lattice x + η in int64 (module docstring), then converted."""
        if self.lattice is not None:
            noise = self._lattice_noise(rng, values.shape[0])
            if self.decimal is None:
                out = (integer_answers(values) + noise).astype(float)
            else:  # (k + η)/D, k = D·Wx recovered exactly (decimal_lattice.scaled_answers)
                out = (scaled_answers(values, self.decimal.scale) + noise).astype(float) / self.decimal.scale
            out[:, self.xi == 0] = np.nan
            return out
        adjusted = self._adjusted_release(values, rng)
        return invert_adjusted_release(adjusted.ravel(), np.tile(self.xi, values.shape[0])).reshape(values.shape)

    def noise_covariance(self) -> np.ndarray:
        """Diag(σ²/ξ): 0 on exact coordinates, ∞ on coordinates not asked."""
        return np.diag(self._variances())

    # ------------------------------------------------------------ utility
    def _expected_l2(self, workload: np.ndarray | None) -> float:
        w = np.ones(self.dimension) if workload is None else _workload_weights(workload)
        var = self._variances()
        return float(np.sum(np.where(w > 0, w * var, 0.0)))

    def _expected_l1(self) -> float:
        if self.lattice is not None:
            return sum(discrete_gaussian_moments(float(v))["mean_abs"] for v in self.lattice
                       if v is not None) / self._unit()
        return expected_l1(np.sqrt(self._variances()))

    def _usefulness(self, gamma: float) -> float:
        if self.lattice is not None:
            return float(np.mean([1.0 if v is None else
                                  discrete_gaussian_moments(float(v), gamma * self._unit())["within"]
                                  for v in self.lattice]))
        return mean_usefulness(np.sqrt(self._variances()), gamma)

    def _max_variance(self) -> float:
        return float(self._variances().max())

    def _lattice_inference(self, metric: str, alpha: float, alternative):
        """The region or test for the lattice noise on the noisy coordinates (exact ones add nothing, ones not
        asked are not released; :func:`~dpopt.mechanisms.lattice.lattice_inference`), or why not. On the decimal
        lattice both are of the integers k = D·Wx (:meth:`_scaled_shift`): the region's volume times D^-r in the
        released units (r noisy coordinates: the region of θ is the one of Dθ scaled by 1/D), the test of the
        alternative times D of the same power (:func:`~dpopt.mechanisms.decimal_lattice.scaled_utility`)."""
        noisy = np.flatnonzero(self._noisy())
        if metric == "ci_volume" and (self.xi == 0).any():
            return "a coordinate is not released, so no bounded region"
        shift = self._scaled_shift(alternative)
        found = lattice_inference(metric, [self.lattice[i] for i in noisy], alpha,
                                  None if shift is None else shift[noisy])
        if self.decimal is None or metric != "ci_volume" or isinstance(found, str):
            return found
        return dataclass_replace(found, log_volume=found.log_volume - noisy.size * math.log(self.decimal.scale))

    def _scaled_shift(self, alternative) -> np.ndarray | None:
        """The alternative in units of the measured integers: itself on counts, D times it on the decimal lattice
        (exactly, :func:`~dpopt.mechanisms.decimal_lattice.scaled_shift`)."""
        if alternative is None:
            return None
        if self.decimal is None:
            return np.asarray(alternative, dtype=float)
        return np.asarray(scaled_shift(alternative, self.decimal.scale))

    def _utility(self, utility) -> UtilityValue | None:
        """On the lattice, ``ci_volume`` and ``test_power`` from the discrete law (a shift seen exactly on a
        coordinate released without noise: power 1, the closed form)."""
        if self.lattice is None or utility.metric not in INFERENCE_METRICS:
            return None
        alternative = utility.alternative
        if utility.metric == "test_power" and (np.isinf(self.xi) & (np.asarray(alternative) != 0)).any():
            return None
        found = self._lattice_inference(utility.metric, utility.alpha, alternative)
        if isinstance(found, str):
            raise UnsupportedSpecError("utility.metric", f"on the lattice: {found}")
        if utility.metric == "ci_volume":  # its log, in any dimension
            return UtilityValue.volume(found.log_volume, found.describe())
        return UtilityValue(utility.metric, found.power, found.describe())

    def _log_ci_volume(self, alpha: float) -> float:
        return scaled_log_ci_volume(self.xi, self.sigma, alpha)

    def _test_power(self, alternative: np.ndarray, alpha: float) -> float:
        return scaled_test_power(self.xi, alternative, self.sigma, alpha)

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """``test_power``: rejections of the LR test (7) on η + Z over the asked coordinates;
        ``ci_volume``: importance weights of the N(0, σ²Diag(ξ)⁻¹) region (mean = its volume). On the lattice:
        the discrete law's terms (:func:`~dpopt.mechanisms.lattice.inference_terms`)."""
        noisy = (self.xi > 0) & np.isfinite(self.xi)
        if metric == "test_power" and (np.isinf(self.xi) & (alternative != 0)).any():
            return np.ones(z.shape[0])
        if self.lattice is not None:
            found = self._lattice_inference(metric, alpha, alternative)
            shift = self._scaled_shift(alternative)  # the draws η/D and the shift in units of the integers
            return inference_terms(found, z[:, noisy] * self._unit(), None if shift is None else shift[noisy])
        if metric == "test_power":
            weight = self.xi[noisy] * alternative[noisy] / self.sigma**2
            lam = math.sqrt(float(weight @ alternative[noisy]))
            statistic = (alternative[noisy] + z[:, noisy]) @ weight / lam
            return (statistic > normal.ndtri(1.0 - alpha)).astype(float)
        if (self.xi == 0).any():
            return np.full(z.shape[0], np.inf)
        q = np.sum(self.xi[noisy] * z[:, noisy] ** 2, axis=1) / self.sigma**2
        log_det = float(np.sum(2.0 * math.log(self.sigma) - np.log(self.xi[noisy])))
        return region_importance_weights(q, int(noisy.sum()), log_det, alpha)


def _lattice_variances(problem: Problem, xi: np.ndarray, sigma: float
                       ) -> tuple[tuple | None, str | None, DecimalScale | None]:
    """(σ_i² per coordinate on the lattice, None, the decimal lattice or None) for the exact measurement of the module
    docstring, or (None, why the design keeps the floating-point sampler, None)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return None, "the spec asks for sampler: floating_point", None
    if spec.utility.metric not in ("l2", *INFERENCE_METRICS):
        return None, f"the {spec.utility.metric} prediction is of the continuous Gaussian", None
    reason = exact_refusal(spec.privacy.definition, counting_query(problem))
    decimal = None
    if reason == NOT_COUNTS:
        found = counts_lattice(problem)
        if isinstance(found, str):
            return None, found, None
        decimal = found
    elif reason is not None:
        return None, reason, None
    lattice = _lattice_of(xi, sigma, spec.privacy.definition, 1 if decimal is None else decimal.scale)
    if lattice is None:
        return None, "a lattice variance is outside the exact sampler's range (or the certified GDP slope's)", None
    return lattice, None, decimal


def _lattice_of(xi: np.ndarray, sigma: float, definition: str, scale: int = 1) -> tuple[Fraction | None, ...] | None:
    """σ_i² = :func:`~dpopt.mechanisms.lattice.target_lattice_variance` of σ²/ξ_i at ``scale`` (D on the decimal
    lattice: effective variance ≥ D²σ²/ξ_i) on each noisy coordinate (None elsewhere), or None when one is outside
    the sampler's (or the certified slope's) range."""
    lattice = []
    for x in xi:
        if not (0 < x < math.inf):
            lattice.append(None)
            continue
        variance = target_lattice_variance(Fraction(sigma) ** 2 / Fraction(float(x)), scale, definition)
        if variance is None:
            return None
        lattice.append(variance)
    return tuple(lattice)
