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

**zCDP.** Independent coordinates add: a move v has D_α = Σ_k D_α(|v_k|/b) (:func:`laplace_renyi`,
Mironov 2017, Table II). When the neighbouring differences are listed, each distinct move pattern
{|v_k|} is certified exactly (:func:`laplace_patterns`); otherwise the one-axis move of l1 norm Δ₁
bounds them all (Rényi divergence is monotone under the ordering above). On a replace-one
histogram the move (1, −1) has half the divergences of the one-axis move of norm 2 to first
order, so the exact patterns need about 1/√2 of the scale. :func:`laplace_zcdp_holds` certifies
D_α ≤ ρα over all orders, and :func:`laplace_scale_for_zcdp` calibrates b on the limit α → 1
(where D_α/α peaks: Harrison & Manurangsi 2025 for one coordinate, hence for sums),
Σ_k KL(|v_k|/b) = ρ with KL(ε₀) = ε₀ + e^{−ε₀} − 1, which needs markedly less noise than ε-DP ⇒
ε²/2-zCDP (b = 0.8345 against 1 at ρ = 0.5, Δ₁ = 1).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below, written
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.privacy.zcdp import RENYI_BITS, renyi_ball, renyi_zcdp_holds
from dpopt.sensitivity.patterns import move_multisets
from dpopt.sensitivity.space import SensitivitySpace

mpmath = lazy_module("mpmath")
optimize = lazy_module("scipy.optimize")

if TYPE_CHECKING:
    from flint import arb

_MP_DIGITS = 60


def laplace_epsilon(l1_sensitivity: float | Fraction, scale: float) -> Fraction:
    """ε = Δ₁ / b, exactly, as a Fraction of the binary values given."""
    return Fraction(l1_sensitivity) / Fraction(scale)


def laplace_scale_for(epsilon: float, l1_sensitivity: float | Fraction) -> float:
    """The smallest float b with Δ₁/b ≤ ε in exact arithmetic."""
    b = float(Fraction(l1_sensitivity) / written(epsilon))
    return nudge_until(b, lambda x: laplace_epsilon(l1_sensitivity, x) <= written(epsilon), up=True)


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
    epsilon, delta = float_below(epsilon), float_below(delta)
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


Pattern = tuple[Fraction, ...]
"""A move's sorted non-zero |v_k| (exact binary values): all its Rényi divergences depend on."""

MAX_PATTERNS = 64
"""Beyond this many distinct move patterns the one-axis move of l1 norm Δ₁ (an upper bound) is used."""


def laplace_patterns(space: SensitivitySpace) -> list[Pattern] | None:
    """The distinct move patterns of a listed sensitivity space with some move over ≥ 2 coordinates;
    None when the one-axis move of l1 norm Δ₁ is exact (every move on one axis) or the space is not
    listed (then it is the bound used), or when there are more than :data:`MAX_PATTERNS`."""
    if space.dimension == 1:
        return None
    patterns = move_multisets(space, MAX_PATTERNS)
    if patterns is None or all(len(t) == 1 for t in patterns):
        return None
    return patterns


def _patterns_or_axis(l1_sensitivity: float | Fraction, patterns: list[Pattern] | None) -> list[Pattern]:
    return patterns if patterns else [(Fraction(l1_sensitivity),)]


def laplace_zcdp_holds(
    l1_sensitivity: float | Fraction, scale: float, rho: float, patterns: list[Pattern] | None = None
) -> tuple[bool, str]:
    r"""Certify that Laplace noise of scale b is ρ-zCDP: D_α ≤ ρα for every α > 1 and every move.

    A move with |v_k| = ``pattern`` has D_α = Σ_k D_α(|v_k|/b) (independent coordinates add;
    :func:`laplace_renyi`), its largest loss being Σ_k |v_k|/b. Without ``patterns`` the move is the
    one-axis move of l1 norm Δ₁, the worst case over moves of that norm (module docstring). The
    continuum of orders is covered by intervals (:func:`~dpopt.privacy.zcdp.renyi_zcdp_holds`);
    ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4) also certifies when (Δ₁/b)²/2 ≤ ρ.

    Returns
    -------
    passed, detail : bool, str
    """
    ratio = laplace_epsilon(l1_sensitivity, scale)
    if ratio * ratio / 2 <= written(rho):
        return True, f"(Δ₁/b)²/2 = {float(ratio * ratio / 2):.17g} ≤ ρ (ε-DP ⇒ ε²/2-zCDP)"
    b = Fraction(scale)
    details = []
    for pattern in _patterns_or_axis(l1_sensitivity, patterns):
        shifts = [t / b for t in pattern]

        def renyi(a, shifts=shifts):
            return sum((laplace_renyi(a, e) for e in shifts[1:]), laplace_renyi(a, shifts[0]))

        passed, detail = renyi_zcdp_holds(renyi, sum(shifts), rho)
        if not passed:
            return False, f"move |v| = {tuple(float(t) for t in pattern)}: {detail}"
        details.append(detail)
    return True, details[0] if len(details) == 1 else f"{len(details)} move patterns; the last: " + details[-1]


def laplace_kl(epsilon0: float) -> float:
    """KL(Lap(0, b) ‖ Lap(Δ, b)) = ε₀ + e^{−ε₀} − 1 at ε₀ = Δ/b (the α → 1 limit of :func:`laplace_renyi`)."""
    return epsilon0 + math.expm1(-epsilon0)


def laplace_kl_scale(rho: float, l1_sensitivity: float | Fraction, patterns: list[Pattern] | None = None) -> float:
    """The b at which the largest Σ_k KL(|v_k|/b) over the move patterns equals ρ (floating-point root
    in log b). Each KL decreases in b, so ρ-zCDP (hence KL ≤ ρ) needs at least this b."""
    moves = [[float(t) for t in p] for p in _patterns_or_axis(l1_sensitivity, patterns)]
    if len(moves) == 1 and len(moves[0]) == 1:
        return moves[0][0] / laplace_kl_epsilon(rho)

    def excess(log_b: float) -> float:
        b = math.exp(log_b)
        return max(sum(laplace_kl(t / b) for t in m) for m in moves) - rho

    hi = math.log(float(Fraction(l1_sensitivity)) / math.sqrt(2.0 * rho))  # KL ≤ ε²/2 ≤ ρ there
    lo = hi - math.log(2.0)
    while excess(lo) <= 0:
        lo -= math.log(2.0)
    return math.exp(optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15))


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


def laplace_scale_for_zcdp(
    rho: float, l1_sensitivity: float | Fraction, patterns: list[Pattern] | None = None
) -> float:
    r"""The smallest b (to about 1e-8 relative) for which :func:`laplace_zcdp_holds` certifies ρ-zCDP.

    The supremum of D_α/α over α > 1 is the limit α → 1, the Kullback–Leibler divergence
    (ε₀ + e^{−ε₀} − 1 per coordinate; Harrison & Manurangsi 2025 prove it for one coordinate, so
    it holds for sums), checked by the certificate, which bounds every order; the search solves
    max over moves Σ_k KL(|v_k|/b) = ρ(1 − 1e-8) (:func:`laplace_kl_scale`) and moves b up until
    the certificate holds. It never needs more noise than ε₀ = √(2ρ) (Bun & Steinke).

    Examples
    --------
    >>> round(laplace_scale_for_zcdp(0.5, 1), 6)  # b = 1 by ε-DP ⇒ ε²/2-zCDP
    0.834522
    """
    def holds(b: float) -> bool:
        return laplace_zcdp_holds(l1_sensitivity, b, rho, patterns)[0]

    start = laplace_kl_scale(rho * (1.0 - 1e-8), l1_sensitivity, patterns)
    bs = laplace_scale_for(math.sqrt(2.0 * rho), l1_sensitivity)
    if start < bs:
        try:
            return min(bs, nudge_until(start, holds, up=True, max_steps=6))
        except CalibrationError:  # ε₀ so small that the interval bounds cannot separate D_α/α from ρ
            pass
    return nudge_until(bs, holds, up=True)


def laplace_zcdp_rho(
    l1_sensitivity: float | Fraction, scale: float, patterns: list[Pattern] | None = None
) -> tuple[float, str]:
    """A certified ρ for Laplace noise of scale b: the Kullback–Leibler limit max Σ_k KL(|v_k|/b) raised by
    1e-9 (or 1e-7) relative when :func:`laplace_zcdp_holds` certifies it, else ε₀²/2 (Bun & Steinke);
    with its method."""
    ratio = laplace_epsilon(l1_sensitivity, scale)
    b = float(scale)
    kl = max(sum(laplace_kl(float(t) / b) for t in p) for p in _patterns_or_axis(l1_sensitivity, patterns))
    bound = float(ratio * ratio / 2)
    for slack in (1e-9, 1e-7):
        candidate = kl * (1.0 + slack)
        if candidate < bound and laplace_zcdp_holds(l1_sensitivity, scale, candidate, patterns)[0]:
            return candidate, ("ρ = sup_α D_α/α of the Laplace Rényi divergences (Mironov 2017), summed over "
                               "the coordinates of each move, certified on order intervals")
    return bound, "ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)"
