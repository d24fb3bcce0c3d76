r"""The discrete K-norm mechanism: K = Hull(S) on the lattice L = span(S) ∩ ℤ^d (pure ε-DP, exact noise).

For a counting query the neighbouring differences S are integer vectors of the span V = span(S), so they lie
in the lattice L = V ∩ ℤ^d. The release is x + Z with Z ∈ L drawn from

.. math:: P[Z = z] \propto \exp(-\varepsilon' \|z\|_K), \qquad z \in L,

computed in integers (x the exact counts), so no floating-point number touches it; the component of x off V is
kept (Z ∈ V), as with the continuous K-norm.

**Privacy.** For neighbours with φ(X) − φ(X′) = δ ∈ S ⊂ L, translation by δ maps L onto itself and
P[Z = y − φ(X)]/P[Z = y − φ(X′)] = exp(ε′(‖y − φ(X′)‖_K − ‖y − φ(X)‖_K)) ≤ exp(ε′‖δ‖_K) ≤ e^{ε′} by the
triangle inequality of the gauge, a sublinear function (a maximum of linear forms): exactly ε′·sup_{v∈S}‖v‖_K-DP
for **any** list of rational facets, the sup checked exactly over the listed vectors. The normalising sum over L
is the same for both neighbours. The other targets follow from the pure guarantee by the conversions the
continuous family uses (:func:`~dpopt.privacy.pure_conversion.pure_implies`), unchanged.

**Basis.** The reduced row echelon form R (s × d) of the listed vectors, computed in exact rationals; when it is
integral, L = {cR : c ∈ ℤ^s} (a point z of V is z[J]·R, J the pivot columns, and z[J] is integral when z is), so
c = z[J] are the lattice coordinates, canonical and re-derived by ``dpopt verify``. A space whose echelon form is
not integral keeps the floating-point sampler.

**Facets.** K = Hull(S) in the coordinates c: each facet of the floating-point hull
(:class:`~dpopt.geometry.Polytope`) is made exact from the listed vectors on it
(:mod:`dpopt.noise.rational_facets`: s of them proven independent by an exact determinant d, the normal
a = adj(B)·1/d, then ⟨a, p⟩ = 1 checked in integers on each of them; a rational solve where that route does not
apply); privacy needs only that every listed vector has g(v) ≤ 1, which the exact check establishes. With M_k from :func:`proposal_bounds` (the plain M = max_{v∈S}‖v[J]‖₁,
or M_k = s·max_v|v[J]_k| when their product is smaller), K ⊂ {Σ_k |c_k|/M_k ≤ 1} (a convex set contains the hull
of its points), so adding h(c) = Σ_k |c_k|/M_k to the maximum changes nothing on Hull(S) and gives the sampler's
bound g(c) ≥ h(c) by construction (:mod:`dpopt.noise.k_norm_lattice`). That g is the gauge of Hull(S) itself rests
on the facet list being complete, which the floating-point hull's closed-boundary check
(``k_norm.cone_decomposition``) shows.

**ε′.** The ε₀ the target allows (:func:`~dpopt.privacy.pure_conversion.pure_epsilon_for`) rounded down to 21
significant bits (a dyadic rational; equal to it for targets like 0.5 or 1), recorded as a fraction.

**Utility.** At rank 1 the coordinate c is discrete Laplace of scale 1/(ε′κ), κ = ‖u‖_K for the basis vector u:
E‖WZ‖², E‖Z‖₁ and usefulness are exact closed forms. Above, they are **Monte Carlo estimates** by importance
sampling from the sampler's proposal (independent discrete Laplace coordinates of scales M_k/ε′): with weights
w(c) = exp(−ε′(g(c) − h(c))), E_p f = E_q[wf]/E_q[w], the 95% interval from the delta method, and E_q[w] is
the sampler's acceptance rate; the note gives the Kish effective sample size (Σw)²/Σw², at least Σw as w ≤ 1.
The family keeps the floating-point sampler when that estimate is out of its stated cost
(:func:`estimate_refusal`): fewer than :data:`MIN_EFFECTIVE_DRAWS` guaranteed effective draws (acceptance limit
below 10⁻³) or more than :data:`MAX_ESTIMATE_WORK` gauge multiply-adds. The 4×4 table with both margins fails
both (acceptance 2.1·10⁻⁴; 3,818 facets at rank 9: 3.4·10¹⁰, about a minute).

**Cone sampler.** Then (rank ≥ 2) the law is drawn by the half-open cone decomposition of K's boundary
(:mod:`dpopt.noise.k_norm_cones`), built and proven in integers (claim ``k_norm.lattice_cones``; refused, with
its reason, when the proof fails), and ``l2``, ``l1``, ``usefulness`` are the plain Monte Carlo mean of its exact
draws (fixed seed, the CLT's 95% interval, :data:`CONE_DRAWS`). The choice is canonical (the design's rule
above) and recorded as ``lattice_sampler: cones``, so ``dpopt verify`` and ``release`` rebuild the same sampler.
The 4×4 table: 997,280 cones (34,896 over its 9 facet orbits), Σ|d| = 1,069,376, a round accepting with
probability 0.117; E‖Z‖² = 963.94 [959.19, 968.68] against the continuous law's 964.03.

``ci_volume`` is proven, at any rank: the smallest r = k/D whose coverage P(‖Z‖_K ≤ r) ≥ 1 − α is established from exact level counts and a tail
bound (:mod:`dpopt.noise.k_norm_lattice_coverage`), or for the cross-polytope (no facet) from the convolution of its
independent coordinates' laws (:mod:`dpopt.stats.k_norm_cross_coverage`); the region's volume r^s·vol K.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.integer_matrices import integer_product
from dpopt.mechanisms.base import MONTE_CARLO_SEED, UtilityValue
from dpopt.mechanisms.integer_noise import dyadic_floor
from dpopt.noise.discrete_laplace import discrete_laplace_moments
from dpopt.noise.k_norm_cones import ConeFan, FanError, acceptance_rate, build_fan, sample_cone_k_norm
from dpopt.noise.k_norm_lattice import LatticeGauge, proposal_scale, sample_lattice_k_norm
from dpopt.noise.k_norm_lattice_coverage import MAX_POINTS, coverage_level, enumeration_size, level_cap
from dpopt.noise.rational_facets import rational_facets
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.stats.k_norm_cross_coverage import cross_coverage_level
from dpopt.stats.log_volume import exp_or_inf, volume_text

LATTICE_METRICS = ("l2", "l1", "usefulness", "max_variance", "ci_volume")
"""Metrics predicted for the discrete law (exact at rank 1, importance sampling or the cone sampler's Monte Carlo
above; ``ci_volume`` a proven coverage, :meth:`LatticeKNorm.ci_volume`)."""

MAX_PROPOSALS_PER_DRAW = 100_000
"""Most expected proposals per exact draw, 1/(vol K/vol(M·B₁)): a draw of ``age_summary_ci_volume`` (9,500
proposals at rank 3, 8 facets) measured 17 ms of CPU, so 10⁵ proposals stay well under a second at rank ≤ 9."""

PROPOSALS = 1_000_000
"""Proposals of the importance-sampling estimate (fixed seed :data:`~dpopt.mechanisms.base.MONTE_CARLO_SEED`),
drawn in batches of :data:`PROPOSAL_BATCH`."""

PROPOSAL_BATCH = 100_000
"""Proposals held at once (a batch of the 4×4 table: 100,000 × 9 coordinates and 16 cells)."""

ESTIMATE_PRECISION = 0.005
"""The importance-sampling estimate stops after the first batch (from the second on) at which its 95% interval's
half-width is at most this fraction of the estimate, or at :data:`PROPOSALS`: a deterministic rule of the fixed
seed's batches, so the estimate is reproducible."""

MIN_EFFECTIVE_DRAWS = 1_000
"""Fewest effective draws the importance-sampling estimate may rest on. The weights are at most 1, so its Kish
effective sample size (Σw)²/Σw² is at least Σw = :data:`PROPOSALS` × the acceptance rate: the family needs a
large-scale acceptance vol K/vol(M·B₁) of at least 1,000/10⁶ = 10⁻³ (:func:`estimate_refusal`)."""

MAX_ESTIMATE_WORK = 10**9
"""Most multiply-adds of the gauge in the importance-sampling estimate, :data:`PROPOSALS` × F × s (F rational
facets, rank s), its worst case (the estimate may stop earlier, :data:`ESTIMATE_PRECISION`): about 2 CPU seconds at
the 1.7 ns per multiply-add measured for the 4×4 table's gauge in integers (0.58 s for 10⁴ proposals × 3,818 facets
× 9 coordinates, load average about 9 on 2 cores); the estimate now forms it in double precision, about 6 times
faster (0.10 s there), so the bound is conservative."""

CONE_DRAWS = 400_000
"""Most exact draws of the cone sampler's plain Monte Carlo (fixed seed :data:`MONTE_CARLO_SEED`), drawn in
batches of :data:`CONE_BATCH` and stopped by the :data:`ESTIMATE_PRECISION` rule."""

CONE_BATCH = 20_000
"""Draws per batch of the cone sampler's Monte Carlo (the 4×4 table: about 0.1 s a batch)."""

EXACT_K_NORM_NOTE = (
    "exact sampler: the noise is a point of the lattice span(S) ∩ ℤ^d drawn in integer arithmetic from "
    "P[z] ∝ exp(−ε′‖z‖_K) (discrete Laplace proposals and Bernoulli(exp(−rational)) acceptance, Canonne, Kamath & "
    "Steinke 2020, Algorithms 1–2) and added to the integer counts; no floating point touches the release. "
    "Randomness: the numpy Generator passed to release (dpopt release: AES-CTR CSPRNG keyed from OS entropy unless "
    "--insecure-seed). Not covered: timing (the rejection rounds depend on the noise drawn, not on the data)"
)

EXACT_K_NORM_CONE_NOTE = (
    "exact sampler: the noise is a point of the lattice span(S) ∩ ℤ^d drawn in integer arithmetic from "
    "P[z] ∝ exp(−ε′‖z‖_K) by a half-open cone decomposition of K's boundary proven in integers (check "
    "k_norm.lattice_cones): a uniform cone and lattice residue, a Bernoulli(exp(−rational)) acceptance and exact "
    "geometric multiples of the cone's generators (Canonne, Kamath & Steinke 2020, Algorithms 1–2; Köppe & "
    "Verdoolaege 2008); the integer noise is added to the integer counts; no floating point touches the release. "
    "Randomness: the numpy Generator passed to release (dpopt release: AES-CTR CSPRNG keyed from OS entropy unless "
    "--insecure-seed). Not covered: timing (the rejection rounds depend on the noise drawn, not on the data)"
)


def lattice_epsilon(epsilon0: float) -> Fraction:
    """ε′: the float ε₀ rounded down to a dyadic rational of 21 significant bits."""
    return dyadic_floor(Fraction(epsilon0))


def estimate_refusal(rate: float, rank: int, facets: int | None = None, metric: str = "l2") -> str | None:
    """Why the exact sampler or its utility prediction is out of the stated cost (None: within it): more than
    :data:`MAX_PROPOSALS_PER_DRAW` expected proposals per draw at the large-scale acceptance ``rate``; and for the
    importance-sampled metrics (not ``ci_volume``), fewer than :data:`MIN_EFFECTIVE_DRAWS` guaranteed effective
    draws, or more than :data:`MAX_ESTIMATE_WORK` multiply-adds of the gauge over ``facets`` rational facets (when
    known)."""
    if rate * MAX_PROPOSALS_PER_DRAW < 1:
        return (f"the exact sampler would accept about {rate:.2g} of its proposals (vol K/vol(M·B₁) at rank {rank}): "
                f"over {MAX_PROPOSALS_PER_DRAW:,} proposals per draw")
    if metric == "ci_volume" or rank == 1:
        return None
    if PROPOSALS * rate < MIN_EFFECTIVE_DRAWS:
        return (f"the exact sampler would accept about {rate:.2g} of its proposals (vol K/vol(M·B₁) at rank {rank}): "
                f"its {PROPOSALS:,} importance-sampling proposals would guarantee only {PROPOSALS * rate:.0f} "
                f"effective draws of the lattice law (at least {MIN_EFFECTIVE_DRAWS:,} needed)")
    if facets is not None and PROPOSALS * facets * rank > MAX_ESTIMATE_WORK:
        return (f"the importance-sampling estimate would cost {PROPOSALS * facets * rank:.2g} multiply-adds of the "
                f"gauge ({facets} rational facets, rank {rank}; at most {MAX_ESTIMATE_WORK:.0e})")
    return None


def echelon_lattice(vectors: np.ndarray) -> tuple[tuple[int, ...], np.ndarray] | str:
    """The pivot columns J and the integral reduced row echelon form R (s × d, int64) of the rows of ``vectors``
    (the lattice basis), or the reason there is none (not integer vectors, or a non-integral echelon form).

    R is the reduced echelon form of a few of the rows, grown until it holds them all: start from none; take the
    first (at most d) rows outside the current row space and reduce them with R in exact rationals
    (python-flint); stop when every row v satisfies q·v = v[J]·P, R = P/q, checked in integers
    (:func:`~dpopt.core.integer_matrices.integer_product`). The rows taken are rows of S and S lies in their span,
    so both spans are span(S), whose reduced echelon form is unique: R is the one of all of S, found with a few
    small eliminations instead of one over all n rows (the 39,800 differences of a 200-cell replace-one histogram:
    0.3 s against 8 s)."""
    rows = np.asarray(vectors, dtype=float)
    if np.any(rows != np.round(rows)) or np.any(np.abs(rows) > 2.0**31):
        return "the neighbouring differences are not (small) integer vectors"
    integers = rows.astype(np.int64).reshape(len(rows), -1)
    d = integers.shape[1]
    columns: tuple[int, ...] = ()
    numerator, denominator = np.zeros((0, d), dtype=np.int64), 1
    outside = np.arange(len(integers))
    while len(outside):
        reduced = _reduced_echelon(np.vstack([numerator, integers[outside[:d]]]))
        if isinstance(reduced, str):
            return reduced
        columns, numerator, denominator = reduced
        outside = _outside_rows(integers, columns, numerator, denominator)
    if np.any(numerator % denominator):
        return "the reduced echelon form of the sensitivity space is not integral (no canonical lattice basis)"
    return columns, numerator // denominator


ROW_BLOCK_ENTRIES = 1 << 22
"""Entries (32 MB of int64) per block of rows in :func:`_outside_rows`."""


def _outside_rows(rows: np.ndarray, columns: tuple[int, ...], numerator: np.ndarray, denominator: int) -> np.ndarray:
    """The indices of the integer ``rows`` v outside the row space of the reduced echelon form P/q (pivot
    ``columns`` J): those with q·v ≠ v[J]·P, in integers, block by block of rows."""
    step = max(1, ROW_BLOCK_ENTRIES // max(1, rows.shape[1]))
    out = []
    for start in range(0, len(rows), step):
        block = rows[start:start + step]
        image = integer_product(block[:, list(columns)], numerator)
        out.append(start + np.flatnonzero(np.any(image != denominator * block, axis=1)))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _reduced_echelon(rows: np.ndarray) -> tuple[tuple[int, ...], np.ndarray, int] | str:
    """The pivot columns, the integer numerator P (int64) and the denominator q of the reduced echelon form P/q of
    the integer ``rows``, exactly (python-flint); or why it leaves int64."""
    from flint import fmpq_mat  # imported where used: python-flint loads in ~0.1 s

    n, d = rows.shape
    echelon, rank = fmpq_mat(n, d, rows.ravel().tolist()).rref()
    numerator, denominator = echelon.numer_denom()
    entries = [int(x) for x in numerator.entries()[:rank * d]]
    if abs(int(denominator)) >= 2**31 or any(abs(x) >= 2**31 for x in entries):
        return "the reduced echelon form of the sensitivity space leaves the int64 range"
    matrix = np.array(entries, dtype=np.int64).reshape(rank, d)
    return tuple(int(np.flatnonzero(row)[0]) for row in matrix), matrix, int(denominator)


def proposal_bounds(points: np.ndarray) -> tuple[int, ...]:
    """The canonical M_k of the proposal's ball {Σ_k |c_k|/M_k ≤ 1} ⊇ K = Hull(points) (integer points, shape
    (n, s)): the plain M·B₁, M = max ‖v‖₁, unless the weighted ball M_k = s·max_v |v_k| is smaller
    (∏_k M_k < M^s: a larger acceptance s!·vol K/∏ 2M_k). Both hold K: Σ_k |v_k|/(s·max|v_k|) ≤ s·(1/s) = 1."""
    points = np.abs(np.asarray(points, dtype=np.int64))
    s = points.shape[1]
    plain = int(points.sum(axis=1).max())
    weighted = tuple(s * int(h) for h in points.max(axis=0))
    return weighted if math.prod(weighted) < plain**s else (plain,) * s


def recorded_bounds(parameters: dict) -> tuple[int, ...] | None:
    """The M_k a certificate records: ``l1_bounds`` (a list), or ``l1_bound`` M for every coordinate (its
    ``pivot_columns`` give the rank)."""
    if "l1_bounds" in parameters:
        return tuple(int(m) for m in parameters["l1_bounds"])
    if "l1_bound" in parameters:
        return (int(parameters["l1_bound"]),) * len(parameters["pivot_columns"])
    return None


def rational_gauge(normals: np.ndarray, points: np.ndarray) -> LatticeGauge | str:
    """The :class:`~dpopt.noise.k_norm_lattice.LatticeGauge` of Hull(points) from the floating-point facet
    ``normals`` (rows a, ⟨a, y⟩ ≤ 1), each made exact on the integer ``points`` it holds
    (:func:`~dpopt.noise.rational_facets.rational_facets`); or the reason it cannot be built."""
    points = np.asarray(points, dtype=np.int64)
    s = points.shape[1]
    exact = rational_facets(normals, points)
    if isinstance(exact, str):
        return exact
    numerators, denominators = exact
    bounds = proposal_bounds(points)
    denominator = math.lcm(*bounds, *(int(q) for q in np.unique(denominators)))
    if float(denominator) * float(np.abs(numerators).max(initial=0)) >= 2.0**62:
        return "the rational facets' common denominator leaves the int64 range"
    scaled = numerators * (denominator // denominators)[:, None]
    return LatticeGauge(np.unique(scaled, axis=0).reshape(-1, s), denominator, bounds)


@dataclass(frozen=True, eq=False)
class LatticeKNorm:
    """The discrete K-norm law on L = {cR : c ∈ ℤ^s}: c ~ P ∝ exp(−ε′ g(c)) (module docstring).

    Attributes
    ----------
    columns : tuple of int
        The pivot columns J (c = z[J]).
    echelon : ndarray of int64, shape (s, d)
        R, the integral reduced echelon form of S.
    gauge : LatticeGauge
        g on the coordinates c.
    epsilon : Fraction
        ε′.
    extents : tuple of int
        h_k = max_{v∈S} |v[J]_k|, the extents of K along the coordinates (the ``ci_volume`` enumeration box).
    fan : ConeFan or None
        The proven half-open cone decomposition when the cone sampler defines the mechanism
        (:mod:`dpopt.noise.k_norm_cones`); None: the rejection sampler of :mod:`dpopt.noise.k_norm_lattice`.
    fan_proof : str
        What the decomposition's integer proof found (empty without a fan).
    """

    columns: tuple[int, ...]
    echelon: np.ndarray
    gauge: LatticeGauge
    epsilon: Fraction
    extents: tuple[int, ...]
    fan: ConeFan | None = None
    fan_proof: str = ""
    _estimates: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, vectors: np.ndarray, normals: np.ndarray, epsilon: Fraction,
              l1_bounds: tuple[int, ...] | None = None, sampler: str = "rejection",
              permutations: np.ndarray | None = None) -> LatticeKNorm | str:
        """From the listed vectors and the hull's facet normals (in pivot coordinates); ``l1_bounds`` recorded
        M_k (default: :func:`proposal_bounds` of the listed vectors); ``sampler`` "rejection" (discrete Laplace
        proposals) or "cones" (:func:`~dpopt.noise.k_norm_cones.build_fan`, with the point ``permutations`` of
        a symmetry group of the listed vectors, checked there). A string: why there is no lattice law."""
        basis = echelon_lattice(vectors)
        if isinstance(basis, str):
            return basis
        columns, echelon = basis
        points = np.round(np.asarray(vectors)[:, list(columns)]).astype(np.int64)
        gauge = rational_gauge(normals, points)
        if isinstance(gauge, str):
            return gauge
        if l1_bounds is not None and tuple(l1_bounds) != gauge.l1_bounds:
            if len(l1_bounds) != gauge.rank or min(l1_bounds) < 1:
                return f"the recorded l1 bounds {list(l1_bounds)} are not one positive integer per coordinate"
            denominator = math.lcm(gauge.denominator, *l1_bounds)
            gauge = LatticeGauge(gauge.numerators * (denominator // gauge.denominator), denominator,
                                 tuple(int(m) for m in l1_bounds))
        extents = tuple(int(h) for h in np.abs(points).max(axis=0))
        if sampler == "rejection":
            return cls(columns, echelon, gauge, Fraction(epsilon), extents)
        if sampler != "cones":
            return f"unknown lattice sampler {sampler!r}"
        try:
            fan = build_fan(points, gauge, permutations)
        except FanError as exc:
            return f"the cone sampler's decomposition was not proven: {exc}"
        return cls(columns, echelon, gauge, Fraction(epsilon), extents, fan, fan.proof)

    @property
    def rank(self) -> int:
        return len(self.columns)

    def coordinates(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact draws of the lattice coordinates c (int64, shape (size, s)), by the mechanism's
        sampler."""
        if self.fan is not None:
            return sample_cone_k_norm(rng, self.fan, self.epsilon, size)
        return sample_lattice_k_norm(rng, self.gauge, self.epsilon, size)

    def noise(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact draws of Z = cR (int64, shape (size, d))."""
        return integer_product(self.coordinates(rng, size), self.echelon)

    def describe(self) -> dict:
        bounds = self.gauge.l1_bounds
        ball = {"l1_bound": bounds[0]} if len(set(bounds)) == 1 else {"l1_bounds": list(bounds)}
        cones = {} if self.fan is None else self.fan.describe()
        return {"sampler": "exact", "lattice_epsilon": str(self.epsilon), **ball,
                "lattice_basis": "reduced row echelon form of S (integral)", "pivot_columns": list(self.columns),
                "rational_facets": len(self.gauge.numerators), "facet_denominator": self.gauge.denominator, **cones}

    def cone_check(self) -> Check:
        """The cone decomposition's integer proof (:func:`~dpopt.noise.k_norm_cones.fan_check`), run when the
        fan was built; the sampler is refused when it fails, so a built fan passed."""
        return Check(
            "k_norm.lattice_cones",
            "the cone sampler draws P[z] ∝ exp(−ε′‖z‖_K) exactly: its half-open simplicial cones partition ℤ^s "
            "(every facet of K triangulated by listed vectors on it, proven in integers: each interior (s−2)-face "
            "shared by two simplices on opposite sides, the others on a second listed facet, one test point inside "
            "exactly one simplex per facet; the facet list closed under the checked symmetry group; a generic "
            "reference point for the half-open rule), and ‖·‖_K = Σλ on each cone",
            self.fan is not None, self.fan_proof or "no cone decomposition")

    # ------------------------------------------------------------------ checks
    def sensitivity_check(self, space: SensitivitySpace) -> tuple[Fraction, Check]:
        """S ⊂ L and sup_{v∈S} g(v), exactly: the basis re-derived, v = v[J]·R in integers, g(v) = G(v)/D."""
        vectors = space.hull_vectors()
        claim = "k_norm.lattice"
        if vectors is None:
            return Fraction(0), Check(claim, "exact lattice K-norm", False, "the sensitivity space cannot be listed")
        basis = echelon_lattice(vectors)
        if isinstance(basis, str) or basis[0] != self.columns or not np.array_equal(basis[1], self.echelon):
            return Fraction(0), Check(claim, "exact lattice K-norm", False,
                                      "the recorded lattice basis is not the reduced echelon form of S")
        v = np.round(vectors).astype(np.int64)
        c = v[:, list(self.columns)]
        in_lattice = bool(np.array_equal(integer_product(c, self.echelon), v))
        top = int(self.gauge.scaled(c).max(initial=0))
        worst = Fraction(top, self.gauge.denominator)
        canonical = proposal_bounds(c)
        passed = in_lattice and worst <= 1 and canonical == self.gauge.l1_bounds
        return worst, Check(
            claim,
            "exact lattice K-norm: the integral reduced echelon form R of S re-derived in rationals; every listed "
            "vector (S, or the generators of Hull(S) its derivation states) v = v[J]·R in integers; S ⊂ L, every "
            "move being an integer point of span(S) = row space of R; sup_{v∈S} ‖v‖_K = max G(v)/D over the "
            "rational facets (convex: attained at the generators) and "
            "h(v) = Σ_k |v[J]_k|/M_k, in integers; the M_k re-derived (the plain bound M = max ‖v[J]‖₁, or "
            "M_k = s·max|v[J]_k| when ∏M_k < M^s; g(c) ≥ h(c): every acceptance probability "
            "exp(−ε′(g(c) − h(c))) is at most 1)",
            passed,
            f"{len(v)} listed vectors in L: {in_lattice}; {len(self.gauge.numerators)} rational facets, D = "
            f"{self.gauge.denominator}; max ‖v‖_K = {worst}; M_k = {list(self.gauge.l1_bounds)} (re-derived "
            f"{list(canonical)}); ε′ = {self.epsilon}, proposal scales M_k/ε′ = "
            f"{[str(x) for x in proposal_scale(self.epsilon, self.gauge)]}",
        )

    # ------------------------------------------------------------------ utility
    def ci_volume(self, alpha: float, log_volume: float) -> UtilityValue:
        """(r)^s·vol K for the smallest r = k/D whose coverage P(‖Z‖_K ≤ r) ≥ 1 − α is proven: for the
        cross-polytope gauge (no facet) by convolving its independent coordinates
        (:func:`~dpopt.stats.k_norm_cross_coverage.cross_coverage_level`), else from exact level counts and a tail
        bound in arb ball arithmetic (:func:`~dpopt.noise.k_norm_lattice_coverage.coverage_level`); ``log_volume`` is
        log vol K in the coordinates c (floating point: a predicted utility). The region lies in span(S) ⊂ ℝ^d, where
        z = cR: its volume there is r^s·vol K·√det(RRᵀ) (:attr:`span_volume_factor`), the measure the
        floating-point K-norm's region (:class:`~dpopt.mechanisms.k_norm.HullBody`, the norm balls) is stated in;
        stated by its logarithm, as vol K underflows and r^s overflows at a few hundred dimensions
        (:mod:`dpopt.stats.log_volume`)."""
        volume = exp_or_inf(log_volume)
        level = self._coverage(alpha, volume)
        radius = Fraction(level.level, self.gauge.denominator)
        cap = Fraction(level.level_cap, self.gauge.denominator)
        if self.is_cross:
            how = (f"the law of D·‖z‖_K = Σ_k (D/M_k)|c_k| convolved from its {self.rank} independent discrete "
                   f"Laplace coordinates ({level.groups} group(s) of equal M_k, convolution powers) up to "
                   f"‖z‖_K ≤ {cap}, each coordinate's law rounded down from arb balls, less the proven rounding "
                   f"bound {level.error:.3g}")
        else:
            how = (f"the {level.points} lattice points with ‖z‖_K ≤ {cap} counted exactly, the rest bounded by "
                   f"{level.tail_bound:.3g}, in arb ball arithmetic")
        factor = self.span_volume_factor
        log_value = self.rank * math.log(radius) + log_volume + 0.5 * self._log_gram_determinant
        volume_text_k = f"{volume:.10g}" if 0.0 < volume < math.inf else volume_text(log_volume, 10)
        return UtilityValue.volume(log_value, (
            f"proven coverage: the region {{θ : ‖y − θ‖_K ≤ r}}, r = {radius}, covers with probability ≥ "
            f"{level.coverage:.10f} ≥ 1 − α under the lattice law ({how}); volume r^s·vol K·√det(RRᵀ) in span(S), "
            f"vol K = {volume_text_k} in the lattice coordinates c, √det(RRᵀ) = {factor:.10g}"))

    @property
    def span_volume_factor(self) -> float:
        """√det(RRᵀ): the s-dimensional volume in ℝ^d of the image of the unit cube of the coordinates c under
        c ↦ cR (the Gram determinant; floating point, for a predicted utility)."""
        return exp_or_inf(0.5 * self._log_gram_determinant)

    @property
    def _log_gram_determinant(self) -> float:
        """log det(RRᵀ) (NaN when not positive)."""
        rows = self.echelon.astype(float)
        sign, log_det = np.linalg.slogdet(rows @ rows.T)
        return float(log_det) if sign > 0 else math.nan

    @property
    def is_cross(self) -> bool:
        """Whether K is the cross-polytope {h ≤ 1} (no facet: g = h, a product law)."""
        return len(self.gauge.numerators) == 0

    def _coverage(self, alpha: float, volume: float):
        """The proven coverage level of :meth:`ci_volume`, computed once per α."""
        key = ("ci_volume", alpha)
        if key not in self._estimates:
            if self.is_cross:
                self._estimates[key] = cross_coverage_level(self.gauge, self.epsilon, alpha)
            else:
                self._estimates[key] = coverage_level(self.gauge, self.epsilon, self.extents, volume, alpha)
        return self._estimates[key]

    def coverage_refusal(self, volume: float, alpha: float = 0.05) -> str | None:
        """Why :meth:`ci_volume` would exceed its stated budget (None: it will not): for the cross-polytope the
        convolution's support × groups (:data:`~dpopt.stats.k_norm_cross_coverage.MAX_CROSS_WORK`, found by
        computing it at ``alpha``, kept for :meth:`ci_volume`), else the enumeration's points."""
        if self.is_cross:
            try:
                self._coverage(alpha, volume)
            except ValueError as exc:
                return str(exc)
            return None
        cap = level_cap(self.gauge, self.epsilon, self.extents, volume)
        size = enumeration_size(self.extents, volume, cap / self.gauge.denominator)
        if size > MAX_POINTS:
            return (f"the lattice law's proven coverage would enumerate about {size:.2g} lattice points "
                    f"(at most {MAX_POINTS:.0e})")
        return None

    def utility(self, metric: str, workload: np.ndarray | None, gamma: float | None) -> UtilityValue:
        """The discrete law's ``metric`` (:data:`LATTICE_METRICS`): exact at rank 1, above the mean of exact draws
        with the cone sampler, else importance sampling from the rejection sampler's proposal."""
        if self.rank == 1:
            return self._rank_one(metric, workload, gamma)
        if metric == "max_variance":
            return self._max_variance()
        key = (metric, gamma, None if workload is None else workload.tobytes())
        if self.fan is not None:
            if key not in self._estimates:
                self._estimates[key] = self._exact_monte_carlo(metric, workload, gamma)
            value, ci, drawn = self._estimates[key]
            return UtilityValue(metric, value, (
                f"Monte Carlo: the mean of {drawn} exact draws of the lattice law (the cone sampler, seed "
                f"{MONTE_CARLO_SEED}; 95% interval from the CLT; each round accepts with probability "
                f"{self._cone_acceptance():.4g})"), ci)
        if key not in self._estimates:
            self._estimates[key] = self._importance(metric, workload, gamma)
        value, ci, rate, effective, drawn = self._estimates[key]
        return UtilityValue(metric, value, (f"Monte Carlo: importance sampling of the lattice law from {drawn} "
                                            f"discrete Laplace proposals (numpy's), seed {MONTE_CARLO_SEED} (acceptance "
                                            f"rate {rate:.4g}, effective sample size {effective:.0f})"), ci)

    def acceptance_rate(self, metric: str = "l2", workload: np.ndarray | None = None,
                        gamma: float | None = None) -> float:
        """The sampler's acceptance rate: 1 at rank 1 (g(c) = |c|/M there: proposal and law agree); with the cone
        sampler the rate of a round (:func:`~dpopt.noise.k_norm_cones.acceptance_rate`); else E_q[w], a
        Monte Carlo estimate from the proposals of the pass that estimates ``metric``."""
        if self.rank == 1:
            return 1.0
        if self.fan is not None:
            return self._cone_acceptance()
        self.utility(metric, workload, gamma)
        return self._estimates[(metric, gamma, None if workload is None else workload.tobytes())][2]

    def _cone_acceptance(self) -> float:
        """The cone sampler's acceptance rate (:func:`~dpopt.noise.k_norm_cones.acceptance_rate`), computed once."""
        if "cone_acceptance" not in self._estimates:
            self._estimates["cone_acceptance"] = acceptance_rate(self.fan, float(self.epsilon))
        return self._estimates["cone_acceptance"]

    def _max_variance(self) -> UtilityValue:
        """max_i Var Z_i = max_i E Z_i² (the law is symmetric: K = −K), the largest of the per-cell second moments
        estimated together: the mean of exact draws of the cone sampler, or the self-normalised importance-sampling
        mean Σw z_i²/Σw from the rejection sampler's proposals (:data:`PROPOSALS` of them, fixed seed), the 95%
        interval of the largest cell's estimate (CLT, delta method) given beside it."""
        if "max_variance" not in self._estimates:
            self._estimates["max_variance"] = self._second_moments()
        value, ci, how = self._estimates["max_variance"]
        return UtilityValue("max_variance", value, how, ci)

    def _second_moments(self) -> tuple[float, tuple[float, float], str]:
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        d = self.echelon.shape[1]
        sums = np.zeros((3, d))  # per cell: Σw z², Σw² z², Σw² z⁴ (w = 1 for exact draws)
        weights = np.zeros(2)  # Σw, Σw²
        if self.fan is not None:
            for _ in range(CONE_DRAWS // CONE_BATCH):
                z2 = self.noise(rng, CONE_BATCH).astype(float) ** 2
                sums[:3] += [z2.sum(axis=0), z2.sum(axis=0), (z2 * z2).sum(axis=0)]
                weights += [CONE_BATCH, CONE_BATCH]
            how = f"Monte Carlo: {CONE_DRAWS} exact draws of the lattice law (the cone sampler), seed {MONTE_CARLO_SEED}"
        else:
            for w, z in self._proposal_batches(rng):
                z2 = z**2
                sums[:3] += [w @ z2, (w * w) @ z2, (w * w) @ (z2 * z2)]
                weights += [w.sum(), (w * w).sum()]
            how = (f"Monte Carlo: importance sampling of the lattice law from {PROPOSALS} discrete Laplace proposals, "
                   f"seed {MONTE_CARLO_SEED}")
        means = sums[0] / weights[0]
        top = int(np.argmax(means))
        mean = float(means[top])
        if self.fan is not None:
            se = math.sqrt(max(sums[2, top] / weights[0] - mean * mean, 0.0) / (weights[0] - 1))
        else:
            se = math.sqrt(max(sums[2, top] - 2.0 * mean * sums[1, top] + mean * mean * weights[1], 0.0)) / weights[0]
        return mean, (mean - 1.96 * float(se), mean + 1.96 * float(se)), how + f"; the largest of the {d} cells' E Z_i²"

    def _rank_one(self, metric: str, workload: np.ndarray | None, gamma: float | None) -> UtilityValue:
        kappa = Fraction(int(self.gauge.scaled(np.ones((1, 1), dtype=np.int64))[0]), self.gauge.denominator)
        moments = discrete_laplace_moments(float(1 / (self.epsilon * kappa)))
        u = self.echelon[0].astype(float)
        how = f"exact: c is discrete Laplace of scale 1/(ε′κ), κ = {kappa}, along the basis vector"
        if metric == "l2":
            image = u if workload is None else workload @ u
            return UtilityValue(metric, moments["second_moment"] * float(image @ image), how)
        if metric == "l1":
            return UtilityValue(metric, moments["mean_abs"] * float(np.abs(u).sum()), how)
        if metric == "max_variance":
            return UtilityValue(metric, moments["second_moment"] * float((u * u).max()), how)
        within = [1.0 if x == 0 else discrete_laplace_moments(float(1 / (self.epsilon * kappa)),
                                                               gamma / abs(x))["within"] for x in u]
        return UtilityValue(metric, float(np.mean(within)), how)

    def _exact_monte_carlo(self, metric: str, workload: np.ndarray | None,
                           gamma: float | None) -> tuple[float, tuple[float, float], int]:
        """(E f, its 95% interval, the draws) from exact draws of the cone sampler: batches of
        :data:`CONE_BATCH` from the fixed seed, stopped (from the second on) once the CLT half-width
        1.96·sd/√n is within :data:`ESTIMATE_PRECISION` of the mean, or at :data:`CONE_DRAWS`."""
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        total, squares, drawn = 0.0, 0.0, 0
        while drawn < CONE_DRAWS:
            z = self.noise(rng, CONE_BATCH).astype(float)
            f = _metric_values(metric, z, workload, gamma)
            total, squares, drawn = total + float(f.sum()), squares + float(f @ f), drawn + len(f)
            mean = total / drawn
            half = 1.96 * math.sqrt(max(squares / drawn - mean * mean, 0.0) / (drawn - 1))
            if drawn >= 2 * CONE_BATCH and half <= ESTIMATE_PRECISION * abs(mean):
                break
        return mean, (mean - half, mean + half), drawn

    def _proposal_batches(self, rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Batches (w, z) of :data:`PROPOSAL_BATCH` proposals, :data:`PROPOSALS` in all: c with independent
        discrete Laplace coordinates of scales M_k/ε′, formed in double precision from numpy's exponential draws
        (⌊tE⌋ with E ~ Exp(1) is geometric on {0, 1, …} with P(≥ k) = e^{−k/t}, and the difference of two is discrete
        Laplace of scale t), their weights w = exp(−ε′(g(c) − h(c))) and noise z = cR. An estimate's input, not a
        release: many times faster than the exact sampler and integer gauge that a release uses (the integers c,
        G(c) stay below 2⁵³)."""
        scales = np.array([float(scale) for scale in proposal_scale(self.epsilon, self.gauge)])
        facets = self.gauge.numerators.astype(float).T
        units = self.gauge.units.astype(float)
        rate = float(self.epsilon) / self.gauge.denominator
        echelon = self.echelon.astype(float)
        for start in range(0, PROPOSALS, PROPOSAL_BATCH):
            n = min(PROPOSAL_BATCH, PROPOSALS - start)
            c = (np.floor(rng.standard_exponential((n, self.rank)) * scales)
                 - np.floor(rng.standard_exponential((n, self.rank)) * scales))
            h = np.abs(c) @ units
            g = (c @ facets).max(axis=1) if facets.size else np.zeros(n)
            yield np.exp(-rate * (np.maximum(g, h) - h)), c @ echelon

    def _importance(self, metric: str, workload: np.ndarray | None,
                    gamma: float | None) -> tuple[float, tuple[float, float], float, float, int]:
        """(E_p f, its 95% interval, E_q w, the Kish effective sample size (Σw)²/Σw², the proposals drawn) from sums
        over the batches: Σw, Σwf, Σw²f, Σw²f², Σw²; the delta method's SE is √(Σw²(f − m)²)/Σw. The batches stop
        at :data:`ESTIMATE_PRECISION` (from the second on) or at :data:`PROPOSALS` (:meth:`_proposal_batches`)."""
        sums, drawn = np.zeros(5), 0
        for w, z in self._proposal_batches(np.random.default_rng(MONTE_CARLO_SEED)):
            drawn += len(w)
            f = _metric_values(metric, z, workload, gamma)
            sums += [w.sum(), w @ f, (w * w) @ f, (w * w) @ (f * f), (w * w).sum()]
            if drawn >= 2 * PROPOSAL_BATCH and _precise(sums):
                break
        mean, se = _weighted_mean(sums)
        total, w2 = float(sums[0]), float(sums[4])
        return mean, (mean - 1.96 * se, mean + 1.96 * se), total / drawn, total * total / w2, drawn


def _metric_values(metric: str, z: np.ndarray, workload: np.ndarray | None, gamma: float | None) -> np.ndarray:
    """Per noise row z: ‖Wz‖₂² (l2), ‖z‖₁ (l1) or the share of |z_i| ≤ γ (usefulness)."""
    if metric == "l2":
        wz = z if workload is None else z @ workload.T
        return np.sum(wz**2, axis=1)
    if metric == "l1":
        return np.sum(np.abs(z), axis=1)
    return np.mean(np.abs(z) <= gamma, axis=1)


def _weighted_mean(sums: np.ndarray) -> tuple[float, float]:
    """The self-normalised importance-sampling estimate and its delta-method SE from Σw, Σwf, Σw²f, Σw²f², Σw²."""
    total, weighted, w2f, w2f2, w2 = (float(x) for x in sums)
    mean = weighted / total
    return mean, math.sqrt(max(w2f2 - 2.0 * mean * w2f + mean * mean * w2, 0.0)) / total


def _precise(sums: np.ndarray) -> bool:
    """Whether the estimate rests on at least :data:`MIN_EFFECTIVE_DRAWS` effective draws (Σw, a lower bound of
    the Kish size since w ≤ 1) and its 95% half-width is within :data:`ESTIMATE_PRECISION` of it."""
    mean, se = _weighted_mean(sums)
    return sums[0] >= MIN_EFFECTIVE_DRAWS and 1.96 * se <= ESTIMATE_PRECISION * abs(mean)
