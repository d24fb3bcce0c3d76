r"""The privacy checks of the generalized Gaussian mechanism's parameters (Liu 2019).

Independent evaluations of the guarantee at given parameters, used by
:class:`~dpopt.mechanisms.generalized_gaussian.GeneralizedGaussianMechanism` when it is
designed and by ``dpopt verify``: the (ε, δ)-pDP bounds of unbounded noise (Lemma 10,
Corollaries 7–8) and the certified worst-case loss of the bounded variants (Defs 5–6).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019
   (digest ``papers/002_generalized_gaussian.md``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.checks import Check
from dpopt.core.decimals import float_below
from dpopt.privacy.pdp import gaussian_pdp_bound_mp, gg_pdp_bound_disjoint_mp, gg_pdp_monte_carlo
from dpopt.privacy.truncated_gg import (
    bit_coordinate_loss_mp,
    truncated_coordinate_loss,
    truncated_loss_mp,
    worst_case_loss,
)
from dpopt.sensitivity.lp import difference_magnitudes, lp_sensitivity_power
from dpopt.sensitivity.space import SensitivitySpace

mpmath = lazy_module("mpmath")


def lemma10_bound(scale: float, epsilon: float, l2_squared: Fraction) -> mpmath.mpf:
    """Lemma 10's bound for GG(0, b, 2) = N(0, b²/2): σ = b/√2 in 60 digits."""
    with mpmath.workdps(60):
        return gaussian_pdp_bound_mp(mpmath.mpf(scale) / mpmath.sqrt(2), epsilon, l2_squared)


def pdp_check(scale: float, p: float, monte_carlo: dict | None, space: SensitivitySpace, eps: object,
              delta: object) -> Check:
    """The (ε, δ)-pDP check of unbounded GG(0, b, p) noise, p ≥ 2 (Liu 2019).

    p = 2: Lemma 10, 2Φ(−(εb² − Δ₂²)/(√2 Δ₂ b)) ≤ δ; one coordinate moving: Corollary 8,
    Q(1/p, u*^p) ≤ δ; otherwise Corollary 7 by the Monte Carlo the design recorded
    (``monte_carlo``: draws, seed, confidence), a statistical guarantee. ε and δ are the target as
    written: each bound is evaluated at, and compared with, the largest float not above the decimal
    (:func:`~dpopt.core.decimals.float_below`).
    """
    shown_delta, eps, delta = delta, float_below(eps), float_below(delta)
    if p == 2:
        level = lemma10_bound(scale, eps, space.l2_squared)
        return Check(
            "privacy",
            "Lemma 10 (Liu 2019): 2Φ(−(εb² − Δ₂²)/(√2 Δ₂ b)) ≤ δ for GG(0, b, 2) = N(0, b²/2), "
            "60-digit arithmetic, exact Δ₂²",
            bool(level <= delta),
            f"pDP level bound {mpmath.nstr(level, 12)} vs δ = {shown_delta}",
        )
    magnitudes = difference_magnitudes(space)
    if magnitudes.disjoint:
        level = gg_pdp_bound_disjoint_mp(scale, eps, p, space.linf)
        return Check(
            "privacy",
            "Corollary 8 (Liu 2019): one coordinate moves by at most Δ; "
            "Q(1/p, u*^p) ≤ δ with (u*+Δ/b)^p − u*^p = ε, 60-digit arithmetic",
            bool(level <= delta),
            f"pDP level bound {mpmath.nstr(level, 12)} vs δ = {shown_delta} (Δ = {space.linf})",
        )
    if not monte_carlo:
        return Check(
            "privacy",
            "Corollary 7",
            False,
            "no Monte Carlo record for a multi-coordinate pDP calibration",
        )
    power, how = lp_sensitivity_power(space, p)
    mc = gg_pdp_monte_carlo(
        scale,
        eps,
        p,
        magnitudes.profiles(),
        lp_power=float(power),
        draws=int(monte_carlo["draws"]),
        seed=int(monte_carlo["seed"]),
        confidence=float(monte_carlo["confidence"]),
    )
    return Check(
        "privacy",
        f"Corollary 7 (Liu 2019) by Monte Carlo: {mc.draws} draws per difference profile, seed {mc.seed}; "
        f"one-sided Clopper–Pearson upper bound on Pr(|L| > ε) ≤ δ, joint confidence {mc.confidence} "
        f"(Bonferroni over {len(mc.profiles)} profile(s)); Δ_p^p {how}",
        mc.holds(delta),
        f"exceedances {list(mc.exceedances)}; upper bounds {[f'{u:.6g}' for u in mc.upper_bounds]} vs δ = {shown_delta}"
        f" — a statistical guarantee, held with confidence {mc.confidence}",
    )


def bounded_checks(variant: str, scale: float, p: float, lower: np.ndarray, upper: np.ndarray,
                   space: SensitivitySpace, eps: object) -> list[Check]:
    """The pure ε-DP checks of the truncated or boundary-inflated GG on the box [lower, upper].

    The certified worst-case privacy loss max over difference rows of Σ_k ℓ_k(|v_k|)
    (:func:`~dpopt.privacy.truncated_gg.worst_case_loss`, Liu 2019, Defs 5–6) is ≤ ε (the decimal
    written: compared with :func:`~dpopt.core.decimals.float_below` of it), and its
    per-coordinate losses agree with a 60-digit re-evaluation (mpmath) to 1e-9.
    """
    rows = difference_magnitudes(space).rows
    widths = upper - lower
    bound, how = worst_case_loss(variant, scale, p, widths, rows)
    checks = [
        Check(
            "privacy",
            f"certified worst-case privacy loss of the {variant} GG (Liu 2019, Defs 5–6): "
            f"max over difference rows of Σ_k ℓ_k(|v_k|), {how}",
            bound <= float_below(eps),
            f"loss bound {bound:.12g} vs ε = {eps}",
        )
    ]
    pairs = sorted(
        {(float(w), float(v)) for row in np.minimum(rows, widths) for w, v in zip(widths, row) if v > 0}
    )
    if variant == "boundary_inflated":
        gaps = [
            abs(
                float(bit_coordinate_loss_mp(scale, p, w, v))
                - worst_case_loss(variant, scale, p, [w], [[v]])[0]
            )
            for w, v in pairs
        ]
        method = "closed-form BIT loss re-evaluated in 60-digit arithmetic (mpmath)"
    else:
        gaps = []
        for w, v in pairs:
            loss = truncated_coordinate_loss(scale, p, w, v)
            x, y = loss.argmax
            gaps.append(abs(float(truncated_loss_mp(scale, p, w, x, y)) - loss.grid_max))
        method = "grid maximum of the truncated loss re-evaluated at its maximizer in 60-digit arithmetic"
    checks.append(
        Check(
            "privacy.numerics",
            method,
            max(gaps) <= 1e-9,
            f"largest float-vs-60-digit gap {max(gaps):.3g} (slack 1e-9 is inside the certified bound)",
        )
    )
    return checks
