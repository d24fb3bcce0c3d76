r"""Bernoulli(p) for rational p, exactly: uniform 64-bit words against the binary expansion of p.

A uniform real U ∈ [0, 1) is read as the binary fraction of independent uniform words W₁ W₂ … of b bits.
With c_j = ⌊2^{jb} p⌋ and P_j the integer of the first j words, P_j < c_j proves U < p and P_j > c_j
proves U ≥ p; only P_j = c_j needs the next word (probability 2^{−b} a word), and when 2^{jb}p is an
integer, P_j = c_j proves U ≥ p. So

.. math:: P[\text{keep}] = P[U < p] = p

exactly, for every rational p = a/c ∈ [0, 1] (the doubles among them included: a double is a dyadic
rational). Every decision is an integer comparison; no floating-point number enters it. The first word
is compared for all draws at once (numpy uint64); ties go on word by word in Python integers.

This is the same inversion as :mod:`dpopt.noise.exp_inversion`, for rational rather than irrational
thresholds.

References
----------
.. [1] L. Devroye, *Non-Uniform Random Variate Generation*, Springer 1986, §III.2 (inversion).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

WORD_BITS = 64
"""Bits of one uniform word (one raw 64-bit output of the Generator's bit generator)."""


def word_thresholds(probabilities: list[Fraction], bits: int = WORD_BITS) -> np.ndarray:
    """c₁ = ⌊2^b p⌋ of each p ∈ [0, 1] as uint64 (p = 1 gives 2^b − 1 with the tie never going on:
    :func:`bernoulli_rational` decides p = 1 apart)."""
    out = []
    for p in probabilities:
        p = Fraction(p)
        if not 0 <= p <= 1:
            raise ValueError(f"a probability must lie in [0, 1] (got {p})")
        out.append(min((p.numerator << bits) // p.denominator, (1 << bits) - 1))
    return np.array(out, dtype=np.uint64)


def _tie(rng: np.random.Generator, p: Fraction, first: int, bits: int) -> bool:
    """U < p given that the first word equals ⌊2^b p⌋: the next words, one at a time, in Python integers."""
    prefix, shift = first, bits
    while True:
        c = (p.numerator << shift) // p.denominator
        if prefix != c:
            return prefix < c
        if (p.numerator << shift) % p.denominator == 0:  # 2^{jb}p an integer: U ≥ p
            return False
        prefix = (prefix << bits) | int(rng.integers(0, 1 << bits, dtype=np.uint64))
        shift += bits


def bernoulli_rational(rng: np.random.Generator, probabilities: list[Fraction], index: np.ndarray,
                       bits: int = WORD_BITS) -> np.ndarray:
    """One exact Bernoulli draw per entry of ``index``: draw i is 1 with probability ``probabilities[index[i]]``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of uniform words (one word a draw, more only on a tie).
    probabilities : list of Fraction
        A table of rationals in [0, 1] (doubles are converted exactly by :class:`~fractions.Fraction`).
    index : numpy.ndarray
        Which entry of the table each draw uses.
    bits : int, optional
        Word size (smaller in tests, so that ties are frequent).
    """
    table = [Fraction(p) for p in probabilities]
    thresholds = word_thresholds(table, bits)
    index = np.asarray(index, dtype=np.int64)
    words = rng.integers(0, 1 << bits, size=index.size, dtype=np.uint64)
    c = thresholds[index]
    out = words < c
    certain = np.array([p == 1 for p in table], dtype=bool)[index]
    out[certain] = True
    for i in np.flatnonzero((words == c) & ~certain):
        out[i] = _tie(rng, table[index[i]], int(words[i]), bits)
    return out


def bernoulli_chunk(rng: np.random.Generator, chunks: np.ndarray, num: np.ndarray, den: int,
                    bits: int) -> np.ndarray:
    """Bernoulli(num/den) per place from the uniform ``bits``-bit word C already drawn for it, exactly.

    C is compared with c = ⌊2^b·num/den⌋ without forming c: C < c ⟺ (C + 1)·den ≤ 2^b·num (U < num/den, true),
    C > c ⟺ C·den > 2^b·num (false), and the tie C = c goes on word by word (:func:`_tie`, probability 2^{−b}).

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of the words after a tie.
    chunks : numpy.ndarray
        uint64 words below 2^b, one a place.
    num : numpy.ndarray
        int64 numerators, 0 ≤ num ≤ den.
    den : int
        The denominator, with 2^b·den < 2^64 (every product above fits in uint64).
    bits : int
        b, the size of the words.
    """
    den64 = np.uint64(den)
    scaled = num.view(np.uint64) << np.uint64(bits)
    low = chunks * den64
    at_most = np.flatnonzero(low <= scaled)  # C ≤ c: the rest are false
    out = np.zeros(chunks.size, dtype=bool)
    below = low[at_most] + den64 <= scaled[at_most]
    out[at_most] = below
    for i in at_most[~below]:  # C = c
        out[i] = _tie(rng, Fraction(int(num[i]), den), int(chunks[i]), bits)
    return out
