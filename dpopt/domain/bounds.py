r"""Public, data-independent bounds on a query's answers (the box bounded mechanisms need).

A bound is usable by a bounded (truncated or boundary-inflated) mechanism only if it holds
for every dataset the adjacency relates, and is known without looking at the data:

* bounded mean with public n: :math:`[a, b]`, the attribute's declared range;
* bounded sum with public n (n fixed by the adjacency): :math:`[n a, n b]`;
* counting queries :math:`A h` with public n (n fixed by the adjacency), where h ≥ 0 and
  :math:`\sum h = n`: row i lies in :math:`[n \min_j A_{ij},\ n \max_j A_{ij}]`.

Under add/remove the size is not fixed, so sums and counts have no public box (None).
"""

from __future__ import annotations

import numpy as np

from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.spec.models import Spec


def answer_bounds(spec: Spec, query: CountingQuery | NumericQuery) -> tuple[np.ndarray, np.ndarray] | None:
    """(lower, upper), each of shape (d,), or None when the spec implies no public box.

    Parameters
    ----------
    spec : Spec
        Read for the public size ``data.n`` and the adjacency.
    query : CountingQuery or NumericQuery
        The spec's compiled query (:func:`dpopt.domain.queries.compile_query`, or
        ``Problem.query``), not compiled again here.
    """
    n = spec.data.n
    fixed_size = spec.adjacency.kind != "add_remove" and n is not None
    if isinstance(query, NumericQuery):
        if query.kind == "mean" and n is not None:
            return np.array([query.lower]), np.array([query.upper])
        if query.kind == "sum" and fixed_size:
            return np.array([n * query.lower]), np.array([n * query.upper])
        return None
    if not fixed_size:
        return None
    dense = query.dense()
    return n * dense.min(axis=1), n * dense.max(axis=1)
