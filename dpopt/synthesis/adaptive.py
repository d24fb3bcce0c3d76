r"""MST-style selection of two-way marginals (McKenna, Miklau & Sheldon 2021, Sec. 4, Algorithm 1).

After the one-way marginals are released, the model of the data is their product (independent attributes).
Each round scores every candidate pair (a, b) that joins two components of the pairs selected so far
(Kruskal's rule: the selection is a spanning forest) by

.. math:: q(a, b) = \| M_{ab}(D) - \hat M_{ab} \|_1,\qquad \hat M_{ab} = N\, \hat p_a \hat p_b^\top,

the L1 distance between the data's two-way table and the one the released one-way tables predict
(p̂ the released tables normalised, N their total: public, post-processing). Adding or removing one
record changes one cell of M_ab(D) by 1, so q changes by at most Δ = 1; replacing one record moves one
count out of a cell and one into another, Δ = 2. The pair is drawn with probability
∝ exp(ε q / (2Δ)) (the exponential mechanism, ε-DP; ε²/8-zCDP: :mod:`dpopt.synthesis.budget`), by the
Gumbel-max trick (argmax of ε q/(2Δ) + Gumbel noise: an exact draw of that law; floating-point, idealized
numerics). Only the selected pair is published, never a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Pair = tuple[str, str]

SCORE_SENSITIVITY = {"add_remove": 1, "replace_one": 2}
"""Δ of the score q under each adjacency (module docstring)."""

SELECTION_METHOD = ("MST (McKenna, Miklau & Sheldon 2021): after the one-way marginals, each round draws one pair "
                    "joining two components of the pairs chosen so far, by the exponential mechanism on the L1 "
                    "distance between the data's two-way table and the product of the published one-way tables")
"""The selection block's ``method`` (re-derived by verify)."""


def components(attributes: Sequence[str], selected: Sequence[Pair]) -> dict[str, int]:
    """The component of each attribute in the forest of ``selected`` pairs (union-find, smallest index)."""
    parent = {a: a for a in attributes}

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in selected:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb, key=attributes.index)] = min(ra, rb, key=attributes.index)
    return {a: attributes.index(root(a)) for a in attributes}


def candidates(attributes: Sequence[str], pairs: Sequence[Pair], selected: Sequence[Pair]) -> list[Pair]:
    """The pairs, in their listed order, that join two components of the forest of ``selected``."""
    comp = components(attributes, selected)
    return [p for p in pairs if comp[p[0]] != comp[p[1]]]


def independent_table(one_way: Mapping[str, np.ndarray], a: str, b: str) -> np.ndarray:
    """N p̂_a p̂_bᵀ from the released one-way tables (N: the mean of their totals; equal when consistent)."""
    ta, tb = np.asarray(one_way[a], float), np.asarray(one_way[b], float)
    total = (ta.sum() + tb.sum()) / 2
    pa = ta / ta.sum() if ta.sum() > 0 else np.full(ta.shape, 1 / ta.size)
    pb = tb / tb.sum() if tb.sum() > 0 else np.full(tb.shape, 1 / tb.size)
    return total * np.outer(pa, pb)


def scores(truth: Mapping[Pair, np.ndarray], one_way: Mapping[str, np.ndarray], pairs: Sequence[Pair]) -> np.ndarray:
    """q(a, b) for each pair: the L1 distance of the true table from the independent prediction."""
    return np.array([np.abs(np.asarray(truth[p], float) - independent_table(one_way, *p)).sum() for p in pairs])


def exponential_mechanism(q: np.ndarray, epsilon: float, sensitivity: int, rng: np.random.Generator) -> int:
    """An index drawn with probability ∝ exp(ε q_i / (2Δ)) (Gumbel-max trick)."""
    return int(np.argmax(epsilon * np.asarray(q, float) / (2 * sensitivity) + rng.gumbel(size=len(q))))


def select(attributes: Sequence[str], pairs: Sequence[Pair], truth: Mapping[Pair, np.ndarray],
           one_way: Mapping[str, np.ndarray], epsilons: Sequence[float], sensitivity: int,
           rng: np.random.Generator) -> list[Pair]:
    """One pair per round (``epsilons[i]`` the i-th round's ε), each joining two components.

    Returns the selected pairs, in the order selected (fewer than the rounds only when no candidate is left).
    """
    q = dict(zip(pairs, scores(truth, one_way, pairs)))  # the model (the one-way tables) is fixed: scored once
    selected: list[Pair] = []
    for epsilon in epsilons:
        options = candidates(attributes, pairs, selected)
        if not options:
            break
        selected.append(options[exponential_mechanism(np.array([q[p] for p in options]), epsilon, sensitivity, rng)])
    return selected
