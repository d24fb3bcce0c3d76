r"""Privacy of the Laplace mechanism.

Laplace noise of scale b per coordinate on a query of l1 sensitivity Δ₁ is ε-DP with
ε = Δ₁/b (Dwork, McSherry, Nissim & Smith 2006). In one dimension its exact privacy
profile, with ε₀ = Δ₁/b, is

.. math:: \delta(\varepsilon) = \max\left(0,\; 1 - e^{(\varepsilon - \varepsilon_0)/2}\right),
          \quad 0 \le \varepsilon \le \varepsilon_0,

(e.g. δ(0) = 1 − e^{−1/2} = 0.39346934 at ε₀ = 1, the value dp_accounting's tests pin).
Derivation: the loss of output y against a shift Δ is ε₀ for y ≤ 0 (probability ½),
(Δ − 2y)/b on (0, Δ) and −ε₀ beyond; with h = (ε₀ − ε)/2, E[(1 − e^{ε−L})₊] =
½(1 − e^{−2h}) + ½(1 − e^{−h}) − ½(e^{−h} − e^{−2h}) = 1 − e^{−h}.

**Moves over several coordinates.** For i.i.d. Laplace noise the profile of a move v is
at most that of the one-coordinate move of the same l1 norm, so the formula above with
ε₀ = ‖v‖₁/b is the exact worst case whenever some neighbouring difference of l1 norm Δ₁
lies on one axis, and an upper bound otherwise. Proof: write T_v for the trade-off
function of Lap(0, b)^d against Lap(v, b)^d; T_v = ⊗_k T_{v_k} (independent coordinates).
For two coordinates T_{(a, c)} ≥ T_{|a|+|c|} (Lee, Kim, Kwak & Jung 2022, Lemma 10: at a
fixed l1 norm the trade-off decreases as the shift concentrates on one axis). The tensor
product is monotone (f ≥ f′ ⇒ f ⊗ g ≥ f′ ⊗ g: by Blackwell's theorem f is a
post-processing of f′, applied to the first factor; Dong, Roth & Su 2022, Thm 2.10), so
T_{(v_1, v_2, v_3, …)} ≥ T_{(|v_1|+|v_2|, v_3, …)} ≥ … ≥ T_{‖v‖₁}, and δ(ε) = 1 + T*(−e^ε)
is monotone in T. The second route of ``dpopt verify`` re-derives the profile of the
listed moves themselves from their privacy-loss distribution.

:func:`laplace_scale_for_approx` inverts the profile: δ(ε) ≤ δ iff Δ₁/b ≤ ε − 2 log(1 − δ).

**zCDP.** The Rényi divergences of the worst move are those of one coordinate
(:func:`laplace_renyi`; Rényi divergence is monotone under the same ordering);
:func:`laplace_zcdp_holds` certifies D_α ≤ ρα over all orders, and
:func:`laplace_scale_for_zcdp` calibrates b on the limit α → 1, ε₀ + e^{−ε₀} − 1 = ρ, which
needs markedly less noise than ε-DP ⇒ ε²/2-zCDP (b = 0.8345 against 1 at ρ = 0.5, Δ₁ = 1).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import mpmath
from scipy import optimize

from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.privacy.zcdp import RENYI_BITS, renyi_ball, renyi_zcdp_holds

if TYPE_CHECKING:
    from flint import arb

_MP_DIGITS = 60


def laplace_epsilon(l1_sensitivity: float | Fraction, scale: float) -> Fraction:
    """ε = Δ₁ / b, exactly, as a Fraction of the binary values given."""
    return Fraction(l1_sensitivity) / Fraction(scale)


def laplace_scale_for(epsilon: float, l1_sensitivity: float | Fraction) -> float:
    """The smallest float b with Δ₁/b ≤ ε in exact arithmetic."""
    b = float(Fraction(l1_sensitivity) / Fraction(epsilon))
    return nudge_until(b, lambda x: laplace_epsilon(l1_sensitivity, x) <= Fraction(epsilon), up=True)


def laplace_delta_1d(epsilon: float, epsilon0: float) -> float:
    """The exact δ(ε) of a one-dimensional Laplace mechanism with Δ/b = ε₀."""
    return max(0.0, -math.expm1((epsilon - epsilon0) / 2.0))


def laplace_delta_mp(epsilon: float, l1_sensitivity: float | Fraction, scale: float) -> mpmath.mpf:
    """δ(ε) = max(0, 1 − e^{(ε − Δ₁/b)/2}) in 60-digit arithmetic, with Δ₁/b taken exactly
    (the independent check of :func:`laplace_scale_for_approx`)."""
    ratio = laplace_epsilon(l1_sensitivity, scale)
    with mpmath.workdps(_MP_DIGITS):
        eps0 = mpmath.mpf(ratio.numerator) / ratio.denominator
        return max(mpmath.mpf(0), -mpmath.expm1((mpmath.mpf(epsilon) - eps0) / 2))


def laplace_scale_for_approx(epsilon: float, delta: float, l1_sensitivity: float | Fraction) -> float:
    r"""The smallest float b whose exact Laplace profile meets (ε, δ): Δ₁/b ≤ ε − 2 log(1 − δ).

    The root b = Δ₁/(ε − 2 log(1 − δ)) is moved up until :func:`laplace_delta_mp` confirms
    δ(ε) ≤ δ. For δ = 0 this is :func:`laplace_scale_for` (b = Δ₁/ε).

    Examples
    --------
    >>> round(laplace_scale_for_approx(1.0, 0.05, 1), 6)  # a count at ε = 1, δ = 0.05
    0.906958
    """
    if delta <= 0:
        return laplace_scale_for(epsilon, l1_sensitivity)
    b = float(l1_sensitivity) / (epsilon - 2.0 * math.log1p(-delta))
    return nudge_until(b, lambda x: laplace_delta_mp(epsilon, l1_sensitivity, x) <= delta, up=True)


# ----------------------------------------------------------------------- zCDP
def laplace_renyi(alpha: float | arb, epsilon0: float | Fraction | arb) -> arb:
    r"""D_α of Laplace(0, b) against Laplace(Δ, b), ε₀ = Δ/b, as an Arb ball of
    :data:`~dpopt.privacy.zcdp.RENYI_BITS` bits that contains it (Mironov 2017, Table II):

    .. math:: D_\alpha = \frac{1}{\alpha-1}\log\left(\frac{\alpha}{2\alpha-1}e^{(\alpha-1)\varepsilon_0}
              + \frac{\alpha-1}{2\alpha-1}e^{-\alpha\varepsilon_0}\right).
    """
    from flint import ctx

    with ctx.workprec(RENYI_BITS):
        a, e = renyi_ball(alpha), renyi_ball(epsilon0)
        return (a / (2 * a - 1) * ((a - 1) * e).exp() + (a - 1) / (2 * a - 1) * (-a * e).exp()).log() / (a - 1)


def laplace_zcdp_holds(l1_sensitivity: float | Fraction, scale: float, rho: float) -> tuple[bool, str]:
    r"""Certify that Laplace noise of scale b is ρ-zCDP for l1 sensitivity Δ₁: D_α ≤ ρα for every α > 1.

    ε₀ = Δ₁/b taken exactly; the worst move is the one-axis move of l1 norm Δ₁ (Rényi
    divergence is monotone under the trade-off ordering of the module docstring). The
    continuum of orders is covered by intervals (:func:`~dpopt.privacy.zcdp.renyi_zcdp_holds`,
    the largest loss being ε₀). ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4) also certifies
    when ε₀²/2 ≤ ρ.

    Returns
    -------
    passed, detail : bool, str
    """
    ratio = laplace_epsilon(l1_sensitivity, scale)
    if ratio * ratio / 2 <= Fraction(rho):
        return True, f"(Δ₁/b)²/2 = {float(ratio * ratio / 2):.17g} ≤ ρ (ε-DP ⇒ ε²/2-zCDP)"
    return renyi_zcdp_holds(lambda a: laplace_renyi(a, ratio), ratio, rho)


def laplace_kl_epsilon(rho: float) -> float:
    r"""The ε₀ = Δ/b > 0 at which the Kullback–Leibler divergence of Laplace(0, b) from
    Laplace(Δ, b), ε₀ + e^{−ε₀} − 1 (the α → 1 limit of :func:`laplace_renyi`), equals ρ.

    It increases in ε₀, so ρ-zCDP (D_α ≤ ρα for α > 1, hence KL ≤ ρ) forces Δ/b ≤ ε₀; a
    floating-point root (brentq, relative tolerance 1e-15).

    Examples
    --------
    >>> e = laplace_kl_epsilon(0.5); round(e + math.exp(-e) - 1, 12)
    0.5
    """
    return optimize.brentq(lambda e: e + math.expm1(-e) - rho, 0.0, rho + 2.0, xtol=1e-300, rtol=1e-15)


def laplace_scale_for_zcdp(rho: float, l1_sensitivity: float | Fraction) -> float:
    r"""The smallest b (to about 1e-8 relative) for which :func:`laplace_zcdp_holds` certifies ρ-zCDP.

    The supremum of D_α/α over α > 1 is the limit α → 1, the Kullback–Leibler divergence
    ε₀ + e^{−ε₀} − 1, for the Laplace pair (checked by the certificate, which bounds every
    order); the search solves ε₀ + e^{−ε₀} − 1 = ρ(1 − 1e-8) and moves b up until the
    certificate holds. It never needs more noise than ε₀ = √(2ρ) (Bun & Steinke).

    Examples
    --------
    >>> round(laplace_scale_for_zcdp(0.5, 1), 6)  # b = 1 by ε-DP ⇒ ε²/2-zCDP
    0.834522
    """
    def holds(b: float) -> bool:
        return laplace_zcdp_holds(l1_sensitivity, b, rho)[0]

    eps0 = laplace_kl_epsilon(rho * (1.0 - 1e-8))
    bs = laplace_scale_for(math.sqrt(2.0 * rho), l1_sensitivity)
    if float(Fraction(l1_sensitivity)) / eps0 < bs:
        try:
            return min(bs, nudge_until(float(Fraction(l1_sensitivity)) / eps0, holds, up=True, max_steps=6))
        except CalibrationError:  # ε₀ so small that the interval bounds cannot separate D_α/α from ρ
            pass
    return nudge_until(bs, holds, up=True)


def laplace_zcdp_rho(l1_sensitivity: float | Fraction, scale: float) -> tuple[float, str]:
    """A certified ρ for Laplace noise of scale b: the Kullback–Leibler limit ε₀ + e^{−ε₀} − 1 raised by
    1e-9 (or 1e-7) relative when :func:`laplace_zcdp_holds` certifies it, else ε₀²/2 (Bun & Steinke);
    with its method."""
    ratio = laplace_epsilon(l1_sensitivity, scale)
    eps0 = float(ratio)
    bound = float(ratio * ratio / 2)
    for slack in (1e-9, 1e-7):
        candidate = (eps0 + math.expm1(-eps0)) * (1.0 + slack)
        if candidate < bound and laplace_zcdp_holds(l1_sensitivity, scale, candidate)[0]:
            return candidate, ("ρ = sup_α D_α/α of the Laplace Rényi divergences (Mironov 2017), certified on "
                               "order intervals")
    return bound, "ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)"
