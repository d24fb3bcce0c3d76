r"""The discrete Gaussian law N_ℤ(0, σ²) on ℤ, its moments and its exact sampler
(Canonne, Kamath & Steinke 2020).

Sampling is CKS Algorithm 3: with t = ⌊σ⌋ + 1, draw Y from the discrete Laplace of
scale t and accept it with probability exp(−(|Y| − σ²/t)²/(2σ²)); the product of the two
is proportional to exp(−Y²/(2σ²)). Everything is integer arithmetic on uniform integers.
The parameter range (σ² ≤ 2^30, numerator < 2^31, denominator ≤ 2^30) keeps every
product within int64 except |Y| beyond ≈ 2^31/(tq) (probability below e^{−2000} for
σ ≥ 1), which is handled with Python integers; the number of exp(−1) trials of those
rare proposals is capped at 2^62 (the capped and exact samplers differ only if 2^62
consecutive Bernoulli(1/e) trials succeed).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithm 3.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.noise.discrete_laplace import bernoulli_exp_split, redraw_rejected, sample_discrete_laplace
from dpopt.noise.marginal import Marginal

_CAP = 2**62


class DiscreteGaussianMarginal(Marginal):
    r"""N_ℤ(0, σ²): pmf ∝ exp(−k²/(2σ²)) on ℤ (Canonne, Kamath & Steinke 2020).

    Normalised by the sum over |k| ≤ ⌈40σ⌉ + 10 (the rest is below e^{−800}).
    """

    lattice = True

    def __init__(self, sigma2: float):
        if not (sigma2 > 0 and math.isfinite(sigma2)):
            raise ValueError(f"σ² must be positive and finite (got {sigma2})")
        self.sigma2 = float(sigma2)
        top = int(math.ceil(40.0 * math.sqrt(self.sigma2))) + 10
        k = np.arange(0, top + 1, dtype=float)
        half = np.exp(-k * k / (2.0 * self.sigma2))
        self._log_norm = math.log(2.0 * float(half[1:].sum()) + 1.0)
        pmf = half * math.exp(-self._log_norm)
        self._tail = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(W > k), k = 0..top

    @property
    def key(self) -> tuple:
        return ("discrete_gaussian", self.sigma2)

    @property
    def scale(self) -> float:
        return max(1.0, math.sqrt(self.sigma2))

    def log_density(self, x):
        k = np.asarray(x, dtype=float)
        return -k * k / (2.0 * self.sigma2) - self._log_norm

    def tail(self, x):
        k = np.clip(np.floor(np.asarray(x, dtype=float)), 0, self._tail.size - 1).astype(int)
        return self._tail[k]


def discrete_gaussian_moments(sigma2: float, gamma: float | None = None) -> dict[str, float]:
    """E|Y|, E[Y²], E[Y⁴] and, given γ, P(|Y| ≤ γ) of N_Z(0, σ²), by summing the series in float64.

    Terms beyond |y| = 40σ + 2 are below e^{−800} of the largest and are left out.
    """
    top = math.ceil(40.0 * math.sqrt(sigma2) + 2)
    y = np.arange(-top, top + 1, dtype=float)
    w = np.exp(-(y * y) / (2.0 * sigma2))
    w /= w.sum()
    out = {
        "mean_abs": float(np.sum(w * np.abs(y))),
        "second_moment": float(np.sum(w * y * y)),
        "fourth_moment": float(np.sum(w * y**4)),
    }
    if gamma is not None:
        out["within"] = float(np.sum(w[np.abs(y) <= gamma]))
    return out


def _gaussian_candidates(rng: np.random.Generator, p: int, q: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of CKS Algorithm 3: Y ~ discrete Laplace of scale t = ⌊σ⌋ + 1 and the Bernoulli of
    exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|tq − p)²/(2pqt²)), whole and fractional parts in integers."""
    t = math.isqrt(p // q) + 1
    den = 2 * p * q * t * t
    y = sample_discrete_laplace(rng, t, 1, size)
    magnitude = np.abs(y)
    small = magnitude <= 2**31 // (t * q)  # | |Y| t q − p | < 2^31: its square fits in int64
    a = np.where(small, magnitude, 0) * (t * q) - p
    whole, frac = np.divmod(a * a, den)
    for i in np.flatnonzero(~small):  # far-tail proposals: exact Python integers, the whole part capped at 2^62
        w, frac[i] = divmod((int(magnitude[i]) * t * q - p) ** 2, den)
        whole[i] = min(w, _CAP)
    return y, bernoulli_exp_split(rng, whole, frac, den)


def sample_discrete_gaussian(rng: np.random.Generator, p: int, q: int, size: int) -> np.ndarray:
    """``size`` exact draws of N_Z(0, p/q) (CKS Algorithm 3); q a power of two ≤ 2^30, p < 2^31."""
    t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1
    if 2 * p * q * t * t >= 2**62:
        raise ValueError(f"σ² = {p}/{q} is outside the exact sampler's int64 range")
    return redraw_rejected(lambda n: _gaussian_candidates(rng, p, q, n), size)
