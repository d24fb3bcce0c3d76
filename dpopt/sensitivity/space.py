r"""The sensitivity space of a query under an adjacency relation.

.. math:: S = \{\varphi(X) - \varphi(X') : X \simeq X'\} \subset \mathbb{R}^d .

Held are its span (with an implicit projector), the l1 / l2 / l∞ sensitivities as exact
fractions (suprema of convex norms over S are attained at the generators of its convex
hull), and, when small enough to list, a generating set of the hull.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from dpopt.core.rows import row_groups, unique_rows
from dpopt.sensitivity.subspace import Subspace, span_of


def exact_norms(vectors: np.ndarray) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (l1, l2², l∞) suprema over the rows of ``vectors``.

    Floats are binary rationals, so each norm is evaluated exactly with Fractions, on the
    rows whose float norm is within 1e-9 of the float maximum (the exact maximum is among them),
    each distinct multiset of absolute values once (the three norms depend on nothing else:
    a Semi-DP space of 10⁵ moves has a handful).
    """
    vectors = np.atleast_2d(np.asarray(vectors, dtype=float))

    def exact_max(float_norms: np.ndarray, exact: Callable[[np.ndarray], Fraction]) -> Fraction:
        top = float_norms.max(initial=0.0)
        rows = np.flatnonzero(float_norms >= top * (1 - 1e-9))
        candidates = np.sort(np.abs(vectors[rows]), axis=1)
        first, _ = row_groups(candidates)
        return max((exact(v) for v in candidates[first]), default=Fraction(0))

    def exact_sum(v: np.ndarray, power: int) -> Fraction:
        """Σ_i v_i^power exactly, each distinct value once times its count (counts of 0/1 tables are large)."""
        values, counts = np.unique(v, return_counts=True)
        return sum((int(c) * Fraction(float(x)) ** power for x, c in zip(values, counts)), Fraction(0))

    l1 = exact_max(np.abs(vectors).sum(axis=1), lambda v: exact_sum(v, 1))
    l2sq = exact_max((vectors**2).sum(axis=1), lambda v: exact_sum(v, 2))
    # a float maximum of |x| is exact (comparisons and |x| do not round): one Fraction per row, not per entry
    linf = exact_max(np.abs(vectors).max(axis=1, initial=0.0), lambda v: Fraction(float(v.max(initial=0.0))))
    return l1, l2sq, linf


@dataclass(frozen=True)
class SensitivitySpace:
    """The derived sensitivity space.

    Attributes
    ----------
    dimension : int
        d, the query's output dimension (table cells flattened row-major).
    span : Subspace
        span(S), with an implicit projector.
    l1, l2_squared, linf : Fraction
        sup ‖v‖₁, sup ‖v‖₂², sup ‖v‖∞ over S, exact.
    method : str
        How S was obtained ("structural: ..." or "enumeration: ...").
    adjacency : str
        The neighbouring relation, in words.
    complete : bool
        True when :attr:`vectors` lists every element of S; False when it lists the
        generators (extreme points) of S's convex hull only.
    semi_adjacent_parameter : int or None
        a(t) under invariants (Cho & Awan, Def. 13); None without invariants.
    listable : bool
        False when the derivation already knows that S has too many vectors to list (:meth:`listed` is then None),
        read without listing them (the quick bound ``k_norm_ball``); True: they may be listed.
    _hull : callable or None
        A complete space whose listing holds many points inside its hull (every contribution of a person to a
        ``linear`` query, :mod:`dpopt.sensitivity.person`) may state a smaller subset of it with the same convex
        hull, read by :meth:`hull_vectors` (the hull-based families); None: the listed vectors themselves.
    _patterns : callable or None
        The move patterns (the sorted non-zero magnitudes of the coordinates, each tuple increasing) of every element of S, stated by a
        derivation that finds them without listing S (a person's moves on tables and marginal workloads,
        :mod:`dpopt.sensitivity.person_patterns`; None when they are too many to find), read by
        :func:`dpopt.mechanisms.integer_noise.move_patterns`; None: read from the listed vectors of a
        :attr:`complete` space.
    """

    dimension: int
    span: Subspace
    l1: Fraction
    l2_squared: Fraction
    linf: Fraction
    method: str
    adjacency: str
    complete: bool
    semi_adjacent_parameter: int | None = None
    listable: bool = True
    _vectors: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)
    _extremes: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)
    _hull: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)
    _patterns: Callable[[], list[tuple[int, ...]] | None] | None = field(default=None, repr=False, compare=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def rank(self) -> int:
        return self.span.rank

    def memo(self, key: str, compute: Callable[[], object]) -> object:
        """``compute()``, once for this space: a value derived from its vectors that several families read (the
        shift pattern of :func:`dpopt.sensitivity.patterns.shift_pattern`, a sort of every listed vector). The
        space is immutable, and a copy made by :func:`dataclasses.replace` starts with an empty memo."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def stated_patterns(self) -> list[tuple[int, ...]] | None:
        """The move patterns the derivation states (:attr:`_patterns`), computed once; None when it states none or
        finds too many (they are then read from the listed vectors, where there are)."""
        return None if self._patterns is None else self.memo("move_patterns", self._patterns)

    @property
    def l2(self) -> float:
        """sup ‖v‖₂ as a float (the exact value is √ :attr:`l2_squared`)."""
        return float(np.sqrt(float(self.l2_squared)))

    @property
    def rank_deficient(self) -> bool:
        return self.rank < self.dimension

    def vectors(self) -> np.ndarray:
        """The listed vectors (see :attr:`complete`), shape (m, d).

        Raises
        ------
        ValueError
            If the space was derived without listing vectors (too many to hold).
        """
        if self._vectors is None:
            raise ValueError("this sensitivity space is too large to list its vectors")
        return self._vectors()

    def listed(self) -> np.ndarray | None:
        """The listed vectors as a float array of shape (m, d), or None when the space is too
        large to list them (where :meth:`vectors` raises)."""
        try:
            return np.atleast_2d(np.asarray(self.vectors(), dtype=float))
        except ValueError:
            return None

    @property
    def states_hull(self) -> bool:
        """True when the derivation states generators of Hull(S) apart from the listing (:attr:`_hull`), which a
        copy of the space on another lattice must carry along."""
        return self._hull is not None

    def hull_vectors(self) -> np.ndarray | None:
        """Vectors whose convex hull is that of S, as a float array of shape (m, d), or None when the space is too
        large to list them: the derivation's generators when it states them (:attr:`_hull`), else :meth:`listed`.
        What a convex function's supremum over S, a norm ball Hull(S) or the span of S needs; a quantity summed
        per move (a pDP level, per-coordinate noise) needs :meth:`listed` of a :attr:`complete` space instead."""
        if self._hull is not None:
            return np.atleast_2d(np.asarray(self._hull(), dtype=float))
        return self.listed()

    def extreme_vectors(self) -> np.ndarray:
        """Elements of S attaining its l1, l2 and l∞ sensitivities, shape (m, d): the listed vectors
        when they can be listed, else the few the derivation constructs (e.g. one record of a marginal
        workload replaced by one that differs in every attribute).

        Raises
        ------
        ValueError
            If the space can neither be listed nor states such vectors.
        """
        listed = self.listed()
        if listed is not None:
            return listed
        if self._extremes is None:
            raise ValueError("this sensitivity space is too large to list its vectors and states no extreme ones")
        return np.atleast_2d(np.asarray(self._extremes(), dtype=float))

    def summary(self) -> dict:
        """The certificate's ``sensitivity`` block."""
        return {
            "dimension": self.dimension,
            "rank": self.rank,
            "l1": float(self.l1),
            "l2": self.l2,
            "linf": float(self.linf),
            "l1_exact": str(self.l1),
            "l2_squared_exact": str(self.l2_squared),
            "linf_exact": str(self.linf),
            "span": self.span.describe(),
            "adjacency": self.adjacency,
            "method": self.method,
        }

    @classmethod
    def from_vectors(
        cls, vectors: np.ndarray, *, method: str, adjacency: str, complete: bool
    ) -> "SensitivitySpace":
        """Build a space from an explicit list of difference vectors (rows)."""
        vectors = unique_rows(np.atleast_2d(np.asarray(vectors, dtype=float)))
        l1, l2sq, linf = exact_norms(vectors)
        return cls(
            dimension=vectors.shape[1],
            span=span_of(vectors.T),
            l1=l1,
            l2_squared=l2sq,
            linf=linf,
            method=method,
            adjacency=adjacency,
            complete=complete,
            _vectors=lambda: vectors,
        )
