r"""The discrete K-norm law on ℤ^s and its exact sampler (rejection from discrete Laplace coordinates).

For a polytope K = {c ∈ R^s : ⟨a_i, c⟩ ≤ 1 for every i} with rational facets a_i, bounded and with 0
inside, and integers M_k with h(c) = Σ_k |c_k|/M_k ≤ 1 on K (a weighted l1 ball holding K; M_k = M for all k
is the plain M·B₁, M ≥ max_{c∈K}‖c‖₁), the gauge

.. math:: g(c) = \max\bigl(\max_i \langle a_i, c\rangle,\ h(c)\bigr) = \|c\|_K

(the h term changes nothing on K ⊂ {h ≤ 1}, and makes g ≥ h hold by construction, whatever the facet
list) is written with integers: g(c) = G(c)/D, G(c) = max(max_i N_i·c, Σ_k (D/M_k)|c_k|), N = D·A, D a common
denominator divisible by every M_k. The law is

.. math:: p(c) \propto \exp(-\varepsilon\, g(c)), \qquad c \in \mathbb{Z}^s,

ε a positive rational.

**Sampler.** Propose c with independent discrete Laplace coordinates, q(c) ∝ exp(−ε h(c)) (coordinate k of
scale M_k/ε, exact: Canonne, Kamath & Steinke 2020, Algorithm 2;
:func:`~dpopt.noise.discrete_laplace.sample_discrete_laplace`), and accept with probability

.. math:: \exp\bigl(-\varepsilon (g(c) - h(c))\bigr)
          = \exp\Bigl(-\frac{\varepsilon_n\,(G(c) - \sum_k (D/M_k)|c_k|)}{\varepsilon_d D}\Bigr) \le 1,

a Bernoulli(exp(−rational)) of CKS Algorithm 1 (:func:`~dpopt.noise.discrete_laplace.bernoulli_exp`); the exponent
is ≥ 0 because G(c) ≥ Σ_k (D/M_k)|c_k|. An accepted c has law q(c)·e^{−ε(g(c) − h(c))}/Z ∝ e^{−εg(c)} = p(c)
(von Neumann rejection), and a round accepts with probability

.. math:: \Pr[\text{accept}] = \frac{\sum_{c} e^{-\varepsilon g(c)}}{\sum_c e^{-\varepsilon h(c)}}
          = \frac{Z_p}{\prod_k (1 + e^{-\gamma_k})/(1 - e^{-\gamma_k})}, \qquad \gamma_k = \varepsilon/M_k.

For large scales Z_p ≈ s!·vol K/ε^s and the rate tends to vol K/vol{h ≤ 1} = s!·vol K/∏_k 2M_k (the plain
M·B₁: vol K / vol(M·B₁)). A weighted ball fits a long, thin K far better (``age_summary_ci_volume``: K reaches 75
along one coordinate and 1 along the others; M_k = (3, 225, 3) gives 0.024 where M = 77 gives 1.05·10⁻⁴). With
the plain ball the rate falls with the rank (the
example tables: 1 at s = 1, about 1/4 for the replace-one 3×2 table at s = 5, 1.4% for the 3×4 table with
both margins at s = 6, 2·10⁻⁴ for the 4×4 one at s = 9). Every draw and decision is an integer operation; the
number of rounds depends on the noise drawn, never on data.

References
----------
.. [1] M. Hardt and K. Talwar, "On the geometry of differential privacy", STOC 2010 (the K-norm law).
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010), Algorithms 1 and 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_laplace import bernoulli_exp, sample_discrete_laplace

MAX_DENOMINATOR = 2**62
"""Bound on ε_d·D (the Bernoulli's denominator) and on the products formed in int64."""

MAX_ROUND = 2**16
"""Most proposals drawn in one round of :func:`sample_lattice_k_norm` (2^16 × s int64 coordinates)."""


@dataclass(frozen=True, eq=False)
class LatticeGauge:
    """g(c) = max(max_i N_i·c, (D/M)‖c‖₁)/D on ℤ^s (module docstring).

    Attributes
    ----------
    numerators : ndarray of int64, shape (F, s)
        N = D·A, the facets a_i times the common denominator.
    denominator : int
        D, a multiple of every M_k.
    l1_bounds : tuple of int
        M_k, with Σ_k |c_k|/M_k ≤ 1 on K.
    """

    numerators: np.ndarray
    denominator: int
    l1_bounds: tuple[int, ...]

    def __post_init__(self):
        if len(self.l1_bounds) != self.numerators.shape[1] or any(m < 1 or self.denominator % m
                                                                   for m in self.l1_bounds):
            raise ValueError(f"D = {self.denominator} must be a positive multiple of every M_k = {self.l1_bounds} "
                             f"(one per coordinate)")

    @property
    def rank(self) -> int:
        return self.numerators.shape[1]

    @property
    def units(self) -> np.ndarray:
        """D/M_k (int64, shape (s,)): Σ_k (D/M_k)|c_k| = D·h(c)."""
        return np.array([self.denominator // m for m in self.l1_bounds], dtype=np.int64)

    def scaled(self, c: np.ndarray) -> np.ndarray:
        """G(c) = D·g(c) (int64) for the rows of the integer array ``c``."""
        c = np.atleast_2d(np.asarray(c, dtype=np.int64))
        facets = (c @ self.numerators.T).max(axis=1) if len(self.numerators) else np.zeros(len(c), dtype=np.int64)
        return np.maximum(facets, np.abs(c) @ self.units)


def proposal_scale(epsilon: Fraction, gauge: LatticeGauge) -> tuple[Fraction, ...]:
    """The proposal's discrete Laplace scales M_k/ε, one per coordinate."""
    return tuple(Fraction(m) / Fraction(epsilon) for m in gauge.l1_bounds)


def limit_acceptance(volume: float, l1_bounds: tuple[int, ...]) -> float:
    """vol K/vol{h ≤ 1} = s!·vol K/∏_k 2M_k: the acceptance rate's limit as the scales M_k/ε grow (both sums of
    the module docstring are Riemann sums of ∫e^{−εg} = s!·vol K/ε^s and ∫e^{−εh} = ∏_k 2M_k/ε)."""
    rank = len(l1_bounds)
    return math.exp(math.lgamma(rank + 1) + math.log(volume) - sum(math.log(2.0 * m) for m in l1_bounds))


def acceptance_weights(gauge: LatticeGauge, epsilon: Fraction, c: np.ndarray) -> tuple[np.ndarray, int]:
    """The integers ε_n(G(c) − Σ_k (D/M_k)|c_k|) ≥ 0 and the denominator ε_d·D: a proposal c is kept with
    probability exp(−numerator/denominator)."""
    epsilon = Fraction(epsilon)
    den = epsilon.denominator * gauge.denominator
    if not 0 < den < MAX_DENOMINATOR:
        raise ValueError(f"ε_d·D = {den} is outside the sampler's range (below 2^62)")
    excess = gauge.scaled(c) - np.abs(c) @ gauge.units
    return epsilon.numerator * excess, den


def propose(rng: np.random.Generator, scales: tuple[Fraction, ...], size: int) -> np.ndarray:
    """``size`` proposals c (int64, shape (size, s)): coordinate k discrete Laplace of scale ``scales[k]``, exact
    (coordinates of equal scale drawn in one call)."""
    out = np.empty((size, len(scales)), dtype=np.int64)
    for scale in sorted(set(scales)):
        columns = [k for k, x in enumerate(scales) if x == scale]
        out[:, columns] = sample_discrete_laplace(rng, scale.numerator, scale.denominator,
                                                  size * len(columns)).reshape(size, len(columns))
    return out


def sample_lattice_k_norm(rng: np.random.Generator, gauge: LatticeGauge, epsilon: Fraction, size: int) -> np.ndarray:
    """``size`` exact draws of p(c) ∝ exp(−ε g(c)) on ℤ^s, shape (size, s), int64 (module docstring).

    The proposals form one i.i.d. stream, drawn in rounds of growing length (``size`` pending draws, then twice as
    many proposals each round, up to :data:`MAX_ROUND`), and the first ``size`` accepted ones are returned: each
    is an independent draw of p, whatever the round lengths (they depend only on earlier acceptances, never on the
    proposals to come). At acceptance rate r a draw costs 1/r proposals on average, in about log₂(1/r) rounds of
    whole-array operations rather than 1/r rounds.

    Raises
    ------
    ValueError
        If ε is not a positive rational or the integers would leave the sampler's range.
    """
    epsilon = Fraction(epsilon)
    if epsilon <= 0:
        raise ValueError(f"ε must be positive (got {epsilon})")
    scales = proposal_scale(epsilon, gauge)
    if not all(x.numerator < MAX_DENOMINATOR and x.denominator < MAX_DENOMINATOR for x in scales):
        raise ValueError(f"the proposal scales {scales} are outside the sampler's range")
    s = gauge.rank
    kept: list[np.ndarray] = []
    pending, length = int(size), min(int(size), MAX_ROUND)
    while pending > 0:
        c = propose(rng, scales, length)
        num, den = acceptance_weights(gauge, epsilon, c)
        accepted = c[bernoulli_exp(rng, num, den)][:pending]
        kept.append(accepted)
        pending -= len(accepted)
        length = min(max(2 * length, pending), MAX_ROUND) if pending > 0 else 0
    return np.concatenate(kept) if kept else np.zeros((0, s), dtype=np.int64)
