"""Brute-force sensitivity: enumerate small datasets and their neighbours.

The second route to every closed form in :mod:`dpopt.sensitivity.derive`. Datasets are
multisets of records over the attributes the query reads (numeric attributes on a grid
that contains their bounds); the query is evaluated record by record; every pair of
neighbouring datasets contributes φ(X) − φ(X').
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from math import comb

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.sensitivity.plain import describe_adjacency
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import NumericAttribute, Spec


def record_domain(spec: Spec, query: CountingQuery | NumericQuery) -> list[dict]:
    """Every record over the attributes the compiled query reads (numeric ones on a small grid)."""
    names, values = _record_values(spec, query)
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def _record_values(spec: Spec, query: CountingQuery | NumericQuery) -> tuple[list[str], list[list]]:
    """The attributes the compiled query reads and the values of each (numeric ones on a small grid)."""
    if isinstance(query, CountingQuery):
        names = list(query.groups[0]) if query.kind == "linear" else list(query.attributes)
        values = [list(spec.data.attributes[a]) for a in names]  # type: ignore[arg-type]
    else:
        names = [query.attribute]
        bounds: NumericAttribute = spec.data.attributes[query.attribute]  # type: ignore[assignment]
        grid = {bounds.min, bounds.max, (bounds.min + bounds.max) / 2}
        if bounds.min < 0 < bounds.max:
            grid.add(0.0)
        values = [sorted(grid)]
    return names, values


def enumerate_space(spec: Spec, max_records: int = 3, *,
                    query: CountingQuery | NumericQuery | None = None) -> SensitivitySpace:
    """The sensitivity space found by enumerating all datasets of up to ``max_records``
    records (a mean: exactly ``data.n`` records, since its differences depend on n).

    ``query`` is the spec's compiled query when the caller holds it (the query is evaluated
    record by record, never through its matrix); else it is compiled here. Only for small
    domains: the number of datasets grows as C(|domain| + N, N).
    """
    query = compile_query(spec) if query is None else query
    domain = record_domain(spec, query)
    r = len(domain)
    value_cache: dict[tuple[int, ...], np.ndarray] = {}

    def value(dataset: tuple[int, ...]) -> np.ndarray:
        if dataset not in value_cache:
            value_cache[dataset] = query.evaluate([domain[i] for i in dataset])
        return value_cache[dataset]

    kind = spec.adjacency.kind
    if kind == "add_remove":
        sizes = range(0, max_records + 1)
    elif isinstance(query, NumericQuery) and query.kind == "mean":
        sizes = [spec.data.n]
    else:
        sizes = range(1, max_records + 1)
    k = spec.adjacency.distance if kind == "hamming" else 1
    differences = []
    for size in sizes:
        for dataset in itertools.combinations_with_replacement(range(r), size):
            here = value(dataset)
            if kind == "add_remove":
                if size < max_records:
                    for j in range(r):
                        bigger = tuple(sorted(dataset + (j,)))
                        differences.append(value(bigger) - here)
                        differences.append(here - value(bigger))
                continue
            for neighbour in _replacements(dataset, r, k):
                differences.append(value(neighbour) - here)
    return SensitivitySpace.from_vectors(
        np.array(differences),
        method=f"enumeration: all datasets of up to {max_records} records over {r} record values",
        adjacency=describe_adjacency(spec),
        complete=kind != "hamming" and query.dimension >= 1 and isinstance(query, CountingQuery),
    )


_MAX_ENUMERATED_DATASETS = 3000

_MAX_ENUMERATED_ENTRIES = 4_000_000
"""The difference vectors a brute-force check lists take at most this many numbers in all (32 MB)."""


def neighbours_per_dataset(records: int, values: int, adjacency: str, distance: int) -> int:
    r"""An upper bound on the neighbours of one dataset of ``records`` records over ``values`` record values.

    Add/remove: one of ``values`` records added, one of ``records`` removed. Replacing j ≤ k records: a choice
    of the j records taken out, :math:`\binom{n}{j}`, and of the multiset put in, :math:`\binom{r + j - 1}{j}`
    (:func:`_replacements` lists at most these).
    """
    if adjacency == "add_remove":
        return values + records
    return sum(comb(records, j) * comb(values + j - 1, j) for j in range(1, min(distance, records) + 1))


def enumeration_size(spec: Spec, query: CountingQuery | NumericQuery) -> tuple[int, int] | None:
    """(records per dataset, number of datasets) for a brute-force check, or None if too large: more than
    :data:`_MAX_ENUMERATED_DATASETS` datasets, or neighbouring pairs whose differences would take more than
    :data:`_MAX_ENUMERATED_ENTRIES` numbers (a Hamming distance k gives each dataset about r^k neighbours)."""
    r = math.prod(len(v) for v in _record_values(spec, query)[1])  # not listed: the domain may be huge
    fixed_n = spec.adjacency.kind != "add_remove" and spec.data.n is not None
    k = spec.adjacency.distance if spec.adjacency.kind == "hamming" else 1
    if isinstance(query, NumericQuery) and query.kind == "mean":
        if not fixed_n:
            return None
        size = spec.data.n  # a mean's differences depend on n itself
    else:
        # sums and counting queries: the differences of datasets of any size >= k are
        # those of size k (a replacement only touches k records), so small datasets suffice
        size = max(2, k) if spec.data.n is None else min(spec.data.n, max(2, k))
    count = comb(r + size, size)
    if count > _MAX_ENUMERATED_DATASETS:
        return None
    pairs = count * neighbours_per_dataset(size, r, spec.adjacency.kind, k)
    return (size, count) if 2 * pairs * max(query.dimension, 1) <= _MAX_ENUMERATED_ENTRIES else None


_MAX_PERSON_PAIRS = 250_000


def enumerate_persons(spec: Spec, query: CountingQuery | NumericQuery) -> SensitivitySpace | None:
    """The person-level space by brute force: every multiset of records a person may keep under
    ``data.privacy_unit`` (≤ k rows, ≤ g distinct cells of the query's attributes, ≤ c rows in one),
    the query evaluated record by record; add/remove gives ±φ(P), replace φ(P) − φ(P′).
    None when there are too many persons (pairs of persons under replace) to list."""
    unit = spec.data.privacy_unit
    names, values = _record_values(spec, query)
    domain = [dict(zip(names, combo)) for combo in itertools.product(*values)]
    cells = [tuple(record[a] for a in names if a in getattr(query, "attributes", ())) for record in domain]
    distinct = len(set(cells))
    most = min(n for n in (unit.max_rows, None if unit.max_rows_per_group is None
                           else unit.max_rows_per_group * min(unit.max_groups or distinct, distinct)) if n is not None)
    if comb(len(domain) + most, most) > _MAX_ENUMERATED_DATASETS:
        return None
    persons = []
    for size in range(most + 1):
        for rows in itertools.combinations_with_replacement(range(len(domain)), size):
            per_cell = Counter(cells[i] for i in rows)
            if len(per_cell) <= (unit.max_groups or distinct) and max(per_cell.values(), default=0) <= (
                    unit.max_rows_per_group or most):
                persons.append(query.evaluate([domain[i] for i in rows]))
    phi = np.array(persons)
    if spec.adjacency.kind == "add_remove":
        differences = np.vstack([phi, -phi])
    elif len(phi) ** 2 <= _MAX_PERSON_PAIRS:
        differences = (phi[:, None, :] - phi[None, :, :]).reshape(-1, phi.shape[1])
    else:
        return None
    return SensitivitySpace.from_vectors(
        differences[np.any(differences != 0, axis=1)],
        method=f"enumeration: all {len(phi)} persons of up to {most} rows over {len(domain)} record values",
        adjacency=describe_adjacency(spec), complete=True)


def enumeration_claims(spec: Spec, query: CountingQuery | NumericQuery, space: SensitivitySpace) -> list[Check]:
    """The structural sensitivity of a spec without invariants re-derived by enumerating
    datasets (:func:`enumerate_space`, on the compiled query), where the domain is small;
    with a ``privacy_unit``, by enumerating persons (:func:`enumerate_persons`)."""
    if spec.data.privacy_unit is not None:
        brute = enumerate_persons(spec, query)
        if brute is None:
            return []
        return [_agreement(brute, space, f"brute force over every person ({brute.method})")]
    size = enumeration_size(spec, query)
    if size is None:
        return []
    brute = enumerate_space(spec, max_records=size[0], query=query)
    return [_agreement(brute, space, f"brute force over {size[1]} datasets of up to {size[0]} records: "
                                     "every neighbouring pair")]


def _agreement(brute: SensitivitySpace, space: SensitivitySpace, method: str) -> Check:
    """The enumerated and derived spaces have the same norms and rank."""
    # enumeration evaluates the query in floating point (a mean divides by n), hence rel. 1e-12
    same = brute.rank == space.rank and all(
        math.isclose(float(a), float(b), rel_tol=1e-12)
        for a, b in ((brute.l1, space.l1), (brute.l2_squared, space.l2_squared), (brute.linf, space.linf))
    )
    return Check(
        "sensitivity.enumeration",
        method,
        same,
        f"enumerated l1={brute.l1}, l2²={brute.l2_squared}, linf={brute.linf}, rank={brute.rank}; "
        f"derived l1={space.l1}, l2²={space.l2_squared}, linf={space.linf}, rank={space.rank}",
    )


def _replacements(dataset: tuple[int, ...], r: int, k: int):
    """Datasets obtained by replacing up to k records of ``dataset`` (values 0..r−1)."""
    seen = {dataset}  # a dataset is not its own neighbour
    for j in range(1, min(k, len(dataset)) + 1):
        for removed in set(itertools.combinations(dataset, j)):
            rest = list((Counter(dataset) - Counter(removed)).elements())
            for added in itertools.combinations_with_replacement(range(r), j):
                neighbour = tuple(sorted(rest + list(added)))
                if neighbour not in seen:
                    seen.add(neighbour)
                    yield neighbour
