r"""An exact Bernoulli(p) for a real p known only through enclosing intervals (a lazy comparison).

Draw a uniform U ∈ [0, 1) bit by bit: after j bits, U lies in the dyadic cell [m/2^j, (m+1)/2^j). Ask for an
interval [lo, hi] ∋ p at a working precision above j bits (an arb ball of python-flint, whose bounds are exact
dyadic numbers); return 1 if (m+1)/2^j ≤ lo (then U < p whatever the next bits), 0 if m/2^j ≥ hi (U ≥ p), and
otherwise draw 64 more bits and ask again at a higher precision. Every decision is an exact comparison of
integers. Since the output is 1 exactly when U < p and U is uniform,

.. math:: P[\text{output} = 1] = P[U < p] = p

exactly (the enclosures only decide *when* the comparison is settled, never its outcome). A comparison goes on
past j bits only when U falls within the enclosure's width of p, probability about 2^{−j}·(1 + the width's
bits), so the expected number of words is 1 + O(2^{−64}); a p that is itself dyadic and whose enclosures never
shrink to the point is still settled with probability one (the unsettled cell shrinks to p).

This is the lazy inversion of Devroye (1986, §III.2) with interval arithmetic in place of exact arithmetic; it
serves any probability that arb can enclose to any precision, e.g. exp(−x) for a real x
(:mod:`dpopt.noise.discrete_generalized_gaussian`). For a rational p, :mod:`dpopt.noise.bernoulli` compares in
rationals directly.

References
----------
.. [1] L. Devroye, *Non-Uniform Random Variate Generation*, Springer 1986, §III.2 (inversion) and §IV.5
   (series methods: decisions from converging bounds).
.. [2] F. Johansson, "Arb: efficient arbitrary-precision midpoint-radius interval arithmetic", IEEE Trans.
   Computers 66(8), 2017 (the enclosures).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from dpopt._lazy import lazy_module

flint = lazy_module("flint")  # python-flint loads in ~0.1 s: on first use

WORD_BITS = 64
"""Bits drawn at a time (one raw 64-bit word of the Generator)."""

GUARD_BITS = 32
"""Working precision above the bits drawn so far."""

MAX_BITS = 1 << 14
"""Bits of U after which an enclosure that still has not settled the comparison is taken as not converging
(a correct enclosure leaves it unsettled that long with probability about 2^{−16000})."""

Probability = Callable[[], "flint.arb"]
"""An enclosure of p: evaluated with ``flint.ctx.prec`` set to the working precision, it returns an arb ball
containing p, whose width shrinks to 0 as the precision grows."""


def _scaled_bounds(probability: Probability, bits: int) -> tuple[int, int]:
    """(⌊2^bits·lo⌋, ⌈2^bits·hi⌉) of the enclosure [lo, hi] evaluated at working precision bits + GUARD_BITS (flint's
    precision restored after): exact integer shifts of the ball's dyadic end points."""
    saved = flint.ctx.prec
    flint.ctx.prec = bits + GUARD_BITS
    try:
        ball = probability()
        if not isinstance(ball, flint.arb) or not ball.is_finite():
            raise ValueError(f"a probability enclosure must be a finite arb ball (got {ball!r})")
        lo_man, lo_exp = (int(v) for v in ball.lower().man_exp())
        hi_man, hi_exp = (int(v) for v in ball.upper().man_exp())
    finally:
        flint.ctx.prec = saved
    return _shift_floor(lo_man, lo_exp + bits), -_shift_floor(-hi_man, hi_exp + bits)


def _shift_floor(man: int, shift: int) -> int:
    """⌊man·2^shift⌋ (Python's >> floors)."""
    return man << shift if shift >= 0 else man >> -shift


def _settle(rng: np.random.Generator, probability: Probability, prefix: int, bits: int) -> bool:
    """U < p, given U's first ``bits`` bits (the integer ``prefix``, U ∈ [prefix, prefix + 1)/2^bits): more words until
    an enclosure settles it (prefix + 1 ≤ 2^bits·lo: U < p; prefix ≥ 2^bits·hi: U ≥ p)."""
    while bits <= MAX_BITS:
        lo, hi = _scaled_bounds(probability, bits)
        if prefix + 1 <= lo:
            return True
        if prefix >= hi:
            return False
        prefix = (prefix << WORD_BITS) | int(rng.integers(0, 1 << WORD_BITS, dtype=np.uint64))
        bits += WORD_BITS
    raise ValueError(f"the probability's enclosure did not settle the comparison within {MAX_BITS} bits")


def bernoulli_lazy(rng: np.random.Generator, probability: Probability) -> bool:
    """One exact Bernoulli(p) draw: True with probability exactly p (module docstring).

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of uniform 64-bit words (one word a draw, more only when U falls next to p).
    probability : callable
        ``probability()`` returns an arb ball containing p ∈ [0, 1] at the current ``flint.ctx.prec``, e.g.
        ``lambda: (-flint.arb(x)).exp()``.

    Examples
    --------
    >>> import flint, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> draws = [bernoulli_lazy(rng, lambda: flint.arb(1).exp() ** -1) for _ in range(1000)]
    >>> 300 < sum(draws) < 440        # e^{-1} = 0.368; 4.6 standard errors either side
    True
    """
    return bool(bernoulli_lazy_many(rng, [probability], np.zeros(1, dtype=np.int64))[0])


def bernoulli_lazy_many(rng: np.random.Generator, probabilities: Sequence[Probability],
                        index: np.ndarray) -> np.ndarray:
    """One exact Bernoulli draw per entry of ``index``: draw i is True with probability ``probabilities[index[i]]``.

    Each table entry is enclosed once at 64 + :data:`GUARD_BITS` bits; the first word of every draw is compared
    with those bounds at once (as integers: w ≤ ⌊2^64·lo⌋ − 1 settles U < p, w ≥ ⌈2^64·hi⌉ settles U ≥ p), and only
    the draws left unsettled go on word by word (:func:`_settle`).
    """
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    words = rng.integers(0, 1 << WORD_BITS, size=index.size, dtype=np.uint64)
    out = np.zeros(index.size, dtype=bool)
    if index.size == 0:
        return out
    top = (1 << WORD_BITS) - 1
    bounds = [_scaled_bounds(probability, WORD_BITS) for probability in probabilities]
    # w + 1 ≤ ⌊2^64·lo⌋ settles U < p; w ≥ ⌈2^64·hi⌉ settles U ≥ p (thresholds clamped into uint64, with masks)
    below = [lo - 1 for lo, _ in bounds]
    above = [hi for _, hi in bounds]
    can_yes = np.array([b >= 0 for b in below], dtype=bool)[index]
    can_no = np.array([a <= top for a in above], dtype=bool)[index]
    yes = can_yes & (words <= np.array([min(max(b, 0), top) for b in below], dtype=np.uint64)[index])
    no = can_no & (words >= np.array([min(max(a, 0), top) for a in above], dtype=np.uint64)[index])
    out[yes] = True
    undecided = ~(yes | no)
    for i in np.flatnonzero(undecided):
        out[i] = _settle(rng, probabilities[index[i]], int(words[i]), WORD_BITS)
    return out
