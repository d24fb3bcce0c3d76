r"""Exact (ε, δ) profile of i.i.d. staircase noise: its privacy loss lives on the lattice ε₀ℤ.

The staircase density (:mod:`dpopt.noise.staircase`; Geng & Viswanath 2016) is
f(x) = a·b^{n(|x|)}, b = e^{−ε₀}, with n(y) = ⌊y/Δ₀ − g⌋ + 1 the number of drop points
(g + k)Δ₀ ≤ y (y ≥ 0), so n(y + Δ₀) = n(y) + 1. For a coordinate shifted by m > 0 the privacy
loss of output x is

.. math:: L(x) = \log\frac{f(x)}{f(x-m)} = \varepsilon_0\,\bigl(n(|x-m|) - n(|x|)\bigr) \in \varepsilon_0\mathbb Z,

and its law under f is a finite pmf computed exactly: on x ≤ 0 and on x ≥ m, L is periodic with
period Δ₀ and the density falls by b per period, so the mass of each loss value there is 1/(1 − b)
times its mass over one period ([−Δ₀, 0) and [m, m + Δ₀)); [0, m) is finite. On each piece L and f
are constant between the break points (g + k)Δ₀ and m ± (g + k)Δ₀, so every mass is a density
times a length. Independent coordinates add their losses: the pmf of a move v is the convolution
of its coordinates' pmfs (a finite sum on ε₀ℤ), and

.. math:: \delta_v(\varepsilon) = \sum_j P[L = j\varepsilon_0]\,\bigl(1 - e^{\varepsilon - j\varepsilon_0}\bigr)_+ ,

the exact hockey-stick divergence (Meiser & Mohammadi 2018). Everything is evaluated in 60-digit
arithmetic from the exact binary values of (ε₀, Δ₀, g) and of the shifts. The Rényi divergences of a
move are finite sums over the same pmf, D_α = log(Σ_j P_j e^{(α−1)jε₀})/(α − 1)
(:func:`staircase_renyi_ball`), for ρ-zCDP targets, and its trade-off function is piecewise linear
through the cumulative masses (:class:`LossPMFTradeOff`), for μ-GDP targets. A staircase with
ε₀·max_v Σ_i⌈|v_i|/Δ₀⌉ = ε₁ is ε₁-DP, so this profile never exceeds randomized response's at ε₁
(Kairouz, Oh & Viswanath 2015), and is smaller whenever a move spreads over several coordinates or
δ is not negligible: :class:`~dpopt.mechanisms.staircase.StaircaseMechanism` calibrates ε₀ on it
for (ε, δ) targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import accumulate

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.privacy.tradeoff import TradeOff
from dpopt.privacy.zcdp import RENYI_BITS, renyi_ball

mpmath = lazy_module("mpmath")

_MP_DIGITS = 60


def _mp(x: float | Fraction) -> mpmath.mpf:
    x = Fraction(x)
    return mpmath.mpf(x.numerator) / x.denominator


def _drops(y: mpmath.mpf, step: mpmath.mpf, g: mpmath.mpf) -> int:
    """n(y) = ⌊y/Δ₀ − g⌋ + 1 for y ≥ 0: the drop points (g + k)Δ₀ ≤ y."""
    return int(mpmath.floor(y / step - g)) + 1


def _breaks(lo: mpmath.mpf, hi: mpmath.mpf, step: mpmath.mpf, g: mpmath.mpf, offsets) -> list[mpmath.mpf]:
    """lo, hi and every point o ± (g + k)Δ₀ (o in ``offsets``) strictly inside (lo, hi), sorted."""
    points = {lo, hi}
    for o in offsets:
        for sign in (1, -1):  # o + sign·(g + k)Δ₀ ∈ (lo, hi) ⇔ k strictly between these two
            ends = sorted((sign * (lo - o) / step - g, sign * (hi - o) / step - g))
            for k in range(max(0, int(mpmath.floor(ends[0]))), int(mpmath.ceil(ends[1])) + 1):
                point = o + sign * (g + k) * step
                if lo < point < hi:
                    points.add(point)
    return sorted(points)


def staircase_loss_pmf(epsilon0: float, step: float, g: float, shift: float | Fraction) -> dict[int, mpmath.mpf]:
    """{j: P[L = jε₀]} of one staircase coordinate against its shift by m = ``shift`` > 0 (module docstring),
    in 60-digit arithmetic (it sets that precision itself)."""
    return dict(_loss_pmf(Fraction(epsilon0), Fraction(step), Fraction(g), Fraction(shift)))


@lru_cache(maxsize=256)
def _loss_pmf(epsilon0: Fraction, step: Fraction, g: Fraction, shift: Fraction) -> tuple[tuple[int, mpmath.mpf], ...]:
    """:func:`staircase_loss_pmf` as a tuple, kept for the last 256 arguments (a move's coordinates and the
    moves of one space share their shifts; mpf values are immutable)."""
    with mpmath.workdps(_MP_DIGITS):
        e0, d0, gg, m = _mp(epsilon0), _mp(step), _mp(g), _mp(shift)
        b = mpmath.exp(-e0)
        a = (1 - b) / (2 * d0 * (gg + (1 - gg) * b))
        period = 1 / (1 - b)
        pmf: dict[int, mpmath.mpf] = {}
        pieces = ((-d0, mpmath.mpf(0), period), (mpmath.mpf(0), m, mpmath.mpf(1)), (m, m + d0, period))
        for lo, hi, weight in pieces:
            points = _breaks(lo, hi, d0, gg, (mpmath.mpf(0), m))
            for u, w in zip(points, points[1:]):
                x = (u + w) / 2
                j = _drops(abs(x - m), d0, gg) - _drops(abs(x), d0, gg)
                mass = weight * a * b ** _drops(abs(x), d0, gg) * (w - u)
                pmf[j] = pmf.get(j, mpmath.mpf(0)) + mass
        return tuple(pmf.items())


def convolve_pmfs(p: dict[int, mpmath.mpf], q: dict[int, mpmath.mpf]) -> dict[int, mpmath.mpf]:
    """The pmf of the sum of two independent losses on ε₀ℤ, {j: P[L = jε₀]} each."""
    out: dict[int, mpmath.mpf] = {}
    for i, x in p.items():
        for j, y in q.items():
            out[i + j] = out.get(i + j, mpmath.mpf(0)) + x * y
    return out


def staircase_move_pmf(epsilon0: float, step: float, g: float,
                       shifts: Sequence[float | Fraction]) -> dict[int, mpmath.mpf]:
    """{j: P[L = jε₀]} of i.i.d. staircase noise (ε₀, Δ₀, g) against a move whose non-zero |v_i| are
    ``shifts``: the convolution of the coordinates' pmfs (:func:`staircase_loss_pmf`), 60 digits."""
    law: dict[int, mpmath.mpf] = {0: mpmath.mpf(1)}
    for m in shifts:
        if m:
            law = convolve_pmfs(law, staircase_loss_pmf(epsilon0, step, g, abs(Fraction(m))))
    return law


def staircase_delta_mp(epsilon: float, epsilon0: float, step: float, g: float,
                       shifts: Sequence[float | Fraction]) -> mpmath.mpf:
    """δ(ε) of i.i.d. staircase noise (ε₀, Δ₀, g) against a move whose non-zero |v_i| are ``shifts``
    (the module docstring's sum over :func:`staircase_move_pmf`), in 60 digits.

    Examples
    --------
    >>> import math
    >>> from fractions import Fraction
    >>> d = staircase_delta_mp(0.0, 1.0, 1.0, 0.5, [Fraction(1)])  # one step: P[L = ε₀](1 − e^{−ε₀})
    >>> b = math.exp(-1); p = 0.5 + (1 - b) / (2 * (0.5 + 0.5 * b)) * 0.5
    >>> abs(float(d) - p * (1 - b)) < 1e-15
    True
    """
    return loss_pmf_delta(staircase_move_pmf(epsilon0, step, g, shifts), epsilon, epsilon0)


def loss_pmf_delta(law: dict[int, mpmath.mpf], epsilon: float, epsilon0: float | Fraction) -> mpmath.mpf:
    """δ(ε) = Σ_j P[L = jε₀](1 − e^{ε − jε₀})₊ of a loss pmf on ε₀ℤ (ε₀ its exact binary or rational value), in
    60 digits."""
    with mpmath.workdps(_MP_DIGITS):
        e0, eps = _mp(epsilon0), mpmath.mpf(epsilon)
        return sum((mass * -mpmath.expm1(eps - j * e0) for j, mass in law.items() if j * e0 > eps), mpmath.mpf(0))


def staircase_kl(law: dict[int, mpmath.mpf], epsilon0: float) -> float:
    """KL(P‖Q) = E_P[L] = Σ_j P[L = jε₀]·jε₀ of a move's pmf: the α → 1 limit of its Rényi divergences."""
    return float(sum(mass * j for j, mass in law.items()) * _mp(epsilon0))


PMF_RADIUS = "1e-45"
"""Radius given to each 60-digit mass when it enters Arb balls: the masses come from a few hundred
60-digit operations (relative error below 10⁻⁵⁵ each), so 10⁻⁴⁵ is a margin of 10⁹ or more."""


def staircase_renyi_ball(law: dict[int, mpmath.mpf], epsilon0: float):
    r"""α ↦ an Arb ball containing D_α = \frac{1}{\alpha-1}\log\sum_j P[L = j\varepsilon_0]e^{(\alpha-1)j\varepsilon_0}
    of a move's pmf (:func:`staircase_move_pmf`), for :func:`~dpopt.privacy.zcdp.renyi_zcdp_holds`:
    each mass is a ball of radius :data:`PMF_RADIUS`, ε₀ its exact binary value."""
    from flint import arb, ctx


    with ctx.workprec(RENYI_BITS):
        e0 = renyi_ball(Fraction(epsilon0))
        terms = [(arb(mpmath.nstr(mass, 55), PMF_RADIUS), j) for j, mass in law.items()]

    def renyi(alpha):
        with ctx.workprec(RENYI_BITS):
            a = renyi_ball(alpha) - 1
            total = sum((mass * (a * j * e0).exp() for mass, j in terms), arb(0))
            return total.log() / a

    return renyi


class LossPMFTradeOff(TradeOff):
    r"""T(P, Q) of a pair whose privacy loss L = log p/q takes finitely many values l_k with P-masses p_k
    (then Q-masses p_k e^{−l_k}): by Neyman–Pearson the most powerful tests reject P where L is smallest,
    so T is piecewise linear through the points (Σ_{l_j < l} p_j, 1 − Σ_{l_j < l} p_j e^{−l_j}), with
    slope −e^{−l_k} on the k-th piece (Dong, Roth & Su 2022, Prop. 2.2 and its proof).

    ``symmetric``: the staircase pair of a move is the mirror image of its reverse (x ↦ v − x maps the
    noise around 0 onto the noise around v), so T = T⁻¹ (Dong, Roth & Su 2022, Prop. 2.4).
    """

    symmetric = True

    def __init__(self, law: dict[int, mpmath.mpf], epsilon0: float):
        with mpmath.workdps(_MP_DIGITS):
            e0 = _mp(epsilon0)
            items = sorted((j, mass) for j, mass in law.items() if mass > 0)
            self._losses = [j * e0 for j, _ in items]
            p = [mass for _, mass in items]
            q = [mass * mpmath.exp(-loss) for (_, mass), loss in zip(items, self._losses)]
            self._alpha = np.array([0.0] + [float(c) for c in accumulate(p)])
            self._power = np.array([0.0] + [float(c) for c in accumulate(q)])
        self._alpha[-1] = self._power[-1] = 1.0  # Σ p = Σ q = 1 (60-digit sums, rounded)
        self._slopes = -np.exp(-np.array([float(loss) for loss in self._losses]))

    @classmethod
    def in_double_precision(cls, law: tuple[int, np.ndarray], epsilon0: float) -> LossPMFTradeOff:
        """The same trade-off function from a pmf ``(j0, masses)`` in double precision
        (:func:`dpopt.privacy.staircase_search.move_pmf`), its sums in double precision: for a search only."""
        j0, masses = law
        j = j0 + np.flatnonzero(masses > 0)
        p = masses[masses > 0]
        losses = j * float(epsilon0)
        self = cls.__new__(cls)
        self._losses = list(losses)
        self._alpha = np.concatenate([[0.0], np.cumsum(p)])
        self._power = np.concatenate([[0.0], np.cumsum(p * np.exp(-losses))])
        self._alpha[-1] = self._power[-1] = 1.0
        self._slopes = -np.exp(-losses)
        return self

    @property
    def name(self) -> str:
        return f"staircase loss pmf ({len(self._losses)} atoms)"

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return 1.0 - self._complement(alpha)

    def _complement(self, alpha: np.ndarray) -> np.ndarray:
        return np.interp(alpha, self._alpha, self._power)

    def _subgradient(self, alpha: np.ndarray) -> np.ndarray:
        piece = np.clip(np.searchsorted(self._alpha, alpha, side="right") - 1, 0, self._slopes.size - 1)
        return self._slopes[piece]
