r"""(ε, δ)-probabilistic DP of i.i.d. discrete Gaussian noise N_ℤ(0, σ²) on integer answers.

Noise η with i.i.d. coordinates P[η_i = k] = w(k)/Z, w(k) = exp(−k²/(2σ²)) (Canonne, Kamath & Steinke 2020), added
to integer answers x. Neighbours x, x' = x − v differ by an integer vector v, and the privacy loss of y = x + η is

.. math:: L(\eta) = \log\frac{P[\eta]}{P[\eta + v]} = \frac{\|\eta + v\|^2 - \|\eta\|^2}{2\sigma^2}
          = \frac{2S + \|v\|^2}{2\sigma^2}, \qquad S = \langle \eta, v\rangle = \sum_i v_i \eta_i ,

with no normaliser term (the law lives on ℤ and v is an integer vector). S is an integer, symmetric about 0, whose
law is the convolution of the laws of v_i·η_i. pDP (:mod:`dpopt.privacy.pdp`) asks for

.. math:: \delta(v) = P\big[|L| > \varepsilon\big] = P\big[S > \varepsilon\sigma^2 - \tfrac{\|v\|^2}{2}\big]
          + P\big[S > \varepsilon\sigma^2 + \tfrac{\|v\|^2}{2}\big] \le \delta

for every neighbouring v (the second term is P[S < −εσ² − ‖v‖²/2], by the symmetry of S). It is the sum where
the exact (ε, δ) profile of :mod:`dpopt.privacy.discrete_gaussian` is the difference A − e^ε B of the same two
tails, and it depends on v only through its *move pattern*, the sorted non-zero |v_i|
(:func:`~dpopt.mechanisms.integer_noise.move_patterns`). The continuous law's Lemma 10 (Liu 2019) bounds the same
event by 2P[S > εσ² − ‖v‖²/2]; the exact level is smaller, so the lattice σ² is usually below the continuous
design's.

**Evaluation** (:mod:`dpopt.privacy.discrete_gaussian_sums`). Each coordinate is summed over the box |k| ≤ N:
the box law of S is the product of the coordinates' generating polynomials Σ_{|k|≤N} w(k) X^{v_i(k+N)}, formed
as the powers of the one-coordinate polynomial B (one per distinct |v_i|, shared by every pattern at that σ²,
inflated by |v_i|/g, g the gcd of the pattern) in exact integer arithmetic on weights scaled by 2^{128} and
rounded up, so that every coefficient is an upper bound on the box mass; the two thresholds decided in exact
rationals (ε as written, σ² dyadic: S > x ⟺ S/g ≥ ⌊x/g⌋ + 1). With z the box sum of w (a ball) and
T ≥ Σ_{|k|>N} w(k),

.. math:: \delta(v) \le \frac{M}{z^m} + \frac{m\,T}{z},

M the (upper bound on the) box mass of the event (P[event ∩ box] = M/Z^m ≤ M/z^m) and mT/Z ≥ P[some |η_i| > N].
The tail: for k ≥ N + 1, k² ≥ (N+1)² + 2(N+1)(k − N − 1), so w(k) ≤ w(N+1) r^{k−N−1} with r = e^{−(N+1)/σ²} and
T = 2w(N+1)/(1 − r); N is chosen with w(N + 1) ≤ 2^{−100}, so T/z, the tail's share, is of that order. The
result is the upper end of a 128-bit arb ball, an exact dyadic rational ≥ δ(v).

**Search** (:func:`pattern_pdp_sigma2`). The bisection on σ² compares the largest level over the patterns with δ;
each comparison is decided on the double-precision levels of every pattern
(:func:`~dpopt.privacy.discrete_gaussian_sums.estimated_levels`, an FFT of the same box law) when they are farther
from δ than their error budget, and on the exact levels of the patterns within it otherwise; the σ² found is
then certified by the exact level of every pattern (:func:`worst_pdp_level`), which ``dpopt verify`` re-derives.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010): the law, the loss of integer shifts (Thm 7's derivation, one coordinate).
.. [2] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019: pDP (Eq. 3),
   Lemma 10 (the continuous Gaussian's bound).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Callable

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rounding import ball_upper
from dpopt.core.roots import smallest_on_grid
from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import PRECISION, working_precision
from dpopt.privacy.discrete_gaussian_sums import MAX_BOX_TERMS, box_laws, box_radius, estimate_error, \
    estimated_levels, reduced

flint = lazy_module("flint")

SEARCH_STEPS = 24
"""Bisection steps of :func:`pdp_sigma2` and :func:`pattern_pdp_sigma2` (the σ² found is within 2^{−24} relative
of the switch of the bisection's comparisons on its bracket)."""

CERTIFY_STEPS = 64
"""Steps of 2^{−20} relative by which :func:`pattern_pdp_sigma2` raises a σ² whose exact level does not confirm the
search (never taken when the double-precision levels keep to their error budget)."""


def pdp_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """An upper bound on δ(v) = P[|L| > ε] for N_ℤ(0, σ²) noise and a move of the given pattern (module docstring).

    Parameters
    ----------
    sigma2 : Fraction
        σ² > 0, in lattice units.
    pattern : tuple of int
        The non-zero |v_i| of the move (at least one).
    epsilon : Fraction
        ε, exactly (the decimal as written).

    Returns
    -------
    Fraction
        An exact dyadic number ≥ δ(v).

    Raises
    ------
    CalibrationError
        The box law of S/g would have more than :data:`~dpopt.privacy.discrete_gaussian_sums.MAX_BOX_TERMS`
        coefficients.
    """
    sigma2, epsilon = Fraction(sigma2), Fraction(epsilon)
    (pattern,) = _checked(sigma2, [pattern])
    return _pattern_level(sigma2, pattern, epsilon)


def _checked(sigma2: Fraction, patterns: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The patterns as sorted tuples of positive integers, each non-empty and with a box law of at most
    :data:`~dpopt.privacy.discrete_gaussian_sums.MAX_BOX_TERMS` coefficients (CalibrationError otherwise)."""
    out = []
    for pattern in patterns:
        pattern = tuple(sorted(abs(int(t)) for t in pattern if t))
        if sigma2 <= 0 or not pattern:
            raise CalibrationError(f"the pDP level needs σ² > 0 and a non-zero move (got σ² = {sigma2}, {pattern})")
        terms = 2 * box_radius(sigma2) * sum(t * c for t, c in reduced(pattern)[1]) + 1
        if terms > MAX_BOX_TERMS:
            raise CalibrationError(f"the law of ⟨η, v⟩ at σ² = {float(sigma2):.6g} for the move {pattern} has "
                                   f"{terms} terms (more than {MAX_BOX_TERMS})")
        out.append(pattern)
    return out


@lru_cache(maxsize=8192)
def _pattern_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """:func:`pdp_level` of a sorted pattern (:func:`_checked`), kept (a design's check re-reads the levels its
    search certified)."""
    norm2 = sum(t * t for t in pattern)
    laws = box_laws(sigma2)
    mass = laws.tail_mass(pattern, (epsilon * sigma2 - Fraction(norm2, 2), epsilon * sigma2 + Fraction(norm2, 2)))
    m = len(pattern)
    with working_precision(PRECISION):
        level = mass / laws.z**m + m * laws.tail / laws.z
        return ball_upper(level)


def subgaussian_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    r"""A cheap upper bound on δ(v) (module docstring) from the sub-Gaussian tail of S: each η_i has
    :math:`E e^{t\eta_i} \le e^{t^2\sigma^2/2}` (Canonne, Kamath & Steinke 2020, Corollary 9), so
    :math:`E e^{tS} \le e^{t^2\sigma^2\|v\|^2/2}` (independence) and Chernoff's bound gives, for x ≥ 0,
    :math:`P[S > x] \le e^{-x^2/(2\sigma^2\|v\|^2)}`:

    .. math:: \delta(v) \le e^{-a^2/(2\sigma^2\|v\|^2)} + e^{-b^2/(2\sigma^2\|v\|^2)}, \qquad
              a = \varepsilon\sigma^2 - \|v\|^2/2 \ge 0, \quad b = \varepsilon\sigma^2 + \|v\|^2/2

    (1 when a < 0), the exponents exact rationals, the exponentials arb balls; an exact dyadic number ≥ δ(v).
    It depends on v through ‖v‖² alone: :func:`norm_pdp_level` of ‖v‖²."""
    return norm_pdp_level(sigma2, sum(int(t) ** 2 for t in pattern), epsilon)


def worst_pdp_level(sigma2: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction,
                    target: Fraction | None = None) -> Fraction:
    """An upper bound on max δ(v) over the move patterns: the largest bound of a pattern, the patterns taken by
    decreasing double-precision level (:func:`~dpopt.privacy.discrete_gaussian_sums.estimated_levels`: only the
    order of the evaluations, so that the largest exact level comes first), each bounded by its
    :func:`subgaussian_level` when that is at most the largest bound so far (it then leaves the maximum unchanged)
    and by its exact :func:`pdp_level` otherwise: a person's moves on a marginal workload have hundreds of patterns.

    With a ``target`` (a search's comparison) a pattern's sub-Gaussian bound is used whenever it is at most the
    target, and the first exact level above the target is returned at once: the value is at most ``target``
    exactly when every pattern's bound is.
    """
    sigma2, epsilon = Fraction(sigma2), Fraction(epsilon)
    patterns = _checked(sigma2, patterns)
    estimates = estimated_levels(sigma2, patterns, epsilon)
    order = sorted(range(len(patterns)), key=lambda i: (-estimates[i], -sum(t * t for t in patterns[i]), patterns[i]))
    worst = None
    for pattern in (patterns[i] for i in order):
        screen = worst if target is None else target
        bound = None if screen is None else subgaussian_level(sigma2, pattern, epsilon)
        if bound is None or bound > screen:
            bound = pdp_level(sigma2, pattern, epsilon)
        worst = bound if worst is None else max(worst, bound)
        if target is not None and worst > target:
            return worst
    return worst


def pattern_pdp_sigma2(patterns: list[tuple[int, ...]], epsilon: Fraction, delta: Fraction, start: Fraction,
                       grid) -> Fraction:
    """A σ² on ``grid`` (a rounding up of rationals to the sampler's dyadic grid) whose pDP level on every move
    pattern is ≤ δ, certified by :func:`worst_pdp_level`.

    :func:`~dpopt.core.roots.smallest_on_grid` from ``start`` (the continuous design's σ², whose Lemma 10 bound is
    above the exact level): each comparison "every pattern's level ≤ δ" is decided on the double-precision levels
    of the patterns (:func:`~dpopt.privacy.discrete_gaussian_sums.estimated_levels`) where they are farther from δ
    than their error budget (:func:`~dpopt.privacy.discrete_gaussian_sums.estimate_error`), and by the exact
    :func:`pdp_level` of the patterns within it: the comparisons of a bisection on the exact levels of every
    pattern, at a fraction of its cost. The bisection ends between a grid point that fails and the next one,
    which passes; the level jumps as εσ² ± ‖v‖²/2 crosses multiples of g, so the σ² found is one that passes,
    near the smallest. The σ² returned is certified by the exact level of every pattern; should it fail (an
    estimate beyond its budget), it is raised by steps of 2^{−20} relative until it passes.

    Raises
    ------
    CalibrationError
        No σ² below 2^20·start passes, none is certified within :data:`CERTIFY_STEPS` steps, or a box law is
        beyond :data:`~dpopt.privacy.discrete_gaussian_sums.MAX_BOX_TERMS`.
    """
    epsilon, delta = Fraction(epsilon), Fraction(delta)
    patterns = _checked(Fraction(start), patterns)

    def passes(s2: Fraction) -> bool:
        _checked(s2, patterns)
        margins = np.array([estimate_error(s2, pattern) for pattern in patterns])
        levels = estimated_levels(s2, patterns, epsilon, screen=float(delta) - margins.max())
        if np.any(levels > float(delta) + margins):
            return False
        unsure = np.flatnonzero(levels >= float(delta) - margins)
        return all(pdp_level(s2, patterns[i], epsilon) <= delta for i in unsure)

    found = smallest_on_grid(passes, start, grid, steps=SEARCH_STEPS)
    if found is None:
        raise CalibrationError(f"no discrete Gaussian σ² up to 2^20 times {float(start):.6g} meets the pDP target")
    for _ in range(CERTIFY_STEPS):
        if worst_pdp_level(found, patterns, epsilon) <= delta:
            return found
        found = grid(found * (1 + Fraction(1, 2**20)))
    raise CalibrationError(f"the exact pDP level does not certify the discrete Gaussian σ² {float(found):.6g}")


def shift_range_level(sigma2: Fraction, shift: int, epsilon: Fraction) -> Fraction:
    r"""An upper bound on max δ(v) over every integer move 0 < |v| ≤ ``shift`` of one coordinate (a lattice sum's
    neighbours move N by any integer up to Δ_u): δ(Δ_u) when Δ_u² ≤ 2εσ², else 1.

    For one coordinate, S = vη and (v > 0; −v has the same level, η being symmetric)

    .. math:: 1 - \delta(v) = P\big[|L| \le \varepsilon\big] = P\big[\eta \in [l(v), u(v)]\big], \qquad
              u(v) = \frac{\varepsilon\sigma^2}{v} - \frac{v}{2}, \quad
              l(v) = -\Big(\frac{\varepsilon\sigma^2}{v} + \frac{v}{2}\Big).

    u decreases in v, and εσ²/v + v/2 decreases on 0 < v ≤ √(2εσ²) (derivative −εσ²/v² + ½ ≤ 0), so l
    increases there: the intervals [l(v), u(v)] are nested, and 1 ≤ v ≤ v′ ≤ √(2εσ²) gives δ(v) ≤ δ(v′) for
    any law of η, lattice or not. Every move up to Δ_u is then at most δ(Δ_u) when Δ_u² ≤ 2εσ². Beyond, the
    intervals are no longer nested (the level of the discrete law need not grow with v), and the bound is the
    trivial 1; such a σ² fails any target δ < ½ anyway, since u(Δ_u) < 0 makes δ(Δ_u) ≥ P[η ≥ 0] > ½.

    Parameters
    ----------
    sigma2 : Fraction
        σ² > 0, in lattice units.
    shift : int
        Δ_u ≥ 1, the largest move.
    epsilon : Fraction
        ε, exactly.

    Returns
    -------
    Fraction
        :func:`pdp_level` of the move (Δ_u,), or 1.
    """
    sigma2, epsilon, shift = Fraction(sigma2), Fraction(epsilon), int(shift)
    if shift * shift > 2 * epsilon * sigma2:
        return Fraction(1)
    return pdp_level(sigma2, (shift,), epsilon)


def pdp_sigma2(level: Callable[[Fraction], Fraction], delta: Fraction, start: Fraction, grid) -> Fraction:
    """A σ² on ``grid`` (a rounding up of rationals to the sampler's dyadic grid) whose pDP ``level`` (σ² ↦ the
    worst level over the moves: :func:`worst_pdp_level` of the listed move patterns, or :func:`shift_range_level`)
    is ≤ δ: the end of a bisection between a σ² that fails and one that passes, bracketed from ``start`` (the
    continuous design's σ², whose Lemma 10 bound is above the exact level) by factors of 1.25. The level jumps as
    εσ² ± ‖v‖²/2 crosses integers, so the σ² found is one that passes, near the smallest.

    Raises
    ------
    CalibrationError
        No σ² below 2^20·start passes, or the box law is beyond :data:`MAX_BOX_TERMS`.
    """
    def passes(s2: Fraction) -> bool:
        return level(s2) <= delta

    found = smallest_on_grid(passes, start, grid, steps=SEARCH_STEPS)
    if found is None:
        raise CalibrationError(f"no discrete Gaussian σ² up to 2^20 times {float(start):.6g} meets the pDP target")
    return found


def norm_pdp_level(sigma2: Fraction, l2_squared: Fraction | int, epsilon: Fraction) -> Fraction:
    r"""An upper bound on δ(v) = P[|L| > ε] for *every* integer move v with ‖v‖² ≤ n = ``l2_squared``: the
    sub-Gaussian bound of :func:`subgaussian_level` evaluated at n, for a space whose moves are not listed nor their
    patterns derived, only its exact l2 sensitivity n = max ‖v‖².

    With c = εσ², the bound of a move of squared norm m is

    .. math:: f(m) = e^{-g(m)/(2\sigma^2)} + e^{-h(m)/(2\sigma^2)}, \qquad
              g(m) = \frac{(c - m/2)^2}{m} = \frac{c^2}{m} - c + \frac m4, \quad
              h(m) = \frac{(c + m/2)^2}{m} = \frac{c^2}{m} + c + \frac m4 ,

    and g'(m) = h'(m) = 1/4 − c²/m² < 0 for 0 < m < 2c: both exponents decrease, so f is increasing in m on
    (0, 2εσ²] (where a = c − m/2 ≥ 0, the range of Chernoff's bound). Hence, when n ≤ 2εσ², every move with
    ‖v‖² = m ≤ n has δ(v) ≤ f(m) ≤ f(n); when n > 2εσ² the bound is the trivial 1. The value is therefore a bound
    on max_v δ(v) over any set of integer moves whose squared norms are at most n, whatever their patterns.

    In σ² (n fixed) it is nonincreasing where a ≥ 0: d/dσ² of (εσ² ∓ n/2)²/(2σ²n) is
    (εσ² − n/2)(εσ² + n/2)/(2σ⁴n) ≥ 0, so a bisection on σ² finds the smallest σ² of a grid that passes.

    Parameters
    ----------
    sigma2 : Fraction
        σ² > 0, in lattice units.
    l2_squared : Fraction or int
        n > 0, an upper bound on ‖v‖² over the moves (the space's exact l2 sensitivity squared).
    epsilon : Fraction
        ε, exactly.

    Returns
    -------
    Fraction
        An exact dyadic number ≥ max δ(v) over the integer moves with ‖v‖² ≤ n (1 when n > 2εσ²).

    References
    ----------
    Canonne, Kamath & Steinke (2020), Corollary 9 (the sub-Gaussian moment generating function of N_ℤ(0, σ²)).
    """
    sigma2, epsilon, norm2 = Fraction(sigma2), Fraction(epsilon), Fraction(l2_squared)
    if sigma2 <= 0 or norm2 <= 0:
        raise CalibrationError(f"the pDP level needs σ² > 0 and ‖v‖² > 0 (got σ² = {sigma2}, ‖v‖² = {norm2})")
    a, b = epsilon * sigma2 - norm2 / 2, epsilon * sigma2 + norm2 / 2
    if a < 0:
        return Fraction(1)
    with working_precision(PRECISION):
        bound = sum(((-flint.arb(flint.fmpq(x.numerator, x.denominator))).exp()
                     for x in (t * t / (2 * sigma2 * norm2) for t in (a, b))), flint.arb(0))
        return ball_upper(bound)
