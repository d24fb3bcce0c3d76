r"""Brute force under invariants: the Semi-DP space from conforming datasets.

The second route to :mod:`dpopt.sensitivity.semi_space`: every dataset of a given size
over the record domain is built as a list of records; its invariant value and its query
answer are evaluated record by record (:meth:`InvariantDomain.evaluate`,
``CountingQuery.evaluate``), never through the invariant or query matrices; datasets
are grouped by invariant value (D_t), and every pair in one group within Hamming
distance a contributes φ(X) − φ(X'). Datasets are multisets: the least number of
record changes between two multisets of s records is s − |X ∩ X'| (the best pairing of
their records), which ``tests/test_semi_dp_adjacency.py`` checks against networkx.

With n public and small the enumeration runs at size n; otherwise at size a, where
every difference the structural route lists is realised (see :mod:`.table_moves`).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.sensitivity.enumerate import enumeration_claims
from dpopt.sensitivity.invariants import InvariantDomain
from dpopt.sensitivity.semi_adjacency import search_max_parameter
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.table_moves import count_multisets
from dpopt.spec.models import Spec

_MAX_DATASETS = 3000
_MAX_SEARCH_NODES = 300


def enumerate_semi_space(domain: InvariantDomain, size: int, a: int) -> SensitivitySpace:
    """{φ(X) − φ(X') : X, X' of ``size`` records, T(X) = T(X') allowed by the spec,
    at most ``a`` records apart}, by enumeration over the invariant domain's records."""
    records = [domain.record(c) for c in range(domain.cells)]
    groups: dict[tuple, list[tuple[Counter, np.ndarray]]] = defaultdict(list)
    count = 0
    for dataset in itertools.combinations_with_replacement(range(domain.cells), size):
        rows = [records[c] for c in dataset]
        t = domain.evaluate(rows)
        count += 1
        if domain.conforms(t):
            groups[t].append((Counter(dataset), domain.query.evaluate(rows)))
    differences = [np.zeros(domain.query.dimension)]
    for members in groups.values():
        for cx, px in members:
            for cy, py in members:
                if size - sum((cx & cy).values()) <= a:
                    differences.append(px - py)
    return SensitivitySpace.from_vectors(
        np.array(differences),
        method=f"enumeration: {count} datasets of {size} records, {len(groups)} invariant values, pairs ≤ {a} apart",
        adjacency=f"replace up to {a} records, equal invariants",
        complete=True,
    )


def semi_sensitivity_claims(spec: Spec, query: CountingQuery | NumericQuery, domain: InvariantDomain | None,
                            space) -> list[Check]:
    """The Semi-DP space and a(t) re-derived by brute force, where the domain is small.

    ``query`` and ``domain`` are the spec's compiled query and invariant domain
    (:func:`dpopt.compile`); the brute force evaluates both record by record, never through
    their matrices.
    """
    if domain is None:  # a sum or mean with the total only: S_Semi = S_DP (the total is fixed
        # under replace-one), so the ordinary brute force applies
        return enumeration_claims(spec.model_copy(update={"invariants": [], "semi_adjacency": None}), query, space)
    a = space.semi_adjacent_parameter
    checks = []
    n = domain.n
    if n is not None and count_multisets(domain.cells, n, _MAX_DATASETS) <= _MAX_DATASETS:
        size = n
    elif not domain.known_values and count_multisets(domain.cells, a, _MAX_DATASETS) <= _MAX_DATASETS:
        size = a
    else:
        size = None
    if size is not None:
        brute = enumerate_semi_space(domain, size, a)
        same = (brute.l1, brute.l2_squared, brute.linf, brute.rank) == (
            space.l1, space.l2_squared, space.linf, space.rank)
        checks.append(Check(
            "sensitivity.enumeration",
            f"brute force over conforming datasets ({brute.method}), queries and invariants evaluated record by record",
            same,
            f"enumerated l1={brute.l1}, l2²={brute.l2_squared}, linf={brute.linf}, rank={brute.rank}; "
            f"derived l1={space.l1}, l2²={space.l2_squared}, linf={space.linf}, rank={space.rank}",
        ))
    if n is not None and n <= 12 and domain.cells ** n <= _MAX_SEARCH_NODES:
        records = [domain.record(c) for c in range(domain.cells)]
        found = search_max_parameter(
            domain.cells, n, lambda X: domain.evaluate([records[c] for c in X]), space.semi.reading,
            keep=domain.conforms,
        )
        ok = found == a if space.semi.exact else found <= a
        checks.append(Check(
            "semi_adjacency.search",
            f"Def. 13 ({space.semi.reading}) by breadth-first search (networkx) over all {domain.cells ** n} "
            f"ordered datasets of n = {n} records",
            ok,
            f"searched max_t a(t) = {found}; certified a = {a} ({'exact' if space.semi.exact else 'upper bound'})",
        ))
    return checks
