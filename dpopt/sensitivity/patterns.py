r"""The sensitivity set seen coordinate by coordinate, for i.i.d. per-coordinate noise.

For noise with independent coordinates whose one-dimensional privacy loss for a shift of
size m is ℓ(m) (non-decreasing in m), the loss of a difference vector v is Σ_i ℓ(|v_i|):
the coordinates are independent and each coordinate's supremum can be attained at once.
The exact ε is therefore :math:`\max_{v\in S} \sum_i \ell(|v_i|)`, which depends on how
many coordinates a neighbour moves and by how much — not only on ‖v‖₁. For Laplace
ℓ(m) = m/b is linear and only ‖v‖₁ matters; for the staircase ℓ(m) = ε₀⌈m/Δ₀⌉ and for R²DP
ℓ is concave, so spreading a shift over several coordinates costs more.

A :class:`ShiftPattern` records, exactly, the distinct non-zero magnitudes |v_i| and for
each difference vector how many coordinates move by each magnitude. In one dimension
S ⊂ [−Δ, Δ] and, ℓ being non-decreasing, the single magnitude Δ = ``space.l1`` suffices
(this holds whether or not S is listed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import numpy as np

from dpopt.sensitivity.space import SensitivitySpace

T = TypeVar("T")


@dataclass(frozen=True)
class ShiftPattern:
    """Distinct non-zero coordinate shifts of a sensitivity set, and their multiplicities.

    Attributes
    ----------
    magnitudes : tuple of Fraction
        The distinct values of |v_i| > 0 over v ∈ S, exact, increasing.
    counts : numpy.ndarray
        (patterns × magnitudes) integers: row p says how many coordinates move by each
        magnitude in one (or several) v ∈ S. Every v ∈ S is represented.
    """

    magnitudes: tuple[Fraction, ...]
    counts: np.ndarray

    @property
    def max_support(self) -> int:
        """k = max_v ‖v‖₀."""
        return int(self.counts.sum(axis=1).max())

    @property
    def largest(self) -> Fraction:
        """Δ∞ = max_v ‖v‖∞."""
        return self.magnitudes[-1]

    @property
    def uniform(self) -> bool:
        """True when every non-zero coordinate shift has the same size (then
        k·ℓ(Δ∞) is the exact loss, not only a bound)."""
        return len(self.magnitudes) == 1

    def worst(self, loss: Sequence[T], add: Callable[[list[T]], T] = sum) -> T:
        """max over patterns of Σ_k counts[p, k]·loss[k], the sum formed by ``add`` on the
        repeated terms (pass exact Fractions or mpmath numbers for an exact maximum)."""
        best = None
        for row in self.counts:
            terms = [loss[k] for k in np.flatnonzero(row) for _ in range(int(row[k]))]
            total = add(terms)
            if best is None or total > best:
                best = total
        return best


def coordinatewise_reason(space: SensitivitySpace) -> str | None:
    """None when :func:`shift_pattern` can describe the space exactly, else why not."""
    if space.dimension == 1 or space.stated_patterns() is not None:
        return None
    if not space.complete:
        return ("per-coordinate noise is certified from every difference vector, but this sensitivity "
                "space lists only the generators of its hull (e.g. Hamming distance > 1)")
    if space.listed() is None:
        return "the sensitivity space has too many difference vectors to list"
    return None


def move_multisets(space: SensitivitySpace, limit: int) -> list[tuple[Fraction, ...]] | None:
    """The distinct sorted multisets {|v_i| ≠ 0} (exact binary values) over every difference vector,
    sorted; None when the space does not list all of them (not complete, or too large to list) or
    holds more than ``limit`` distinct ones. A derivation's stated move patterns
    (:meth:`SensitivitySpace.stated_patterns`) are these multisets."""
    stated = space.stated_patterns()
    if stated is not None:
        moves = sorted(tuple(Fraction(x) for x in pattern) for pattern in stated)
        return moves if 0 < len(moves) <= limit else None
    if not space.complete:
        return None
    vectors = space.listed()
    if vectors is None:
        return None
    rows = np.sort(np.abs(vectors), axis=1)  # each row's multiset, zeros first
    width = int(np.count_nonzero(rows, axis=1).max(initial=0))
    rows = np.unique(rows[:, rows.shape[1] - width:], axis=0) if width else rows[:0]
    moves = sorted({tuple(Fraction(float(x)) for x in row if x != 0) for row in rows} - {()})
    return moves if 0 < len(moves) <= limit else None


def shift_pattern(space: SensitivitySpace) -> ShiftPattern:
    """The exact :class:`ShiftPattern` of ``space``, computed once per space (:meth:`SensitivitySpace.memo`: the
    staircase, R²DP and generalized Gaussian designs and checks each read it; a sort of all L(L − 1)·L entries of a
    replace-one histogram, 2 s at L = 200).

    Raises
    ------
    ValueError
        When :func:`coordinatewise_reason` gives a reason.
    """
    reason = coordinatewise_reason(space)
    if reason is not None:
        raise ValueError(reason)
    return space.memo("shift_pattern", lambda: _shift_pattern(space))


def _shift_pattern(space: SensitivitySpace) -> ShiftPattern:
    """:func:`shift_pattern`, computed."""
    if space.dimension == 1:
        return ShiftPattern((Fraction(space.l1),), np.array([[1]]))
    stated = space.stated_patterns()
    if stated is not None:  # the derivation's move patterns: the sorted non-zero |v_i| of every move
        values = sorted({x for pattern in stated for x in pattern})
        counts = np.unique(np.array([[pattern.count(v) for v in values] for pattern in stated]), axis=0)
        return ShiftPattern(tuple(Fraction(v) for v in values), counts)
    magnitudes = np.abs(np.asarray(space.vectors(), dtype=float))
    values, index = np.unique(magnitudes, return_inverse=True)
    index = index.reshape(magnitudes.shape)
    nonzero = values > 0
    counts = np.stack([np.count_nonzero(index == j, axis=1) for j in np.flatnonzero(nonzero)], axis=1)
    counts = np.unique(counts, axis=0)
    counts = counts[counts.sum(axis=1) > 0]
    return ShiftPattern(tuple(Fraction(float(v)) for v in values[nonzero]), counts)
