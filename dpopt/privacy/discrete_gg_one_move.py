r"""The exact (ε, δ) profile and pDP level of the discrete generalized Gaussian under a move of one coordinate.

Noise K on ℤ with P[K = k] = w(k)/Z, w(k) = exp(−(|k|/s)^p), p ≥ 1
(:class:`~dpopt.noise.discrete_generalized_gaussian.DiscreteGeneralizedGaussian`), and neighbouring integer answers
that differ in one coordinate by v > 0 (the move pattern (v,), e.g. the sum's lattice of
:mod:`dpopt.mechanisms.real_lattice`). The privacy loss is L(k) = A(k)/s^p with the integer
A(k) = |k + v|^p − |k|^p (:mod:`dpopt.privacy.discrete_gg_profile`), and:

* **A is nondecreasing in k.** A(k + 1) − A(k) = [f(k + v + 1) − f(k + v)] − [f(k + 1) − f(k)] for the convex
  f(x) = |x|^p, whose unit increments do not decrease with x, and k + v ≥ k. So for every threshold t the set
  {k : A(k) > t} is a half-line {k ≥ k₀}, k₀ found by integer bisection with exact comparisons.
* **Profile** (Balle & Wang 2018, Thm 5): δ_v(ε) = Σ_{A(k) > εs^p} P[K = k](1 − e^{ε − A(k)/s^p}), and
  w(k)·e^{−A(k)/s^p} = w(k + v), so

  .. math:: \delta_v(\varepsilon) = \frac{1}{Z}\sum_{k \ge k_0}\big(w(k) - e^{\varepsilon} w(k + v)\big),
            \qquad t = \varepsilon s^p,

  each term positive (CKS 2020, Thm 7 is this form for p = 2). No exponential per term: two sums of the weights.
* **pDP level** δ(v) = P[|L| > ε] = P[A > t] + P[A < −t] (disjoint for t ≥ 0). A(−k − v) = −A(k), so
  {A < −t} = {k ≤ −k₀ − v}, whose mass is P[K ≥ k₀ + v] by the law's symmetry:
  δ(v) = P[K ≥ k₀] + P[K ≥ k₀ + v].

**Evaluation.** Both are read from the suffix sums S_j = Σ_{i=j}^{R} w(i) of the law's arb weight table over its box
|k| ≤ R (:meth:`~dpopt.noise.discrete_generalized_gaussian.DiscreteGeneralizedGaussian.suffix_sums`, the tail
beyond R below 2^{−80}): the profile's box part drops the terms −e^ε w(k + v) with k + v > R (raising the sum),
everything is divided by the ball containing Z, and the mass outside the box, at most 2·tail(R)/Z, is added. The
result is a proven upper bound, exact up to that tail, as the convolution of
:func:`~dpopt.privacy.discrete_gg_profile.loss_law` (tests compare the two), without the convolution's dictionary
of 2R + 1 loss values, its per-term exponentials, and its work and int64 limits.

References
----------
.. [1] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018, Thm 5.
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020, Thm 7.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rounding import ball_upper
from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import PRECISION, DiscreteGeneralizedGaussian, working_precision

flint = lazy_module("flint")

MAX_RADIUS = 1 << 18
"""The largest box radius R evaluated: R + 1 arb weights and as many suffix sums (about 0.5 s and 40 MB at the
limit; R is 10–11·s at p = 2, 5·s at p = 3, 4·s at p = 4). It is above the R ≤ 249,999 that the convolution's
:data:`~dpopt.privacy.discrete_gg_profile.MAX_PRODUCTS` allows one coordinate."""


def first_above(p: int, v: int, threshold: Fraction, lo: int, hi: int) -> int:
    """The smallest k in [lo, hi] with A(k) = |k + v|^p − |k|^p > threshold (exact integer comparisons; A is
    nondecreasing, module docstring), or hi + 1 when there is none."""
    num, den = threshold.numerator, threshold.denominator
    while lo <= hi:
        mid = (lo + hi) // 2
        if (abs(mid + v) ** p - abs(mid) ** p) * den > num:
            hi = mid - 1
        else:
            lo = mid + 1
    return lo


def _range_sum(suffix: tuple, radius: int, start: int) -> flint.arb:
    """Σ_{k=start}^{R} w(|k|) for −R ≤ start ≤ R + 1, from the suffix sums (w symmetric)."""
    if start >= 0:
        return suffix[start]
    return suffix[0] + suffix[1] - suffix[1 - start]


def _parts(p: int, scale: Fraction, v: int,
           epsilon: Fraction) -> tuple[DiscreteGeneralizedGaussian, int, int]:
    """The law, its radius R (at most :data:`MAX_RADIUS`) and the half-line's start k₀ clipped to [−R, R + 1]."""
    if int(v) != v or v <= 0:
        raise ValueError(f"the move must be a positive integer (got {v})")
    law = DiscreteGeneralizedGaussian(p, scale)
    radius = law.radius
    if radius > MAX_RADIUS:
        raise CalibrationError(f"the discrete GG's box at s = {float(scale):.6g} has {radius} weights a side "
                               f"(limit {MAX_RADIUS})")
    k0 = first_above(p, int(v), Fraction(epsilon) * law.scale ** p, -radius, radius)
    return law, radius, k0


def one_move_profile_delta(p: int, scale: Fraction, v: int, epsilon: Fraction) -> Fraction:
    """An upper bound on δ_v(ε) for the move of one coordinate by v (module docstring).

    Parameters
    ----------
    p : int
        The shape, ≥ 1.
    scale : Fraction
        s, in lattice units.
    v : int
        The move, > 0.
    epsilon : Fraction
        ε, exactly.

    Returns
    -------
    Fraction
        An exact dyadic number ≥ δ_v(ε).

    Raises
    ------
    CalibrationError
        The law's box radius exceeds :data:`MAX_RADIUS`.
    """
    epsilon = Fraction(epsilon)
    law, radius, k0 = _parts(p, scale, v, epsilon)
    with working_precision(PRECISION):
        suffix = law.suffix_sums()
        z = law.normaliser()
        growth = flint.arb(flint.fmpq(epsilon.numerator, epsilon.denominator)).exp()
        box = _range_sum(suffix, radius, k0) - growth * _range_sum(suffix, radius, min(k0 + v, radius + 1))
        return ball_upper(box / z + 2 * law.tail(radius) / z)


def one_move_pdp_level(p: int, scale: Fraction, v: int, epsilon: Fraction) -> Fraction:
    """An upper bound on δ(v) = P[|L| > ε] for the move of one coordinate by v (module docstring; same
    parameters and result as :func:`one_move_profile_delta`)."""
    law, radius, k0 = _parts(p, scale, v, epsilon)
    with working_precision(PRECISION):
        suffix = law.suffix_sums()
        z = law.normaliser()
        mass = _range_sum(suffix, radius, k0) + _range_sum(suffix, radius, max(-radius, min(k0 + v, radius + 1)))
        return ball_upper(mass / z + 2 * law.tail(radius) / z)


def float_one_move_levels(p: int, scale: Fraction, v: int, epsilon: Fraction) -> tuple[float, float]:
    """The profile δ_v(ε) and the pDP level δ(v) of :func:`one_move_profile_delta` and :func:`one_move_pdp_level`
    in double precision, for a calibration's search only (its end is certified by the arb evaluations): the
    weights exp(−(k/s)^p) over the box in numpy, the same half-lines k ≥ k₀ (found exactly)."""
    epsilon = Fraction(epsilon)
    law, radius, k0 = _parts(p, scale, v, epsilon)
    w = np.exp(-((np.arange(radius + 1) / float(law.scale)) ** p))
    suffix = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    z = 2 * suffix[1] + 1

    def range_sum(start: int) -> float:
        return float(suffix[start] if start >= 0 else suffix[0] + suffix[1] - suffix[1 - start])

    shifted = range_sum(min(k0 + v, radius + 1))
    profile = max(0.0, range_sum(k0) - math.exp(float(epsilon)) * shifted) / z
    return profile, (range_sum(k0) + range_sum(max(-radius, min(k0 + v, radius + 1)))) / z


__all__ = ["first_above", "float_one_move_levels", "one_move_pdp_level", "one_move_profile_delta"]
