r"""The exponential mechanism's law over finitely many candidates, sampled exactly by rejection.

For integer scores s_1, …, s_c and a rational scale λ ≥ 0 the law is

.. math:: P[i] = \frac{e^{\lambda s_i}}{\sum_j e^{\lambda s_j}} .

Rejection from the uniform law: a candidate i is proposed uniformly (an exact uniform integer) and accepted with
probability e^{−γ_i}, γ_i = λ(s* − s_i) ≥ 0 (s* the best score), by Canonne, Kamath & Steinke's
Bernoulli(exp(−γ)) for rational γ (2020, Algorithm 1; :func:`dpopt.noise.discrete_laplace.bernoulli_exp_split`:
integer comparisons of uniform words only). A round accepts i with probability e^{−γ_i}/c; the rounds are
independent, so the first accepted candidate has law (e^{−γ_i}/c)/Σ_j (e^{−γ_j}/c) = P[i] exactly (the geometric
series over rejected rounds). The best candidate is always accepted, so a round succeeds with probability ≥ 1/c.

Each round proposes ``width`` candidates per pending draw at once and keeps the first accepted of them: the same
law as proposing one at a time. Not covered: the running time, which depends on the scores (the rounds).

References
----------
.. [1] F. McSherry and K. Talwar, "Mechanism design via differential privacy", FOCS 2007.
.. [2] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020,
   Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpopt.noise.discrete_laplace import bernoulli_exp_split

WHOLE_CAP = 2**62
"""Whole parts of an acceptance exponent above this are capped to it: the capped and exact draws differ only when
a unit geometric reaches 2^62, probability e^{−2^62}."""

ROUND_PROPOSALS = 1 << 14
"""Proposals drawn per round over all pending draws (at least one per draw)."""


def acceptance_exponents(scores: Sequence[int], scale: Fraction) -> tuple[np.ndarray, np.ndarray, int]:
    """γ_i = λ(s* − s_i) of every candidate as (whole parts, numerators of the fractional parts, their common
    denominator D = den(λ)), int64: a candidate is accepted with probability e^{−γ_i}.

    Raises
    ------
    ValueError
        λ < 0, or D ≥ 2^62 (beyond the Bernoulli sampler's int64 range).
    """
    scale = Fraction(scale)
    if scale < 0 or scale.denominator >= 2**62:
        raise ValueError(f"the exponential mechanism's scale must be a rational ≥ 0 with a denominator below 2^62 "
                         f"(got {scale})")
    values = [int(s) for s in scores]
    best = max(values)
    if scale.numerator * (best - min(values)) < 2**63:  # every numerator fits int64: numpy
        whole, frac = np.divmod(scale.numerator * (best - np.array(values, dtype=np.int64)), scale.denominator)
        return whole, frac, scale.denominator
    parts = [divmod(scale.numerator * (best - s), scale.denominator) for s in values]
    whole = np.array([min(w, WHOLE_CAP) for w, _ in parts], dtype=np.int64)
    return whole, np.array([f for _, f in parts], dtype=np.int64), scale.denominator


def sample_exponential(scores: Sequence[int], scale: Fraction, rng: np.random.Generator, size: int = 1) -> np.ndarray:
    """``size`` independent draws (int64 indices) of P[i] ∝ exp(λ s_i), exactly (see the module).

    Parameters
    ----------
    scores : sequence of int
        The candidates' integer scores.
    scale : Fraction
        λ ≥ 0, with a denominator below 2^62.
    rng : numpy.random.Generator
        The source of uniform integers and words.
    size : int, optional
        Number of draws.
    """
    whole, frac, den = acceptance_exponents(scores, scale)
    count = len(whole)
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        width = max(1, min(count, ROUND_PROPOSALS // pending.size))
        proposed = rng.integers(0, count, size=(pending.size, width))
        accepted = bernoulli_exp_split(rng, whole[proposed], frac[proposed], den)
        hit = accepted.any(axis=1)
        first = accepted.argmax(axis=1)
        out[pending[hit]] = proposed[hit, first[hit]]
        pending = pending[~hit]
    return out
