r"""The discrete Laplace law on ℤ and its exact sampler (Canonne, Kamath & Steinke 2020).

.. math:: P[Y = y] = \frac{1 - r}{1 + r}\, r^{|y|}, \qquad r = e^{-1/b}.

The sampler draws every value in integer arithmetic from uniform integers (no floating
point): Algorithm 1 of CKS for Bernoulli(exp(−γ)), γ rational, and Algorithm 2 for the
discrete Laplace of a rational scale t/s. The samplers are vectorized over draws (numpy
int64, each draw its own rejection loop); their parameters are limited so that no
intermediate value can overflow int64.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 and 2.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.noise.marginal import Marginal


class DiscreteLaplaceMarginal(Marginal):
    """Discrete Laplace of scale b on ℤ: pmf (1 − r)/(1 + r)·r^{|k|}, r = e^{−1/b}."""

    lattice = True

    def __init__(self, scale: float):
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"the discrete Laplace scale must be positive and finite (got {scale})")
        self.b = float(scale)

    @property
    def key(self) -> tuple:
        return ("discrete_laplace", self.b)

    @property
    def scale(self) -> float:
        return max(1.0, self.b)

    def log_density(self, x):
        k = np.abs(np.asarray(x, dtype=float))
        log_r = -1.0 / self.b
        return k * log_r + math.log(-math.expm1(log_r)) - math.log1p(math.exp(log_r))

    def tail(self, x):
        k = np.floor(np.asarray(x, dtype=float))
        return np.exp((k + 1.0) * (-1.0 / self.b)) / (1.0 + math.exp(-1.0 / self.b))

def discrete_laplace_moments(scale: float, gamma: float | None = None) -> dict[str, float]:
    r"""E|Y|, E[Y²], E[Y⁴] and, given γ, P(|Y| ≤ γ) of the discrete Laplace of scale b, in closed form.

    With r = e^{−1/b}: E|Y| = 2r/(1−r²); E Y² = 2r/(1−r)²; E Y⁴ = 2r(1 + 11r + 11r² + r³)/((1+r)(1−r)⁴)
    (Σ_k k^j r^k with the Eulerian numbers of order j); P(|Y| > m) = 2r^{m+1}/(1+r).
    """
    x = -1.0 / float(scale)
    r, one_minus_r = math.exp(x), -math.expm1(x)
    out = {
        "mean_abs": 2.0 * r / (one_minus_r * (1.0 + r)),
        "second_moment": 2.0 * r / one_minus_r**2,
        "fourth_moment": 2.0 * r * (1.0 + 11.0 * r + 11.0 * r * r + r**3) / ((1.0 + r) * one_minus_r**4),
    }
    if gamma is not None:
        out["within"] = 1.0 - 2.0 * r ** (math.floor(gamma) + 1) / (1.0 + r)
    return out


def _bernoulli_exp_unit(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for an int64 array 0 ≤ num ≤ den (CKS Algorithm 1).

    K ← 1; repeat A ~ Bernoulli(γ/K), K ← K + 1 while A = 1; return [K odd], since
    P(K > k) = γ^k/k! gives P(K odd) = Σ_j (−γ)^j/j! = e^{−γ}. All draws still running
    share the same K, so Bernoulli(num/(den·K)) is one uniform integer below den·K
    (or Bernoulli(num/den) · Bernoulli(1/K) when den·K would leave int64).
    """
    out = np.zeros(num.shape, dtype=bool)
    live = np.arange(num.size)
    values = num
    k = 1
    while live.size:
        if den * k < 2**62:
            accept = rng.integers(0, den * k, size=live.size, dtype=np.int64) < values
        else:
            accept = rng.integers(0, den, size=live.size, dtype=np.int64) < values
            accept &= rng.integers(0, k, size=live.size, dtype=np.int64) == 0
        if k % 2 == 1:
            out[live[~accept]] = True
        live, values = live[accept], values[accept]
        k += 1
    return out


def _survive_unit_trials(rng: np.random.Generator, count: np.ndarray) -> np.ndarray:
    """True with probability e^{−count}: ``count`` Bernoulli(exp(−1)) trials all succeed (stops early)."""
    ok = np.ones(count.shape, dtype=bool)
    left = count.astype(np.int64, copy=True)
    live = np.flatnonzero(left > 0)
    while live.size:
        success = _bernoulli_exp_unit(rng, np.ones(live.size, dtype=np.int64), 1)
        ok[live[~success]] = False
        left[live] -= 1
        live = live[success & (left[live] > 0)]
    return ok


def bernoulli_exp_split(
    rng: np.random.Generator, whole: np.ndarray, frac: np.ndarray, den: int
) -> np.ndarray:
    """Bernoulli(exp(−γ)) for γ = whole + frac/den (int64 arrays, 0 ≤ frac < den < 2^62), exactly.

    exp(−γ) = exp(−1)^whole · exp(−frac/den) (CKS Algorithm 1, γ > 1 case).
    """
    ok = _survive_unit_trials(rng, whole)
    idx = np.flatnonzero(ok)
    ok[idx] = _bernoulli_exp_unit(rng, frac[idx], den)
    return ok


def bernoulli_exp(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for an int64 array num ≥ 0 and an integer 1 ≤ den < 2^62, exactly."""
    whole, frac = np.divmod(np.asarray(num, dtype=np.int64), den)
    return bernoulli_exp_split(rng, whole, frac, den)


def _unit_successes(rng: np.random.Generator, size: int) -> np.ndarray:
    """Number of Bernoulli(exp(−1)) successes before the first failure: Geometric, P(V ≥ v) = e^{−v}."""
    v = np.zeros(size, dtype=np.int64)
    live = np.arange(size)
    while live.size:
        live = live[_bernoulli_exp_unit(rng, np.ones(live.size, dtype=np.int64), 1)]
        v[live] += 1
    return v


def sample_discrete_laplace(rng: np.random.Generator, t: int, s: int, size: int) -> np.ndarray:
    """``size`` exact draws of the discrete Laplace of scale t/s (integers t, s ≥ 1; CKS Algorithm 2).

    U ~ Uniform{0..t−1} kept with probability e^{−U/t}; V ~ Geometric(1 − e^{−1});
    X = U + tV is Geometric(1 − e^{−1/t}); Y = ⌊X/s⌋ is Geometric(1 − e^{−s/t}); a fair
    sign, rejecting −0, gives P[Z = z] ∝ e^{−|z|s/t}.
    """
    if not (1 <= t < 2**62 and 1 <= s < 2**62):
        raise ValueError(f"discrete Laplace needs integers 1 ≤ t, s < 2^62 (got t={t}, s={s})")
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        u = rng.integers(0, t, size=pending.size, dtype=np.int64)
        kept = bernoulli_exp(rng, u, t)
        rejected = pending[~kept]
        idx, u = pending[kept], u[kept]
        y = (u + t * _unit_successes(rng, idx.size)) // s
        negative = rng.integers(0, 2, size=idx.size, dtype=np.int64)
        good = ~((negative == 1) & (y == 0))
        out[idx[good]] = ((1 - 2 * negative) * y)[good]
        pending = np.concatenate([rejected, idx[~good]])
    return out
