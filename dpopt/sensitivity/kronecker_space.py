r"""The sensitivity space of a union of Kronecker products (``kind: kronecker``), from its factors.

Write :math:`W_t = \bigotimes_k W_{t,k}` (:mod:`dpopt.domain.kronecker`). Call an attribute
*plain* when every term's factor on it is the identity or the row of ones, and let V be the
other attributes (prefix, ranges, a user's matrix). For a cell :math:`j` the column of a term
is :math:`a_t(j_V) \otimes u_t(j)` with :math:`a_t(j_V) = \bigotimes_{k\in V} W_{t,k}e_{j_k}`
and :math:`u_t(j)` a unit vector (one 1), so every norm of a term's column is that of
:math:`a_t(j_V)`:

* **add/remove** (:math:`\pm We_j`): :math:`\|We_j\|_q^q = \sum_t \|a_t(j_V)\|_q^q` (q = 1, 2),
  :math:`\|We_j\|_\infty = \max_t \|a_t(j_V)\|_\infty`, maximised over the cells of V only
  (each term's column norm is a product of its factors' column norms);
* **replace-one** (:math:`W(e_i - e_j)`): in a term with an identity factor on a plain attribute
  where i and j disagree, the two columns have disjoint supports, so its part has norms
  :math:`\|a_t(i_V)\|+\|a_t(j_V)\|` (l1; squares for l2², max for l∞); otherwise
  :math:`u_t(i)=u_t(j)` and it is :math:`a_t(i_V)-a_t(j_V)`. With entrywise non-negative factors
  on V (prefix, ranges, a non-negative matrix) splitting never lowers a term's norm
  (:math:`\|a-b\|_1\le\|a\|_1+\|b\|_1`, :math:`\|a-b\|_2^2 = \|a\|^2+\|b\|^2-2\langle a,b\rangle`
  with :math:`\langle a,b\rangle\ge 0`, :math:`|a_r-b_r|\le\max(a_r,b_r)`), so the maximum has
  i and j disagreeing on every plain attribute of ≥ 2 levels and is taken over the pairs of
  V-cells; with a negative entry every disagreement pattern of the plain attributes is tried;
* **Hamming k**: sums of k replacements, the hull scaled by k (min(k, n) with a public n).

The maxima are found in floating point over the V-cells (pairs of them), then recomputed
exactly (:func:`~dpopt.sensitivity.space.exact_norms`, rationals from the binary floats) on
every candidate within 10⁻⁹ of the float maximum. They are checked against brute-force
enumeration on small domains (``tests/test_kronecker_workloads.py``).

The span is range(W) (add/remove) or W·{sum-zero vectors} (replace-one). On small domains it is
computed densely; beyond, its rank comes from the factors' row spaces when, on each attribute,
their projectors commute: a common orthogonal decomposition of :math:`\mathbb{R}^{n_k}` into
pieces, and row(W) is the sum of the piece tuples every factor of some term contains.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpopt.core.memory import dense_bytes
from dpopt.domain.kronecker import KroneckerWorkload
from dpopt.domain.queries import KroneckerQuery
from dpopt.errors import MemoryLimitError, UnsupportedSpecError
from dpopt.sensitivity.space import SensitivitySpace, exact_norms
from dpopt.sensitivity.subspace import Subspace, span_of
from dpopt.spec.models import Spec

MAX_PAIR_ENTRIES = 50_000_000
"""Largest (V-cells)² × (rows of the V-parts) the replace-one search evaluates (V-cells for add/remove)."""

MAX_CANDIDATES = 64
"""Most cells (pairs) per norm whose exact norm is computed among those tied in floating point."""

MAX_PATTERNS = 4096
"""Most disagreement patterns of the plain attributes tried when a factor on V has a negative entry."""

DENSE_SPAN_ENTRIES = 4_000_000
"""Up to this many entries of W (d × N), the span is computed densely (:func:`~dpopt.sensitivity.subspace.span_of`)."""


def plain_attributes(kron: KroneckerWorkload) -> tuple[int, ...]:
    """The attributes on which every term's factor is the identity or sums the attribute out."""
    return tuple(k for k, n in enumerate(kron.sizes)
                 if all(term[k] is None or (term[k].shape == (n, n) and np.array_equal(term[k], np.eye(n)))
                        for term in kron.terms))


def v_part(kron: KroneckerWorkload, t: int, varying: tuple[int, ...]) -> np.ndarray:
    """⊗_{k∈V} W_{t,k} (rows × V-cells): the columns a_t(j_V)."""
    out = np.ones((1, 1))
    for k in varying:
        out = np.kron(out, kron.factor(t, k))
    return out


def _float_norms(blocks: list[np.ndarray]) -> np.ndarray:
    """(3, columns): l1, l2², l∞ of the stacked columns of ``blocks`` (each rows × columns)."""
    l1 = sum(np.abs(b).sum(axis=0) for b in blocks)
    l2 = sum((b * b).sum(axis=0) for b in blocks)
    linf = np.max([np.abs(b).max(axis=0) for b in blocks], axis=0)
    return np.vstack([l1, l2, linf])


def _candidates(norms: np.ndarray) -> np.ndarray:
    """Indices within 10⁻⁹ (relative) of the float maximum of any of the three norms (at most
    :data:`MAX_CANDIDATES` per norm, the largest first)."""
    keep: set[int] = set()
    for row in norms:
        top = np.flatnonzero(row >= row.max(initial=0.0) * (1 - 1e-9))
        keep.update(top[np.argsort(-row[top], kind="stable")[:MAX_CANDIDATES]].tolist())
    return np.array(sorted(keep), dtype=np.int64)


def column(kron: KroneckerWorkload, cell: tuple[int, ...]) -> np.ndarray:
    """W e_j for the cell j with these level indices: each term's Kronecker product of factor columns."""
    out = []
    for t in range(len(kron.terms)):
        col = np.ones(1)
        for k in kron.support(t):
            col = np.kron(col, kron.terms[t][k][:, cell[k]])
        out.append(col)
    return np.concatenate(out)


def _cell(kron: KroneckerWorkload, varying: tuple[int, ...], v_index: int, plain_levels: dict[int, int]) -> tuple[int, ...]:
    """The full cell whose V-attributes have the row-major index ``v_index`` and whose plain
    attributes have ``plain_levels`` (0 where not given)."""
    levels = np.unravel_index(v_index, [kron.sizes[k] for k in varying]) if varying else ()
    at = dict(zip(varying, (int(x) for x in levels)))
    return tuple(at.get(k, plain_levels.get(k, 0)) for k in range(len(kron.sizes)))


def add_remove_norms(kron: KroneckerWorkload) -> tuple[tuple[Fraction, Fraction, Fraction], Callable[[], np.ndarray]]:
    """Exact (l1, l2², l∞) over the columns W e_j (computed on their nonzero entries), and a function
    listing the columns attaining them (rows).

    Raises
    ------
    UnsupportedSpecError
        Too many cells on the non-plain attributes to search.
    """
    varying = tuple(k for k in range(len(kron.sizes)) if k not in plain_attributes(kron))
    parts = [v_part(kron, t, varying) for t in range(len(kron.terms))]
    if sum(p.size for p in parts) > MAX_PAIR_ENTRIES:
        raise UnsupportedSpecError("query", f"the columns of the factors on {len(varying)} ordered/custom "
                                            "attributes are too many to search for the sensitivity")
    rows = _candidates(_float_norms(parts))
    compact = np.hstack([p[:, rows].T for p in parts])  # the columns' nonzero entries, by term
    return exact_norms(compact), lambda: np.vstack([column(kron, _cell(kron, varying, int(r), {})) for r in rows])


def _patterns(kron: KroneckerWorkload, plain: tuple[int, ...], negative: bool) -> dict[tuple[bool, ...], set[int]]:
    """Which terms have disjoint column supports (split) → one disagreement pattern D of the plain
    attributes giving it (only D = every moving plain attribute when every factor on V is
    non-negative; see the module docstring)."""
    moving = [k for k in plain if kron.sizes[k] >= 2]
    identity = [{k for k in plain if term[k] is not None} for term in kron.terms]
    if not negative:
        candidates = [set(moving)]
    elif 2 ** len(moving) > MAX_PATTERNS:
        raise UnsupportedSpecError("query", f"a factor with a negative entry under replace-one: "
                                            f"2^{len(moving)} disagreement patterns are too many to try")
    else:
        candidates = [set(d) for r in range(len(moving) + 1) for d in itertools.combinations(moving, r)]
    out: dict[tuple[bool, ...], set[int]] = {}
    for d in candidates:
        out.setdefault(tuple(bool(ident & d) for ident in identity), d)
    return out


def replace_norms(kron: KroneckerWorkload) -> tuple[tuple[Fraction, Fraction, Fraction], Callable[[], np.ndarray]]:
    """Exact (l1, l2², l∞) over the differences W(e_i − e_j), i ≠ j (computed on their nonzero entries:
    the split terms' two columns, the others' difference), and a function listing the differences
    attaining them (rows).

    Raises
    ------
    UnsupportedSpecError
        Too many pairs of cells on the non-plain attributes, or patterns, to search.
    """
    plain = plain_attributes(kron)
    varying = tuple(k for k in range(len(kron.sizes)) if k not in plain)
    parts = [v_part(kron, t, varying) for t in range(len(kron.terms))]
    cells = parts[0].shape[1]
    if cells * cells * sum(p.shape[0] for p in parts) > MAX_PAIR_ENTRIES:
        raise UnsupportedSpecError("query", f"{cells} cells on the ordered/custom attributes: their pairs are too "
                                            "many to search for the replace-one sensitivity")
    negative = any(np.any(p < 0) for p in parts)
    i, j = (a.ravel() for a in np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij"))
    compact, pairs = [], []
    for split, disagree in _patterns(kron, plain, negative).items():
        blocks = []
        for part, s in zip(parts, split):
            blocks += [part[:, i], part[:, j]] if s else [part[:, i] - part[:, j]]
        norms = np.where((i != j) | bool(disagree), _float_norms(blocks), -1.0)
        rows = _candidates(norms)
        compact.append(np.hstack([b[:, rows].T for b in blocks]))  # the differences' nonzero entries, by term
        pairs += [(int(i[r]), int(j[r]), {k: 1 for k in disagree}) for r in rows]
    width = max(c.shape[1] for c in compact)
    exact = exact_norms(np.vstack([np.pad(c, ((0, 0), (0, width - c.shape[1]))) for c in compact]))
    return exact, lambda: np.vstack([column(kron, _cell(kron, varying, a, {})) - column(kron, _cell(kron, varying, b, o))
                                     for a, b, o in pairs])


def _key(matrix: np.ndarray) -> bytes:
    """A hashable key of a matrix: its shape and its bytes."""
    return repr(matrix.shape).encode() + matrix.tobytes()


def structural_rank(kron: KroneckerWorkload, replace: bool) -> int:
    """dim range(W) (replace-one: dim W·{sum-zero}) from the factors' row spaces (module docstring).

    Raises
    ------
    UnsupportedSpecError
        Factors on one attribute whose row-space projectors do not commute, or too many piece tuples.
    """
    pieces = []  # per attribute: list of (dimension, {factor keys containing it}, contains 1)
    for k, n in enumerate(kron.sizes):
        projectors = {}
        for t in range(len(kron.terms)):
            f = kron.factor(t, k)
            _, s, vt = np.linalg.svd(f)
            r = int(np.sum(s > 1e-10 * max(s.max(initial=0.0), 1e-300)))
            projectors.setdefault(_key(f), vt[:r].T @ vt[:r])
        ps = list(projectors.values())
        if any(np.abs(p @ q - q @ p).max() > 1e-9 for p in ps for q in ps):
            raise UnsupportedSpecError("query", f"the factors on attribute {k} have row spaces that do not commute: "
                                                "the rank of the workload is not derived structurally at this size")
        mix = sum(np.random.default_rng(k).uniform(1, 2) ** i * p for i, p in enumerate(ps))
        _, vectors = np.linalg.eigh(mix)
        groups: dict[tuple[bool, ...], list[int]] = {}
        for c in range(n):
            v = vectors[:, c]
            groups.setdefault(tuple(bool(v @ p @ v > 0.5) for p in ps), []).append(c)
        ones = np.ones(n) / math.sqrt(n)
        pieces.append([(len(cols), {key for key, m in zip(projectors, member) if m},
                        float(np.sum((vectors[:, cols].T @ ones) ** 2)) > 0.5)
                       for member, cols in groups.items()])
    if math.prod(len(p) for p in pieces) > 1_000_000:
        raise UnsupportedSpecError("query", "too many piece tuples to count the rank of the workload")
    keys = [[_key(kron.factor(t, k)) for k in range(len(kron.sizes))]
            for t in range(len(kron.terms))]
    rank, ones_covered = 0, False
    for combo in itertools.product(*pieces):
        if any(all(key[k] in combo[k][1] for k in range(len(combo))) for key in keys):
            rank += math.prod(c[0] for c in combo)
            ones_covered |= all(c[2] for c in combo)
    return rank - int(replace and ones_covered)


class KroneckerSpan(Subspace):
    """The span of a kronecker workload's sensitivity space at sizes where it is not formed: its rank
    is structural (:func:`structural_rank`); projecting onto it would need the N-cell domain."""

    name = "kronecker"

    def __init__(self, ambient: int, rank: int):
        self.ambient, self.rank = ambient, rank

    def _refuse(self):
        raise MemoryLimitError("query", f"the span of this kronecker workload ({self.ambient} answers) is not "
                                        "formed at this domain size; the kronecker_gaussian family does not need it")

    def project(self, x: np.ndarray) -> np.ndarray:
        self._refuse()

    def basis(self) -> np.ndarray:
        self._refuse()

    def projector_diagonal(self) -> np.ndarray:
        self._refuse()


def derive_kronecker(spec: Spec, query: KroneckerQuery, describe: str, factor: int) -> SensitivitySpace:
    """The sensitivity space of a ``kronecker`` query under the spec's adjacency (module docstring).

    ``describe`` is the adjacency in words, ``factor`` the Hamming factor (1 for add/remove and
    replace-one).
    """
    kron = query.kron
    replace = spec.adjacency.kind != "add_remove"
    (l1, l2sq, linf), extremes = replace_norms(kron) if replace else add_remove_norms(kron)
    if factor > 1:
        l1, l2sq, linf = l1 * factor, l2sq * factor * factor, linf * factor
    d, n = kron.dimension, kron.cells
    small = d * n <= DENSE_SPAN_ENTRIES and n <= 5000

    span = span_of(kron.dense(), differences=replace) if small else KroneckerSpan(d, structural_rank(kron, replace))
    listed = small and dense_bytes(n * (n if replace else 2), d) <= 2 ** 28

    def vectors() -> np.ndarray:
        if not listed:
            raise ValueError("too many difference vectors to list")
        cols = kron.dense().T
        if not replace:
            return np.unique(np.vstack([cols, -cols]), axis=0)
        a, b = np.nonzero(~np.eye(n, dtype=bool))
        return factor * np.unique(cols[a] - cols[b], axis=0)

    how = ("±W e_j: column norms of each term are products of its factors' column norms, maximised over the "
           "cells of the ordered/custom attributes" if not replace else
           "W(e_i − e_j): disjoint term supports where a plain identity attribute disagrees, else differences "
           "of the ordered/custom parts, maximised over their pairs of cells")
    if factor > 1:
        how += f"; hull scaled by {factor} replacements"
    return SensitivitySpace(d, span, l1, l2sq, linf, f"structural (Kronecker factors): {how}", describe,
                            complete=listed and factor == 1, _vectors=vectors, _extremes=lambda: factor * extremes(),
                            listable=listed)
