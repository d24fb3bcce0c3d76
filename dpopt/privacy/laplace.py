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
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from dpopt.privacy.rounding import nudge_until

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
