r"""Geometric laws of ratio e^{−1} and e^{−1/t} by exact inversion: uniform words against ⌊2^b·x⌋.

A uniform real U ∈ [0, 1) is read as the binary fraction of independent uniform b-bit words
W₁ W₂ … (b = :data:`WORD_BITS`). For a real x with c_j = ⌊2^{jb} x⌋ and P_j the integer of the
first j words, P_j < c_j proves U < x and P_j > c_j proves U > x; only P_j = c_j needs the next
word. So the first word decides U < x unless W₁ = c₁ (probability 2^{−b}); the tie is then resolved
word by word in Python integers. Every x used here is irrational (Lindemann–Weierstrass), so ties end
almost surely, and every decision is an integer comparison: **no floating-point number enters an
accept/reject decision**. The integers c_j are computed in Arb ball arithmetic (python-flint,
rigorous error bounds) at increasing precision until the ball of 2^{jb}x excludes every integer.

Two laws, both by inversion — X = #{i ≥ 1 : U < x_i} for the decreasing tail probabilities
x_i = P(X ≥ i):

* the **unit geometric** G, P(G ≥ v) = e^{−v}: one word for what Canonne, Kamath & Steinke's
  Algorithms 1–2 draw as a run of Bernoulli(e^{−1}) trials (the V of Algorithm 2; the ⌊γ⌋ trials of
  Algorithm 1 all succeed exactly when G ≥ ⌊γ⌋, probability e^{−⌊γ⌋});
* the **truncated geometric** on {0, …, t−1}, P(X ≥ u) = (e^{−u/t} − e^{−1})/(1 − e^{−1}), the U of
  Algorithm 2 that CKS draw by rejection (uniform, kept with probability e^{−U/t}), for t up to
  :data:`MAX_TABLE_T` (its t − 1 thresholds are tabulated once per t).

Neither sampler sees any data: their word counts and rounds depend only on the parameters and on the
words drawn.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 and 2.
.. [2] L. Devroye, *Non-Uniform Random Variate Generation*, Springer 1986, §III.2 (inversion by
   sequential search) and §X.1 (geometric variates).
.. [3] F. Johansson, "Arb: efficient arbitrary-precision midpoint-radius interval arithmetic",
   IEEE Transactions on Computers 66(8), 2017.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import flint

WORD_BITS = 64
"""Bits of one uniform word (numpy ``integers(0, 2**64, dtype=uint64)``: one raw 64-bit output)."""

MAX_TABLE_T = 2**16
"""Largest t whose truncated-geometric thresholds are tabulated (t − 1 Arb products, cached per t)."""

Real = tuple
"""A real number of this module by name: ``("unit", v)`` is e^{−v}; ``("truncated", u, t)`` is
(e^{−u/t} − e^{−1})/(1 − e^{−1})."""


def _evaluate(x: Real) -> flint.arb:
    """The Arb ball of ``x`` at the current working precision."""
    import flint  # imported where used (start-up of `dpopt verify`)

    if x[0] == "unit":
        return (-flint.arb(x[1])).exp()
    _, u, t = x
    e1 = (-flint.arb(1)).exp()
    return ((-flint.arb(flint.fmpq(u, t))).exp() - e1) / (1 - e1)


@lru_cache(maxsize=4096)
def scaled_floor(x: Real, shift: int) -> int:
    """⌊2^shift · x⌋, exactly: Arb at increasing precision until the ball excludes every integer.

    Never returns for an x with 2^shift·x an integer; the x of this module are irrational.
    """
    import flint  # imported where used (start-up of `dpopt verify`)

    prec = shift + 64
    while True:
        with flint.ctx.workprec(prec):
            y = _evaluate(x) * flint.arb(2) ** shift
            lo, hi = y.lower().floor().unique_fmpz(), y.upper().floor().unique_fmpz()
        if lo is not None and lo == hi:
            return int(lo)
        prec *= 2


def _words(rng: np.random.Generator, size: int, bits: int) -> np.ndarray:
    return rng.integers(0, 1 << bits, size=size, dtype=np.uint64)


def _below(prefix: list[int], x: Real, rng: np.random.Generator, bits: int) -> bool:
    """U < x for the uniform U whose leading words are ``prefix`` (extended in place from ``rng`` as needed)."""
    return below_floors(prefix, lambda shift: scaled_floor(x, shift), rng, bits)


def below_floors(prefix: list[int], floor: Callable[[int], int], rng: np.random.Generator, bits: int) -> bool:
    """U < x for the uniform U whose leading words are ``prefix`` (extended in place from ``rng`` as needed), an
    irrational x given by ``floor(shift)`` = ⌊2^shift·x⌋: the j-word prefix P_j against ⌊2^{jb}x⌋, word by word
    until they differ (module docstring)."""
    j, value = 0, 0
    while True:
        if j == len(prefix):
            prefix.append(int(_words(rng, 1, bits)[0]))
        value = (value << bits) | prefix[j]
        j += 1
        c = floor(j * bits)
        if value != c:
            return value < c


class _Thresholds:
    """Integer thresholds c_1 ≥ c_2 ≥ … ≥ c_L of b-bit words and a guide table (Chen & Asau 1974;
    Devroye 1986, §III.2.4) to count #{i : c_i > W} for many words W.

    The word's top k bits name its bucket; ``start[bucket]`` counts the thresholds at or above the
    bucket's upper end (all > W). A bucket holding no threshold (most of them: k is chosen so that there are
    at least 32 buckets a threshold, up to 2^18 buckets) decides the count by that one look-up, stored as is in
    ``guide`` (int32, to stay in cache); a bucket holding thresholds is stored as ``~start`` (negative) and the
    search goes on from there through the thresholds inside it, for its words only. Each step is an integer
    comparison.
    """

    def __init__(self, descending: list[int], bits: int):
        self.size = len(descending)
        self.values = np.array(descending + [0], dtype=np.uint64)  # a 0 past the end: never above a word
        self.shift = bits - min(bits, max(12, min(len(descending).bit_length() + 5, 18)))
        # c ≥ (bucket + 1)·2^shift ⟺ ⌊c/2^shift⌋ > bucket: start = L − #{i : ⌊c_i/2^shift⌋ ≤ bucket}
        heads = np.bincount((self.values[:-1] >> np.uint64(self.shift)).astype(np.int64),
                            minlength=1 << (bits - self.shift))[:1 << (bits - self.shift)]
        start = len(descending) - np.cumsum(heads)
        self.guide = np.where(heads == 0, start, ~start).astype(np.int32)

    def count(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """#{i : c_i > W} per word (int64), and whether W equals the first threshold not counted (a tie: the
        first word does not decide that comparison)."""
        pos = np.take(self.guide, (words >> np.uint64(self.shift)).view(np.int64)).astype(np.int64)
        tied = np.zeros(words.size, dtype=bool)
        search = np.flatnonzero(pos < 0)  # buckets holding thresholds: W against each of them (rare)
        if search.size:
            found, live = ~pos[search], np.arange(search.size)
            while live.size:
                ahead, tied[search[live]] = self._step(found[live], words[search[live]])
                live = live[ahead]
                found[live] += 1
            pos[search] = found
        return pos, tied

    def _step(self, pos: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """c_{pos+1} > W and c_{pos+1} = W (past the last threshold: neither)."""
        c = self.values[pos]
        return c > words, (c == words) & (pos < self.size)


@lru_cache(maxsize=8)
def _unit_thresholds(bits: int) -> _Thresholds:
    """⌊2^b e^{−v}⌋ for v = 1, 2, … up to the first 0."""
    out, v = [], 1
    while not out or out[-1] > 0:
        out.append(scaled_floor(("unit", v), bits))
        v += 1
    return _Thresholds(out, bits)


def _floor_of(make: Callable[[], flint.arb], shift: int) -> int:
    """⌊2^shift · y⌋ of the irrational y that ``make`` evaluates in Arb, at increasing precision (as
    :func:`scaled_floor`)."""
    import flint  # imported where used (start-up of `dpopt verify`)

    prec = shift + 64
    while True:
        with flint.ctx.workprec(prec):
            y = make() * flint.arb(2) ** shift
            lo, hi = y.lower().floor().unique_fmpz(), y.upper().floor().unique_fmpz()
        if lo is not None and lo == hi:
            return int(lo)
        prec *= 2


@lru_cache(maxsize=16)
def _truncated_thresholds(t: int, bits: int) -> _Thresholds:
    r"""⌊2^b P(X ≥ u)⌋ for u = 1 … t − 1 of the truncated geometric, in exact integer arithmetic.

    With K = b + 64 and the exact floors R = ⌊2^K e^{−1/t}⌋, E = ⌊2^K e^{−1}⌋, S = ⌊2^{b+64}/(1 − e^{−1})⌋
    (Arb, :func:`_floor_of`), the integers P_0 = 2^K, P_u = ⌊P_{u−1}R/2^K⌋ enclose the power:
    P_u ≤ 2^K e^{−u/t} < P_u + 2u (by induction: the error grows by at most 1 from R and 1 from the floor,
    P_{u−1} ≤ 2^K). So 2^K(e^{−u/t} − e^{−1}) lies in (P_u − E − 1, P_u − E + 2t] (positive: at least
    2^K e^{−1}(e^{1/t} − 1) > 2^K/(3t) ≫ 2t + 1 for t ≤ :data:`MAX_TABLE_T`), and the threshold
    ⌊2^b P(X ≥ u)⌋ = ⌊2^K(e^{−u/t} − e^{−1}) · 2^{b+64}/(1 − e^{−1}) / 2^{K+64}⌋ lies between ⌊q/2^{K+64}⌋,
    q = (P_u − E − 1)S, and ⌊(P_u − E + 2t)(S + 1)/2^{K+64}⌋ ≤ ⌊(q + D)/2^{K+64}⌋ with D = (2t + 1)S + 2^K + 2t.
    When q mod 2^{K+64} < 2^{K+64} − D both are ⌊q/2^{K+64}⌋, exact; otherwise (probability about 2^{−47} a
    threshold) it is recomputed alone in Arb (:func:`scaled_floor`). The same integers as an Arb ball per
    threshold, about seven times faster (Python integers instead of Arb calls).
    """
    import flint  # imported where used (start-up of `dpopt verify`)

    k = bits + 64
    r = _floor_of(lambda: (-flint.arb(flint.fmpq(1, t))).exp(), k)
    e1 = scaled_floor(("unit", 1), k)
    s = _floor_of(lambda: 1 / (1 - (-flint.arb(1)).exp()), bits + 64)
    shift = k + 64
    mask, limit, base = (1 << shift) - 1, (1 << shift) - ((2 * t + 1) * s + (1 << k) + 2 * t), e1 + 1
    out, power = [], 1 << k
    append = out.append
    for u in range(1, t):
        power = (power * r) >> k
        q = (power - base) * s
        append(q >> shift if q & mask < limit else scaled_floor(("truncated", u, t), bits))
    return _Thresholds(out, bits)


def unit_geometric(rng: np.random.Generator, size: int, bits: int | None = None) -> np.ndarray:
    """``size`` draws of G with P(G ≥ v) = e^{−v}, v = 0, 1, … (int64): G = #{v ≥ 1 : U < e^{−v}}.

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of uniform words.
    size : int
        Number of draws.
    bits : int, optional
        Word size (default :data:`WORD_BITS`; smaller in tests, so that ties are frequent).
    """
    bits = WORD_BITS if bits is None else bits
    words = _words(rng, size, bits)
    out, tied = _unit_thresholds(bits).count(words)
    for i in np.flatnonzero(tied):  # G ≥ out[i] is decided; the comparisons from v = out[i] + 1 on are not
        prefix, v = [int(words[i])], int(out[i])
        while _below(prefix, ("unit", v + 1), rng, bits):
            v += 1
        out[i] = v
    return out


def truncated_geometric(rng: np.random.Generator, t: int, size: int, bits: int | None = None) -> np.ndarray:
    """``size`` draws of X on {0, …, t − 1} with P(X = u) ∝ e^{−u/t} (int64), 1 ≤ t ≤ :data:`MAX_TABLE_T`.

    X = #{u ∈ 1..t−1 : U < (e^{−u/t} − e^{−1})/(1 − e^{−1})}; ``bits`` as in :func:`unit_geometric`.
    """
    if not 1 <= t <= MAX_TABLE_T:
        raise ValueError(f"the tabulated truncated geometric needs 1 ≤ t ≤ {MAX_TABLE_T} (got {t})")
    bits = WORD_BITS if bits is None else bits
    if t == 1:
        return np.zeros(size, dtype=np.int64)
    words = _words(rng, size, bits)
    out, tied = _truncated_thresholds(t, bits).count(words)
    for i in np.flatnonzero(tied):  # the comparisons with u ≤ out[i] are decided, the later ones may not be
        prefix, u = [int(words[i])], int(out[i])
        while u + 1 < t and _below(prefix, ("truncated", u + 1, t), rng, bits):
            u += 1
        out[i] = u
    return out
