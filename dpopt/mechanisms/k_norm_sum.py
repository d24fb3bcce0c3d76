r"""K-norm noise on a bounded sum or mean, measured exactly on a dyadic lattice.

**In one dimension the K-norm mechanism is the Laplace mechanism.** A bounded sum or mean is one coordinate; its
neighbouring differences are S = {v : |v| ≤ Δ}, so K = Hull(S) = [−Δ, Δ], ‖z‖_K = |z|/Δ and the K-norm density
∝ exp(−ε‖z‖_K) = exp(−ε|z|/Δ) is Laplace(Δ/ε) (Hardt & Talwar 2010, Thm 4.3; the family's sampler R·U, R ~
Gamma(2, rate ε), U uniform on [−Δ, Δ], has the density ε/(2Δ)·e^{−ε|z|/Δ}, the same law). Every other symmetric
convex K containing S contains [−Δ, Δ], so this K is also the optimal one (Awan & Slavković 2021, Prop. 9).

**On the lattice.** The answer is measured as the integer lattice sum N of :mod:`dpopt.mechanisms.real_lattice`
(units of g = 2^e, each record rounded half up in exact arithmetic, the rounding charged to the sensitivity Δ_u).
The lattice K-norm law P[k] ∝ exp(−ε′‖k‖_K) on ℤ, K = [−Δ_u, Δ_u], is the discrete Laplace of scale
t = Δ_u/ε′ (p(k) ∝ e^{−|k|/t}, Canonne, Kamath & Steinke 2020, Algorithms 1–2): the law of ``laplace``'s sum path
(:class:`~dpopt.mechanisms.exact_sum.LatticeSumLaplace`), reused here with the family's own calibration, through
pure ε₀ = :func:`~dpopt.privacy.pure_conversion.pure_epsilon_for` (the target) as every K-norm design:

- t = Δ_u/ε₀ rounded **up** to a dyadic rational of 21 significant bits
  (:func:`~dpopt.mechanisms.integer_noise.dyadic_ceil`), so ε′ = Δ_u/t ≤ ε₀ exactly;
- privacy: p(k)/p(k + v) = e^{(|k + v| − |k|)/t} ≤ e^{|v|/t} ≤ e^{Δ_u/t} for the integer moves |v| ≤ Δ_u of N
  (a grouped release's stacked sums: Σ_i |v_i|/t, the l1 norm of the units' move), then the exact conversion of
  ε′-DP to the target (:func:`~dpopt.privacy.pure_conversion.pure_privacy_check`);
- g = 2^e ≤ 2^-20 min(b, Δ) in sum units (b = Δ/ε₀ the continuous scale), as ``laplace``: the unit the rounding
  adds to Δ and the dyadic rounding of t each cost below 2^-20 relative in the scale.

The release is g(N + η)/n (n = 1 for a sum, the public size for a mean). The certificate's parameters record the
continuous scale b, ε₀, the lattice and t, and state the cost of exactness against the continuous K-norm law
(``exact_cost``: the discrete law's variance (g/n)²·2e^{−1/t}/(1 − e^{−1/t})² over 2b², re-derived by
``dpopt verify``). ``sampler: floating_point``, the ci_volume and test_power metrics (predictions of the
continuous law) and the other refusals of :func:`~dpopt.mechanisms.exact_sum._refusal` keep the continuous
K-norm design.
"""

from __future__ import annotations

from fractions import Fraction

from dpopt.core.checks import Check
from dpopt.domain.queries import NumericQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.discrete_laplace import MAX_SCALE
from dpopt.mechanisms.exact_sum import LatticeSumLaplace, _refusal
from dpopt.mechanisms.integer_noise import dyadic_ceil
from dpopt.mechanisms.real_lattice import LATTICE_BITS, RealLattice, answer_units, exponent_at_most, real_lattice
from dpopt.privacy.pure_conversion import pure_epsilon_for, pure_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy


class _KNormFamily:
    """The family name and title of :class:`LatticeSumKNorm`, ahead of ``laplace``'s in its method order (a mixin
    outside :class:`~dpopt.mechanisms.base.Mechanism`, so that the registry keeps
    :class:`~dpopt.mechanisms.k_norm.KNormMechanism` for ``k_norm``: it designs every k_norm spec and hands a
    bounded sum or mean to :func:`sum_design`)."""

    family = "k_norm"
    title = "K-norm on a bounded sum or mean: K = [−Δ, Δ], the discrete Laplace on a dyadic lattice"


class LatticeSumKNorm(_KNormFamily, LatticeSumLaplace):
    """K-norm on a bounded sum or mean, measured on the lattice: N + η, η discrete Laplace of scale t = Δ_u/ε′
    (module docstring)."""

    def __init__(self, scale: float, lattice: RealLattice, units_scale: Fraction, epsilon: float):
        super().__init__(scale, lattice, units_scale)
        self.epsilon = float(epsilon)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> LatticeSumKNorm:
        return cls(parameters["scale"], RealLattice.from_dict(parameters["sum_lattice"]),
                   Fraction(parameters["lattice_scale"]), parameters["epsilon"])

    @property
    def parameters(self) -> dict:
        return {"epsilon": self.epsilon, "rank": 1, "norm_ball": "hull", "optimal_k": True,
                "k": "[−Δ, Δ] = Hull(S) in one dimension: the K-norm law is Laplace(Δ/ε)",
                **super().parameters}

    def units_privacy_checks(self, units: SensitivitySpace, privacy: Privacy) -> list[Check]:
        """ε′ = ‖v‖₁/t over the integer moves v of ``units``, converted to the target (module docstring)."""
        t = self.units_scale
        achieved = Fraction(units.l1) / t
        return [pure_privacy_check(
            achieved, privacy,
            "ε′-DP of the lattice K-norm law on ℤ, K = [−Δ_u, Δ_u]: the discrete Laplace p(k) ∝ e^{−|k|/t} has "
            "p(k)/p(k + v) ≤ e^{|v|/t}, so integer moves of l1 norm at most Δ₁ (units of g) give ε′ = Δ₁/t "
            "(Hardt & Talwar 2010, Thm 4.3, on a lattice); exact rationals",
            f"ε′ = {Fraction(units.l1)}/{t} = {float(achieved):.17g}")]

    def listed_space(self, privacy: Privacy) -> bool:
        return False

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        summary = super().privacy_summary(space)
        return summary | {"conversion": "exact: ε′ = Δ_u/t for the K-norm law on the lattice (Δ_u the lattice sum's "
                                        "sensitivity in units of g); ε′-DP ⇒ ε′²/2-zCDP"}

    def notes(self) -> list[str]:
        achieved = float(self.lattice.shift / self.units_scale)
        return super().notes() + [
            f"K-norm in one dimension: K = Hull(S) = [−Δ, Δ], so the K-norm law is Laplace(Δ/ε) and, on the lattice, "
            f"the discrete Laplace of scale t = {self.units_scale} = Δ_u/ε′, ε′ = {achieved:.17g} ≤ ε₀ = "
            f"{self.epsilon!r} (the target's pure ε)"]


def sum_design(problem: Problem) -> LatticeSumKNorm | str:
    """The exact K-norm measurement of a bounded sum or mean (module docstring), or why the spec keeps the
    continuous K-norm law."""
    if not isinstance(problem.query, NumericQuery):
        return "not a bounded sum or mean"
    refusal = _refusal(problem)
    if refusal is not None:
        return refusal
    epsilon = pure_epsilon_for(problem.spec.privacy)
    divisor, sensitivity = answer_units(problem)
    b = sensitivity / Fraction(epsilon)
    try:
        lattice = real_lattice(problem, exponent_at_most(min(b, sensitivity), LATTICE_BITS))
    except CalibrationError as exc:
        return f"on the lattice: {exc}"
    t = dyadic_ceil(Fraction(lattice.shift) / Fraction(epsilon))
    if t > MAX_SCALE:
        return f"on the lattice: the discrete Laplace scale {float(t):.6g} exceeds the exact sampler's 2^40"
    mechanism = LatticeSumKNorm(float(b / divisor), lattice, t, epsilon)
    if not mechanism.privacy_checks(problem.space, problem.spec.privacy)[0].passed:
        return "on the lattice: the discrete Laplace does not meet the target"
    return mechanism


__all__ = ["LatticeSumKNorm", "sum_design"]
