r"""Privacy of the Laplace mechanism.

Laplace noise of scale b per coordinate on a query of l1 sensitivity Δ₁ is ε-DP with
ε = Δ₁/b (Dwork, McSherry, Nissim & Smith 2006). In one dimension its exact privacy
profile, with ε₀ = Δ₁/b, is

.. math:: \delta(\varepsilon) = \max\left(0,\; 1 - e^{(\varepsilon - \varepsilon_0)/2}\right),
          \quad 0 \le \varepsilon \le \varepsilon_0,

(e.g. δ(0) = 1 − e^{−1/2} = 0.39346934 at ε₀ = 1, the value dp_accounting's tests pin).
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpopt.privacy.rounding import nudge_until


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
