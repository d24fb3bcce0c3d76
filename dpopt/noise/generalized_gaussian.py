r"""The generalized Gaussian distribution GG(μ, b, p).

.. math::

    f(x \mid \mu, b, p) = \frac{p}{2 b\, \Gamma(1/p)}
        \exp\!\left\{-\left(\frac{|x-\mu|}{b}\right)^{p}\right\},
    \qquad b > 0,\; p > 0,

(Liu 2019, §2.3, with the minus sign the printed density omits). The normalizer is
:math:`\int e^{-(|x-\mu|/b)^p}dx = 2b\,\Gamma(1/p)/p`; the variance is
:math:`b^2\Gamma(3/p)/\Gamma(1/p)` (the paper prints Γ(3/b)/Γ(1/b)); p = 1 is Laplace(μ, b)
and p = 2 is N(μ, b²/2), i.e. b = √2 σ. The parameterization is that of
``scipy.stats.gennorm(beta=p, loc=μ, scale=b)``.

Everything below rests on one fact: :math:`(|X-\mu|/b)^p \sim \mathrm{Gamma}(1/p, 1)`.
Hence the two-sided tail :math:`\Pr(|X-\mu|>t) = Q(1/p, (t/b)^p)` (regularized upper
incomplete gamma), the absolute moments :math:`E|X-\mu|^m = b^m\Gamma((m+1)/p)/\Gamma(1/p)`,
and the sampler :math:`X = \mu + S\,b\,G^{1/p}` with :math:`G\sim\mathrm{Gamma}(1/p,1)` and an
independent random sign S.

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 31(4),
   2019 (digest ``papers/002_generalized_gaussian.md``, §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GeneralizedGaussian:
    """GG(μ, b, p): location ``loc`` (μ), scale ``scale`` (b), shape ``p``.

    Examples
    --------
    >>> import math
    >>> round(GeneralizedGaussian(p=2, scale=math.sqrt(2)).var, 12)      # N(0, 1)
    1.0
    >>> round(GeneralizedGaussian(p=1, scale=1.0).var, 12)     # Laplace(0, 1)
    2.0
    """

    p: float
    scale: float
    loc: float = 0.0

    def __post_init__(self):
        if not (math.isfinite(self.p) and self.p > 0):
            raise ValueError(f"the shape p must be positive and finite (got {self.p})")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"the scale b must be positive and finite (got {self.scale})")

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_variance(cls, p: float, variance: float, loc: float = 0.0) -> GeneralizedGaussian:
        r"""The GG of shape p and the given variance: :math:`b = \sqrt{v\,\Gamma(1/p)/\Gamma(3/p)}`."""
        return cls(p, math.sqrt(variance * math.exp(math.lgamma(1 / p) - math.lgamma(3 / p))), loc)

    @classmethod
    def from_sigma(cls, sigma: float, loc: float = 0.0) -> GeneralizedGaussian:
        """N(μ, σ²) as GG(μ, √2 σ, 2)."""
        return cls(2.0, math.sqrt(2.0) * sigma, loc)

    # ---------------------------------------------------------------- moments
    @property
    def log_normalizer(self) -> float:
        r""":math:`\log(2b\,\Gamma(1/p)/p)`, the log of the integral of the unnormalized density."""
        return math.log(2.0 * self.scale / self.p) + math.lgamma(1.0 / self.p)

    @property
    def normalizer(self) -> float:
        r""":math:`2b\,\Gamma(1/p)/p = 2b\,\Gamma(1 + 1/p)`."""
        return math.exp(self.log_normalizer)

    def abs_moment(self, m: float) -> float:
        r""":math:`E|X-\mu|^m = b^m\,\Gamma((m+1)/p)/\Gamma(1/p)`, m > −1."""
        return self.scale**m * math.exp(math.lgamma((m + 1) / self.p) - math.lgamma(1 / self.p))

    @property
    def var(self) -> float:
        r""":math:`b^2\,\Gamma(3/p)/\Gamma(1/p)`."""
        return self.abs_moment(2.0)

    @property
    def mean_abs(self) -> float:
        r""":math:`E|X-\mu| = b\,\Gamma(2/p)/\Gamma(1/p)`."""
        return self.abs_moment(1.0)

    # --------------------------------------------------------------- density
    def logpdf(self, x) -> np.ndarray:
        z = np.abs(np.asarray(x, dtype=float) - self.loc) / self.scale
        return -(z**self.p) - self.log_normalizer

    def pdf(self, x) -> np.ndarray:
        return np.exp(self.logpdf(x))

    def tail(self, t) -> np.ndarray:
        r"""Two-sided tail :math:`\Pr(|X-\mu| > t) = Q(1/p, (t/b)^p)` for t ≥ 0 (1 for t < 0)."""
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        t = np.asarray(t, dtype=float)
        return np.where(
            t > 0, special.gammaincc(1 / self.p, (np.maximum(t, 0.0) / self.scale) ** self.p), 1.0
        )

    def sf(self, x) -> np.ndarray:
        r""":math:`\Pr(X > x)`, from the upper incomplete gamma on the far side (no cancellation)."""
        d = np.asarray(x, dtype=float) - self.loc
        half = 0.5 * self.tail(np.abs(d))
        return np.where(d >= 0, half, 1.0 - half)

    def cdf(self, x) -> np.ndarray:
        r""":math:`\Pr(X \le x)`."""
        d = np.asarray(x, dtype=float) - self.loc
        half = 0.5 * self.tail(np.abs(d))
        return np.where(d <= 0, half, 1.0 - half)

    def ppf(self, u) -> np.ndarray:
        """The quantile function: the inverse of :meth:`cdf` on (0, 1)."""
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        u = np.asarray(u, dtype=float)
        lower = u < 0.5
        tail = np.where(lower, 2.0 * u, 2.0 * (1.0 - u))  # Pr(|X - μ| > |x - μ|)
        radius = self.scale * special.gammainccinv(1 / self.p, np.clip(tail, 0.0, 1.0)) ** (1 / self.p)
        return self.loc + np.where(lower, -radius, radius)

    def interval_probability(self, lo, hi) -> np.ndarray:
        r""":math:`\Pr(lo \le X \le hi)` for lo ≤ hi, from the side that avoids cancellation."""
        return self._half_integral(0.0, lo, hi)

    def partial_abs_moment(self, m: float, lo, hi) -> np.ndarray:
        r""":math:`\int_{lo}^{hi} |x-\mu|^m f(x)\,dx` for lo ≤ hi (m ≥ 0).

        With :math:`H_m(t) = \int_0^t x^m f(x+\mu)\,dx = \tfrac{b^m\Gamma((m+1)/p)}{2\Gamma(1/p)}
        P\big((m+1)/p, (t/b)^p\big)` for t ≥ 0 (the Gamma fact of the module docstring).
        """
        return self._half_integral(float(m), lo, hi)

    def _half_integral(self, m: float, lo, hi) -> np.ndarray:
        from scipy import special  # imported where used (start-up of `dpopt verify`)

        a = np.asarray(lo, dtype=float) - self.loc
        c = np.asarray(hi, dtype=float) - self.loc
        shape = (m + 1.0) / self.p
        k = 0.5 * self.scale**m * math.exp(math.lgamma(shape) - math.lgamma(1.0 / self.p))

        a, c = np.broadcast_arrays(a, c)
        straddle = (a < 0) & (c > 0)
        near = np.minimum(np.abs(a), np.abs(c))
        far = np.maximum(np.abs(a), np.abs(c))
        out = np.empty(a.shape)

        def incomplete(function, t):
            return function(shape, (t / self.scale) ** self.p)

        # straddling 0: P(|a|) + P(c); one side: Q(near) − Q(far) (no cancellation in the tail)
        out[straddle] = incomplete(special.gammainc, -a[straddle]) + incomplete(special.gammainc, c[straddle])
        side = ~straddle
        out[side] = incomplete(special.gammaincc, near[side]) - incomplete(special.gammaincc, far[side])
        return k * out

    # --------------------------------------------------------------- sampling
    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        r"""Draws :math:`\mu + S\,b\,G^{1/p}`, G ~ Gamma(1/p, 1), S = ±1 with probability ½."""
        g = rng.gamma(1.0 / self.p, 1.0, size=size)
        sign = np.where(rng.random(size=size) < 0.5, -1.0, 1.0)
        return self.loc + sign * self.scale * g ** (1.0 / self.p)

    def sample_truncated(self, rng: np.random.Generator, lo, hi, size) -> np.ndarray:
        """Draws of X conditioned on lo ≤ X ≤ hi (inverse CDF on [F(lo), F(hi)]).

        ``lo`` and ``hi`` broadcast against ``size``; the interval must contain μ or have
        positive probability under GG(μ, b, p).
        """
        f_lo, f_hi = self.cdf(lo), self.cdf(hi)
        u = f_lo + rng.random(size=size) * (f_hi - f_lo)
        return np.clip(self.ppf(u), lo, hi)
