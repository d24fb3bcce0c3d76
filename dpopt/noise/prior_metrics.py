r"""Prior-dependent utility metrics of additive noise (R²DP's Table 1), with their
Monte Carlo counterparts.

The metrics are functions of a symmetric one-dimensional noise law given by its tail
P(Z > x) (x ≥ 0) and density; R²DP noise provides both from the MGF of its second fold
(P(Z > x) = ½M(−x), f(x) = ½M'(−|x|), eq. 10–11), the staircase in closed form.

**Post-processing policy (explicit; the paper leaves it unspecified, digest P13).** A
noisy count c + Z is released as r = max(c + Z, τ) with a floor τ > 0 given in the spec;
there is no data-dependent renormalisation. With C = Σ c_i, p = c/C and q = r/C:

* ``kl``: the generalised Kullback–Leibler divergence (I-divergence)
  :math:`\mathbb E\,\sum_i p_i\ln(p_i/q_i) - p_i + q_i` — the KL divergence when q sums to 1,
  and still a divergence (≥ 0, = 0 iff q = p) when it does not;
* ``renyi`` of order α ≠ 1:
  :math:`\frac1{\alpha-1}\ln\big(1 + \mathbb E\sum_i [p_i^\alpha q_i^{1-\alpha} - \alpha p_i - (1-\alpha)q_i]\big)`,
  the Rényi divergence when q sums to 1, extended to positive measures like the KL above
  (the bracket is α(α−1) times Amari's α-divergence, so the value is ≥ 0); the expectation
  is taken inside the logarithm, which makes it a function of per-cell expectations;
* ``mallows`` of order p ≥ 1: the Mallows (Wasserstein-p) distance between the
  distribution μ of the true values (the prior vector's entries, e.g. the degrees of a
  graph's nodes) and the distribution μ∗ν of the released values — the standard
  definition on sorted samples in the limit of many values (the paper prints
  :math:`\frac1n\sum(|X_i-Y_i|^p)^{1/p}`, a misplaced exponent, digest P14). For a finite
  vector it is bracketed: W_p(μ, μ∗ν)^p ≤ E W_p^p(emp(x), emp(x+Z)) ≤ E|Z|^p.

Every per-cell quantity is E[h(max(c + Z, τ))] = h(τ) + ∫_τ^∞ h'(y) P(c + Z > y) dy, a
one-dimensional integral of the noise tail, so each metric is computed from the MGF by
quadrature; the ``*_monte_carlo`` functions estimate the same quantities by sampling.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.noise.second_folds import DiscreteFold, SecondFold

integrate = lazy_module("scipy.integrate")
optimize = lazy_module("scipy.optimize")


class SymmetricNoise(Protocol):
    """A symmetric law on ℝ."""

    def tail(self, x) -> np.ndarray:
        """P(Z > x) for x ≥ 0."""

    def density(self, x) -> np.ndarray:
        """f(x)."""

    def abs_moment(self, p: float) -> float:
        """E|Z|^p (``inf`` when it diverges)."""

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        """Independent draws, array of shape ``size``."""

    @property
    def typical_scale(self) -> float:
        """A scale for quadrature panels (e.g. the median of |Z|)."""


@dataclass(frozen=True)
class R2DPNoise:
    """The R²DP noise of a second fold: tail ½M(−x), density ½M'(−|x|), E|Z|^p = Γ(p+1)E[t^{−p}]."""

    fold: SecondFold

    def tail(self, x):
        return self.fold.noise_tail(x)

    def density(self, x):
        return np.exp(self.fold.noise_log_density(x))

    def abs_moment(self, p: float) -> float:
        return math.gamma(p + 1.0) * self.fold.inverse_moment(p)

    def sample(self, rng, size):
        n = int(np.prod(size))
        return self.fold.sample_noise(rng, n).reshape(size)

    @property
    def typical_scale(self) -> float:
        return 1.0 / self.fold.mean()


def laplace_noise(scale: float) -> R2DPNoise:
    """Laplace(0, b) as the one-atom R²DP noise (t ≡ 1/b)."""
    return R2DPNoise(DiscreteFold([1.0 / scale]))


# ---------------------------------------------------------------- quadrature
def _survival(noise: SymmetricNoise, u: float) -> float:
    """P(Z > u) for any real u."""
    return float(noise.tail(u)) if u >= 0 else 1.0 - float(noise.tail(-u))


def _edges(scale: float, limit: float = math.inf) -> list[float]:
    """Panel edges 0, s/100, s, 10 s, …, 10⁴ s (cut at ``limit``), then ``limit``."""
    inner = [scale * k for k in (0.01, 1.0, 10.0, 100.0, 1e4)]
    return [0.0, *(x for x in inner if x < limit), limit]


def clipped_expectations(noise: SymmetricNoise, h: Callable[[np.ndarray], np.ndarray],
                         dh: Callable[[np.ndarray], np.ndarray], counts, floor: float) -> np.ndarray:
    r"""E[h(max(c_i + Z, τ))] for every count c_i at once (integration by parts):

    .. math:: h(	au) + \int_0^{(c-	au)^+} h'(c-d)\,(1 - P(Z>d))\,dd
              + \int_0^\infty h'(\max(c,	au)+d)\,P(Z > d + (	au-c)^+)\,dd ,

    each a vector-valued adaptive quadrature (``scipy.integrate.quad_vec``) over panels
    scaled to the noise.

    A law that provides its own ``clipped_expectations(h, counts, floor)`` (the staircase:
    piecewise-constant density) is integrated by it instead.

    Parameters
    ----------
    h, dh : callable
        h and h', vectorised, finite on [τ, ∞).
    """
    own = getattr(noise, "clipped_expectations", None)
    if own is not None:  # a law with a piecewise-constant density integrates exactly by pieces
        return own(h, counts, floor)
    c = np.asarray(counts, dtype=float)
    scale = noise.typical_scale
    width = np.maximum(c - floor, 0.0)
    start = np.maximum(c, floor)
    shift = np.maximum(floor - c, 0.0)
    total = np.full(c.shape, float(h(np.float64(floor))))

    def above(d: float) -> np.ndarray:
        return dh(start + d) * noise.tail(d + shift)

    def integral(f, lo: float, hi: float) -> np.ndarray:
        # panels run from the bulk outwards: a panel's absolute tolerance is relative
        # to what has been accumulated, so negligible far panels are not refined forever
        tol = 1e-13 * max(float(np.max(np.abs(total))), 1e-300)
        return integrate.quad_vec(f, lo, hi, epsabs=tol, epsrel=1e-11, norm="max", limit=400)[0]

    for lo, hi in zip(_edges(scale)[:-1], _edges(scale)[1:]):
        total += integral(above, lo, hi)
    if np.any(width > 0):
        def below(d: float) -> np.ndarray:
            inside = d < width
            return np.where(inside, dh(np.where(inside, c - d, start)), 0.0) * (1.0 - float(noise.tail(d)))

        edges = sorted({*_edges(scale, float(width.max())), *width[width > 0].tolist()})
        for lo, hi in zip(edges[:-1], edges[1:]):
            total += integral(below, lo, hi)
    return total


def _proportions(prior) -> tuple[np.ndarray, float]:
    c = np.asarray(prior, dtype=float)
    if c.ndim != 1 or not np.all(np.isfinite(c)) or np.any(c < 0) or c.sum() <= 0:
        raise ValueError("a prior histogram needs non-negative finite counts with a positive total")
    return c, float(c.sum())


def kl_divergence(noise: SymmetricNoise, prior, floor: float) -> float:
    r"""E Σ_i p_i ln(p_i/q_i) − p_i + q_i for q = max(c + Z, τ)/C (module docstring)."""
    c, total = _proportions(prior)
    if not math.isfinite(noise.abs_moment(1.0)):
        return math.inf
    mean_r = clipped_expectations(noise, lambda y: y, np.ones_like, c, floor)
    mean_log = clipped_expectations(noise, np.log, np.reciprocal, c, floor)
    return float(kl_from_expectations(prior, mean_r, mean_log))


def kl_from_expectations(prior, mean_r, mean_log) -> np.ndarray:
    """Σ_i p_i(ln p_i + ln C − E ln r_i) − p_i + E r_i/C over the last axis, from the per-cell E r_i and E ln r_i
    of the clipped release r = max(c + Z, τ) (:func:`kl_divergence`; rows of several laws at once)."""
    c, total = _proportions(prior)
    p = c / total
    with np.errstate(divide="ignore"):
        entropy_part = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) + math.log(total) - mean_log), 0.0)
    return np.sum(entropy_part + np.asarray(mean_r) / total - p, axis=-1)


def renyi_divergence(noise: SymmetricNoise, prior, floor: float, order: float) -> float:
    r"""(1/(α−1)) ln(1 + E Σ_i [p_i^α q_i^{1−α} − α p_i − (1−α) q_i]) for q = max(c + Z, τ)/C.

    For normalised q the bracket sums to Σ p^α q^{1−α} − 1 and this is the Rényi
    divergence (with the expectation inside the logarithm); the −αp − (1−α)q terms make
    the bracket α(α−1) times Amari's α-divergence of positive measures, so the value is
    ≥ 0 even when clipping adds mass (without them it can turn negative and reward
    noisier releases). ``inf`` when the argument of the logarithm is not positive.
    """
    if order == 1 or order <= 0:
        raise ValueError("the Rényi order must be positive and different from 1")
    c, total = _proportions(prior)
    if order < 1 and not math.isfinite(noise.abs_moment(1.0)):
        return math.inf
    if order > 1 and not math.isfinite(noise.abs_moment(1.0)):
        return math.inf
    powers = np.zeros_like(c)
    positive = c > 0
    powers[positive] = clipped_expectations(noise, lambda y: y ** (1.0 - order),
                                            lambda y: (1.0 - order) * y ** (-order), c[positive], floor)
    mean_r = clipped_expectations(noise, lambda y: y, np.ones_like, c, floor)
    argument = 1.0 + float(renyi_bracket_from_expectations(prior, order, powers, mean_r))
    return math.log(argument) / (order - 1.0) if argument > 0 else math.inf


def renyi_bracket_from_expectations(prior, order: float, powers, mean_r) -> np.ndarray:
    """Σ_i p_i^α C^{α−1} E r_i^{1−α} − α p_i − (1−α) E r_i/C over the last axis (the bracket of
    :func:`renyi_divergence`), from the per-cell expectations (``powers`` 0 where c_i = 0)."""
    c, total = _proportions(prior)
    p = c / total
    return np.sum(p**order * total ** (order - 1.0) * np.asarray(powers) - order * p
                  - (1.0 - order) * np.asarray(mean_r) / total, axis=-1)


def _values(values) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(values, dtype=float).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("Mallows needs a non-empty vector of finite values")
    atoms, counts = np.unique(x, return_counts=True)
    return atoms, counts / counts.sum()


def _mixture_cdf(noise: SymmetricNoise, atoms, weights, s: float) -> float:
    return float(sum(w * (1.0 - _survival(noise, s - a)) for a, w in zip(atoms, weights)))


def mallows_distance(noise: SymmetricNoise, values, order: float = 1.0) -> float:
    r"""W_p(μ, μ∗ν) with μ the distribution of ``values`` and ν the noise law.

    :math:`W_p^p = \int |Q_\mu(F(s)) - s|^p\,dF(s)`, F the cdf of μ∗ν: Q_μ(F(s)) is the
    atom x_(j) on the interval where F(s) ∈ (cum_{j−1}, cum_j], whose ends are found by
    root finding. On each piece, integration by parts against the (continuous) cdf F left
    of the atom and the survival 1 − F right of it,
    :math:`\int \varphi\,dF = [\varphi F] - \int \varphi' F`, keeps the integrands
    continuous even when the noise density is not (the staircase). ``inf`` when E|Z|^p diverges.
    """
    if order < 1:
        raise ValueError("the Mallows order must be at least 1")
    if not math.isfinite(noise.abs_moment(order)):
        return math.inf
    atoms, weights = _values(values)
    scale = noise.typical_scale

    def cdf(s: float) -> float:
        return _mixture_cdf(noise, atoms, weights, s)

    def survival(s: float) -> float:
        return float(sum(w * _survival(noise, s - a) for a, w in zip(atoms, weights)))

    cuts = []
    for target in np.cumsum(weights)[:-1]:
        lo, hi = atoms[0] - scale, atoms[-1] + scale
        while cdf(lo) > target:
            lo -= 2 * (hi - lo)
        while cdf(hi) < target:
            hi += 2 * (hi - lo)
        cuts.append(optimize.brentq(lambda s: cdf(s) - target, lo, hi, xtol=1e-13 * max(1.0, abs(hi)), rtol=1e-14))
    edges = [-math.inf, *cuts, math.inf]

    def quad(f, lo: float, hi: float) -> float:
        # panels growing away from the finite end (an infinite range squeezed into one
        # QUADPACK call loses accuracy on the staircase's kinks)
        if math.isinf(hi):
            pieces = [lo, *(lo + scale * k for k in (1.0, 10.0, 100.0, 1e4)), hi]
        elif math.isinf(lo):
            pieces = [lo, *(hi - scale * k for k in (1e4, 100.0, 10.0, 1.0)), hi]
        else:
            pieces = [lo, hi]
        with warnings.catch_warnings():
            # the staircase cdf has a kink at every step: QUADPACK reports round-off on
            # the long panels; the results agree with an integration split at every kink
            # to ~1e-7 relative (tests/test_r2dp_metrics.py)
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            return sum(integrate.quad(f, a, b, limit=400, epsabs=1e-13 * scale, epsrel=1e-10)[0]
                       for a, b in zip(pieces[:-1], pieces[1:]))

    total = 0.0
    for j, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        a = atoms[j]
        left_hi, right_lo = min(hi, a), max(lo, a)
        if lo < left_hi:  # φ(s) = (a − s)^p decreasing: ∫φ dF = φF|_lo^hi + ∫ p(a − s)^{p−1} F
            total += ((a - left_hi) ** order * cdf(left_hi) - (0.0 if math.isinf(lo) else (a - lo) ** order * cdf(lo))
                      + quad(lambda s: order * (a - s) ** (order - 1) * cdf(s), lo, left_hi))
        if right_lo < hi:  # φ(s) = (s − a)^p increasing: ∫φ dF = −φS|_lo^hi + ∫ p(s − a)^{p−1} S
            total += ((right_lo - a) ** order * survival(right_lo)
                      - (0.0 if math.isinf(hi) else (hi - a) ** order * survival(hi))
                      + quad(lambda s: order * (s - a) ** (order - 1) * survival(s), right_lo, hi))
    return total ** (1.0 / order)


def power_geometric_tail(order: float, rate: float, start: int) -> float:
    r"""An upper bound on :math:`\sum_{j \ge J} j^p e^{-\lambda j}` (J = ``start`` ≥ 1, p = ``order``, λ = ``rate``),
    the tail moment of a geometric law that fixes where a lattice law's sums may stop: the ratio ((j + 1)/j)^p e^{−λ}
    of consecutive terms decreases in j, so the terms fall at least geometrically with ρ = ((J + 1)/J)^p e^{−λ} and
    the sum is at most J^p e^{−λJ}/(1 − ρ); ``inf`` when ρ ≥ 1."""
    rho = ((start + 1.0) / start) ** order * math.exp(-rate)
    if rho >= 1.0:
        return math.inf
    return math.exp(order * math.log(start) - rate * start) / (1.0 - rho)


def lattice_mallows_distance(pmf, values, order: float = 1.0) -> float:
    r"""W_p(μ, μ∗ν) for a law ν on the integers −K, …, K given by ``pmf`` (length 2K + 1, summing to 1), μ the
    distribution of ``values``: exactly the finite sum of the quantile coupling (optimal on ℝ for p ≥ 1),

    .. math:: W_p^p = \int_0^1 |Q_\mu(u) - Q_{\mu*\nu}(u)|^p\,du
              = \sum_{\text{pieces}} (u_{i} - u_{i-1})\,|Q_\mu - Q_{\mu*\nu}|^p ,

    both quantile functions constant between consecutive breakpoints u_i of the two cdfs (μ∗ν has the atoms
    x + k with mass μ(x)ν(k)); float64 sums. A law on all of ℤ truncated by moving its mass beyond K to 0 (Z' =
    Z·1{|Z| ≤ K}) changes W_p by at most (E|Z|^p 1{|Z| > K})^{1/p} (the coupling (X + Z, X + Z') and the triangle
    inequality).
    """
    if order < 1:
        raise ValueError("the Mallows order must be at least 1")
    atoms, weights = _values(values)
    nu = np.asarray(pmf, dtype=float)
    half = (nu.size - 1) // 2
    positions = np.add.outer(atoms, np.arange(-half, half + 1, dtype=float)).ravel()
    masses = np.multiply.outer(weights, nu).ravel()
    order_of = np.argsort(positions, kind="stable")
    positions, masses = positions[order_of], masses[order_of]
    cum_mu = np.cumsum(weights) / weights.sum()
    cum_nu = np.cumsum(masses) / masses.sum()
    cum_mu[-1] = cum_nu[-1] = 1.0
    breaks = np.union1d(cum_mu, cum_nu)
    lower = np.concatenate(([0.0], breaks[:-1]))
    middle = 0.5 * (lower + breaks)
    q_mu = atoms[np.minimum(np.searchsorted(cum_mu, middle), atoms.size - 1)]
    q_nu = positions[np.minimum(np.searchsorted(cum_nu, middle), positions.size - 1)]
    return float(np.sum((breaks - lower) * np.abs(q_mu - q_nu) ** order)) ** (1.0 / order)


# ------------------------------------------------------------- Monte Carlo
@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo mean with its standard error."""

    value: float
    standard_error: float


def _mean_se(per_draw: np.ndarray) -> Estimate:
    return Estimate(float(per_draw.mean()), float(per_draw.std(ddof=1) / math.sqrt(per_draw.size)))


def kl_divergence_monte_carlo(noise: SymmetricNoise, prior, floor: float, draws: int,
                              rng: np.random.Generator) -> Estimate:
    """Sample mean (and its standard error) of the generalised KL over ``draws`` releases."""
    c, total = _proportions(prior)
    p = c / total
    q = np.maximum(c + noise.sample(rng, (draws, c.size)), floor) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0) / q), 0.0)
    return _mean_se(np.sum(term - p + q, axis=1))


def renyi_bracket_monte_carlo(noise: SymmetricNoise, prior, floor: float, order: float, draws: int,
                              rng: np.random.Generator) -> Estimate:
    """Sample mean of Σ p_i^α q_i^{1−α} − α p_i − (1−α) q_i (the bracket in :func:`renyi_divergence`)."""
    c, total = _proportions(prior)
    p = c / total
    q = np.maximum(c + noise.sample(rng, (draws, c.size)), floor) / total
    return _mean_se(np.sum(p**order * q ** (1.0 - order) - order * p - (1.0 - order) * q, axis=1))


def mallows_monte_carlo(noise: SymmetricNoise, values, order: float, repeats: int,
                        rng: np.random.Generator) -> float:
    """W_p between the empirical distributions of ``values`` (repeated ``repeats`` times)
    and of one noisy release of them: sort both and average |x_(i) − y_(i)|^p."""
    x = np.sort(np.repeat(np.asarray(values, dtype=float).reshape(-1), repeats))
    y = np.sort(x + noise.sample(rng, x.size))
    return float(np.mean(np.abs(x - y) ** order) ** (1.0 / order))


# -------------------------------------------- per-atom costs for the mixture LP
@functools.cache
def _quadrature_nodes() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """80-point Gauss–Laguerre and Gauss–Legendre nodes and weights (numpy.polynomial imported when
    first needed)."""
    return np.polynomial.laguerre.laggauss(80), np.polynomial.legendre.leggauss(80)


def laplace_clipped_expectations(h: Callable[[np.ndarray], np.ndarray], count: float, floor: float,
                                 rates: np.ndarray) -> np.ndarray:
    r"""E[h(max(c + Z, τ))] for Z ~ Laplace(0, 1/t), for every rate t in ``rates`` at once.

    Fixed Gauss rules in u = t|x|: Gauss–Laguerre on the half-lines where h is smooth,
    Gauss–Legendre on the clipped-free part of the negative side (truncated at u = 60,
    beyond which the Laplace mass is e^{−60}). Used for the LP's cost vectors; values
    reported for a chosen mechanism come from :func:`clipped_expectation`.
    """
    t = np.asarray(rates, dtype=float)[:, None]
    (xl, wl), (xg, wg) = _quadrature_nodes()
    ug = (xg + 1.0) / 2.0

    def half_line(base: float) -> np.ndarray:
        # ∫_0^∞ h(base + u/t) e^{−u} du: Gauss–Legendre on [0, 1] (h may vary fast near
        # u = 0 when t is small), Gauss–Laguerre on [1, ∞)
        near = (h(base + ug[None, :] / t) * np.exp(-ug)[None, :]) @ (wg / 2.0)
        far = math.exp(-1.0) * (h(base + (1.0 + xl[None, :]) / t) @ wl)
        return near + far

    a = count - floor  # distance from the count down to the floor
    if a <= 0:
        # all mass below τ − c is clipped: P(Z ≤ −a') h(τ) + ½ e^{−t a'} ∫ h(τ + u/t) e^{−u} du
        decay = np.exp(-t[:, 0] * (-a))
        return (1.0 - 0.5 * decay) * h(floor) + 0.5 * decay * half_line(floor)
    upper = 0.5 * half_line(count)
    span = np.minimum(t[:, 0] * a, 60.0)
    u = (xg[None, :] + 1.0) * (span[:, None] / 2.0)
    lower = 0.5 * (span / 2.0) * np.sum(wg[None, :] * h(count - u / t) * np.exp(-u), axis=1)
    clipped = 0.5 * np.exp(-t[:, 0] * a) * h(floor)
    return upper + lower + clipped


def kl_costs(prior, floor: float, rates: np.ndarray) -> np.ndarray:
    """The generalised KL of a Laplace(1/t) release, for every rate t (LP cost vector)."""
    c, total = _proportions(prior)
    out = np.zeros(len(rates))
    for ci in c:
        p = ci / total
        out += laplace_clipped_expectations(lambda y: y, ci, floor, rates) / total - p
        if p > 0:
            out += p * (math.log(p) + math.log(total) - laplace_clipped_expectations(np.log, ci, floor, rates))
    return out


def renyi_bracket_costs(prior, floor: float, order: float, rates: np.ndarray) -> np.ndarray:
    """E Σ p_i^α q_i^{1−α} − α p_i − (1−α) q_i of a Laplace(1/t) release, for every rate t."""
    c, total = _proportions(prior)
    out = np.zeros(len(rates))
    for ci in c:
        p = ci / total
        mean_q = laplace_clipped_expectations(lambda y: y, ci, floor, rates) / total
        power = 0.0 if ci == 0 else p**order * total ** (order - 1.0) * laplace_clipped_expectations(
            lambda y: y ** (1.0 - order), ci, floor, rates)
        out += power - order * p - (1.0 - order) * mean_q
    return out


def usefulness(noise: SymmetricNoise, gamma: float) -> float:
    """P(|Z| ≤ γ) = 1 − 2 P(Z > γ) (for R²DP: 1 − M(−γ), Table 1)."""
    return 1.0 - 2.0 * float(noise.tail(gamma))


def usefulness_monte_carlo(noise: SymmetricNoise, gamma: float, draws: int, rng) -> Estimate:
    return _mean_se((np.abs(noise.sample(rng, draws)) <= gamma).astype(float))


def abs_moment_monte_carlo(noise: SymmetricNoise, p: float, draws: int, rng) -> Estimate:
    return _mean_se(np.abs(noise.sample(rng, draws)) ** p)


__all__ = [
    "Estimate",
    "R2DPNoise",
    "SymmetricNoise",
    "abs_moment_monte_carlo",
    "clipped_expectations",
    "kl_costs",
    "kl_divergence",
    "kl_divergence_monte_carlo",
    "kl_from_expectations",
    "laplace_clipped_expectations",
    "laplace_noise",
    "lattice_mallows_distance",
    "power_geometric_tail",
    "mallows_distance",
    "mallows_monte_carlo",
    "renyi_bracket_costs",
    "renyi_bracket_from_expectations",
    "renyi_bracket_monte_carlo",
    "renyi_divergence",
    "usefulness",
    "usefulness_monte_carlo",
]
