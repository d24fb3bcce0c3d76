r"""Pure ε-DP of the truncated discrete generalized Gaussian on a lattice box (a bounded sum or mean, exactly).

The answer is an integer N in a public box {0, …, M} (units of the lattice g, shifted so the box starts at 0);
neighbours move it by at most Δ_u (:mod:`dpopt.mechanisms.real_lattice`: the rounding charged to Δ_u). The output
Y has the discrete GG law restricted to the box (Liu 2019, Def. 5, on ℤ):

.. math:: P[Y = y \mid N] = \frac{w(y - N)}{Z(N)}, \quad w(k) = e^{-(|k|/s)^p},
          \quad Z(N) = \sum_{y=0}^{M} w(y - N) = C(N) + C(M - N) - 1, \quad C(j) = \sum_{i=0}^{j} w(i).

**The loss on the lattice.** For neighbours N, N' and an output y,
ℓ = s^{−p}(|y − N'|^p − |y − N|^p) + log Z(N') − log Z(N). For N' > N, y ↦ |y − N'|^p − |y − N|^p is
non-increasing (the derivative of |x|^p is non-decreasing, p ≥ 1), so the largest loss is at y = 0 or y = M, where
it is F(N') − F(N) with F(x) = (x/s)^p + log Z(x) (y = 0; y = M is the mirror image x ↦ M − x, under which Z is
invariant). The mechanism is ε-DP exactly when the oscillation

.. math:: \Lambda = \max_{0 \le x, x' \le M,\ |x - x'| \le \Delta_u} |F(x) - F(x')| \le \varepsilon .

Unlike the continuous bound (:mod:`dpopt.privacy.truncated_gg`, a grid and a Lipschitz term), this is a finite
maximum over lattice points: F is enclosed at every x in 128-bit arb arithmetic (the C(j) are exact finite sums),
read as doubles, and the window maxima are taken exactly over those doubles; the bound adds twice the largest
enclosure radius and :data:`FLOAT_SLACK` for the reading (|F| ≤ (M/s)^p + log(M + 1), far below 2^40, so a
double's rounding is below 10⁻⁴).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019, Definition 5.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.roots import smallest_on_grid
from dpopt.errors import CalibrationError
from dpopt.noise.discrete_generalized_gaussian import PRECISION, DiscreteGeneralizedGaussian, working_precision

flint = lazy_module("flint")

FLOAT_SLACK = 1e-9
"""Added to the oscillation read from doubles (the double reading errs by below 10⁻⁴·2^-40 ≪ 10⁻⁹)."""

MAX_POINTS = 1 << 16
"""The largest box M + 1 served (F is enclosed at every point)."""

SEARCH_STEPS = 24
"""Bisection steps of :func:`truncated_scale`."""


def box_log_normalizers(p: int, scale: Fraction, points: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(x, F(x) read as doubles, the largest enclosure radius) for x = 0..M, M = points − 1 (module docstring)."""
    if not 2 <= points <= MAX_POINTS:
        raise CalibrationError(f"the lattice box has {points} points (2 to {MAX_POINTS} served)")
    law = DiscreteGeneralizedGaussian(p, scale)
    m = points - 1
    with working_precision(PRECISION):
        cumulative, total = [], flint.arb(0)
        for i in range(points):
            total += law.weight(i)
            cumulative.append(total)
        values, radius = np.empty(points), 0.0
        for x in range(points):
            f = flint.arb(law.exponent_fmpq(x)) + (cumulative[x] + cumulative[m - x] - 1).log()
            values[x] = float(f.mid())
            radius = max(radius, float(f.rad()))
    return np.arange(points), values, radius


def truncated_loss_bound(p: int, scale: Fraction, points: int, shift: int) -> float:
    """An upper bound on the worst-case loss Λ of the truncated discrete GG on a box of ``points`` lattice points
    for moves of at most ``shift`` units (module docstring)."""
    _, f, radius = box_log_normalizers(p, scale, points)
    width = min(shift, points - 1) + 1
    windows = np.lib.stride_tricks.sliding_window_view(f, width)
    return float(np.max(windows.max(axis=1) - windows.min(axis=1))) + 2 * radius + FLOAT_SLACK


def truncated_scale(p: int, points: int, shift: int, epsilon: float, start: Fraction, grid) -> Fraction:
    """A scale s on ``grid`` (e.g. dyadic_ceil) with :func:`truncated_loss_bound` ≤ ε: the end of a bisection between
    a failing and a passing scale, bracketed from ``start`` by factors of 1.25.

    Raises
    ------
    CalibrationError
        No scale below 2^20·start passes.
    """
    def passes(s: Fraction) -> bool:
        return truncated_loss_bound(p, s, points, shift) <= epsilon

    found = smallest_on_grid(passes, start, grid, steps=SEARCH_STEPS)
    if found is None:
        raise CalibrationError(f"no truncated discrete GG scale up to 2^20 times {float(start):.6g} is ε-DP")
    return found
