r"""The K-norm mechanism on the span of the sensitivity space (pure ε-DP).

Noise Z on 𝒮 = span(S), s = dim 𝒮, with density (w.r.t. s-dimensional Lebesgue measure
on 𝒮)

.. math:: f(z) \propto \exp(-\varepsilon \|z\|_K),

where K ⊂ 𝒮 is a convex body, symmetric about 0, that contains S. Then
‖φ(X) − φ(X′)‖_K ≤ 1 for neighbours and the triangle inequality give
f(z − φ(X))/f(z − φ(X′)) ≤ e^ε: the release is ε-DP (Hardt & Talwar 2010, Thm 4.3;
Awan & Slavković 2021). Every neighbouring difference lies in 𝒮, so noise on 𝒮 suffices
and the component of φ(X) orthogonal to 𝒮 is released exactly (Cho & Awan, Algorithm 2
and Thm 31, via an isometry of 𝒮 with R^s; invariants are therefore kept).

**Optimal K.** K = Hull(S) is the smallest norm ball containing S, so in the containment
order it is the optimal K-norm mechanism (Awan & Slavković 2021, Prop. 9; Cho & Awan,
Thm 31): its noise is stochastically smaller in every direction than that of any other
valid K-norm mechanism.

**Sampling.** Z = R·U with R ~ Gamma(shape s + 1, rate ε) independent of U uniform on K
(Cho & Awan, Algorithm 3 step 3; the shape is s + 1: with shape s the density would be
∝ ‖z‖_K^{−1} e^{−ε‖z‖_K}, unbounded at 0, and not ε-DP). Proof: the density of RU at z
is ∫ r^{−s} 1{z/r ∈ K} p_R(r) dr / vol K = ∫_{‖z‖_K}^∞ ε^{s+1} e^{−εr}/s! dr / vol K
= ε^s e^{−ε‖z‖_K} / (s! vol K). U is drawn exactly by the cone decomposition of
:class:`dpopt.geometry.Polytope`, mapped to R^d through the listed vectors themselves
(uniformity is preserved by linear maps, so no basis enters the noise).

**Fallback.** Above rank :data:`~dpopt.core.families.HULL_MAX_RANK` the hull is not attempted.
Computing the facets of Hull(S) is practical only in moderate dimension
(:mod:`dpopt.geometry.polytope` and :mod:`dpopt.geometry.symmetric_hull` list measured
costs; a hull with a group of table moves is built up to it when the group's point images fit the
budget, else by plain gift wrapping (:func:`hull_group`): the 4×4 table with both margins in seconds up
to its group, the 2×8 one plain in half a second, the 5×5 one not at all). The enumeration runs under
:data:`HULL_BUDGET`, a deterministic work budget (:mod:`dpopt.geometry.hull_budget`: facets listed, ridges
crossed, the size of each facet's triangulation, a group's point images; a closed-form facet count refuses
the root polytope of a replace-one histogram, 2^m − 2 facets, before any work), so whether K is the hull,
and how it is triangulated, is a function of S alone, never of the machine's load (the certificate's
``triangulation`` records the builder, and ``dpopt verify`` and a rebuild follow it). When the hull needs more than the budget, or S
cannot be listed, K is the smallest l1, l2 or l∞ ball of 𝒮 (in an orthonormal basis B, y = Bᵀz)
that contains S, the one with the best predicted utility. It is still an exact ε-DP K-norm mechanism, but not the optimal one;
the certificate says so and bounds its excess cost.

**Lattice.** On a counting query with K = Hull(S) the default (``sampler: exact``) is the discrete
K-norm law P[z] ∝ exp(−ε′‖z‖_K) on span(S) ∩ ℤ^d, drawn and added in integers
(:mod:`dpopt.mechanisms.k_norm_lattice`): by rejection from discrete Laplace proposals when that sampler and
its estimate keep their stated cost, else by a proven half-open cone decomposition
(:mod:`dpopt.noise.k_norm_cones`; the 4×4 table with both margins). The continuous law below serves
``sampler: floating_point``, real-valued queries, norm balls above rank :data:`~dpopt.core.families.CROSS_MAX_RANK`,
and hulls whose lattice law cannot be built (a non-integral echelon basis, an
unproven decomposition). When the hull is not built, up to that rank, K is instead the cross-polytope of the lattice
coordinates, whose law is a product of discrete Laplace coordinates (:mod:`dpopt.mechanisms.k_norm_cross`; the
certificate states the floating-point ball's utility beside it).

**Costs.** With E R = (s+1)/ε and E R² = (s+1)(s+2)/ε²: E‖WZ‖₂² = E R² · E‖WU‖₂², exact
from the second moment of U (simplex formula, or the ball's); E‖Z‖_K = s/ε since
‖U‖_K ~ Beta(s, 1); ‖Z‖_K ~ Gamma(s, rate ε), so the smallest 1 − α region is
{‖z‖_K ≤ t}, t the Gamma(s, ε) quantile, of volume t^s vol K. E‖Z‖₁ has no closed form
for a general K: it is exact when ‖·‖₁ is linear on every cone of K (e.g. the
root polytope of a replace-one histogram), Monte Carlo with its interval otherwise.

References
----------
.. [1] M. Hardt and K. Talwar, "On the geometry of differential privacy", STOC 2010.
.. [2] J. Awan and A. Slavković, "Structure and sensitivity in differential privacy:
   comparing K-norm mechanisms", JASA 116 (2021), 935–954.
.. [3] J. Cho and J. Awan, "Formal privacy guarantees with invariant statistics"
   (digest ``papers/003_semi_dp_invariants.md`` §3.3–3.4).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.checks import Check
from dpopt.core.rows import row_groups
from dpopt.core.families import CROSS_MAX_RANK, HULL_MAX_RANK
from dpopt.domain.queries import NumericQuery
from dpopt.domain.workload import workload_matrix
from dpopt.errors import CalibrationError, UnsupportedSpecError
from dpopt.geometry import (
    BALL_KINDS, UNLIMITED, HullBudget, HullBudgetExceeded, LpBall, Polytope, SymmetricPolytope, table_symmetries,
)
from dpopt.geometry.hull_budget import known_faces
from dpopt.geometry.symmetric_hull import table_group_order, table_shape
from dpopt.mechanisms.base import MONTE_CARLO_DRAWS, MONTE_CARLO_SEED, Mechanism, UtilityValue, better
from dpopt.mechanisms.gaussian import counting_query
from dpopt.mechanisms.decimal_counts import OnDecimalLattice, decimal_reason
from dpopt.mechanisms.exact_cost import (
    EXACT_COST_KEY,
    cost_text,
    exact_cost,
    stated_cost_check,
    stated_volume_cost_check,
    volume_cost,
)
from dpopt.mechanisms.k_norm_cross import CROSS_KIND, CrossBody, cross_lattice, cross_utility
from dpopt.mechanisms.k_norm_sum import LatticeSumKNorm, sum_design
from dpopt.mechanisms.k_norm_lattice import (
    EXACT_K_NORM_CONE_NOTE,
    EXACT_K_NORM_NOTE,
    LATTICE_METRICS,
    LatticeKNorm,
    estimate_refusal,
    lattice_epsilon,
    proposal_bounds,
    recorded_bounds,
)
from dpopt.mechanisms.lattice import integer_answers
from dpopt.noise.k_norm_lattice import limit_acceptance
from dpopt.noise.law import GaugeLaw
from dpopt.privacy.pure_conversion import PURE_TARGETS, pure_epsilon_for, pure_privacy_check
from dpopt.problem import Problem
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import pivot_coordinates
from dpopt.spec.models import Privacy
from dpopt.stats.log_volume import VolumeTerms

linalg = lazy_module("scipy.linalg")
optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")


HULL_BUDGET = HullBudget(facets=5_000, ridges=2_500, facet_hull=10_000_000, images=4_000_000)
"""The work allowed to the facets of Hull(S) before falling back (:class:`~dpopt.geometry.HullBudget`: counts of
facets, ridge crossings and group point images, a function of S alone; never seconds)."""

SYMMETRIC_HULL_MIN_RANK = 7
"""From this rank on, a hull whose vectors have a symmetry group of table moves
(:func:`dpopt.geometry.table_symmetries`) is built up to that group
(:class:`dpopt.geometry.SymmetricPolytope`: the 4×4 table with both margins in about 6 s
instead of 54–153 s) when the group's point images fit the budget (:func:`hull_group`). Below, plain
gift wrapping takes well under a second, and the example certificates pin its triangulation."""

_BALL_MARGIN = 1e-9
"""Relative margin added to a fallback ball's radius: float rounding in Bᵀv is ~1e-15."""

SPARSE_GREEDY_ENTRIES = 1 << 20
"""Listed entries from which :func:`_greedy_fast` multiplies sparse rows (at most 1/8 non-zero) as a scipy.sparse
matrix; below, the dense product costs less than importing scipy.sparse."""

MAX_BALL_BASIS_ENTRIES = 20_000_000
"""Span basis entries (160 MB) past which K-norm refuses a space it cannot list (a ball needs them)."""


# ---------------------------------------------------------------------------- bodies
def hull_group(vectors: np.ndarray, rank: int, budget: HullBudget) -> bool:
    """Whether Hull(S) is built up to its group G of table moves rather than by plain gift wrapping.

    Up to G from rank :data:`SYMMETRIC_HULL_MIN_RANK` on, when a table shape keeps the vectors
    (:func:`~dpopt.geometry.symmetric_hull.table_shape`) and the group's point images |G|·n, |G| in closed form
    (:func:`~dpopt.geometry.symmetric_hull.table_group_order`: 2·r!·c!, ·2 when r = c), fit ``budget.images``;
    else plain gift wrapping under the same budget's facets, ridges and facet sizes. A function of S and the budget
    alone, decided before any work. Plain gift wrapping loses nothing the group could build: both list the same
    facets (an orbit's members counted) and triangulate facets of the same sizes, and the group only saves ridge
    crossings and time. The 2×8 table with both margins (|G| = 161,280, 57 points: 9.2·10⁶ images) is built plain,
    254 facets in about 0.5 s.

    Examples
    --------
    >>> from dpopt.geometry import UNLIMITED
    >>> eye = np.eye(4)
    >>> table = np.array([eye[i] - eye[j] for i in range(4) for j in range(4) if i != j])  # read as 2×2 tables
    >>> hull_group(table, SYMMETRIC_HULL_MIN_RANK, UNLIMITED), hull_group(table, SYMMETRIC_HULL_MIN_RANK - 1, UNLIMITED)
    (True, False)
    """
    if rank < SYMMETRIC_HULL_MIN_RANK:
        return False
    shape = table_shape(vectors)
    return shape is not None and table_group_order(*shape) * len(vectors) <= budget.images


class HullBody:
    """K = Hull(S), the optimal K: a polytope of span(S), sampled by cone decomposition.

    Parameters
    ----------
    vectors : ndarray, shape (n, d)
        The listed vectors of S (symmetric, spanning 𝒮).
    basis : ndarray, shape (d, s)
        An orthonormal basis of 𝒮 (for the noise law's residual only).
    budget : HullBudget, optional
        The work allowed to the facets (:data:`HULL_BUDGET`): a hull whose facet count is known in
        closed form (:func:`~dpopt.geometry.hull_budget.known_faces`) is refused before any work when
        it exceeds it (its ridges too, when it is built plainly); the group's point images choose the
        builder (:func:`hull_group`).
    symmetric : bool, optional
        Build K up to its group of table moves (True) or by plain gift wrapping (False); by default
        :func:`hull_group` decides. A certificate's hull is rebuilt without a limit by the builder its
        ``triangulation`` records, so solve, verify and release triangulate K alike.

    Raises
    ------
    HullBudgetExceeded
        When the hull needs more work than ``budget`` (default: no limit, as when a certificate's
        hull is rebuilt: the triangulation does not depend on the budget).
    ValueError
        When ``symmetric`` is True but no table shape keeps the vectors, or the vectors' exact and
        numerical ranks differ.

    The facets, volumes and cone weights are computed on the exact pivot coordinates of 𝒮
    (:class:`~dpopt.sensitivity.subspace.PivotCoordinates`: each vector's own entries in the pivot
    columns of the echelon form of S), so qhull gets the same bits, and K the same triangulation, on
    every BLAS build and thread count; volumes are mapped to 𝒮 by the Gram factor √det(RRᵀ), and the
    sampler maps its draws through the listed vectors themselves.

    From rank :data:`SYMMETRIC_HULL_MIN_RANK` on, when the vectors have a verified group of
    table moves whose point images fit the budget (:func:`hull_group`), K is built up to that
    group (facet orbits; same sampler law, moments and gauge).
    """

    kind = "hull"
    optimal = True

    def __init__(self, vectors: np.ndarray, basis: np.ndarray, budget: HullBudget = UNLIMITED,
                 symmetric: bool | None = None):
        known = known_faces(vectors)
        budget.check_known(vectors, known)
        self.vectors = vectors
        self.basis = basis
        self.rank = basis.shape[1]
        self.coordinates = pivot_coordinates(vectors)
        if self.coordinates.rank != self.rank:
            raise ValueError(f"the listed vectors have exact rank {self.coordinates.rank}, numerical rank {self.rank}")
        points = self.coordinates.of(vectors)
        group = hull_group(vectors, self.rank, budget) if symmetric is None else symmetric
        if not group:
            budget.check_known(vectors, known, plain=True)
            self.polytope = Polytope.from_points(points, budget)
        elif table_shape(vectors) is None:
            raise ValueError("K is to be built up to a group of table moves, but no table shape keeps the vectors")
        else:
            self.polytope = SymmetricPolytope.from_points(points, table_symmetries(vectors), budget)
        self.images = self.polytope.extend(vectors)
        self.volume = self.polytope.volume * self.coordinates.volume_factor
        self.log_volume = math.log(self.volume)

    def uniform(self, rng: np.random.Generator, size: int) -> np.ndarray:
        cone, weights = self.polytope.sample_cones(rng, size)
        return self.polytope.combine(cone, weights, self.images)

    def second_moment(self, workload: np.ndarray | None) -> np.ndarray:
        images = self.images if workload is None else self.images @ workload.T
        return self.polytope.second_moment(images)

    def gauge(self, z: np.ndarray) -> np.ndarray:
        """‖z‖_K for the rows of z (in the span)."""
        return self.polytope.gauge(self.coordinates.of(z))

    def mean_l1(self) -> float | None:
        """E‖U‖₁ when ‖·‖₁ is linear on each cone (:meth:`Polytope.mean_l1`), else None."""
        return self.polytope.mean_l1(self.images)

    def mean_l2_norm(self) -> tuple[float, str] | None:
        """E‖U‖₂ for s = 1 (K a segment: ‖·‖₂ is linear on each half), else None."""
        if self.rank != 1:
            return None
        weights = self.polytope.cone_volumes / self.polytope.volume
        ends = np.linalg.norm(self.images[self.polytope.simplices[:, 0]], axis=1)
        return float(weights @ ends) / 2.0, "exact: K is a segment"

    def describe(self) -> dict:
        out = {
            "norm_ball": "hull",
            "vertices": len(self.polytope.vertices),
            "facets": len(self.polytope.normals),
            "boundary_simplices": self.polytope.boundary_simplices,
            "volume": self.volume,
            "triangulation": self.polytope.method,
        }
        if isinstance(self.polytope, SymmetricPolytope):
            out.update(facet_orbits=len(self.polytope.tight), symmetry_group_order=self.polytope.group_order)
        return out

    def sensitivity_check(self, space: SensitivitySpace) -> tuple[Fraction, Check]:
        """sup_{v∈S} ‖v‖_K by linear programs over the vertices of K, certified exactly.

        ‖v‖_K = min{Σλ_j : Σ_j λ_j w_j = v, λ ≥ 0} over the vertices w_j of K (valid as K is
        symmetric). A listed vector of ``space`` that is itself a vertex has ‖v‖_K ≤ 1 with
        λ = e_v; for the others HiGHS gives λ, whose support is re-solved in rational
        arithmetic and accepted only if Σλ_J w_J = v holds exactly with λ_J ≥ 0.
        """
        vectors = space.hull_vectors()
        if vectors is None:
            return Fraction(0), Check("k_norm.sensitivity", "LP over the vertices of K", False,
                                      "the sensitivity space cannot be listed")
        vertices = self.vectors[self.polytope.vertices]
        keys = {row.tobytes() for row in vertices}
        worst, solved, failures = Fraction(0), 0, []
        for v in vectors:
            if not v.any():
                continue
            if v.tobytes() in keys:
                worst = max(worst, Fraction(1))
                continue
            value = _exact_gauge_bound(vertices, v)
            solved += 1
            if value is None:
                failures.append(v)
            else:
                worst = max(worst, value)
        passed = not failures and worst <= 1
        detail = (f"max ‖v‖_K = {float(worst):.17g} over {len(vectors)} listed vectors "
                  f"({len(vertices)} vertices of K; {solved} others by LP)")
        if failures:
            detail += f"; no exact certificate for {len(failures)} vector(s), e.g. {failures[0].tolist()}"
        return worst, Check(
            "k_norm.sensitivity",
            "K-norm sensitivity sup_{v∈S} ‖v‖_K ≤ 1: LP over the vertices of K (HiGHS), each "
            "optimum re-solved on its support in exact rational arithmetic",
            passed,
            detail,
        )

    def tiling_check(self) -> Check:
        """The cone decomposition the sampler draws from tiles K (independent of sampling)."""
        c = self.polytope.consistency()
        ok = (c["volume_mismatch"] <= 1e-9 and c["open_ridges"] == 0
              and c["max_simplex_off_facet"] <= 1e-9 and c["max_point_gauge"] <= 1 + 1e-9)
        if isinstance(self.polytope, SymmetricPolytope):
            return _orbit_tiling_check(c, ok)
        return Check(
            "k_norm.cone_decomposition",
            f"the sampler's cones tile K ({c['method']}): Σ|det|/s! equals the volume computed "
            "independently by qhull, every ridge is shared by two facets, every simplex lies on its "
            "facet, every listed vector satisfies every facet",
            ok,
            f"{c['facets']} facets; relative volume mismatch {c['volume_mismatch']:.1e}; open ridges "
            f"{c['open_ridges']}; max |⟨a_f, p⟩ − 1| on facets {c['max_simplex_off_facet']:.1e}; "
            f"max gauge {c['max_point_gauge']:.15g}",
        )


def _orbit_tiling_check(c: dict, ok: bool) -> Check:
    """:meth:`HullBody.tiling_check` for a hull built up to a symmetry group G."""
    ok = ok and c["max_symmetry_error"] <= 1e-9 and c["facets"] == c["orbit_facets"]
    return Check(
        "k_norm.cone_decomposition",
        f"the sampler's cones tile K ({c['method']}, |G| = {c['group_order']}): every element of G "
        "maps the listed vectors onto themselves by a linear map (residual below); "
        "Σ_orbits |orbit|·Σ|det|/s! over the representatives' cones equals Σ_orbits "
        "|orbit|·vol(F)·dist(0, F)/s with qhull's facet volumes; every ridge of every "
        "representative leads to a listed facet that holds it (a closed boundary, so every facet "
        "of K is listed); the distinct facet normals are as many as the orbits' sizes add up "
        "to; every simplex lies on its facet; every listed vector satisfies every facet",
        ok,
        f"{c['facets']} facets in {c['facet_orbits']} orbits (sizes add up to {c['orbit_facets']}); "
        f"relative volume mismatch {c['volume_mismatch']:.1e}; open ridges {c['open_ridges']}; "
        f"max |⟨a_f, p⟩ − 1| on facets {c['max_simplex_off_facet']:.1e}; max gauge "
        f"{c['max_point_gauge']:.15g}; relative symmetry residual {c['max_symmetry_error']:.1e}",
    )


class BallBody:
    """K = c·B_p, the l1, l2 or l∞ ball of radius c in orthonormal coordinates y = Bᵀz of 𝒮."""

    optimal = False

    def __init__(self, kind: str, radius: float, basis: np.ndarray):
        self.kind = kind
        self.radius = float(radius)
        self.basis = basis
        self.rank = basis.shape[1]
        self.ball = LpBall(kind, self.rank)
        self.log_volume = self.ball.log_volume + self.rank * math.log(self.radius)

    @classmethod
    def smallest(cls, kind: str, space: SensitivitySpace, vectors: np.ndarray | None, basis: np.ndarray,
                 images: np.ndarray | None = None):
        """The smallest ball of this kind containing S; None if S must be listed and cannot be.

        The l2 radius is the exact l2 sensitivity (‖Bᵀv‖₂ = ‖v‖₂ on 𝒮); l1 and l∞ radii
        are maxima over the listed vectors, enlarged by a relative 1e-9. ``images``: ``vectors @ basis`` when the
        caller has it (one product for both balls).
        """
        if kind == "l2":
            radius = math.sqrt(float(space.l2_squared))
            radius = float(np.nextafter(radius, math.inf))
            while Fraction(radius) ** 2 < space.l2_squared:
                radius = float(np.nextafter(radius, math.inf))
            return cls(kind, radius, basis)
        if vectors is None:
            return None
        top = float(LpBall(kind, basis.shape[1]).gauge(vectors @ basis if images is None else images).max())
        return cls(kind, top * (1 + _BALL_MARGIN), basis)

    def uniform(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return (self.radius * self.ball.sample(rng, size)) @ self.basis.T

    def second_moment(self, workload: np.ndarray | None) -> np.ndarray:
        image = self.basis if workload is None else workload @ self.basis
        return self.radius**2 * self.ball.coordinate_second_moment * (image @ image.T)

    def gauge(self, z: np.ndarray) -> np.ndarray:
        """‖z‖_K = ‖Bᵀz‖_p / c for the rows of z (in the span)."""
        return self.ball.gauge(z @ self.basis) / self.radius

    def mean_l1(self) -> float | None:
        """E‖U‖₁ = c·s·E|U_i| when the ambient coordinates are the ball's own (B = I), else None."""
        if self.basis.shape[0] == self.rank and np.array_equal(self.basis, np.eye(self.rank)):
            return self.radius * self.rank * self.ball.coordinate_mean_abs
        return None

    def mean_l2_norm(self) -> tuple[float, str]:
        """E‖U‖₂ = c·E‖U_B‖₂ (an orthonormal basis keeps ‖·‖₂)."""
        mean, how = self.ball.mean_l2_norm()
        return self.radius * mean, how

    def describe(self) -> dict:
        return {"norm_ball": self.kind, "radius": self.radius}

    def sensitivity_check(self, space: SensitivitySpace, vectors: np.ndarray | None) -> tuple[Fraction, Check]:
        """sup_{v∈S} ‖Bᵀv‖_p / c: exact for l2 (Δ₂² ≤ c²); float with margin for l1, l∞."""
        if self.kind == "l2":
            worst = Fraction(math.sqrt(float(space.l2_squared))) / Fraction(self.radius)
            ok = space.l2_squared <= Fraction(self.radius) ** 2
            return worst, Check(
                "k_norm.sensitivity",
                "K = c·(l2 ball of span(S)): ‖v‖_K = ‖v‖₂/c on span(S); exact rational check Δ₂² ≤ c²",
                ok,
                f"Δ₂² = {space.l2_squared} vs c² = {float(self.radius) ** 2:.17g}",
            )
        if vectors is None:
            return Fraction(math.inf), Check("k_norm.sensitivity", f"{self.kind} ball", False,
                                             "the sensitivity space cannot be listed")
        top = float(self.ball.gauge(vectors @ self.basis).max())
        ok = top * (1 + 1e-12) <= self.radius
        return Fraction(top) / Fraction(self.radius), Check(
            "k_norm.sensitivity",
            f"K = c·({self.kind} ball of span(S) in an orthonormal basis B): max_v ‖Bᵀv‖ ≤ c in "
            "float64, with a relative margin 1e-12 (rounding of Bᵀv is ~1e-15)",
            ok,
            f"max ‖Bᵀv‖ = {top:.17g} vs c = {self.radius:.17g}",
        )


def _exact_gauge_bound(vertices: np.ndarray, v: np.ndarray) -> Fraction | None:
    """Σλ for an exact representation v = Σ_J λ_j w_j, λ ≥ 0, found by LP; None if none."""
    res = optimize.linprog(np.ones(len(vertices)), A_eq=vertices.T, b_eq=v, bounds=(0, None), method="highs")
    if res.status != 0:
        return None
    support = np.flatnonzero(res.x > 1e-12 * max(1.0, float(res.x.max())))
    W = [[Fraction(x) for x in row] for row in vertices[support]]  # |J| × d
    target = [Fraction(x) for x in v]
    k = len(W)
    normal = [[sum((a * b for a, b in zip(W[i], W[j])), Fraction(0)) for j in range(k)] for i in range(k)]
    rhs = [sum((a * b for a, b in zip(W[i], target)), Fraction(0)) for i in range(k)]
    lam = _solve_exact(normal, rhs)
    if lam is None or any(x < 0 for x in lam):
        return None
    combined = [sum((lam[i] * W[i][c] for i in range(k)), Fraction(0)) for c in range(len(target))]
    return sum(lam, Fraction(0)) if combined == target else None


def _solve_exact(a: list[list[Fraction]], b: list[Fraction]) -> list[Fraction] | None:
    """Solve a x = b (square) by Gauss–Jordan elimination in Fractions; None if singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if m[r][col] != 0), None)
        if pivot is None:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col and m[r][col] != 0:
                factor = m[r][col] / m[col][col]
                m[r] = [x - factor * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]


def optimal_cost_lower_bound(vectors: np.ndarray, basis: np.ndarray, epsilon: float) -> tuple[float, str]:
    r"""A lower bound on E‖Z‖₂² of the optimal K-norm mechanism (K = Hull(S)).

    K contains the cross-polytope conv(±w_1, …, ±w_s) of any s independent vectors of S
    (S = −S), of volume 2^s |det W| / s!; the s vectors are chosen greedily by largest residual
    (:func:`_greedy_independent`, which breaks ties by the list's order). Among
    sets of a given volume the centred ball has the least ∫‖y‖² (bathtub principle), so
    E_{U∼K}‖U‖² ≥ s ρ²/(s + 2), ρ the radius of the ball of volume vol K, and

    .. math:: \mathbb{E}\|Z\|_2^2 \ge (s+1)(s+2)/\varepsilon^2 \cdot s\rho^2/(s+2)
              = s(s+1)\rho^2/\varepsilon^2 .
    """
    s = basis.shape[1]
    chosen = _greedy_rows(vectors, basis) @ basis
    _, logdet = np.linalg.slogdet(chosen) if len(chosen) == s else (0.0, -math.inf)
    log_volume = s * math.log(2.0) + logdet - math.lgamma(s + 1)
    log_unit_ball = 0.5 * s * math.log(math.pi) - math.lgamma(0.5 * s + 1)
    rho_squared = math.exp(2.0 * (log_volume - log_unit_ball) / s)
    return s * (s + 1) * rho_squared / epsilon**2, (
        "vol Hull(S) ≥ vol conv(±w_1..±w_s) (s vectors of S, greedily by largest residual); bathtub principle: "
        "E‖U‖² ≥ sρ²/(s+2) for the ball of that volume"
    )


def shift_cost_lower_bound(vectors: np.ndarray, basis: np.ndarray, epsilon: float) -> float:
    r"""A lower bound on E‖Z‖₂² of every symmetric ε-DP additive noise on span(S) (the lattice law included).

    For a shift δ ∈ S the likelihood ratio L = dP_δ/dP lies in [e^{−ε}, e^{ε}] with E L = 1, so
    χ²(P_δ‖P) = Var L ≤ (e^ε − 1)(1 − e^{−ε}) = 4 sinh²(ε/2) (Bhatia–Davis). u·Y is an unbiased estimate of u·φ
    (E Z = 0 by symmetry), so by Hammersley–Chapman–Robbins E(u·Z)² ≥ (u·δ)²/χ² ≥ (u·δ)²/(4 sinh²(ε/2)). Along
    the orthonormal q_j of Gram–Schmidt on s vectors w_j of S (:func:`_greedy_independent`), q_j·w_j = r_j, the
    residual norm, and

    .. math:: \mathbb{E}\|Z\|_2^2 \ge \sum_j \mathbb{E}(q_j\cdot Z)^2 \ge \frac{\sum_j r_j^2}{4\sinh^2(\varepsilon/2)} .
    """
    chosen = _greedy_rows(vectors, basis) @ basis
    residuals = np.abs(np.diag(np.linalg.qr(chosen.T, mode="r"))) if len(chosen) else np.zeros(0)
    return float(np.sum(residuals**2)) / (4.0 * math.sinh(epsilon / 2.0) ** 2)


def _greedy_rows(vectors: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The s rows v of ``vectors`` whose images y = vB (B = ``basis``, d × s) :func:`_greedy_independent` chooses,
    by :func:`_greedy_fast` when it can tell, else by that plain pass on y.

    The rule takes the first of equal rows, so it runs on their first occurrences, in order (a Semi-DP space lists
    5·10⁵ moves of a few hundred distinct values), and, in the fast pass, on the first of each pair ±v: v and −v
    have the same residuals (rounding is symmetric), so the first of the two is the one the rule can pick."""
    rows = np.asarray(vectors, dtype=float)
    if rows.ndim == 2 and len(rows) > 1:
        rows = rows[np.sort(row_groups(rows)[0])]
    count = basis.shape[1]
    tie = 64.0 * count * np.finfo(float).eps
    signs = np.sign(rows[np.arange(len(rows)), np.argmax(rows != 0, axis=1)]) if rows.size else np.ones(len(rows))
    canonical = rows * np.where(signs == 0, 1.0, signs)[:, None] + 0.0  # + 0.0: −0.0 becomes 0.0
    _, pairs = row_groups(canonical) if len(rows) > 1 else (None, np.zeros(len(rows), dtype=np.int64))
    _, first = np.unique(pairs, return_index=True)
    representatives = np.sort(first)
    chosen = _greedy_fast(rows[representatives], count, tie)
    if chosen is None:
        chosen, representatives = _greedy_independent(rows @ basis, count), np.arange(len(rows))
    return rows[representatives[chosen]]


def _greedy_fast(rows: np.ndarray, count: int, tie: float) -> list[int] | None:
    r""":func:`_greedy_independent`'s choice with one product of the rows (sparse when they are) by a vector per step,
    or None when rounding could decide it.

    The residual norms are downdated, :math:`N_i = \|v_i\|^2 - \sum_m (v_i\cdot q_m)^2` with :math:`q_m` the
    orthonormalised residuals of the rows chosen (twice classical Gram–Schmidt), instead of recomputed from an
    explicit residual matrix; they are invariant under an isometry, so the rows are taken in their own
    coordinates, not the span's basis (the 2-cell differences of a histogram: O(n) per step instead of O(n·s)).
    The two computations round differently: by at most 5·ε_mach·max‖v‖² over all steps on the replace-one histograms
    of 60 and 100 cells (0 under add/remove), where the tie window 64·s·ε_mach·top is at least 126·ε_mach·max‖v‖².
    With the budget :math:`e = \sqrt{k+1}\,\varepsilon_{mach}\max_i\|v_i\|^2` at step k for each (twice
    that measured at k = 100; an assumption of the size of the rule's own tie window, not a worst-case bound), a
    row with :math:`N_i \ge t + 4e`, t = top·(1 − ``tie``), is within the tie in both computations, one with
    :math:`N_i < t - 4e` in neither, so the first within it is the same row. When a residual lies within 4e of
    t, or the largest is not above 8e (the rows span fewer dimensions), None: the plain pass decides.
    """
    if rows.size == 0:
        return [] if count == 0 else None
    dense = np.ascontiguousarray(rows, dtype=float)
    matrix = dense
    if dense.size >= SPARSE_GREEDY_ENTRIES and np.count_nonzero(dense) <= dense.size // 8:
        from scipy import sparse  # imported where it pays (about 0.5 s)

        matrix = sparse.csr_array(dense)
    norms = np.einsum("ij,ij->i", dense, dense)
    peak = float(norms.max())
    eps = np.finfo(float).eps
    basis = np.zeros((dense.shape[1], count))
    chosen: list[int] = []
    for k in range(count):
        budget = math.sqrt(k + 1) * eps * peak
        top = float(norms.max())
        if not top > 8.0 * budget:
            return None
        threshold = top * (1.0 - tie)
        if np.any(np.abs(norms - threshold) <= 4.0 * budget):
            return None
        j = int(np.flatnonzero(norms >= threshold)[0])
        residual = dense[j].copy()
        for _ in range(2):
            residual -= basis[:, :k] @ (basis[:, :k].T @ residual)
        basis[:, k] = residual / np.linalg.norm(residual)
        norms -= (matrix @ basis[:, k]) ** 2
        chosen.append(j)
        norms[chosen] = -np.inf
    return chosen


def _greedy_independent(rows: np.ndarray, count: int) -> list[int]:
    """``count`` rows chosen one by one by the largest residual against those already chosen (pivoted
    Gram–Schmidt), the first in the list's order among residuals within ``64·s·ε_mach`` relative of the
    largest: LAPACK's pivoted QR breaks such ties (vectors of S of equal norm are common) by its own
    rounding, which differs between BLAS builds and thread counts, and so would the bound it gives. The plain pass
    (an explicit residual matrix, O(n·d) per step); :func:`_greedy_fast` makes the same choice faster."""
    residual = np.array(rows, dtype=float)
    norms = np.sum(residual * residual, axis=1)
    tie = 64.0 * residual.shape[1] * np.finfo(float).eps
    chosen: list[int] = []
    for _ in range(count):
        top = float(norms.max())
        if not top > 0:  # the rows span fewer than ``count`` dimensions
            break
        j = int(np.flatnonzero(norms >= top * (1.0 - tie))[0])
        chosen.append(j)
        q = residual[j] / math.sqrt(top)
        residual -= np.outer(residual @ q, q)
        norms = np.sum(residual * residual, axis=1)
        norms[chosen] = -1.0
    return chosen


# ----------------------------------------------------------------------- mechanism
class KNormMechanism(Mechanism):
    """K-norm noise R·U, R ~ Gamma(s + 1, rate ε), U uniform on K ⊂ span(S)."""

    family = "k_norm"
    title = "K-norm on the span of the sensitivity space"
    noise_in_span = True

    def __init__(self, epsilon: float, body, space: SensitivitySpace, fallback_reason: str | None = None,
                 lattice: LatticeKNorm | None = None, lattice_refusal: str | None = None):
        self.epsilon = float(epsilon)
        self.body = body
        self.rank = body.rank
        self.dimension = space.dimension
        self.fallback_reason = fallback_reason
        self.lattice = lattice
        self.lattice_refusal = lattice_refusal
        self.needs_integer_answers = self.integer_noise = lattice is not None
        self._vectors = body.vectors if isinstance(body, HullBody) else space.hull_vectors()
        self._basis = None if isinstance(body, HullBody) else body.basis
        self.continuous_ball: dict | None = None  # the cross-polytope's floating-point alternative (kind, radius)
        self.stated_cost: dict | None = None  # :func:`~dpopt.mechanisms.exact_cost.exact_cost` against that ball

    # ------------------------------------------------------------------ facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec = problem.spec
        if spec.privacy.definition not in PURE_TARGETS:
            return f"no conversion from ε-DP to a {spec.privacy.definition} target for K-norm noise"
        space = problem.space
        if space.dimension * space.rank > MAX_BALL_BASIS_ENTRIES and space.hull_vectors() is None:
            return (f"the sensitivity space cannot be listed (no hull); a ball needs the dense "
                    f"{space.dimension} x {space.rank} basis of its span (limit {MAX_BALL_BASIS_ENTRIES} entries)")
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """For metric l2 without workload or weights, :func:`optimal_cost_lower_bound` at the ε₀ the
        target allows (:func:`~dpopt.privacy.pure_conversion.pure_epsilon_for`), rounded down by
        1e-9 relative: it bounds the optimal K and every fallback ball (each contains S, hence the
        cross-polytope the bound is built on). None otherwise, when S cannot be listed, or above rank
        :data:`~dpopt.core.families.HULL_MAX_RANK` (K is then a ball, bounded in closed form by the
        capability table's ``k_norm_ball``, without the QR of the listed vectors). When the lattice law may serve the
        spec (a counting query), :func:`shift_cost_lower_bound` instead, which bounds it too (the volume bound
        is the continuous law's: the lattice law of the 2×2 table costs 7.37 < 8 = its bound). On a bounded sum or
        mean measured on its lattice (:mod:`~dpopt.mechanisms.k_norm_sum`) the continuous bound still holds: the
        discrete Laplace's (2t² − 1/6 + O(t⁻²))(g/n)² with t ≥ b·n/g ≥ 2^20 is below 2b² by at most 2^-40/12
        relative, inside the 10⁻⁹ margin."""
        spec, space = problem.spec, problem.space
        utility = spec.utility
        if utility.metric != "l2" or utility.workload is not None or utility.weights is not None:
            return None
        if not isinstance(decimal_reason(problem), str):
            return OnDecimalLattice.bound(problem, cls)
        if space.rank > HULL_MAX_RANK:
            return None
        vectors = space.hull_vectors()
        if vectors is None or space.rank == 0:
            return None
        if _lattice_scope(problem) is None:
            bound = shift_cost_lower_bound(vectors, space.span.basis(), pure_epsilon_for(spec.privacy))
        else:
            bound, _ = optimal_cost_lower_bound(vectors, space.span.basis(), pure_epsilon_for(spec.privacy))
        return bound * (1 - 1e-9) if math.isfinite(bound) and bound > 0 else None

    @classmethod
    def design(cls, problem: Problem) -> KNormMechanism | OnDecimalLattice | LatticeSumKNorm:
        """K = Hull(S) when its facets can be computed in time, else the best fallback ball; for a linear query with
        decimal weights, the lattice law of the integer moves D·WΔ released on the decimal lattice
        (:mod:`dpopt.mechanisms.decimal_counts`) when it is exact; on a bounded sum or mean, K = [−Δ, Δ] measured
        exactly on a dyadic lattice (:func:`~dpopt.mechanisms.k_norm_sum.sum_design`) unless the spec rules it out
        (the reason is then in the continuous design's notes).

        Raises
        ------
        CalibrationError
            If no fallback ball can be built.
        """
        decimal = OnDecimalLattice.measured(problem, cls)
        if not isinstance(decimal, str):
            return decimal
        exact = sum_design(problem)
        if not isinstance(exact, str):
            return exact
        continuous = cls._continuous(problem)
        if isinstance(problem.query, NumericQuery):
            continuous.lattice_refusal = exact
        return continuous

    @classmethod
    def _continuous(cls, problem: Problem) -> KNormMechanism:
        """:meth:`design` on every spec but a bounded sum or mean measured on its lattice."""
        spec, space = problem.spec, problem.space
        epsilon = pure_epsilon_for(spec.privacy)
        vectors = space.hull_vectors()
        basis = space.span.basis()
        if vectors is not None and space.rank > HULL_MAX_RANK:
            reason = (f"the hull of a rank-{space.rank} space is not built (above rank {HULL_MAX_RANK} "
                      "it is not attempted: dpopt.core.families.HULL_MAX_RANK)")
        elif vectors is not None:
            try:
                body = HullBody(vectors, basis, HULL_BUDGET)
            except HullBudgetExceeded as exc:
                reason = str(exc)
            except ValueError as exc:
                reason = f"the hull of the sensitivity space could not be built ({exc})"
            else:
                tiling = body.tiling_check()  # the certificate's check, before its sensitivity LPs: a hull whose
                if tiling.passed:  # cones do not tile it is never designed (it would fail certification)
                    return cls._with_lattice(epsilon, body, problem)
                reason = f"the hull built does not tile K: {tiling.detail}"
        else:
            reason = "the sensitivity space is too large to list, so its hull cannot be built"
        images = None if vectors is None else vectors @ basis
        balls = [BallBody.smallest(kind, space, vectors, basis, images) for kind in BALL_KINDS]
        refusal = _lattice_scope(problem)
        if refusal is None and space.rank > CROSS_MAX_RANK:
            refusal = f"the lattice cross-polytope serves ranks up to {CROSS_MAX_RANK} (dpopt.core.families)"
        cross = None
        if refusal is None:
            cross = (cross_lattice(vectors, lattice_epsilon(epsilon)) if vectors is not None else
                     "the sensitivity space cannot be listed and states no generators of its hull (no lattice basis)")
            if not isinstance(cross, str) and spec.utility.metric == "ci_volume":
                cross = cross.coverage_refusal(CrossBody.of(cross).volume, spec.utility.alpha) or cross
            refusal = cross if isinstance(cross, str) else None
        candidates = [cls(epsilon, ball, space, reason, lattice_refusal=refusal) for ball in balls if ball is not None]
        if not candidates:
            raise CalibrationError("no K-norm ball could be built for this sensitivity space")
        sign = -1.0 if better(spec.utility.metric) == "higher" else 1.0
        best = min(candidates, key=lambda m: sign * m.expected_utility(spec.utility).score)
        if refusal is not None:
            return best
        exact = cls(epsilon, CrossBody.of(cross), space, reason, lattice=cross)
        exact.continuous_ball = {"norm_ball": best.body.kind, "radius": best.body.radius}
        mine, rival = exact.expected_utility(spec.utility), best.expected_utility(spec.utility)
        exact.stated_cost = (volume_cost(mine.log_value, rival.log_value) if spec.utility.metric == "ci_volume"
                             else exact_cost(spec.utility.metric, mine.value, rival.value))
        return exact

    @classmethod
    def _with_lattice(cls, epsilon: float, body: HullBody, problem: Problem) -> KNormMechanism:
        """K = Hull(S), on the lattice when :func:`_lattice_scope` allows it and the lattice law exists
        (:meth:`LatticeKNorm.build`). Its sampler, recorded as ``lattice_sampler``: the rejection sampler
        when its large-scale acceptance rate (:func:`~dpopt.noise.k_norm_lattice.limit_acceptance`) keeps the
        draw and its utility estimate within the stated cost
        (:func:`~dpopt.mechanisms.k_norm_lattice.estimate_refusal`), else (rank ≥ 2) the cone sampler when its
        decomposition is proven (:mod:`dpopt.noise.k_norm_cones`)."""
        space = problem.space
        refusal = _lattice_scope(problem)
        lattice = None
        if refusal is None:
            points = np.round(body.coordinates.of(body.vectors)).astype(np.int64)
            rate = limit_acceptance(body.polytope.volume, proposal_bounds(points))
            metric = problem.spec.utility.metric
            refusal = estimate_refusal(rate, body.rank, metric=metric)
            built = None
            if refusal is None:
                built = LatticeKNorm.build(body.vectors, body.polytope.normals, lattice_epsilon(epsilon))
                if isinstance(built, str):
                    refusal = built
                elif metric != "ci_volume":
                    refusal = estimate_refusal(rate, body.rank, len(built.gauge.numerators), metric)
            if refusal is not None and body.rank >= 2 and not isinstance(built, str):
                cones = LatticeKNorm.build(body.vectors, body.polytope.normals, lattice_epsilon(epsilon),
                                           sampler="cones", permutations=_permutations(body))
                if isinstance(cones, str):
                    refusal = f"{refusal}; {cones}"
                else:
                    built, refusal = cones, None
            if refusal is None and metric == "ci_volume":
                refusal = built.coverage_refusal(body.polytope.volume)
            lattice = None if refusal is not None else built
        return cls(epsilon, body, space, lattice=lattice, lattice_refusal=refusal)

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace
                        ) -> KNormMechanism | OnDecimalLattice | LatticeSumKNorm:
        if "sum_lattice" in parameters:  # its lattice_scale is the discrete Laplace's, not a decimal lattice's D
            return LatticeSumKNorm.from_parameters(parameters, space)
        if "lattice_scale" in parameters:
            return OnDecimalLattice.from_parameters(parameters, space, cls)
        kind = parameters["norm_ball"]
        basis = space.span.basis()
        if kind == "hull":
            vectors = space.hull_vectors()
            if vectors is None:
                raise ValueError("the certificate's K is Hull(S), but S cannot be listed")
            body = HullBody(vectors, basis, symmetric=parameters.get("triangulation") == SymmetricPolytope.method)
            if parameters.get("sampler") == "exact":
                lattice = LatticeKNorm.build(vectors, body.polytope.normals,
                                             Fraction(parameters["lattice_epsilon"]), recorded_bounds(parameters),
                                             parameters.get("lattice_sampler", "rejection"), _permutations(body))
                if isinstance(lattice, str):
                    raise ValueError(f"the certificate's lattice K-norm cannot be rebuilt: {lattice}")
                return cls(parameters["epsilon"], body, space, lattice=lattice)
        elif kind == CROSS_KIND:
            vectors = space.hull_vectors()
            lattice = ("the sensitivity space cannot be listed" if vectors is None else
                       cross_lattice(vectors, Fraction(parameters["lattice_epsilon"]), recorded_bounds(parameters)))
            if isinstance(lattice, str):
                raise ValueError(f"the certificate's lattice K-norm cannot be rebuilt: {lattice}")
            mechanism = cls(parameters["epsilon"], CrossBody.of(lattice), space,
                            parameters.get("fallback_reason"), lattice=lattice)
            mechanism.continuous_ball = parameters.get("continuous_ball")
            mechanism.stated_cost = parameters.get(EXACT_COST_KEY)
            return mechanism
        elif kind in BALL_KINDS:
            body = BallBody(kind, parameters["radius"], basis)
        else:
            raise ValueError(f"unknown norm_ball {kind!r}")
        return cls(parameters["epsilon"], body, space, parameters.get("fallback_reason"))

    @property
    def parameters(self) -> dict:
        out = {"epsilon": self.epsilon, "rank": self.rank, **self.body.describe(),
               "radial_law": "Gamma(shape s + 1, rate ε)", "optimal_k": self.body.optimal}
        if self.fallback_reason is not None:
            out["fallback_reason"] = self.fallback_reason
        if self.lattice is not None:
            out.update(self.lattice.describe())
            out["radial_law"] = "none: P[z] ∝ exp(−ε′‖z‖_K) on the lattice span(S) ∩ ℤ^d"
        if self.continuous_ball is not None:
            out["continuous_ball"] = self.continuous_ball
        if self.stated_cost is not None:
            out[EXACT_COST_KEY] = self.stated_cost
        return out

    def _radius(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """R ~ Gamma(shape s + 1, rate ε)."""
        return rng.gamma(self.rank + 1, 1.0 / self.epsilon, size=size)

    def noise_law(self) -> GaugeLaw:
        """The law of the emitted noise, for the second route of ``dpopt verify`` (:mod:`dpopt.noise.law`)."""
        if self.lattice is not None:
            return ("the lattice law P[z] ∝ exp(−ε′‖z‖_K) on span(S) ∩ ℤ^d has no density on the span; its privacy is "
                    "the exact check's (k_norm.lattice)")
        body = self.body
        return GaugeLaw(self.epsilon, body.gauge, np.asarray(body.basis, dtype=float), self.dimension,
                        f"density ∝ exp(−ε‖z‖_K) on the {self.rank}-dimensional span, K = {body.kind}")

    def _sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.lattice is not None:
            return self.lattice.noise(rng, size).astype(float)
        return self._radius(rng, size)[:, None] * self.body.uniform(rng, size)

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """On the lattice: the integer counts plus the integer noise z ∈ span(S) ∩ ℤ^d, in int64."""
        if self.lattice is None:
            return values + self._sample(rng, values.shape[0])
        return integer_answers(values) + self.lattice.noise(rng, values.shape[0])

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The cross-polytope's stated cost of exactness re-checked (:func:`~dpopt.mechanisms.exact_cost.
        stated_cost_check`: its exact value is this mechanism's prediction; the ball's value as recorded)."""
        if self.stated_cost is None:
            return []
        mine = self.expected_utility(problem.spec.utility)
        if mine.metric == "ci_volume":
            return [stated_volume_cost_check(self.stated_cost, mine.log_value)]
        return [stated_cost_check(self.stated_cost, mine.metric, mine.value)]

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        if self.lattice is not None:
            worst, sensitivity = self.lattice.sensitivity_check(space)
            achieved = self.lattice.epsilon * worst
            rounded = self.lattice.epsilon == lattice_epsilon(self.epsilon)
            cones = [] if self.lattice.fan is None else [self.lattice.cone_check()]
            return [sensitivity, self.body.tiling_check(), *cones, pure_privacy_check(
                achieved, privacy,
                "ε′-DP of the lattice K-norm mechanism: P[z] ∝ exp(−ε′‖z‖_K) on span(S) ∩ ℤ^d, S inside it, and the "
                "triangle inequality of the gauge give ε′·sup_{v∈S}‖v‖_K-DP (Hardt & Talwar 2010, Thm 4.3, on a "
                "lattice); exact rational product; ε′ is the recorded ε rounded down to 21 bits",
                f"ε′·sup‖v‖_K = {achieved} ≈ {float(achieved):.17g}; ε′ = {self.lattice.epsilon} is ε = "
                f"{self.epsilon!r} rounded down: {rounded}", premise=sensitivity.passed and rounded,
            )]
        if isinstance(self.body, HullBody):
            worst, sensitivity = self.body.sensitivity_check(space)
            extra = [self.body.tiling_check()]
        else:
            worst, sensitivity = self.body.sensitivity_check(space, self._vectors)
            extra = self._excess_cost_checks()
        achieved = Fraction(self.epsilon) * worst
        verdict = pure_privacy_check(
            achieved, privacy,
            "ε-DP of the K-norm mechanism: density ∝ exp(−ε‖z‖_K) on span(S) and sup_{v∈S}‖v‖_K ≤ 1 give "
            "ε·sup‖v‖_K-DP (Hardt & Talwar 2010; Cho & Awan, Thm 31); exact rational product",
            f"ε·sup‖v‖_K = {float(achieved):.17g}", premise=sensitivity.passed,
        )
        return [sensitivity, *extra, verdict]

    def _excess_cost_checks(self) -> list[Check]:
        if self._vectors is None:
            return [Check("k_norm.excess_cost", "lower bound on the optimal K's cost", True,
                          "not the optimal K; no bound: the sensitivity space cannot be listed")]
        bound, how = optimal_cost_lower_bound(self._vectors, self._basis, self.epsilon)
        cost = self._expected_l2(None)
        return [Check(
            "k_norm.excess_cost",
            f"E‖Z‖₂² of this ball vs a lower bound for K = Hull(S) ({how})",
            bound > 0 and cost >= bound,
            f"not the optimal K ({self.body.kind} ball): E‖Z‖₂² = {cost:.6g} ≤ {cost / bound:.4g} × "
            f"the lower bound {bound:.6g} for the optimal K-norm mechanism",
        )]

    def notes(self) -> list[str]:
        if self.lattice is not None:
            body = (f"K = Hull(S) with {len(self.lattice.gauge.numerators)} rational facets"
                    if isinstance(self.body, HullBody) else
                    f"K the cross-polytope {{Σ_k |c_k|/M_k ≤ 1}} of the lattice coordinates c, M_k = "
                    f"{list(self.lattice.gauge.l1_bounds)} (not the optimal K: {self.fallback_reason})")
            notes = [EXACT_K_NORM_NOTE if self.lattice.fan is None else EXACT_K_NORM_CONE_NOTE, (
                f"noise on the {self.rank}-dimensional lattice span(S) ∩ ℤ^d, {body}, ε′ = {self.lattice.epsilon}; "
                "the component of the answer orthogonal to the span (e.g. invariant margins, the total under "
                "replace_one) is released exactly"
            )]
            if self.stated_cost is not None:
                notes.append(f"against the floating-point design's best ball ({self.continuous_ball['norm_ball']}, "
                             f"sampler: floating_point): {cost_text(self.stated_cost)}")
            return notes
        notes = super().notes() + [(
            f"noise R·U on the {self.rank}-dimensional span of the sensitivity space: R ~ Gamma(shape "
            f"{self.rank + 1}, rate ε), U uniform on K; the component of the answer orthogonal to the "
            "span (e.g. invariant margins, the total under replace_one) is released exactly"
        )]
        if isinstance(self.body, HullBody):
            notes.append("K = Hull(S), the optimal K-norm mechanism; U drawn exactly by the cone "
                         "decomposition of K over qhull's triangulated facets")
            if isinstance(self.body.polytope, SymmetricPolytope):
                notes.append(f"K built up to its symmetry group of table moves (order "
                             f"{self.body.polytope.group_order}): {len(self.body.polytope.tight)} facet "
                             "orbits; a draw picks an orbit's cone by volume, then a uniform group element")
        elif self.fallback_reason is not None:
            notes.append(f"K is NOT the optimal K: {self.fallback_reason}; K is the smallest "
                         f"{self.body.kind} ball of the span containing S (see check k_norm.excess_cost)")
        else:
            notes.append(f"K is the {self.body.kind} ball of radius {self.body.radius:.17g}")
        if self.lattice_refusal is not None:
            notes.append(f"floating-point sampler: {self.lattice_refusal}")
        return notes

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        epsilon = self.epsilon if self.lattice is None else float(self.lattice.epsilon)
        return {"epsilon": epsilon, "rho": epsilon**2 / 2.0,
                "conversion": "ε-DP ⇒ ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)"}

    # ------------------------------------------------------------------ utility
    def _utility(self, utility) -> UtilityValue | None:
        """The lattice law's prediction (:meth:`LatticeKNorm.utility`); None for the continuous law."""
        if self.lattice is None:
            return None
        cross = isinstance(self.body, CrossBody)
        if utility.metric == "ci_volume":
            return self.lattice.ci_volume(utility.alpha, self.body.log_volume if cross
                                          else math.log(self.body.polytope.volume))
        if cross:
            closed = cross_utility(self.lattice, utility.metric, workload_matrix(utility))
            if closed is not None:
                return closed
        return self.lattice.utility(utility.metric, workload_matrix(utility), utility.gamma)

    @property
    def radius_second_moment(self) -> float:
        """E R² = (s + 1)(s + 2)/ε²."""
        return (self.rank + 1) * (self.rank + 2) / self.epsilon**2

    def _expected_l2(self, workload: np.ndarray | None) -> float:
        body = self.body
        if isinstance(body, BallBody):  # tr c²E U_i²(WB)(WB)ᵀ = c²E U_i²‖WB‖_F², without the d × d product
            image = body.radius * (body.basis if workload is None else workload @ body.basis)
            return self.radius_second_moment * body.ball.coordinate_second_moment * float(np.sum(image**2))
        return self.radius_second_moment * float(np.trace(body.second_moment(workload)))

    def _max_variance(self) -> float:
        return self.radius_second_moment * float(np.diag(self.body.second_moment(None)).max())

    def _expected_l1(self) -> float | None:
        mean = self.body.mean_l1()
        return None if mean is None else (self.rank + 1) / self.epsilon * mean

    def expected_l2_norm(self, draws: int = MONTE_CARLO_DRAWS, seed: int = MONTE_CARLO_SEED) -> UtilityValue:
        """E‖Z‖₂ = E R · E‖U‖₂ with E R = (s + 1)/ε (R and U independent).

        E‖U‖₂ is c·E‖U_B‖₂ for a ball (exact for l2, one-dimensional integration for l1 and
        l∞; an orthonormal basis keeps ‖·‖₂), exact for a segment, and otherwise a Monte Carlo
        mean over ``draws`` uniform points of K, with its 95% interval.
        """
        factor = (self.rank + 1) / self.epsilon
        closed = self.body.mean_l2_norm()
        if closed is not None:
            return UtilityValue("mean_l2_norm", factor * closed[0], f"(s+1)/ε · E‖U‖₂, {closed[1]}")
        norms = np.linalg.norm(self.body.uniform(np.random.default_rng(seed), draws), axis=1)
        mean, se = float(norms.mean()), float(norms.std(ddof=1) / math.sqrt(draws))
        return UtilityValue("mean_l2_norm", factor * mean,
                            f"(s+1)/ε · E‖U‖₂, Monte Carlo over {draws} uniform points of K, seed {seed}",
                            (factor * (mean - 1.96 * se), factor * (mean + 1.96 * se)))

    def _log_ci_volume(self, alpha: float) -> float:
        """log(t^s vol K) with t the (1 − α) quantile of ‖Z‖_K ~ Gamma(s, rate ε) (a log: beyond the double range
        at a few hundred dimensions, :mod:`dpopt.stats.log_volume`)."""
        t = special.gammaincinv(self.rank, 1.0 - alpha) / self.epsilon
        return self.body.log_volume + self.rank * math.log(t)

    def _inference_draws(self, metric, z, alpha, alternative) -> VolumeTerms:
        """``ci_volume``: importance weights 1{‖Z‖_K ≤ t}/f(Z), f(z) = ε^s e^{−ε‖z‖_K}/(s! vol K)
        the noise density on the span, whose mean is the region's volume; in units of that volume
        (:meth:`_log_ci_volume`), so that they stay finite in any dimension.

        Raises
        ------
        UnsupportedSpecError
            For ``test_power`` (no estimator of the K-norm likelihood-ratio test in this version).
        """
        if metric != "ci_volume":
            raise UnsupportedSpecError("utility.metric", f"k_norm has no '{metric}' prediction in this version")
        s = self.rank
        g = self.body.gauge(z)
        t = special.gammaincinv(s, 1.0 - alpha) / self.epsilon
        log_inverse_density = self.body.log_volume + math.lgamma(s + 1) - s * math.log(self.epsilon)
        unit = self._log_ci_volume(alpha)
        return VolumeTerms(unit, np.where(g <= t, np.exp(log_inverse_density - unit + self.epsilon * np.minimum(g, t)),
                                          0.0))


def _permutations(body: HullBody) -> np.ndarray | None:
    """The point permutations of the hull's symmetry group (None without one), for the cone sampler."""
    return body.polytope.permutations if isinstance(body.polytope, SymmetricPolytope) else None


def _lattice_scope(problem: Problem) -> str | None:
    """Why the spec keeps the floating-point K-norm before any lattice is tried (None: the lattice law may serve
    it, :mod:`dpopt.mechanisms.k_norm_lattice`)."""
    spec = problem.spec
    if spec.sampler == "floating_point":
        return "the spec asks for sampler: floating_point"
    if not counting_query(problem):
        return "the query's answers are not integer counts (no lattice holds the neighbouring differences)"
    if spec.utility.metric not in LATTICE_METRICS:
        return f"the {spec.utility.metric} prediction is of the continuous K-norm law"
    return None
