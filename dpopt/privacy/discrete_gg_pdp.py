r"""(ε, δ)-probabilistic DP of i.i.d. discrete generalized Gaussian noise on integer answers.

Noise K with i.i.d. coordinates P[K_i = k] = w(k)/Z, w(k) = exp(−(|k|/s)^p)
(:class:`~dpopt.noise.discrete_generalized_gaussian.DiscreteGeneralizedGaussian`), added to integer answers x.
Neighbours x, x' = x − v differ by an integer vector v. For an output y = x + K the privacy loss is

.. math:: L(K) = \log\frac{P[K]}{P[K + v]} = s^{-p}\sum_i \big(|K_i + v_i|^p - |K_i|^p\big),

with no normalizer term: Z does not depend on the shift, because the law lives on ℤ and v is an integer vector.
This is the derivation on ℤ; the continuous one (Liu 2019, Corollaries 7–8, Lemma 10) bounds the same
expression with a density, and does not transfer verbatim (the continuous pDP level is an integral; here it is a
sum over lattice points, and it moves in steps with s). pDP (:mod:`dpopt.privacy.pdp`) asks for

.. math:: \delta(v) = P\big[|L(K)| > \varepsilon\big] \le \delta \quad\text{for every neighbouring } v .

δ(v) depends on v only through its *move pattern*, the sorted non-zero |v_i| (the law is symmetric under
K_i ↦ −K_i and under permutations of coordinates; :func:`~dpopt.mechanisms.integer_noise.move_patterns`), and
only the moving coordinates enter L. With A_i(k) = |k + v_i|^p − |k|^p (integers), the event is
|Σ_i A_i(K_i)| > ε s^p, decided exactly in rationals (ε the decimal as written). δ(v) is summed over the box
|K_i| ≤ R of the moving coordinates in arb ball arithmetic, divided by the lower end of the enclosure of Z^m, and
the mass outside the box, at most m·2·tail(R)/Z (the proven tail of the law's module), is added: the result is
an upper bound on δ(v), exact up to that tail (below 2^{−79}).

Patterns of up to :data:`MAX_MOVING` coordinates are served (the box has (2R + 1)^m points).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019 (pDP, Eq. 3).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (the privacy loss of a law on ℤ under integer shifts).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import PRECISION, DiscreteGeneralizedGaussian, working_precision

flint = lazy_module("flint")

MAX_MOVING = 2
"""The largest number of moving coordinates whose pDP level is summed over the box."""

SEARCH_STEPS = 24
"""Bisection steps of :func:`pdp_scale` (the scale found is within 2^{−24} relative of the smallest on the
bracket at which the bisection's comparisons switch)."""


def pdp_level(p: int, scale: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """An upper bound on δ(v) = P[|L(K)| > ε] for a neighbouring move of the given pattern (module docstring).

    Parameters
    ----------
    p : int
        The shape.
    scale : Fraction
        s, in lattice units.
    pattern : tuple of int
        The non-zero |v_i| (1 to :data:`MAX_MOVING` of them).
    epsilon : Fraction
        ε, exactly.

    Returns
    -------
    Fraction
        An exact dyadic number ≥ δ(v).
    """
    if not 1 <= len(pattern) <= MAX_MOVING:
        raise CalibrationError(f"the pDP level is summed for moves of 1 to {MAX_MOVING} coordinates "
                               f"(a neighbour moves {len(pattern)})")
    law = DiscreteGeneralizedGaussian(p, scale)
    radius = law.radius
    threshold = Fraction(epsilon) * law.scale ** p  # |Σ A_i| > ε s^p, in rationals
    ks = np.arange(-radius, radius + 1, dtype=object)
    losses = [np.array([abs(int(k) + int(v)) ** p - abs(int(k)) ** p for k in ks], dtype=object) for v in pattern]
    with working_precision(PRECISION):
        weights = [law.weight(int(k)) for k in range(radius + 1)]
        row = [weights[abs(int(k))] for k in ks]
        z = law.sums(powers=(0,))[0]
        inner = sum(row, flint.arb(0))  # Σ_{|k|≤R} w(k) ≤ Z
        if len(pattern) == 1:
            event = [i for i, a in enumerate(losses[0]) if abs(a) > threshold]
            mass = sum((row[i] for i in event), flint.arb(0))
        else:
            total = losses[0][:, None] + losses[1][None, :]
            mass = flint.arb(0)
            for i, j in zip(*np.nonzero(np.vectorize(lambda a: abs(a) > threshold, otypes=[bool])(total))):
                mass += row[i] * row[j]
        m = len(pattern)
        level = mass / inner ** m + m * 2 * law.tail(radius) / z.lower()
        man, exp = level.upper().man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man << exp) if exp >= 0 else Fraction(man, 1 << -exp)


def worst_pdp_level(p: int, scale: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction) -> Fraction:
    """max over the move patterns of :func:`pdp_level`."""
    return max(pdp_level(p, scale, pattern, epsilon) for pattern in patterns)


def pdp_scale(p: int, patterns: list[tuple[int, ...]], epsilon: Fraction, delta: Fraction, start: float,
              grid) -> Fraction:
    """A scale s on ``grid`` (a rounding of rationals, e.g. dyadic_ceil) whose worst pDP level is ≤ δ: the end of a
    bisection between a scale that fails and one that passes, bracketed from ``start`` (e.g. the continuous
    calibration) by factors of 1.25.

    Raises
    ------
    CalibrationError
        No scale below 2^20·start passes (a pattern with too many moving coordinates raises at once).
    """
    def passes(s: Fraction) -> bool:
        return worst_pdp_level(p, s, patterns, epsilon) <= delta

    hi = grid(Fraction(start))
    while not passes(hi):
        hi = grid(hi * Fraction(5, 4))
        if hi > (1 << 20) * Fraction(start):
            raise CalibrationError(f"no discrete GG scale up to 2^20 times {start:.6g} meets the pDP target")
    lo = hi * Fraction(4, 5)
    while passes(lo):
        hi, lo = lo, lo * Fraction(4, 5)
    for _ in range(SEARCH_STEPS):
        mid = grid((lo + hi) / 2)
        if mid >= hi:
            break
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi
