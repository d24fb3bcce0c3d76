r"""Strategies :math:`A = (\bigotimes_{k\in V}A_k)\otimes B` with B in the ANOVA algebra of the plain attributes.

Split the attributes of a ``kronecker`` workload into the *plain* ones P (every term's factor is the
identity or sums the attribute out: :func:`~dpopt.sensitivity.kronecker_space.plain_attributes`) and the
others V (prefix, ranges, a user's matrix). On P a term is a marginal :math:`M_{S_t}` over its support
:math:`S_t \subseteq P`, so :math:`W_t = (\bigotimes_{k\in V}W_{t,k})\otimes M_{S_t}` (attributes
reordered V first). The strategy measures :math:`Ax + z`, :math:`z\sim N(0, s^2I)`, with
:math:`A = A_V\otimes B`, :math:`A_V = \bigotimes_{k\in V}A_k` and :math:`B = \sum_T\sqrt{b_T}E_T`
(:math:`E_T` the ANOVA projectors of P, :mod:`dpopt.domain.marginal_algebra`, so
:math:`B^\top B = \sum_T b_T E_T`; T ranges over the components some term's marginal contains,
:math:`b_T = 0` on the others, which no answer sees: the answers are the least-squares
:math:`W(A^\top A)^+A^\top y`). Today's product strategy is the special case
:math:`b_T = \prod_{k\in T}u_k\prod_{k\in P\setminus T}v_k` (:math:`A_k^\top A_k = u_kP^1_k + v_kP^0_k`).

* **error** at s = 1: :math:`\sum_t \prod_{k\in V}\mathrm{tr}(G_{t,k}X_k^{-1})\cdot
  \mathrm{tr}(M_{S_t}(B^\top B)^{-1}M_{S_t}^\top)`, and, from
  :math:`M_S^\top M_S = \prod_{k\in P\setminus S}n_k\sum_{T\subseteq S}E_T`,
  :math:`\mathrm{tr}(M_S(B^\top B)^{-1}M_S^\top) = \prod_{k\in P\setminus S}n_k\sum_{T\subseteq S}m_T/b_T`.
* **sensitivity** under add/remove: a column of a Kronecker product is the Kronecker product of the
  factors' columns, so :math:`\max_j\|Ae_j\|^2 = \prod_{k\in V}\max_j(X_k)_{jj}\cdot\max_c(B^\top B)_{cc}`, and
  every diagonal entry of :math:`\sum_T b_TE_T` is :math:`\sum_T b_Tm_T/N_P` (:math:`(E_T)_{cc} = m_T/N_P`).
  Replace-one is not derived for this form (it needs the disagreement patterns of P jointly with the
  pairs of V-cells); the family keeps the product strategy there.
* **design** (alternation, McKenna et al.'s HDMM idea for a Kronecker product of a 1-D factor and a
  marginals strategy, VLDB 2018, Sec. 6): for fixed A_V the error is the weighted marginal workload
  :math:`\sum_T m_T\lambda_T/b_T`, :math:`\lambda_T = \sum_{t: S_t\supseteq T} w_t\prod_{k\in P\setminus S_t}n_k`,
  :math:`w_t = \prod_{k\in V}\mathrm{tr}(G_{t,k}X_k^{-1})`, minimised under
  :math:`\sum_T b_Tm_T/N_P \le 1` by :math:`b_T = N_P\sqrt{\lambda_T}/\sum_U m_U\sqrt{\lambda_U}`
  (Lagrange; as :mod:`dpopt.optimize.marginal_covariance`'s add/remove closed form); for fixed B each
  :math:`A_k` is the 1-D program :math:`\min\mathrm{tr}(\tilde GX^{-1})`, :math:`\mathrm{diag}X\le1` with
  weights :math:`c_t = \mathrm{tr}(M_{S_t}(B^\top B)^{-1}M_{S_t}^\top)\prod_{l\in V\setminus k}\mathrm{tr}(G_{t,l}X_l^{-1})`
  (:func:`~dpopt.optimize.kronecker_strategy.optimal_factor`). Each step minimises the error over its block
  under the normalised constraint (the sensitivity is the product of the blocks' maxima, each ≤ 1), so the
  objective never increases; it starts from the product strategy, so the result is never worse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.domain.kronecker import KroneckerWorkload
from dpopt.domain.marginal_algebra import MarginalAlgebra, Subset, subsets
from dpopt.errors import CalibrationError
from dpopt.optimize.kronecker_strategy import KroneckerDesign, optimal_factor, strategy_sensitivity
from dpopt.sensitivity.kronecker_space import plain_attributes

ROUNDS = 20
"""Most alternation rounds (B, then each ordered factor)."""

TOLERANCE = 1e-9
"""Relative decrease of the error below which the alternation stops."""


@dataclass(frozen=True)
class AnovaSplit:
    """The ordered attributes V, the plain attributes P (global indices) and P's algebra."""

    ordered: tuple[int, ...]
    plain: tuple[int, ...]
    algebra: MarginalAlgebra

    @classmethod
    def of(cls, workload: KroneckerWorkload) -> AnovaSplit:
        plain = plain_attributes(workload)
        ordered = tuple(k for k in range(len(workload.sizes)) if k not in plain)
        return cls(ordered, plain, MarginalAlgebra(tuple(workload.sizes[k] for k in plain)))

    def local_support(self, workload: KroneckerWorkload, t: int) -> Subset:
        """S_t ∩ P in the local indices of P."""
        return tuple(i for i, k in enumerate(self.plain) if workload.terms[t][k] is not None)

    def components(self, workload: KroneckerWorkload) -> tuple[Subset, ...]:
        """The T ⊆ some S_t with m_T > 0 (local indices), by size then order: those that get a b_T."""
        found = {t for s in range(len(workload.terms)) for t in subsets(self.local_support(workload, s))}
        return tuple(sorted((t for t in found if self.algebra.multiplicity(t) > 0), key=lambda t: (len(t), t)))


@dataclass(frozen=True)
class AnovaDesign:
    """The ordered factors A_k (k ∈ V, in order), the coefficients b_T, the unit error and the rounds."""

    factors: tuple[np.ndarray, ...]
    coefficients: dict[Subset, float]
    unit_error: float
    rounds: int


def anova_traces(workload: KroneckerWorkload, split: AnovaSplit, coefficients: dict[Subset, float]) -> np.ndarray:
    """Per term: tr(M_S (BᵀB)⁻¹ M_Sᵀ) = ∏_{k∈P∖S} n_k Σ_{T⊆S} m_T / b_T (module docstring)."""
    alg = split.algebra
    out = []
    for t in range(len(workload.terms)):
        s = split.local_support(workload, t)
        out.append(alg.co_size(s) * sum(alg.multiplicity(u) / coefficients[u] for u in subsets(s)
                                        if alg.multiplicity(u) > 0))
    return np.array(out)


def factor_traces(workload: KroneckerWorkload, k: int, a: np.ndarray) -> np.ndarray:
    """Per term: tr(G_{t,k} (AᵀA)⁻¹)."""
    inverse = np.linalg.inv(a.T @ a)
    return np.array([float(np.sum(workload.gram(t, k) * inverse)) for t in range(len(workload.terms))])


def ordered_traces(workload: KroneckerWorkload, split: AnovaSplit, factors: tuple[np.ndarray, ...]) -> np.ndarray:
    """(terms × |V|): tr(G_{t,k} X_k⁻¹) for the ordered factors."""
    columns = [factor_traces(workload, k, a) for k, a in zip(split.ordered, factors)]
    return np.column_stack(columns) if columns else np.ones((len(workload.terms), 0))


def anova_unit_error(workload: KroneckerWorkload, split: AnovaSplit, factors: tuple[np.ndarray, ...],
                     coefficients: dict[Subset, float]) -> float:
    """Σ_t ∏_{k∈V} tr(G_{t,k}X_k⁻¹) · tr(M_S(BᵀB)⁻¹M_Sᵀ): the error at noise scale s = 1."""
    return float(np.sum(np.prod(ordered_traces(workload, split, factors), axis=1)
                        * anova_traces(workload, split, coefficients)))


def optimal_coefficients(workload: KroneckerWorkload, split: AnovaSplit, weights: np.ndarray) -> dict[Subset, float]:
    """b_T = N_P √λ_T / Σ_U m_U √λ_U for the term weights w_t (module docstring)."""
    alg = split.algebra
    lam: dict[Subset, float] = {}
    for t, w in enumerate(weights):
        s = split.local_support(workload, t)
        for u in subsets(s):
            lam[u] = lam.get(u, 0.0) + float(w) * alg.co_size(s)
    ts = split.components(workload)
    total = sum(alg.multiplicity(u) * math.sqrt(lam[u]) for u in ts)
    return {u: alg.cells * math.sqrt(lam[u]) / total for u in ts}


def from_product(split: AnovaSplit, workload: KroneckerWorkload, product: KroneckerDesign) -> AnovaDesign:
    """The product strategy written in this form: b_T = ∏_{k∈T} u_k ∏_{k∉T} v_k, with u_k, v_k the
    eigenvalues of A_kᵀA_k on the sum-zero vectors and on 1 (the plain factors are in span{I, J})."""
    eigen = []
    for k in split.plain:
        x = product.factors[k].T @ product.factors[k]
        n = x.shape[0]
        v = float(np.ones(n) @ x @ np.ones(n)) / n
        u = (float(np.trace(x)) - v) / (n - 1) if n > 1 else 1.0
        eigen.append((u, v))
    coefficients = {t: math.prod(eigen[i][0] if i in t else eigen[i][1] for i in range(len(split.plain)))
                    for t in split.components(workload)}
    factors = tuple(product.factors[k] for k in split.ordered)
    return AnovaDesign(factors, coefficients, anova_unit_error(workload, split, factors, coefficients), 0)


def optimal_anova(workload: KroneckerWorkload, split: AnovaSplit, start: AnovaDesign) -> AnovaDesign:
    """Alternate the closed-form B and the ordered factors from ``start`` (module docstring); the best.

    Raises
    ------
    CalibrationError
        A non-finite error (a singular factor).
    """
    factors, best = list(start.factors), start
    for rounds in range(1, ROUNDS + 1):
        ordered = ordered_traces(workload, split, tuple(factors))
        coefficients = optimal_coefficients(workload, split, np.prod(ordered, axis=1))
        marginal = anova_traces(workload, split, coefficients)
        for i, k in enumerate(split.ordered):
            weights = marginal * np.prod(np.delete(ordered, i, axis=1), axis=1)
            g = sum(w * workload.gram(t, k) for t, w in enumerate(weights))
            factors[i] = optimal_factor(g / max(float(np.abs(g).max()), 1e-300)).matrix
            ordered[:, i] = factor_traces(workload, k, factors[i])
        current = AnovaDesign(tuple(factors), coefficients,
                              anova_unit_error(workload, split, tuple(factors), coefficients), rounds)
        if not math.isfinite(current.unit_error):
            raise CalibrationError("the Kronecker × marginal strategy search reached a singular factor")
        improved = best.unit_error - current.unit_error > TOLERANCE * current.unit_error
        if current.unit_error < best.unit_error:
            best = current
        if not improved:
            break
    return best


def anova_sensitivity(split: AnovaSplit, factors: tuple[np.ndarray, ...], coefficients: dict[Subset, float]) -> Fraction:
    """Δ₂(A)² under add/remove = ∏_{k∈V} max_j (X_k)_jj · Σ_T b_T m_T / N_P, exactly in rationals from the
    stored floats (module docstring)."""
    alg = split.algebra
    return strategy_sensitivity(factors, replace=False) * sum((Fraction(b) * alg.diagonal(t) for t, b in coefficients.items()), Fraction(0))
