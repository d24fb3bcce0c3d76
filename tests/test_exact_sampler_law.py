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
from dpopt.noise.discrete_gaussian import _gaussian_candidates
from dpopt.noise.discrete_laplace import (
    _bernoulli_exp_unit,
    _laplace_candidates,
    _uniform_candidates,
    bernoulli_exp,
    redraw_rejected,
)
from dpopt.noise.exp_inversion import _Thresholds, scaled_floor, truncated_geometric, unit_geometric

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


@pytest.mark.parametrize("num,den", [(0, 1), (1, 3), (2, 3), (3, 3)])
def test_algorithm_1_has_probability_e_to_minus_gamma_exactly(num, den):
    law, residual = enumerate_law(lambda rng: bool(_bernoulli_exp_unit(rng, np.array([num]), den)[0]))
    assert_bracketed(law, residual, {True: mpmath.exp(-mpmath.mpf(num) / den)})


@pytest.mark.parametrize("num,den", [(7, 3), (2, 1)])
def test_bernoulli_exp_with_a_whole_part_is_exact(four_bit_words, num, den):
    law, residual = enumerate_law(lambda rng: bool(bernoulli_exp(rng, np.array([num]), den)[0]))
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


def assert_round_law(candidates, exact: dict) -> None:
    """Rejection sampling redraws a place until a candidate is accepted, each round independent
    (:func:`test_rejected_places_are_redrawn_independently`), so the output law is the law of an accepted
    round's value: P(y) = P(y, accepted)/P(accepted). One round is enumerated and P(y) bracketed:
    [f_y/(A + r), (f_y + r)/A] from the found masses f_y, A and the residual r."""
    law, residual = enumerate_law(lambda rng: tuple(int(a[0]) for a in candidates(rng)), mpmath.mpf(10) ** -9)
    accepted = mpmath.fsum(p for (y, ok), p in law.items() if ok)
    assert residual < 1e-6
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


@pytest.mark.parametrize("p,q", [(1, 4), (1, 1), (5, 2), (10, 1)])
def test_discrete_gaussian_round_is_exact(component_laws, monkeypatch, p, q):
    """One round of CKS Algorithm 3, its discrete Laplace proposal drawn from its stated law (|y| ≤ 60)."""
    t = math.isqrt(p // q) + 1
    proposal = [(y, _laplace_pmf(Fraction(t), y)) for y in range(-60, 61)]
    tail = 1 - mpmath.fsum(w for _, w in proposal)
    monkeypatch.setattr(discrete_gaussian, "sample_discrete_laplace", lambda rng, t_, s_, n: rng.law(proposal, tail, n))
    sigma2 = mpmath.mpf(p) / q
    assert_round_law(lambda rng: _gaussian_candidates(rng, p, q, 1), {y: _gaussian_pmf(sigma2, y) for y in range(-6, 7)})
