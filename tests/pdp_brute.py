"""The pDP level of i.i.d. discrete Gaussian noise by brute force, for the pDP tests: δ(v) = P[|L| > ε] from the law
of S = Σ v_i η_i convolved coordinate by coordinate in mpmath at 40 digits (independent of dpopt's evaluations)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath


def mp_level(sigma2: Fraction, pattern: tuple[int, ...], epsilon: Fraction, box: int | None = None,
             digits: int = 40) -> mpmath.mpf:
    """δ(v) = P[S > εσ² − ‖v‖²/2] + P[S > εσ² + ‖v‖²/2] for N_ℤ(0, σ²) noise and a move of this pattern, the law of
    S on the box |η_i| ≤ ``box`` (by default 20σ + 1: the mass outside below 10⁻⁸⁶), each coordinate's weights
    normalised on the box, in ``digits`` digits."""
    with mpmath.workdps(digits):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        box = int(20 * math.sqrt(sigma2)) + 1 if box is None else box
        weights = [mpmath.exp(-mpmath.mpf(j * j) / (2 * s2)) for j in range(-box, box + 1)]
        total = mpmath.fsum(weights)
        law = {0: mpmath.mpf(1)}
        for v in pattern:
            step: dict[int, mpmath.mpf] = {}
            for s, p in law.items():
                for j, w in zip(range(-box, box + 1), weights):
                    step[s + v * j] = step.get(s + v * j, 0) + p * w / total
            law = step
        norm2 = sum(v * v for v in pattern)
        return mpmath.fsum(p for s, p in law.items()
                           for x in (epsilon * sigma2 - Fraction(norm2, 2), epsilon * sigma2 + Fraction(norm2, 2))
                           if s > x)
