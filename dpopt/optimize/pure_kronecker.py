r"""Kronecker strategies for pure ε (Laplace noise): :math:`A = (\bigotimes_{k\in V}A_k)\otimes B`.

Split the attributes of a ``kronecker`` workload into the *plain* ones P (every term's factor is the
identity or sums the attribute out) and the others V (prefix, ranges, a user's matrix;
:class:`~dpopt.optimize.kronecker_anova.AnovaSplit`). On P a term is the marginal :math:`M_{S_t}`,
:math:`S_t\subseteq P`. The strategy is

.. math:: A = A_V\otimes B,\qquad A_V = \bigotimes_{k\in V}A_k,\qquad B = [\theta_S M_S]_{S\in\mathcal S},

one factor :math:`A_k` (:math:`m_k\times n_k`, full column rank) per ordered attribute and McKenna et
al.'s weighted-marginal template on P (:math:`\theta_S\ge 0`; the marginals :math:`\mathcal S` are every
subset of P whose measurement is small, supersets of the workload's included). It holds the identity
strategy (:math:`A_k = I`, :math:`\theta_P = 1`), the hierarchical one (:math:`A_k` a binary tree),
HDMM's ``KronPIdentity`` with identity on P (:math:`A_k` p-Identity, :math:`\theta_P = 1`) and its
union of Kronecker products with one shared ordered factor (:math:`\theta` on the terms' supports)
(McKenna et al., VLDB 2018, Sec. 6–7). The mechanism adds i.i.d. Laplace(b) noise to :math:`Ax` and
answers :math:`W\hat x`, :math:`\hat x = (A^\top A)^+A^\top y` (least squares).

* **l1 sensitivity** (add/remove): a column of a Kronecker product is the Kronecker product of the
  factors' columns and :math:`\|u\otimes v\|_1 = \|u\|_1\|v\|_1`; every column of B has l1 norm
  :math:`\sum_S\theta_S` (one cell of each marginal), so
  :math:`\Delta_1(A) = \prod_{k\in V}\max_j\|A_ke_j\|_1\cdot\sum_S\theta_S` exactly (:func:`l1_sensitivity`).
  Replace-one: :math:`\|A(e_i-e_j)\|_1\le\|Ae_i\|_1+\|Ae_j\|_1`, so twice that — an upper bound, equal to
  :math:`\Delta_1` when two cells attaining the maximum have disjoint columns (e.g. the identity strategy);
  Hamming k: k times.
* **error**: in the ANOVA algebra of P, :math:`B^\top B = \sum_T\kappa_TE_T`,
  :math:`\kappa_T = \sum_{S\supseteq T}\theta_S^2\prod_{k\in P\setminus S}n_k`, and
  :math:`\mathrm{tr}(M_S(B^\top B)^+M_S^\top) = \prod_{k\in P\setminus S}n_k\sum_{T\subseteq S}m_T/\kappa_T`
  (:mod:`dpopt.optimize.kronecker_anova`), so with Laplace variance :math:`2b^2`

  .. math:: E\|Z\|^2 = 2b^2\sum_t\prod_{k\in V}\mathrm{tr}(G_{t,k}X_k^{-1})\cdot
            \prod_{k\in P\setminus S_t}n_k\sum_{T\subseteq S_t}\frac{m_T}{\kappa_T},\qquad
            b = \Delta_1/\varepsilon

  (:func:`unit_error`; the trace of a Kronecker product is the product of the traces).
* **design**: the error is homogeneous of degree 0 in each block, so each factor is normalised to unit
  column l1 norm and the blocks are optimised in turn (the objective never increases): each ordered
  factor is the best of the identity, the binary hierarchy and HDMM's p-Identity
  :math:`[I;\Theta]\,\mathrm{diag}(1/(1+\mathbf 1^\top\Theta))`, :math:`\Theta\ge 0` of p rows, optimised by
  L-BFGS-B with its exact gradient from fixed starts (:func:`best_factor`), for
  :math:`\tilde G = \sum_t c_tG_{t,k}`; θ minimises :math:`(\sum_S\theta_S)^2\sum_T m_T\lambda_T/\kappa_T`
  (L-BFGS-B from fixed starts, :func:`optimal_theta`; the hook where a better marginal template plugs in).
  The identity, hierarchical and p-Identity strategies are always scored and the best kept.
* **lower bound** (add/remove): for any strategy with :math:`\Delta_1(A) = 1` every column has
  :math:`\|Ae_j\|_2\le\|Ae_j\|_1\le1`, so :math:`\mathrm{diag}(A^\top A)\le 1` and Li & Miklau's SVD bound
  :math:`\mathrm{tr}(W(A^\top A)^+W^\top)\ge(\sum_i\sigma_i(W))^2/N` applies
  (:func:`dpopt.optimize.kronecker_strategy.svd_bound`); least squares is the best linear unbiased
  estimator under i.i.d. noise (Gauss–Markov). Hence :math:`(2/\varepsilon^2)(\sum_i\sigma_i(W))^2/N`
  bounds the error of **every matrix mechanism with i.i.d. Laplace noise and a linear unbiased
  reconstruction** (any strategy A, this family, HDMM's templates, identity, hierarchical) under
  add/remove. It is not a bound over every ε-DP mechanism (K-norm noise is not in the class) and is
  generally not attained.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.domain.kronecker import KroneckerWorkload
from dpopt.domain.marginal_algebra import Subset, subsets
from dpopt.optimize.kronecker_anova import AnovaSplit

ROUNDS = 4
"""Most alternation rounds (θ, then each ordered factor)."""

TOLERANCE = 1e-6
"""Relative decrease of the error below which the alternation stops."""

P_ROWS = (1, 2, 4)
"""Extra rows p of the p-Identity factors tried (HDMM's default is n/16; 1–2 win on prefixes)."""

SEEDS = (0, 1)
"""Seeds of the random starts of each optimisation, besides the structured ones."""

MAX_ITERATIONS = 500
"""Most L-BFGS-B iterations of one start."""

MAX_PLAIN_SUBSETS = 12
"""Up to this many plain attributes every subset is a candidate marginal; beyond, the workload's closure."""

MAX_MEASURED_ROWS = 2_000_000
"""Largest number of strategy rows (measured Laplace variates per release) of a candidate marginal."""


@dataclass(frozen=True)
class Strategy:
    """A = (⊗_{k∈V} A_k) ⊗ [θ_S M_S]_S: the ordered factors (in the order of ``split.ordered``), their
    names, and θ by plain subset (local indices of ``split.plain``; θ_S > 0)."""

    factors: tuple[np.ndarray, ...]
    names: tuple[str, ...]
    theta: dict[Subset, float]


@dataclass(frozen=True)
class PureDesign:
    """The chosen strategy, its ``unit_error`` (:func:`unit_error`: E‖Z‖²·ε²/2 under add/remove), which
    candidate it is, every scored candidate's unit error by name, and the alternation rounds taken."""

    strategy: Strategy
    unit_error: float
    chosen: str
    scored: dict[str, float]
    rounds: int


def column_l1(a: np.ndarray) -> float:
    """max_j ‖A e_j‖₁ in floating point."""
    return float(np.abs(a).sum(axis=0).max())


def exact_column_l1(a: np.ndarray) -> Fraction:
    """max_j ‖A e_j‖₁ exactly in rationals from the binary floats of A."""
    return max(sum((abs(Fraction(float(v))) for v in a[:, j]), Fraction(0)) for j in range(a.shape[1]))


def l1_sensitivity(strategy: Strategy, replace: bool, multiplier: int = 1) -> Fraction:
    r"""Δ₁(A) exact in rationals from the stored floats (module docstring): ∏_k max_j ‖A_ke_j‖₁ · Σ_S θ_S,
    × 2 under replace-one (an upper bound), × k for Hamming k."""
    ordered = math.prod((exact_column_l1(a) for a in strategy.factors), start=Fraction(1))
    return ordered * sum((Fraction(w) for w in strategy.theta.values()), Fraction(0)) * (2 if replace else 1) * multiplier


def plain_traces(workload: KroneckerWorkload, split: AnovaSplit, theta: dict[Subset, float]) -> np.ndarray:
    """Per term: tr(M_S (BᵀB)⁺ M_Sᵀ) = ∏_{k∈P∖S} n_k Σ_{T⊆S, m_T>0} m_T / κ_T (inf when some κ_T = 0)."""
    alg = split.algebra
    kappa: dict[Subset, float] = {}
    out = []
    for t in range(len(workload.terms)):
        s = split.local_support(workload, t)
        total = 0.0
        for u in subsets(s):
            m = alg.multiplicity(u)
            if m == 0:
                continue
            if u not in kappa:
                kappa[u] = sum(w * w * alg.co_size(v) for v, w in theta.items() if set(u) <= set(v))
            total += m / kappa[u] if kappa[u] > 0 else math.inf
        out.append(alg.co_size(s) * total)
    return np.array(out)


def factor_traces(workload: KroneckerWorkload, k: int, a: np.ndarray) -> np.ndarray:
    """Per term: tr(G_{t,k} (AᵀA)⁻¹)."""
    inverse = np.linalg.inv(a.T @ a)
    return np.array([float(np.sum(workload.gram(t, k) * inverse)) for t in range(len(workload.terms))])


def unit_error(workload: KroneckerWorkload, split: AnovaSplit, strategy: Strategy) -> float:
    r""":math:`\sum_t\prod_{k\in V}\mathrm{tr}(G_{t,k}X_k^{-1})\,\mathrm{tr}(M_{S_t}(B^\top B)^+M_{S_t}^\top)`
    times :math:`\Delta_1(A)^2` (add/remove, floating point): E‖Z‖² at ε = 1 divided by 2."""
    traces = plain_traces(workload, split, strategy.theta)
    for k, a in zip(split.ordered, strategy.factors):
        traces = traces * factor_traces(workload, k, a)
    l1 = math.prod(column_l1(a) for a in strategy.factors) * sum(strategy.theta.values())
    return float(np.sum(traces)) * l1 * l1


# ------------------------------------------------------------------------------------ ordered factors
def pidentity_matrix(theta: np.ndarray) -> np.ndarray:
    r"""HDMM's p-Identity :math:`[I;\Theta]\,\mathrm{diag}(1/(1+\mathbf 1^\top\Theta))` ((n + p) × n; every
    column of l1 norm 1 for Θ ≥ 0)."""
    n = theta.shape[1]
    return np.vstack([np.eye(n), theta]) / (1.0 + theta.sum(axis=0))[None, :]


def pidentity_loss(flat: np.ndarray, g: np.ndarray, p: int) -> tuple[float, np.ndarray]:
    r"""tr(G X⁻¹) of the p-Identity strategy and its gradient in Θ.

    With :math:`s = 1+\mathbf 1^\top\Theta` and :math:`M = I+\Theta^\top\Theta`,
    :math:`X^{-1} = \mathrm{diag}(s)M^{-1}\mathrm{diag}(s)`, :math:`f = s^\top(G\circ M^{-1})s`;
    :math:`\partial f/\partial s = 2(G\circ M^{-1})s` and, with :math:`Y = M^{-1}\mathrm{diag}(s)G\,
    \mathrm{diag}(s)M^{-1}`, :math:`\partial f/\partial\Theta = -2\Theta Y + \mathbf 1(\partial f/\partial s)^\top`.
    """
    n = g.shape[0]
    theta = flat.reshape(p, n)
    s = 1.0 + theta.sum(axis=0)
    inv = np.linalg.inv(np.eye(n) + theta.T @ theta)
    h = g * inv
    y = inv @ (s[:, None] * g * s[None, :]) @ inv
    grad = -2.0 * theta @ y + np.outer(np.ones(p), 2.0 * h @ s)
    return float(s @ h @ s), grad.ravel()


def pidentity_factor(g: np.ndarray, p: int, seed: int | None) -> np.ndarray:
    """The p-Identity factor minimising tr(G X⁻¹) by L-BFGS-B (Θ ≥ 0) from one start: Θ = 1/p (``seed``
    None) or uniform(0, 1) entries from ``seed``."""
    from scipy import optimize  # imported where used

    n = g.shape[0]
    start = np.full((p, n), 1.0 / p) if seed is None else np.random.default_rng(seed).uniform(0.0, 1.0, (p, n))
    result = optimize.minimize(pidentity_loss, start.ravel(), args=(g, p), jac=True, method="L-BFGS-B",
                               bounds=[(0.0, None)] * (p * n), options={"maxiter": MAX_ITERATIONS})
    return pidentity_matrix(np.asarray(result.x).reshape(p, n))


def hierarchical_matrix(n: int) -> np.ndarray:
    """The binary hierarchy over n ordered levels (every node of a balanced binary tree of intervals,
    leaves included, as a row of ones), scaled to unit max column l1 norm."""
    rows = []

    def split(lo: int, hi: int) -> None:
        row = np.zeros(n)
        row[lo:hi] = 1.0
        rows.append(row)
        if hi - lo > 1:
            mid = (lo + hi) // 2
            split(lo, mid)
            split(mid, hi)

    split(0, n)
    matrix = np.array(rows)
    return matrix / column_l1(matrix)


def factor_value(g: np.ndarray, a: np.ndarray) -> float:
    """tr(G (AᵀA)⁻¹) · (max_j ‖Ae_j‖₁)²: the factor's error weight at unit sensitivity."""
    return float(np.sum(g * np.linalg.inv(a.T @ a))) * column_l1(a) ** 2


def best_factor(g: np.ndarray) -> tuple[np.ndarray, str]:
    """The best of the identity, the binary hierarchy and p-Identity factors for G (p ∈ :data:`P_ROWS`,
    p ≤ n; the uniform start and :data:`SEEDS`), at unit max column l1 norm; (matrix, name)."""
    n = g.shape[0]
    options = [(np.eye(n), "identity")]
    if n > 1:
        options.append((hierarchical_matrix(n), "hierarchical"))
        options += [(pidentity_factor(g, p, seed), f"p-identity(p={p})")
                    for p in P_ROWS if p <= n for seed in (None,) + SEEDS]
    values = [factor_value(g, a) for a, _ in options]
    a, name = options[int(np.argmin(values))]
    return a / column_l1(a), name


# ------------------------------------------------------------------------------------ marginals on P
def candidate_sets(workload: KroneckerWorkload, split: AnovaSplit, ordered_rows: int) -> tuple[Subset, ...]:
    """The marginals θ may weigh: every subset of P (≤ :data:`MAX_PLAIN_SUBSETS` plain attributes; the
    workload's closure beyond) whose measurement has at most :data:`MAX_MEASURED_ROWS` rows, and always
    the terms' supports."""
    alg = split.algebra
    supports = {split.local_support(workload, t) for t in range(len(workload.terms))}
    if len(split.plain) <= MAX_PLAIN_SUBSETS:
        pool = [tuple(c) for r in range(len(split.plain) + 1) for c in itertools.combinations(range(len(split.plain)), r)]
    else:
        pool = sorted({u for s in supports for u in subsets(s)}, key=lambda u: (len(u), u))
    return tuple(s for s in pool if s in supports or alg.size(s) * ordered_rows <= MAX_MEASURED_ROWS)


def optimal_theta(workload: KroneckerWorkload, split: AnovaSplit, weights: np.ndarray,
                  sets: tuple[Subset, ...], previous: dict[Subset, float] | None) -> dict[Subset, float]:
    r"""θ ≥ 0 on ``sets`` minimising :math:`(\sum_S\theta_S)^2\sum_T m_T\lambda_T/\kappa_T(\theta)`,
    :math:`\lambda_T = \sum_{t:\,T\subseteq S_t}w_t\prod_{k\in P\setminus S_t}n_k` (``weights`` = w_t, the
    ordered traces), by L-BFGS-B from the terms' supports, P alone, uniform, ``previous`` and random starts;
    the best kept, entries below 10⁻⁹ of the largest dropped."""
    from scipy import optimize  # imported where used

    alg = split.algebra
    lam: dict[Subset, float] = {}
    for t, w in enumerate(weights):
        s = split.local_support(workload, t)
        for u in subsets(s):
            if alg.multiplicity(u) > 0:
                lam[u] = lam.get(u, 0.0) + float(w) * alg.co_size(s)
    ts = sorted(lam, key=lambda u: (len(u), u))
    c = np.array([alg.multiplicity(u) * lam[u] for u in ts])
    contains = np.array([[float(set(u) <= set(s)) for s in sets] for u in ts]).reshape(len(ts), len(sets))
    co = np.array([float(alg.co_size(s)) for s in sets])

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        kappa = contains @ (theta * theta * co)
        if np.any(kappa <= 0):
            return 1e300, np.zeros_like(theta)
        total = float(theta.sum())
        inner = float(np.sum(c / kappa))
        grad = 2.0 * total * inner - total * total * 2.0 * theta * co * (contains.T @ (c / kappa**2))
        return total * total * inner, grad

    supports = {split.local_support(workload, t) for t in range(len(workload.terms))}
    starts = [np.array([1.0 if s in supports else 0.0 for s in sets]),
              np.array([1.0 if len(s) == len(split.plain) else 0.0 for s in sets]),
              np.ones(len(sets))]
    if previous:
        starts.append(np.array([previous.get(s, 0.0) for s in sets]))
    starts += [np.random.default_rng(seed).uniform(0.0, 1.0, len(sets)) for seed in SEEDS]
    best, best_value = None, math.inf
    for start in starts:
        if objective(start)[0] >= 1e300:
            continue
        result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * len(sets),
                                   options={"maxiter": MAX_ITERATIONS})
        x = np.asarray(result.x)
        x = np.where(x >= 1e-9 * x.max(), x, 0.0)
        value = objective(x)[0]
        if value < best_value:
            best, best_value = x, value
    scale = float(best.sum())
    return {s: float(v / scale) for s, v in zip(sets, best) if v > 0}


# ------------------------------------------------------------------------------------ the design
def measured_rows(split: AnovaSplit, strategy: Strategy) -> int:
    """The rows of A (Laplace variates per release): ∏_k m_k × Σ_S cells of S."""
    ordered = math.prod(a.shape[0] for a in strategy.factors)
    return ordered * sum(split.algebra.size(s) for s in strategy.theta)


def baseline(workload: KroneckerWorkload, split: AnovaSplit, kind: str) -> Strategy:
    """The identity strategy, or the hierarchical one (a binary hierarchy on each ordered attribute):
    θ_P = 1 (the full table of the plain attributes)."""
    factors = tuple(hierarchical_matrix(workload.sizes[k]) if kind == "hierarchical" and workload.sizes[k] > 1
                    else np.eye(workload.sizes[k]) for k in split.ordered)
    names = tuple("hierarchical" if kind == "hierarchical" and workload.sizes[k] > 1 else "identity"
                  for k in split.ordered)
    return Strategy(factors, names, {tuple(range(len(split.plain))): 1.0})


def optimal_strategy(workload: KroneckerWorkload) -> PureDesign:
    """Alternate θ and the ordered factors from the identity (module docstring), scoring the identity,
    hierarchical and p-Identity (ordered factors optimised for θ_P = 1) strategies beside it; the best
    whose measurement has at most :data:`MAX_MEASURED_ROWS` rows (its sampler draws one Laplace variate per
    row; the optimised strategy always qualifies) is returned."""
    split = AnovaSplit.of(workload)
    terms = len(workload.terms)
    scored: dict[str, tuple[float, Strategy]] = {}
    for kind in ("identity", "hierarchical"):
        s = baseline(workload, split, kind)
        scored[kind] = (unit_error(workload, split, s), s)
    factors = [np.eye(workload.sizes[k]) for k in split.ordered]
    names = ["identity"] * len(factors)
    ordered = np.column_stack([factor_traces(workload, k, a) for k, a in zip(split.ordered, factors)]) \
        if factors else np.ones((terms, 0))
    identity_plain = {tuple(range(len(split.plain))): 1.0}

    def improve_ordered(theta: dict[Subset, float]) -> None:
        plain = plain_traces(workload, split, theta)
        for i, k in enumerate(split.ordered):
            weights = plain * np.prod(np.delete(ordered, i, axis=1), axis=1)
            g = sum(w * workload.gram(t, k) for t, w in enumerate(weights))
            matrix, name = best_factor(g / max(float(np.abs(g).max()), 1e-300))
            column = factor_traces(workload, k, matrix)
            if float(np.sum(weights * column)) <= float(np.sum(weights * ordered[:, i])):
                factors[i], names[i], ordered[:, i] = matrix, name, column

    if factors:
        improve_ordered(identity_plain)
        s = Strategy(tuple(factors), tuple(names), identity_plain)
        scored["p-identity"] = (unit_error(workload, split, s), s)
    sets = candidate_sets(workload, split, math.prod(max(2 * workload.sizes[k], workload.sizes[k] + max(P_ROWS))
                                                     for k in split.ordered))  # every factor's rows at most
    theta, previous, rounds = None, math.inf, 0
    for rounds in range(1, ROUNDS + 1):
        theta = optimal_theta(workload, split, np.prod(ordered, axis=1), sets, theta)
        if factors:
            improve_ordered(theta)
        current = unit_error(workload, split, Strategy(tuple(factors), tuple(names), theta))
        if previous - current <= TOLERANCE * current:
            break
        previous = current
    s = Strategy(tuple(factors), tuple(names), theta)
    scored["optimised"] = (unit_error(workload, split, s), s)
    sampled = [n for n, (_, s) in scored.items() if measured_rows(split, s) <= MAX_MEASURED_ROWS] or ["optimised"]
    chosen = min(sampled, key=lambda name: scored[name][0])
    return PureDesign(scored[chosen][1], scored[chosen][0], chosen, {n: v for n, (v, _) in scored.items()}, rounds)
