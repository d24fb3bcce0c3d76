r"""Invariant-preserving moves: the structural generator of the Semi-DP sensitivity space.

Under replace-one, the fewest record changes between datasets with histograms h and h'
is ‖h − h'‖₁/2. Two datasets of n records share the invariant C h = t iff their
difference z = h − h' satisfies C z = 0. So the Semi-DP space of a counting query
φ = A h is (Cho & Awan 2024, §4, with S_Semi from Def. 4 and Def. 13)

.. math::

    S_{\mathrm{Semi}} = \bigcup_t \{A(h - h') : h, h' \in \mathcal{D}_t,\ \|h-h'\|_1 \le 2a\}
                      = A\,\mathcal{M}(\min(a, n)),\qquad
    \mathcal{M}(a) = \{z \in \mathbb{Z}^m : Cz = 0,\ \mathbf{1}^\top z = 0,\ \|z\|_1 \le 2a\},

since any such z is realised by h = z⁻ + w, h' = z⁺ + w for any w ≥ 0 with
‖z⁻‖₁ + ‖w‖₁ = n. The union over t is what a mechanism designed before t is seen
must cover. M(a) is generated here directly: split z = P − Q into two multisets of
s ≤ a cells with the same invariant value and disjoint supports.

For a two-way table with both one-way margins this is more than the paper's rectangles
(Prop. 32): with a = 3 and both dimensions ≥ 3 it contains 6-cycles such as
+1 at (1,1),(2,2),(3,3) and −1 at (1,2),(2,3),(3,1) (digest pitfall 2), raising Δ₁ to 6
and Δ₂ to √6.

For margins over disjoint groups of attributes, the norms of A·M(a) on any table equal
those on a reduced table (:func:`reduced_shape`): a move touches at most a levels of a
covered attribute (its one-way margin is zero, so z⁺ and z⁻ use the same levels) and
at most 2a levels of an uncovered one, and relabelling levels preserves margins and the
norms of marginal-table queries.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

_MAX_MULTISETS = 2_000_000


def count_multisets(m: int, s: int, cap: int | None = None) -> int:
    """C(m + s − 1, s): multisets of s cells out of m (histograms of s records).

    With ``cap``, stops as soon as the count exceeds it and returns ``cap + 1`` (the
    exact count for n in the hundreds of millions is an enormous integer).
    """
    k = min(s, m - 1)
    top = m + s - 1
    count = 1
    for i in range(1, k + 1):
        count = count * (top - k + i) // i
        if cap is not None and count > cap:
            return cap + 1
    return count


def kernel_moves(C: np.ndarray, degree: int) -> np.ndarray:
    """Every nonzero z ∈ Z^m with C z = 0, Σz = 0 and ‖z‖₁ ≤ 2·degree.

    Parameters
    ----------
    C : ndarray of int, shape (k, m)
        The invariant map over the m cells (integer entries).
    degree : int
        a, the number of records that may change.

    Returns
    -------
    ndarray of int64, shape (count, m)
        The moves, each once (both z and −z are listed), in a deterministic order. A move
        fixes its split (P = z⁺, Q = z⁻) and its size s = ‖z‖₁/2, so no move is produced twice.

    Raises
    ------
    ValueError
        When the enumeration would exceed two million multisets.
    """
    C = np.asarray(C, dtype=np.int64)
    m = C.shape[1]
    if sum(count_multisets(m, s, _MAX_MULTISETS) for s in range(1, degree + 1)) > _MAX_MULTISETS:
        raise ValueError(f"too many candidate moves to list (m = {m} cells, degree {degree})")
    found: list[np.ndarray] = []
    for s in range(1, degree + 1):
        combos = np.array(list(itertools.combinations_with_replacement(range(m), s)), dtype=np.int64)
        keys = C[:, combos].sum(axis=2).T  # (count, k): invariant value of each multiset
        inverse = _group_rows(keys)
        order = np.argsort(inverse, kind="stable")
        sizes = np.bincount(inverse)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        for b in np.unique(sizes[sizes >= 2]):
            # every bucket of b multisets at once: rows (bucket, member) of cells
            first = starts[sizes == b]
            members = combos[order[first[:, None] + np.arange(b)]]  # (buckets, b, s)
            found.extend(_disjoint_differences(members, m))
    if not found:
        return np.zeros((0, m), dtype=np.int64)
    return np.vstack(found)


def _group_rows(keys: np.ndarray) -> np.ndarray:
    """A group label per row of an integer matrix (equal rows, equal labels): rows packed
    into one int64 in mixed radix when the ranges allow, else a row-wise unique."""
    low = keys.min(axis=0)
    radix = keys.max(axis=0) - low + 1
    if float(np.prod(radix.astype(float))) < 2.0**62:
        weights = np.concatenate([[1], np.cumprod(radix[:-1])]).astype(np.int64)
        return np.unique((keys - low) @ weights, return_inverse=True)[1].reshape(-1)
    return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)


def _disjoint_differences(members: np.ndarray, m: int, chunk: int = 4096):
    """h(P) − h(Q) for ordered pairs of multisets P ≠ Q of one bucket with disjoint
    supports, for every bucket of ``members`` (buckets × b × s), in chunks of buckets."""
    s = members.shape[2]
    for lo in range(0, len(members), chunk):
        part = members[lo:lo + chunk]
        shared = (part[:, :, None, :, None] == part[:, None, :, None, :]).any(axis=(3, 4))
        k, i, j = np.nonzero(~shared)
        base = np.repeat(np.arange(len(k)) * m, s)  # row r's cells at r·m + cell, counted by bincount
        size = len(k) * m
        out = (np.bincount(base + part[k, i].ravel(), minlength=size)
               - np.bincount(base + part[k, j].ravel(), minlength=size))
        yield out.reshape(len(k), m).astype(np.int64, copy=False)


def margin_matrix(shape: tuple[int, ...], groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """C for the total and the marginal tables over ``groups`` of a table of ``shape``."""
    m = math.prod(shape)
    coords = np.unravel_index(np.arange(m), shape)
    rows = [np.ones((1, m), dtype=np.int64)]
    for group in groups:
        index = np.ravel_multi_index([coords[a] for a in group], [shape[a] for a in group])
        block = np.zeros((math.prod(shape[a] for a in group), m), dtype=np.int64)
        block[index, np.arange(m)] = 1
        rows.append(block)
    return np.vstack(rows)


def margin_moves(shape: tuple[int, ...], groups: tuple[tuple[int, ...], ...], degree: int) -> np.ndarray:
    """M(degree) for a table of ``shape`` whose margins over ``groups`` are invariant.

    Examples
    --------
    >>> margin_moves((2, 2), ((0,), (1,)), 3).tolist()
    [[1, -1, -1, 1], [-1, 1, 1, -1]]
    >>> len(margin_moves((3, 3), ((0,), (1,)), 3))   # 18 rectangles and 12 six-cycles
    30
    """
    return kernel_moves(margin_matrix(shape, groups), degree)


def reduced_shape(
    shape: tuple[int, ...], covered: frozenset[int], fixed: frozenset[int], degree: int
) -> tuple[int, ...]:
    """The smallest table on which A·M(degree) has the same norms as on ``shape``.

    Covered attributes (read by an invariant margin) keep min(n_j, a) levels, the others
    min(n_j, 2a); ``fixed`` attributes (read by a user matrix, whose norms depend on the
    labels) keep all their levels. See the module docstring.
    """
    return tuple(
        n if j in fixed else min(n, degree if j in covered else 2 * degree) for j, n in enumerate(shape)
    )


def paper_moves(r: int, c: int) -> np.ndarray:
    """The paper's set (Cho & Awan, Prop. 32) without 0: v_ijkl = e_ij + e_kl − e_il − e_kj,
    i ≠ k rows, j ≠ l columns, row-major; r(r−1)c(c−1)/2 distinct vectors.

    Exact S_Semi for 2×c tables and for adjacency A_2; for A_3 with r, c ≥ 3 the true
    space also has the 6-cycles (see :func:`margin_moves`).
    """
    out = set()
    for i, k in itertools.permutations(range(r), 2):
        for j, l in itertools.permutations(range(c), 2):
            v = np.zeros((r, c), dtype=np.int64)
            v[i, j] += 1
            v[k, l] += 1
            v[i, l] -= 1
            v[k, j] -= 1
            out.add(tuple(v.ravel()))
    return np.array(sorted(out), dtype=np.int64)
