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
|Σ_i A_i(K_i)| > ε s^p, decided exactly in rationals (ε the decimal as written). δ(v) is summed from the law of
the integer A = Σ_i A_i(K_i) over the box |K_i| ≤ R of the moving coordinates, the exact convolution of the
coordinates' laws in arb ball arithmetic divided by the lower end of the enclosure of the box's normaliser, and
the mass outside the box, at most m·2·tail(R)/Z (the proven tail of the law's module), is added: the result is
an upper bound on δ(v), exact up to that tail (below 2^{−79}) (:func:`~dpopt.privacy.discrete_gg_profile.loss_law`,
shared with the (ε, δ) profile).

Patterns of any number of moving coordinates are served within the convolution's work limit
:data:`~dpopt.privacy.discrete_gg_profile.MAX_PRODUCTS`.

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019 (pDP, Eq. 3).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (the privacy loss of a law on ℤ under integer shifts).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rounding import ball_upper
from dpopt.noise.discrete_generalized_gaussian import PRECISION, working_precision
from dpopt.privacy.discrete_gg_one_move import float_one_move_levels, one_move_pdp_level
from dpopt.privacy.discrete_gg_profile import float_loss_law, lattice_bisection, loss_law

flint = lazy_module("flint")


def pdp_level(p: int, scale: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """An upper bound on δ(v) = P[|L(K)| > ε] for a neighbouring move of the given pattern (module docstring): a
    move of one coordinate by :func:`~dpopt.privacy.discrete_gg_one_move.one_move_pdp_level` (two suffix sums of
    the weights), more coordinates by :func:`convolution_pdp_level`.

    Parameters
    ----------
    p : int
        The shape.
    scale : Fraction
        s, in lattice units.
    pattern : tuple of int
        The non-zero |v_i|.
    epsilon : Fraction
        ε, exactly.

    Returns
    -------
    Fraction
        An exact dyadic number ≥ δ(v).

    Raises
    ------
    CalibrationError
        The pattern's loss-law convolution exceeds :data:`~dpopt.privacy.discrete_gg_profile.MAX_PRODUCTS`.
    """
    if len(pattern) == 1:
        return one_move_pdp_level(p, scale, pattern[0], epsilon)
    return convolution_pdp_level(p, scale, pattern, epsilon)


def convolution_pdp_level(p: int, scale: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """:func:`pdp_level` summed over the loss law of :func:`~dpopt.privacy.discrete_gg_profile.loss_law` (any
    number of moving coordinates; the same limits)."""
    with working_precision(PRECISION):
        law = loss_law(p, scale, pattern)
        threshold = Fraction(epsilon) * law.scale_power  # |A| > ε s^p, in rationals
        cut = math.floor(threshold)  # A is an integer: |A| > ε s^p ⟺ |A| > ⌊ε s^p⌋ (integer comparisons)
        mass = sum((m for a, m in law.masses.items() if abs(a) > cut), flint.arb(0))
        return ball_upper(mass + law.outside)


def worst_pdp_level(p: int, scale: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction) -> Fraction:
    """max over the move patterns of :func:`pdp_level`."""
    return max(pdp_level(p, scale, pattern, epsilon) for pattern in patterns)


def pdp_scale(p: int, patterns: list[tuple[int, ...]], epsilon: Fraction, delta: Fraction, start: float,
              grid) -> Fraction:
    """A scale s on ``grid`` (a rounding of rationals up, e.g. dyadic_ceil) whose worst pDP level is ≤ δ
    (:func:`~dpopt.privacy.discrete_gg_profile.lattice_bisection` from ``start``, e.g. the continuous calibration:
    searched on the double-precision levels, certified by :func:`worst_pdp_level`).

    Raises
    ------
    CalibrationError
        No scale below 2^20·start passes, the certification fails, or a pattern's convolution is too large.
    """
    def estimate(s: Fraction) -> bool:
        threshold = float(Fraction(epsilon) * s**p)
        worst = 0.0
        for pattern in patterns:
            if len(pattern) == 1:
                worst = max(worst, float_one_move_levels(p, s, pattern[0], epsilon)[1])
                continue
            values, probs = float_loss_law(p, s, pattern)
            worst = max(worst, float(probs[np.abs(values) > threshold].sum()))
        return worst <= delta

    return lattice_bisection(estimate, lambda s: worst_pdp_level(p, s, patterns, epsilon) <= delta, start, grid,
                             "pDP")
