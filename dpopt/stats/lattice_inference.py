r"""Inference on releases with independent discrete Gaussian noise, from the exact law.

An exact lattice measurement releases y = x + η with integer answers x and independent η_i ~ N_ℤ(0, σ_i²)
(:mod:`dpopt.mechanisms.lattice`). The χ² region and the normal test of :mod:`dpopt.stats.inference` are derived
for continuous Gaussian noise; here both are re-derived for the discrete law, with proven (not asymptotic)
coverage and level.

* **Confidence region.** :math:`CR = \{\theta \in \mathbb R^d : \sum_i (y_i - \theta_i)^2/\sigma_i^2 \le r\}`
  covers x with probability :math:`P(Q \le r)`, :math:`Q = \sum_i \eta_i^2/\sigma_i^2`, a sum of independent
  non-negative discrete variables. On the grid h ℤ (h rational), :math:`k_i = \lceil \eta_i^2/(\sigma_i^2 h)\rceil`
  has the exact law :math:`P(k_i \le j) = P(|\eta_i| \le m_j)`, :math:`m_j = \lfloor\sqrt{\lfloor j h
  \sigma_i^2\rfloor}\rfloor` (integers), and as :math:`\eta_i^2/\sigma_i^2 \le h k_i`,

  .. math:: P(Q \le jh) \ge P\Big(\sum_i k_i \le j\Big),

  the convolution of the laws of the k_i truncated at j (nothing beyond j can enter the sum: no tail is cut; the
  last law enters through its distribution function, so that each j costs one dot product).
  r is the smallest grid point where this lower bound, less :data:`FLOAT_SLACK`, reaches 1 − α: the coverage
  ≥ 1 − α is proven, and r exceeds the exact quantile of Q by less than (d + 1)·h ≤ 2t/:data:`GRID_STEPS` (t
  the continuous χ²_d quantile). The region's volume is :math:`V_d\, r^{d/2} \prod_i \sigma_i`.
* **Convolution powers** (from 5 coordinates, where the d − 1 direct convolutions above exceed :data:`MAX_WORK`:
  up to 4 the regions, and certificates, are those issued before). The coordinates are grouped by equal σ_i²
  (one group when i.i.d., the common case; strategies and query scalings have few distinct variances): each
  group's law of Σ k_i is the n_g-th convolution power of one k's law, computed by repeated squaring
  (:mod:`dpopt.stats.convolution_power`: ⌊log₂ n_g⌋ squarings and popcount(n_g) − 1 products, by FFT above 4096
  points, with a proven ℓ¹ bound on its rounding), and the groups' laws are convolved by FFT in increasing σ_i²,
  the ℓ¹ errors carried (E(a∗b) ≤ E_a L̂_b + E_b(L̂_a + E_a) plus each product's own bound); the total is
  subtracted from the coverage with d·:data:`FLOAT_SLACK`. The grid is chosen per case, in order:

  - h = g, the gcd of the rationals 1/σ_i² (1/σ² when i.i.d.), when its support ⌈1.1t/g⌉ + d is at most
    :data:`INTEGER_GRID_SUPPORT` or that of the next grid: then k_i = η_i²/(σ_i²g) is a whole multiple of η_i²,
    Σ k_i h = Q exactly, and r is the smallest grid point whose bound reaches 1 − α: no grid excess.
  - h = t/(d·G_d), G_d = max(:data:`GRID_STEPS`, ⌈(d + 1)/(2·:data:`VOLUME_EXCESS`)⌉): the ceilings add less
    than h per coordinate, so r < q + (d + 1)h and the volume exceeds that of the region at the exact quantile q
    by a factor below (1 + (d + 1)h/q)^{d/2} ≈ exp(VOLUME_EXCESS·t/q) (≈ 1.0011 for d ≥ 8);
  - h = g when its support fits the limit below;
  - the grid coarsened to fit: G = ⌊(L − 2 − d)/(:data:`POWER_MARGIN`·d)⌋ steps, L the support limit, while
    (d + 1)h ≤ :data:`MAX_RADIUS_EXCESS`·t (r at most 0.1% above q); the region then states the factor
    (r/(r − (d + 1)h))^{d/2} ≥ (1 + (d + 1)h/q)^{d/2} (as q > r − (d + 1)h) by which its volume may exceed the
    region at q: ≈ exp(d²/(4·10⁶)) for i.i.d. coordinates (1.0025 at d = 100, 1.06 at 500, 1.28 at 1,000),
    while each axis is at most √(1 + (d + 1)h/q), about 1.0005, times as long.

  The support limit L is :data:`MAX_POWER_SUPPORT`, and at most :data:`MAX_GROUP_WORK` divided by the number of
  groups (the work: one power and one product per group); beyond (no grid left), None: the family keeps the
  floating-point sampler and says why. For i.i.d. coordinates up to 66 at a large σ² (and any d on the whole grid
  while it fits) the grid, the radius and the certificate are those issued before the coarsened grid.
* **Likelihood-ratio test** of H0: φ = θ₀ against H1: φ = θ₀ + a (a a whole-number shift). The log likelihood
  ratio of the product law is :math:`\sum_i a_i(y_i - \theta_{0,i})/\sigma_i^2 - \text{const}`, so the
  Neyman–Pearson test rejects for large :math:`T = \sum_i w_i (y_i - \theta_{0,i})`, w the weights
  :math:`a_i/\sigma_i^2` scaled to coprime integers: T is an integer, :math:`T = \sum_i w_i\eta_i` under H0 and
  :math:`T + s`, :math:`s = \sum_i w_i a_i`, under H1. Its law: the terms but the widest are convolved, each cut
  at :math:`|\eta_i| \le T_i` with :math:`2P(\eta_i > T_i) \le \tau_i` (cut mass κ = Σ τ_i = :data:`TRUNCATION`
  α), and the widest is read from its tail, so :math:`\tilde S(c) \le P(T \ge c) \le \tilde S(c) + \kappa`.
  The most powerful level-α test is randomised (a discrete statistic): reject when T > c, and with probability
  γ when T = c; c and γ are chosen so that the proven upper bound on the size,
  :math:`(1-\gamma)\tilde S(c+1) + \gamma\tilde S(c) + \kappa + \text{slack}`, is ≤ α, and the power
  :math:`(1-\gamma)\tilde S(c+1-s) + \gamma \tilde S(c-s) - \text{slack}` is a proven lower bound (within κ +
  2·slack of the exact power of this test).

Floating point: the pmfs and tails are those of :class:`~dpopt.noise.discrete_gaussian.DiscreteGaussianMarginal`
(tabulated in double precision, or in closed form with proven error ≤ σ⁻⁴/120 above 2³⁰), summed as non-negative
terms; :data:`FLOAT_SLACK` covers their rounding (module constants; d·FLOAT_SLACK for a convolution power, whose
d laws each carry their own), and an FFT's rounding is bounded separately and subtracted
(:mod:`dpopt.stats.convolution_power`). The noise itself is never floating point.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
.. [2] E. L. Lehmann and J. P. Romano, *Testing Statistical Hypotheses*, 3rd ed., 2005, Theorem 3.2.1
   (the Neyman–Pearson lemma, randomised tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal
from dpopt.stats.convolution_power import convolution_power, convolve_laws
from dpopt.stats.inference import chi2_radius, log_unit_ball_volume

EXACT_LAW = "exact law of the discrete noise"
"""How a certificate's utility method derived from this module begins."""

FLOAT_SLACK = 1e-9
"""Added to every proven probability bound for double-precision rounding: a tabulated tail is a cumulative sum of
at most 40σ + 10 terms (relative rounding below 1.5·10⁻¹⁰ at σ² = 2³⁰), the closed-form tails carry their own
error bound (≤ σ⁻⁴/120), and a convolution sums non-negative products (relative rounding below n·2⁻⁵³, n ≤
:data:`MAX_SUPPORT`, per stage)."""

GRID_STEPS = 4096
"""The region's grid is h = t/(d·GRID_STEPS) (t the continuous χ²_d quantile, rounded up to 6 decimals): the radius
found is less than (d + 1)h ≤ 2t/GRID_STEPS above the exact quantile of Q, so the volume at most about
d/GRID_STEPS above the region at that quantile, relatively."""

TRUNCATION = 1e-3
"""The test's cut mass κ, as a fraction of α."""

MAX_SUPPORT = 200_001
"""Largest support of a convolved law (the region's grid, the test's partial sum)."""

MAX_WORK = 1.2e9
"""Largest sum of (support × pmf length) over the convolutions of one test, or of one region with unequal σ_i
(about a second of CPU): such a region of up to 4 noisy coordinates at the grid of :data:`GRID_STEPS` (d − 1
convolutions of about 4500·d points); beyond, the convolution powers (module docstring)."""

VOLUME_EXCESS = 1.1e-3
"""For i.i.d. coordinates, the grid h = t/(d·G_d), G_d = max(:data:`GRID_STEPS`, ⌈(d + 1)/(2·VOLUME_EXCESS)⌉):
the radius is less than (d + 1)h = t(d + 1)/(d·G_d) above the exact quantile q of Q, so the volume at most
(1 + (d + 1)t/(d·G_d·q))^{d/2} ≈ 1 + VOLUME_EXCESS·t/q times the region at q."""

POWER_MARGIN = Fraction(102, 100)
"""For i.i.d. coordinates on the grid of :data:`VOLUME_EXCESS`, the law is first computed up to
⌈POWER_MARGIN·t/h⌉ + d (raised by a quarter while that does not reach 1 − α)."""

MAX_POWER_SUPPORT = 2**21
"""Largest support of a region's law by convolution powers (FFTs of length ≤ 2²², about 0.2 s per squaring):
d ≤ 66 noisy coordinates at the grid of :data:`VOLUME_EXCESS`; beyond, the grid coarsened to this support
(:data:`MAX_RADIUS_EXCESS`)."""

MAX_GROUP_WORK = 2**24
"""Largest (distinct variances × support) of a region by convolution powers: each group of equal σ_i² costs one
power and one FFT product of that support (about 8 groups at :data:`MAX_POWER_SUPPORT`, 100 at 1.7·10⁵ points;
seconds of CPU); beyond, the family keeps the floating-point sampler and says why."""

MAX_RADIUS_EXCESS = Fraction(1, 1000)
"""A grid coarsened to fit the support (:data:`MAX_POWER_SUPPORT`, :data:`MAX_GROUP_WORK`) keeps (d + 1)h ≤
MAX_RADIUS_EXCESS·t: the radius at most 0.1% above the exact quantile q of Q (each axis of the region ≤ 0.05%
longer), the volume ≤ (1 + (d + 1)h/q)^{d/2} times the region at q, a factor the region states."""

INTEGER_GRID_SUPPORT = 2**16
"""For i.i.d. coordinates, h = 1/σ² (k_i = η_i², Q = Σ η_i²/σ²: no rounding excess) whenever its support
⌈1.1·t·σ²⌉ + d is at most this or at most that of the grid of :data:`VOLUME_EXCESS`."""


def _marginals(sigma2s) -> list[DiscreteGaussianMarginal]:
    """N_ℤ(0, σ_i²) for each lattice variance (its pmf and tails)."""
    return [DiscreteGaussianMarginal(float(Fraction(s))) for s in sigma2s]


def _at_least(marginal: DiscreteGaussianMarginal, m: np.ndarray) -> np.ndarray:
    """P(η ≥ m) for whole m (array), from the tail P(η > k), k ≥ 0, and the law's symmetry."""
    m = np.asarray(m, dtype=np.int64)
    upper = marginal.tail(np.maximum(m - 1, 0).astype(float))
    lower = 1.0 - marginal.tail(np.maximum(-m, 0).astype(float))
    return np.where(m >= 1, upper, lower)


@dataclass(frozen=True)
class LatticeRegion:
    """The region {θ : Σ_i (y_i − θ_i)²/σ_i² ≤ r} for independent N_ℤ(0, σ_i²) noise (module docstring).

    Attributes
    ----------
    sigma2s : tuple of Fraction
        The lattice variances σ_i² (the region's axes).
    radius : Fraction
        r, a point of the grid h ℤ.
    coverage : float
        A proven lower bound on P(Q ≤ r), at least 1 − α.
    alpha : float
    log_volume : float
        log(V_d r^{d/2} Π σ_i); −∞ when r = 0 (the noise is 0 with probability ≥ 1 − α: the region is a point).
    grid : Fraction or None
        h, the grid of a convolution power's radius (r < the exact quantile of Q + (d + 1)h; none above it when
        h = 1/σ²), stated in the certificate; None for the d − 1 direct convolutions (h = t/(d·GRID_STEPS)).
    fft_error : float
        The proven bound on the FFT's rounding subtracted from the coverage (0 for direct convolutions).
    stated_excess : bool
        Whether the description states the volume's bound against the region at q as a number (the grids of
        unequal variances, and coarsened grids; :func:`lattice_region`).
    """

    sigma2s: tuple[Fraction, ...]
    radius: Fraction
    coverage: float
    alpha: float
    log_volume: float
    grid: Fraction | None = None
    fft_error: float = 0.0
    stated_excess: bool = False

    @property
    def volume(self) -> float:
        """V_d r^{d/2} Π σ_i; inf beyond floating point (the family then refuses the metric, clearly)."""
        try:
            return math.exp(self.log_volume)
        except OverflowError:
            return math.inf

    def contains(self, release, point) -> bool:
        """Whether ``point`` lies in the region centred at ``release`` (exact rationals)."""
        y, theta = np.asarray(release, dtype=float).reshape(-1), np.asarray(point, dtype=float).reshape(-1)
        return sum((Fraction(float(a)) - Fraction(float(b))) ** 2 / s
                   for a, b, s in zip(y, theta, self.sigma2s)) <= self.radius

    def describe(self) -> str:
        """The region and its proven coverage, for a certificate."""
        return (f"{EXACT_LAW}: region Σ_i (y_i − θ_i)²/σ_i² ≤ r, r = {self.radius} "
                f"≈ {float(self.radius):.10g}, proven coverage ≥ {self.coverage:.10f} ≥ 1 − α by convolution of the "
                f"laws of ⌈η_i²/(σ_i² h)⌉ (dpopt.stats.lattice_inference){self._grid_text()}; "
                "volume V_d r^(d/2) Π σ_i")

    def stated_grid(self) -> str:
        """The grid and its excess (:meth:`_grid_text`) on the paths that state their volume's bound
        (``stated_excess``), else nothing: for descriptions of regions built on this one."""
        return self._grid_text() if self.stated_excess else ""

    def _grid_text(self) -> str:
        """The grid and the excess it allows over the exact quantile q of Q (module docstring)."""
        if self.grid is None:
            return ""
        d, h = len(self.sigma2s), self.grid
        if len(set(self.sigma2s)) == 1 and h * self.sigma2s[0] == 1:
            text = ", h = 1/σ² (k_i = η_i²: r is the smallest whose bound reaches 1 − α, no grid excess)"
        elif _whole_grid(self.sigma2s) == h:
            text = (f", h = {h} (k_i = η_i²/(σ_i² h), whole multiples of η_i²: r is the smallest whose bound reaches "
                    "1 − α, no grid excess)")
        else:
            text = (f", h = {h} (r < q + (d + 1)h, q the exact quantile of Q: volume ≤ (1 + (d + 1)h/q)^(d/2) "
                    f"times the region at q, (d + 1)h = {float((d + 1) * h):.6g}{self._excess_text()})")
        if self.fft_error:
            text += f", less {self.fft_error:.3g} for the FFT's proven rounding"
        return text

    def _excess_text(self) -> str:
        """The volume's bound against the region at q, (r/(r − (d + 1)h))^(d/2) (q > r − (d + 1)h), when stated."""
        d, h = len(self.sigma2s), self.grid
        if not self.stated_excess or self.radius <= (d + 1) * h:
            return ""
        factor = math.exp(0.5 * d * math.log(float(self.radius / (self.radius - (d + 1) * h))))
        return f", so ≤ {factor:.6g} times the region at q ({factor ** (1 / d):.8g} per axis)"


def _grid(d: int, alpha: float) -> Fraction:
    """h = t/(d·:data:`GRID_STEPS`), t the continuous χ²_d quantile rounded up to 6 decimals (a rational: the
    grid's arithmetic is exact)."""
    return Fraction(math.ceil(chi2_radius(d, alpha) * 10**6), 10**6 * d * GRID_STEPS)


def _grid_law(marginal: DiscreteGaussianMarginal, sigma2: Fraction, h: Fraction, top: int) -> np.ndarray:
    """P(k = j), j = 0..top, for k = ⌈η²/(σ²h)⌉: P(k ≤ j) = P(|η| ≤ m_j), m_j = isqrt(⌊jhσ²⌋) (exact integers: the
    j_m = ⌈m²/(hσ²)⌉ where m_j steps up, or each m_j, whichever are fewer)."""
    step = h * sigma2
    most = math.isqrt(top * step.numerator // step.denominator)
    if most <= top:
        starts = np.array([-(-(m * m * step.denominator) // step.numerator) for m in range(most + 1)], dtype=np.int64)
        m = np.searchsorted(starts, np.arange(top + 1), side="right") - 1
        tails = marginal.tail(np.arange(most + 1, dtype=float))[m]
    else:
        m = np.array([math.isqrt(j * step.numerator // step.denominator) for j in range(top + 1)], dtype=float)
        tails = marginal.tail(m)
    out = np.empty(top + 1)
    out[0] = 1.0 - 2.0 * tails[0]
    out[1:] = 2.0 * (tails[:-1] - tails[1:])
    return np.maximum(out, 0.0)


class _Coverage:
    """Proven lower bounds on P(Q ≤ jh), j = 0..top (module docstring): the first d − 1 laws convolved (truncated
    at top), the last one's distribution function read against them, so that one bound costs O(top)."""

    def __init__(self, sigma2s: tuple[Fraction, ...], h: Fraction, top: int):
        laws = [_grid_law(m, s, h, top) for m, s in zip(_marginals(sigma2s), sigma2s)]
        self.partial = np.ones(1)
        for law in laws[:-1]:
            self.partial = np.convolve(self.partial, law)[: top + 1]
        self.partial = np.concatenate([self.partial, np.zeros(top + 1 - self.partial.size)])
        self.last = np.cumsum(laws[-1])
        self.top = top

    def __call__(self, j: int) -> float:
        """P(Σ_{i<d} k_i + k_d ≤ j) = Σ_m P(Σ_{i<d} k_i = m) P(k_d ≤ j − m), less :data:`FLOAT_SLACK`."""
        return float(self.partial[: j + 1] @ self.last[j::-1]) - FLOAT_SLACK


def _whole_grid(sigma2s) -> Fraction:
    """The largest h with 1/(σ_i²h) a whole number for every i: the gcd of the rationals 1/σ_i² (gcd of their
    numerators over lcm of their denominators); then k_i = η_i²/(σ_i²h) exactly (no grid excess). 1/σ² for
    i.i.d. coordinates."""
    inverses = [1 / Fraction(s) for s in sigma2s]
    return Fraction(math.gcd(*(v.numerator for v in inverses)), math.lcm(*(v.denominator for v in inverses)))


def _power_grid(sigma2s: tuple[Fraction, ...], alpha: float, groups: int) -> tuple[Fraction, int, bool] | None:
    """(h, the first support, whether the grid is coarsened) for the convolution powers of ``groups`` groups of equal σ_i², or None beyond the
    budget. In order: the whole grid (:func:`_whole_grid`) when its support ⌈1.1t/h⌉ + d is at most that of the
    grid of :data:`VOLUME_EXCESS` or :data:`INTEGER_GRID_SUPPORT` (i.i.d.: as before), the grid of VOLUME_EXCESS,
    the whole grid, then the grid coarsened to the support limit (:data:`MAX_POWER_SUPPORT`, and
    :data:`MAX_GROUP_WORK` over the groups) while (d + 1)h ≤ :data:`MAX_RADIUS_EXCESS`·t; each while it fits."""
    d = len(sigma2s)
    t = Fraction(math.ceil(chi2_radius(d, alpha) * 10**6), 10**6)
    limit = min(MAX_POWER_SUPPORT, MAX_GROUP_WORK // groups)
    steps = max(GRID_STEPS, math.ceil((d + 1) / (2 * VOLUME_EXCESS)))
    h = t / (d * steps)
    top = math.ceil(POWER_MARGIN * t / h) + d
    exact = _whole_grid(sigma2s)
    whole = math.ceil(Fraction(11, 10) * t / exact) + d
    if whole <= max(top, INTEGER_GRID_SUPPORT) and whole < limit:
        return exact, whole, False
    if top < limit:
        return h, top, False
    if whole < limit:
        return exact, whole, False
    steps = math.floor((limit - 2 - d) / (POWER_MARGIN * d))
    if steps < 1 or (d + 1) > MAX_RADIUS_EXCESS * d * steps:  # (d + 1)h > MAX_RADIUS_EXCESS·t
        return None
    h = t / (d * steps)
    return h, math.ceil(POWER_MARGIN * t / h) + d, True


def _power_region(sigma2s: tuple[Fraction, ...], alpha: float) -> LatticeRegion | None:
    """The region by convolution powers: the coordinates grouped by equal σ_i² (in increasing order), each
    group's law of Σ k_i the power of one k's law (:mod:`dpopt.stats.convolution_power`), the groups' laws
    convolved by :func:`~dpopt.stats.convolution_power.convolve_laws`; the distribution function less the proven
    FFT error and d·:data:`FLOAT_SLACK` (each law's rounding, the cumulative sums). None beyond the budget
    (:func:`_power_grid`), or when the law at the support limit does not reach 1 − α."""
    d = len(sigma2s)
    counts = {s: sigma2s.count(s) for s in sorted(set(sigma2s))}
    grid = _power_grid(sigma2s, alpha, len(counts))
    if grid is None:
        return None
    h, top, coarsened = grid
    limit = min(MAX_POWER_SUPPORT, MAX_GROUP_WORK // len(counts))
    marginals = dict(zip(counts, _marginals(counts)))
    while True:
        if top + 1 > limit:
            return None
        law, fft_error = None, 0.0
        for sigma2, n in counts.items():
            power, error = convolution_power(_grid_law(marginals[sigma2], sigma2, h, top), n, top)
            law, fft_error = (power, error) if law is None else convolve_laws(law, fft_error, power, error, top)
        bounds = np.cumsum(law) - (fft_error + d * FLOAT_SLACK)
        if bounds.size == top + 1 and bounds[-1] >= 1.0 - alpha:
            break
        top = math.ceil(top * Fraction(5, 4))
    j = int(np.searchsorted(bounds, 1.0 - alpha, side="left"))  # the first bound ≥ 1 − α (non-decreasing)
    return _region(sigma2s, j * h, float(bounds[j]), alpha, h, fft_error, len(counts) > 1 or coarsened)


def _region(sigma2s: tuple[Fraction, ...], radius: Fraction, coverage: float, alpha: float, h: Fraction | None,
            fft_error: float = 0.0, stated_excess: bool = False) -> LatticeRegion:
    """The region of radius r with its log volume log(V_d r^{d/2} Π σ_i) (−∞ at r = 0)."""
    d = len(sigma2s)
    log_volume = -math.inf if radius == 0 else (log_unit_ball_volume(d) + 0.5 * d * math.log(float(radius))
                                                + 0.5 * sum(math.log(float(s)) for s in sigma2s))
    return LatticeRegion(sigma2s, radius, coverage, alpha, log_volume, h, fft_error, stated_excess)


def lattice_region(sigma2s, alpha: float) -> LatticeRegion | None:
    """The smallest grid radius whose proven coverage is ≥ 1 − α (module docstring), or None when the
    convolutions exceed their budget. The d − 1 direct convolutions on the grid of :data:`GRID_STEPS` whenever
    :data:`MAX_SUPPORT` and :data:`MAX_WORK` admit them (up to 4 coordinates: a region certified before the
    convolution power keeps its radius, and its certificate verifies); beyond, the convolution powers of the
    groups of equal σ_i² (:func:`_power_region`)."""
    sigma2s = tuple(Fraction(s) for s in sigma2s)
    d = len(sigma2s)
    if d < 1:
        raise ValueError("a confidence region needs at least one noisy coordinate")
    h = _grid(d, alpha)
    top = math.ceil(Fraction(11, 10) * Fraction(chi2_radius(d, alpha)) / h) + d
    while True:
        if top + 1 > MAX_SUPPORT or (d - 1) * (top + 1) ** 2 > MAX_WORK:
            return _power_region(sigma2s, alpha)
        coverage = _Coverage(sigma2s, h, top)
        if coverage(top) >= 1.0 - alpha:
            break
        top *= 2
    lo, hi = -1, top  # bisection: coverage(hi) ≥ 1 − α > coverage(lo) (non-decreasing in j)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if coverage(mid) >= 1.0 - alpha:
            hi = mid
        else:
            lo = mid
    return _region(sigma2s, hi * h, coverage(hi), alpha, None)


@dataclass(frozen=True)
class LatticeTest:
    """The randomised Neyman–Pearson test of a whole-number shift for independent N_ℤ(0, σ_i²) noise.

    Attributes
    ----------
    weights : tuple of int
        w: the statistic is T = Σ_i w_i (y_i − θ₀_i), an integer.
    critical : int
        c: reject when T > c; when T = c, reject with probability ``randomization``.
    randomization : float
        γ in [0, 1).
    level : float
        A proven upper bound on the size, ≤ α.
    power : float
        A proven lower bound on the power against the shift.
    """

    weights: tuple[int, ...]
    critical: int
    randomization: float
    level: float
    power: float

    def reject(self, release, null, rng: np.random.Generator) -> bool:
        """The test's decision on ``release`` (integer-valued coordinates, those of the weights)."""
        t = sum(w * round(float(y) - float(n)) for w, y, n in zip(self.weights, release, null))
        if t != self.critical:
            return t > self.critical
        return bool(rng.random() < self.randomization)

    def describe(self) -> str:
        """The test and its proven level and power, for a certificate."""
        return (f"{EXACT_LAW}: randomised Neyman–Pearson test T = Σ_i w_i(y_i − θ0_i), "
                f"w = {list(self.weights)}, reject T > {self.critical} (T = {self.critical}: with probability "
                f"{self.randomization:.10f}); proven level ≤ {self.level:.10f}; the value is a proven lower bound on "
                "the power (dpopt.stats.lattice_inference)")


def integer_weights(shift, sigma2s) -> tuple[int, ...]:
    """w ∝ a_i/σ_i², scaled to coprime integers (exact rationals), sign of a kept."""
    ratios = [Fraction(a) / Fraction(s) for a, s in zip(shift, sigma2s)]
    denominator = math.lcm(*(r.denominator for r in ratios))
    whole = [int(r * denominator) for r in ratios]
    g = math.gcd(*whole)
    return tuple(w // g for w in whole) if g else tuple(whole)


def lattice_test(sigma2s, shift, alpha: float) -> LatticeTest | None:
    """The level-α randomised NP test of a whole-number ``shift`` (module docstring), or None when the partial
    convolution exceeds :data:`MAX_SUPPORT` or :data:`MAX_WORK`.

    Raises
    ------
    ValueError
        If a shift is not a whole number or α is not in (0, 1).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1) (got {alpha})")
    shift = [Fraction(float(a)) for a in shift]
    if any(a.denominator != 1 for a in shift):
        raise ValueError("the discrete law's test needs a whole-number shift")
    sigma2s = [Fraction(s) for s in sigma2s]
    weights = integer_weights(shift, sigma2s)
    active = [i for i, w in enumerate(weights) if w]
    if not active:  # no released coordinate moves: the best test rejects with probability α whatever y
        return LatticeTest(weights, 0, alpha, alpha, alpha)
    marginals = _marginals([sigma2s[i] for i in active])
    steps = [abs(weights[i]) for i in active]  # η_i is symmetric: |w_i|η_i has the law of w_i η_i
    widest = max(range(len(active)), key=lambda k: steps[k] * marginals[k].scale)
    kappa = TRUNCATION * alpha
    others = [k for k in range(len(active)) if k != widest]
    tau = kappa / max(1, len(others))
    law, cut_mass, work = np.ones(1), 0.0, 0.0
    for k in others:
        top = marginals[k].cut(tau)
        single = np.zeros(2 * steps[k] * top + 1)
        single[:: steps[k]] = np.exp(marginals[k].log_density(np.arange(-top, top + 1, dtype=float)))
        work += law.size * single.size
        if law.size + single.size - 1 > MAX_SUPPORT or work > MAX_WORK:
            return None
        law = np.convolve(law, single)
        cut_mass += 2.0 * float(marginals[k].tail(top))
    offset = (law.size - 1) // 2  # law[t + offset] = P̃(Σ_{others} w_i η_i = t)
    values = np.arange(law.size) - offset
    last, w_last = marginals[widest], steps[widest]

    def upper(c: int) -> float:
        """S̃(c) = P̃(T ≥ c) over the cut support of the others, the widest term exact."""
        need = -((values - c) // w_last)  # w·η ≥ c − t ⟺ η ≥ ⌈(c − t)/w⌉
        return float(law @ _at_least(last, need))

    bound = sum(s * m.cut(tau) for s, m in zip(steps, marginals)) + 1
    slack = cut_mass + FLOAT_SLACK
    lo, hi = -bound, bound  # bisection for the smallest c with S̃(c + 1) + slack ≤ α (T lies within ±bound)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if upper(mid + 1) + slack <= alpha:
            hi = mid
        else:
            lo = mid
    c = hi
    above, at = upper(c + 1), upper(c)
    gamma = 0.0 if at <= above else min(1.0, max(0.0, (alpha - slack - above) / (at - above)))
    level = (1.0 - gamma) * above + gamma * at + slack
    while level > alpha and gamma > 0.0:  # the rounding of γ's quotient, put on the safe side
        gamma = max(0.0, math.nextafter(gamma, 0.0) - 1e-15)
        level = (1.0 - gamma) * above + gamma * at + slack
    s = int(sum(w * a for w, a in zip(weights, shift)))
    power = max(0.0, (1.0 - gamma) * upper(c + 1 - s) + gamma * upper(c - s) - FLOAT_SLACK)
    return LatticeTest(weights, c, gamma, level, power)

