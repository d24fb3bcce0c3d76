r"""The discrete generalized Gaussian law on ℤ, its moments with proven error, and its exact sampler.

.. math:: P[K = k] = \frac{w(k)}{Z}, \qquad w(k) = e^{-(|k|/s)^p}, \qquad Z = \sum_{k\in\mathbb Z} w(k),

for a shape p ≥ 1 (an integer, as the ``generalized_gaussian`` family's) and a rational scale s > 0 in lattice
units: the restriction of the GG(0, s, p) density of Liu (2019) to ℤ. p = 1 is the discrete Laplace of scale s
and p = 2 the discrete Gaussian of variance parameter s²/2 (Canonne, Kamath & Steinke 2020).

**Sums with a proven tail.** For R > 0 and k > R, (k/s)^p ≥ (R/s)^{p−1}·k/s, so w(k) ≤ r^k with
r = exp(−(R/s)^{p−1}/s), and for m ≥ 0 with ρ = (1 + 1/R)^m r < 1,

.. math:: \sum_{k>R} k^m w(k) \le \frac{(R+1)^m r^{R+1}}{1-\rho}

(the terms k^m r^k fall by at least ρ from one k to the next). Every sum below is the exact finite sum over
|k| ≤ R in arb ball arithmetic (python-flint) plus this bound, so each result is an interval that contains the
true value; R is the first multiple of s whose tail is below 2^{−80} relative.

**Sampler** (rejection from the discrete Laplace of scale s, CKS Algorithm 2): a proposal k has weight
∝ e^{−|k|/s}, and is kept with probability

.. math:: a(k) = \exp\!\big(-[(|k|/s)^p - |k|/s + c]\big), \qquad c = 1 - 1/p,

which is at most 1: with u = |k|/s, u^p − u is smallest at u₀ = p^{−1/(p−1)} ≤ 1, where it is −u₀(1 − 1/p)
≥ −c. The kept value then has law ∝ e^{−|k|/s}·a(k) ∝ w(k) exactly. a(k) is e^{−x} for a real x (rational
for a rational s and an integer p, but with denominators far beyond int64), decided by the lazy exact
Bernoulli of :mod:`dpopt.noise.lazy_bernoulli`: no floating-point number enters a decision. The acceptance
rate is Z / (Z_Laplace e^{c}), about Γ(1 + 1/p)·e^{−c}: 0.54 at p = 2, 0.45 at p = 4.

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4), 2019 (the law).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010), Algorithm 2 (the proposal) and §5 (rejection from a discrete Laplace).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.noise.discrete_gaussian import discrete_gaussian_moments
from dpopt.noise.discrete_laplace import discrete_laplace_moments, sample_discrete_laplace
from dpopt.noise.lazy_bernoulli import bernoulli_lazy_many
from dpopt.noise.marginal import Marginal

flint = lazy_module("flint")

TAIL_BITS = 80
"""The tail beyond R is below 2^{−80} of w(0) = 1 ≤ Z."""

PRECISION = 128
"""Working precision (bits) of the sums."""


class DiscreteGeneralizedGaussian:
    """The discrete GG law on ℤ, P[K = k] ∝ exp(−(|k|/s)^p) (module docstring).

    Parameters
    ----------
    p : int
        Shape, ≥ 1.
    scale : Fraction
        s > 0, in lattice units (a float is converted exactly).
    """

    def __init__(self, p: int, scale: Fraction | float):
        if int(p) != p or p < 1:
            raise ValueError(f"the shape p must be an integer >= 1 (got {p})")
        scale = Fraction(scale)
        if scale <= 0:
            raise ValueError(f"the scale s must be positive (got {scale})")
        self.p, self.scale = int(p), scale
        self.radius = self._radius()

    # ------------------------------------------------------------------ sums
    def exponent(self, k: int) -> Fraction:
        """(|k|/s)^p, exactly."""
        return (abs(Fraction(k)) / self.scale) ** self.p

    def exponent_fmpq(self, k: int) -> flint.fmpq:
        """(|k|/s)^p as an exact python-flint rational, (|k|·b)^p / a^p for s = a/b (faster than :meth:`exponent`)."""
        return flint.fmpq((abs(int(k)) * self.scale.denominator) ** self.p, self.scale.numerator ** self.p)

    def weight(self, k: int) -> flint.arb:
        """w(k) = exp(−(|k|/s)^p) as an arb ball (at the current precision)."""
        return (-flint.arb(self.exponent_fmpq(k))).exp()

    def tail(self, radius: int, m: int = 0) -> flint.arb:
        """An upper bound on Σ_{k>R} k^m w(k) (module docstring), or an unbounded ball when ρ ≥ 1 at this R."""
        s = self.scale
        lead = (Fraction(radius) / s) ** (self.p - 1) / s
        r = (-flint.arb(flint.fmpq(lead.numerator, lead.denominator))).exp()
        rho = flint.arb(flint.fmpq(radius + 1, radius)) ** m * r
        if not rho < 1:
            return flint.arb("inf")
        return (flint.arb(radius + 1) ** m * r ** (radius + 1) / (1 - rho)).upper()

    def _radius(self) -> int:
        """The first R = j·⌈s⌉ (j = 1, 2, …) whose tails up to the fourth moment are below 2^{−TAIL_BITS}."""
        step = max(1, -((-self.scale.numerator) // self.scale.denominator))
        bound = flint.arb(2) ** -TAIL_BITS
        with working_precision(PRECISION):
            radius = step
            while not all(self.tail(radius, m) < bound for m in (0, 1, 2, 4)):
                radius += step
        return radius

    def weights(self) -> tuple:
        """w(0), …, w(R) as arb balls (:func:`weight_table`, shared by every law of the same p and s)."""
        return weight_table(self.p, self.scale, self.radius)

    def suffix_sums(self) -> tuple:
        """S_j = Σ_{i=j}^{R} w(i) for j = 0, …, R + 1 (S_{R+1} = 0), as arb balls (:func:`suffix_table`)."""
        return suffix_table(self.p, self.scale, self.radius)

    def normaliser(self) -> flint.arb:
        """A ball containing Z = Σ_{k∈ℤ} w(k): [S, S + 2·tail(R)] with S = 1 + 2·S_1 the box's sum."""
        with working_precision(PRECISION):
            core = 2 * self.suffix_sums()[1] + 1
            return core.union(core + 2 * self.tail(self.radius))

    def sums(self, powers=(0, 1, 2, 4)) -> dict[int, flint.arb]:
        r"""Σ_{k∈ℤ} |k|^m w(k) for each m in (0, 1, 2, 4), as arb balls containing the true sums (the tail's bound
        added as an interval: [S, S + 2·tail])."""
        with working_precision(PRECISION):
            weights = self.weights()
            inner = {1: flint.arb(0), 2: flint.arb(0), 4: flint.arb(0)}
            if any(m > 0 for m in powers):
                first, second, fourth = inner.values()
                for k in range(1, self.radius + 1):  # one pass: the ball times exact integers
                    once = weights[k] * k
                    twice = once * k
                    first, second, fourth = first + once, second + twice, fourth + twice * (k * k)
                inner = {1: first, 2: second, 4: fourth}
            out = {}
            for m in powers:
                core = 2 * self.suffix_sums()[1] + 1 if m == 0 else 2 * inner[m]
                out[m] = core.union(core + 2 * self.tail(self.radius, m))
        return out

    def moments(self, gamma: float | None = None) -> dict[str, float]:
        r"""E|K|, E K², E K⁴ and, given γ, P(|K| ≤ γ), each a proven enclosure's midpoint (the enclosures are far
        narrower than a double's spacing: the tail is below 2^{−80} and the arithmetic is 128-bit).

        At p = 1 and p = 2 the law is the discrete Laplace of scale s and the discrete Gaussian N_ℤ(0, s²/2), whose
        moments have closed forms (:func:`~dpopt.noise.discrete_laplace.discrete_laplace_moments`,
        :func:`~dpopt.noise.discrete_gaussian.discrete_gaussian_moments`): the term-by-term sum costs seconds at
        the scales of a sum's lattice (a few 10⁵ terms)."""
        if self.p == 1:
            return discrete_laplace_moments(float(self.scale), gamma)
        if self.p == 2:
            return discrete_gaussian_moments(float(self.scale) ** 2 / 2, gamma)
        s = self.sums()
        with working_precision(PRECISION):
            z = s[0]
            out = {"mean_abs": float((s[1] / z).mid()), "second_moment": float((s[2] / z).mid()),
                   "fourth_moment": float((s[4] / z).mid())}
            if gamma is not None:
                m = int(np.floor(gamma))
                if m < 0:
                    out["within"] = 0.0
                elif m >= self.radius:
                    outside = 2 * self.tail(m)
                    out["within"] = float((1 - outside.union(flint.arb(0)) / z).mid())
                else:
                    suffix = self.suffix_sums()
                    inside = (suffix[1] - suffix[m + 1]) * 2 + 1
                    out["within"] = float((inside / z).mid())
        return out

    # --------------------------------------------------------------- sampler
    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` exact draws (int64): discrete Laplace proposals kept with probability a(k) (module docstring)."""
        s = self.scale
        if not (s.numerator < 2**62 and s.denominator < 2**62):
            raise ValueError(f"the scale {s} is beyond the discrete Laplace sampler's 2^62")
        out = np.empty(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            proposals = sample_discrete_laplace(rng, s.numerator, s.denominator, pending.size)
            if self.p == 1:
                keep = np.ones(pending.size, dtype=bool)
            else:
                magnitudes, which = np.unique(np.abs(proposals), return_inverse=True)
                table = [self._acceptance(int(k)) for k in magnitudes]
                keep = bernoulli_lazy_many(rng, table, which.reshape(-1))
            out[pending[keep]] = proposals[keep]
            pending = pending[~keep]
        return out

    def sample_box(self, rng: np.random.Generator, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """One exact draw of K conditioned on lower_i ≤ K ≤ upper_i for each i (int64 arrays containing 0): draws of
        K outside the interval are drawn again (rejection is conditioning; the acceptance probability is at least
        P[0 ≤ K ≤ min(upper − lower)/2], above 0.3 when the interval is as wide as s)."""
        lower, upper = np.asarray(lower, dtype=np.int64), np.asarray(upper, dtype=np.int64)
        if np.any(lower > 0) or np.any(upper < 0):
            raise ValueError("the interval must contain 0")
        out = np.empty(lower.shape, dtype=np.int64)
        pending = np.arange(lower.size)
        while pending.size:
            draws = self.sample(rng, pending.size)
            keep = (draws >= lower.flat[pending]) & (draws <= upper.flat[pending])
            out.flat[pending[keep]] = draws[keep]
            pending = pending[~keep]
        return out

    def box_moments(self, points: int, gamma: float | None = None) -> dict[str, np.ndarray]:
        r"""For a true answer N = 0..M (M = points − 1) and the law restricted to the box, Y − N for Y ∈ {0..M} with
        P ∝ w(Y − N): E(Y − N)², E|Y − N|, Var(Y − N) and, given γ, P(|Y − N| ≤ γ), each an array over N. Finite sums
        in double precision (predicted utilities: the box has no tail; each sum has relative rounding error below
        points·2^-52)."""
        p, s = self.p, float(self.scale)
        k = np.arange(points, dtype=float)
        out = {name: np.empty(points) for name in ("square", "abs", "variance", "within")}
        for start in range(0, points, 256):
            n = np.arange(start, min(start + 256, points), dtype=float)[:, None]
            offsets = k[None, :] - n
            log_w = -((np.abs(offsets) / s) ** p)
            w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
            w /= w.sum(axis=1, keepdims=True)
            rows = slice(start, start + n.shape[0])
            mean = (w * offsets).sum(axis=1)
            out["square"][rows] = (w * offsets**2).sum(axis=1)
            out["abs"][rows] = (w * np.abs(offsets)).sum(axis=1)
            out["variance"][rows] = out["square"][rows] - mean**2
            out["within"][rows] = (w * (np.abs(offsets) <= (gamma if gamma is not None else -1.0))).sum(axis=1)
        if gamma is None:
            del out["within"]
        return out

    def _acceptance(self, k: int):
        """The enclosure of a(k) = exp(−[(k/s)^p − k/s + c]) for :func:`~dpopt.noise.lazy_bernoulli.bernoulli_lazy`
        (the exponent is an exact rational ≥ 0; only its exponential is enclosed)."""
        a, b, p = self.scale.numerator, self.scale.denominator, self.p
        kb = abs(int(k)) * b  # x = [p(kb)^p − p·kb·a^{p−1} + (p − 1)a^p] / (p·a^p), in integers
        numerator = p * kb**p - p * kb * a ** (p - 1) + (p - 1) * a**p
        if numerator < 0:
            raise ArithmeticError(f"negative rejection exponent at k = {k}")  # excluded by the bound on c
        q = flint.fmpq(numerator, p * a**p)
        return lambda: (-flint.arb(q)).exp()


RESYNC = 4096
"""Steps of :func:`weight_table`'s product recurrence between two direct evaluations of its factors."""


@functools.lru_cache(maxsize=4)
def weight_table(p: int, scale: Fraction, radius: int) -> tuple:
    r"""w(0), …, w(R) for w(k) = exp(−k^p/s^p), as arb balls at :data:`PRECISION` (cached: a calibration's
    certification, the normaliser and the moments read the same table).

    With E(k) = k^p and its forward differences D_j(k) = Δ^j E(k) (D_p = p! constant, D_{j}(k + 1) = D_j(k) +
    D_{j+1}(k)), the factors f_j(k) = exp(−D_j(k)/s^p) satisfy f_j(k + 1) = f_j(k)·f_{j+1}(k), so w(k) = f_0(k)
    follows from p ball products per step instead of an exponential. Every :data:`RESYNC` steps the factors are
    evaluated afresh from the exact rationals D_j(k)/s^p, so the balls' radii (which arb propagates rigorously)
    grow over at most RESYNC steps: each value is an enclosure of w(k), as
    :meth:`DiscreteGeneralizedGaussian.weight`'s.
    """
    c = flint.fmpq(scale.denominator**p, scale.numerator**p)  # 1/s^p, exactly
    out = []
    with working_precision(PRECISION):
        for start in range(0, radius + 1, RESYNC):
            factors = [(-flint.arb(_difference(p, j, start) * c)).exp() for j in range(p + 1)]
            for _ in range(start, min(start + RESYNC, radius + 1)):
                out.append(factors[0])
                for j in range(p):
                    factors[j] = factors[j] * factors[j + 1]
    return tuple(out)


@functools.lru_cache(maxsize=4)
def suffix_table(p: int, scale: Fraction, radius: int) -> tuple:
    """S_j = Σ_{i=j}^{R} w(i), j = 0, …, R + 1, summed down from S_{R+1} = 0 in arb (cached as
    :func:`weight_table`)."""
    weights = weight_table(p, scale, radius)
    out = [flint.arb(0)] * (radius + 2)
    with working_precision(PRECISION):
        for j in range(radius, -1, -1):
            out[j] = out[j + 1] + weights[j]
    return tuple(out)


def _difference(p: int, j: int, k: int) -> int:
    """Δ^j E(k) = Σ_i (−1)^{j−i} C(j, i) (k + i)^p, the j-th forward difference of E(k) = k^p."""
    return sum((-1) ** (j - i) * math.comb(j, i) * (k + i) ** p for i in range(j + 1))


class working_precision:
    """``with working_precision(bits):`` sets python-flint's working precision and restores it after."""

    def __init__(self, bits: int):
        self.bits = bits

    def __enter__(self):
        self.saved = flint.ctx.prec
        flint.ctx.prec = self.bits

    def __exit__(self, *exc):
        flint.ctx.prec = self.saved


class DiscreteGeneralizedGaussianMarginal(Marginal):
    """The discrete GG law as a :class:`~dpopt.noise.marginal.Marginal` on ℤ, for the second route of ``dpopt
    verify`` (a floating-point reading of the law: log pmf −(|k|/s)^p − log Z, Z from the proven sums; tails
    summed down from the radius R, beyond which the mass is below 2^{−79})."""

    lattice = True

    def __init__(self, law: DiscreteGeneralizedGaussian):
        self.law = law
        s = float(law.scale)
        self.s = s
        with working_precision(PRECISION):
            self.log_z = float(law.normaliser().log().mid())
        k = np.arange(law.radius + 2, dtype=float)
        pmf = np.exp(-((k / s) ** law.p) - self.log_z)
        self._tails = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(W > k) for k = 0..R+1

    @property
    def key(self) -> tuple:
        return ("discrete_generalized_gaussian", self.law.p, str(self.law.scale))

    @property
    def scale(self) -> float:
        return max(1.0, self.s)

    def log_density(self, x):
        k = np.abs(np.asarray(x, dtype=float))
        return -((k / self.s) ** self.law.p) - self.log_z

    def tail(self, x):
        k = np.floor(np.asarray(x, dtype=float))
        index = np.clip(k, 0, self._tails.size - 1).astype(np.int64)
        return np.where(k < 0, 1.0, self._tails[index])
