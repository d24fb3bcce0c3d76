r"""The semi-adjacent parameter a(t) (Cho & Awan 2024, Definition 13), three ways.

With D_t the datasets of n records whose invariant equals t, and D_t^i the values record i
takes across D_t, Definition 13 reads

.. math::

    a(t) = \sup_{i}\ \sup_{x, y \in \mathcal{D}_t^i}\
           \inf\{d(X, Y) : X, Y \in \mathcal{D}_t,\ X_i = x,\ Y_i = y\},

d the replace-one (Hamming) metric of the whole dataspace: a path may leave D_t. Taken
literally the inf runs over X and Y (``literal``). The paper's own numbers (a(t) = 3 for
two-way tables with fixed margins, p + 1 in Theorem 16, Example 5) fix the confidential
X and minimise over Y only (``worst_case``, the default; digest §1.7):

.. math::

    a_{\mathrm{worst}}(t) = \sup_i \sup_{X\in\mathcal{D}_t} \sup_{y\in\mathcal{D}_t^i}
        \inf\{d(X, Y) : Y \in \mathcal{D}_t,\ Y_i = y\} \ \ge\ a_{\mathrm{literal}}(t).

Routes:

* :func:`search_parameter` / :func:`search_max_parameter`: breadth-first search with
  networkx on the graph whose nodes are the ordered datasets X^n and whose edges change
  one record — Definition 13 as written, for tiny domains;
* :func:`histogram_parameter` / :func:`exact_parameter`: the same quantity over
  histograms, with d between a dataset holding h (record i = x) and one holding h'
  (record i = y) at least 1[x≠y] + ‖h − e_x − h' + e_y‖₁/2 and attaining it;
* :func:`closed_form_parameter`: margins over q disjoint attribute groups (q counting
  groups with ≥ 2 cells): max_t a_worst(t) = min(q + 1, n) for n ≥ 2 — Theorem 16's
  bound (one change for record i, one compensating change per group) is attained:
  record i = x, for each group k a record equal to x except in group k, every other
  record equal to x, and y differing from x in every group; y conforms (one record y,
  the rest x), and from X every compensating record must change.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpopt.errors import UnsupportedSpecError
from dpopt.sensitivity.invariants import InvariantDomain, conforming_histograms
from dpopt.sensitivity.table_moves import count_multisets

if TYPE_CHECKING:
    import networkx as nx

READINGS = ("worst_case", "literal")
_MAX_HISTOGRAMS = 20_000
_MAX_WORK = 3e8


@dataclass(frozen=True)
class SemiAdjacentParameter:
    """a(t), how it was obtained, and whether it is the exact maximum over t.

    Attributes
    ----------
    value : int
        The a used by the guarantee: the adjacency A_a protects X, X' ∈ D_t at
        distance ≤ a, for every value t the invariants can take.
    reading : {'worst_case', 'literal'}
        The reading of Definition 13.
    method : str
        In words, with the source of the value.
    exact : bool
        True when ``value`` = max_t a(t) exactly; False when it is an upper bound.
    """

    value: int
    reading: str
    method: str
    exact: bool

    def to_dict(self) -> dict:
        return {"value": self.value, "reading": self.reading, "method": self.method, "exact": self.exact}


# ------------------------------------------------------------- networkx route
def dataset_graph(m: int, n: int) -> nx.Graph:
    """The replace-one graph on X^n: ordered datasets of n records over m values, an edge
    when exactly one record differs. Its geodesic distance is the Hamming metric."""
    import networkx as nx  # imported by the graph routes only (it takes several numpy imports' time)

    graph = nx.Graph()
    nodes = list(itertools.product(range(m), repeat=n))
    graph.add_nodes_from(nodes)
    for X in nodes:
        for i in range(n):
            for v in range(X[i] + 1, m):
                graph.add_edge(X, X[:i] + (v,) + X[i + 1:])
    return graph


def _distances(graph: nx.Graph, sources: Sequence[tuple], cutoff: int) -> dict[tuple, dict[tuple, int]]:
    import networkx as nx

    return {X: nx.single_source_shortest_path_length(graph, X, cutoff=cutoff) for X in sources}


def search_parameter(
    graph: nx.Graph, conforming: Sequence[tuple], reading: str = "worst_case"
) -> int:
    """a(t) by breadth-first search, for one conforming space.

    Parameters
    ----------
    graph : networkx.Graph
        :func:`dataset_graph` (m, n).
    conforming : sequence of tuple
        D_t: every ordered dataset with T(X) = t.
    reading : {'worst_case', 'literal'}

    Examples
    --------
    Cho & Awan, Example 3: three binary records, T = number of ones.

    >>> G = dataset_graph(2, 3)
    >>> search_parameter(G, [X for X in G if sum(X) == 2]), search_parameter(G, [(0, 0, 0)])
    (2, 0)
    """
    _check_reading(reading)
    conforming = list(conforming)
    if not conforming:
        return 0
    n = len(conforming[0])
    by_value = [{} for _ in range(n)]  # by_value[i][y]: datasets with Y_i = y
    for Y in conforming:
        for i in range(n):
            by_value[i].setdefault(Y[i], []).append(Y)
    dist = _distances(graph, conforming, cutoff=n)
    best = 0
    for i in range(n):
        for xs in by_value[i].values():
            for ys in by_value[i].values():
                per_X = [min(dist[X].get(Y, math.inf) for Y in ys) for X in xs]
                value = max(per_X) if reading == "worst_case" else min(per_X)
                best = max(best, int(value))
    return best


def search_max_parameter(
    m: int, n: int, invariant: Callable[[tuple], Hashable], reading: str = "worst_case",
    keep: Callable[[Hashable], bool] | None = None,
) -> int:
    """max over t of a(t) by breadth-first search on :func:`dataset_graph` (m, n).

    ``invariant`` maps an ordered dataset (a tuple of cell indices) to its T(X); ``keep``
    optionally restricts the t considered. Tiny domains only (m^n nodes).
    """
    _check_reading(reading)
    graph = dataset_graph(m, n)
    groups: dict[Hashable, list[tuple]] = {}
    for X in graph:
        groups.setdefault(invariant(X), []).append(X)
    return max(
        (search_parameter(graph, members, reading) for t, members in groups.items() if keep is None or keep(t)),
        default=0,
    )


def semi_adjacency_graph(graph: nx.Graph, conforming: Sequence[tuple], a: int) -> nx.Graph:
    """G_t: the datasets of D_t, an edge when d(X, X') ≤ a (d measured in the whole
    dataspace, paths may leave D_t). ``nx.is_connected(G_t)`` tells whether every two
    conforming datasets are linked by protected steps (digest pitfall 16)."""
    import networkx as nx

    conforming = list(conforming)
    out = nx.Graph()
    out.add_nodes_from(conforming)
    members = set(conforming)
    for X in conforming:
        for Y in nx.single_source_shortest_path_length(graph, X, cutoff=a):
            if Y in members and Y != X:
                out.add_edge(X, Y)
    return out


# ------------------------------------------------------------ histogram route
def histogram_parameter(H: np.ndarray, reading: str = "worst_case") -> int:
    """a(t) for the conforming histograms H (rows: every histogram with T = t).

    Examples
    --------
    Digest §1.7: 2 × 2 table of 3 records, margins (2, 1 | 2, 1); cells (11, 12, 21, 22).

    >>> H = np.array([[1, 1, 1, 0], [2, 0, 0, 1]])
    >>> histogram_parameter(H, "worst_case"), histogram_parameter(H, "literal")
    (3, 2)
    """
    _check_reading(reading)
    H = np.asarray(H, dtype=np.int64)
    support = np.flatnonzero(H.max(axis=0) >= 1)
    if len(support) < 2:
        return 0
    holds_y = H[:, support] >= 1  # (g, |Y|)
    literal = np.full((H.shape[1], len(support)), np.inf)
    worst = 0.0
    for h in H:
        D = h - H  # rows h − h'
        base = np.abs(D).sum(axis=1)
        shift_y = np.abs(D[:, support] + 1) - np.abs(D[:, support])
        for x in np.flatnonzero(h >= 1):
            shift_x = np.abs(D[:, x] - 1) - np.abs(D[:, x])
            cost = 1 + (base[:, None] + shift_x[:, None] + shift_y) / 2
            cost = np.where(holds_y, cost, np.inf)
            cost[:, support == x] = 0.0  # y = x: Y = X
            per_y = cost.min(axis=0)
            worst = max(worst, float(per_y.max()))
            literal[x] = np.minimum(literal[x], per_y)
    if reading == "worst_case":
        return int(worst)
    return int(literal[support].max())


def _work(groups: list[np.ndarray], m: int) -> float:
    return float(sum(len(H) ** 2 * m * m for H in groups))


def exact_parameter(domain: InvariantDomain, n: int, reading: str = "worst_case") -> SemiAdjacentParameter | None:
    """max_t a(t) over every histogram of n records (and the t the spec allows), or None
    when the enumeration is too large."""
    _check_reading(reading)
    if count_multisets(domain.cells, n, _MAX_HISTOGRAMS) > _MAX_HISTOGRAMS:
        return None
    groups = [H for _, H in conforming_histograms(domain, n)]
    if not groups:
        raise UnsupportedSpecError(
            "invariants", f"no dataset of n = {n} records has the invariant values the spec fixes"
        )
    if _work(groups, domain.cells) > _MAX_WORK:
        return None
    value = max(histogram_parameter(H, reading) for H in groups)
    return SemiAdjacentParameter(
        value,
        reading,
        f"exact search: max of a(t) over the {len(groups)} invariant values t taken by the "
        f"{sum(len(H) for H in groups)} conforming histograms of n = {n} records "
        f"(Def. 13, {reading.replace('_', '-')} reading)",
        True,
    )


def closed_form_parameter(domain: InvariantDomain, reading: str = "worst_case") -> SemiAdjacentParameter | None:
    """max_t a(t) for margins over disjoint attribute groups (module docstring), or None.

    For the literal reading the worst-case value is returned as an upper bound.
    """
    _check_reading(reading)
    if not (domain.margins_only and domain.disjoint_margins):
        return None
    shape = domain.shape
    q = sum(1 for g in domain.margin_groups if math.prod(shape[a] for a in g) >= 2)
    n = domain.n
    if domain.cells < 2 or n == 1:
        value, why = 0, "a single possible dataset per invariant value"
    elif q == 0:
        value, why = 1, "replacing one record keeps the total n: a(t) = 1"
    elif n is None:
        value = q + 1
        why = (f"a(t) ≤ p + 1 = {q + 1} for margins over p = {q} disjoint attribute group(s) "
               f"(Cho & Awan, Thm 16), attained for n ≥ {q + 1}")
    else:
        value = min(q + 1, n)
        why = (f"min(p + 1, n) = {value} for margins over p = {q} disjoint attribute group(s) "
               f"and n = {n} (Cho & Awan, Thm 16 bound, attained)")
    if reading == "literal" and value >= 2:
        return SemiAdjacentParameter(
            value, reading, f"upper bound: a_literal(t) ≤ a_worst(t) ≤ {value}; {why}", False
        )
    return SemiAdjacentParameter(value, reading, f"closed form: {why}", True)


def semi_adjacent_parameter(domain: InvariantDomain, reading: str = "worst_case") -> SemiAdjacentParameter:
    """The a the guarantee uses: max over t of a(t), for the spec's domain and n.

    Exact closed form when there is one; otherwise an exact search over histograms (it
    needs ``data.n``); for the literal reading the search is preferred to the bound.

    Raises
    ------
    UnsupportedSpecError
        When neither a closed form nor a feasible exact search exists.
    """
    closed = None if domain.known_values else closed_form_parameter(domain, reading)
    if closed is not None and closed.exact:
        return closed
    if domain.n is not None:
        exact = exact_parameter(domain, domain.n, reading)
        if exact is not None:
            return exact
    if closed is not None:
        return closed
    raise UnsupportedSpecError(
        "invariants",
        "no closed form for the semi-adjacent parameter a(t) of these invariants (linear, or "
        "margins over overlapping attribute groups); give data.n small enough for an exact "
        f"search (at most {_MAX_HISTOGRAMS} histograms of n records)",
    )


def _check_reading(reading: str) -> None:
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS} (got {reading!r})")
