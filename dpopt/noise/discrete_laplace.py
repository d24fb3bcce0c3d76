r"""The discrete Laplace law on ℤ and its exact sampler (Canonne, Kamath & Steinke 2020).

.. math:: P[Y = y] = \frac{1 - r}{1 + r}\, r^{|y|}, \qquad r = e^{-1/b}.

The sampler draws every value from uniform integers and decides every acceptance by an
integer comparison (no floating point): CKS Algorithm 1 for Bernoulli(exp(−γ)), γ rational,
and Algorithm 2 for the discrete Laplace of a rational scale t/s, with their runs of
Bernoulli(e^{−1}) trials and (for t ≤ 2^16) the rejection sampling of U replaced by exact
inversion of one uniform word against integer thresholds (:mod:`dpopt.noise.exp_inversion`;
same laws). The samplers are vectorized over draws: each round draws all its candidates as
numpy int64 arrays and only the rejected places are drawn again (:func:`redraw_rejected`);
parameters are limited so that no intermediate value can overflow int64. The number of words
and rounds depends only on the parameters and on the noise drawn, never on data.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 and 2.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dpopt.noise.exp_inversion import MAX_TABLE_T, truncated_geometric, unit_geometric
from dpopt.noise.marginal import Marginal


class DiscreteLaplaceMarginal(Marginal):
    """Discrete Laplace of scale b on ℤ: pmf (1 − r)/(1 + r)·r^{|k|}, r = e^{−1/b}."""

    lattice = True

    def __init__(self, scale: float):
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"the discrete Laplace scale must be positive and finite (got {scale})")
        self.b = float(scale)
        self.mgf_radius = 1.0 / self.b

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

    def log_mgf_bound(self, s: float) -> float:
        r"""log E e^{sW} = 2 log(1 − r) − log(1 − r e^{s}) − log(1 − r e^{−s}) for |s| < 1/b (r = e^{−1/b}),
        exact (``inf`` beyond): Σ_k (1 − r)/(1 + r) r^{|k|} e^{sk} summed as two geometric series."""
        s = abs(s)
        if s * self.b >= 1.0:
            return math.inf
        log_r = -1.0 / self.b
        return (2.0 * math.log(-math.expm1(log_r)) - math.log(-math.expm1(log_r + s))
                - math.log(-math.expm1(log_r - s)))

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


def _bernoulli_exp_unit(rng: np.random.Generator, num: np.ndarray, den: int,
                        first: np.ndarray | None = None) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for an int64 array 0 ≤ num ≤ den (CKS Algorithm 1).

    K ← 1; repeat A ~ Bernoulli(γ/K), K ← K + 1 while A = 1; return [K odd], since
    P(K > k) = γ^k/k! gives P(K odd) = Σ_j (−γ)^j/j! = e^{−γ}. All draws still running
    share the same K, so Bernoulli(num/(den·K)) is one uniform integer below den·K
    (or Bernoulli(num/den) · Bernoulli(1/K) when den·K would leave int64). ``first``: the first
    trial A ~ Bernoulli(num/den), when the caller has drawn it.
    """
    num = np.asarray(num, dtype=np.int64)
    accept = _bernoulli_ratio(rng, num, den, 1) if first is None else first
    out = ~accept  # K = 1: odd
    live = np.flatnonzero(accept)
    values, k = num[live], 2
    while live.size:
        accept = _bernoulli_ratio(rng, values, den, k)
        if k % 2 == 1:
            out[live[~accept]] = True
        live, values = live[accept], values[accept]
        k += 1
    return out


def _bernoulli_ratio(rng: np.random.Generator, num: np.ndarray, den: int, k: int) -> np.ndarray:
    """Bernoulli(num/(den·k)): a uniform integer below den·k compared with num, or Bernoulli(num/den) ·
    Bernoulli(1/k) when den·k would leave int64."""
    if den * k <= 2**32:  # numpy's 32-bit bounded integers: the same uniform law, half the words
        return rng.integers(0, den * k, size=num.size, dtype=np.uint32) < num
    if den * k < 2**62:
        return rng.integers(0, den * k, size=num.size, dtype=np.int64) < num
    return ((rng.integers(0, den, size=num.size, dtype=np.int64) < num)
            & (rng.integers(0, k, size=num.size, dtype=np.int64) == 0))


def bernoulli_exp_split(
    rng: np.random.Generator, whole: np.ndarray, frac: np.ndarray, den: int
) -> np.ndarray:
    """Bernoulli(exp(−γ)) for γ = whole + frac/den (int64 arrays, 0 ≤ frac < den < 2^62), exactly.

    exp(−γ) = e^{−whole} · exp(−frac/den) (CKS Algorithm 1, γ > 1 case): the ``whole`` Bernoulli(e^{−1})
    trials all succeed exactly when a unit geometric G (P(G ≥ v) = e^{−v}, one uniform word:
    :func:`~dpopt.noise.exp_inversion.unit_geometric`) is at least ``whole``; then Algorithm 1 on frac/den.
    """
    shape = np.shape(whole)
    whole, frac = np.ravel(whole), np.ravel(frac)
    ok = np.ones(whole.size, dtype=bool)
    some = np.flatnonzero(whole)  # G ≥ 0 always: a word only where whole > 0
    ok[some] = unit_geometric(rng, some.size) >= whole[some]
    idx = np.flatnonzero(ok)
    ok[idx] = _bernoulli_exp_unit(rng, frac[idx], den)
    return ok.reshape(shape)


def bernoulli_exp(rng: np.random.Generator, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for an int64 array num ≥ 0 and an integer 1 ≤ den < 2^62, exactly."""
    whole, frac = np.divmod(np.asarray(num, dtype=np.int64), den)
    return bernoulli_exp_split(rng, whole, frac, den)


def _truncated(rng: np.random.Generator, t: int, size: int) -> np.ndarray:
    """``size`` draws of U on {0..t−1}, P(U = u) ∝ e^{−u/t}: by exact inversion up to
    :data:`~dpopt.noise.exp_inversion.MAX_TABLE_T`, else CKS's rejection (:func:`_uniform_candidates`)."""
    if t <= MAX_TABLE_T:
        return truncated_geometric(rng, t, size)
    return redraw_rejected(lambda n: _uniform_candidates(rng, t, n), size)


def _uniform_candidates(rng: np.random.Generator, t: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of CKS's truncated geometric: U uniform on {0..t−1}, kept with probability e^{−U/t}."""
    u = rng.integers(0, t, size=size, dtype=np.int64)
    return u, _bernoulli_exp_unit(rng, u, t)


def redraw_rejected(draw: Callable[[int], tuple[np.ndarray, np.ndarray]], size: int) -> np.ndarray:
    """Rejection sampling over arrays: ``draw(n)`` gives n candidates and whether each is accepted; the
    rejected places are drawn again (independently, so each place gets the accepted law) until none is left."""
    out, accepted = draw(size)
    pending = np.flatnonzero(~accepted)
    while pending.size:
        values, accepted = draw(pending.size)
        out[pending[accepted]] = values[accepted]
        pending = pending[~accepted]
    return out


def sample_geometric(rng: np.random.Generator, t: int, s: int, size: int) -> np.ndarray:
    """``size`` exact draws of Y on {0, 1, …} with P(Y = y) = (1 − e^{−s/t})e^{−ys/t} (integers t, s ≥ 1): the
    magnitude of CKS Algorithm 2, Y = ⌊(U + tV)/s⌋ with U and V as in :func:`sample_discrete_laplace`; capped at
    2^62 (only reached when V > 2^62/t − 1)."""
    u = _truncated(rng, t, size)
    v = unit_geometric(rng, size)
    if size and int(v.max()) >= 2**62 // t:  # U + tV could leave int64: exact Python integers, capped
        return np.array([min((int(a) + t * int(b)) // s, 2**62) for a, b in zip(u, v)], dtype=np.int64)
    y = u + t * v
    if s != 1:
        y //= s
    return y


def _laplace_candidates(rng: np.random.Generator, t: int, s: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of CKS Algorithm 2 (:func:`sample_discrete_laplace`): signed ⌊(U + tV)/s⌋ and "not −0"."""
    y = sample_geometric(rng, t, s, size)
    negative = rng.integers(0, 2, size=size, dtype=np.int8).astype(bool)
    accepted = ~negative | (y != 0)
    np.negative(y, out=y, where=negative)
    return y, accepted


def sample_discrete_laplace(rng: np.random.Generator, t: int, s: int, size: int) -> np.ndarray:
    """``size`` exact draws of the discrete Laplace of scale t/s (integers t, s ≥ 1; CKS Algorithm 2).

    U on {0..t−1} with P(U = u) ∝ e^{−u/t} (:func:`_truncated`); V with P(V ≥ v) = e^{−v}
    (:func:`~dpopt.noise.exp_inversion.unit_geometric`); X = U + tV is Geometric(1 − e^{−1/t});
    Y = ⌊X/s⌋ is Geometric(1 − e^{−s/t}); a fair sign, rejecting −0 (those places drawn again),
    gives P[Z = z] ∝ e^{−|z|s/t}. Magnitudes are capped at 2^62 (only reached when V > 2^62/t − 1:
    probability below e^{−2^62/t + 1}, e.g. e^{−2^22} for t ≤ 2^40).
    """
    if not (1 <= t < 2**62 and 1 <= s < 2**62):
        raise ValueError(f"discrete Laplace needs integers 1 ≤ t, s < 2^62 (got t={t}, s={s})")
    return redraw_rejected(lambda n: _laplace_candidates(rng, t, s, n), size)
