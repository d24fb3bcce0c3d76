"""The discrete Gaussian sampler's step envelope (``dpopt.noise.discrete_gaussian``): its thresholds, its bucket
inversion, one round of it and its batches, each against a law derived independently of the sampler.

* **Thresholds**: ⌊2^64 S_i/S₀⌋ against the masses w·e^{−(bw)²q/2p} and the tail e^{−M₀²q/2p}/(1 − e^{−M₀q/p})
  summed by mpmath at 60 digits (error below 10^{−40} relative: it cannot move a floor unless 2^64·x is within
  10^{−15} of an integer, checked).
* **Enumeration** (the method and helpers of ``test_exact_sampler_law``, 4-bit words so that the ties between a
  word and a threshold happen often and are enumerated too): the bucket's law against mass_i/S₀ (mpmath); one round,
  the bucket drawn from that stated law and the other components from theirs (CKS Algorithm 1's trials, the
  geometrics, the Python-integer Bernoulli: each checked word by word elsewhere), against N_ℤ(0, p/q) normalised by
  Poisson summation. ``_REACH_SIGMAS`` and ``MAX_BUCKETS`` are lowered so that the tail (M ≥ M₀) carries much of the
  envelope or the buckets are 2 wide: every path of the round (offset and first trial from one word, from
  uniform integers, the tail, the sign) is taken with enumerable probability. A wrong exponent, offset, bit field or
  threshold moves some output's probability by at least one enumerated leaf (≥ 10⁻⁴ here).
* **Bernoulli from a given word** (``dpopt.noise.bernoulli.bernoulli_chunk``): every word of 1–3 bits and the words
  after a tie, against num/den exactly.
* **One place at a time**: a G-test of 20,000 draws of size 1 against the pmf, its power against N_ℤ(0, 1.3σ²)
  computed from the noncentral χ² and asserted ≥ 0.99 (the batches' G-tests are in ``test_exact_sampler_law``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from test_exact_sampler_law import (
    _g_test,
    _gaussian_pmf,
    assert_bracketed,
    assert_round_law,
    component_laws,  # noqa: F401  (a fixture)
    enumerate_law,
    four_bit_words,  # noqa: F401  (a fixture)
)

from dpopt.noise import discrete_gaussian, exp_inversion
from dpopt.noise.bernoulli import bernoulli_chunk
from dpopt.noise.discrete_gaussian import MAX_BUCKETS, _envelope, _gaussian_candidates, sample_discrete_gaussian

mpmath.mp.dps = 40


def _masses(p: int, q: int, width: int, buckets: int) -> list:
    """mass_b = w e^{−(bw)²q/2p} (b < B) and the tail's f(M₀)/(1 − e^{−M₀q/p}), M₀ = Bw, normalised (mpmath); with
    w = 1 every mass but mass_0 doubled (both signs)."""
    c = mpmath.mpf(q) / (2 * p)
    reach = width * buckets
    both = 2 if width == 1 else 1
    masses = [(both if b else 1) * width * mpmath.exp(-c * (b * width) ** 2) for b in range(buckets)]
    masses.append(both * mpmath.exp(-c * reach * reach) / (1 - mpmath.exp(-mpmath.mpf(reach * q) / p)))
    total = mpmath.fsum(masses)
    return [m / total for m in masses]


@pytest.fixture
def small_envelope(monkeypatch):
    """Set the envelope's reach (in σ) and its most buckets; the cached envelopes are dropped before and after."""
    def set_envelope(reach_sigmas: int, buckets: int) -> None:
        monkeypatch.setattr(discrete_gaussian, "_REACH_SIGMAS", reach_sigmas)
        monkeypatch.setattr(discrete_gaussian, "MAX_BUCKETS", buckets)
        _envelope.cache_clear()

    yield set_envelope
    _envelope.cache_clear()


@pytest.mark.parametrize("p,q", [(773249021, 1), (5, 2), (2**40 + 3 * 2**19, 1), (2464559, 128)])
def test_thresholds_agree_with_mpmath(p, q):
    env = _envelope(p, q, 64, discrete_gaussian._CHUNK_BITS)
    sigma = math.sqrt(p / q)
    assert env.width & (env.width - 1) == 0 and env.buckets <= MAX_BUCKETS and env.reach >= 10 * sigma
    assert env.width == 1 or env.width * env.reach * q <= p  # γ ≤ 1 in the buckets
    with mpmath.workdps(60):
        suffix, running = [], mpmath.mpf(0)
        for m in _masses(p, q, env.width, env.buckets)[::-1]:
            running += m
            suffix.append(running)
        suffix = suffix[::-1]  # S_i/S₀ for i = 0 … B
        table = env.table.values[:-1]
        for i in sorted({1, 2, 3, env.buckets // 3, env.table.size - 1, env.table.size, env.buckets} & set(
                range(1, env.buckets + 1))):
            x = suffix[i] * mpmath.mpf(2) ** 64
            assert abs(x - mpmath.nint(x)) > 1e-15
            exact = int(mpmath.floor(x))
            if i <= env.table.size:
                assert int(table[i - 1]) == exact, i
            else:  # past the table: the thresholds are 0 (the table ends with its first 0)
                assert exact == 0 and int(table[-1]) == 0, i
            assert env.floors(64)[i - 1] == exact
            y = suffix[i] * mpmath.mpf(2) ** 128  # the second word's floors, for the ties
            assert env.floors(128)[i - 1] == int(mpmath.floor(y)), i


@pytest.mark.parametrize("p,q,reach_sigmas,buckets", [(1, 4, 10, MAX_BUCKETS), (5, 2, 10, MAX_BUCKETS),
                                                        (10, 1, 1, 2), (16, 1, 1, 3)])
def test_bucket_inversion_is_exact(four_bit_words, small_envelope, p, q, reach_sigmas, buckets):  # noqa: F811
    """The bucket I of one place, 4-bit words, against mass_i/S₀ (the tail included where it is enumerable)."""
    small_envelope(reach_sigmas, buckets)
    env = _envelope(p, q, exp_inversion.WORD_BITS, discrete_gaussian._CHUNK_BITS)
    law, residual = enumerate_law(lambda rng: int(env.draw_buckets(rng, 1)[0]))
    exact = dict(enumerate(_masses(p, q, env.width, env.buckets)))
    assert_bracketed(law, residual, exact)


@pytest.fixture
def fraction_law(monkeypatch):
    """The Python-integer Bernoulli(num/den) of the tail's acceptance drawn as two branches (its limbs are
    enumerated in ``test_wide_discrete_gaussian``)."""
    def bernoulli(rng, num, den):
        p = mpmath.mpf(num) / den
        return bool(rng.law([(1, p), (0, 1 - p)], mpmath.mpf(0), 1)[0] == 1)

    monkeypatch.setattr(discrete_gaussian, "_bernoulli_fraction", bernoulli)


@pytest.mark.parametrize("p,q,reach_sigmas,buckets,path", [
    (1, 4, 1, MAX_BUCKETS, "w = 1"),  # M₀ = 1: the bucket {0} and the tail
    (1, 1, 1, MAX_BUCKETS, "w = 1"),
    (400, 1, 5, 51, "one word"),  # w = 2, B = 51, M₀ = 102 ≥ 5σ: wM₀ ≤ σ², offset, trial and sign from one word
    (5, 2, 1, 1, "uniform integers"),  # w = 2, B = 1, M₀ = 2: wM₀q = 8 > p, γ beyond 1 (bernoulli_exp), the tail
])
def test_round_is_exact(four_bit_words, small_envelope, component_laws, fraction_law, monkeypatch,  # noqa: F811
                        p, q, reach_sigmas, buckets, path):
    small_envelope(reach_sigmas, buckets)
    monkeypatch.setattr(discrete_gaussian, "_CHUNK_BITS", 2)  # 1 offset bit, 2 bits of trial, 1 sign bit
    env = _envelope(p, q, exp_inversion.WORD_BITS, 2)
    assert {"w = 1": env.width == 1, "one word": env.width > 1 and env.one_word,
            "uniform integers": env.width > 1 and not env.one_word}[path]
    bucket_law = list(enumerate(_masses(p, q, env.width, env.buckets)))
    monkeypatch.setattr(discrete_gaussian._Envelope, "draw_buckets",
                        lambda self, rng, size: rng.law(bucket_law, mpmath.mpf(0), size))
    sigma2 = mpmath.mpf(p) / q
    # the tail's trials branch deeper: a residual up to 10⁻⁵, still far below the ≥ 10⁻³ a wrong exponent moves
    assert_round_law(lambda rng: _gaussian_candidates(rng, p, q, 1), {y: _gaussian_pmf(sigma2, y) for y in range(-8, 9)},
                     1e-5)


@pytest.mark.parametrize("bits", [1, 2, 3])
@pytest.mark.parametrize("num,den", [(0, 3), (1, 3), (2, 3), (3, 3), (1, 4), (3, 8), (5, 7)])
def test_bernoulli_from_a_given_word_is_exact(bits, num, den):
    def draw(rng):
        chunk = np.array([rng.integers(0, 1 << bits, size=1, dtype=np.uint64)[0]], dtype=np.uint64)
        return bool(bernoulli_chunk(rng, chunk, np.array([num], dtype=np.int64), den, bits)[0])

    law, residual = enumerate_law(draw)
    assert_bracketed(law, residual, {True: mpmath.mpf(num) / den, False: 1 - mpmath.mpf(num) / den})


def test_one_place_at_a_time_fits_the_pmf():
    """20,000 calls of size 1 at σ² = 5/2 (bins −4 … 4, the tails pooled: each expects ≥ 240 draws)."""
    p, q, n = 5, 2, 20_000
    rng = np.random.default_rng(21)
    draws = np.array([sample_discrete_gaussian(rng, p, q, 1)[0] for _ in range(n)])
    edges = np.arange(-4, 6) - 0.5  # bins: y < −4, {−4}, …, {4}, y > 4

    def binned(sigma2):
        pmf = [_gaussian_pmf(sigma2, y) for y in range(-4, 5)]
        tail = (1 - mpmath.fsum(pmf)) / 2
        return [tail, *pmf, tail]

    g, threshold, power = _g_test(draws, edges, binned(mpmath.mpf(p) / q), binned(mpmath.mpf(p) / q * mpmath.mpf("1.3")))
    assert power >= 0.99
    assert g <= threshold, f"G = {g:.1f} above its 1e-6 quantile {threshold:.1f}"


@pytest.mark.parametrize("p,seed", [(773249021, 31), (2**30 + 2**21, 32)])
def test_wide_buckets_have_the_stated_moments(p, seed):
    """w = 128 (one word per place for the offset, the trial and the sign), 400,000 draws: the mean within 4 standard
    errors of 0 and the variance within 4 of σ² (Var N_ℤ(0, σ²) = σ² to 10⁻³⁰⁰ relative at σ² ≥ 16, Poisson
    summation; the sample variance's standard error is σ²√(2/n) = 0.22%, so a 3% error in the variance is 13 of
    them)."""
    env = _envelope(p, 1, 64, discrete_gaussian._CHUNK_BITS)
    assert env.width == 128 and env.one_word
    n = 400_000
    draws = sample_discrete_gaussian(np.random.default_rng(seed), p, 1, n).astype(float)
    assert abs(draws.mean()) <= 4 * math.sqrt(p / n)
    assert abs(draws.var() / p - 1) <= 4 * math.sqrt(2 / n)
