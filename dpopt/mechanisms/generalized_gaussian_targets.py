r"""Unbounded generalized Gaussian noise under (ε, δ), ρ-zCDP and μ-GDP targets.

GG(0, b, p) is Laplace(0, b) at p = 1 and N(0, b²/2) at p = 2 (Liu 2019, §2), so those two
shapes take the exact calibrations of their families: Laplace's exact profile, Rényi
divergences and trade-off routes (:mod:`dpopt.privacy.laplace`, :mod:`dpopt.privacy.laplace_gdp`)
and the Gaussian's μ = Δ₂/σ with σ = b/√2 (:mod:`dpopt.privacy.gaussian_calibration`). The
shapes p = 3, 4:

* **(ε, δ)**: the exact one-coordinate profile δ(ε) = max_y F(y) − e^ε F(y − Δ∞/b) of
  :mod:`dpopt.privacy.gg_profile`, when every neighbour moves one coordinate (the largest shift
  Δ∞ is then the worst case); moves over several coordinates are refused (no certified profile).
* **ρ-zCDP, μ-GDP**: none for any scale: D_α/α grows like α^{p−2} (proof in
  :mod:`dpopt.privacy.gg_profile`).

``dpopt verify`` re-derives each of these from the noise law's privacy-loss distribution
(:mod:`dpopt.certificate.second_route`), a route independent of the closed forms used here.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from dpopt._lazy import lazy_module
from dpopt.core.checks import Check
from dpopt.core.decimals import float_below
from dpopt.core.rounding import nudge_until
from dpopt.errors import DpoptError
from dpopt.mechanisms.laplace import LaplaceMechanism, laplace_privacy_check
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check, gaussian_sigma
from dpopt.privacy.gg_profile import gg_delta_mp, gg_scale_for_approx
from dpopt.problem import Problem
from dpopt.sensitivity.lp import difference_magnitudes
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import Privacy

mpmath = lazy_module("mpmath")

TARGETS = ("approx", "zcdp", "gdp")
"""The targets this module serves (pure and pdp are in :mod:`dpopt.mechanisms.generalized_gaussian`)."""

PROFILE_SHAPES = (3, 4)
"""Shapes p > 2 calibrated on their exact (ε, δ) profile."""

NO_RENYI = ("p > 2: no ρ-zCDP or μ-GDP guarantee at any scale (D_α/α grows like α^{p−2}; "
            "dpopt.privacy.gg_profile)")


def target_scales(problem: Problem) -> tuple[list[tuple[int, float, str]], list[str]]:
    """(p, b, calibration) for every shape calibrated for the spec's target, and why the others are not."""
    spec, space = problem.spec, problem.space
    privacy = spec.privacy
    scales: list[tuple[int, float, str]] = []
    skipped: list[str] = []
    try:
        scales.append((1, LaplaceMechanism.design_scale(problem), "laplace"))
    except DpoptError as exc:
        skipped.append(f"p=1: {exc}")
    try:
        scales.append((2, _gaussian_scale(space, privacy), "gaussian"))
    except DpoptError as exc:
        skipped.append(f"p=2: {exc}")
    if privacy.definition != "approx":
        skipped.append(NO_RENYI)
        return scales, skipped
    if not difference_magnitudes(space).disjoint:
        skipped.append("p ≥ 3: a neighbour moves several coordinates; the exact profile covers one-coordinate moves")
        return scales, skipped
    target = privacy.parameters
    for p in PROFILE_SHAPES:
        try:
            scales.append((p, gg_scale_for_approx(float_below(target["epsilon"]), float_below(target["delta"]),
                                                  space.linf, p),
                           "exact_profile"))
        except DpoptError as exc:
            skipped.append(f"p={p}: {exc}")
    return scales, skipped


def _gaussian_scale(space: SensitivitySpace, privacy: Privacy) -> float:
    """The smallest b with GG(0, b, 2) = N(0, (b/√2)²) certified by the Gaussian check."""
    b = math.sqrt(2.0) * gaussian_sigma(space.l2_squared, privacy)
    return nudge_until(b, lambda x: gaussian_privacy_check(space.l2_squared, x / math.sqrt(2.0), privacy).passed,
                       up=True)


def target_check(p: int, scale: float, space: SensitivitySpace, privacy: Privacy) -> Check:
    """The privacy check of unbounded GG(0, b, p) noise against an (ε, δ), ρ-zCDP or μ-GDP target."""
    if p == 1:
        check = laplace_privacy_check(space.l1, scale, privacy, space)
        return dataclasses.replace(check, method=f"GG(0, b, 1) = Laplace(0, b): {check.method}")
    if p == 2:
        check = gaussian_privacy_check(space.l2_squared, scale / math.sqrt(2.0), privacy)
        return dataclasses.replace(check, method=f"GG(0, b, 2) = N(0, σ²), σ = b/√2: {check.method}")
    if privacy.definition != "approx":
        return Check("privacy", "generalized Gaussian, p > 2", False, NO_RENYI)
    if not difference_magnitudes(space).disjoint:
        return Check("privacy", "exact one-coordinate GG profile", False,
                     "a neighbour moves several coordinates; the exact profile covers one-coordinate moves")
    target = privacy.parameters
    shift = Fraction(space.linf) / Fraction(scale)
    delta = gg_delta_mp(float_below(target["epsilon"]), shift, p)  # the decimal written: core.decimals
    return Check(
        "privacy",
        "exact GG profile δ(ε) = max_y F(y) − e^ε F(y − Δ∞/b) of the largest one-coordinate move (log-concave "
        "noise: the worst case), bounded above on a 2⁻¹⁸⁰ bracket of the loss root, incomplete gamma in 60 digits",
        bool(delta <= float_below(target["delta"])),
        f"Δ∞/b = {float(shift):.17g}, p = {p}: δ(ε={target['epsilon']}) = {mpmath.nstr(delta, 17)} "
        f"vs δ = {target['delta']}",
    )
