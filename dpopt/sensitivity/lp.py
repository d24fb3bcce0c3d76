r"""l_p global sensitivity and the coordinate-wise magnitudes of a sensitivity space.

The l_p global sensitivity (Liu 2019, Definition 1) of a query under an adjacency is

.. math:: \Delta_p = \sup_{v \in S} \|v\|_p, \qquad S = \{\varphi(X) - \varphi(X') : X \simeq X'\}.

:math:`\|\cdot\|_p^p` is convex, so its supremum over S (or over the convex hull of S) is
attained at a generator of the hull, which :meth:`SensitivitySpace.vectors` lists; for integer
p it is evaluated there exactly with Fractions. Examples (digest §1.5): a histogram has
Δ_p = 1 for every p under add/remove and :math:`2^{1/p}` under replace-one; a scalar has
Δ_p = Δ_1. Lemma 2's bound :math:`\Delta_p \le (\sum_k \Delta_{1,k}^p)^{1/p}` uses the
per-coordinate sensitivities :math:`\Delta_{1,k} = \sup_{v\in S}|v_k|`.

The generalized Gaussian calibrations also need *which coordinates move together*: a
difference vector's magnitudes :math:`(|v_1|, \dots, |v_d|)`. :func:`difference_magnitudes`
returns rows that dominate every element of S coordinate-wise: the elements themselves when
S is listed completely, else the single row :math:`(\Delta_{1,k})_k` (every point of the hull
of S satisfies :math:`|v_k| \le \Delta_{1,k}` because :math:`|\cdot_k|` is convex).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 2019,
   Definition 1, Lemma 2, Corollary 8 (digest ``papers/002_generalized_gaussian.md`` §1.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.sensitivity.space import SensitivitySpace


def lp_sensitivity_power(space: SensitivitySpace, p: int) -> tuple[Fraction, str]:
    r""":math:`\Delta_p^p` for an integer p ≥ 1, exactly, and how it was obtained.

    p = 1 and p = 2 are the space's exact l1 and l2² sensitivities. For p ≥ 3 the maximum
    of :math:`\sum_k |v_k|^p` over the listed hull generators is evaluated in Fractions; when
    the space is too large to list, the bound :math:`\|v\|_p^p \le \|v\|_\infty^{p-2}\|v\|_2^2`
    is returned (exact whenever every nonzero |v_k| equals the l∞ sensitivity, as for counts).

    Raises
    ------
    ValueError
        If p is not an integer ≥ 1.
    """
    if int(p) != p or p < 1:
        raise ValueError(f"p must be an integer >= 1 (got {p})")
    p = int(p)
    if p == 1:
        return space.l1, "exact: l1 sensitivity"
    if p == 2:
        return space.l2_squared, "exact: l2 sensitivity squared"
    vectors = space.hull_vectors()
    if vectors is None:
        return (
            space.linf ** (p - 2) * space.l2_squared,
            "bound: ‖v‖_p^p ≤ ‖v‖_∞^(p−2) ‖v‖_2² (space too large to list)",
        )
    values = np.sum(np.abs(vectors) ** p, axis=1)
    rows = np.flatnonzero(values >= values.max() * (1 - 1e-9))
    exact = max(sum((abs(Fraction(x)) ** p for x in vectors[i]), Fraction(0)) for i in rows)
    return exact, "exact: maximum over the generators of the hull of S, in rational arithmetic"


def lp_sensitivity(space: SensitivitySpace, p: int) -> float:
    r""":math:`\Delta_p = \sup_{v\in S}\|v\|_p` for an integer p ≥ 1, as a float (see
    :func:`lp_sensitivity_power`)."""
    power, _ = lp_sensitivity_power(space, p)
    return float(power) ** (1.0 / p)


def coordinate_sensitivities(space: SensitivitySpace) -> np.ndarray:
    r"""The per-coordinate sensitivities :math:`\Delta_{1,k} = \sup_{v \in S} |v_k|`, shape (d,).

    Maxima over the listed hull generators; the l∞ sensitivity for every coordinate when the
    space is too large to list (a valid upper bound).
    """
    vectors = space.hull_vectors()
    if vectors is None:
        return np.full(space.dimension, float(space.linf))
    return np.abs(vectors).max(axis=0)


def lemma2_bound(per_coordinate, p: float) -> float:
    r"""Lemma 2: :math:`\Delta_p \le (\sum_k \Delta_{1,k}^p)^{1/p}`."""
    d = np.asarray(per_coordinate, dtype=float)
    return float(np.sum(d**p) ** (1.0 / p))


@dataclass(frozen=True)
class DifferenceMagnitudes:
    """Rows of coordinate magnitudes that dominate every difference vector of S.

    Attributes
    ----------
    rows : numpy.ndarray
        Shape (m, d), entries ≥ 0. For every v ∈ S some row r has |v_k| ≤ r_k for all k.
    exact : bool
        True when the rows are the magnitudes of the elements of S themselves (S listed
        completely); False when they are the per-coordinate bound.
    method : str
    """

    rows: np.ndarray
    exact: bool
    method: str

    @property
    def per_coordinate(self) -> np.ndarray:
        r""":math:`\Delta_{1,k}`, shape (d,)."""
        return self.rows.max(axis=0)

    @property
    def disjoint(self) -> bool:
        """True when one neighbour changes at most one coordinate (Liu, Corollary 8)."""
        return bool(np.all(np.count_nonzero(self.rows, axis=1) <= 1))

    def profiles(self) -> tuple[tuple[float, ...], ...]:
        """The rows' nonzero magnitudes sorted in decreasing order, keeping only maximal ones.

        For mechanisms whose noise coordinates are i.i.d., a row's privacy-loss bound depends
        only on this sorted profile, and a profile dominated entry-wise (after sorting, with no
        more entries) by another cannot have a larger loss bound.
        """
        unique = {tuple(sorted((float(x) for x in row if x > 0), reverse=True)) for row in self.rows}
        unique.discard(())

        def dominated(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
            return a != b and len(a) <= len(b) and all(x <= y for x, y in zip(a, b))

        return tuple(sorted(a for a in unique if not any(dominated(a, b) for b in unique)))


def difference_magnitudes(space: SensitivitySpace) -> DifferenceMagnitudes:
    """The coordinate magnitudes of S (see :class:`DifferenceMagnitudes`).

    A one-dimensional space is always exact (its only row is the l1 sensitivity).
    """
    if space.dimension == 1:
        return DifferenceMagnitudes(np.array([[float(space.l1)]]), True, "scalar query: |v| ≤ Δ₁")
    vectors = space.listed() if space.complete else None
    if vectors is not None:
        rows = np.unique(np.abs(vectors), axis=0)
        return DifferenceMagnitudes(
            rows, True, f"every element of S listed ({len(rows)} distinct magnitudes)"
        )
    per = coordinate_sensitivities(space)
    return DifferenceMagnitudes(
        per.reshape(1, -1), False, "per-coordinate bound Δ_{1,k} (dominates every point of the hull of S)"
    )
