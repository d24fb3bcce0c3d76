r"""Kronecker strategies for unions of Kronecker products: design, error, sensitivity, lower bound.

The mechanism measures :math:`y = Ax + z`, :math:`A = A_1\otimes\dots\otimes A_p` (each
:math:`A_k` an invertible :math:`n_k\times n_k` matrix), :math:`z\sim N(0, s^2 I)`, and answers
:math:`W\hat x`, :math:`\hat x = A^{-1}y` (least squares; :math:`A` is square and invertible, so
:math:`\hat x = x + A^{-1}z`). With :math:`X_k = A_k^\top A_k` and
:math:`G_{t,k} = W_{t,k}^\top W_{t,k}` (:mod:`dpopt.domain.kronecker`):

* **error** :math:`E\|W\hat x - Wx\|^2 = s^2\,\mathrm{tr}(WX^{-1}W^\top)
  = s^2\sum_t\prod_k \mathrm{tr}(G_{t,k}X_k^{-1})` (the trace of a Kronecker product is the
  product of the traces);
* **sensitivity** of A: add/remove :math:`\max_j\|Ae_j\|^2 = \prod_k\max_{j}(X_k)_{jj}`;
  replace-one :math:`\max_{i\ne j}\|A(e_i-e_j)\|^2 = \max\big[\prod_k (X_k)_{i_ki_k}+\prod_k(X_k)_{j_kj_k}
  - 2\prod_k(X_k)_{i_kj_k}\big]`, searched over the distinct triples of each factor
  (:func:`strategy_sensitivity`), exactly in rationals from the stored floats;
* **design** (HDMM's ``KronPIdentity`` idea, McKenna et al., VLDB 2018, Sec. 6, with each factor
  solved to optimality instead of by gradient steps): minimise :math:`\sum_t\prod_k
  \mathrm{tr}(G_{t,k}X_k^{-1})` subject to :math:`\mathrm{diag}(X_k)\le 1`, one attribute at a
  time (block coordinate descent; each step solves the convex program
  :math:`\min\mathrm{tr}(\tilde G X^{-1}),\ \mathrm{diag}X\le 1` with
  :math:`\tilde G = \sum_t c_t G_{t,k}`, :math:`c_t = \prod_{l\ne k}\mathrm{tr}(G_{t,l}X_l^{-1})`,
  so the objective never increases). That program is the 1-D optimal Gaussian strategy problem
  (``gaussian_optimal`` on one attribute): for :math:`\tilde G = \alpha I + \beta J` its optimum
  is :math:`X = u(I - J/n) + vJ/n` in closed form (the program is invariant under permuting the
  levels, so averaging an optimum over the permutations gives one in span{I, J}); otherwise it is
  solved through its Lagrange dual (:func:`optimal_factor`), which also certifies it.
* **lower bound** (add/remove, any strategy and any Gaussian noise covariance; Li & Miklau's SVD
  bound): :math:`\mathrm{tr}(WX^{+}W^\top)\max_j X_{jj} \ge \mathrm{tr}(WX^+W^\top)\,\mathrm{tr}X/N
  \ge (\sum_i\sigma_i(W))^2/N` (Cauchy–Schwarz), where the singular values of W come from
  :math:`W^\top W = \sum_t\bigotimes_k G_{t,k}` when, on each attribute, the :math:`G_{t,k}`
  commute (a joint eigenbasis; :func:`svd_bound`; the n_k − rank W_{t,k} zero eigenvalues of
  each :math:`G_{t,k}`, by the exact rank, are set to 0: computed, they are ±ε_mach‖G‖, whose square
  root in the sum would be ~√ε_mach). It is a bound, generally not attained (for
  prefix workloads it is below every strategy); under replace-one it is not a bound at all
  (the grand total is free there) and is not reported.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.domain.kronecker import KroneckerWorkload
from dpopt.errors import CalibrationError
from dpopt.sensitivity.subspace import exact_rank

SWEEPS = 30
"""Most block-coordinate sweeps over the attributes."""

TOLERANCE = 1e-9
"""Relative decrease of the objective below which the sweeps stop."""

FACTOR_ITERATIONS = 5000
"""Most fixed-point steps of one attribute's dual."""

MAX_TRIPLES = 20_000_000
"""Most combinations of per-attribute triples the replace-one sensitivity search evaluates."""


def is_symmetric_form(g: np.ndarray) -> bool:
    """Whether g = αI + βJ (all diagonal entries equal, all off-diagonal entries equal)."""
    n = g.shape[0]
    off = g[~np.eye(n, dtype=bool)]
    scale = max(float(np.abs(g).max(initial=0.0)), 1e-300)
    return bool(np.ptp(np.diag(g)) <= 1e-12 * scale and (off.size == 0 or np.ptp(off) <= 1e-12 * scale))


def symmetric_factor(g: np.ndarray) -> tuple[float, float]:
    r"""(a, b) of the optimal A = (a − b)I + bJ for g = αI + βJ under diag(AᵀA) ≤ 1.

    With :math:`X = u P_1 + v P_0` (:math:`P_0 = J/n`, :math:`P_1 = I - P_0`):
    :math:`\mathrm{tr}(gX^{-1}) = c_1/u + c_0/v`, :math:`c_1 = \alpha(n-1)`, :math:`c_0 = \alpha+n\beta`,
    under :math:`u(n-1)/n + v/n = 1`; Lagrange gives :math:`u = \sqrt{c_1/w_1}/\Sigma`,
    :math:`v = \sqrt{c_0/w_0}/\Sigma`, :math:`\Sigma = \sqrt{c_1w_1}+\sqrt{c_0w_0}`. Then
    :math:`A = \sqrt u P_1 + \sqrt v P_0`: a = √u(1 − 1/n) + √v/n, b = (√v − √u)/n.
    """
    n = g.shape[0]
    alpha = float(g[0, 0] - (g[0, 1] if n > 1 else 0.0))
    beta = float(g[0, 1]) if n > 1 else float(g[0, 0])
    if n == 1:
        return 1.0, 0.0
    c1, w1 = max(alpha, 0.0) * (n - 1), (n - 1) / n
    c0, w0 = alpha + n * beta, 1 / n
    if c1 <= 0 or c0 <= 0:  # a rank-deficient g: keep X ≻ 0 with a tiny share (g does not see it)
        c1, c0 = max(c1, 1e-12 * (c0 + c1)), max(c0, 1e-12 * (c0 + c1))
    total = math.sqrt(c1 * w1) + math.sqrt(c0 * w0)
    su, sv = math.sqrt(math.sqrt(c1 / w1) / total), math.sqrt(math.sqrt(c0 / w0) / total)
    return su * (1 - 1 / n) + sv / n, (sv - su) / n


@dataclass(frozen=True)
class FactorSolution:
    """The optimal factor A (n × n) of one attribute, its value tr(G̃X⁻¹) and the dual lower bound."""

    matrix: np.ndarray
    value: float
    lower_bound: float


def _dual(g: np.ndarray, d: np.ndarray) -> tuple[float, np.ndarray]:
    """g(d) = 2 tr((D½ G D½)½) − Σd and X(d) = D^{-½}(D½GD½)½D^{-½} (module docstring)."""
    root = np.sqrt(d)
    lam, v = np.linalg.eigh(root[:, None] * g * root[None, :])
    half = (v * np.sqrt(np.clip(lam, 0.0, None))) @ v.T
    x = half / root[:, None] / root[None, :]
    return 2.0 * float(np.sum(np.sqrt(np.clip(lam, 0.0, None)))) - float(d.sum()), x


def optimal_factor(g: np.ndarray) -> FactorSolution:
    r"""min tr(G X⁻¹) subject to diag(X) ≤ 1, X ≻ 0, certified by its Lagrange dual.

    :math:`L = \mathrm{tr}(GX^{-1}) + \sum_j d_j(X_{jj}-1)` is minimised over X ≻ 0 at
    :math:`XDX = G`, :math:`X(d) = D^{-1/2}(D^{1/2}GD^{1/2})^{1/2}D^{-1/2}`, giving the concave dual
    :math:`g(d) = 2\,\mathrm{tr}(D^{1/2}GD^{1/2})^{1/2} - \sum_j d_j \le` every feasible value
    (weak duality), with gradient :math:`X(d)_{jj} - 1`. The dual is maximised by the fixed
    point :math:`d_j \leftarrow d_j X(d)_{jj}^2` (exact in one step for a diagonal G, where
    :math:`X(d) = \mathrm{diag}\sqrt{g/d}`; the certificate does not rely on its convergence: the
    bound holds at every d); the primal :math:`X(d)` scaled to max diag 1 is feasible, and a small
    ridge keeps it invertible where G is singular. g = αI + βJ takes the closed form of
    :func:`symmetric_factor`.
    """
    n = g.shape[0]
    if is_symmetric_form(g):
        a, b = symmetric_factor(g)
        matrix = (a - b) * np.eye(n) + b * np.ones((n, n))
        value = factor_trace(g, matrix)
        return FactorSolution(matrix, value, value)
    ridge = g + 1e-10 * float(np.trace(g)) / n * np.eye(n)
    d = np.clip(np.diag(ridge).copy(), 1e-300, None)
    for _ in range(FACTOR_ITERATIONS):
        _, x = _dual(ridge, d)
        diagonal = np.diag(x)
        if np.abs(diagonal - 1.0).max() < 1e-11:
            break
        d = d * diagonal**2
    x = (x + x.T) / 2 / float(np.diag(x).max())
    lam, v = np.linalg.eigh(x)
    matrix = (v * np.sqrt(np.clip(lam, 0.0, None))) @ v.T
    lower, _ = _dual(g, d)
    return FactorSolution(matrix, factor_trace(g, matrix), lower)


def factor_trace(g: np.ndarray, a: np.ndarray) -> float:
    """tr(G (AᵀA)⁻¹) = ‖A⁻ᵀ W_kᵀ‖² computed as tr(G A⁻¹A⁻ᵀ)."""
    inv = np.linalg.inv(a)
    return float(np.trace(g @ inv @ inv.T))


@dataclass(frozen=True)
class KroneckerDesign:
    """The factors A_k, the unit error Σ_t Π_k tr(G_{t,k}X_k⁻¹) (s = 1) and the sweeps taken."""

    factors: tuple[np.ndarray, ...]
    unit_error: float
    sweeps: int


def unit_error(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...]) -> float:
    """Σ_t Π_k tr(G_{t,k} (A_kᵀA_k)⁻¹): the error of the strategy at noise scale s = 1."""
    inverses = [np.linalg.inv(a.T @ a) for a in factors]
    return float(sum(math.prod(float(np.sum(workload.gram(t, k) * inverses[k])) for k in range(len(factors)))
                     for t in range(len(workload.terms))))


def optimal_kronecker(workload: KroneckerWorkload) -> KroneckerDesign:
    """Block coordinate descent over the attributes (module docstring), from A_k = I.

    Raises
    ------
    CalibrationError
        A non-finite objective (a factor that became singular).
    """
    p = len(workload.sizes)
    factors = [np.eye(n) for n in workload.sizes]
    traces = np.array([[float(np.trace(workload.gram(t, k))) for k in range(p)] for t in range(len(workload.terms))])
    previous = float(np.sum(np.prod(traces, axis=1)))
    sweeps = 0
    for sweeps in range(1, SWEEPS + 1):
        for k in range(p):
            weights = np.prod(np.delete(traces, k, axis=1), axis=1)
            g = sum(w * workload.gram(t, k) for t, w in enumerate(weights))
            factors[k] = optimal_factor(g / max(float(np.abs(g).max()), 1e-300)).matrix
            inverse = np.linalg.inv(factors[k].T @ factors[k])
            traces[:, k] = [float(np.sum(workload.gram(t, k) * inverse)) for t in range(len(workload.terms))]
        current = float(np.sum(np.prod(traces, axis=1)))
        if not math.isfinite(current):
            raise CalibrationError("the Kronecker strategy search reached a singular factor")
        if previous - current <= TOLERANCE * current:
            break
        previous = current
    return KroneckerDesign(tuple(factors), unit_error(workload, tuple(factors)), sweeps)


def _exact_gram(a: np.ndarray, diagonal_only: bool = False) -> list[list[Fraction]]:
    """AᵀA (or its diagonal, as a one-row list) in exact rationals from the binary floats of A: A = M/D
    with M integer and D a power of two, then MᵀM in Python integers."""
    exact = [[Fraction(float(x)) for x in row] for row in a]
    scale = max((x.denominator for row in exact for x in row), default=1)
    m = np.array([[x.numerator * (scale // x.denominator) for x in row] for row in exact], dtype=object)
    square = Fraction(1, scale * scale)
    if diagonal_only:
        return [[sum((v * v for v in m[:, j]), 0) * square for j in range(a.shape[1])]]
    product = m.T.dot(m)
    return [[int(v) * square for v in row] for row in product]


def strategy_sensitivity(factors: tuple[np.ndarray, ...], replace: bool) -> Fraction:
    r"""Δ₂(A)² of A = ⊗A_k, exactly in rationals from the stored floats (module docstring).

    Replace-one: each attribute's pairs (i, j) give triples ((X)_{ii}, (X)_{jj}, (X)_{ij}) (exact,
    distinct ones kept, with whether i = j); their products over the attributes are searched in
    floating point, excluding the all-equal pair, and every combination within 10⁻⁹ of the float
    maximum is evaluated exactly.

    Raises
    ------
    CalibrationError
        Too many combinations of triples to search.
    """
    if not replace:
        return math.prod((max(_exact_gram(a, diagonal_only=True)[0]) for a in factors), start=Fraction(1))
    grams = [_exact_gram(a) for a in factors]
    per = []
    for g in grams:
        n = len(g)
        found = {(g[i][i], g[j][j], g[i][j], i == j) for i in range(n) for j in range(n)}
        per.append(sorted(found))
    if math.prod(len(p) for p in per) > MAX_TRIPLES:
        raise CalibrationError("too many distinct entries of the strategy's factors to search its replace-one "
                               "sensitivity")
    values = np.ones((1, 3))
    same = np.ones(1, dtype=bool)
    for triples in per:
        arr = np.array([[float(x) for x in t[:3]] for t in triples])
        values = (values[:, None, :] * arr[None, :, :]).reshape(-1, 3)
        same = (same[:, None] & np.array([t[3] for t in triples])[None, :]).ravel()
    f = np.where(same, -np.inf, values[:, 0] + values[:, 1] - 2 * values[:, 2])
    top = float(f.max())
    best = Fraction(0)
    for flat in np.flatnonzero(f >= top - 1e-9 * abs(top)):
        index = np.unravel_index(int(flat), [len(p) for p in per])
        chosen = [per[k][i] for k, i in enumerate(index)]
        exact = (math.prod((c[0] for c in chosen), start=Fraction(1)) + math.prod((c[1] for c in chosen), start=Fraction(1))
                 - 2 * math.prod((c[2] for c in chosen), start=Fraction(1)))
        best = max(best, exact)
    return best


def svd_bound(workload: KroneckerWorkload) -> float | None:
    r"""(Σ_i σ_i(W))² / N, from the joint eigenvalues of the commuting G_{t,k} (module docstring);
    None when on some attribute they do not commute, or the eigenvalue tuples are too many."""
    p = len(workload.sizes)
    groups = []  # per attribute: (multiplicities, eigenvalue of each term)
    for k, n in enumerate(workload.sizes):
        grams = [workload.gram(t, k) for t in range(len(workload.terms))]
        distinct = list({g.tobytes(): g for g in grams}.values())
        if any(np.abs(a @ b - b @ a).max() > 1e-9 * max(1.0, np.abs(a).max() * np.abs(b).max())
               for a, b in itertools.combinations(distinct, 2)):
            return None
        mix = sum(np.random.default_rng(k).uniform(1, 2) ** i * g for i, g in enumerate(distinct))
        _, vectors = np.linalg.eigh(mix)
        lam = np.einsum("ij,tjk,ki->ti", vectors.T, np.array(grams), vectors)  # term × eigenvector
        for t, g in enumerate(lam):  # G_{t,k} has n − rank(W_{t,k}) zero eigenvalues, computed as ±ε_mach‖G‖
            g[np.argsort(g, kind="stable")[: n - exact_rank(workload.factor(t, k))]] = 0.0
        keys, inverse, counts = np.unique(np.round(lam.T, 9), axis=0, return_inverse=True, return_counts=True)
        values = np.array([lam[:, inverse.ravel() == g].mean(axis=1) for g in range(len(keys))])  # group × term
        groups.append((counts.astype(float), values))
    if math.prod(len(c) for c, _ in groups) > 10_000_000:
        return None
    total = np.ones((1, len(workload.terms)))
    mult = np.ones(1)
    for counts, values in groups:
        total = (total[:, None, :] * values[None, :, :]).reshape(-1, len(workload.terms))
        mult = (mult[:, None] * counts[None, :]).ravel()
    nuclear = float(np.sum(mult * np.sqrt(np.clip(total.sum(axis=1), 0.0, None))))
    return nuclear * nuclear / workload.cells if p else None


def identity_unit_error(workload: KroneckerWorkload) -> float:
    """tr(W Wᵀ) = Σ_t Π_k ‖W_{t,k}‖_F²: the identity strategy's error at s = 1."""
    return float(sum(math.prod(float(np.sum(workload.factor(t, k) ** 2)) for k in range(len(workload.sizes)))
                     for t in range(len(workload.terms))))
