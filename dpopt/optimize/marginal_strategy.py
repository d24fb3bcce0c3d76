r"""Weighted marginals measured with Laplace noise: the strategy weights for a marginal workload (pure ε).

HDMM's marginal template (McKenna et al., VLDB 2018, Sec. 5): measure
:math:`y_S = \theta_S M_S x + \mathrm{Lap}(b)^{\otimes}` for marginals S of the domain, then answer
W by least squares, :math:`W\hat x = W(A^\top A)^+A^\top y` with :math:`A = [\theta_S M_S]_S`. In the
ANOVA algebra :math:`A^\top A = \sum_T \kappa_T E_T`,
:math:`\kappa_T = \sum_{S \supseteq T} \theta_S^2 \prod_{k\notin S} n_k`, so the error is

.. math:: E\|W\hat x - Wx\|^2 = 2b^2 \sum_T \frac{m_T\lambda_T}{\kappa_T},\qquad
          b = \frac{\Delta_1(\theta)}{\varepsilon},\quad
          \Delta_1(\theta) = k\sum_S \theta_S\ \text{(add/remove)},\ \
          2k\sum_{S\ \mathrm{moving}} \theta_S\ \text{(replace-one)},

(one record adds θ_S to one cell of each measured marginal; two records that differ in every
attribute move two cells of every marginal with an attribute of ≥ 2 levels; Hamming-k sums k of
them). T runs over the components the workload sees (λ_T > 0); a measured marginal S informs
every T ⊆ S, so a marginal *larger* than any of the workload's (the whole table, a 3-way table
for a 2-way workload) can lower the error: it costs one θ_S of sensitivity and informs all its
sub-marginals at once.

**Candidates** (:func:`candidate_sets`): every marginal of the domain (the 2^p subsets of the p
attributes, HDMM's template) when p ≤ :data:`MAX_ALL_ATTRIBUTES`, else the workload's closure and
every marginal of at most one attribute more than the workload's largest table; in both cases only marginals of at most
:data:`MAX_MEASURED_CELLS` cells (the sampler draws one Laplace variate per measured cell) besides
the closure's own, and under replace-one only marginals that move (the others inform nothing
that changes between neighbours).

**Optimisation.** The error is homogeneous of degree 0 in θ and not convex (it is a convex function of
u = θ² over the non-convex set Σ√u_S ≤ 1, whose minima sit on sparse supports: on all 2-way
marginals of (10, 2, 6, 5, 8) the best design measures four 2-way and two 3-way tables, and
random starts land in many local minima). It is minimised by L-BFGS-B on θ ≥ 0 with the analytic
gradient from the workload's blocks and from :func:`restarts` random points (fixed seed
:data:`SEED`, half uniform on [0, 1] as HDMM's template, half cubed exponentials, which start
nearer sparse supports), and the best is kept: the result is deterministic. The certified ε
depends only on the stored θ and b (Δ₁(θ)/b, exact), never on the optimiser.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dpopt.domain.marginal_algebra import MarginalWorkload, Subset
from dpopt.errors import CalibrationError

MAX_ALL_ATTRIBUTES = 12
"""Up to this many attributes every marginal of the domain is a candidate (2^12 = 4,096 sets; at 16 attributes
the 65,536 sets take minutes of L-BFGS-B, and the best designs measured marginals at most one attribute
larger than the workload's in every case tried)."""

MAX_MEASURED_CELLS = 2**20
"""Largest table measured besides the workload's closure (one Laplace variate per cell per release)."""

MAX_RESTARTS = 64
"""Random starts on small candidate sets; fewer on large ones (:func:`restarts`)."""

MIN_RESTARTS = 6

RESTART_BUDGET = 65536
"""Random starts × candidates, at most (until :data:`MIN_RESTARTS`)."""

SEED = 20261127

PRUNE = 1e-6
"""Weights below this fraction of the largest are dropped when every component stays covered."""


@dataclass(frozen=True)
class StrategyDesign:
    """The best weights found: θ_S per measured marginal (the others are 0), and the error at ε = 1.

    Attributes
    ----------
    weights : dict
        θ_S > 0, the largest 1.
    unit_error : float
        2 Δ₁(θ)² Σ_T m_T λ_T / κ_T(θ): the error at ε = 1 (and Hamming factor 1).
    starts : int
        Local optimisations run.
    candidates : int
        Marginals the weights were chosen among.
    """

    weights: dict[Subset, float]
    unit_error: float
    starts: int
    candidates: int


def moving(workload: MarginalWorkload, s: Subset) -> bool:
    """Whether two records can put different values in marginal s (an attribute with ≥ 2 levels)."""
    return any(workload.algebra.sizes[k] >= 2 for k in s)


def candidate_sets(workload: MarginalWorkload, replace: bool) -> tuple[Subset, ...]:
    """The marginals the strategy may measure (module docstring), by size then order."""
    alg = workload.algebra
    p = len(alg.sizes)
    closure = set(workload.closure)
    if p <= MAX_ALL_ATTRIBUTES:
        pool = (s for r in range(p + 1) for s in itertools.combinations(range(p), r))
    else:
        largest = max(len(s) for s in workload.sets)
        pool = itertools.chain(closure, (s for r in range(largest + 2) for s in itertools.combinations(range(p), r)))
    found = {s for s in pool if s in closure or alg.size(s) <= MAX_MEASURED_CELLS}
    return tuple(sorted((s for s in found if not replace or moving(workload, s)), key=lambda s: (len(s), s)))


def restarts(candidates: int) -> int:
    """Random starts for ``candidates`` marginals: :data:`RESTART_BUDGET` / candidates within
    [:data:`MIN_RESTARTS`, :data:`MAX_RESTARTS`]."""
    return max(MIN_RESTARTS, min(MAX_RESTARTS, RESTART_BUDGET // max(1, candidates)))


def blocks_unit_error(workload: MarginalWorkload, replace: bool) -> float:
    """The error at ε = 1 of measuring the workload's own tables (θ_S = 1 on its distinct blocks, the
    moving ones under replace-one): 2Δ₁² Σ_T m_T λ_T / κ_T. :func:`optimal_weights` never returns a worse
    design (it keeps this point when nothing beats it), so this bounds the family's error from above at
    the cost of a sum over the closure (for ranking candidates a priori)."""
    alg = workload.algebra
    sets = [s for s in dict.fromkeys(workload.sets) if not replace or moving(workload, s)]
    ell = len(sets) * (2 if replace else 1)
    kappa = precisions(workload, {s: 1.0 for s in sets}, workload.closure)
    return 2.0 * ell * ell * sum(alg.multiplicity(t) * float(workload.gram_eigenvalue(t)) / kappa[t]
                                 for t in workload.closure if alg.multiplicity(t) > 0 and not (replace and t == ()))


def precisions(workload: MarginalWorkload, weights: dict[Subset, float], ts: tuple[Subset, ...]) -> dict[Subset, float]:
    """κ_T = Σ_{S⊇T} θ_S² ∏_{k∉S} n_k for each T of ``ts``."""
    alg = workload.algebra
    return {t: sum(w * w * alg.co_size(s) for s, w in weights.items() if set(t) <= set(s)) for t in ts}


def template(workload: MarginalWorkload, ts: tuple[Subset, ...], replace: bool):
    """The candidate marginals, their l1 counts, the sparse containment T ⊆ S (components × candidates) and its
    transpose, and ∏_{k∉S} n_k per candidate."""
    from scipy import sparse

    sets = candidate_sets(workload, replace)
    counted = np.array([1.0 if not replace else 2.0 * moving(workload, s) for s in sets])
    index = {t: i for i, t in enumerate(ts)}
    rows, cols = [], []
    for j, s in enumerate(sets):  # T ⊆ S: every subset of S that is a component
        for r in range(len(s) + 1):
            for t in itertools.combinations(s, r):
                if t in index:
                    rows.append(index[t])
                    cols.append(j)
    contains = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ts), len(sets)))
    co = np.array([float(workload.algebra.co_size(s)) for s in sets])
    return sets, counted, contains, contains.T.tocsr(), co


def optimal_weights(workload: MarginalWorkload, ts: tuple[Subset, ...], replace: bool,
                    gram: dict[Subset, float] | None = None) -> StrategyDesign:
    """Weights θ minimising Δ₁(θ)² Σ_T m_T λ_T / κ_T(θ) over the components ``ts`` (restarts, best kept);
    ``gram``: eigenvalues to use instead of the workload's (the weighted total at λ^w_T of
    :func:`~dpopt.optimize.table_goals.weighted_eigenvalues`; ``unit_error`` is then that total's).

    Raises
    ------
    CalibrationError
        No start gives weights that cover every component.
    """
    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    alg = workload.algebra
    sets, counted, contains, lifted, co = template(workload, ts, replace)
    eigen = gram if gram is not None else {t: float(workload.gram_eigenvalue(t)) for t in ts}
    c = np.array([alg.multiplicity(t) * eigen[t] for t in ts])

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        kappa = contains @ (theta * theta * co)
        if np.any(kappa <= 0):
            return np.inf, np.zeros_like(theta)
        ell = counted @ theta
        r = float(np.sum(c / kappa))
        grad = 2.0 * ell * r * counted - ell * ell * (lifted @ (c / kappa**2)) * 2.0 * theta * co
        return ell * ell * r, grad

    rng = np.random.default_rng(SEED)
    own = set(workload.sets)
    blocks = np.array([1.0 if s in own else 1e-3 for s in sets])
    n_random = restarts(len(sets))
    randoms = [rng.uniform(0.0, 1.0, len(sets)) if i % 2 == 0 else rng.exponential(1.0, len(sets)) ** 3
               for i in range(n_random)]
    exact_blocks = np.where(blocks == 1.0, 1.0, 0.0)
    best = (objective(exact_blocks)[0], exact_blocks)  # the result is never worse than the workload's own tables
    for start in [blocks] + randoms:
        found = optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                  bounds=[(0.0, None)] * len(sets), options={"maxiter": 3000})
        value, _ = objective(found.x)
        if np.isfinite(value) and value < best[0]:
            best = (value, found.x)
    if not np.isfinite(best[0]):
        raise CalibrationError("no strategy weights cover every component of the workload")
    theta = best[1] / best[1].max()
    pruned = np.where(theta < PRUNE, 0.0, theta)  # negligible weights: a table to sample, next to no information
    if np.isfinite(objective(pruned)[0]):
        theta = pruned
    weights = {s: float(w) for s, w in zip(sets, theta) if w > 0}
    return StrategyDesign(weights, float(objective(theta)[0]) * 2.0, 1 + n_random, len(sets))
