r"""Workloads that are unions of Kronecker products of per-attribute matrices, kept implicit.

A table over attributes with :math:`n_1\times\dots\times n_p` levels is a vector of
:math:`\mathbb{R}^N`, :math:`N=\prod_k n_k`. A *term* is
:math:`W_t = \bigotimes_k W_{t,k}` with a small matrix :math:`W_{t,k}` per attribute
(:math:`\mathbf 1^\top` where the term sums the attribute out); the workload stacks its terms,
:math:`W = [W_1; \dots; W_m]` (the ``kind: kronecker`` query of
:mod:`dpopt.spec.models_workload`). Everything a design needs comes from the factors:

* :math:`W^\top W = \sum_t \bigotimes_k G_{t,k}`, :math:`G_{t,k} = W_{t,k}^\top W_{t,k}`
  (:math:`n_k\times n_k`);
* a term's answer on the data is its factors applied, axis by axis, to the marginal table of
  the data over the term's *support* :math:`S_t` (the attributes it does not sum out):
  :math:`W_t x = (\bigotimes_{k\in S_t} W_{t,k})\, M_{S_t} x`, so only the :math:`S_t`-marginals
  are ever counted (:meth:`KroneckerWorkload.apply`);
* column norms of a term are products of the factors' column norms:
  :math:`\|W_t e_j\|_q^q = \prod_k \|W_{t,k} e_{j_k}\|_q^q` (:mod:`dpopt.sensitivity.kronecker_space`).

Nothing of size N is formed; :meth:`KroneckerWorkload.dense` (memory-guarded) is for small
domains and tests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
import numpy as np

from dpopt.core.memory import LABEL_BYTES, dense_bytes, require_memory
from dpopt.errors import SpecError, UnsupportedSpecError
from dpopt.spec.models import NumericAttribute, Spec
from dpopt.spec.models_workload import KroneckerQuery as KroneckerSpec
from dpopt.spec.models_workload import MatrixFactor, RangesFactor

TERM_ENTRY_BYTES = 64
"""Bytes one ``attribute: factor`` entry of an expanded term takes at least (a dict slot, its key and value
pointers and the dict's share of its header)."""


def range_rows(n: int, width: int | None) -> list[tuple[int, int]]:
    """The ranges [i, j] (0 ≤ i ≤ j < n, j − i < width), ordered by start then end."""
    w = n if width is None else width
    return [(i, j) for i in range(n) for j in range(i, min(n, i + w))]


def factor_rows(factor, n: int) -> int:
    r"""The rows of :func:`factor_matrix`'s matrix over n levels, counted without building it: n for
    ``identity`` and ``prefix``, 1 for ``total``, every range of width ≤ w, :math:`\sum_i \min(w, n - i)`
    (n(n + 1)/2 for all of them), for ``ranges``, and a user's matrix its own rows."""
    if factor in ("identity", "prefix"):
        return n
    if factor == "total":
        return 1
    if factor == "ranges" or isinstance(factor, RangesFactor):
        w = n if factor == "ranges" else min(factor.ranges, n)
        return w * n - w * (w - 1) // 2
    return len(factor.matrix)


def _require_terms(terms: Sequence[Mapping], attrs: Mapping) -> None:
    """Refuse, before any is built, factor matrices or answer labels of ``terms`` above the memory limit."""
    matrices = labels = 0
    for term in terms:
        rows = [(factor_rows(factor, len(attrs[a])), len(attrs[a])) for a, factor in term.items()
                if factor != "total" and a in attrs and not isinstance(attrs[a], NumericAttribute)]
        matrices += sum(dense_bytes(2, r, n) for r, n in rows)  # the matrix and numpy's working copy
        labels += math.prod(r for r, _ in rows)
    require_memory(matrices, f"the dense factor matrices of the {len(terms)} kronecker term(s)")
    require_memory(labels * LABEL_BYTES, f"the {labels} output labels of the kronecker query")


def factor_matrix(factor, n: int, field_name: str) -> tuple[np.ndarray, list[str], str]:
    """The matrix of a spec factor over n levels, its row labels (as templates with ``{}`` for the
    level names, filled by the caller) and its name.

    Raises
    ------
    SpecError
        A user's matrix whose columns do not match the levels.
    """
    if factor == "identity":
        return np.eye(n), [f"={i}" for i in range(n)], "identity"
    if factor == "total":
        return np.ones((1, n)), [""], "total"
    if factor == "prefix":
        return np.tril(np.ones((n, n))), [f"<={i}" for i in range(n)], "prefix"
    if factor == "ranges" or isinstance(factor, RangesFactor):
        width = None if factor == "ranges" else factor.ranges
        rows = range_rows(n, width)
        out = np.zeros((len(rows), n))
        for r, (i, j) in enumerate(rows):
            out[r, i: j + 1] = 1.0
        return out, [f" in [{i},{j}]" for i, j in rows], "ranges" if width is None else f"ranges<={width}"
    assert isinstance(factor, MatrixFactor)
    matrix = np.asarray(factor.matrix, dtype=float)
    if matrix.shape[1] != n:
        raise SpecError(field_name, f"has {matrix.shape[1]} columns but the attribute has {n} levels")
    return matrix, [f" row {r}" for r in range(matrix.shape[0])], "matrix"


def apply_along(table: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """The table with ``matrix`` applied along ``axis`` (that axis's length becomes its row count),
    as one batched product over the axes before it (no transposed copies)."""
    shape = table.shape
    if axis == table.ndim - 1:
        return table @ matrix.T
    stacked = np.ascontiguousarray(table).reshape(math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]))
    return np.matmul(matrix, stacked).reshape(shape[:axis] + (matrix.shape[0],) + shape[axis + 1:])


@dataclass(frozen=True)
class KroneckerWorkload:
    """A stack of Kronecker products of per-attribute matrices (module docstring).

    Parameters
    ----------
    sizes : tuple of int
        Levels of each attribute (axis k).
    terms : tuple of tuple of numpy.ndarray or None
        Per term, per attribute: its factor, or None where the term sums the attribute out.
    names : tuple of tuple of str
        Per term, per attribute: the factor's name (``identity``, ``prefix``, ``ranges``,
        ``ranges<=w``, ``matrix``, ``total``), for the certificate.
    """

    sizes: tuple[int, ...]
    terms: tuple[tuple[np.ndarray | None, ...], ...] = field(repr=False)
    names: tuple[tuple[str, ...], ...]

    @property
    def cells(self) -> int:
        """N, the number of cells of the domain (an exact integer)."""
        return math.prod(self.sizes)

    def support(self, t: int) -> tuple[int, ...]:
        """S_t, the attributes term t does not sum out (increasing)."""
        return tuple(k for k, f in enumerate(self.terms[t]) if f is not None)

    def factor(self, t: int, k: int) -> np.ndarray:
        """W_{t,k} (the row of ones where the term sums attribute k out)."""
        f = self.terms[t][k]
        return np.ones((1, self.sizes[k])) if f is None else f

    def gram(self, t: int, k: int) -> np.ndarray:
        """G_{t,k} = W_{t,k}ᵀ W_{t,k}."""
        f = self.factor(t, k)
        return f.T @ f

    def rows(self, t: int) -> int:
        """The number of answers of term t."""
        return math.prod(self.factor(t, k).shape[0] for k in self.support(t))

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        return tuple(itertools.accumulate((self.rows(t) for t in range(len(self.terms))), initial=0))

    @property
    def dimension(self) -> int:
        """d, the number of released answers."""
        return self.offsets[-1]

    def apply(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        """The released vectors from each term's S_t-marginal tables.

        ``tables[t]`` has shape (..., sizes of S_t) (leading batch axes); the factors of the
        term are applied along its axes and the results flattened row-major and stacked.
        """
        out = []
        for t, table in enumerate(tables):
            s = self.support(t)
            lead = table.ndim - len(s)
            for i, k in enumerate(s):
                table = apply_along(table, self.terms[t][k], lead + i)
            out.append(table.reshape(table.shape[:lead] + (-1,)))
        return np.concatenate(out, axis=-1)

    def term_dense(self, t: int) -> np.ndarray:
        """W_t as a dense (rows × N) array (small domains)."""
        out = np.ones((1, 1))
        for k in range(len(self.sizes)):
            out = np.kron(out, self.factor(t, k))
        return out

    def dense(self) -> np.ndarray:
        """W as a dense (d × N) array.

        Raises
        ------
        MemoryLimitError
            When it exceeds the memory limit.
        """
        require_memory(dense_bytes(self.dimension, self.cells),
                       f"the dense {self.dimension} x {self.cells} matrix of the kronecker query")
        return np.vstack([self.term_dense(t) for t in range(len(self.terms))])


def compile_terms(spec: Spec) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...],
                                       tuple[str, ...], KroneckerWorkload]:
    """Compile a ``kind: kronecker`` query: its attributes (those some term does not sum out, in
    the order of ``data.attributes``), their levels, the terms' supports (groups), the labels
    of the answers and the workload (:class:`dpopt.domain.queries.KroneckerQuery` holds them).

    Raises
    ------
    SpecError
        An unknown or numeric attribute, a matrix whose columns do not match the levels, an
        attribute named twice in a group, a query that sums every attribute out.
    UnsupportedSpecError
        Invariants or a privacy unit (not served for this query kind yet).
    """
    query: KroneckerSpec = spec.query  # type: ignore[assignment]
    attrs = spec.data.attributes
    if spec.invariants:
        raise UnsupportedSpecError("invariants", "a kronecker query with invariants is not supported yet")
    if spec.data.privacy_unit is not None:
        raise UnsupportedSpecError("data.privacy_unit", "a kronecker query with a privacy_unit is not supported yet")
    terms = _expanded(query, spec)
    _require_terms(terms, attrs)
    for i, term in enumerate(terms):
        for name in term:
            if name not in attrs:
                raise SpecError(f"query.terms[{i}]", f"unknown attribute '{name}' (known: {', '.join(attrs)})")
            if isinstance(attrs[name], NumericAttribute):
                raise SpecError(f"query.terms[{i}]", f"attribute '{name}' is numeric; this needs a categorical one")
    used = tuple(a for a in attrs if any(a in term and term[a] != "total" for term in terms))
    if not used:
        raise SpecError("query.terms", "every term sums every attribute out: use a count query")
    levels = tuple(tuple(attrs[a]) for a in used)  # type: ignore[arg-type]
    factors, names, groups, labels = [], [], [], []
    for i, term in enumerate(terms):
        row: list[np.ndarray | None] = []
        row_names, parts = [], []
        for a, lv in zip(used, levels):
            factor = term.get(a, "total")
            matrix, row_labels, name = factor_matrix(factor, len(lv), f"query.terms[{i}].{a}")
            row.append(None if factor == "total" else matrix)
            row_names.append(name)
            if factor != "total":
                parts.append([a + _fill(text, lv) for text in row_labels])
        factors.append(tuple(row))
        names.append(tuple(row_names))
        groups.append(tuple(a for a, f in zip(used, row) if f is not None))
        labels.extend(",".join(cell) for cell in itertools.product(*parts))
    kron = KroneckerWorkload(tuple(len(lv) for lv in levels), tuple(factors), tuple(names))
    return used, levels, tuple(groups), tuple(labels), kron


def _expanded(query: KroneckerSpec, spec: Spec) -> list[Mapping]:
    """The terms, the ``all_of_size`` sugar expanded (groups in :func:`itertools.combinations` order
    over ``over``, default every categorical attribute not in ``crossed_with``)."""
    if query.terms is not None:
        return [dict(t) for t in query.terms]
    crossed = dict(query.crossed_with or {})
    attrs = spec.data.attributes
    over = query.over if query.over is not None else [
        a for a, lv in attrs.items() if not isinstance(lv, NumericAttribute) and a not in crossed]
    if len(set(over)) != len(over) or set(over) & set(crossed):
        raise SpecError("query.over", "lists an attribute twice or one of crossed_with")
    if query.all_of_size > len(over):
        raise SpecError("query.all_of_size", f"is {query.all_of_size}, but there are only {len(over)} attribute(s)")
    count = math.comb(len(over), query.all_of_size)
    require_memory(dense_bytes(count, query.all_of_size + len(crossed), itemsize=TERM_ENTRY_BYTES),
                   f"the {count} terms of all_of_size: {query.all_of_size} over {len(over)} attributes")
    return [crossed | {a: "identity" for a in group} for group in itertools.combinations(over, query.all_of_size)]


def _fill(text: str, levels: Sequence[str]) -> str:
    """A row label with level indices replaced by level names (``=3`` → ``=30-34``)."""
    if text.startswith("="):
        return "=" + str(levels[int(text[1:])])
    if text.startswith("<="):
        return "<=" + str(levels[int(text[2:])])
    if text.startswith(" in ["):
        i, j = text[5:-1].split(",")
        return f" in [{levels[int(i)]}, {levels[int(j)]}]"
    return text
