r"""The discrete K-norm law on ℤ^s and its exact sampler (rejection from discrete Laplace coordinates).

For a polytope K = {c ∈ R^s : ⟨a_i, c⟩ ≤ 1 for every i} with rational facets a_i, bounded and with 0
inside, and an integer M ≥ max_{c ∈ K} ‖c‖₁, the gauge

.. math:: g(c) = \max\bigl(\max_i \langle a_i, c\rangle,\ \|c\|_1/M\bigr) = \|c\|_K

(the l1 term changes nothing on K ⊂ M·B₁, and makes g ≥ ‖·‖₁/M hold by construction, whatever the facet
list) is written with integers: g(c) = G(c)/D, G(c) = max(max_i N_i·c, (D/M)‖c‖₁), N = D·A, D a common
denominator divisible by M. The law is

.. math:: p(c) \propto \exp(-\varepsilon\, g(c)), \qquad c \in \mathbb{Z}^s,

ε a positive rational.

**Sampler.** Propose c with i.i.d. discrete Laplace coordinates, q(c) ∝ exp(−γ‖c‖₁), γ = ε/M (scale
M/ε, exact: Canonne, Kamath & Steinke 2020, Algorithm 2; :func:`~dpopt.noise.discrete_laplace.sample_discrete_laplace`),
and accept with probability

.. math:: \exp\bigl(-(\varepsilon g(c) - \gamma\|c\|_1)\bigr)
          = \exp\Bigl(-\frac{\varepsilon_n\,(G(c) - (D/M)\|c\|_1)}{\varepsilon_d D}\Bigr) \le 1,

a Bernoulli(exp(−rational)) of CKS Algorithm 1 (:func:`~dpopt.noise.discrete_laplace.bernoulli_exp`); the exponent
is ≥ 0 because G(c) ≥ (D/M)‖c‖₁. An accepted c has law q(c)·e^{−(εg(c) − γ‖c‖₁)}/Z ∝ e^{−εg(c)} = p(c) (von
Neumann rejection), and a round accepts with probability

.. math:: \Pr[\text{accept}] = \frac{\sum_{c} e^{-\varepsilon g(c)}}{\sum_c e^{-\gamma\|c\|_1}}
          = \frac{Z_p}{\bigl((1 + e^{-\gamma})/(1 - e^{-\gamma})\bigr)^s}.

For large scales Z_p ≈ s!·vol K/ε^s and the rate tends to vol K / vol(M·B₁): it falls with the rank (the
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
        D, a multiple of ``l1_bound``.
    l1_bound : int
        M ≥ max_{c∈K} ‖c‖₁.
    """

    numerators: np.ndarray
    denominator: int
    l1_bound: int

    def __post_init__(self):
        if self.l1_bound < 1 or self.denominator % self.l1_bound:
            raise ValueError(f"D = {self.denominator} must be a positive multiple of M = {self.l1_bound}")

    @property
    def rank(self) -> int:
        return self.numerators.shape[1]

    def scaled(self, c: np.ndarray) -> np.ndarray:
        """G(c) = D·g(c) (int64) for the rows of the integer array ``c``."""
        c = np.atleast_2d(np.asarray(c, dtype=np.int64))
        facets = (c @ self.numerators.T).max(axis=1) if len(self.numerators) else np.zeros(len(c), dtype=np.int64)
        return np.maximum(facets, (self.denominator // self.l1_bound) * np.abs(c).sum(axis=1))


def proposal_scale(epsilon: Fraction, gauge: LatticeGauge) -> Fraction:
    """The proposal's discrete Laplace scale 1/γ = M/ε."""
    return Fraction(gauge.l1_bound) / Fraction(epsilon)


def limit_acceptance(volume: float, rank: int, l1_bound: int) -> float:
    """vol K / vol(M·B₁) = s!·vol K/(2M)^s: the acceptance rate's limit as the scale M/ε grows (both sums of the
    module docstring are Riemann sums of ∫e^{−εg} = s!·vol K/ε^s and ∫e^{−γ‖c‖₁} = (2/γ)^s)."""
    return math.exp(math.lgamma(rank + 1) + math.log(volume) - rank * math.log(2.0 * l1_bound))


def acceptance_weights(gauge: LatticeGauge, epsilon: Fraction, c: np.ndarray) -> tuple[np.ndarray, int]:
    """The integers ε_n(G(c) − (D/M)‖c‖₁) ≥ 0 and the denominator ε_d·D: a proposal c is kept with probability
    exp(−numerator/denominator)."""
    epsilon = Fraction(epsilon)
    den = epsilon.denominator * gauge.denominator
    if not 0 < den < MAX_DENOMINATOR:
        raise ValueError(f"ε_d·D = {den} is outside the sampler's range (below 2^62)")
    excess = gauge.scaled(c) - (gauge.denominator // gauge.l1_bound) * np.abs(c).sum(axis=1)
    return epsilon.numerator * excess, den


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
    scale = proposal_scale(epsilon, gauge)
    if not (scale.numerator < MAX_DENOMINATOR and scale.denominator < MAX_DENOMINATOR):
        raise ValueError(f"the proposal scale {scale} is outside the sampler's range")
    s = gauge.rank
    kept: list[np.ndarray] = []
    pending, length = int(size), min(int(size), MAX_ROUND)
    while pending > 0:
        c = sample_discrete_laplace(rng, scale.numerator, scale.denominator, length * s).reshape(length, s)
        num, den = acceptance_weights(gauge, epsilon, c)
        accepted = c[bernoulli_exp(rng, num, den)][:pending]
        kept.append(accepted)
        pending -= len(accepted)
        length = min(max(2 * length, pending), MAX_ROUND) if pending > 0 else 0
    return np.concatenate(kept) if kept else np.zeros((0, s), dtype=np.int64)
