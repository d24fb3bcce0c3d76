r"""Laplace and Gaussian noise on a bounded sum or mean, measured exactly on a dyadic lattice.

The continuous design (Laplace(b) or N(0, σ²) on the answer) fixes the noise scale; the measurement is then the
integer lattice sum N of :mod:`dpopt.mechanisms.real_lattice` (units of g = 2^e) plus integer noise, and the
release g(N + η)/n:

- **Laplace** → η discrete Laplace of scale t = p/2^k (CKS 2020, Algorithms 1–2), designed by
  :class:`~dpopt.mechanisms.discrete_laplace.DiscreteLaplaceMechanism` on the integer space of shifts ≤ Δ_u:
  pure ε = Δ_u/t exactly; (ε, δ) through ε = Δ_u/t, δ unused (:func:`_laplace_listed`); ρ-zCDP by its Rényi
  divergences. g = 2^e ≤ 2^-20 min(b, Δ) (sum units), so the unit the rounding adds to Δ costs below 2^-20 and
  t ≈ b/g stays within the sampler's 2^40 for ε ≥ 2^-19. Under μ-GDP the check goes through ε-DP, looser than
  Laplace's exact one-dimensional trade-off: the lattice noise is wider than Laplace(b), and ``exact_cost`` states
  by how much.
- **Gaussian** → η ~ N_ℤ(0, σ_ℤ²) (:mod:`dpopt.noise.discrete_gaussian`), σ_ℤ² the dyadic lattice variance of
  :mod:`dpopt.mechanisms.lattice` for the continuous σ_u = the Gaussian calibration at Δ_u: ρ = Δ_u²/(2σ_ℤ²)
  (CKS Theorem 14), μ = Δ_u·m under μ-GDP and (ε, δ) (the certified slope). The sampler serves σ_ℤ² ≤ 2³⁰ and the
  slope σ_ℤ² ≤ 2²⁸, so g = 2^e is between 2^-14 σ and 2^-10 σ (zCDP) or 2^-13 σ and 2^-9 σ (μ-GDP, (ε, δ))
  (:data:`GAUSSIAN_BITS`): the unit the rounding adds to Δ costs up to about 2g/Δ in variance — nothing when the
  bounds are multiples of g. Under μ-GDP that is 2/Δ_u with Δ_u ≈ μσ_ℤ ≥ μ·2^13 on the finest lattice, at most
  2^-12/μ: with the slope's 2·10⁻⁴ below 0.1% for every bound when μ ≥ 0.31 (Δ/σ for (ε, δ)), and below that
  only when some tried lattice nearly aligns with the bound (a dyadic g, so that x/g is exact, and σ_ℤ below the
  slope's 2^14 leave no finer choice).
- **Gaussian under (ε, δ)-pDP** → the same N_ℤ(0, σ_ℤ²), σ_ℤ² bisected on the exact pDP level of the lattice sum
  (:func:`~dpopt.mechanisms.lattice_pdp.sum_pdp_variance`): the neighbours move N by any integer v with
  |v| ≤ Δ_u (the rounded difference under replace-one), and while Δ_u² ≤ 2εσ_ℤ² the worst of them is Δ_u itself
  (:func:`~dpopt.privacy.discrete_gaussian_pdp.shift_range_level`: the sets {η : |L| ≤ ε} are nested intervals),
  so one level is evaluated per σ_ℤ². g ≤ 2^-13 σ (:data:`PDP_BITS`). The exact level is below Lemma 10's bound:
  the lattice variance is usually below the continuous design's, and ``exact_cost`` says by how much.

The exact measurement is used whenever the spec allows it (:func:`_refusal`, the sampler's range), whatever its
cost: the parameters state it, ``lattice_cost_ratio`` (the noise variance on the lattice over the continuous
design's) and ``exact_cost`` (:func:`dpopt.mechanisms.exact_cost.exact_cost` of the two variances), both
re-derived by ``dpopt verify`` from the recorded scale and lattice. ``sampler: floating_point`` keeps the
continuous design and its note.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.errors import CalibrationError
from dpopt.mechanisms.discrete_laplace import DiscreteLaplaceMechanism, discrete_laplace_privacy_check
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY, exact_cost
from dpopt.domain.queries import NumericQuery
from dpopt.mechanisms.gaussian import CONTINUOUS_METRICS, GaussianMechanism
from dpopt.mechanisms.laplace import LaplaceMechanism
from dpopt.mechanisms.lattice_pdp import lattice_sum_pdp_check, sum_pdp_variance
from dpopt.mechanisms.base import UtilityValue
from dpopt.mechanisms.lattice import (
    discrete_variance,
    lattice_inference,
    lattice_isotropic_check,
    lattice_privacy_summary,
    target_lattice_variance,
)
from dpopt.mechanisms.real_lattice import (
    EXACT_SUM_NOTE,
    LATTICE_BITS,
    MAX_EXPONENT,
    RealLattice,
    answer_units,
    exponent_at_most,
    lattice_refusal,
    lattice_scope_check,
    real_lattice,
)
from dpopt.noise.discrete_gaussian import discrete_gaussian_moments, sample_discrete_gaussian
from dpopt.noise.discrete_laplace import discrete_laplace_moments, sample_discrete_laplace
from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy
from dpopt.stats.lattice_inference import LatticeRegion

PDP_BITS = 13
"""The finest lattice tried under (ε, δ)-pDP, g ≤ 2^-13 σ: each level evaluation sums the discrete law over
|k| ≤ 12σ_ℤ in arb (about 0.05–0.09 s at σ_ℤ ∈ [2^13, 2^14), some 25 of them in the calibration), and the unit the
rounding may add to Δ_u costs 2/Δ_u in variance, Δ_u ≈ σ_ℤ·Δ/σ (Δ/σ ≈ 0.29 at ε = 1, δ = 10⁻³: at most 0.085%,
nothing when the bounds are multiples of g)."""

GAUSSIAN_BITS = {"zcdp": 14, "gdp": 13, "approx": 13, "pdp": PDP_BITS}
"""The finest lattice tried, g = 2^e ≤ 2^-bits σ (sum units): σ_ℤ = σ/g below 2^15 (σ_ℤ² < 2³⁰, the int64 sampler's
range) under ρ-zCDP, below 2^14 (σ_ℤ² < 2²⁸, the certified slope's range,
:data:`dpopt.privacy.discrete_gaussian_gdp.MAX_SIGMA2`) under μ-GDP and (ε, δ), below 2^(PDP_BITS + 1) under pDP
(:data:`PDP_BITS`). The design tries this and the
four coarser lattices and takes the one whose rounding costs least, Δ_u·g smallest (the bounds' multiples of a
coarser g cost nothing), among those in the sampler's range."""

NOISE_FREE_NOTE = "no second route on the lattice: the neighbours' shift of N is the integer Δ_u (privacy claim), " \
                  "not the real sensitivity the second route reads"


class _LatticeSum:
    """What the two exact sum mechanisms share: the lattice, its scope check, the release through N."""

    lattice: RealLattice
    integer_noise = True
    integer_release = False  # the release g(N + η)/n is a real number: never rounded to an integer

    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """g·η/n, shape (size, 1) (the release's noise as a double; only for Monte Carlo checks)."""
        return (self._units_noise(rng, size).astype(float) * float(self.lattice.unit)).reshape(size, 1)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """g(N + η)/n: N = the lattice units of each answer (exact), η integer noise, the sum in int64."""
        units = self.lattice.units(values)
        return self.lattice.answers(units + self._units_noise(rng, units.size).reshape(units.shape))

    def scope_checks(self, problem: Problem) -> list[Check]:
        """:func:`~dpopt.mechanisms.real_lattice.lattice_scope_check`."""
        return [lattice_scope_check(problem, self.lattice)]

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """The guarantee of the integer noise, i.i.d. on each coordinate, against the moves of ``units`` (a
        sensitivity space in units of g: the lattice's own :meth:`RealLattice.space`, or the stacked per-group
        sums of a grouped release, :func:`dpopt.certificate.composition.joint_block`)."""
        raise NotImplementedError

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """On the lattice's integer space of Δ_u (the real ``space`` is re-derived as Δ_u by the scope check)."""
        return self.units_privacy_checks(self.lattice.space(listed=self.listed_space(privacy)), privacy)

    def listed_space(self, privacy: Privacy) -> bool:
        """Whether the checks read the lattice space's listed moves (±Δ_u)."""
        return True

    def noise_law(self) -> str:
        return NOISE_FREE_NOTE


def _refusal(problem: Problem, lattice_metrics: tuple[str, ...] = ()) -> str | None:
    """:func:`~dpopt.mechanisms.real_lattice.lattice_refusal`, and the metrics only the continuous law predicts
    (those of ``lattice_metrics`` are derived on the lattice)."""
    metric = problem.spec.utility.metric
    if metric in CONTINUOUS_METRICS and metric not in lattice_metrics:
        return f"the {metric} prediction is of the continuous law"
    return lattice_refusal(problem)


def _laplace_listed(privacy: Privacy) -> bool:
    """Whether the lattice's integer space for the discrete Laplace is listed (the move ±Δ_u): only under ρ-zCDP,
    whose Rényi check is a closed form per order; otherwise stated as not listed, so that the design and check go
    through ε = Δ_u/t (an exact (ε, δ) profile or trade-off function of the move would run over its Δ_u + 1 loss
    values, millions here; under (ε, δ) the continuous design's δ gains Δ₁/b = ε − 2 ln(1 − δ), a relative 2δ/ε in
    the scale, below 0.1% for δ ≤ ε/4000 and stated in ``exact_cost``)."""
    return privacy.definition == "zcdp"


class LatticeSumLaplace(_LatticeSum, LaplaceMechanism):
    """Laplace on a bounded sum or mean, measured on the lattice: N + η, η discrete Laplace of scale t (units)."""

    family = "laplace"  # registered in place of LaplaceMechanism, whose design it refines

    def __init__(self, scale: float, lattice: RealLattice, units_scale: Fraction):
        super().__init__(scale, 1)
        self.lattice, self.units_scale = lattice, Fraction(units_scale)
        self.cost_ratio = self._moments()["second_moment"] / (2 * float(Fraction(self.scale) / lattice.unit) ** 2)

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """:meth:`LaplaceMechanism.utility_bound`: the exact measurement's variance, (2t² − 1/6 + O(t⁻²))·(g/n)²
        with t ≥ b·n/g, is at least 2b² less 10⁻¹² relative (t ≥ 2^20), inside the bound's 10⁻⁹ margin (under μ-GDP,
        through ε, it is well above: still a bound)."""
        return LaplaceMechanism.utility_bound(problem)

    @classmethod
    def design(cls, problem: Problem) -> LaplaceMechanism:
        """:meth:`LaplaceMechanism.design`; on a bounded sum or mean, its exact lattice measurement unless the spec
        rules it out (then Laplace(b) and the reason)."""
        return cls.from_design(problem, LaplaceMechanism.design(problem))

    @classmethod
    def from_design(cls, problem: Problem, continuous: LaplaceMechanism) -> LaplaceMechanism:
        """The exact measurement of ``continuous``'s design, or ``continuous`` with its refusal."""
        if not isinstance(problem.query, NumericQuery):
            return continuous
        refusal = _refusal(problem)
        if refusal is None:
            divisor, sensitivity = answer_units(problem)
            b = Fraction(continuous.scale) * divisor
            try:
                lattice = real_lattice(problem, exponent_at_most(min(b, sensitivity), LATTICE_BITS))
                space = lattice.space(listed=_laplace_listed(problem.spec.privacy))
                units = DiscreteLaplaceMechanism.design(replace(problem, space=space))
            except CalibrationError as exc:
                refusal = f"on the lattice: {exc}"
            else:
                return cls(continuous.scale, lattice, units.scale)
        continuous.refusal = refusal
        return continuous

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> LaplaceMechanism:
        if "sum_lattice" not in parameters:
            return LaplaceMechanism.from_parameters(parameters, space)
        return cls(parameters["scale"], RealLattice.from_dict(parameters["sum_lattice"]),
                   Fraction(parameters["lattice_scale"]))

    @property
    def parameters(self) -> dict:
        return {"scale": self.scale, "sampler": "exact", "sum_lattice": self.lattice.to_dict(),
                "lattice_scale": str(self.units_scale), "lattice_cost_ratio": self.cost_ratio,
                EXACT_COST_KEY: exact_cost("variance", self._max_variance(), 2 * self.scale**2)}

    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        t = self.units_scale
        return sample_discrete_laplace(rng, t.numerator, t.denominator, size)

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [discrete_laplace_privacy_check(units, self.units_scale, privacy)]

    def listed_space(self, privacy: Privacy) -> bool:
        return _laplace_listed(privacy)

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        eps = Fraction(self.lattice.shift) / self.units_scale
        return {"epsilon": float(eps), "epsilon_exact": str(eps), "rho": float(eps * eps / 2),
                "conversion": "exact: ε = Δ_u/t on the lattice (Δ_u the lattice sum's sensitivity in units of g); "
                              "ε-DP ⇒ ε²/2-zCDP"}

    def notes(self) -> list[str]:
        lat = self.lattice
        return [EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=f"discrete Laplace noise of scale t = "
                                      f"{self.units_scale} (Algorithms 1–2)",
                                      divisor=lat.divisor, shift=lat.shift_text)]

    def _moments(self) -> dict:
        return discrete_laplace_moments(float(self.units_scale))

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = 1.0 if workload is None else float(np.sum(workload**2))
        return self._max_variance() * frob

    def _expected_l1(self) -> float:
        return self._moments()["mean_abs"] * float(self.lattice.unit)

    def _usefulness(self, gamma: float) -> float:
        return discrete_laplace_moments(float(self.units_scale), gamma / float(self.lattice.unit))["within"]

    def _max_variance(self) -> float:
        return self._moments()["second_moment"] * float(self.lattice.unit) ** 2


class LatticeSumGaussian(_LatticeSum, GaussianMechanism):
    """Gaussian on a bounded sum or mean, measured on the lattice: N + η, η ~ N_ℤ(0, σ_ℤ²) (units).

    ``ci_volume`` is the discrete law's interval: {θ : (N + η − θ/u)² ≤ σ_ℤ² r} in units (u = g/n the published
    spacing), r the proven radius of :func:`~dpopt.mechanisms.lattice.lattice_inference` for one coordinate
    (P(η² ≤ σ_ℤ² r) ≥ 1 − α), its length 2u·σ_ℤ√r. ``test_power`` keeps the continuous design: an alternative is a
    real shift, not a whole number of units.
    """

    family = "gaussian"  # registered in place of GaussianMechanism, whose design it refines
    lattice_metrics = ("ci_volume",)

    def __init__(self, sigma: float, lattice: RealLattice, sigma2: Fraction, target: str):
        super().__init__(sigma, 1, target=target)
        self.lattice, self.lattice_sigma2, self.sampler = lattice, Fraction(sigma2), "exact"
        self.integer_noise = True  # GaussianMechanism sets it per instance
        self.cost_ratio = discrete_variance(self.lattice_sigma2) / float(Fraction(self.sigma) / lattice.unit) ** 2

    @classmethod
    def design(cls, problem: Problem) -> GaussianMechanism:
        """:meth:`GaussianMechanism.design`; on a bounded sum or mean, its exact lattice measurement unless the
        spec rules it out (then N(0, σ²) and the reason)."""
        return cls.from_design(problem, GaussianMechanism.design(problem))

    @classmethod
    def from_design(cls, problem: Problem, continuous: GaussianMechanism) -> GaussianMechanism:
        """The exact measurement of ``continuous``'s design, or ``continuous`` with its refusal."""
        if not isinstance(problem.query, NumericQuery):
            return continuous
        privacy = problem.spec.privacy
        refusal = _refusal(problem, cls.lattice_metrics)
        if refusal is None:
            divisor, _ = answer_units(problem)
            sigma = Fraction(continuous.sigma) * divisor
            top = GAUSSIAN_BITS[privacy.definition]
            exponents = [exponent_at_most(sigma, bits) for bits in range(top, top - 5, -1)]
            lattices = [real_lattice(problem, e) for e in exponents if abs(e) <= MAX_EXPONENT]
            refusal = "the lattice variance is outside the exact sampler's range, or g outside the double range"
            for lattice in sorted(lattices, key=lambda lat: lat.shift * lat.granularity):  # the rounding's cost
                sigma_units = gaussian_sigma(Fraction(lattice.shift) ** 2, privacy)
                if privacy.definition == "pdp":
                    try:
                        sigma2 = sum_pdp_variance(lattice.shift, privacy, sigma_units)
                    except CalibrationError as exc:
                        refusal, sigma2 = f"on the lattice: {exc}", None
                else:
                    sigma2 = target_lattice_variance(Fraction(sigma_units) ** 2, 1, privacy.definition)
                if sigma2 is not None:
                    return cls(continuous.sigma, lattice, sigma2, privacy.definition)
        continuous.refusal = refusal
        return continuous

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> GaussianMechanism:
        if "sum_lattice" not in parameters:
            return GaussianMechanism.from_parameters(parameters, space)
        return cls(parameters["sigma"], RealLattice.from_dict(parameters["sum_lattice"]),
                   Fraction(parameters["lattice_sigma2"]), parameters.get("lattice_privacy", "zcdp"))

    @property
    def parameters(self) -> dict:
        return {"sigma": self.sigma, "sampler": "exact", "sum_lattice": self.lattice.to_dict(),
                "lattice_sigma2": str(self.lattice_sigma2), "lattice_privacy": self.target,
                "lattice_cost_ratio": self.cost_ratio,
                EXACT_COST_KEY: exact_cost("variance", self._variance(), self.sigma**2)}

    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        s2 = self.lattice_sigma2
        return sample_discrete_gaussian(rng, s2.numerator, s2.denominator, size)

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.target == "pdp":
            return [lattice_sum_pdp_check(units, self.lattice_sigma2, privacy)]
        return [lattice_isotropic_check(units.l2_squared, self.lattice_sigma2, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        if self.target == "pdp":
            rho = Fraction(self.lattice.shift) ** 2 / (2 * self.lattice_sigma2)
            return {"rho": float(rho), "rho_exact": str(rho),
                    "conversion": "the pDP level is the privacy check's (every integer move up to Δ_u, the worst "
                                  "Δ_u); ρ = Δ_u²/(2σ_ℤ²)-zCDP holds as well (CKS 2020, Thm 14)"}
        return lattice_privacy_summary(Fraction(self.lattice.shift) ** 2, self.lattice_sigma2, self.target)

    def notes(self) -> list[str]:
        lat = self.lattice
        return [EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=f"discrete Gaussian noise N_ℤ(0, σ_ℤ²), σ_ℤ² = "
                                      f"{self.lattice_sigma2} (step envelope, CKS Algorithm 1)", divisor=lat.divisor,
                                      shift=lat.shift_text)]

    def _variance(self) -> float:
        return discrete_variance(self.lattice_sigma2) * float(self.lattice.unit) ** 2

    def _lattice_inference(self, metric: str, alpha: float, alternative) -> LatticeRegion | str:
        """The units' region of ``ci_volume`` (class docstring), its volume in answer units (× u)."""
        found = lattice_inference(metric, (self.lattice_sigma2,), alpha, alternative)
        if isinstance(found, str):
            return found
        return replace(found, log_volume=found.log_volume + math.log(float(self.lattice.unit)))

    def _utility(self, utility) -> UtilityValue | None:
        """``ci_volume``: the interval's length in answer units, its method saying so."""
        found = super()._utility(utility)
        if found is None:
            return None
        return replace(found, method=f"{found.method}, in units of the published spacing u = g/n = "
                                     f"{self.lattice.unit} (the length times u)")

    def _inference_draws(self, metric, z, alpha, alternative) -> np.ndarray:
        """The region's terms of the draws in units (z/u: whole numbers)."""
        return super()._inference_draws(metric, z / float(self.lattice.unit), alpha, alternative)

    def _expected_l1(self) -> float:
        return discrete_gaussian_moments(float(self.lattice_sigma2))["mean_abs"] * float(self.lattice.unit)

    def _usefulness(self, gamma: float) -> float:
        return discrete_gaussian_moments(float(self.lattice_sigma2), gamma / float(self.lattice.unit))["within"]
