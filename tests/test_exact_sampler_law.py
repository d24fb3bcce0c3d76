"""The exact samplers' output laws, by exhaustive enumeration of their random words and by goodness of fit.

**Enumeration.** A scripted generator hands the sampler every possible value of each uniform integer it asks
for (one branch each, probability 1/range), depth first; a branch whose probability falls below CUTOFF is left
unexplored and its mass counted as ``residual``. Every output's exact probability P then lies in
[P_found, P_found + residual]: the test asserts that the stated law's value (mpmath, 40 digits) lies there and
that the residual is small. Words are 4 bits wide (``exp_inversion.WORD_BITS`` patched), so the ties between
a word and a threshold — decided by further words — happen often and are enumerated too. A wrong comparison
(≤ for <, an off-by-one threshold) moves some probability by at least one leaf (≥ 1/(16·range)), far above the
residual.

**Goodness of fit.** The G-test (likelihood ratio) of 200,000 draws with a fixed seed against the pmf
normalised independently of the sampler (the discrete Gaussian's constant by Poisson summation,
Σ_k e^{−k²/2σ²} = σ√(2π) Σ_n e^{−2π²σ²n²}; the discrete Laplace's in closed form), the tails pooled into
one cell each side. It rejects at the 1 − 10⁻⁶ quantile of χ²_df (a correct sampler fails with probability
10⁻⁶); its power against a sampler with a 3% larger variance is computed in the test from the noncentral χ²
(λ = N Σ (p' − p)²/p, the asymptotic law of G under the alternative) and asserted ≥ 0.99.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpopt.noise import discrete_gaussian, discrete_laplace, exp_inversion
from dpopt.noise.discrete_gaussian import sample_discrete_gaussian
from dpopt.noise.discrete_laplace import (
    _bernoulli_exp_unit,
    _laplace_candidates,
    _uniform_candidates,
    bernoulli_exp,
    redraw_rejected,
    sample_discrete_laplace,
)
from dpopt.noise.exp_inversion import MAX_TABLE_T, _Thresholds, scaled_floor, truncated_geometric, unit_geometric

mpmath.mp.dps = 40
CUTOFF = mpmath.mpf(10) ** -7
N = 200_000
LEVEL = 1e-6


class _Need(Exception):
    """The script ran out: the sampler asks for a value with these (value, probability) branches."""

    def __init__(self, branches: list, tail: mpmath.mpf = mpmath.mpf(0)):
        self.branches, self.tail = branches, tail


class _Scripted:
    """A stand-in for numpy's Generator whose ``integers`` returns a fixed script, value by value; ``law``
    draws from a stated finite law (for the component samplers patched by :func:`component_laws`)."""

    def __init__(self, script: list):
        self.script, self.used = script, 0

    def _next(self, branches, tail=mpmath.mpf(0)):
        if self.used == len(self.script):
            raise _Need(branches, tail)
        self.used += 1
        return self.script[self.used - 1]

    def integers(self, low, high, size=None, dtype=np.int64):
        n = int(high) - int(low)
        values = [int(low) + self._next([(v, mpmath.mpf(1) / n) for v in range(n)]) for _ in range(size or 1)]
        return np.array(values, dtype=dtype) if size is not None else dtype(values[0])

    def law(self, branches, tail, size):
        return np.array([self._next(branches, tail) for _ in range(size)], dtype=np.int64)


def enumerate_law(draw, cutoff=CUTOFF) -> tuple[dict, mpmath.mpf]:
    """Every output of ``draw(rng)`` with its probability over all scripts down to ``cutoff``, and the mass left
    unexplored (branches below the cutoff and the tails of the stated laws)."""
    law: dict = {}
    residual = mpmath.mpf(0)
    stack = [([], mpmath.mpf(1))]
    while stack:
        script, p = stack.pop()
        try:
            out = draw(_Scripted(script))
        except _Need as need:
            residual += p * need.tail
            for v, q in need.branches:
                if p * q < cutoff:
                    residual += p * q
                else:
                    stack.append((script + [v], p * q))
            continue
        law[out] = law.get(out, mpmath.mpf(0)) + p
    return law, residual


def assert_bracketed(law: dict, residual: mpmath.mpf, exact: dict, largest_residual: float = 2e-3) -> None:
    """P_found ≤ P ≤ P_found + residual for every stated value P (40-digit arithmetic: 1e-30 of slack)."""
    assert residual < largest_residual
    for key, value in exact.items():
        found = law.get(key, mpmath.mpf(0))
        assert found <= value + mpmath.mpf(10) ** -30, (key, found, value)
        assert value <= found + residual + mpmath.mpf(10) ** -30, (key, found, value)


@pytest.fixture
def four_bit_words(monkeypatch):
    monkeypatch.setattr(exp_inversion, "WORD_BITS", 4)


@pytest.mark.parametrize("num,den", [(0, 1), (1, 3), (2, 3), pytest.param(3, 3, marks=pytest.mark.slow)])
def test_algorithm_1_has_probability_e_to_minus_gamma_exactly(num, den):
    law, residual = enumerate_law(lambda rng: bool(_bernoulli_exp_unit(rng, np.array([num]), den)[0]),
                                  mpmath.mpf(10) ** -6)
    assert_bracketed(law, residual, {True: mpmath.exp(-mpmath.mpf(num) / den)})


@pytest.mark.parametrize("num,den", [pytest.param(7, 3, marks=pytest.mark.slow), (2, 1)])
def test_bernoulli_exp_with_a_whole_part_is_exact(four_bit_words, num, den):
    law, residual = enumerate_law(lambda rng: bool(bernoulli_exp(rng, np.array([num]), den)[0]), mpmath.mpf(10) ** -6)
    assert_bracketed(law, residual, {True: mpmath.exp(-mpmath.mpf(num) / den)})


@pytest.mark.parametrize("bits", [2, 4])
def test_unit_geometric_tail_is_e_to_minus_v_exactly(bits):
    law, residual = enumerate_law(lambda rng: int(unit_geometric(rng, 1, bits)[0]))
    tails = {v: mpmath.fsum(p for g, p in law.items() if g >= v) for v in range(6)}
    assert_bracketed(tails, residual, {v: mpmath.exp(-v) for v in range(6)})


@pytest.mark.parametrize("t", [2, 3, 5])
def test_truncated_geometric_is_exact(t):
    law, residual = enumerate_law(lambda rng: int(truncated_geometric(rng, t, 1, 4)[0]))
    r = mpmath.exp(-mpmath.mpf(1) / t)
    assert_bracketed(law, residual, {u: r**u * (1 - r) / (1 - r**t) for u in range(t)})


def _laplace_pmf(scale: Fraction, y: int) -> mpmath.mpf:
    r = mpmath.exp(-mpmath.mpf(scale.denominator) / scale.numerator)
    return (1 - r) / (1 + r) * r ** abs(y)


@pytest.fixture
def component_laws(monkeypatch):
    """The components replaced by draws from their stated laws (each checked word by word above): the unit and
    truncated geometrics, and Algorithm 1's Bernoulli(num/(den·k)) (two branches instead of den·k uniform
    integers), so that the enumeration covers how Algorithms 1–3 combine them: Algorithm 1's rounds, U + tV,
    ⌊·/s⌋, the sign, the rejection of −0, the Gaussian acceptance. G stops at 19 (the tail e^{−20} is residual)."""
    e = mpmath.exp(-1)
    unit = [(g, e**g * (1 - e)) for g in range(20)]

    def truncated(rng, t, size, bits=None):
        r = mpmath.exp(-mpmath.mpf(1) / t)
        return rng.law([(u, r**u * (1 - r) / (1 - r**t)) for u in range(t)], mpmath.mpf(0), size)

    def ratio(rng, num, den, k):
        return np.array([rng.law([(1, p), (0, 1 - p)], mpmath.mpf(0), 1)[0] == 1
                         for p in (mpmath.mpf(int(m)) / (den * k) for m in num)], dtype=bool)

    monkeypatch.setattr(discrete_laplace, "unit_geometric", lambda rng, size, bits=None: rng.law(unit, e**20, size))
    monkeypatch.setattr(discrete_laplace, "truncated_geometric", truncated)
    monkeypatch.setattr(discrete_laplace, "_bernoulli_ratio", ratio)


def assert_round_law(candidates, exact: dict, largest_residual: float = 1e-6) -> None:
    """Rejection sampling redraws a place until a candidate is accepted, each round independent
    (:func:`test_rejected_places_are_redrawn_independently`), so the output law is the law of an accepted
    round's value: P(y) = P(y, accepted)/P(accepted). One round is enumerated and P(y) bracketed:
    [f_y/(A + r), (f_y + r)/A] from the found masses f_y, A and the residual r."""
    law, residual = enumerate_law(lambda rng: tuple(int(a[0]) for a in candidates(rng)), mpmath.mpf(10) ** -9)
    accepted = mpmath.fsum(p for (y, ok), p in law.items() if ok)
    assert residual < largest_residual
    for y, value in exact.items():
        found = law.get((y, 1), mpmath.mpf(0))
        slack = mpmath.mpf(10) ** -30  # 40-digit arithmetic; the bounds are attained when all the residual is accepted
        assert found / (accepted + residual) <= value + slack and value <= (found + residual) / accepted + slack, y


def test_rejected_places_are_redrawn_independently():
    """redraw_rejected: each place keeps the first accepted candidate drawn for it, rounds in order."""
    rounds = iter([(np.array([10, 11, 12, 13]), np.array([True, False, True, False])),
                   (np.array([21, 23]), np.array([False, True])),
                   (np.array([31]), np.array([True]))])
    sizes = []

    def draw(n):
        sizes.append(n)
        return next(rounds)

    assert redraw_rejected(draw, 4).tolist() == [10, 31, 12, 23] and sizes == [4, 2, 1]


@pytest.mark.parametrize("t,s", [(1, 1), (3, 2), (2, 5), (7, 3)])
def test_discrete_laplace_round_is_exact(component_laws, t, s):
    assert_round_law(lambda rng: _laplace_candidates(rng, t, s, 1),
                     {y: _laplace_pmf(Fraction(t, s), y) for y in range(-5, 6)})


@pytest.mark.parametrize("t", [2, 3, 7])
def test_truncated_geometric_by_rejection_is_exact(component_laws, t):
    """The U of CKS Algorithm 2 for t beyond the tables: a uniform kept with probability e^{−U/t}."""
    r = mpmath.exp(-mpmath.mpf(1) / t)
    assert_round_law(lambda rng: _uniform_candidates(rng, t, 1),
                     {u: r**u * (1 - r) / (1 - r**t) for u in range(t)})


def _gaussian_normaliser(sigma2: mpmath.mpf) -> mpmath.mpf:
    """Σ_k e^{−k²/(2σ²)} by Poisson summation: σ√(2π) Σ_n e^{−2π²σ²n²} (n up to 12: the rest < e^{−700σ²})."""
    return mpmath.sqrt(2 * mpmath.pi * sigma2) * mpmath.fsum(
        mpmath.exp(-2 * mpmath.pi**2 * sigma2 * n * n) for n in range(-12, 13))


def _gaussian_pmf(sigma2: mpmath.mpf, y: int) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(y * y) / (2 * sigma2)) / _gaussian_normaliser(sigma2)


# ---- goodness of fit -------------------------------------------------------------------------------------------

GOF_DRAWS = 500_000


def _binned_law(pmf, width: int) -> tuple[np.ndarray, list]:
    """Bins of ``width`` (odd) integers centred on the multiples of ``width``, out to the last bin that expects
    5 of GOF_DRAWS draws and beyond which each tail still expects 20, and their masses from the stated pmf, the tails pooled
    (y < first edge; y ≥ last edge) and put first and last. The laws are symmetric."""
    half_bin = (width - 1) // 2
    pmf_cache: dict = {}

    def mass(j):  # the bin centred on j·width
        if j not in pmf_cache:
            pmf_cache[j] = mpmath.fsum(pmf(y) for y in range(j * width - half_bin, j * width + half_bin + 1))
        return pmf_cache[j]

    tail, j = (1 - mass(0)) / 2, 0
    while GOF_DRAWS * (tail - mass(j + 1)) >= 20 and GOF_DRAWS * mass(j + 1) >= 5:
        j += 1
        tail -= mass(j)
    edges = np.arange(-j * width - half_bin, (j + 1) * width - half_bin + 1, width)
    return edges, [tail] + [mass(i) for i in range(-j, j + 1)] + [tail]
def _g_test(draws: np.ndarray, edges: np.ndarray, masses: list, alternative: list) -> tuple[float, float, float]:
    """G = 2 Σ O ln(O/E) over the bins, its 1 − LEVEL quantile under the stated law (χ²_{bins−1}), and its power
    against ``alternative``: the noncentral χ² with λ = N Σ (p' − p)²/p."""
    observed = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=len(masses))
    p = np.array([float(m) for m in masses])
    alt = np.array([float(m) for m in alternative])
    expected = draws.size * p
    assert expected.min() >= 5, "every bin, the tails included, expects at least 5 draws"
    seen = observed > 0
    g = 2.0 * float(np.sum(observed[seen] * np.log(observed[seen] / expected[seen])))
    df = len(masses) - 1
    threshold = float(stats.chi2.isf(LEVEL, df))
    power = float(stats.ncx2.sf(threshold, df, draws.size * float(np.sum((alt - p) ** 2 / p))))
    return g, threshold, power


@pytest.mark.parametrize("p,q,seed", [(1, 1, 1), (5, 2, 2), (100, 1, 3), (10**6, 1, 4)])
def test_discrete_gaussian_fits_its_pmf_tails_included(p, q, seed):
    """Bins about σ/10 wide, the tails pooled beyond the bins; the alternative is N_ℤ(0, 1.03σ²)."""
    width = 2 * math.floor(math.sqrt(p / q) / 20) + 1
    law = _gaussian_law(mpmath.mpf(p) / q)
    edges, masses = _binned_law(law, width)
    alternative = _binned_at(_gaussian_law(mpmath.mpf(p) / q * mpmath.mpf("1.03")), edges)
    draws = sample_discrete_gaussian(np.random.default_rng(seed), p, q, GOF_DRAWS)
    g, threshold, power = _g_test(draws, edges, masses, alternative)
    assert power >= 0.99
    assert g <= threshold, f"G = {g:.1f} above its 1e-6 quantile {threshold:.1f}"


@pytest.mark.parametrize("t,s,seed", [(1, 1, 5), (10, 1, 6), (1000, 1, 7), (2**17 + 1, 2**10, 8)])
def test_discrete_laplace_fits_its_pmf_tails_included(t, s, seed):
    """Bins about b/10 wide (b = t/s; t = 2^17 + 1 takes CKS's rejection path, beyond the tables), the tails
    pooled; the alternative is the scale 1.03b."""
    width = 2 * math.floor(t / s / 20) + 1
    edges, masses = _binned_law(_laplace_law(Fraction(t, s)), width)
    alternative = _binned_at(_laplace_law(Fraction(t, s) * Fraction(103, 100)), edges)
    draws = sample_discrete_laplace(np.random.default_rng(seed), t, s, GOF_DRAWS)
    g, threshold, power = _g_test(draws, edges, masses, alternative)
    assert power >= 0.99
    assert g <= threshold, f"G = {g:.1f} above its 1e-6 quantile {threshold:.1f}"


def _gaussian_law(sigma2: mpmath.mpf):
    norm = _gaussian_normaliser(sigma2)
    return lambda y: mpmath.exp(-mpmath.mpf(y * y) / (2 * sigma2)) / norm


def _laplace_law(scale: Fraction):
    r = mpmath.exp(-mpmath.mpf(scale.denominator) / scale.numerator)
    c = (1 - r) / (1 + r)
    return lambda y: c * r ** abs(y)


def _binned_at(pmf, edges: np.ndarray) -> list:
    """The masses of another law in the same bins (tails pooled)."""
    inner = [mpmath.fsum(pmf(y) for y in range(int(a), int(b))) for a, b in zip(edges[:-1], edges[1:])]
    tail = (1 - mpmath.fsum(inner)) / 2
    return [tail] + inner + [tail]


def test_thresholds_agree_with_an_independent_evaluation():
    """⌊2^64 e^{−v}⌋ and the truncated geometric's ⌊2^64 P(X ≥ u)⌋ (the table's Arb power recurrence) against
    mpmath at 60 digits, whose error (< 10^{−40} relative) cannot move a floor unless 2^64·x is within
    10^{−20} of an integer (checked)."""
    with mpmath.workdps(60):
        for v in range(1, 46):
            x = mpmath.exp(-v) * mpmath.mpf(2) ** 64
            assert abs(x - mpmath.nint(x)) > 1e-20
            assert scaled_floor(("unit", v), 64) == int(mpmath.floor(x))
        t = 1001
        table = exp_inversion._truncated_thresholds(t, 64).values
        e1 = mpmath.exp(-1)
        for u in (1, 2, 500, 999, 1000):
            x = (mpmath.exp(-mpmath.mpf(u) / t) - e1) / (1 - e1) * mpmath.mpf(2) ** 64
            assert int(table[u - 1]) == int(mpmath.floor(x))


@pytest.mark.parametrize("t,bits", [(2, 8), (7, 16), (300, 14), (4097, 64), (MAX_TABLE_T, 64)])
def test_integer_threshold_recurrence_equals_each_threshold_in_arb(t, bits):
    """The table's integer power recurrence (enclosure of 2^K e^{−u/t}) against each threshold evaluated alone as
    an Arb ball at increasing precision (:func:`scaled_floor`, the sampler's exact reference), every u for small
    t, a spread of u (ends included) for the largest."""
    exp_inversion._truncated_thresholds.cache_clear()
    table = exp_inversion._truncated_thresholds(t, bits).values
    assert table.size == t  # t − 1 thresholds and the 0 past the end
    us = range(1, t) if t < 5000 else sorted({1, 2, 3, t // 2, t - 2, t - 1, *range(1, t, 997)})
    for u in us:
        assert int(table[u - 1]) == scaled_floor(("truncated", u, t), bits), u


@pytest.mark.parametrize("bits,table", [(14, "unit"), (14, "truncated")])
def test_guide_table_counts_every_word_like_a_linear_scan(bits, table):
    """All 2^14 words: #{i : c_i > W} and the tie flag from the guide table (buckets of 4 words, several
    thresholds in the low buckets) equal a direct scan of the thresholds."""
    found = exp_inversion._unit_thresholds(bits) if table == "unit" else exp_inversion._truncated_thresholds(300, bits)
    c = found.values[:-1].astype(np.int64)
    words = np.arange(1 << bits, dtype=np.uint64)
    count, tied = found.count(words)
    scan = (c[None, :] > words.astype(np.int64)[:, None]).sum(axis=1)
    assert np.array_equal(count, scan)
    following = np.append(c, -1)[scan]  # past the last threshold: no tie
    assert np.array_equal(tied, following == words.astype(np.int64))
