r"""(ε, δ)-DP of i.i.d. discrete generalized Gaussian noise on integer answers: the exact privacy profile.

Noise K with i.i.d. coordinates P[K_i = k] = w(k)/Z, w(k) = exp(−(|k|/s)^p)
(:class:`~dpopt.noise.discrete_generalized_gaussian.DiscreteGeneralizedGaussian`), added to integer answers; the
neighbours' answers differ by an integer vector v. As in :mod:`dpopt.privacy.discrete_gg_pdp`, the privacy loss of
the output x + K is L(K) = log P[K]/P[K + v] = A/s^p with the **integer** A = Σ_i A_i(K_i),
A_i(k) = |k + v_i|^p − |k|^p (no normalizer term: integer shifts of a law on ℤ). The pair is (ε, δ)-DP iff the
hockey-stick divergence (the privacy profile, Balle & Wang 2018, Thm 5; Canonne, Kamath & Steinke 2020, §4)

.. math:: \delta_v(\varepsilon) = \sum_k P[K = k]\,\big(1 - e^{\varepsilon - L(k)}\big)_+
          = \sum_{a > \varepsilon s^p} P[A = a]\,\big(1 - e^{\varepsilon - a/s^p}\big)

is at most δ for v and −v; the law is symmetric (k ↦ −k maps the pair for −v onto the pair for v), so
δ_{−v} = δ_v, and δ_v depends on v only through its move pattern, the sorted non-zero |v_i|
(:func:`~dpopt.mechanisms.integer_noise.move_patterns`).

**Evaluation.** The law of A is the exact convolution of the per-coordinate laws of A_i(K_i) (integer keys, arb
masses), each summed over the box |k| ≤ R of the law (its tail beyond R is below 2^{−80}); the masses are divided
by the lower end of (Σ_{|k|≤R} w(k))^m ≤ Z^m, and each term (1 − e^{ε − a/s^p}) is an arb exponential of an exact
rational. Every term of the profile is at most P[K = k], so the mass outside the box, at most m·2·tail(R)/Z, is
added: the result is an upper bound on δ_v(ε), exact up to that tail. The convolution's work is the number of
products (distinct values of A so far) × (distinct values of A_i), at most (2R + 1)^m over the pattern and far fewer
when the values collide (at p = 2, A_i(k) = 2kv_i + v_i² is linear in k: the sums take O(mR) values); patterns
needing more than :data:`MAX_PRODUCTS` products in one step are refused.

At p = 2 the law is the discrete Gaussian N_ℤ(0, s²/2) and the profile is CKS 2020's Theorem 7 (tests compare the
two); at p = 1 the discrete Laplace (:mod:`dpopt.privacy.discrete_laplace` serves it).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (the privacy loss of a law on ℤ under integer shifts; Thm 7, the profile of the discrete Gaussian).
.. [2] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018, Thm 5
   (δ(ε) = E[(1 − e^{ε − L})_+]).
.. [3] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019 (the law).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rounding import ball_upper
from dpopt.core.roots import smallest_on_grid
from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import PRECISION, DiscreteGeneralizedGaussian, working_precision
from dpopt.privacy.discrete_gg_one_move import float_one_move_levels, one_move_profile_delta

flint = lazy_module("flint")

MAX_PRODUCTS = 500_000
"""Largest number of products of one step of a move pattern's loss-law convolution (about half a second)."""

SEARCH_STEPS = 24
"""Bisection steps of :func:`lattice_bisection`."""

CERTIFY_STEPS = 16
"""Steps of 2^{−20} relative by which :func:`lattice_bisection` raises the search's end until it is certified."""


@dataclass
class LossLaw:
    """The law of the integer loss numerator A of one move pattern (module docstring), inside the box.

    Attributes
    ----------
    masses : dict
        a ↦ an arb ball ≥ P[A = a, K in the box] (the box's masses over the lower end of its normaliser).
    outside : flint.arb
        An upper bound on P[K outside the box].
    scale_power : Fraction
        s^p: the loss of A = a is a/s^p.
    """

    masses: dict
    outside: object
    scale_power: Fraction


def loss_law(p: int, scale: Fraction, pattern: tuple[int, ...]) -> LossLaw:
    """The loss law of i.i.d. discrete GG(s, p) noise under a move of the given pattern (module docstring), at
    python-flint's current precision (call it inside ``working_precision(PRECISION)``).

    Raises
    ------
    CalibrationError
        A step of the convolution needs more than :data:`MAX_PRODUCTS` products.
    """
    law = DiscreteGeneralizedGaussian(p, scale)
    radius, m = law.radius, len(pattern)
    weights = [law.weight(k) for k in range(radius + 1)]
    inner = 2 * sum(weights[1:], flint.arb(0)) + weights[0]
    current = {0: flint.arb(1)}
    for v in pattern:
        coordinate: dict = {}
        for k in range(-radius, radius + 1):
            a = abs(k + v) ** p - abs(k) ** p
            coordinate[a] = coordinate.get(a, flint.arb(0)) + weights[abs(k)]
        if len(current) * len(coordinate) > MAX_PRODUCTS:
            raise CalibrationError(f"the loss law of a move of {m} coordinates needs {len(current)} × "
                                   f"{len(coordinate)} products in one convolution step (limit {MAX_PRODUCTS})")
        merged: dict = {}
        for a1, m1 in current.items():
            for a2, m2 in coordinate.items():
                merged[a1 + a2] = merged.get(a1 + a2, flint.arb(0)) + m1 * m2
        current = merged
    norm = flint.arb(inner.lower()) ** m
    z = law.normaliser()
    outside = (m * 2 * law.tail(radius) / z.lower()).upper()
    return LossLaw({a: mass / norm for a, mass in current.items()}, outside, law.scale ** p)


def float_loss_law(p: int, scale: Fraction, pattern: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The loss law of :func:`loss_law` in double precision, for the calibration's search only (its end is
    certified by the arb evaluation): the distinct values of A (int64) and their probabilities on the box.

    Raises
    ------
    CalibrationError
        A step of the convolution needs more than :data:`MAX_PRODUCTS` products, or a value of A is beyond 2^62.
    """
    law = DiscreteGeneralizedGaussian(p, scale)
    if len(pattern) * (law.radius + max(pattern)) ** p >= 2**62:
        raise CalibrationError(f"the loss values of the discrete GG at s = {float(scale):.6g} exceed int64")
    k = np.arange(-law.radius, law.radius + 1, dtype=np.int64)
    w = np.exp(-((np.abs(k) / float(law.scale)) ** p))
    w /= w.sum()
    values, probs = np.zeros(1, dtype=np.int64), np.ones(1)
    for v in pattern:
        a, which = np.unique(np.abs(k + v) ** p - np.abs(k) ** p, return_inverse=True)
        if values.size * a.size > MAX_PRODUCTS:
            raise CalibrationError(f"the loss law of a move of {len(pattern)} coordinates needs {values.size} × "
                                   f"{a.size} products in one convolution step (limit {MAX_PRODUCTS})")
        weights = np.bincount(which.ravel(), weights=w)
        values, probs = _merged(np.add.outer(values, a).ravel(), np.outer(probs, weights).ravel())
    return values, probs


DENSE_SPAN = 1 << 22
"""Value spans :func:`_merged` accumulates densely whatever the number of terms."""


def _merged(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` (int64, increasing) and the sums of their ``probs``: one offset bincount when the
    values span fewer than four integers per term or 2^22 in all (two arrays of 32 MB at most), else a sort
    (:func:`numpy.unique`)."""
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span < max(4 * values.size, DENSE_SPAN):
        shifted = values - low
        keep = np.flatnonzero(np.bincount(shifted, minlength=span))  # the values that occur
        return keep.astype(np.int64) + low, np.bincount(shifted, weights=probs, minlength=span)[keep]
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, np.bincount(inverse.ravel(), weights=probs)


def profile_delta(p: int, scale: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """An upper bound on δ_v(ε) for a move of the given pattern (module docstring): a move of one coordinate by
    :func:`~dpopt.privacy.discrete_gg_one_move.one_move_profile_delta` (two suffix sums of the weights, no
    convolution), more coordinates by :func:`convolution_profile_delta`.

    Parameters
    ----------
    p : int
        The shape.
    scale : Fraction
        s, in lattice units.
    pattern : tuple of int
        The non-zero |v_i|.
    epsilon : Fraction
        ε, exactly (the decimal as written).

    Returns
    -------
    Fraction
        An exact dyadic number ≥ δ_v(ε).
    """
    if len(pattern) == 1:
        return one_move_profile_delta(p, scale, pattern[0], epsilon)
    return convolution_profile_delta(p, scale, pattern, epsilon)


def convolution_profile_delta(p: int, scale: Fraction, pattern: tuple[int, ...], epsilon: Fraction) -> Fraction:
    """:func:`profile_delta` summed over the loss law of :func:`loss_law` (any number of moving coordinates).

    Raises
    ------
    CalibrationError
        A step of the convolution needs more than :data:`MAX_PRODUCTS` products.
    """
    epsilon = Fraction(epsilon)
    with working_precision(PRECISION):
        law = loss_law(p, scale, pattern)
        threshold = epsilon * law.scale_power
        total = flint.arb(0)
        for a, mass in law.masses.items():
            if a > threshold:
                x = epsilon - Fraction(a) / law.scale_power
                total += mass * (1 - flint.arb(flint.fmpq(x.numerator, x.denominator)).exp())
        return ball_upper(total + law.outside)


def worst_profile_delta(p: int, scale: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction) -> Fraction:
    """max over the move patterns of :func:`profile_delta`."""
    return max(profile_delta(p, scale, pattern, epsilon) for pattern in patterns)


def float_profile_delta(p: int, scale: Fraction, patterns: list[tuple[int, ...]], epsilon: Fraction) -> float:
    """max over the move patterns of δ_v(ε) in double precision (the search's estimate): a move of one coordinate
    by :func:`~dpopt.privacy.discrete_gg_one_move.float_one_move_levels`, more by :func:`float_loss_law`."""
    worst = 0.0
    for pattern in patterns:
        if len(pattern) == 1:
            worst = max(worst, float_one_move_levels(p, scale, pattern[0], epsilon)[0])
            continue
        values, probs = float_loss_law(p, scale, pattern)
        loss = values / float(Fraction(scale) ** p)
        excess = -np.expm1(np.minimum(float(epsilon) - loss, 0.0))  # (1 − e^{ε−L})₊, no overflow at large L
        worst = max(worst, float(np.sum(probs * excess)))
    return worst


def profile_scale(p: int, patterns: list[tuple[int, ...]], epsilon: Fraction, delta: Fraction, start: float,
                  grid) -> Fraction:
    """A scale s on ``grid`` (a rounding of rationals up, e.g. dyadic_ceil) whose worst profile is ≤ δ at ε
    (:func:`lattice_bisection` from ``start``, e.g. the continuous calibration: searched on
    :func:`float_profile_delta`, certified by :func:`worst_profile_delta`).

    Raises
    ------
    CalibrationError
        No scale below 2^20·start passes, the certification fails, or a pattern's convolution is too large.
    """
    return lattice_bisection(lambda s: float_profile_delta(p, s, patterns, epsilon) <= delta,
                             lambda s: worst_profile_delta(p, s, patterns, epsilon) <= delta, start, grid, "(ε, δ)")


def lattice_bisection(estimate, certified, start: float, grid, target: str) -> Fraction:
    """The end of a bisection on ``grid`` between a scale that fails and one that passes by ``estimate`` (a
    double-precision level), bracketed from ``start`` by factors of 1.25, then raised by steps of 2^{−20} relative
    until ``certified`` (the arb level) accepts it. The level falls with s in trend but in steps (the loss takes
    lattice values), so the result is within 2^{−SEARCH_STEPS} relative of a switch of the comparisons.

    Raises
    ------
    CalibrationError
        No scale below 2^20·start passes, or the certified level does not accept the search's end within
        :data:`CERTIFY_STEPS` steps (``target`` names the target in the message).
    """
    hi = smallest_on_grid(estimate, Fraction(start), grid, steps=SEARCH_STEPS)
    if hi is None:
        raise CalibrationError(f"no discrete GG scale up to 2^20 times {start:.6g} meets the {target} target")
    for _ in range(CERTIFY_STEPS):
        if certified(hi):
            return hi
        hi = grid(hi * (1 + Fraction(1, 2**20)))
    raise CalibrationError(f"the certified {target} level does not accept the discrete GG scale {float(hi):.6g}")
