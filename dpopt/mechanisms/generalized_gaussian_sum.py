r"""The generalized Gaussian on a bounded sum or mean, measured exactly on a dyadic lattice.

The answer is measured as the integer lattice sum N of :mod:`dpopt.mechanisms.real_lattice` (units of g = 2^e, each
record rounded half up in exact arithmetic, the rounding charged to the sensitivity Δ_u), and receives the discrete
GG noise on ℤ of :mod:`dpopt.mechanisms.generalized_gaussian_lattice`, P[K = k] ∝ exp(−(|k|/s)^p), calibrated on the
lattice's one-dimensional integer space of moves ≤ Δ_u exactly as on counts
(:func:`~dpopt.mechanisms.generalized_gaussian_lattice.lattice_scale`, s in units of g):

- **p = 1** (every target): the discrete Laplace. Pure ε and pDP: s = Δ_u/ε rounded up to a dyadic, ε = Δ_u/s
  exactly; (ε, δ) and μ-GDP through ε = Δ_u/s, ρ-zCDP by the exact Rényi divergences of the move Δ_u, as
  ``laplace``'s sum path (:func:`~dpopt.mechanisms.exact_sum._laplace_listed`). g = 2^e ≤ 2^-20 min(b, Δ) in sum
  units (b the continuous scale), so the unit the rounding adds to Δ costs below 2^-20 relative in the scale.
- **p = 2 under ρ-zCDP and μ-GDP**: the discrete Gaussian N_ℤ(0, s²/2), ρ = Δ_u²/s² (CKS 2020, Thm 14) and μ from
  the certified GDP slope; g the Gaussian sum path's finest lattice, 2^e ≤ 2^-14 σ (ρ-zCDP) or 2^-13 σ (μ-GDP),
  σ = b/√2, so that s²/2 stays in the sampler's and the slope's range.
- **p = 2, 3, 4 under pDP and (ε, δ)**: the exact lattice pDP level and (ε, δ) profile of the move Δ_u
  (:mod:`dpopt.privacy.discrete_gg_pdp`, :mod:`dpopt.privacy.discrete_gg_profile`), for this one-coordinate move
  two suffix sums of the law's weights over the box |k| ≤ R (:mod:`dpopt.privacy.discrete_gg_one_move`: the loss
  is monotone in k, so each event is a half-line), R about 4–11 s and at most
  :data:`~dpopt.privacy.discrete_gg_one_move.MAX_RADIUS`; the work grows with s, so the lattice is coarser than
  p = 1's, g = 2^e ≤ 2^-10 min(b, Δ) (s about 10³–10⁴ units, 0.1–0.3 s per certified scale), and coarser still
  (2^-8, 2^-6) when R would exceed the limit (small ε or δ): the rounding then costs up to 2^-10 relative in Δ when
  the bounds are not multiples of g (nothing when they are, as [0, 1000] is of 2^e for e ≤ 3).

The release is g(N + K)/n, formed from the integer N + K alone. The family's design (:meth:`GeneralizedGaussian
Mechanism.design`) keeps the best exact option and states its cost against the best floating-point one
(``exact_cost``, re-checked by ``dpopt verify``); the predicted utilities are the discrete law's moments (exact sums
in arb with a proven tail) times (g/n)^m. Refusals (the continuous options stay, the reason in the notes):
``sampler: floating_point``, ``ci_volume`` and ``test_power`` (predictions of the continuous law), and the other
refusals of :func:`~dpopt.mechanisms.exact_sum._refusal`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.exact_cost import EXACT_COST_KEY
from dpopt.mechanisms.exact_sum import GAUSSIAN_BITS, _LatticeSum, _refusal
from dpopt.mechanisms.generalized_gaussian import PDP_SHAPES, GeneralizedGaussianMechanism
from dpopt.mechanisms.generalized_gaussian_lattice import (
    LATTICE_TARGETS,
    lattice_calibration,
    lattice_privacy_check,
    lattice_scale,
)
from dpopt.mechanisms.real_lattice import (
    EXACT_SUM_NOTE,
    LATTICE_BITS,
    RealLattice,
    answer_units,
    exponent_at_most,
    lattice_scope_check,
    real_lattice,
)
from dpopt.noise.discrete_laplace import discrete_laplace_moments
from dpopt.privacy.pdp import PDP_CAVEAT
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

PROFILE_BITS = (10, 8, 6)
"""The lattices tried for p ≥ 2 under pDP and (ε, δ), finest first: g = 2^e ≤ 2^-bits min(b, Δ) (module docstring;
a coarser one when the finer one's box radius exceeds :data:`~dpopt.privacy.discrete_gg_one_move.MAX_RADIUS`)."""


def sum_refusal(problem: Problem) -> str | None:
    """Why the generalized Gaussian on a bounded sum or mean has no lattice option (None: it has)."""
    if problem.spec.privacy.definition not in LATTICE_TARGETS:
        return f"the discrete GG's privacy is not derived for {problem.spec.privacy.definition}"
    return _refusal(problem)


def _listed(p: int, definition: str) -> bool:
    """Whether the lattice's integer space lists the move ±Δ_u: at p = 1 as ``laplace``'s sum path (only under
    ρ-zCDP: elsewhere the check goes through ε = Δ_u/s); at p ≥ 2 always (the exact level reads the move)."""
    return p > 1 or definition == "zcdp"


def _lattices(problem: Problem, p: int, start: float) -> list[RealLattice]:
    """The lattices tried for the option of shape p started at the continuous scale b = ``start``, finest first
    (module docstring)."""
    definition = problem.spec.privacy.definition
    divisor, sensitivity = answer_units(problem)
    b = Fraction(start) * divisor
    if p == 1:
        return [real_lattice(problem, exponent_at_most(min(b, sensitivity), LATTICE_BITS))]
    if definition in ("zcdp", "gdp"):
        return [real_lattice(problem, exponent_at_most(b / Fraction(math.sqrt(2.0)), GAUSSIAN_BITS[definition]))]
    return [real_lattice(problem, exponent_at_most(min(b, sensitivity), bits)) for bits in PROFILE_BITS]


class LatticeSumGG(_LatticeSum, GeneralizedGaussianMechanism):
    """The discrete GG on a bounded sum or mean: N + K in units of g, released g(N + K)/n (module docstring).
    ``scale`` is the double nearest s·g/n, ``lattice_scale`` the exact s in units of g."""

    def __init__(self, p: int, scale: Fraction, lattice: RealLattice, calibration: str,
                 stated_cost: dict | None = None):
        GeneralizedGaussianMechanism.__init__(self, p, float(scale), 1, "unbounded", calibration,
                                              lattice_scale=scale, stated_cost=stated_cost)
        self.lattice = lattice
        self.scale = float(Fraction(scale) * lattice.unit)
        self.needs_integer_answers = False  # the answer is real, measured on the lattice

    @classmethod
    def option(cls, problem: Problem, p: int, start: float) -> LatticeSumGG:
        """The option of shape p, started at the continuous scale ``start`` (answer units).

        Raises
        ------
        CalibrationError
            No dyadic scale meets the target within the exact checks' limits.
        """
        definition = problem.spec.privacy.definition
        reasons = []
        for lattice in _lattices(problem, p, start):
            units = replace(problem, space=lattice.space(listed=_listed(p, definition)))
            if p == 1 and definition in ("pure", "pdp"):
                begin = Fraction(lattice.shift) / written(problem.spec.privacy.parameters["epsilon"])
            else:
                begin = float(Fraction(start) / lattice.unit)
            try:
                s = lattice_scale(p, begin, units)
            except CalibrationError as exc:
                reasons.append(f"g = 2^{lattice.exponent}: {exc}")
                continue
            return cls(p, s, lattice, lattice_calibration(p, definition))
        raise CalibrationError("; ".join(reasons))

    @property
    def parameters(self) -> dict:
        return {**GeneralizedGaussianMechanism.parameters.fget(self), "sum_lattice": self.lattice.to_dict()}

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> LatticeSumGG:
        return cls(parameters["p"], Fraction(parameters["scale_exact"]),
                   RealLattice.from_dict(parameters["sum_lattice"]), parameters["calibration"],
                   parameters.get(EXACT_COST_KEY))

    def _label(self) -> str:
        return f"discrete on the sum's lattice (exact) p={self.p} b={self.scale:.6g}"

    # --------------------------------------------------------------- release and privacy
    def _units_noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.lattice_law.sample(rng, size)

    def listed_space(self, privacy: Privacy) -> bool:
        return _listed(self.p, privacy.definition)

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        return [lattice_privacy_check(self.p, self.lattice_scale, units, privacy)]

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The lattice re-derived from the spec, and the stated cost of exactness re-checked."""
        return GeneralizedGaussianMechanism.scope_checks(self, problem)

    def _box_checks(self, problem: Problem) -> list[Check]:
        return [lattice_scope_check(problem, self.lattice)]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        return GeneralizedGaussianMechanism.privacy_summary(self, self.lattice.space())

    def notes(self) -> list[str]:
        lat = self.lattice
        noise = (f"discrete generalized Gaussian noise P[K = k] ∝ exp(−(|k|/s)^p), p = {self.p}, s = "
                 f"{self.lattice_scale} (rejection from the discrete Laplace with a lazy exact Bernoulli of each "
                 "acceptance probability)")
        notes = [*self._design_notes, EXACT_SUM_NOTE.format(g=f"2^{lat.exponent}", noise=noise, divisor=lat.divisor,
                                                            shift=lat.shift_text)]
        return notes + ([PDP_CAVEAT] if self.calibration == "lattice_pdp" else [])

    # --------------------------------------------------------------- utility
    def _lattice_moments_at(self, gamma: float | None = None) -> dict:
        """The discrete law's moments in units of g: at p = 1, the discrete Laplace's closed forms
        (:func:`~dpopt.noise.discrete_laplace.discrete_laplace_moments`: the same law, P[K = k] ∝ e^{−|k|/s}, whose
        arb sums would run over millions of integers at s ≈ 2^20); at p ≥ 2 the exact sums of the counts' path."""
        if self.p > 1:
            return GeneralizedGaussianMechanism._lattice_moments_at(self, gamma)
        return discrete_laplace_moments(float(self.lattice_scale), gamma)

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        frob = 1.0 if workload is None else float(np.sum(workload**2))
        return self._max_variance() * frob

    def _expected_l1(self) -> float:
        return self._lattice_moments_at()["mean_abs"] * float(self.lattice.unit)

    def _usefulness(self, gamma: float) -> float:
        return self._lattice_moments_at(float(Fraction(gamma) / self.lattice.unit))["within"]

    def _max_variance(self) -> float:
        return self._lattice_moments_at()["second_moment"] * float(self.lattice.unit) ** 2


class GeneralizedGaussianWithSums(GeneralizedGaussianMechanism):
    """``generalized_gaussian``: the options of :class:`GeneralizedGaussianMechanism`, joined on a bounded sum or
    mean by the lattice options of :class:`LatticeSumGG` (module docstring)."""

    family = "generalized_gaussian"  # registered in place of GeneralizedGaussianMechanism, whose options it extends

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """:meth:`GeneralizedGaussianMechanism.utility_bound`; None when a sum's lattice options may be chosen
        (that bound is over continuous laws, private under every real shift, which a lattice law is not)."""
        if isinstance(problem.query, NumericQuery) and sum_refusal(problem) is None:
            return None
        return GeneralizedGaussianMechanism.utility_bound(problem)

    @classmethod
    def _options(cls, problem: Problem) -> tuple[list[GeneralizedGaussianMechanism], list[str]]:
        options, skipped = super()._options(problem)
        if isinstance(problem.query, NumericQuery):
            options += _sum_options(problem, options, skipped)
        return options, skipped

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> GeneralizedGaussianMechanism:
        if parameters.get("variant") == "unbounded" and "sum_lattice" in parameters:
            return LatticeSumGG.from_parameters(parameters, space)
        return super().from_parameters(parameters, space)


def _sum_options(problem: Problem, options: list, skipped: list[str]) -> list[LatticeSumGG]:
    """One lattice option per shape the target serves (p = 1 always; p = 2 under ρ-zCDP and μ-GDP; p = 2, 3, 4 under
    pDP and (ε, δ)), each started at the continuous unbounded option of its shape (of p = 2, else p = 1, when that
    shape has none), or the reason in ``skipped``."""
    refusal = sum_refusal(problem)
    if refusal is not None:
        skipped.append(f"the exact lattice sum: {refusal}")
        return []
    definition = problem.spec.privacy.definition
    shapes = {"pure": (1,), "zcdp": (1, 2), "gdp": (1, 2)}.get(definition, PDP_SHAPES)
    starts = {o.p: o.scale for o in options if o.variant == "unbounded" and not o.exact_noise}
    out = []
    for p in shapes:
        start = starts.get(p, starts.get(2, starts.get(1)))
        if start is None:
            skipped.append(f"p={p} on the sum's lattice: no continuous scale to start from")
            continue
        try:
            out.append(LatticeSumGG.option(problem, p, start))
        except CalibrationError as exc:
            skipped.append(f"p={p} on the sum's lattice: {exc}")
    return out


__all__ = ["GeneralizedGaussianWithSums", "LatticeSumGG", "sum_refusal"]
