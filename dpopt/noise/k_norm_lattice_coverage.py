r"""Proven coverage of the gauge's sublevel sets under the discrete K-norm law (the lattice ``ci_volume``).

For the law p(c) ∝ e^{−ε g(c)} on ℤ^s (:mod:`dpopt.noise.k_norm_lattice`, g = G/D with G integral), the
confidence region {θ : ‖y − θ‖_K ≤ r} covers the true value with probability

.. math:: P(G(c) \le k) = \frac{A_k}{Z}, \qquad A_k = \sum_{j \le k} N(j)\, e^{-\varepsilon j/D},
          \qquad Z = A_L + T_L,

r = k/D, N(j) the number of points of ℤ^s at level G = j (counted exactly, in integers, by enumeration up to a
level cap L) and T_L = Σ_{G(c) > L} e^{−εg(c)} the tail beyond the cap, bounded above: with h_k = max_{x∈K}|x_k|
(the extents of K, so g(c) ≥ max_k |c_k|/h_k ≥ Σ_k |c_k|/(s h_k)) and G(c) > L,

.. math:: e^{-\varepsilon g(c)} \le e^{-\varepsilon L/(2D)}\, e^{-\varepsilon g(c)/2}
          \le e^{-\varepsilon L/(2D)} \prod_k e^{-a_k |c_k|}, \quad a_k = \frac{\varepsilon}{2 s h_k},
          \qquad T_L \le e^{-\varepsilon L/(2D)} \prod_k \frac{1 + e^{-a_k}}{1 - e^{-a_k}}.

So A_k/(A_L + T̄_L) is a proven lower bound on the coverage (every exponential in arb ball arithmetic, the lower
end of the ratio's ball taken), and the smallest level k whose bound reaches 1 − α gives a region of volume
(k/D)^s·vol K with proven coverage ≥ 1 − α. The points with G ≤ L lie in the box |c_k| ≤ L·h_k/D; the last
coordinate's range is solved per prefix from the facet inequalities, so only the points of the sublevel set are
formed (about vol K·(L/D)^s of them).

The extents h_k are those of Hull(S) read from the listed vectors; that g ≥ |c_k|/h_k and that the box holds the
sublevel set rest, like "g is the gauge of Hull(S)", on the facet list being complete (the floating-point hull's
closed-boundary check, ``k_norm.cone_decomposition``); the privacy guarantee does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.k_norm_lattice import LatticeGauge

TAIL_FRACTION = 1e-6
"""The level cap L is the smallest whose tail bound is at most this fraction of s!·vol K/ε^s (≈ Z)."""

MAX_POINTS = 10_000_000
"""Most lattice points enumerated (:func:`enumeration_size`; about 1 s of CPU per 4·10⁶ points at rank 3)."""

CHUNK = 2**18
"""Points formed at once by :func:`level_counts` (with their F facet values: 2^18 × F int64)."""


@dataclass(frozen=True)
class CoverageLevel:
    """The smallest level k = G·(1/D)-units whose proven coverage lower bound reaches 1 − α.

    Attributes
    ----------
    level : int
        k (r = k/D).
    coverage : float
        The proven lower bound on P(G ≤ k) (rounded down to a float).
    level_cap : int
        L, the last level counted exactly.
    points : int
        Lattice points enumerated (G ≤ L).
    tail_bound : float
        The upper bound on T_L (rounded up).
    """

    level: int
    coverage: float
    level_cap: int
    points: int
    tail_bound: float


def tail_bound(gauge: LatticeGauge, epsilon: Fraction, extents: tuple[int, ...], cap: int):
    """T̄_L (module docstring) as an arb ball."""
    from flint import arb, fmpq  # imported where used

    eps = fmpq(epsilon.numerator, epsilon.denominator)
    s = len(extents)
    out = arb(-eps * fmpq(cap, 2 * gauge.denominator)).exp()
    for h in extents:
        e = arb(-eps / fmpq(2 * s * h)).exp()
        out *= (1 + e) / (1 - e)
    return out


def level_cap(gauge: LatticeGauge, epsilon: Fraction, extents: tuple[int, ...], volume: float) -> int:
    """The smallest L = ⌈R·D⌉, R = 1, 2, …, whose tail bound is at most :data:`TAIL_FRACTION` of
    s!·vol K/ε^s (a float guide to Z, not part of the proof)."""
    s = len(extents)
    scale = math.factorial(s) * volume / float(epsilon) ** s
    radius = 1
    while float(tail_bound(gauge, epsilon, extents, radius * gauge.denominator).upper()) > TAIL_FRACTION * scale:
        radius += 1
    return radius * gauge.denominator


def enumeration_size(extents: tuple[int, ...], volume: float, radius: float) -> float:
    """About how many points :func:`level_counts` forms at the level cap R·D: vol K·R^s, at least the
    prefix box ∏_{k<s}(2R h_k + 1)."""
    prefix = math.prod(2 * radius * h + 1 for h in extents[:-1])
    return max(volume * radius ** len(extents), prefix)


def level_counts(gauge: LatticeGauge, extents: tuple[int, ...], cap: int) -> np.ndarray:
    """N(j) for j = 0..L: the number of c ∈ ℤ^s with G(c) = j, exactly (int64, length L + 1).

    The first s − 1 coordinates run over the box |c_k| ≤ ⌊L h_k/D⌋; for each prefix the last coordinate x runs
    over the integers with N_i·(c', x) ≤ L for every facet, D·h(c', x) ≤ L and |x| ≤ ⌊L h_s/D⌋,
    bounds solved in integer floor division."""
    s, d = gauge.rank, gauge.denominator
    bounds = [cap * h // d for h in extents]
    grids = np.meshgrid(*[np.arange(-b, b + 1, dtype=np.int64) for b in bounds[:-1]], indexing="ij")
    prefix = np.stack([g.ravel() for g in grids], axis=1) if s > 1 else np.zeros((1, 0), dtype=np.int64)
    units = gauge.units
    room = (cap - np.abs(prefix) @ units[:-1]) // units[-1]
    low, high = np.maximum(-room, -bounds[-1]), np.minimum(room, bounds[-1])
    partial = prefix @ gauge.numerators[:, :-1].T
    for i, last in enumerate(gauge.numerators[:, -1].tolist()):
        slack = cap - partial[:, i]
        if last > 0:
            high = np.minimum(high, slack // last)
        elif last < 0:
            low = np.maximum(low, -(slack // -last))
        else:
            high = np.where(slack < 0, low - 1, high)
    length = np.maximum(high - low + 1, 0)
    keep = length > 0
    prefix, low, length = prefix[keep], low[keep], length[keep]
    counts = np.zeros(cap + 1, dtype=np.int64)
    ends = np.cumsum(length)
    first = 0
    while first < len(prefix):  # prefixes in blocks of about CHUNK points
        last_row = max(int(np.searchsorted(ends, ends[first] - length[first] + CHUNK, side="right")), first + 1)
        block = slice(first, last_row)
        size = length[block]
        rows = np.repeat(np.arange(first, last_row), size)
        offsets = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
        levels = gauge.scaled(np.column_stack([prefix[rows], low[rows] + offsets]))
        counts += np.bincount(levels, minlength=cap + 1)[: cap + 1]
        first = last_row
    return counts


def coverage_level(gauge: LatticeGauge, epsilon: Fraction, extents: tuple[int, ...], volume: float,
                   alpha: float) -> CoverageLevel:
    """The smallest k with proven P(G ≤ k) ≥ 1 − α (module docstring).

    Raises
    ------
    ValueError
        If the enumeration would exceed :data:`MAX_POINTS`, or no level below the cap reaches 1 − α.
    """
    from flint import arb, fmpq  # imported where used

    cap = level_cap(gauge, epsilon, extents, volume)
    size = enumeration_size(extents, volume, cap / gauge.denominator)
    if size > MAX_POINTS:
        raise ValueError(f"the coverage enumeration would form about {size:.2g} lattice points "
                         f"(at most {MAX_POINTS:.0e})")
    counts = level_counts(gauge, extents, cap)
    eps = fmpq(epsilon.numerator, epsilon.denominator)
    levels = np.flatnonzero(counts).tolist()
    terms = [arb(int(counts[j])) * arb(-eps * fmpq(j, gauge.denominator)).exp() for j in levels]
    tail = tail_bound(gauge, epsilon, extents, cap)
    total = sum(terms, arb(0)) + tail
    target = arb(1) - arb(fmpq(Fraction(alpha).numerator, Fraction(alpha).denominator))
    running = arb(0)
    for j, term in zip(levels, terms):
        running += term
        bound = running / total
        if bound > target:  # the whole ball above 1 − α: proven
            return CoverageLevel(j, float(bound.lower()), cap, int(counts.sum()), float(tail.upper()))
    raise ValueError(f"no level up to the cap {cap}/{gauge.denominator} has proven coverage ≥ 1 − α")
