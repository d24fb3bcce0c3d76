r"""Discrete Gaussian noise for integer-valued queries, sampled exactly (Canonne, Kamath & Steinke 2020).

i.i.d. N_Z(0, σ²) noise per coordinate, σ² = p/2^k a dyadic rational.

Privacy (:mod:`dpopt.privacy.discrete_gaussian`):

* ρ-zCDP with ρ = Δ₂²/(2σ²) (CKS Thm 14), checked in exact rational arithmetic;
* (ε, δ): the exact profile of the noise law, maximised over the neighbouring
  differences. A difference that changes one coordinate has the profile of CKS Thm 7
  (evaluated as an upper bound in 80 digits); one spread over several coordinates (a
  histogram under replace-one) the exact profile of the sum of their losses
  (:func:`~dpopt.privacy.discrete_gaussian.discrete_gaussian_move_delta_mp`, 50 digits,
  an upper bound). Only when the differences cannot be listed, the exact sum is beyond
  its budget (:data:`~dpopt.privacy.discrete_gaussian.MOVE_MP_BUDGET`) or σ² is above
  :data:`EXACT_PROFILE_MAX_SIGMA2` (the profile sums about 40σ terms), the ρ-zCDP
  guarantee is converted by the CKS bound (Prop. 12; :mod:`dpopt.privacy.zcdp`), checked
  in 60 digits at one order α (every α > 1 gives a valid bound), which spends more noise;
* (ε, δ)-pDP: the exact level P[|L| > ε] of the discrete law per move pattern, maximised over the listed
  moves (:mod:`dpopt.privacy.discrete_gaussian_pdp`, arb; :mod:`dpopt.mechanisms.lattice_pdp`), σ² searched from
  Lemma 10's continuous σ² (Liu 2019); when the moves are neither listed nor their patterns derived, the
  sub-Gaussian bound at the exact max ‖v‖², which bounds every move's level
  (:func:`~dpopt.privacy.discrete_gaussian_pdp.norm_pdp_level`).

Sampling is exact in integer arithmetic (:mod:`dpopt.noise.discrete_gaussian`: a step envelope inverted from
uniform words, acceptance by CKS Algorithm 1; the module also holds the law's moments); the parameter range is the
sampler's: σ² ≤ 2^60, denominator a power of two ≤ 2^30, numerator below 2^61.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithm 3, Theorems 7 and 14.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below, written
from dpopt.core.checks import Check
from dpopt.core.roots import bisect_feasible
from dpopt.core.rounding import nudge_until
from dpopt.domain.queries import CountingQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.integer_noise import (
    EXACT_SAMPLER_NOTE,
    IntegerNoiseMechanism,
    dyadic_ceil,
    move_patterns,
)
from dpopt.mechanisms.lattice_pdp import lattice_pdp_check, pdp_lattice_sigma2
from dpopt.noise.discrete_gaussian import (
    MAX_WIDE_SIGMA2,
    DiscreteGaussianMarginal,
    discrete_gaussian_moments,
    sample_discrete_gaussian,
)
from dpopt.noise.law import ProductLaw
from dpopt.privacy.discrete_gaussian import (
    MOVE_MP_BUDGET,
    discrete_gaussian_delta_mp,
    discrete_gaussian_move_delta,
    discrete_gaussian_move_delta_mp,
    move_mp_cost,
)
from dpopt.privacy.gaussian import gaussian_mu
from dpopt.privacy.pdp import gaussian_pdp_sigma
from dpopt.privacy.zcdp import zcdp_delta_cks, zcdp_delta_cks_mp, zcdp_epsilon_cks
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")

MAX_SIGMA2 = Fraction(MAX_WIDE_SIGMA2)
"""Largest σ² served: the exact sampler's range (its law's margins and moments are closed forms above 2^30,
:mod:`dpopt.noise.discrete_gaussian_tail`)."""

EXACT_PROFILE_MAX_SIGMA2 = Fraction(2**30)
"""Largest σ² whose (ε, δ) is certified by the exact profile (sums over about 40σ terms); above, by ρ-zCDP and the
CKS conversion."""


def _exact_patterns(space: SensitivitySpace, sigma2: float) -> list[tuple[int, ...]] | None:
    """The move patterns when the exact profile can be certified at σ² within the budget, else None."""
    if sigma2 > EXACT_PROFILE_MAX_SIGMA2:
        return None
    patterns = move_patterns(space)
    if patterns is None or any(len(t) > 1 and move_mp_cost(sigma2, t) > MOVE_MP_BUDGET for t in patterns):
        return None
    return patterns


def _exact_delta_mp(epsilon: float, sigma2: Fraction, pattern: tuple[int, ...]):
    if len(pattern) == 1:
        return discrete_gaussian_delta_mp(epsilon, sigma2, pattern[0])
    return discrete_gaussian_move_delta_mp(epsilon, sigma2, pattern)


def _rho(l2_squared: Fraction, sigma2: Fraction) -> Fraction:
    return Fraction(l2_squared) / (2 * sigma2)


def _float_above(x: Fraction) -> float:
    """The smallest float ≥ x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def discrete_gaussian_privacy_check(space: SensitivitySpace, sigma2: Fraction, privacy: Privacy) -> Check:
    """Check the target for N_Z(0, σ²) noise on ``space`` (see the module docstring)."""
    definition, p = privacy.definition, privacy.parameters
    rho = _rho(space.l2_squared, sigma2)
    if definition == "pdp":
        return lattice_pdp_check(space, sigma2, privacy)
    if definition == "zcdp":
        return Check(
            "privacy",
            "exact rational check Δ₂²/(2σ²) ≤ ρ (discrete Gaussian; Canonne, Kamath & Steinke 2020, Thm 14)",
            rho <= written(p["rho"]),
            f"Δ₂²/(2σ²) = {rho} ≈ {float(rho):.17g} vs ρ = {p['rho']} (σ² = {sigma2})",
        )
    if definition == "approx":
        patterns = _exact_patterns(space, float(sigma2))
        if patterns is not None:
            delta = max(_exact_delta_mp(float_below(p["epsilon"]), sigma2, t) for t in patterns)
            shown = ", ".join("(" + ", ".join(map(str, t)) + ")" for t in patterns[:6]) + (
                ", …" if len(patterns) > 6 else "")
            return Check(
                "privacy",
                "exact discrete-Gaussian profile δ(ε) = P[S > εσ² − ‖Δ‖²/2] − e^ε P[S > εσ² + ‖Δ‖²/2], "
                "S = Σ_k Δ_k Y_k (CKS 2020, Thm 7 for one coordinate; the loss of a move over several "
                f"coordinates is a function of S), max over the move patterns |Δ| ∈ {{{shown}}}; "
                "summed in 80/50 digits with a bound on the truncated remainder",
                bool(delta <= float_below(p["delta"])),
                f"δ(ε={p['epsilon']}) ≤ {mpmath.nstr(delta, 17)} vs δ = {p['delta']} (σ² = {sigma2})",
            )
        rho_up = _float_above(rho)
        _, alpha = zcdp_epsilon_cks(p["delta"], rho_up)
        delta = zcdp_delta_cks_mp(float_below(p["epsilon"]), rho_up, alpha)
        return Check(
            "privacy",
            "ρ = Δ₂²/(2σ²)-zCDP (CKS Thm 14) converted to (ε, δ) by the CKS bound (Prop. 12) at order "
            f"α = {alpha:.6g}, in 60-digit arithmetic",
            bool(delta <= float_below(p["delta"])),
            f"δ_CKS(ε={p['epsilon']}; ρ={rho_up:.17g}) = {mpmath.nstr(delta, 17)} vs δ = {p['delta']}",
        )
    return Check(
        "privacy",
        "discrete Gaussian noise",
        False,
        f"no {definition} guarantee for discrete Gaussian noise in this version",
    )


def _bisect_log(passes, lo: float, hi: float, steps: int = 80) -> float:
    """The upper end of a bracket [lo, hi] with passes(hi) true, shrunk geometrically (monotone search)."""
    for _ in range(60):
        if passes(hi):
            break
        lo, hi = hi, hi * 4.0
    else:
        raise CalibrationError("no discrete Gaussian σ found for this target")
    return bisect_feasible(passes, lo, hi, steps=steps, geometric=True)


def _approx_start(space: SensitivitySpace, epsilon: float, delta: float) -> Fraction:
    """σ² meeting (ε, δ) by the float64 profile: the exact one of each move pattern when they are
    listed and the certificate's 50-digit sum stays within its budget at the σ² found (search
    started from the Gaussian calibration, which also bounds the float64 work: the exact σ² of a
    move is below its Gaussian one), else ρ-zCDP + CKS."""
    patterns = move_patterns(space)
    guess = float(space.l2_squared) / gaussian_mu(epsilon, delta) ** 2
    if patterns is not None and _exact_patterns(space, guess) is not None:
        sigma2 = _bisect_log(
            lambda s2: max(discrete_gaussian_move_delta(epsilon, s2, t) for t in patterns) <= delta,
            guess / 4.0,
            guess,
        )
        if _exact_patterns(space, sigma2 * 1.001) is not None:
            return Fraction(sigma2)
    rho = 1.0 / _bisect_log(lambda inv: zcdp_delta_cks(epsilon, 1.0 / inv) <= delta, 1e-3, 1.0)
    return Fraction(space.l2_squared) / (2 * Fraction(rho))


class DiscreteGaussianMechanism(IntegerNoiseMechanism):
    """i.i.d. discrete Gaussian noise N_Z(0, σ²) on each coordinate of an integer query."""

    family = "discrete_gaussian"
    title = "Discrete Gaussian (exact sampler)"

    def __init__(self, sigma2: Fraction, dimension: int):
        sigma2 = Fraction(sigma2)
        q = sigma2.denominator
        if not (0 < sigma2 <= MAX_SIGMA2 and q & (q - 1) == 0 and q <= 2**30
                and (sigma2.numerator < 2**31 or (sigma2 >= 1 and sigma2.numerator < 2**61))):
            raise ValueError(f"σ² = {sigma2} is outside the exact sampler's range (dyadic, ≤ 2^60)")
        self.sigma2 = sigma2
        self.dimension = int(dimension)

    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec = problem.spec
        if not isinstance(problem.query, CountingQuery) or not problem.query.integer_answers:
            return ("discrete noise needs an integer-valued query (counts, histograms, tables, marginals, linear "
                    "queries with whole weights)")
        if spec.privacy.definition not in ("zcdp", "approx", "pdp"):
            return f"no {spec.privacy.definition} guarantee for discrete Gaussian noise in this version"
        return None

    @classmethod
    def design(cls, problem: Problem) -> DiscreteGaussianMechanism:
        spec, space = problem.spec, problem.space
        if space.l2_squared == 0:
            raise CalibrationError("the l2 sensitivity is 0: there is nothing to protect with noise")
        p = spec.privacy.parameters
        if spec.privacy.definition == "pdp":
            sigma = gaussian_pdp_sigma(float_below(p["epsilon"]), float_below(p["delta"]), space.l2)
            return cls(pdp_lattice_sigma2(space, spec.privacy, sigma), space.dimension)
        if spec.privacy.definition == "zcdp":
            start = Fraction(space.l2_squared) / (2 * written(p["rho"]))
        else:
            start = _approx_start(space, p["epsilon"], p["delta"])

        if dyadic_ceil(start) > MAX_SIGMA2:
            raise CalibrationError(f"σ² = {float(start):.6g} exceeds the exact sampler's range (2^60)")

        @cache
        def certified(sigma2: Fraction) -> bool:
            return (
                sigma2 <= MAX_SIGMA2 and discrete_gaussian_privacy_check(space, sigma2, spec.privacy).passed
            )

        value = nudge_until(
            float(dyadic_ceil(start)), lambda s2: certified(dyadic_ceil(Fraction(s2))), up=True
        )
        return cls(dyadic_ceil(Fraction(value)), space.dimension)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> DiscreteGaussianMechanism:
        return cls(Fraction(parameters["sigma_squared_exact"]), space.dimension)

    @property
    def parameters(self) -> dict:
        return {"sigma": math.sqrt(self.sigma2), "sigma_squared_exact": str(self.sigma2)}

    def noise_law(self) -> ProductLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        return ProductLaw.iid(DiscreteGaussianMarginal(float(self.sigma2)), self.dimension,
                              f"discrete Gaussian N_Z(0, σ²)^d, σ² = {self.sigma2}")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        draws = sample_discrete_gaussian(
            rng, self.sigma2.numerator, self.sigma2.denominator, size * self.dimension
        )
        return draws.reshape(size, self.dimension)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [discrete_gaussian_privacy_check(space, self.sigma2, privacy)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        rho = _rho(space.l2_squared, self.sigma2)
        return {
            "rho": float(rho),
            "rho_exact": str(rho),
            "conversion": "exact: ρ = Δ₂²/(2σ²) (CKS 2020, Thm 14)",
        }

    def notes(self) -> list[str]:
        return [
            EXACT_SAMPLER_NOTE.format(algorithm=f"Algorithm 1 in a step-envelope rejection sampler, discrete "
                                                f"Gaussian with σ² = {self.sigma2}")
        ]

    def _abs_moments(self) -> tuple[float, float, float]:
        m = discrete_gaussian_moments(float(self.sigma2))
        return m["mean_abs"], m["second_moment"], m["fourth_moment"]

    def _usefulness(self, gamma: float) -> float:
        return discrete_gaussian_moments(float(self.sigma2), gamma)["within"]
