"""The lazy exact Bernoulli (dpopt.noise.lazy_bernoulli): its decisions are U < p for the U its words spell, and its
frequency matches p.

Expected values: exact rational comparisons (1/3) and e^{-1/3} from mpmath; statistical tolerances 4 standard
errors, derived where used.
"""

from __future__ import annotations

import math

import flint
import mpmath
import numpy as np
import pytest

from dpopt.noise.lazy_bernoulli import bernoulli_lazy, bernoulli_lazy_many


class RecordingGenerator:
    """A numpy Generator whose 64-bit words are recorded in the order drawn."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.words: list[int] = []

    def integers(self, low, high, size=None, dtype=np.int64):
        out = self.rng.integers(low, high, size=size, dtype=dtype)
        self.words.extend(int(w) for w in np.atleast_1d(out))
        return out


def _wide_third():
    """An enclosure of 1/3 of radius 2^(96 − prec): at the first word's precision (96 bits) it is [1/3 ± 1] ⊃ [0, 1], so
    every draw goes on to a second word, where it is 2^-63 wide (a third word: probability about 2^-62 a draw)."""
    prec = flint.ctx.prec
    return flint.arb(flint.fmpq(1, 3), flint.arb(2) ** (96 - prec))


def test_each_decision_is_u_below_p_for_the_words_drawn():
    rng = RecordingGenerator(7)
    n = 2000
    out = bernoulli_lazy_many(rng, [_wide_third], np.zeros(n, dtype=np.int64))
    first, rest = rng.words[:n], rng.words[n:]
    assert len(rest) == n  # every draw took exactly one more word (the enclosure forces it)
    for decided, w1, w2 in zip(out, first, rest):
        prefix = (w1 << 64) | w2  # U ∈ [prefix, prefix + 1)/2^128
        if decided:
            assert 3 * (prefix + 1) <= 1 << 128  # U < 1/3 whatever the later bits
        else:
            assert 3 * prefix >= 1 << 128  # U ≥ 1/3


def test_frequency_matches_an_irrational_probability():
    # p = e^{-1/3} (mpmath); n = 40000 draws: SE = sqrt(p(1 − p)/n) = 0.00235, tolerance 4 SE. A sampler off by
    # 0.015 (6.4 SE) would fail with probability above 0.98.
    p = float(mpmath.exp(-mpmath.mpf(1) / 3))
    rng = np.random.default_rng(2026)
    draws = bernoulli_lazy_many(rng, [lambda: (-flint.arb(flint.fmpq(1, 3))).exp()], np.zeros(40_000, dtype=int))
    se = math.sqrt(p * (1 - p) / draws.size)
    assert abs(draws.mean() - p) < 4 * se


def test_table_of_probabilities_and_single_draws():
    # three entries: 0, 1 (exact balls: decided at once) and 1/2 (dyadic, exact ball)
    rng = np.random.default_rng(3)
    table = [lambda: flint.arb(0), lambda: flint.arb(1), lambda: flint.arb(flint.fmpq(1, 2))]
    index = np.repeat([0, 1, 2], 10_000)
    out = bernoulli_lazy_many(rng, table, index)
    assert not out[:10_000].any() and out[10_000:20_000].all()
    # 1/2: SE = 0.005, tolerance 4 SE
    assert abs(out[20_000:].mean() - 0.5) < 0.02
    assert bernoulli_lazy(rng, lambda: flint.arb(1)) is True


def test_an_enclosure_that_never_narrows_is_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="did not settle"):
        bernoulli_lazy(rng, lambda: flint.arb(flint.fmpq(1, 3), flint.fmpq(1, 2)))
