r"""A finite mixture of discrete Laplace laws with rational weights: R²DP on the integers, sampled exactly.

.. math:: p(k) = \sum_j w_j\, \tanh\!\Big(\frac{1}{2 s_j}\Big)\, e^{-|k|/s_j}, \qquad k \in \mathbb Z,

with dyadic scales s_j = p_j/2^{e_j} and weights w_j = n_j/N (integers n_j, N = Σ n_j). It is the lattice
counterpart of the R²DP noise Laplace(1/t) with t drawn from a finite second fold (Mohammady et al., CCS 2020):
the component j is drawn with probability n_j/N from one uniform integer below N (an integer comparison), then
the discrete Laplace of scale s_j by the exact sampler of :mod:`dpopt.noise.discrete_laplace` (Canonne, Kamath
& Steinke 2020, Algorithms 1–2). No floating-point number touches the draw.

Every expectation is linear in the weights: E|Z|, E Z², E Z⁴ and P(|Z| ≤ γ) are the weighted closed forms of
:func:`~dpopt.noise.discrete_laplace.discrete_laplace_moments`, and E h(max(c + Z, τ)) (the prior metrics of
:mod:`dpopt.noise.prior_metrics`) is a finite sum over the integers |k| ≤ K, K chosen so that the neglected
probability and first absolute moment are below :data:`TAIL_NEGLECTED` (the metrics' terms grow at most
linearly in |k|).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_laplace import discrete_laplace_moments, sample_discrete_laplace
from dpopt.noise.marginal import Marginal
from dpopt.noise.prior_metrics import power_geometric_tail

TAIL_NEGLECTED = 1e-20
"""The probability and first absolute moment beyond the summation range of :meth:`DiscreteLaplaceMixture.
clipped_expectations` are below this."""

MAX_TOTAL = 2**62
"""Largest weight denominator N (one uniform int64 below N picks the component)."""


def _truncation(scale: float) -> int:
    """K with P(|Z| > K) ≤ and E|Z|1{|Z| > K} ≤ :data:`TAIL_NEGLECTED` for the discrete Laplace of ``scale``:
    both are at most 2r^{K+1}(K + 1 + 1/(1 − r))/(1 − r) with r = e^{−1/s} (geometric series)."""
    rate = 1.0 / scale
    one_minus_r = -math.expm1(-rate)
    k = max(1, math.ceil(scale * 50.0))
    while True:
        bound = 2.0 * math.exp(-rate * (k + 1)) * (k + 1 + 1.0 / one_minus_r) / one_minus_r
        if bound <= TAIL_NEGLECTED:
            return k
        k *= 2


@dataclass(frozen=True)
class DiscreteLaplaceMixture:
    """Σ_j (n_j/N)·DLap(s_j) on ℤ (module docstring): dyadic scales, integer weights.

    Attributes
    ----------
    scales : tuple of Fraction
        The components' scales s_j > 0 (the sampler's t/s form: numerator and denominator below 2^62).
    weights : tuple of int
        n_j ≥ 1; the component's probability is n_j / Σ n.
    """

    scales: tuple[Fraction, ...]
    weights: tuple[int, ...]

    def __post_init__(self):
        if not self.scales or len(self.scales) != len(self.weights):
            raise ValueError("a discrete Laplace mixture needs as many weights as scales, at least one")
        if any(Fraction(s) <= 0 for s in self.scales) or any(int(n) < 1 for n in self.weights):
            raise ValueError("mixture scales must be positive and weights positive integers")
        if sum(self.weights) > MAX_TOTAL:
            raise ValueError(f"the mixture's weight total exceeds 2^62 (got {sum(self.weights)})")
        object.__setattr__(self, "scales", tuple(Fraction(s) for s in self.scales))
        object.__setattr__(self, "weights", tuple(int(n) for n in self.weights))

    # ------------------------------------------------------------------ facts
    @property
    def total(self) -> int:
        """N = Σ n_j."""
        return sum(self.weights)

    @property
    def probabilities(self) -> tuple[Fraction, ...]:
        """w_j = n_j/N, exactly."""
        return tuple(Fraction(n, self.total) for n in self.weights)

    def _w(self) -> np.ndarray:
        return np.array([float(w) for w in self.probabilities])

    def _rates(self) -> np.ndarray:
        return np.array([1.0 / float(s) for s in self.scales])

    def pmf(self, k) -> np.ndarray:
        """p(k) = Σ_j w_j tanh(1/(2s_j)) e^{−|k|/s_j}, vectorised over integers k."""
        k = np.abs(np.asarray(k, dtype=float))
        t = self._rates()
        return (np.tanh(t / 2.0) * np.exp(-np.multiply.outer(k, t))) @ self._w()

    def log_pmf(self, k) -> np.ndarray:
        """log p(k) (log-sum-exp over the components)."""
        k = np.abs(np.asarray(k, dtype=float))
        t = self._rates()
        z = np.log(self._w()) + np.log(np.tanh(t / 2.0)) - np.multiply.outer(k, t)
        top = z.max(axis=-1)
        return top + np.log(np.exp(z - top[..., None]).sum(axis=-1))

    def tail(self, x) -> np.ndarray:
        """P(Z > x) = Σ_j w_j r_j^{⌊x⌋+1}/(1 + r_j) for x ≥ 0 (r_j = e^{−1/s_j})."""
        k = np.floor(np.asarray(x, dtype=float))
        t = self._rates()
        return (np.exp(-np.multiply.outer(k + 1.0, t)) / (1.0 + np.exp(-t))) @ self._w()

    def moments(self, gamma: float | None = None) -> dict[str, float]:
        """E|Z|, E Z², E Z⁴ (and P(|Z| ≤ γ) given γ): the weighted closed forms of the components."""
        out: dict[str, float] = {}
        for w, s in zip(self._w(), self.scales):
            for key, value in discrete_laplace_moments(float(s), gamma).items():
                out[key] = out.get(key, 0.0) + w * value
        return out

    def abs_moment(self, p: float) -> float:
        """E|Z|^p for p = 1, 2, 4 in closed form; other orders by the sum over |k| ≤ K."""
        key = {1.0: "mean_abs", 2.0: "second_moment", 4.0: "fourth_moment"}.get(float(p))
        if key is not None:
            return self.moments()[key]
        k = np.arange(1, self.truncation + 1, dtype=float)
        return float(2.0 * np.sum(self.pmf(k) * k**p))

    def tail_moment_bound(self, order: float, k: int) -> float:
        r"""An upper bound on E|Z|^p 1{|Z| > K}: per component of scale s, 2 tanh(1/(2s)) Σ_{j > K} j^p e^{−j/s}
        (its pmf is tanh(1/(2s)) e^{−|k|/s}), the sum bounded by
        :func:`~dpopt.noise.prior_metrics.power_geometric_tail`; the weighted sum of the components' bounds."""
        return sum(w * 2.0 * math.tanh(0.5 / float(s)) * power_geometric_tail(order, 1.0 / float(s), k + 1)
                   for w, s in zip(self._w(), self.scales))

    def moment_truncation(self, order: float, tolerance: float) -> int:
        """The first K (from :attr:`truncation`, doubling) with :meth:`tail_moment_bound` ≤ ``tolerance``."""
        k = self.truncation
        while self.tail_moment_bound(order, k) > tolerance:
            k *= 2
        return k

    @property
    def truncation(self) -> int:
        """K of the largest scale (:func:`_truncation`)."""
        return _truncation(float(max(self.scales)))

    @property
    def typical_scale(self) -> float:
        return max(1.0, float(max(self.scales)))

    def density(self, x) -> np.ndarray:
        """The pmf at integers (the :class:`~dpopt.noise.prior_metrics.SymmetricNoise` protocol)."""
        return self.pmf(x)

    def clipped_expectations(self, h: Callable[[np.ndarray], np.ndarray], counts, floor: float) -> np.ndarray:
        """E[h(max(c_i + Z, τ))] for every count c_i: Σ_{|k| ≤ K} p(k) h(max(c_i + k, τ)) (module docstring)."""
        return self._w() @ self.component_expectations(h, counts, floor)

    def component_expectations(self, h: Callable[[np.ndarray], np.ndarray], counts, floor: float) -> np.ndarray:
        """E_j[h(max(c_i + Z_j, τ))] for each component j (rows) and count c_i (columns), Z_j ~ DLap(s_j): the sums
        over |k| ≤ K of the largest scale, components taken 16 at a time (memory 16·(2K + 1) floats)."""
        c = np.asarray(counts, dtype=float)
        k = np.arange(-self.truncation, self.truncation + 1, dtype=float)
        values = h(np.maximum(np.add.outer(c, k), floor))
        t = self._rates()
        out = np.empty((t.size, c.size))
        for start in range(0, t.size, 16):
            rate = t[start:start + 16]
            pmf = np.tanh(rate / 2.0)[:, None] * np.exp(-np.multiply.outer(rate, np.abs(k)))
            out[start:start + 16] = pmf @ values.T
        return out

    # ---------------------------------------------------------------- sampler
    def components(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` component indices, j with probability n_j/N exactly: one uniform integer u < N, j the first
        index with u < n_0 + … + n_j."""
        u = rng.integers(0, self.total, size=size, dtype=np.int64)
        return np.searchsorted(np.cumsum(np.array(self.weights, dtype=np.int64)), u, side="right")

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        """Exact draws (int64) of the shape ``size``: the component, then its discrete Laplace (CKS Algorithm 2)."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        n = int(np.prod(shape))
        which = self.components(rng, n)
        out = np.zeros(n, dtype=np.int64)
        for j, s in enumerate(self.scales):
            places = np.flatnonzero(which == j)
            if places.size:
                out[places] = sample_discrete_laplace(rng, s.numerator, s.denominator, places.size)
        return out.reshape(shape)

    # ---------------------------------------------------------------- records
    @property
    def parameters(self) -> dict:
        return {"scales": [str(s) for s in self.scales], "weights": list(self.weights)}

    @classmethod
    def from_parameters(cls, parameters: dict) -> DiscreteLaplaceMixture:
        """The mixture a record describes.

        Raises
        ------
        ValueError
            Scales that are not positive rationals, weights that are not positive integers.
        """
        try:
            scales = tuple(Fraction(str(s)) for s in parameters["scales"])
            weights = tuple(parameters["weights"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"a discrete Laplace mixture needs 'scales' (rationals) and 'weights' ({exc})") from exc
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in weights):
            raise ValueError("the weights of a discrete Laplace mixture must be integers")
        return cls(scales, weights)

    def __str__(self) -> str:
        return " + ".join(f"{n}/{self.total}·DLap({s})" for n, s in zip(self.weights, self.scales))


class DiscreteLaplaceMixtureMarginal(Marginal):
    """A :class:`DiscreteLaplaceMixture` as the second route reads a law on ℤ (not log-concave: a mixture of
    geometric laws is log-convex on k ≥ 0)."""

    lattice = True
    log_concave = False

    def __init__(self, mixture: DiscreteLaplaceMixture):
        self.mixture = mixture

    @property
    def key(self) -> tuple:
        return ("discrete_laplace_mixture", self.mixture.scales, self.mixture.weights)

    @property
    def scale(self) -> float:
        return self.mixture.typical_scale

    def log_density(self, x) -> np.ndarray:
        return self.mixture.log_pmf(x)

    def tail(self, x) -> np.ndarray:
        return self.mixture.tail(x)


def round_weights(weights: Sequence[float], bits: int = 32) -> tuple[int, ...]:
    """Integer weights n_j over 2^bits, each ⌊2^bits w_j⌋ at least 1, the remainder given to the last entry."""
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    total = 1 << bits
    n = [max(1, int(math.floor(x * total))) for x in w[:-1]]
    return (*n, total - sum(n))
