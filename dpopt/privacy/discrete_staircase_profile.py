r"""Exact privacy-loss distribution of the discrete staircase under integer shifts, and its (ε, δ), ρ-zCDP and
μ-GDP profiles over listed moves.

The discrete staircase (:mod:`dpopt.noise.discrete_staircase`) has p(k) = b^{L(k)}/Z on ℤ, b = e^{−ε'},
L(k) = ⌊(|k| + m − r)/m⌋, Z = 2(r + (m − r)b)/(1 − b) − 1. Against its shift by an integer t > 0 the privacy loss
of an output k is

.. math:: \ell(k) = \log\frac{p(k)}{p(k - t)} = \varepsilon'\,\bigl(L(k - t) - L(k)\bigr) \in \varepsilon'\{-K, …, K\},
          \qquad K = \lceil t/m \rceil ,

and its law under p is a finite pmf, computed exactly from integer counts (derived): for k ≤ 0 and for k ≥ t both
levels L(k) and L(k − t) rise by one when k moves one period m away from the shift (|k| and |k − t| grow by m), so
L(k − t) − L(k) is periodic there and p falls by b per period: the mass of each loss value over k ≤ 0 is 1/(1 − b)
times its mass over the period {−(m − 1), …, 0}, and over k ≥ t, 1/(1 − b) times that over {t, …, t + m − 1};
{1, …, t − 1} is finite. Each mass is thus Σ c·b^λ/Z over integer counts c of (loss, level λ) pairs
(:func:`level_counts`), evaluated in 60 digits. A shift by −t has the same law (k ↦ −k; p is even). Independent
coordinates add their losses: a move's pmf is the convolution of its coordinates' pmfs
(:func:`~dpopt.privacy.staircase_profile.staircase_move_pmf`'s rule), and from it

- δ(ε) = Σ_j P[ℓ = jε'](1 − e^{ε − jε'})₊, the exact hockey-stick divergence (Meiser & Mohammadi 2018);
- D_α = log(Σ_j P_j e^{(α−1)jε'})/(α − 1), certified ≤ ρα on Arb balls for every order
  (:func:`~dpopt.privacy.staircase_profile.staircase_renyi_ball`, :func:`~dpopt.privacy.zcdp.renyi_zcdp_holds`);
- the trade-off function T(P, Q): the loss takes finitely many values, so by Neyman–Pearson (randomised tests on
  the atoms) T is exactly the piecewise-linear curve through the cumulative masses
  (:class:`~dpopt.privacy.staircase_profile.LossPMFTradeOff`; Dong, Roth & Su 2022, Prop. 2.2), symmetric because
  k ↦ t − k maps the pair onto its reverse; T ≥ G_μ is certified by branch and bound
  (:func:`~dpopt.privacy.gdp_check.gdp_margin`).

These are the continuous staircase's profiles (:mod:`dpopt.privacy.staircase_profile`) for the law on the lattice:
the support is ℤ, so only the counts differ (lengths of intervals there, numbers of integers here).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.privacy.gdp_check import gdp_margin
from dpopt.privacy.staircase_profile import (
    LossPMFTradeOff,
    convolve_pmfs,
    loss_pmf_delta,
    staircase_renyi_ball,
)
from dpopt.privacy.zcdp import renyi_zcdp_holds

mpmath = lazy_module("mpmath")

_MP_DIGITS = 60

MAX_ENUMERATED = 2**20
"""Most integers (a period m plus the t − 1 outputs between 0 and the shift) enumerated per coordinate: a law or a
move beyond it has no exact profile here (its design goes through ε-DP)."""


def profile_feasible(step: int, moves: Sequence[Sequence[Fraction]] | None) -> bool:
    """Whether every move lists integer shifts and each coordinate's enumeration stays within
    :data:`MAX_ENUMERATED`."""
    if not moves:
        return False
    shifts = [Fraction(t) for move in moves for t in move]
    return all(t.denominator == 1 for t in shifts) and int(step) + int(max(shifts)) <= MAX_ENUMERATED


def _level(k: np.ndarray, step: int, boundary: int) -> np.ndarray:
    return (np.abs(k) + step - boundary) // step


def level_counts(step: int, boundary: int, shift: int) -> dict[tuple[int, int, bool], int]:
    """{(j, λ, periodic): c}: c outputs k of one period of each outer region (``periodic``) or of the finite middle
    {1, …, t − 1} with loss jε' and level L(k) = λ, for the shift t = |``shift``| > 0 (module docstring)."""
    m, r, t = int(step), int(boundary), abs(int(shift))
    regions = ((np.arange(-(m - 1), 1, dtype=np.int64), True), (np.arange(t, t + m, dtype=np.int64), True),
               (np.arange(1, t, dtype=np.int64), False))
    counts: dict[tuple[int, int, bool], int] = {}
    for k, periodic in regions:
        if not k.size:
            continue
        level = _level(k, m, r)
        loss = _level(k - t, m, r) - level
        pairs, c = np.unique(np.stack([loss, level]), axis=1, return_counts=True)
        for (j, lam), n in zip(pairs.T.tolist(), c.tolist()):
            counts[(j, lam, periodic)] = counts.get((j, lam, periodic), 0) + n
    return counts


def discrete_loss_pmf(epsilon: Fraction, step: int, boundary: int, shift: int) -> dict[int, mpmath.mpf]:
    """{j: P[ℓ = jε']} of one discrete staircase coordinate (ε' = ``epsilon``, m = ``step``, r = ``boundary``)
    against its shift by the integer ``shift`` ≠ 0: Σ c·b^λ/Z (times 1/(1 − b) on the periodic regions) over
    :func:`level_counts`, in 60 digits (it sets that precision itself)."""
    m, r = int(step), int(boundary)
    with mpmath.workdps(_MP_DIGITS):
        e = Fraction(epsilon)
        b = mpmath.exp(-mpmath.mpf(e.numerator) / e.denominator)
        one_minus_b = -mpmath.expm1(-mpmath.mpf(e.numerator) / e.denominator)
        z = 2 * (r + (m - r) * b) / one_minus_b - 1
        pmf: dict[int, mpmath.mpf] = {}
        for (j, lam, periodic), c in level_counts(m, r, shift).items():
            mass = c * b**lam / z / (one_minus_b if periodic else 1)
            pmf[j] = pmf.get(j, mpmath.mpf(0)) + mass
        return pmf


def discrete_move_pmf(epsilon: Fraction, step: int, boundary: int,
                      shifts: Sequence[Fraction | int]) -> dict[int, mpmath.mpf]:
    """{j: P[ℓ = jε']} of i.i.d. discrete staircase noise against a move whose non-zero |v_i| are ``shifts``: the
    convolution of the coordinates' pmfs (:func:`discrete_loss_pmf`), 60 digits."""
    law: dict[int, mpmath.mpf] = {0: mpmath.mpf(1)}
    cache: dict[int, dict[int, mpmath.mpf]] = {}
    for t in shifts:
        t = abs(int(t))
        if t:
            if t not in cache:
                cache[t] = discrete_loss_pmf(epsilon, step, boundary, t)
            law = convolve_pmfs(law, cache[t])
    return law


def _move_text(move) -> str:
    return f"|v| = {tuple(int(t) for t in move)}"


def discrete_delta(epsilon: float, law: tuple[Fraction, int, int], moves) -> tuple[mpmath.mpf, tuple]:
    """max over ``moves`` of the exact δ(ε) of the discrete staircase ``law`` = (ε', m, r), and the worst move."""
    e = law[0]
    return max(((loss_pmf_delta(discrete_move_pmf(*law, move), epsilon, e), move) for move in moves),
               key=lambda pair: pair[0])


_ORDERS = 1 + np.logspace(-6, 3, 400)
"""Orders α at which :func:`discrete_renyi_estimate` evaluates D_α/α (the search's estimate of ρ)."""


def discrete_renyi_estimate(law: tuple[Fraction, int, int], moves) -> float:
    """max over ``moves`` and the orders :data:`_ORDERS` of D_α/α in double precision (log-sum-exp over the pmf):
    the search's estimate of the smallest ρ; :func:`discrete_zcdp` certifies. For the discrete Laplace (m = 1) the
    supremum is the Kullback–Leibler limit α → 1; the grid does not assume it of every (m, r, move)."""
    best = 0.0
    for move in moves:
        pmf = discrete_move_pmf(*law, move)
        losses = np.array([float(law[0] * j) for j in pmf])
        logp = np.array([float(mpmath.log(mass)) if mass > 0 else -np.inf for mass in pmf.values()])
        a = _ORDERS[:, None] - 1
        exponent = logp[None, :] + a * losses[None, :]
        top = exponent.max(axis=1)
        log_sum = top + np.log(np.exp(exponent - top[:, None]).sum(axis=1))
        best = max(best, float(np.max(log_sum / (a[:, 0] * _ORDERS))))
    return best


def discrete_zcdp(rho: float, law: tuple[Fraction, int, int], moves) -> tuple[bool, str]:
    """D_α ≤ ρα for every order α > 1 and every move, certified on Arb balls from each move's exact pmf (the
    largest loss of a move is ε' max j)."""
    detail = ""
    for move in moves:
        pmf = discrete_move_pmf(*law, move)
        top = law[0] * max(j for j, mass in pmf.items() if mass > 0)
        passed, detail = renyi_zcdp_holds(staircase_renyi_ball(pmf, law[0]), top, rho)
        if not passed:
            return False, f"move {_move_text(move)}: {detail}"
    return True, f"{len(moves)} move pattern(s); the last: {detail}"


def discrete_tradeoff(law: tuple[Fraction, int, int], move) -> LossPMFTradeOff:
    """The exact trade-off function of the discrete staircase against ``move`` (module docstring)."""
    return LossPMFTradeOff(discrete_move_pmf(*law, move), law[0])


def discrete_gdp(mu: float, law: tuple[Fraction, int, int], moves) -> tuple[bool, str]:
    """T ≥ G_μ for every move, T the exact piecewise-linear trade-off function (:func:`discrete_tradeoff`),
    certified by the branch and bound of :func:`~dpopt.privacy.gdp_check.gdp_margin`."""
    detail = ""
    for move in moves:
        margin = gdp_margin(discrete_tradeoff(law, move), mu)
        detail = f"{margin.method}; μ observed {margin.mu_observed:.17g}"
        if not margin.passed:
            return False, f"move {_move_text(move)}: {detail}"
    return True, f"{len(moves)} move pattern(s); the last: {detail}"


__all__ = ["MAX_ENUMERATED", "discrete_delta", "discrete_gdp", "discrete_loss_pmf", "discrete_move_pmf",
           "discrete_renyi_estimate", "discrete_tradeoff", "discrete_zcdp", "level_counts", "profile_feasible"]
