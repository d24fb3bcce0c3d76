r"""MST-style selection of two-way marginals (McKenna, Miklau & Sheldon 2021, Sec. 4, Algorithm 1).

After the one-way marginals are released, the model of the data is their product (independent attributes).
Each round scores every candidate pair (a, b) that joins two components of the pairs selected so far
(Kruskal's rule: the selection is a spanning forest) by

.. math:: q(a, b) = \| M_{ab}(D) - \hat M_{ab} \|_1,\qquad \hat M_{ab} = N\, \hat p_a \hat p_b^\top,

the L1 distance between the data's two-way table and the one the released one-way tables predict
(p̂ the released tables normalised, N their total: public, post-processing). Adding or removing one
record changes one cell of M_ab(D) by 1, so q changes by at most Δ = 1; replacing one record moves one
count out of a cell and one into another, Δ = 2.

**Exact scores and draws.** The score is computed in integers on the lattice 2^{−K}ℤ (K = :data:`SCORE_BITS`):
s(a, b) = Σ |2^K M_ab(D) − round(2^K M̂_ab)|, the public prediction rounded once (any public table serves);
a record moves s by ≤ 2^K Δ (one count, one cell; two under replacement). The pair is drawn with probability
∝ exp(ε′ s / (2·2^K Δ)) — the exponential mechanism, ε′-DP and ε′²/8-zCDP (Cesar & Rogers 2021, bounded range;
:mod:`dpopt.synthesis.budget`) — at ε′ = ⌊2^{40}ε⌋/2^{40} ≤ ε (:func:`exact_epsilon`), so that the exponent is a
ratio of integers. It is sampled exactly by rejection (:mod:`dpopt.noise.exponential`): a uniform candidate i,
accepted with probability exp(−ε′(s* − s_i)/(2·2^K Δ)) (s* the best score) by Canonne, Kamath & Steinke's
Bernoulli(exp(−γ)) for rational γ (2020, Algorithm 1: integer comparisons only); the first accepted candidate has
the softmax law exactly. Not covered: the running time, which depends on the scores (the rounds). Only the selected
pair is published, never a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np

from dpopt.noise.exponential import sample_exponential

Pair = tuple[str, str]

SCORE_SENSITIVITY = {"add_remove": 1, "replace_one": 2}
"""Δ of the score q under each adjacency (module docstring)."""

SCORE_BITS = 10
"""K: scores are integers in units of 2^{−K} counts (module docstring)."""

EPSILON_BITS = 40
"""ε′ = ⌊2^{40}ε⌋/2^{40}: the exponential mechanism's ε as a dyadic rational (:func:`exact_epsilon`)."""

SELECTION_METHOD = ("MST (McKenna, Miklau & Sheldon 2021): after the one-way marginals, each round draws one pair "
                    "joining two components of the pairs chosen so far, by the exponential mechanism on the L1 "
                    "distance between the data's two-way table and the product of the published one-way tables; "
                    f"exact: integer scores in units of 2^-{SCORE_BITS} (the prediction rounded to that lattice, "
                    f"sensitivity 2^{SCORE_BITS}·Δ), ε′ = floor(2^{EPSILON_BITS}·ε)/2^{EPSILON_BITS} ≤ ε, drawn by "
                    "rejection: a uniform candidate accepted with probability exp(−ε′(s* − s)/(2^"
                    f"{SCORE_BITS + 1}·Δ)) (Canonne, Kamath & Steinke 2020, Algorithm 1, integer arithmetic): the "
                    "exponential mechanism's law exactly")
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


def scores(truth: Mapping[Pair, np.ndarray], one_way: Mapping[str, np.ndarray], pairs: Sequence[Pair]) -> list[int]:
    """s(a, b) for each pair: Σ |2^K M_ab − round(2^K M̂_ab)| in integers (module docstring; K = :data:`SCORE_BITS`).

    Raises
    ------
    ValueError
        A true table whose counts are not whole numbers.
    """
    out = []
    for p in pairs:
        counts = np.asarray(truth[p], dtype=float)
        if not np.array_equal(counts, np.round(counts)):
            raise ValueError(f"the true table of {p} holds counts that are not whole numbers")
        predicted = np.round(independent_table(one_way, *p) * 2.0**SCORE_BITS).astype(np.int64)
        out.append(int(np.abs((counts.astype(np.int64) << SCORE_BITS) - predicted).sum()))
    return out


def exact_epsilon(epsilon: float) -> Fraction:
    """ε′ = ⌊2^{40}ε⌋/2^{40} ≤ ε, exactly (ε read as the rational its double is)."""
    return Fraction(int(Fraction(epsilon) * 2**EPSILON_BITS), 2**EPSILON_BITS)


def exponential_mechanism(q: Sequence[int], epsilon: Fraction, sensitivity: int, rng: np.random.Generator) -> int:
    """An index drawn with probability ∝ exp(ε′ q_i / (2·2^K Δ)), exactly, for integer scores q and a rational ε′
    (:func:`dpopt.noise.exponential.sample_exponential`: uniform candidates accepted with probability
    exp(−ε′(q* − q_i)/(2·2^K Δ))).

    Raises
    ------
    ValueError
        An ε′ whose exponent denominators leave int64 (finer than :func:`exact_epsilon` gives).
    """
    return int(sample_exponential(q, Fraction(epsilon) / (2 * sensitivity * 2**SCORE_BITS), rng)[0])


def select(attributes: Sequence[str], pairs: Sequence[Pair], truth: Mapping[Pair, np.ndarray],
           one_way: Mapping[str, np.ndarray], epsilons: Sequence[float], sensitivity: int,
           rng: np.random.Generator) -> list[Pair]:
    """One pair per round (``epsilons[i]`` the i-th round's ε, sampled at ε′ = :func:`exact_epsilon` (ε)), each joining
    two components.

    Returns the selected pairs, in the order selected (fewer than the rounds only when no candidate is left).
    """
    q = dict(zip(pairs, scores(truth, one_way, pairs)))  # the model (the one-way tables) is fixed: scored once
    selected: list[Pair] = []
    for epsilon in epsilons:
        options = candidates(attributes, pairs, selected)
        if not options:
            break
        selected.append(options[exponential_mechanism([q[p] for p in options], exact_epsilon(epsilon), sensitivity,
                                                      rng)])
    return selected
