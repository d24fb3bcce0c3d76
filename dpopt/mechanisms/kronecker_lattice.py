r"""A Kronecker strategy measured exactly on a lattice (``kronecker_gaussian`` with ``sampler: exact``).

The continuous design measures :math:`y = Ax + z`, :math:`A = \bigotimes_k A_k`, :math:`z \sim N(0, s^2 I_N)`, and
releases :math:`W A^{-1} y`. Rotate each factor's output space by :math:`O_k = [q_k, Q_k]` orthogonal,
:math:`q_k = A_k^{-\top}\mathbf 1/r_k`, :math:`r_k = \|A_k^{-\top}\mathbf 1\|`: then :math:`q_k^\top A_k =
\mathbf 1^\top/r_k` and :math:`(\bigotimes_k O_k^\top)y` splits into independent blocks, one per set T of
attributes (index ≥ 1 exactly on T),

.. math:: y_T = \Big(\bigotimes_{k\in T} P_k\Big)\, x_T\, \prod_{k\notin T} r_k^{-1} + s\,h_T,\qquad P_k = Q_k^\top A_k,

with :math:`x_T` the T-marginal of the cells and :math:`h_T \sim N(0, I)`. A term of W with support S reads only
the blocks T ⊆ S (:math:`\mathbf 1^\top A_k^{-1} O_k = r_k e_0^\top`), so only the blocks of the down-closure D of
the supports are measured, and each needs only a marginal of the cells — which the answers determine when the
term's factors have full column rank (prefix, ranges, identity): every release path hands the mechanism the
answers, and the measurement starts from them.

**On the lattice.** Each :math:`P_k` is rounded to an integer matrix :math:`\tilde P_k = \mathrm{round}(c_kP_k)`
((n_k − 1) × n_k); an identity or summed attribute (:math:`A_k = \alpha I + \beta J`) takes an exact integer
form H with :math:`H^\top H = \lambda(I - J/n)` instead (:func:`centring`). Under add/remove with plain attributes
the strategy is :math:`(\bigotimes_{k\in V}A_k)\otimes\sum_U\sqrt{b_U}E_U` (:mod:`dpopt.optimize.kronecker_anova`):
the plain attributes take the same forms and block T's variance carries :math:`\prod_{k\in U}\lambda_k
\prod_{k\in P\setminus U}n_k/b_U` for its plain part U. Block T is the exact integer measurement

.. math:: \tilde y_T = \Big(\bigotimes_{k\in T}\tilde P_k\Big) x_T + \eta_T,\qquad
          \eta_T \sim N_\mathbb{Z}(0, \sigma_T^2)\ \text{i.i.d.},\qquad
          \sigma_T^2 \ge \tau^2 g_T^2 \prod_{k\in T} c_k^2 \prod_{k\notin T} r_k^2

(σ_T² dyadic, rounded up; the block's gain g_T = 1 unless its variance would be small under μ-GDP,
:func:`lift`; a term reads ỹ_T/g_T). The scales are shared by the blocks, but a block whose variance would exceed
the range cap uses its rounded factors divided by a power of two d_T, rounded half up in integers
(:func:`choose_divisors`); d_T depends only on the block's other attributes, so that the release still decodes the
rounded axes slice by slice. Under replace-one the total (T = ∅) does not move and is published from the integer
total, without noise. The release is the unbiased :math:`W\tilde O^{-1}\tilde y`, :math:`\tilde O_k =
[\mathbf 1^\top; \tilde P_k]` (a term reads the S-table whose entries with index ≥ 1 exactly on T are
:math:`\tilde y_T`): post-processing, in floating point, of integers.

**Privacy**, exact from the integer factors: neighbours shift block T by the integer vector
:math:`\Delta_T = (\bigotimes_{k\in T}\tilde P_k)\delta_T`; with :math:`G_k = \tilde P_k^\top\tilde P_k`,
:math:`\|\Delta_T\|^2 = \prod_{k\in T}G_k[i_k,i_k]` (add/remove, cell i) or
:math:`\prod G_k[i_k,i_k] + \prod G_k[j_k,j_k] - 2\prod G_k[i_k,j_k]` (replace-one, cells i, j). The measurement's
μ² is the largest :math:`\sum_T \|\Delta_T\|^2/v_T` over neighbours (× k² for Hamming k), with v_T = σ_T² under
ρ-zCDP (Canonne, Kamath & Steinke 2020, Theorem 14) and the effective variance 1/m_T² of the certified GDP slope
under μ-GDP and (ε, δ) (:mod:`dpopt.privacy.discrete_gaussian_gdp`), checked by
:func:`~dpopt.mechanisms.lattice.lattice_privacy_check`. Under add/remove the sum is increasing in every factor's
column norm, so its maximum is at the largest column of each factor at once (exact); under replace-one it is
searched in exact integers over every pair of cells when there are at most :data:`MAX_PAIR_GRID` pairs, and beyond,
the sum over the blocks of each block's own maximum bounds it.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
.. [2] C. Li, G. Miklau, M. Hay, A. McGregor and V. Rastogi, "The matrix mechanism", VLDB Journal 2015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.kronecker import KroneckerWorkload, apply_along
from dpopt.domain.marginal_algebra import Subset, subsets
from dpopt.errors import DataError
from dpopt.mechanisms.lattice import (
    GDP_RANGE_REFUSAL,
    GDP_TARGETS,
    effective_variance,
    lattice_privacy_check,
    target_lattice_variance,
)
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2
from dpopt.privacy.gaussian_calibration import gaussian_sigma
from dpopt.spec.models import Privacy

MAX_PAIR_GRID = 4_000_000
"""Most neighbour positions (pairs of cells under replace-one, cells under add/remove) searched exactly for the
sensitivity; beyond, the per-block maxima are summed (an upper bound)."""

INT_LIMIT = 2**62
"""Bound on any integer the int64 measurement forms (overflow check)."""


def centring(n: int) -> np.ndarray:
    """An integer H with rows orthogonal to 1 and HᵀH = λ(I − J/n): the Sylvester–Hadamard rows after the first
    (λ = n, n − 1 rows of ±1) when n is a power of two, else nI − J (λ = n², n rows)."""
    if n & (n - 1) == 0:
        h = np.ones((1, 1), dtype=np.int64)
        while h.shape[0] < n:
            h = np.block([[h, h], [h, -h]])
        return h[1:]
    return (n * np.eye(n) - 1).astype(np.int64)


def rotated_factor(a: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None]:
    """(P_k, r_k = ‖A_k⁻ᵀ1‖, its exact integer form or None) of a continuous factor (module docstring).

    P_k = Q_kᵀA_k with Q_k completing q_k orthonormally; when A_k = αI + βJ (an identity or summed attribute),
    P_k = αH/√λ instead with H = :func:`centring` (the same Gram matrix PᵀP = α²(I − J/n), so the same sensitivity
    and the same error), whose integer form H is exact at every scale."""
    n = a.shape[0]
    u = np.linalg.solve(a.T, np.ones(n))
    r = float(np.linalg.norm(u))
    if n >= 2:
        alpha, beta = a[0, 0] - a[0, 1], a[0, 1]
        if np.allclose(a, alpha * np.eye(n) + beta, rtol=0, atol=1e-12 * np.abs(a).max()):
            h = centring(n)
            return alpha * h / math.sqrt(float(h[0] @ h[0]) if h.shape[0] < n else n * n), r, h
    basis, _ = np.linalg.qr(np.column_stack([u / r, np.eye(n)]))
    return basis[:, 1:n].T @ a, r, None


def block_family(workload: KroneckerWorkload) -> tuple[Subset, ...]:
    """D: every subset of a term's support, ordered by size then lexicographically."""
    supports = {workload.support(t) for t in range(len(workload.terms))}
    return tuple(sorted({t for s in supports for t in subsets(s)}, key=lambda t: (len(t), t)))


def recoverable_terms(workload: KroneckerWorkload) -> dict[Subset, int] | str:
    """For each distinct support, the first term whose factors are integer with full column rank (its answers
    determine the support's marginal of the cells); or the reason none is."""
    out: dict[Subset, int] = {}
    for t in range(len(workload.terms)):
        s = workload.support(t)
        if s in out:
            continue
        factors = [workload.factor(t, k) for k in s]
        if all(np.all(f == np.round(f)) and np.linalg.matrix_rank(f) == f.shape[1] for f in factors):
            out[s] = t
    missing = [s for s in (workload.support(t) for t in range(len(workload.terms))) if s not in out]
    if missing:
        return (f"no term with support {missing[0]} has integer factors of full column rank, so the answers do "
                "not determine that marginal of the cells")
    return out


def _int_matrix(matrix: np.ndarray) -> np.ndarray:
    return np.rint(np.asarray(matrix, dtype=float)).astype(np.int64)


def _apply_int(table: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """``matrix`` (int64) along ``axis`` of an int64 table, exactly (the caller bounds the result)."""
    moved = np.moveaxis(table, axis, -1)
    return np.moveaxis(moved @ matrix.T, -1, axis)


def _row_bound(matrix: np.ndarray) -> int:
    return int(np.abs(matrix.astype(object)).sum(axis=1).max()) if matrix.size else 0


def cell_marginals(workload: KroneckerWorkload, answers: np.ndarray) -> dict[Subset, np.ndarray]:
    """x_T (int64, shape (m,) + levels of T) for every block T of D (:func:`block_family`), from the integer
    answers (m, d): each support's marginal by the pseudo-inverse of a recoverable term's factors
    (:func:`recoverable_terms`), rounded and checked by recomputing that term's answers in int64.

    Raises
    ------
    ValueError
        No term of some support has integer factors of full column rank.
    DataError
        Answers that no integer cells reproduce exactly (not counts of records), or beyond the int64 range.
    """
    found = recoverable_terms(workload)
    if isinstance(found, str):
        raise ValueError(found)
    work, m = workload, answers.shape[0]
    by_support = {}
    for s, t in found.items():
        block = answers[:, work.offsets[t]:work.offsets[t + 1]].reshape(
            (m,) + tuple(work.factor(t, k).shape[0] for k in s))
        x = block.astype(float)
        for i, k in enumerate(s):
            x = apply_along(x, np.linalg.pinv(work.factor(t, k)), 1 + i)
        x = np.rint(x)
        if not np.all(np.abs(x) <= 2.0**52):
            raise DataError("the exact (lattice) release needs counts below 2^52")
        x = x.astype(np.int64)
        bound = int(np.abs(x).max(initial=0)) * math.prod(_row_bound(_int_matrix(work.factor(t, k))) for k in s)
        if bound >= INT_LIMIT:
            raise DataError("the exact (lattice) release: the counts are beyond the int64 measurement's range")
        back = x
        for i, k in enumerate(s):
            back = _apply_int(back, _int_matrix(work.factor(t, k)), 1 + i)
        if not np.array_equal(back, block):
            raise DataError("the exact (lattice) release needs answers that are counts of records (no integer "
                            "cells reproduce them); set `sampler: floating_point` for other values")
        by_support[s] = x
    out = {}
    for block in block_family(work):
        s = next(s for s in by_support if set(block) <= set(s))
        drop = tuple(1 + i for i, k in enumerate(s) if k not in block)
        out[block] = by_support[s].sum(axis=drop) if drop else by_support[s]
    return out


@lru_cache(maxsize=64)
def _left_inverse(data: bytes, rows: int, cols: int) -> np.ndarray:
    """Õ⁺, the pseudo-inverse of Õ = [1ᵀ; F] for the int64 factor F given by its bytes and shape (cached by
    content: the scale search builds many lattices that share most factors, and every term of an attribute
    shares its Õ)."""
    f = np.frombuffer(data, dtype=np.int64).reshape(rows, cols)
    out = np.linalg.pinv(np.vstack([np.ones((1, cols)), f.astype(float)]))
    out.flags.writeable = False
    return out


@lru_cache(maxsize=32)
def _decoder(w_data: bytes, w_rows: int, f_data: bytes, rows: int, cols: int) -> np.ndarray:
    """B = W Õ⁺ for the float factor W (w_rows × cols) and the int64 factor F given by their bytes (cached by content:
    the terms of a workload share their factors, the scale search's lattices most of theirs; 32 maps, about ten a
    trial of the range example's search)."""
    w = np.frombuffer(w_data, dtype=float).reshape(w_rows, cols)
    out = w @ _left_inverse(f_data, rows, cols)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class KroneckerLattice:
    """The integer factors P̃_k and the block variances σ_T² (module docstring).

    Parameters
    ----------
    workload : KroneckerWorkload
    factors : tuple of numpy.ndarray
        P̃_k per attribute, int64, m_k × n_k (m_k = n_k − 1, or n_k for the form nI − J).
    variances : dict
        σ_T² (a dyadic Fraction) per noisy block T of D.
    public : tuple of Subset
        Blocks of D published without noise (the total under replace-one).
    gains : dict, optional
        g_T ≥ 1 per noisy block: block T measures g_T (⊗ P̃_k) x_T (a finer lattice for a block whose variance
        would be small, where the discrete Gaussian's GDP slope costs 1/(12σ²)); 1 when absent.
    rounded : tuple of int
        The attributes whose factor is a rounding (the others have an exact integer form).
    divisors : dict, optional
        d_T (a power of two) per block: block T uses ⌊(2P̃_k + d_T)/(2d_T)⌋ (P̃_k/d_T rounded half up, in integers)
        for its rounded attributes, a coarser factor where the block's variance would exceed the range cap; equal
        for blocks with the same attributes outside ``rounded`` (so that the release decodes axis by axis); 1 when
        absent.
    """

    workload: KroneckerWorkload
    factors: tuple[np.ndarray, ...]
    variances: dict[Subset, Fraction]
    public: tuple[Subset, ...]
    gains: dict[Subset, int] | None = None
    rounded: tuple[int, ...] = ()
    divisors: dict[Subset, int] | None = None

    def gain(self, t: Subset) -> int:
        """g_T (1 unless recorded)."""
        return 1 if self.gains is None else self.gains.get(t, 1)

    def divisor(self, t: Subset) -> int:
        """d_T (1 unless recorded)."""
        return 1 if self.divisors is None else self.divisors.get(t, 1)

    def block_factor(self, k: int, t: Subset) -> np.ndarray:
        """Attribute k's integer factor in block T: P̃_k, or ⌊(2P̃_k + d)/(2d)⌋ for a rounded attribute, d = d_T."""
        d = self.divisor(t)
        if d == 1 or k not in self.rounded:
            return self.factors[k]
        key = (k, d)
        if key not in self._divided:
            self._divided[key] = (2 * self.factors[k] + d) // (2 * d)
        return self._divided[key]

    @cached_property
    def _divided(self) -> dict:
        return {}

    def pattern(self, t: Subset) -> Subset:
        """T's attributes outside ``rounded`` (its divisor depends on them alone)."""
        return tuple(k for k in t if k not in self.rounded)

    def __post_init__(self):
        sizes = self.workload.sizes
        if len(self.factors) != len(sizes) or any(f.ndim != 2 or f.shape[1] != n for f, n in zip(self.factors, sizes)):
            raise ValueError("one integer factor per attribute, with one column per level")
        if set(self.variances) | set(self.public) != set(block_family(self.workload)) or set(self.variances) & set(self.public):
            raise ValueError("one variance per block of the supports' down-closure (the public blocks excepted)")
        if not all(isinstance(v, Fraction) and v > 0 for v in self.variances.values()):
            raise ValueError("the block variances must be positive rationals")
        if self.gains is not None and (set(self.gains) - set(self.variances)
                                       or not all(type(g) is int and 1 <= g < 2**20 for g in self.gains.values())):
            raise ValueError("the block gains must be integers from 1 to 2^20, on noisy blocks")
        if not set(self.rounded) <= set(range(len(sizes))):
            raise ValueError("the rounded attributes must be attributes of the workload")
        if self.divisors is not None:
            if set(self.divisors) - set(self.variances) or not all(
                    type(d) is int and 1 <= d <= 2**20 and d & (d - 1) == 0 for d in self.divisors.values()):
                raise ValueError("the block divisors must be powers of two from 1 to 2^20, on noisy blocks")
            by_pattern: dict[Subset, set] = {}
            for t in self.variances:
                by_pattern.setdefault(self.pattern(t), set()).add(self.divisor(t))
            if any(len(v) > 1 for v in by_pattern.values()):
                raise ValueError("blocks with the same attributes outside the rounded ones must share their divisor")

    # ------------------------------------------------------------ privacy
    def shift_norms(self, replace: bool) -> dict[Subset, np.ndarray]:
        """‖Δ_T‖² per block (exact Python integers, object arrays) over the neighbour grid: axes (i_1..i_p) under
        add/remove, (i_1, j_1, .., i_p, j_p) flattened per attribute to n_k² under replace-one; broadcastable."""
        p = len(self.factors)
        cache: dict = {}

        def gram(k, t):
            key = (k, self.divisor(t) if k in self.rounded else 1)
            if key not in cache:
                f = self.block_factor(k, t).astype(object)
                cache[key] = f.T @ f
            return cache[key]

        out = {}
        for t in self.variances:
            def along(values_of, k):
                shape = [1] * p
                shape[k] = values_of.size
                return values_of.reshape(shape)
            if not replace:
                term = np.ones([1] * p, dtype=object)
                for k in t:
                    term = term * along(np.diag(gram(k, t)).copy(), k)
                out[t] = term
                continue
            ii = np.ones([1] * p, dtype=object)
            jj = np.ones([1] * p, dtype=object)
            ij = np.ones([1] * p, dtype=object)
            for k in t:
                g = gram(k, t)
                n = g.shape[0]
                ii = ii * along(np.repeat(np.diag(g), n), k)
                jj = jj * along(np.tile(np.diag(g), n), k)
                ij = ij * along(g.reshape(-1), k)
            out[t] = ii + jj - 2 * ij
        return out

    def mu_squared(self, effective: dict[Subset, Fraction], replace: bool, multiplier: int) -> tuple[Fraction, str]:
        """max over neighbours of Σ_T g_T²‖Δ_T‖²/v_T, × multiplier² (exact), and how it was searched.

        Add/remove: Σ_T ω_T ∏_{k∈T} G_k[i_k, i_k] with ω_T ≥ 0 is increasing in each diagonal entry, so its maximum
        over cells is at i_k = argmax G_k[i, i] for every k at once: Σ_T ω_T ∏_{k∈T} max_i G_k[i, i], exact.
        Replace-one: the exact maximum over every pair of cells (:data:`MAX_PAIR_GRID` at most), else the sum of the
        blocks' own maxima (an upper bound)."""
        common = math.lcm(*(v.numerator for v in effective.values())) if effective else 1
        weights = {t: int(effective[t].denominator * common // effective[t].numerator) * self.gain(t) ** 2
                   for t in self.variances}
        if not replace and self.divisors is None:
            tops = [max((int(v) for v in np.einsum("ij,ij->j", f.astype(object), f.astype(object))), default=0)
                    for f in self.factors]
            top = sum(w * math.prod(tops[k] for k in t) for t, w in weights.items())
            return (Fraction(top, common) * multiplier * multiplier,
                    "exact: Σ_T ω_T ∏_{k∈T} max_i ‖P̃_k e_i‖² (increasing in each attribute's column norm)")
        if not replace:
            return self._add_remove_with_divisors(weights, common, multiplier)
        norms = self.shift_norms(replace)
        grid = math.prod(n * n for n in self.workload.sizes)
        if grid <= MAX_PAIR_GRID:
            total = sum((norms[t] * weights[t] for t in norms), start=np.zeros([1] * len(self.factors), dtype=object))
            top, how = max(np.asarray(total).reshape(-1).tolist()), f"exact maximum over {grid} neighbour positions"
        else:
            top = sum(max(np.asarray(norms[t]).reshape(-1).tolist()) * weights[t] for t in norms)
            how = "sum over the blocks of each block's maximum (an upper bound)"
        return Fraction(top, common) * multiplier * multiplier, how

    def _add_remove_with_divisors(self, weights: dict, common: int, multiplier: int) -> tuple[Fraction, str]:
        """Add/remove with block divisors: the attributes outside ``rounded`` have equal column norms (their exact
        integer forms), so the maximum over cells is over the rounded attributes' levels, enumerated exactly up to
        :data:`MAX_PAIR_GRID`; beyond, Σ_T ω_T ∏_{k∈T} max_i ‖block factor e_i‖² (an upper bound)."""
        rounded = tuple(self.rounded)
        grid = math.prod(self.workload.sizes[k] for k in rounded)

        def column_norms(k, t):
            f = self.block_factor(k, t).astype(object)
            return np.einsum("ij,ij->j", f, f)

        if grid > MAX_PAIR_GRID:
            top = sum(w * math.prod(max(int(v) for v in column_norms(k, t)) for k in t) for t, w in weights.items())
            return Fraction(top, common) * multiplier * multiplier, "Σ_T ω_T ∏_{k∈T} max_i ‖P̃_k e_i‖² (an upper bound)"
        total = np.zeros([1] * len(rounded), dtype=object)
        for t, w in weights.items():
            term = np.full([1] * len(rounded), w, dtype=object)
            for k in t:
                norms = column_norms(k, t)
                if k in rounded:
                    shape = [1] * len(rounded)
                    shape[rounded.index(k)] = norms.size
                    term = term * norms.reshape(shape)
                else:
                    term = term * max(int(v) for v in norms)
            total = total + term
        top = max(np.asarray(total).reshape(-1).tolist())
        return (Fraction(top, common) * multiplier * multiplier,
                f"exact maximum over the {grid} levels of the rounded attributes (the others' columns have equal norms)")

    # ------------------------------------------------------------ data
    def marginals(self, answers: np.ndarray) -> dict[Subset, np.ndarray]:
        """x_T for every block T of D, from the integer answers (:func:`cell_marginals`)."""
        return cell_marginals(self.workload, answers)

    def measure(self, answers: np.ndarray, rng: np.random.Generator) -> dict[Subset, np.ndarray]:
        """ỹ_T = g_T (⊗_{k∈T} P̃_k) x_T + η_T in int64 for every block (no noise on the public ones)."""
        noise = self.noise(rng, answers.shape[0])
        out = {}
        for t, x in self.marginals(answers).items():
            bound = (int(np.abs(x).max(initial=0)) * math.prod(_row_bound(self.block_factor(k, t)) for k in t)
                     * self.gain(t))
            if bound >= INT_LIMIT:
                raise DataError("the exact (lattice) release: the counts are beyond the int64 measurement's range")
            y = x
            for i, k in enumerate(t):
                y = _apply_int(y, self.block_factor(k, t), 1 + i)
            out[t] = self.gain(t) * y + noise[t] if t in noise else y
        return out

    def noise(self, rng: np.random.Generator, size: int) -> dict[Subset, np.ndarray]:
        """η_T ~ N_ℤ(0, σ_T²) i.i.d. (int64), ``size`` tables per noisy block, in the order of D."""
        out = {}
        for t in block_family(self.workload):
            if t in self.variances:
                s2 = self.variances[t]
                shape = (size,) + tuple(self.factors[k].shape[0] for k in t)
                out[t] = sample_discrete_gaussian(rng, s2.numerator, s2.denominator, math.prod(shape)).reshape(shape)
        return out

    # ------------------------------------------------------------ post-processing
    def _map(self, t: int, k: int, block: Subset) -> np.ndarray:
        """B = W_{t,k} Õ⁺ for attribute k of term t in the slice of ``block``'s pattern (floats; Õ⁺ the
        pseudo-inverse, a left inverse of Õ = [1ᵀ; the block's factor], which has full column rank)."""
        d = self.divisor(block) if k in self.rounded else 1
        key = (t, k, d)
        if key not in self._maps:
            f = self.block_factor(k, block) if d != 1 else self.factors[k]
            f = np.ascontiguousarray(f, dtype=np.int64)
            w = np.ascontiguousarray(self.workload.factor(t, k), dtype=float)
            self._maps[key] = _decoder(w.tobytes(), w.shape[0], f.tobytes(), *f.shape)
        return self._maps[key]

    @cached_property
    def _maps(self) -> dict:
        return {}

    def estimate(self, blocks: dict[Subset, np.ndarray], size: int) -> np.ndarray:
        """W Õ⁻¹ ỹ (size, d) from the blocks (absent blocks are zero): per term, the S-table assembled from the
        blocks T ⊆ S, the maps B_{t,k} applied along its axes."""
        work, out = self.workload, []
        for t in range(len(work.terms)):
            s = work.support(t)
            table = np.zeros((size,) + tuple(self.factors[k].shape[0] + 1 for k in s))
            for block in subsets(s):
                if block in blocks:
                    index = (slice(None),) + tuple(slice(1, None) if k in block else 0 for k in s)
                    table[index] = blocks[block] / self.gain(block)
            plain = [i for i, k in enumerate(s) if k not in self.rounded]
            for i, k in enumerate(s):  # the rounded axes first, slice by slice of the other attributes' pattern
                if k not in self.rounded:
                    continue
                decoded = np.empty(table.shape[:1 + i] + (work.factor(t, k).shape[0],) + table.shape[2 + i:])
                for u in subsets(tuple(s[j] for j in plain)):
                    index = [slice(None)] * table.ndim
                    for j in plain:
                        index[1 + j] = slice(1, None) if s[j] in u else slice(0, 1)
                    block = tuple(sorted(set(u) | {k}))
                    decoded[tuple(index)] = apply_along(table[tuple(index)], self._map(t, k, block), 1 + i)
                table = decoded
            for i in plain:
                table = apply_along(table, self._map(t, s[i], ()), 1 + i)
            out.append(table.reshape(size, -1))
        return np.concatenate(out, axis=1)

    def cell_variances(self, variances: dict[Subset, float]) -> np.ndarray:
        """Σ_{T⊆S} v_T ⊗_{k∈S} (row sums of squares of B_{t,k}[:, 1:] if k ∈ T else B_{t,k}[:, 0]²) per answer."""
        work, out = self.workload, []
        for t in range(len(work.terms)):
            s = work.support(t)
            cell = np.zeros(work.rows(t))
            for block in subsets(s):
                if block not in variances:
                    continue
                term = np.ones(1)
                for k in s:
                    b = self._map(t, k, block)
                    term = np.multiply.outer(term, np.sum(b[:, 1:] ** 2, axis=1) if k in block else b[:, 0] ** 2).ravel()
                cell = cell + variances[block] / self.gain(block) ** 2 * term
            out.append(cell)
        return np.concatenate(out)

    def total_variance(self, variances: dict[Subset, float]) -> float:
        """Σ over the answers of :meth:`cell_variances`: Σ_t Σ_{T⊆S} v_T/g_T² ∏_{k∈S} (the sum of that attribute's
        vector), the sum of a Kronecker product of vectors being the product of their sums (no answer formed)."""
        work, total, sums = self.workload, 0.0, {}
        for t in range(len(work.terms)):
            s = work.support(t)
            for block in subsets(s):
                if block not in variances:
                    continue
                term = 1.0
                for k in s:
                    b = self._map(t, k, block)
                    key = (id(b), k in block)  # the maps are shared by content (:func:`_decoder`)
                    if key not in sums:
                        sums[key] = float(np.sum(b[:, 1:] ** 2) if k in block else np.sum(b[:, 0] ** 2))
                    term *= sums[key]
                total += variances[block] / self.gain(block) ** 2 * term
        return total

    def variates(self) -> int:
        """Discrete Gaussian variates one noise draw takes."""
        return sum(math.prod(self.factors[k].shape[0] for k in t) for t in self.variances)


def rounded_factors(factors: tuple[np.ndarray, ...], scales: tuple[int, ...]) -> tuple[tuple[np.ndarray, ...], tuple[float, ...], tuple[float, ...]]:
    """(P̃_k = round(c_k P_k) int64 or the exact integer form, r_k, ĉ_k = ⟨P̃_k, P_k⟩/‖P_k‖², the scale P̃_k has)."""
    out, norms, fitted = [], [], []
    for a, c in zip(factors, scales):
        p, r, exact = rotated_factor(a)
        q = exact if exact is not None else np.rint(c * p).astype(np.int64)
        out.append(q)
        norms.append(r)
        fitted.append(float(np.sum(q * p) / np.sum(p * p)) if p.size else 1.0)
    return tuple(out), tuple(norms), tuple(fitted)


def _lam(n: int) -> int:
    """λ of :func:`centring`: HᵀH = λ(I − J/n)."""
    return n if n & (n - 1) == 0 else n * n


def shape_variances(workload: KroneckerWorkload, fitted: tuple[float, ...], norms: tuple[float, ...],
                    public: tuple[Subset, ...], anova=None) -> dict[Subset, Fraction]:
    """w_T: block T's noise variance per unit of the continuous s² (module docstring): ∏_{k∈T} ĉ_k² ∏_{k∉T} r_k² over
    the attributes with a factor; with ``anova`` = (split, b) the plain attributes' part is (∏_{k∈U} λ_k)(∏_{k∈P∖U}
    n_k)/b_U, U the block's plain component, λ_k of :func:`centring` (n_k², as marginal_gaussian's lattice L_U², or
    n_k for a power of two)."""
    out = {}
    for t in block_family(workload):
        if t in public:
            continue
        owners = range(len(norms)) if anova is None else anova[0].ordered
        value = math.prod(fitted[k] ** 2 if k in t else norms[k] ** 2 for k in owners)
        if anova is not None:
            split, b = anova
            u = tuple(i for i, k in enumerate(split.plain) if k in t)
            value *= math.prod(_lam(split.algebra.sizes[i]) for i in u) * split.algebra.co_size(u) / b[u]
        out[t] = Fraction(value)
    return out


def lattice_shape(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], scales: tuple[int, ...],
                  public: tuple[Subset, ...], anova=None) -> tuple[tuple[np.ndarray, ...], dict[Subset, Fraction]]:
    """The integer factors of every attribute and the shape variances w_T: the continuous factors (all attributes,
    or the ordered ones with ``anova`` = (split, b)) rounded at ``scales``, the plain attributes' nI − J."""
    integer, norms, fitted = rounded_factors(factors, scales)
    if anova is None:
        return integer, shape_variances(workload, fitted, norms, public)
    split = anova[0]
    full, full_norms, full_fitted = [], [], []
    for k, n in enumerate(workload.sizes):
        if k in split.ordered:
            i = split.ordered.index(k)
            full.append(integer[i]), full_norms.append(norms[i]), full_fitted.append(fitted[i])
        else:
            full.append(centring(n)), full_norms.append(1.0), full_fitted.append(1.0)
    return tuple(full), shape_variances(workload, tuple(full_fitted), tuple(full_norms), public, anova)


def _singular(integer: tuple[np.ndarray, ...]) -> bool:
    """Whether some Õ_k = [1ᵀ; P̃_k] has a condition number above 10¹⁰."""
    return any(_condition(f.tobytes(), *f.shape) > 1e10
               for f in (np.ascontiguousarray(f, dtype=np.int64) for f in integer))


@lru_cache(maxsize=64)
def _condition(data: bytes, rows: int, cols: int) -> float:
    """The condition number of Õ = [1ᵀ; F] for the int64 factor F given by its bytes and shape (cached by content:
    the scale search's trials share most factors)."""
    f = np.frombuffer(data, dtype=np.int64).reshape(rows, cols)
    return float(np.linalg.cond(np.vstack([np.ones((1, cols)), f.astype(float)])))


def _unit_error(workload, integer, shape, public, replace, multiplier) -> float:
    """E‖Z‖² per unit of 1/μ² at the shape variances (continuous noise): μ²(w)·Σ cell variances(w); inf when an
    Õ_k is singular."""
    if _singular(integer):
        return math.inf
    lattice = KroneckerLattice(workload, integer, shape, public)
    mu2, _ = lattice.mu_squared(shape, replace, multiplier)
    return float(mu2) * float(lattice.cell_variances({t: float(w) for t, w in shape.items()}).sum())


REFINE = 16
"""Scales tried between the doubling search's best c and 2c (the rounding's error is not monotone in c)."""

ROOM = 0.99
"""The fraction of the range cap the scale search fills: room for the GDP slope's enlargement of σ² (about 2·10⁻⁴) and
the dyadic rounding (2⁻²⁰)."""


IDEAL_SCALE = 2**30
"""The scale at which the rounding is below 10⁻⁹ relative: the reference for the rounding's cost."""


def unrounded_error(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], replace: bool, multiplier: int,
                    unit: float, anova=None) -> float:
    """E‖Z‖² of the same blocks measured with the unrounded factors and continuous Gaussian noise at the target
    (``unit`` the continuous s² at unit sensitivity): the reference the rounding's cost is stated against."""
    public = ((),) if replace else ()
    integer, shape = lattice_shape(workload, factors, (IDEAL_SCALE,) * len(factors), public, anova)
    return _unit_error(workload, integer, shape, public, replace, multiplier) * unit


def _smallest_scale(a: np.ndarray) -> int:
    """The smallest power of two at which Õ_k = [1ᵀ; round(c P_k)] has a condition number below 10⁶ (at most 2^20)."""
    p, _, exact = rotated_factor(a)
    scale = 1
    while exact is None and scale < 2**20:
        if np.linalg.cond(np.vstack([np.ones((1, a.shape[1])), np.rint(scale * p)])) < 1e6:
            break
        scale *= 2
    return scale


def choose_scales(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], replace: bool, multiplier: int,
                  unit: float, cap: Fraction, anova=None) -> tuple[int, ...]:
    """Per-attribute scales c_k: from the smallest that keeps Õ_k well conditioned, double the one whose doubling
    gives the lowest error while
    the largest block variance τ²w_T (τ² = μ²(w)·``unit``, ``unit`` the continuous s² at unit sensitivity) stays
    below ``cap`` × :data:`ROOM`; keep the best scales seen (the rounding's error is not monotone in c), then try
    :data:`REFINE` integer scales between each c and 2c."""
    public = ((),) if replace else ()

    def evaluate(scales):
        """(E‖Z‖² per unit of 1/μ² as :func:`_unit_error`, its sum over the answers taken by
        :meth:`KroneckerLattice.total_variance`; the largest block variance)."""
        if any(rotated_factor(a)[2] is None and not np.any(np.rint(c * rotated_factor(a)[0]))
               for a, c in zip(factors, scales) if a.shape[0] > 1):
            return math.inf, 0.0
        integer, shape = lattice_shape(workload, factors, scales, public, anova)
        lattice = KroneckerLattice(workload, integer, shape, public)
        mu2, _ = lattice.mu_squared(shape, replace, multiplier)
        largest = float(mu2) * unit * float(max(shape.values(), default=0))
        if _singular(integer):
            return math.inf, largest
        return float(mu2) * lattice.total_variance({t: float(w) for t, w in shape.items()}), largest

    scales = [_smallest_scale(a) for a in factors]
    error, _ = evaluate(scales)
    best = (error, tuple(scales))
    while True:
        trials = []
        for k in range(len(scales)):
            if factors[k].shape[0] < 2 or rotated_factor(factors[k])[2] is not None:
                continue
            trial = scales[:k] + [2 * scales[k]] + scales[k + 1:]
            e, largest = evaluate(trial)
            if largest <= float(cap) * ROOM:
                trials.append((e, trial))
        if not trials:
            break
        error, scales = min(trials)
        if error < best[0]:
            best = (error, tuple(scales))
    for k in range(len(factors)):  # the rounding's error varies with c: try REFINE scales from c to 2c
        if factors[k].shape[0] < 2 or rotated_factor(factors[k])[2] is not None:
            continue
        base = best[1][k]
        for j in range(1, REFINE):
            trial = best[1][:k] + (base + base * j // REFINE,) + best[1][k + 1:]
            e, largest = evaluate(list(trial))
            if largest <= float(cap) * ROOM and e < best[0]:
                best = (e, trial)
    return best[1]


def lattice_check(lattice: KroneckerLattice, privacy: Privacy, replace: bool, multiplier: int) -> Check:
    """``privacy`` of the lattice measurement: μ² = max over neighbours of Σ_T ‖Δ_T‖²/v_T from the integer factors,
    v_T = :func:`~dpopt.mechanisms.lattice.effective_variance` of σ_T², checked against the target."""
    effective = {t: effective_variance(s2, privacy.definition) for t, s2 in lattice.variances.items()}
    if None in effective.values():
        return Check("privacy", "exact lattice measurement", False, GDP_RANGE_REFUSAL)
    mu2, how = lattice.mu_squared(effective, replace, multiplier)
    return lattice_privacy_check(mu2, privacy, "max over neighbours of Σ_T ‖(⊗_{k∈T} P̃_k)δ_T‖²/v_T from the integer "
                                 f"factors P̃_k ({how}" + (f", × {multiplier}²" if multiplier != 1 else "") + ")")


GDP_DESIGN_SIGMA2 = Fraction(2**20)
"""The largest lattice variance a μ-GDP or (ε, δ) design aims at, within the certified range
(:data:`~dpopt.privacy.discrete_gaussian_gdp.MAX_SIGMA2`, 2²⁸). Kept where it was when that range was 2²²: on
``specs/kronecker_age_ranges_sex_region_gdp.yaml`` the cap binds only the divisors of the largest blocks (the scale
stays 2816), and raising it to 2²², 2²⁴, 2²⁶, 2²⁸ (blocks divided by 8, 4, 2, 1 instead of 16) moves the rounding's
cost from −0.114% to +0.026%, +0.021%, −0.011%, +0.0015% and E‖Z‖² from 678.78 to 679.73, 679.70, 679.48, 679.57,
at the same CPU (solve 0.4–0.7 s): no gain on the examples."""


ZCDP_DESIGN_SIGMA2 = Fraction(2**42)
"""The largest lattice variance a ρ-zCDP design aims at (the sampler serves up to
:data:`~dpopt.mechanisms.lattice.MAX_WIDE_LATTICE_SIGMA2` beyond int64): 2¹² times the int64 round's 2³⁰. On
``specs/range_marginals_age_prefix_zcdp.yaml`` the finest age factor is 54 times finer (c = 262,144 against 4,864),
its largest blocks still divide it by 64 (an effective scale of 4,096 instead of 76), and the rounding costs 0.0053%
instead of 0.60%."""


def range_cap(definition: str) -> Fraction:
    """The largest lattice variance a design aims at: :data:`GDP_DESIGN_SIGMA2` under μ-GDP and (ε, δ) (within the
    slope's certified range), :data:`ZCDP_DESIGN_SIGMA2` under ρ-zCDP."""
    return min(GDP_DESIGN_SIGMA2, MAX_SIGMA2) if definition in GDP_TARGETS else ZCDP_DESIGN_SIGMA2


LIFT_SIGMA2 = 2**12
"""Under μ-GDP and (ε, δ), a block whose variance would be below this is measured on a finer lattice (gain g_T, a
power of two): the discrete Gaussian's certified slope costs about 1/(12σ²) of variance, 2·10⁻⁵ here."""


def lift(variance: Fraction, definition: str) -> int:
    """g_T: the smallest power of two with g_T²·``variance`` ≥ :data:`LIFT_SIGMA2` under μ-GDP and (ε, δ) (1 under
    ρ-zCDP, where the discrete Gaussian's variance is at most σ² and nothing is lost)."""
    gain = 1
    while definition in GDP_TARGETS and variance * gain * gain < LIFT_SIGMA2:
        gain *= 2
    return gain


def rounded_attributes(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], anova=None) -> tuple[int, ...]:
    """The attributes whose integer factor is a rounding (not an exact integer form)."""
    owners = range(len(workload.sizes)) if anova is None else anova[0].ordered
    return tuple(k for k, a in zip(owners, factors) if rotated_factor(a)[2] is None)


def divided_shape(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], scales: tuple[int, ...],
                  public: tuple[Subset, ...], anova, divisors: dict[Subset, int]):
    """(integer factors, shape variances w_T, the rounded attributes, d_T per noisy block) with block T's rounded
    factors divided by d_U (U = T's other attributes, ``divisors`` keyed by U): w_T carries the divided factors'
    fitted scales ⟨⌊(2P̃ + d)/(2d)⌋, P⟩/‖P‖² in place of P̃'s."""
    integer, shape = lattice_shape(workload, factors, scales, public, anova)
    rounded = rounded_attributes(workload, factors, anova)
    owners = list(range(len(workload.sizes)) if anova is None else anova[0].ordered)
    continuous = {k: rotated_factor(factors[owners.index(k)])[0] for k in rounded}
    probe = KroneckerLattice(workload, integer, shape, public, None, rounded, None)
    by_block, out = {}, {}
    for t, w in shape.items():
        d = divisors.get(probe.pattern(t), 1)
        by_block[t] = d
        ratio = 1.0
        for k in t:
            if k in rounded and d > 1:
                p, q = continuous[k], integer[k]
                ratio *= (np.sum(((2 * q + d) // (2 * d)) * p) / np.sum(q * p)) ** 2
        out[t] = w * Fraction(ratio)
    return integer, out, rounded, by_block


def choose_divisors(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], scales: tuple[int, ...],
                    replace: bool, multiplier: int, unit: float, cap: Fraction, anova=None) -> dict[Subset, int]:
    """d_U per pattern U (the attributes outside the rounded ones): the smallest power of two with which every block
    of that pattern has τ²w_T/d^{2|T∩rounded|} below ``cap`` × :data:`ROOM` at the undivided design's τ²."""
    public = ((),) if replace else ()
    integer, shape = lattice_shape(workload, factors, scales, public, anova)
    rounded = rounded_attributes(workload, factors, anova)
    probe = KroneckerLattice(workload, integer, shape, public, None, rounded, None)
    mu2, _ = probe.mu_squared(shape, replace, multiplier)
    out: dict[Subset, int] = {}
    for t, w in shape.items():
        k = sum(1 for a in t if a in rounded)
        d, variance = 1, float(mu2) * unit * float(w)
        while k and variance / d ** (2 * k) > float(cap) * ROOM and d < 2**20:
            d *= 2
        u = probe.pattern(t)
        out[u] = max(out.get(u, 1), d)
    return out


def calibrate(workload: KroneckerWorkload, factors: tuple[np.ndarray, ...], replace: bool, multiplier: int,
              privacy: Privacy, scales: tuple[int, ...], anova=None,
              divisors: dict[Subset, int] | None = None) -> KroneckerLattice | str:
    """The lattice at scale c (coarsened by ``divisors`` per pattern, :func:`choose_divisors`) with the smallest
    common τ² (σ_T² ≥ τ² w_T, dyadic) that the exact check accepts, or why there is none. τ² starts at
    μ²(w)·s₁², s₁ the continuous σ at unit sensitivity (μ² is linear in 1/τ² at v_T = τ²w_T, and v_T ≥ τ²w_T by
    :func:`~dpopt.mechanisms.lattice.target_lattice_variance`)."""
    public = ((),) if replace else ()
    integer, shape, rounded, by_block = divided_shape(workload, factors, scales, public, anova, divisors or {})
    divided = by_block if any(d > 1 for d in by_block.values()) else None

    def lattice_of(variances, gains=None):
        return KroneckerLattice(workload, integer, variances, public, gains, rounded, divided)

    base, _ = lattice_of(shape).mu_squared(shape, replace, multiplier)
    tau2 = base * Fraction(gaussian_sigma(Fraction(1), privacy)) ** 2
    gains = {t: lift(tau2 * w, privacy.definition) for t, w in shape.items()}
    step = Fraction(1, 10**9)
    cap = range_cap(privacy.definition)
    for _ in range(40):
        variances = {t: target_lattice_variance(tau2 * w * gains[t] ** 2, 1, privacy.definition, cap)
                     for t, w in shape.items()}
        if None in variances.values() or any(v > cap for v in variances.values()):
            return f"a lattice variance at scales {scales} is outside the certified range (above {cap})"
        lattice = lattice_of(variances, gains)
        if lattice_check(lattice, privacy, replace, multiplier).passed:
            return lattice
        tau2 *= 1 + step
        step *= 4
    return "no lattice variance the exact check accepts was found"
