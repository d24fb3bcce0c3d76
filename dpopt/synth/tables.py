r"""The published tables a synthesis fits, checked and laid out for record-level updates.

A table over the attributes :math:`S = (s_1, \dots, s_m)` (in domain order) is an array of shape
:math:`(n_{s_1}, \dots, n_{s_m})`. A record :math:`r` (level indices) falls in the flat cell
:math:`\sum_a r_{s_a}\,\mathrm{stride}_a` of it (row-major), so changing attribute :math:`k \in S` of a
record from :math:`v` to :math:`v'` moves it by :math:`(v' - v)\,\mathrm{stride}_k` cells: every
update of :mod:`dpopt.synth.search` and :mod:`dpopt.synth.repair` is index arithmetic on the tables,
never on the domain (whose :math:`\prod_k n_k` cells are never formed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dpopt.errors import SpecError

MAX_TABLE_CELLS = 50_000_000
"""The most cells one given table may have (it is held densely, as are its counts)."""


@dataclass(frozen=True)
class Table:
    """One published table, laid out for the records.

    Attributes
    ----------
    key : tuple of str
        Its attributes, in domain order (the key the caller gave).
    axes : tuple of int
        Their positions in the domain.
    given : numpy.ndarray of float, flat
        The published counts, as given.
    target : numpy.ndarray of float, flat
        ``given`` scaled to sum to the number of records drawn (equal to ``given`` when its total is that
        number, as for every table of a consistent release).
    shape : tuple of int
        Its levels per axis.
    strides : tuple of int
        Row-major strides of ``axes`` in the flat table.
    weight : float
        Its weight in the fit (the caller's confidence; 1 by default).
    """

    key: tuple[str, ...]
    axes: tuple[int, ...]
    given: np.ndarray
    target: np.ndarray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    weight: float

    def cells(self, records: np.ndarray) -> np.ndarray:
        """The flat cell of each record (int64, shape (len(records),))."""
        out = np.zeros(records.shape[0], dtype=np.int64)
        for axis, stride in zip(self.axes, self.strides):
            out += records[:, axis].astype(np.int64) * stride
        return out

    def counts(self, records: np.ndarray) -> np.ndarray:
        """The records' tabulation (int64, flat)."""
        return np.bincount(self.cells(records), minlength=self.target.size).astype(np.int64)


def layout(domain: Mapping[str, int], marginals: Mapping[tuple[str, ...], np.ndarray], n: int,
           weights: Mapping[tuple[str, ...], float] | None) -> tuple[tuple[int, ...], list[Table]]:
    """Check the caller's domain, tables, ``n`` and weights; lay the tables out (module docstring).

    Returns
    -------
    (sizes, tables) : (tuple of int, list of Table)

    Raises
    ------
    SpecError
        One line naming the offending argument: an attribute with fewer than one level, a key not in
        domain order or naming an unknown attribute, a table of the wrong shape, a negative or non-finite
        count, a negative ``n``, a weight that is not positive and finite, or a weight for no table.
    """
    names = list(domain)
    sizes = []
    for name in names:
        levels = domain[name]
        if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or levels < 1:
            raise SpecError(f"domain[{name!r}]", f"the number of levels must be a positive integer (got {levels!r})")
        sizes.append(int(levels))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise SpecError("n", f"the number of records must be a non-negative integer (got {n!r})")
    weights = dict(weights or {})
    unknown = [k for k in weights if tuple(k) not in {tuple(m) for m in marginals}]
    if unknown:
        raise SpecError("weights", f"a weight for {unknown[0]!r}, which is not a given table")
    position = {name: i for i, name in enumerate(names)}
    tables = []
    for key, table in marginals.items():
        key = tuple(key)
        where = f"marginals[{key!r}]"
        if not key or any(k not in position for k in key):
            raise SpecError(where, f"a table's key must name attributes of the domain ({', '.join(names)})")
        axes = tuple(position[k] for k in key)
        if list(axes) != sorted(set(axes)):
            raise SpecError(where, "the key's attributes must be distinct and in domain order")
        shape = tuple(sizes[a] for a in axes)
        if math.prod(shape) > MAX_TABLE_CELLS:
            raise SpecError(where, f"{math.prod(shape):,} cells, above the {MAX_TABLE_CELLS:,} a table may have")
        values = np.asarray(table)
        if values.dtype.kind not in "iuf" or values.shape != shape:
            raise SpecError(where, f"expected a numeric array of shape {shape} (got {values.dtype} {values.shape})")
        values = values.astype(float).reshape(-1)
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise SpecError(where, "counts must be finite and non-negative")
        weight = float(weights.get(key, 1.0))
        if not (np.isfinite(weight) and weight > 0):
            raise SpecError(f"weights[{key!r}]", f"a weight must be positive and finite (got {weight!r})")
        total = values.sum()
        target = values * (n / total) if total > 0 and total != n else values.copy()
        if total == 0 and n > 0:
            target = np.full(values.size, n / values.size)
        strides = tuple(int(math.prod(shape[i + 1:])) for i in range(len(shape)))
        tables.append(Table(key, axes, values, target, shape, strides, weight))
    return tuple(sizes), tables


def residuals(tables: list[Table], records: np.ndarray) -> dict[tuple[str, ...], int | float]:
    """L1 distance between the records' tabulation and each given table (0 where they agree exactly);
    a whole number when the given table is whole."""
    out = {}
    for table in tables:
        gap = float(np.abs(table.counts(records) - table.given).sum())
        out[table.key] = int(round(gap)) if np.array_equal(table.given, np.round(table.given)) else gap
    return out


def tabulations(domain: Mapping[str, int], keys: list[tuple[str, ...]], records: np.ndarray
                ) -> dict[tuple[str, ...], np.ndarray]:
    r"""The records' own table over each key (int64, axes in the key's order): :math:`M_S[c] = \#\{r : r_S = c\}`.

    Published in place of a release's tables, they are **consistent** (every table over :math:`S \supseteq T`
    sums to the same table over :math:`T`: both count the same records), **non-negative** and **whole** by
    construction, and the records match every one of them exactly. When the records are a fit of the noisy
    measurements (:func:`dpopt.synth.synthesize_records` with ``targets``), these are the marginals of that one
    fitted model, rounded by the records themselves: a controlled rounding that keeps every shared margin equal,
    which rounding each table on its own does not.

    Parameters
    ----------
    domain : mapping
        Attribute → number of levels, in column order.
    keys : list of tuple of str
        The tables to tabulate (attributes in domain order).
    records : numpy.ndarray of int, shape (n, d)
        Level indices, one column per attribute of ``domain``.
    """
    names = list(domain)
    out = {}
    for key in keys:
        shape = tuple(int(domain[a]) for a in key)
        cells = np.ravel_multi_index([records[:, names.index(a)].astype(np.int64) for a in key], shape)
        out[tuple(key)] = np.bincount(cells, minlength=math.prod(shape)).astype(np.int64).reshape(shape)
    return out
