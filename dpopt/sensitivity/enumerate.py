"""Brute-force sensitivity: enumerate small datasets and their neighbours.

The second route to every closed form in :mod:`dpopt.sensitivity.derive`. Datasets are
multisets of records over the attributes the query reads (numeric attributes on a grid
that contains their bounds); the query is evaluated record by record; every pair of
neighbouring datasets contributes φ(X) − φ(X').
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.sensitivity.derive import describe_adjacency
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import NumericAttribute, Spec


def record_domain(spec: Spec) -> list[dict]:
    """Every record over the attributes the query reads (numeric ones on a small grid)."""
    query = compile_query(spec)
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
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def enumerate_space(spec: Spec, max_records: int = 3) -> SensitivitySpace:
    """The sensitivity space found by enumerating all datasets of up to ``max_records``
    records (a mean: exactly ``data.n`` records, since its differences depend on n).

    Only for small domains: the number of datasets grows as C(|domain| + N, N).
    """
    query = compile_query(spec)
    domain = record_domain(spec)
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
