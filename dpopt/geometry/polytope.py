r"""Convex polytopes K = conv(points) ⊂ R^s with 0 inside: facets, cone volumes, exact sampling.

K is split into cones from the origin over the simplices of a triangulation of its
boundary:

.. math:: K = \bigcup_i C_i,\qquad C_i = \operatorname{conv}(0, p_{i1}, \dots, p_{is}),\qquad
          \operatorname{vol} C_i = |\det(p_{i1}, \dots, p_{is})| / s!

(cones over distinct facets meet only on their boundaries). A uniform point of K is a cone
C_i drawn with probability vol C_i / vol K, then a uniform point of that simplex,
Σ_j w_j p_{ij} with (w_0, w_1, …, w_s) ~ Dirichlet(1, …, 1) (w_0 the weight of the apex 0).
Both steps are exact; a draw costs O(log m + s²) for m cones, whatever the dimension.
The paper's rejection from a bounding box (Cho & Awan, Algorithm 3) is kept as
:meth:`Polytope.sample_rejection` for comparison: its acceptance rate vol K / vol(box)
collapses as s grows.

Facets are written ⟨a_f, y⟩ ≤ 1, so the gauge (the norm whose unit ball is K) is
‖y‖_K = max_f ⟨a_f, y⟩, and the facet whose cone holds y is the maximiser.

**Building the triangulation.** In s ≤ 4 dimensions qhull triangulates the whole boundary
(``Qt``) in milliseconds. Above, sensitivity hulls are highly degenerate (facets with tens
of vertices) and qhull's global merging becomes very slow, so the boundary is found by
*gift wrapping*: a first facet from a linear program over the polar body
{a : ⟨a, p⟩ ≤ 1}, then, for each facet F found, its ridges (the facets of F, from qhull
on F's points with one coordinate dropped) and, across each ridge, the neighbouring
facet, by rotating F's hyperplane about the ridge until it meets another point. Each
facet with more than s vertices is triangulated by coning its boundary from its centroid
(an auxiliary point). The boundary found is certified closed: every ridge is shared by
exactly two facets. With a :class:`~dpopt.geometry.hull_budget.HullBudget` the enumeration counts
the facets it lists and the ridges it crosses, bounds each facet's triangulation before qhull runs, and
stops when a count exceeds its limit: work, not time, so the same points get the same answer on every
machine and under any load.

Measured (``benchmarks/bench_k_norm.py``, 2 shared cores) on the sensitivity hulls of k×k
tables with both one-way margins invariant (s = (k−1)²): k = 3 (30 points, s = 4) takes
milliseconds; k = 4 (264 points, s = 9) has 3,818 facets with up to 80 vertices each and
1,858,775 boundary simplices, built in 54–153 s (qhull's global triangulated hull did not
finish in 10 minutes, its facets alone took 227–359 s); k = 5 (1,400 points, s = 16) was
not done after 600 s. :mod:`dpopt.geometry.symmetric_hull` builds such hulls up to their
symmetry group (k = 4 in about 2 s).

Second moments are exact: a simplex with vertices 0, p_1, …, p_s has

.. math:: \mathbb{E}[xx^\top] = \frac{\sum_j p_j p_j^\top + (\sum_j p_j)(\sum_j p_j)^\top}{(s+1)(s+2)} .
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.rows import row_groups
from dpopt.errors import SolverError
from dpopt.geometry.hull_budget import UNLIMITED, HullBudget

optimize = lazy_module("scipy.optimize")
sparse = lazy_module("scipy.sparse")
spatial = lazy_module("scipy.spatial")


_CHUNK = 65_536
_GLOBAL_QHULL_DIMENSION = 4
_TIGHT = 1e-9
"""A point p is on facet a when |⟨a, p⟩ − 1| ≤ 1e-9 (coordinates are O(1) after scaling)."""
_DROPPED = 1e-6
"""A facet's coordinates drop the first coordinate k with |a_k| ≥ (1 − 1e-6)·max|a| (see
:func:`_triangulate_facet`): exact ties in |a| are broken by position, whatever the last bits of a."""


class ConeSampler:
    """Exact uniform sampling of K by its cone decomposition: a cone over a boundary simplex
    drawn by volume (:meth:`sample_cones`), then a Dirichlet point in it (:meth:`combine`),
    both stated by the polytope class."""

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact uniform points of K, shape (size, s)."""
        cone, weights = self.sample_cones(rng, size)
        return self.combine(cone, weights, self._extended_points)

    @cached_property
    def _extended_points(self) -> np.ndarray:
        return self.extend(self.points)


@dataclass(frozen=True, eq=False)
class Polytope(ConeSampler):
    """K = conv(points), full-dimensional in R^s, with the origin in its interior.

    Attributes
    ----------
    points : ndarray, shape (n, s)
        The generating points (extreme or not).
    auxiliary : tuple of ndarray of int
        Extra points used by the triangulation: point n + i is the mean of
        ``points[auxiliary[i]]`` (the centroid of a facet with more than s vertices).
    normals : ndarray, shape (F, s)
        One row a_f per facet: K = {y : ⟨a_f, y⟩ ≤ 1 for every f}.
    simplices : ndarray of int, shape (m, s)
        A triangulation of the boundary: each row lists s points (generating, then
        auxiliary) of one (s−1)-simplex.
    simplex_facet : ndarray of int, shape (m,)
        The facet each simplex lies on.
    cone_volumes : ndarray, shape (m,)
        vol conv(0, simplex) = |det|/s!.
    reference_volume : float
        vol K computed independently of ``cone_volumes``: by qhull for the whole hull, or
        (gift wrapping) as Σ_f vol_{s−1}(F_f)·dist(0, F_f)/s with qhull's facet volumes.
    open_ridges : int
        Ridges not shared by exactly two facets (0 for a closed boundary).
    method : str

    Examples
    --------
    >>> square = Polytope.from_points(np.array([[1., 1], [1, -1], [-1, 1], [-1, -1]]))
    >>> square.volume, len(square.normals)
    (4.0, 4)
    >>> square.gauge(np.array([[0.5, -0.25]])).tolist()
    [0.5]
    """

    points: np.ndarray
    auxiliary: tuple
    normals: np.ndarray
    simplices: np.ndarray
    simplex_facet: np.ndarray
    cone_volumes: np.ndarray
    reference_volume: float
    open_ridges: int
    method: str

    @classmethod
    def from_points(cls, points: np.ndarray, budget: HullBudget = UNLIMITED) -> Polytope:
        """The hull of ``points`` (rows), which must contain the origin in its interior.

        Raises
        ------
        ValueError
            If the points do not span R^s or the origin is not interior.
        HullBudgetExceeded
            If gift wrapping (s > 4) lists more facets, crosses more ridges or meets a larger facet
            than ``budget`` allows.
        """
        points = np.atleast_2d(np.asarray(points, dtype=float))
        s = points.shape[1]
        if s == 1:
            return _interval(points)
        scale = power_of_two_scale(points)
        unit = points / scale
        if s <= _GLOBAL_QHULL_DIMENSION:
            parts = _global_qhull(unit)
        else:
            parts = _gift_wrap(unit, budget)
        auxiliary, normals, simplices, simplex_facet, reference, open_ridges, method = parts
        extended = np.vstack([points] + [points[idx].mean(axis=0, keepdims=True) for idx in auxiliary])
        cones = _abs_determinants(extended, simplices) / math.factorial(s)
        return cls(points, tuple(auxiliary), normals / scale, simplices, simplex_facet, cones,
                   reference * scale**s, open_ridges, method)

    @property
    def dimension(self) -> int:
        return self.points.shape[1]

    @property
    def volume(self) -> float:
        """vol K, the sum of the cone volumes."""
        return float(self.cone_volumes.sum())

    @property
    def boundary_simplices(self) -> int:
        """Simplices of the boundary triangulation."""
        return len(self.simplices)

    @property
    def vertices(self) -> np.ndarray:
        """Indices of the generating points used by the triangulation (the extreme points)."""
        used = np.flatnonzero(np.bincount(np.asarray(self.simplices, dtype=np.intp).ravel()))  # sorted, distinct
        return used[used < len(self.points)]

    def gauge(self, y: np.ndarray) -> np.ndarray:
        """‖y‖_K = max_f ⟨a_f, y⟩ for the rows of ``y``."""
        y = np.atleast_2d(np.asarray(y, dtype=float))
        return np.maximum((y @ self.normals.T).max(axis=1), 0.0)

    def facet_of(self, y: np.ndarray) -> np.ndarray:
        """Index of the facet whose cone holds each row of ``y``."""
        return np.argmax(np.atleast_2d(np.asarray(y, dtype=float)) @ self.normals.T, axis=1)

    def facet_cone_volumes(self) -> np.ndarray:
        """vol conv(0, facet f) for every facet, from the triangulation."""
        return np.bincount(self.simplex_facet, weights=self.cone_volumes, minlength=len(self.normals))

    def consistency(self) -> dict:
        """Numbers showing that the cones tile K: their volumes add up to the independently
        computed volume, the boundary is closed, every simplex lies on its facet and every
        generating point satisfies every facet inequality."""
        on_facet = np.einsum("msk,mk->ms", self._extended_points[self.simplices],
                             self.normals[self.simplex_facet])
        return {
            "method": self.method,
            "facets": len(self.normals),
            "volume_mismatch": abs(self.volume - self.reference_volume) / self.reference_volume,
            "open_ridges": self.open_ridges,
            "max_simplex_off_facet": float(np.abs(on_facet - 1.0).max()),
            "max_point_gauge": float(self.gauge(self.points).max()),
        }

    @cached_property
    def _averaging(self) -> sparse.csr_matrix:
        rows = np.repeat(np.arange(len(self.auxiliary)), [len(idx) for idx in self.auxiliary])
        cols = np.concatenate(self.auxiliary) if self.auxiliary else np.zeros(0, dtype=int)
        vals = np.concatenate([np.full(len(idx), 1.0 / len(idx)) for idx in self.auxiliary]) \
            if self.auxiliary else np.zeros(0)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(self.auxiliary), len(self.points)))

    def extend(self, images: np.ndarray) -> np.ndarray:
        """The values of a linear map on the generating and auxiliary points, given its values
        ``images`` (n × k) on the generating points."""
        images = np.asarray(images, dtype=float)
        if not self.auxiliary:  # simplicial facets only: no averaging (nor scipy.sparse) needed
            return images
        return np.vstack([images, self._averaging @ images])

    # ------------------------------------------------------------------ sampling
    def sample_cones(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``size`` uniform points of K as (cone index, weights of its s points).

        The point is Σ_j w_j p_{ij}; through any linear map L it is Σ_j w_j L p_{ij}
        (see :meth:`combine`), which is uniform on L K.
        """
        s = self.dimension
        cumulative = np.cumsum(self.cone_volumes)
        cone = np.searchsorted(cumulative, rng.random(size) * cumulative[-1], side="right")
        cone = np.minimum(cone, len(cumulative) - 1)
        e = rng.standard_exponential((size, s + 1))
        return cone, e[:, :s] / e.sum(axis=1, keepdims=True)

    def combine(self, cone: np.ndarray, weights: np.ndarray, extended_images: np.ndarray) -> np.ndarray:
        """Σ_j w_j L p_{ij} for the draws of :meth:`sample_cones`, with ``extended_images`` the
        values of L on every point (see :meth:`extend`)."""
        out = np.zeros((len(cone), extended_images.shape[1]))
        for j in range(self.dimension):
            out += weights[:, j, None] * extended_images[self.simplices[cone, j]]
        return out

    def sample_rejection(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, int]:
        """Uniform points by rejection from the bounding box ∏[−c_i, c_i] (Algorithm 3).

        Returns the points (size, s) and the number of box draws used.
        """
        half = np.abs(self.points).max(axis=0)
        out, drawn, kept = np.empty((size, self.dimension)), 0, 0
        batch = 4_096
        while kept < size:
            y = rng.uniform(-1.0, 1.0, size=(batch, self.dimension)) * half
            inside = y[(y @ self.normals.T).max(axis=1) <= 1.0]
            take = min(len(inside), size - kept)
            out[kept:kept + take] = inside[:take]
            kept += take
            drawn += batch
        return out, drawn

    # ------------------------------------------------------------------ moments
    def mean_l1(self, extended_images: np.ndarray) -> float | None:
        """E‖x‖₁ for x uniform on L K, when ‖·‖₁ is linear on every image cone, else None.

        On a cone whose points have, coordinate by coordinate, one sign, ‖x‖₁ = ⟨σ, x⟩ and
        E x = Σ_j L p_j/(s + 1) (the centroid of the simplex 0, L p_1, …, L p_s), so its
        contribution is Σ_c |Σ_j (L p_j)_c|/(s + 1).
        """
        s = self.dimension
        weights = self.cone_volumes / self.cone_volumes.sum()
        total = 0.0
        for start in range(0, len(self.simplices), _CHUNK):
            corners = extended_images[self.simplices[start:start + _CHUNK]]  # (m, s, k)
            if np.any((corners.max(axis=1) > 0) & (corners.min(axis=1) < 0)):
                return None
            total += float(weights[start:start + _CHUNK] @ np.abs(corners.sum(axis=1)).sum(axis=1))
        return total / (s + 1)

    def second_moment(self, extended_images: np.ndarray | None = None) -> np.ndarray:
        """E[xxᵀ] for x uniform on L K (k × k), L given by its values on every point
        (:meth:`extend`; default: the identity, x uniform on K)."""
        images = self._extended_points if extended_images is None else extended_images
        s = self.dimension
        weights = self.cone_volumes / self.cone_volumes.sum()
        per_point = np.bincount(self.simplices.reshape(-1), weights=np.repeat(weights, s),
                                minlength=len(images))
        sums = np.zeros((len(self.simplices), images.shape[1]))
        for j in range(s):
            sums += images[self.simplices[:, j]]
        moment = images.T @ (per_point[:, None] * images) + sums.T @ (weights[:, None] * sums)
        return moment / ((s + 1) * (s + 2))


# ---------------------------------------------------------------------- builders
def _interval(points: np.ndarray) -> Polytope:
    hi, lo = int(np.argmax(points[:, 0])), int(np.argmin(points[:, 0]))
    top, bottom = float(points[hi, 0]), float(points[lo, 0])
    if not bottom < 0.0 < top:
        raise ValueError("the origin is not interior to the hull of the points")
    return Polytope(points, (), np.array([[1.0 / top], [1.0 / bottom]]), np.array([[hi], [lo]]),
                    np.array([0, 1]), np.array([top, -bottom]), top - bottom, 0, "interval")


def power_of_two_scale(points: np.ndarray) -> float:
    """The power of two 2^e > max |entry| of ``points``: dividing by it is exact, so the scaled points
    (and qhull's triangulation of them) carry the same bits on every machine.

    Raises
    ------
    ValueError
        If every entry is 0.
    """
    top = float(np.abs(points).max(initial=0.0))
    if top == 0.0:
        raise ValueError("the origin is not interior to the hull of the points")
    return math.ldexp(1.0, math.frexp(top)[1])


def _hull(points: np.ndarray) -> spatial.ConvexHull:
    try:
        return spatial.ConvexHull(points)
    except spatial.QhullError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "qhull failed"
        raise ValueError(f"the points do not span R^{points.shape[1]} ({first})") from None


def _global_qhull(points: np.ndarray):
    """qhull's triangulated boundary (``Qt``); facets are simplices with equal equations."""
    hull = _hull(points)
    offsets = hull.equations[:, -1]
    if np.any(offsets >= -1e-12):
        raise ValueError("the origin is not interior to the hull of the points")
    per_simplex = hull.equations[:, :-1] / -offsets[:, None]
    _, first, facet = np.unique(np.round(per_simplex, 8), axis=0, return_index=True, return_inverse=True)
    return [], per_simplex[first], hull.simplices.astype(np.int64), facet.reshape(-1), hull.volume, 0, "qhull"


def _first_facet(points: np.ndarray) -> np.ndarray:
    """A facet normal: a vertex of the polar body {a : Pa ≤ 1}, by LP in a generic direction."""
    s = points.shape[1]
    rng = np.random.default_rng(20260101)
    for _ in range(8):
        res = optimize.linprog(-rng.standard_normal(s), A_ub=points, b_ub=np.ones(len(points)),
                      bounds=(None, None), method="highs")
        if res.status == 3:
            raise ValueError("the origin is not interior to the hull of the points")
        if res.status != 0:
            raise SolverError(f"the facet linear program failed: {res.message}")
        a = res.x
        tight = points[np.abs(points @ a - 1.0) <= _TIGHT]
        if len(tight) >= s and np.linalg.matrix_rank(tight[1:] - tight[0], tol=1e-9) == s - 1:
            return a
    raise ValueError("the points do not span R^s, or no facet was found")


def _gift_wrap(points: np.ndarray, budget: HullBudget):
    """Facets by adjacency (gift wrapping); each facet triangulated from its centroid.

    Raises
    ------
    HullBudgetExceeded
        As soon as more facets are listed, more ridges crossed, or a larger facet met
        (:meth:`~dpopt.geometry.hull_budget.HullBudget.check_facet_hull`), than ``budget`` allows.
    """
    n, s = points.shape
    first = _first_facet(points)
    budget.check_facets(1, points)
    keys = {_tight_key(points, first): 0}
    normals, queue = [first], deque([0])
    auxiliary, simplices, simplex_facet, reference = [], [], [], 0.0
    ridges: Counter = Counter()
    crossed = 0
    while queue:
        f = queue.popleft()
        a = normals[f]
        tight = np.flatnonzero(np.abs(points @ a - 1.0) <= _TIGHT)
        budget.check_facet_hull(len(tight), points)
        facet_ridges, facet_simplices, facet_volume, coned = _triangulate_facet(points, a, tight, n + len(auxiliary))
        if coned:
            auxiliary.append(tight)
        reference += facet_volume / np.linalg.norm(a) / s
        simplices.append(facet_simplices)
        simplex_facet.extend([f] * len(facet_simplices))
        for ridge in facet_ridges:
            ridge_key = frozenset(ridge.tolist())
            ridges[ridge_key] += 1
            if ridges[ridge_key] > 1:  # crossed already, from the facet on the other side
                continue
            crossed += 1
            budget.check_ridges(crossed, points)
            neighbour = _across(points, a, tight, ridge)
            key = _tight_key(points, neighbour)
            if key not in keys:
                keys[key] = len(normals)
                normals.append(neighbour)
                queue.append(keys[key])
                budget.check_facets(len(normals), points)
    open_ridges = sum(1 for count in ridges.values() if count != 2)
    return (auxiliary, np.array(normals), np.concatenate(simplices), np.array(simplex_facet),
            reference, open_ridges, "gift wrapping")


def _tight_key(points: np.ndarray, a: np.ndarray) -> bytes:
    """The facet ⟨a, y⟩ ≤ 1 named by the points on it (rounding ``a`` instead could name one facet
    twice where an entry of a falls on a rounding boundary)."""
    return np.flatnonzero(np.abs(points @ a - 1.0) <= _TIGHT).astype(np.int64).tobytes()


def _triangulate_facet(points: np.ndarray, a: np.ndarray, tight: np.ndarray, centroid_index: int):
    """The ridges of facet F = conv(points[tight]) (as point-index arrays), a triangulation
    of F (rows of s point indices; the centroid gets ``centroid_index``), vol_{s−1}(F), and
    whether the centroid is used (F is not a simplex).

    qhull works on the points of F with one coordinate k dropped, a projection that is one-to-one on
    F's hyperplane ⟨a, y⟩ = 1 as a_k ≠ 0 and scales (s − 1)-volume by |a_k|/‖a‖. Those coordinates are
    the points' own entries, so qhull triangulates F the same way on every machine (coordinates from an
    orthonormal basis of the hyperplane carry the last bits of an SVD, which depend on the BLAS kernel,
    and qhull then splits F's non-simplicial ridges otherwise). k is the first coordinate where |a| is
    largest up to :data:`_DROPPED`, which keeps the projection well conditioned."""
    s = points.shape[1]
    if len(tight) == s:  # a simplex: its ridges drop one vertex each
        edges = points[tight[1:]] - points[tight[:1]]
        volume = math.sqrt(max(np.linalg.det(edges @ edges.T), 0.0)) / math.factorial(s - 1)
        return [np.delete(tight, j) for j in range(s)], tight[None, :].astype(np.int64), volume, False
    magnitude = np.abs(a)
    k = int(np.argmax(magnitude >= (1.0 - _DROPPED) * magnitude.max()))
    z = np.delete(points[tight], k, axis=1)  # the points' own entries: the same bits on every machine
    stretch = float(np.linalg.norm(a)) / float(magnitude[k])  # vol_{s−1}(F) = stretch · vol(z)
    if s == 2:  # a segment with interior points: its two ends
        lo, hi = int(np.argmin(z[:, 0])), int(np.argmax(z[:, 0]))
        ends = [tight[[lo]], tight[[hi]]]
        rows = np.array([[centroid_index, int(tight[lo])], [centroid_index, int(tight[hi])]], dtype=np.int64)
        return ends, rows, stretch * float(z[hi, 0] - z[lo, 0]), True
    hull = _hull(z)
    group = _lexical_groups(np.round(hull.equations, 8))
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(group.max() + 2))
    ridges = [tight[np.unique(hull.simplices[order[lo:hi]])] for lo, hi in zip(bounds[:-1], bounds[1:])]
    rows = np.column_stack([np.full(len(hull.simplices), centroid_index), tight[hull.simplices]]).astype(np.int64)
    return ridges, rows, stretch * float(hull.volume), True


def _lexical_groups(rows: np.ndarray) -> np.ndarray:
    """The class of each row among numerically equal rows, classes numbered in the lexicographic order of their
    rows: ``np.unique(rows, axis=0, return_inverse=True)[1]``, with the classes found by hashing
    (:func:`dpopt.core.rows.row_groups`, −0.0 made 0.0 first) and only the distinct rows sorted."""
    first, group = row_groups(np.asarray(rows, dtype=float) + 0.0)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.lexsort(rows[first].T[::-1])] = np.arange(len(first))
    return rank[group]


def _across(points: np.ndarray, a: np.ndarray, tight: np.ndarray, ridge: np.ndarray) -> np.ndarray:
    """The facet on the other side of ``ridge``: rotate the hyperplane ⟨a, y⟩ = 1 about it.

    Normals that keep the ridge on the hyperplane are a + t m with m ⊥ span(ridge); m is
    oriented so that F's other points leave the hyperplane inwards, and t is the largest
    value keeping every point inside: t = min over ⟨m, p⟩ > 0 of (1 − ⟨a, p⟩)/⟨m, p⟩.
    """
    s = points.shape[1]
    _, sv, vt = np.linalg.svd(points[ridge])
    if len(sv) < s - 1 or sv[s - 2] <= 1e-9 * sv[0] or (len(sv) == s and sv[s - 1] > 1e-9 * sv[0]):
        raise ValueError("a ridge of the hull does not span a hyperplane (degenerate input)")
    m = vt[-1]
    in_ridge = np.zeros(len(points), dtype=bool)
    in_ridge[ridge] = True
    others = tight[~in_ridge[tight]]  # np.setdiff1d(tight, ridge): tight is sorted and distinct
    if float(np.mean(points[others] @ m)) > 0:
        m = -m
    along = points @ m
    ahead = along > 1e-12
    t = float(np.min((1.0 - points[ahead] @ a) / along[ahead]))
    return a + t * m


def _abs_determinants(points: np.ndarray, simplices: np.ndarray) -> np.ndarray:
    """|det| of the s × s matrices points[simplices[i]], in chunks."""
    out = np.empty(len(simplices))
    for start in range(0, len(simplices), _CHUNK):
        block = simplices[start:start + _CHUNK]
        out[start:start + len(block)] = np.abs(np.linalg.det(points[block]))
    return out
