r"""Confidence regions on a proper sensitivity span for an exact discrete Gaussian measurement.

The measurement is y = x + η with integer answers x and η ~ N_ℤ(0, σ²)^d (σ² the lattice variance). The span V of
the sensitivity space has rank k < d; the component P_⊥x off V is the same on every dataset the adjacency
connects, and the regions take it as known to the analyst (the bounded-DP reading of replace-one, n public; the
projected release publishes it), so the answers consistent with it form the affine set A = x + V. r is the proven
full-d radius of :func:`~dpopt.stats.lattice_inference.lattice_region`: P(‖η‖²/σ² ≤ r) ≥ c ≥ 1 − α, c its proven
coverage.

* **The full release y** (:class:`SpanRegion`, the ``gaussian`` family). For θ ∈ A, y − θ = η + (x − θ) with
  x − θ ∈ V, so P_⊥(y − θ) = P_⊥η is observed exactly (P_⊥y less the public P_⊥x), and

  .. math:: CR(y) = \{\theta \in A : \|y - \theta\|^2 \le \sigma^2 r\}
            = \{\theta \in A : \|P_V(y - \theta)\|^2 \le \sigma^2 r - \|P_\perp\eta\|^2\},

  a k-ball of V centred at P_⊥x + P_V y of random radius² R² = (σ²r − ‖P_⊥η‖²)₊. θ = x lies in it iff
  ‖η‖² ≤ σ²r: the coverage is **exactly** the full-d region's, ≥ c ≥ 1 − α (proven). Its volume is V_k R^k, and
  the metric is the expected volume :math:`E[V_k(\sigma^2 r - \|P_\perp\eta\|^2)_+^{k/2}]`. On the sum-zero span
  (V = 1^⊥: a histogram or table under replace-one) ‖P_⊥η‖² = T²/d with the integer T = Σ_i η_i, so

  .. math:: E\,\mathrm{vol} = \sum_{t^2 < d\sigma^2 r} P(T = t)\, V_k (\sigma^2 r - t^2/d)^{k/2},

  a finite sum. P(T = t) is the d-fold convolution of the pmf of N_ℤ(0, σ²) cut at |η_i| ≤ m with
  2P(η_i > m) ≤ :data:`TRUNCATION`: the computed P̃(T = t) ≤ P(T = t) term by term and Σ_t (P − P̃) ≤ d·τ (the mass
  of the draws with a cut coordinate), so, every term being at most V_k(σ²r)^{k/2},
  Ẽ ≤ E vol ≤ Ẽ + dτ V_k(σ²r)^{k/2}: Ẽ is stated, with that bound. On any other proper span the expected volume has
  no such one-dimensional sum here, and on the sum-zero span beyond σ ≈ 3500 (d = 4; the law of T wider than
  :data:`~dpopt.stats.lattice_inference.MAX_SUPPORT`) it is not summed; the family then estimates it by Monte Carlo
  from the exact sampler (per-draw volume :meth:`SpanRegion.terms`), with a 95% interval: the volume is utility,
  only the coverage must be proven, and it is.
* **The projected release** ỹ = x_⊥ + P_V y (:class:`ProjectedRegion`, ``projected_gaussian``; P_⊥η is not
  observed). At θ = x, P_V(ỹ − x) = P_Vη. On the sum-zero span U = d‖P_Vη‖² = dΣ_i η_i² − (Σ_i η_i)² is an
  integer, and the joint law of (Σ η_i, Σ η_i²) on the integer grid is a convolution (kept to Σ η_i² ≤ c: the
  computed mass of {U ≤ u} is that of its tuples with Σ η_i² ≤ c, a lower bound; :func:`projected_statistic`): the region :math:`\{\theta \in A : d\|P_V(\tilde y - \theta)\|^2 \le u\}`,
  u the smallest integer whose bound, less :data:`~dpopt.stats.lattice_inference.FLOAT_SLACK`, reaches 1 − α, has
  **proven coverage** and volume V_k(u/d)^{k/2}. Elsewhere (another span, or a grid beyond
  :data:`MAX_JOINT_CELLS`) the conservative :math:`\{\theta \in A : \|P_V(\tilde y - \theta)\|^2 \le
  \sigma^2 r\}`: ‖P_Vη‖ ≤ ‖η‖, so its coverage is ≥ P(‖η‖² ≤ σ²r) ≥ c ≥ 1 − α (proven). Either volume is
  deterministic. The full release computes ỹ too: the ``gaussian`` family takes this region when its volume is
  below the first region's expected volume (at small σ).

Against the continuous region on V, V_k(σ_c² t_k)^{k/2} (t_k the χ²_k quantile, σ_c the continuous design's σ),
the first costs about E(t_d − X)₊^{k/2}/t_k^{k/2} (X ~ χ²₁: 1.139 at d = 3, 1.145 at d = 4) at large σ (the
full-d radius, partly paid back by the observed P_⊥η); the second's exact-law ball is within a few percent of the
continuous one (the discrete law's own quantile), its conservative ball (r/t_k)^{k/2} → (t_d/t_k)^{k/2} (1.304 at
d = 3, 1.338 at d = 4; the full-d radius with nothing paid back).

Floating point: the pmfs are those of :class:`~dpopt.noise.discrete_gaussian.DiscreteGaussianMarginal` (double
precision), the sums and the volumes in double precision (the joint law's bincount sums at most
:data:`MAX_JOINT_CELLS` non-negative terms: relative rounding below 2.3·10⁻¹⁰, inside FLOAT_SLACK). The coverage is
proven (the full-d region's, or the joint law's); the noise itself is never floating point.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal
from dpopt.stats.inference import chi2_radius, log_unit_ball_volume
from dpopt.stats.lattice_inference import EXACT_LAW, FLOAT_SLACK, MAX_SUPPORT, LatticeRegion
from dpopt.stats.log_volume import VolumeTerms, exp_or_inf, volume_text

TRUNCATION = 1e-12
"""τ: each coordinate's pmf is cut where its two tails hold at most τ (the sum's error ≤ dτ times the largest
volume)."""

MAX_JOINT_CELLS = 2_000_000
"""Largest grid (2⌊√(dc)⌋ + 1)(c + 1) of the joint law of (Σ η_i, Σ η_i²) (:func:`projected_statistic`, c the cap
on Σ η_i²): 16 MB a copy, σ² up to about 250 at d = 3 and 210 at d = 4 (about a second of CPU: (d − 1)(2⌊√c⌋ + 1)
shifted additions of the grid); beyond, the conservative region."""

QUANTILE_CAP = 1e-4
"""The joint law keeps Σ η_i² ≤ σ² times the continuous χ²_d quantile at QUANTILE_CAP·α (:func:`projected_statistic`):
the mass dropped beyond, about QUANTILE_CAP·α, only lowers the proven bound."""


def _log_ball(k: int, radius2: Fraction) -> float:
    """log(V_k ρ^{k/2}) for ρ = ``radius2`` > 0."""
    return log_unit_ball_volume(k) + 0.5 * k * math.log(float(radius2))


@dataclass(frozen=True)
class SpanRegion:
    """The region of the full release on a proper span (module docstring, first item).

    Attributes
    ----------
    full : LatticeRegion
        The proven full-d region (radius r, coverage).
    rank : int
        k, the span's rank (< d).
    log_volume : float or None
        log Ẽ, Ẽ the expected volume on the sum-zero span (an exact sum, at most :attr:`error` below E vol); None
        elsewhere (the family estimates it from the exact sampler). A log: Ẽ exceeds the double range at a few
        hundred dimensions (:mod:`dpopt.stats.log_volume`).
    cut : float
        dτ, the bound on (E vol − Ẽ)/(the largest volume V_k(σ²r)^{k/2}) (0 when ``log_volume`` is None).
    """

    full: LatticeRegion
    rank: int
    log_volume: float | None
    cut: float

    @property
    def sigma2(self) -> Fraction:
        return self.full.sigma2s[0]

    @property
    def squared_radius(self) -> Fraction:
        """σ²r, the largest ‖y − θ‖² in the region (exact rational)."""
        return self.sigma2 * self.full.radius

    @property
    def expected_volume(self) -> float | None:
        """Ẽ (+inf beyond the double range), or None off the sum-zero span."""
        return None if self.log_volume is None else exp_or_inf(self.log_volume)

    @property
    def volume(self) -> float:
        """The predicted metric: the expected volume (Ẽ)."""
        return float(self.expected_volume)

    @property
    def log_largest(self) -> float:
        """log V_k(σ²r)^{k/2}, the largest volume (P_⊥η = 0): the unit of :meth:`relative_volumes`."""
        return _log_ball(self.rank, self.squared_radius)

    @property
    def error(self) -> float:
        """dτ·V_k(σ²r)^{k/2}, the bound on E vol − Ẽ (+inf beyond the double range; 0 off the sum-zero span)."""
        return self.cut * exp_or_inf(self.log_largest) if self.cut else 0.0

    def relative_volumes(self, off_span: np.ndarray) -> np.ndarray:
        """(1 − q/(σ²r))₊^{k/2} for the squared norms q = ‖P_⊥η‖² off the span: the region's volume per draw in
        units of the largest, e^:attr:`log_largest`."""
        room = np.maximum(1.0 - np.asarray(off_span, dtype=float) / float(self.squared_radius), 0.0)
        return room ** (0.5 * self.rank)

    def volumes(self, off_span: np.ndarray) -> np.ndarray:
        """V_k (σ²r − q)₊^{k/2}, the region's volume per draw (:meth:`relative_volumes` times the largest)."""
        return exp_or_inf(self.log_largest) * self.relative_volumes(off_span)

    def terms(self, z: np.ndarray, project) -> VolumeTerms:
        """Per-draw volumes of the noise draws ``z`` (η, shape (n, d)), ``project`` the projector on V, in units of
        the largest: their mean is E vol (the Monte Carlo check of the sum, and the estimate off the sum-zero
        span)."""
        z = np.asarray(z, dtype=float)
        return VolumeTerms(self.log_largest, self.relative_volumes(np.sum((z - project(z)) ** 2, axis=1)))

    def _error_text(self) -> str:
        """:attr:`error` to 3 digits, from its logarithm beyond the double range."""
        error = self.error
        return f"{error:.3g}" if math.isfinite(error) else volume_text(math.log(self.cut) + self.log_largest, 3)

    def describe(self) -> str:
        """The region, why it covers and how its expected volume is obtained, for a certificate."""
        how = (f"the exact sum over T = Σ_i η_i of P(T = t)·V_k(σ_ℤ²r − t²/d)^(k/2) (N_ℤ pmfs cut at tail mass "
               f"{TRUNCATION:g} each; at most {self._error_text()} below the exact expectation)" if self.log_volume is not None else "estimated from the exact sampler's draws")
        return (f"{EXACT_LAW}: region {{θ ∈ x_⊥ + V : ‖y − θ‖² ≤ σ_ℤ² r}} on the {self.rank}-dimensional span V, "
                f"r = {self.full.radius} ≈ {float(self.full.radius):.10g} the full-d radius; P_⊥(y − θ) = P_⊥η is "
                "observed (the off-span component is public), so the region is a k-ball of V of radius² "
                "(σ_ℤ² r − ‖P_⊥η‖²)₊ and contains x iff ‖η‖² ≤ σ_ℤ² r: proven coverage "
                f"≥ {self.full.coverage:.10f} ≥ 1 − α, the full-d region's (dpopt.stats.lattice_span_regions"
                f"{self.full.stated_grid()}); value: its expected volume, {how}")


@dataclass(frozen=True)
class ProjectedRegion:
    """The region of the projected release on a proper span (module docstring, second item): on the sum-zero span
    within the budget, d‖P_V(ỹ − θ)‖² ≤ u from the exact law of U = d‖P_Vη‖²; else ‖P_V(ỹ − θ)‖² ≤ σ²r.

    Attributes
    ----------
    full : LatticeRegion
        The proven full-d region (radius r, coverage).
    rank : int
        k, the span's rank.
    variance : float
        Var N_ℤ(0, σ²), for the per-draw terms of the conservative region (:meth:`terms`).
    statistic : int or None
        u, the region's bound on U (None: the conservative region).
    coverage : float or None
        A proven lower bound on P(U ≤ u), at least 1 − α (None: the conservative region).
    """

    full: LatticeRegion
    rank: int
    variance: float
    statistic: int | None = None
    coverage: float | None = None

    @property
    def sigma2(self) -> Fraction:
        return self.full.sigma2s[0]

    @property
    def squared_radius(self) -> Fraction:
        """The largest ‖P_V(ỹ − θ)‖² in the region: u/d, or σ²r (exact rational)."""
        if self.statistic is not None:
            return Fraction(self.statistic, len(self.full.sigma2s))
        return self.sigma2 * self.full.radius

    @property
    def log_volume(self) -> float:
        return _log_ball(self.rank, self.squared_radius)

    @property
    def volume(self) -> float:
        return exp_or_inf(self.log_volume)

    def terms(self, z: np.ndarray, project) -> VolumeTerms:
        """Per-draw terms of the released noise draws ``z`` (P_Vη) whose mean is (at least) the volume: with the
        exact law, volume × 1{d‖P_V z‖² ≤ u}/coverage, in units of the volume (mean: the volume × P(U ≤ u)/coverage, above the volume by
        at most the mass beyond the grid (about :data:`QUANTILE_CAP`·α) and
        :data:`~dpopt.stats.lattice_inference.FLOAT_SLACK` relatively; the draws check the coverage); else volume × ‖P_V z‖²/(k·Var N_ℤ(0, σ²)), whose mean is the volume (E‖P_Vη‖² =
        k·Var N_ℤ(0, σ²)): the volume is deterministic, so the draws check the second moment of the law its
        coverage is proven for."""
        z = np.asarray(z, dtype=float)
        squared = np.sum(project(z) ** 2, axis=1)
        if self.statistic is None:
            return VolumeTerms(self.log_volume, squared / (self.rank * self.variance))
        u = np.rint(len(self.full.sigma2s) * squared)  # an integer, up to rounding
        return VolumeTerms(self.log_volume, (u <= self.statistic) / self.coverage)

    def describe(self) -> str:
        """The region and why it covers, for a certificate."""
        if self.statistic is not None:
            d = len(self.full.sigma2s)
            return (f"{EXACT_LAW}: region {{θ ∈ x_⊥ + V : d‖P_V(ỹ − θ)‖² ≤ u}} on the {self.rank}-dimensional "
                    f"sum-zero span V (ỹ = x_⊥ + P_V y, d = {d}), u = {self.statistic}; at θ = x, d‖P_V(ỹ − x)‖² = "
                    "U = dΣη_i² − (Ση_i)², an integer whose law is the joint law of (Ση_i, Ση_i²) convolved "
                    "exactly on the grid Ση_i² ≤ c (the mass beyond dropped: it only lowers the bound): "
                    f"proven coverage ≥ {self.coverage:.10f} ≥ 1 − α (dpopt.stats.lattice_span_regions); volume "
                    "V_k (u/d)^(k/2)")
        return (f"{EXACT_LAW}: region {{θ ∈ x_⊥ + V : ‖P_V(ỹ − θ)‖² ≤ σ_ℤ² r}} on the {self.rank}-dimensional span V "
                f"(ỹ = x_⊥ + P_V y), r = {self.full.radius} ≈ {float(self.full.radius):.10g} the full-d radius; at "
                "θ = x, P_V(ỹ − x) = P_Vη and ‖P_Vη‖ ≤ ‖η‖: proven coverage ≥ "
                f"{self.full.coverage:.10f} ≥ 1 − α, the full-d region's (dpopt.stats.lattice_span_regions"
                f"{self.full.stated_grid()}); volume V_k (σ_ℤ² r)^(k/2)")


def sum_law(sigma2: Fraction, d: int) -> tuple[np.ndarray, int, float] | None:
    """P̃(T = t) for T = Σ_{i ≤ d} η_i, η_i i.i.d. N_ℤ(0, σ²), each cut at |η_i| ≤ m with 2P(η_i > m) ≤
    :data:`TRUNCATION`: (the pmf on t = −dm..dm, m, the cut mass bound dτ); None when the law's support exceeds
    :data:`~dpopt.stats.lattice_inference.MAX_SUPPORT`."""
    marginal = DiscreteGaussianMarginal(float(sigma2))
    m = marginal.cut(TRUNCATION)
    if 2 * d * m + 1 > MAX_SUPPORT:
        return None
    single = np.exp(marginal.log_density(np.arange(-m, m + 1, dtype=float)))
    law = single
    for _ in range(d - 1):
        law = np.convolve(law, single)
    return law, m, d * TRUNCATION


def span_region(full: LatticeRegion, rank: int, sum_zero: bool) -> SpanRegion:
    """The full release's region on a span of rank k < d (module docstring), its expected volume summed exactly on
    the sum-zero span (``sum_zero``) while the sum's law fits :data:`~dpopt.stats.lattice_inference.MAX_SUPPORT`,
    else left to the caller's estimate (``expected_volume`` None)."""
    d = len(full.sigma2s)
    if not 1 <= rank < d or len(set(full.sigma2s)) != 1:
        raise ValueError("a span region needs i.i.d. noise and a proper span of rank at least 1")
    region = SpanRegion(full, rank, None, 0.0)
    found = sum_law(full.sigma2s[0], d) if sum_zero else None
    if found is None:
        return region
    law, m, cut = found
    t = np.arange(-d * m, d * m + 1, dtype=float)
    relative = float(law @ region.relative_volumes(t * t / d))  # Ẽ in units of the largest volume
    return SpanRegion(full, rank, region.log_largest + math.log(relative), cut)


def projected_statistic(sigma2: Fraction, d: int, alpha: float) -> tuple[int, float] | None:
    """(u, a proven lower bound on P(U ≤ u) ≥ 1 − α) for U = dΣ_i η_i² − (Σ_i η_i)² = d‖P_Vη‖² on the sum-zero
    span, u the smallest such integer (module docstring); None beyond :data:`MAX_JOINT_CELLS`.

    The joint law of (T, Q) = (Σ η_i, Σ η_i²) on the integer grid is convolved coordinate by coordinate, keeping
    Q ≤ c = ⌈σ²·t⌉ (t the continuous χ²_d quantile at :data:`QUANTILE_CAP`·α; then |η_i| ≤ ⌊√c⌋ and
    |T| ≤ ⌊√(dc)⌋ by Cauchy–Schwarz): as the partial sums of squares only grow, the computed mass of {U ≤ u} is
    that of its tuples with Q ≤ c, a lower bound whatever c is (c only sets how much is lost, about QUANTILE_CAP·α),
    less :data:`~dpopt.stats.lattice_inference.FLOAT_SLACK` for the double-precision sums of non-negative terms."""
    cap = math.ceil(float(sigma2) * chi2_radius(d, QUANTILE_CAP * alpha))
    top, width = math.isqrt(cap), math.isqrt(d * cap)
    if (2 * width + 1) * (cap + 1) > MAX_JOINT_CELLS:
        return None
    marginal = DiscreteGaussianMarginal(float(sigma2))
    pmf = np.exp(marginal.log_density(np.arange(-top, top + 1, dtype=float)))
    law = np.zeros((2 * width + 1, cap + 1))  # law[t + width, q]
    law[width + np.arange(-top, top + 1), np.arange(-top, top + 1) ** 2] = pmf
    rows = 2 * width + 1
    for _ in range(d - 1):
        grown = np.zeros_like(law)
        for e in range(-top, top + 1):  # (t, q) → (t + e, q + e²); beyond Q = c dropped, |T| stays within width
            lo, hi = max(0, -e), rows - max(0, e)
            grown[lo + e: hi + e, e * e:] += pmf[e + top] * law[lo:hi, : cap + 1 - e * e]
        law = grown
    t = np.arange(rows) - width
    u = d * np.arange(cap + 1)[None, :] - (t * t)[:, None]  # U at each (T, Q); < 0 only where the mass is 0
    reached = law > 0
    mass = np.bincount(u[reached], weights=law[reached])
    covered = np.cumsum(mass) - FLOAT_SLACK
    found = np.flatnonzero(covered >= 1.0 - alpha)
    if found.size == 0:
        return None
    return int(found[0]), float(covered[found[0]])


def projected_region(full: LatticeRegion, rank: int, variance: float, sum_zero: bool = False) -> ProjectedRegion:
    """The projected release's region on a span of rank ``rank`` (module docstring, second item): on the sum-zero
    span (``sum_zero``) the exact law of U when :func:`projected_statistic` is within its budget and its ball is
    the smaller, else the conservative ball of radius² σ²r."""
    d = len(full.sigma2s)
    if not 1 <= rank < d or len(set(full.sigma2s)) != 1:
        raise ValueError("a span region needs i.i.d. noise and a proper span of rank at least 1")
    conservative = ProjectedRegion(full, rank, float(variance))
    found = projected_statistic(full.sigma2s[0], d, full.alpha) if sum_zero else None
    if found is None or Fraction(found[0], d) >= conservative.squared_radius:
        return conservative
    return ProjectedRegion(full, rank, float(variance), found[0], found[1])
