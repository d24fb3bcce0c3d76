r"""Proven coverage of the lattice cross-polytope's sublevel sets, by convolution of its independent coordinates.

With K = {c : h(c) = Σ_k |c_k|/M_k ≤ 1} (:mod:`dpopt.mechanisms.k_norm_cross`) the lattice K-norm law is a
product, P[c] ∝ ∏_k q_k^{|c_k|}, q_k = e^{−ε′/M_k}: independent discrete Laplace coordinates. With D = lcm M_k and
integer weights w_k = D/M_k, the level G(c) = D·h(c) = Σ_k w_k|c_k| is a sum of independent non-negative integer
variables, and |c| for a discrete Laplace of parameter q has

.. math:: P(|c| = 0) = \frac{1 - q}{1 + q}, \qquad P(|c| = j) = \frac{2(1 - q)q^j}{1 + q} \quad (j \ge 1)

(Canonne, Kamath & Steinke 2020, Definition 28, summed over ±j). So the coverage P(G ≤ k) of the region
{θ : ‖y − θ‖_K ≤ k/D} is the distribution function of that sum, computed up to a level cap L:

* the coordinates are grouped by equal w_k (one group for a histogram: every M_k equal); a group's law of
  w·Σ|c_k| is the n-th convolution power of one coordinate's law (:func:`~dpopt.stats.convolution_power.
  convolution_power`), the groups' laws convolved (:func:`~dpopt.stats.convolution_power.convolve_laws`), all
  truncated at L: no mass beyond L can enter a level ≤ L, so the truncated laws are complete below L and no tail
  bound enters;
* each law's values q^j(1 − q)/(1 + q) are evaluated in arb ball arithmetic (python-flint) and rounded down to
  floats, so they are lower bounds of the true values; the convolutions of non-negative laws keep lower bounds
  up to their rounding: a direct convolution's relative rounding is below γ_{L+1} = (L + 1)u/(1 − (L + 1)u)
  per stage (sums of at most L + 1 non-negative products, Higham 2002, §3.1), an FFT stage's ℓ¹ rounding is
  bounded by :mod:`dpopt.stats.convolution_power`, and the cumulative sum adds at most γ_{L+1} more. The slack
  subtracted is the FFT bound plus 2·(stages + 1)·γ_{L+1} (the factor 2 covering the second-order terms).

The level k is the smallest whose lower bound reaches 1 − α; L starts at the mean of G plus 6 standard deviations
and grows by a quarter until the bound at L reaches 1 − α, within :data:`MAX_CROSS_WORK` (support × groups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.k_norm_lattice import LatticeGauge
from dpopt.stats.convolution_power import UNIT_ROUNDOFF, convolution_power, convolve_laws

MAX_CROSS_WORK = 2**22
"""Most (L + 1) × groups of the coverage's convolutions. Measured (CPU, load ≈ 2 on 2 cores): 4 coordinates at
ε′ = 3/2¹⁸, L = 1.4·10⁶, 3.0 s (mostly the arb loop of the law's values), so about 9 s at the limit; a histogram at
ε′ = 1 needs L of a few thousand (0.01–0.03 s up to 1,025 cells)."""


ARB_PRECISION = 96
"""Bits of the arb balls of the laws' values (q^j by repeated products: the radius grows about 2⁻⁹⁶ relative a
step, so below 2⁻⁷⁴ after 2²² steps, far below a float's last bit): the value rounded down is within two ulps of
the true one."""


@dataclass(frozen=True)
class CrossCoverage:
    """The smallest level k (in units 1/D) whose proven coverage lower bound reaches 1 − α.

    Attributes
    ----------
    level : int
        k (r = k/D).
    coverage : float
        The proven lower bound on P(G ≤ k).
    level_cap : int
        L, the last level of the truncated laws.
    groups : int
        Distinct weights w_k = D/M_k.
    error : float
        The rounding bound subtracted (FFT bound and the direct stages' slack).
    """

    level: int
    coverage: float
    level_cap: int
    groups: int
    error: float


def magnitude_law(epsilon: Fraction, bound: int, weight: int, top: int) -> np.ndarray:
    """P(w|c| = i) for i = 0..top, c discrete Laplace with q = e^{−ε′/M} (module docstring), each value a float
    rounded down from its arb ball (so at most the true value)."""
    from flint import arb, ctx, fmpq  # imported where used

    rate = fmpq(epsilon.numerator, epsilon.denominator * bound)
    law = np.zeros(top + 1)
    with ctx.workprec(ARB_PRECISION):
        q = arb(-rate).exp()
        term = (1 - q) / (1 + q)
        for j in range(top // weight + 1):
            value = float(term.lower())
            law[j * weight] = np.nextafter(value, 0.0) if value > 0 else 0.0
            if value < 1e-300:  # later terms are smaller still: their floats would be 0 or subnormal
                break
            term *= q * 2 if j == 0 else q  # the ball's radius grows by about 2⁻⁹⁶ relative a step
    return law


def _start_cap(epsilon: Fraction, bounds: tuple[int, ...], units: np.ndarray) -> int:
    """The mean of G plus 6 standard deviations (a float guide, not part of the proof): E|c| = 2q/(1 − q²),
    E c² = 2q/(1 − q)²."""
    mean = var = 0.0
    for m, w in zip(bounds, units.tolist()):
        q = math.exp(-float(epsilon) / m)
        first, second = 2 * q / (1 - q * q), 2 * q / (1 - q) ** 2
        mean, var = mean + w * first, var + w * w * (second - first * first)
    return max(1, math.ceil(mean + 6.0 * math.sqrt(var)))


def _stages(counts: dict[int, int]) -> int:
    """Convolutions performed: per group ⌊log₂ n⌋ squarings and popcount(n) − 1 products, and groups − 1."""
    return sum(n.bit_length() - 1 + bin(n).count("1") - 1 for n in counts.values()) + len(counts) - 1


def cross_coverage_level(gauge: LatticeGauge, epsilon: Fraction, alpha: float) -> CrossCoverage:
    """The smallest k with proven P(G ≤ k) ≥ 1 − α for the cross-polytope gauge (no facet; module docstring).

    Raises
    ------
    ValueError
        If the gauge has facets, or the support needed exceeds :data:`MAX_CROSS_WORK`.
    """
    if len(gauge.numerators):
        raise ValueError("the product-law coverage applies to the cross-polytope gauge only (no facet)")
    units = gauge.units
    counts: dict[int, int] = {}
    bound_of: dict[int, int] = {}
    for m, w in zip(gauge.l1_bounds, units.tolist()):
        counts[w] = counts.get(w, 0) + 1
        bound_of[w] = m
    top = _start_cap(epsilon, gauge.l1_bounds, units)
    while True:
        if (top + 1) * len(counts) > MAX_CROSS_WORK:
            raise ValueError(f"the cross-polytope's proven coverage would convolve {top + 1:,} levels × "
                             f"{len(counts)} groups (at most {MAX_CROSS_WORK:,})")
        law, fft_error = None, 0.0
        for w in sorted(counts):
            power, error = convolution_power(magnitude_law(epsilon, bound_of[w], w, top), counts[w], top)
            law, fft_error = (power, error) if law is None else convolve_laws(law, fft_error, power, error, top)
        gamma = (top + 1) * UNIT_ROUNDOFF / (1 - (top + 1) * UNIT_ROUNDOFF)
        slack = fft_error + 2.0 * (_stages(counts) + 1) * gamma
        bounds = np.cumsum(law) - slack
        if bounds.size == top + 1 and bounds[-1] >= 1.0 - alpha:
            break
        top = math.ceil(top * Fraction(5, 4))
    k = int(np.searchsorted(bounds, 1.0 - alpha, side="left"))
    return CrossCoverage(k, float(bounds[k]), top, len(counts), slack)
