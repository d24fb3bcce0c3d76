r"""Floors on the scale of every unbounded generalized Gaussian option under pDP, (ε, δ) and ρ-zCDP, for ``auto``.

Under these targets :meth:`~dpopt.mechanisms.generalized_gaussian.GeneralizedGaussianMechanism.design` calibrates
i.i.d. GG noise of shapes p = 1, …, 4, continuous (GG(0, b, p)) or, on counts, the discrete law on ℤ (scale s),
some by a multi-coordinate convolution of their privacy-loss laws (seconds to tens of seconds). ``auto`` needs only
a lower bound on what any of them can achieve: each option's metric (l1, l2 with any workload, max_variance) grows
with its scale and usefulness falls (|K| grows stochastically with the scale: :mod:`dpopt.privacy.gg_scale_floor`),
so the option's law at a **floor** of its scale bounds it. :func:`target_floors` lists (p, floor, on ℤ):

* **pDP** (p = 2, 3, 4; p = 1 is b = Δ₁/ε, no calibration, evaluated as designed) and **(ε, δ)** (p = 1, …, 4):
  (ε, δ)-pDP implies (ε, δ)-DP, and a coordinate alone must then hide its largest move Δ∞ (post-processing):
  :func:`~dpopt.privacy.gg_scale_floor.continuous_scale_floor` at the shift Δ∞ (p = 2: Δ₂, the whole largest
  move along its direction), and on ℤ :func:`~dpopt.privacy.gg_scale_floor.discrete_scale_floor` at the integer
  shift Δ∞. The floors meet the target the spec writes (ε, δ rounded up), which every design meets. A scale from
  Corollary 7's Monte Carlo (p ≥ 3, continuous, several moving coordinates) holds at its stated confidence; the floor
  holds whenever that Monte Carlo bound does.
* **ρ-zCDP** (p = 1, 2): zCDP bounds each move's Kullback–Leibler divergence by ρ (α → 1), so p = 1 takes the floors
  of Laplace and discrete Laplace (:func:`~dpopt.privacy.laplace.laplace_kl_scale`,
  :func:`~dpopt.mechanisms.discrete_laplace.zcdp_scale_floor`: the designs are those families'); at p = 2,
  D₂ = ‖v‖²/σ² exactly for N(0, σ²) and, v an integer vector, for N_ℤ(0, σ²) (the normalizer cancels at α = 2:
  Canonne, Kamath & Steinke 2020, §2), and D₂ ≤ 2ρ gives σ² ≥ Δ₂²/(2ρ), i.e. b, s ≥ Δ₂/√ρ (σ² = b²/2).

Every floor is at most the scale the design can calibrate, so the best value over the options at their floors never
beats the design: a family skipped on it could not have won. No multi-coordinate convolution: the work is one
root-finding per continuous shape and a march of float sums per discrete shape (milliseconds).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019.
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.core.decimals import float_below
from dpopt.mechanisms.discrete_laplace import zcdp_scale_floor
from dpopt.mechanisms.generalized_gaussian_lattice import lattice_refusal
from dpopt.privacy.gg_scale_floor import ROUND_DOWN, continuous_scale_floor, discrete_scale_floor
from dpopt.privacy.laplace import laplace_kl_scale, laplace_patterns
from dpopt.problem import Problem

FLOOR_TARGETS = ("pdp", "approx", "zcdp")
"""The targets :func:`target_floors` serves."""


def target_floors(problem: Problem) -> list[tuple[int, float, bool]] | None:
    """(p, floor on the scale, on ℤ) for every unbounded option the design can calibrate under the spec's pDP,
    (ε, δ) or ρ-zCDP target (module docstring); pDP's p = 1 is not listed (its scale is Δ₁/ε exactly), nor an option
    on ℤ when the design measures with the continuous law. None when some floor is not proven (not positive).

    Raises
    ------
    ValueError
        A target other than :data:`FLOOR_TARGETS`.
    """
    space, privacy = problem.space, problem.spec.privacy
    definition, target = privacy.definition, privacy.parameters
    if definition not in FLOOR_TARGETS:
        raise ValueError(f"no scale floors under {definition}")
    on_integers = lattice_refusal(problem) is None and Fraction(space.linf).denominator == 1 and space.linf > 0
    if definition == "zcdp":
        rho = _above(target["rho"])
        gaussian = math.sqrt(float(space.l2_squared) / rho) * ROUND_DOWN
        floors = [(1, laplace_kl_scale(rho, space.l1, laplace_patterns(space)) * ROUND_DOWN, False),
                  (2, gaussian, False)]
        if on_integers:
            floors += [(1, zcdp_scale_floor(space, rho) or 0.0, True), (2, gaussian, True)]
    else:
        epsilon, delta = _above(target["epsilon"]), _above(target["delta"])
        floors = []
        for p in (2, 3, 4) if definition == "pdp" else (1, 2, 3, 4):
            floors.append((p, continuous_scale_floor(epsilon, delta, float(space.l2 if p == 2 else space.linf), p),
                           False))
            if on_integers:
                floors.append((p, discrete_scale_floor(p, int(space.linf), epsilon, delta), True))
    return floors if all(math.isfinite(floor) and floor > 0 for _, floor, _ in floors) else None


def _above(value: object) -> float:
    """A float at least the decimal ``value`` spells (a larger target only lowers a floor)."""
    return math.nextafter(float_below(value), math.inf)
