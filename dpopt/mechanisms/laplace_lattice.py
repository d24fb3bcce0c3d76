r"""Exact pure-ε measurement of integer counts with discrete Laplace noise (the Laplace strategies' lattice path).

A Laplace strategy measures blocks of counts, y_S = M_S x + η_S, with M_S an integer matrix (a marginal, or an
integer strategy factor) and η_S i.i.d. discrete Laplace of scale t_S on ℤ,

.. math:: P[\eta = k] = \frac{1 - r}{1 + r}\, r^{|k|}, \qquad r = e^{-1/t_S},

sampled exactly in integer arithmetic (Canonne, Kamath & Steinke 2020, Algorithm 2;
:func:`~dpopt.noise.discrete_laplace.sample_discrete_laplace`). Everything released is computed from the
integers y_S (post-processing), so no floating-point number that depends on both the data and the noise is formed.

**Privacy.** For an integer shift v, P[η = k]/P[η = k − v] = e^{(|k − v| − |k|)/t} ≤ e^{|v|/t} (triangle
inequality), and independent coordinates multiply: neighbouring datasets that shift block S by an integer vector of
l1 norm at most Δ_S give a privacy-loss ratio at most exp(Σ_S Δ_S/t_S) at every output, i.e. pure
ε = Σ_S Δ_S/t_S — the continuous Laplace mechanism's ε with b_S = t_S. It is a sum of rationals, compared with the
decimal target as written (:func:`~dpopt.core.decimals.written`) in exact arithmetic.

**Scales.** t_S is the continuous design's scale b_S rounded **up** to p/2^k with p ≤ 2^16 (:func:`lattice_scale`;
at most 2^-15 relative), so Σ_S Δ_S/t_S ≤ Σ_S Δ_S/b_S ≤ ε, and the sampler draws its truncated geometric by exact
inversion (scale numerators up to 2^16, :data:`~dpopt.noise.exp_inversion.MAX_TABLE_T`).

**Variance.** Var η = 2r/(1 − r)² = 1/(2 sinh²(1/(2t))) = 2t² − 1/6 + O(t^{-2}) < 2t²: at the same scale the
discrete Laplace has slightly *less* variance than Laplace(t) (:func:`discrete_laplace_variance`).

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
   (arXiv:2004.00010), Algorithm 2.
.. [2] I. Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.decimals import written
from dpopt.noise.discrete_laplace import discrete_laplace_moments, sample_discrete_laplace
from dpopt.noise.exp_inversion import MAX_TABLE_T
from dpopt.spec.models import Privacy

MAX_EXPONENT = 40
"""Finest grid 2^-40 of a lattice scale: a scale below 2^-24 is rounded up by more than 2^-16 relative (its noise is
0 except with probability below 2e^{-2^24})."""

EXACT_LAPLACE_NOTE = (
    "exact measurement: each measured block of integer counts gets i.i.d. discrete Laplace noise sampled in "
    "integer arithmetic (Canonne, Kamath & Steinke 2020, Algorithm 2); pure ε = Σ Δ_S/t_S exactly (integer "
    "shifts of l1 norm Δ_S); the released numbers are computed from those integers alone (post-processing), so "
    "the guarantee covers the numbers as computed. Randomness: the numpy Generator passed to release (dpopt "
    "release: AES-CTR CSPRNG keyed from OS entropy unless --insecure-seed). Not covered: timing (the sampler's "
    "running time depends on the noise drawn, not on the data)"
)


def lattice_scale(scale: Fraction) -> Fraction:
    """The smallest p/2^k ≥ ``scale`` with p ≤ 2^16 (k ≤ :data:`MAX_EXPONENT`; k = 0 above 2^16): rounded up, the
    private side."""
    x = Fraction(scale)
    if x <= 0:
        raise ValueError(f"a discrete Laplace scale must be positive (got {scale})")
    k = 0
    while k < MAX_EXPONENT and -((-x.numerator * 2 ** (k + 1)) // x.denominator) <= MAX_TABLE_T:
        k += 1
    return Fraction(-((-x.numerator * 2**k) // x.denominator), 2**k)


def discrete_laplace_variance(scale: Fraction) -> float:
    """Var of the discrete Laplace of scale t: 2r/(1 − r)², r = e^{−1/t} (closed form; ``expm1`` for 1 − r)."""
    return discrete_laplace_moments(float(scale))["second_moment"]


def lattice_variance_weights(kappa: dict, weights: dict, algebra, lattice: dict) -> dict:
    """The weights κ_T²/ν_T of the least squares' T-components on the lattice, ν_T = Σ_{S⊇T} θ_S⁴·co-size(S)·
    Var DL(t_S): marginal S measured with weight θ_S and discrete Laplace noise of scale t_S
    (:func:`discrete_laplace_variance`) contributes to every component T ⊆ S (the marginal families' module
    docstrings; for Laplace(b) the weights are κ_T/(2b²))."""
    nu: dict = {}
    for s, w in weights.items():
        term = w**4 * algebra.co_size(s) * discrete_laplace_variance(lattice[s])
        for t in kappa:
            if set(t) <= set(s):
                nu[t] = nu.get(t, 0.0) + term
    return {t: k * k / nu[t] for t, k in kappa.items()}


def pure_epsilon(terms: list[tuple[Fraction, Fraction]]) -> Fraction:
    """ε = Σ Δ_S/t_S over (Δ_S, t_S), exactly."""
    return sum((Fraction(d) / Fraction(t) for d, t in terms), Fraction(0))


def lattice_pure_check(terms: list[tuple[Fraction, Fraction]], privacy: Privacy, how: str) -> Check:
    """``privacy``: Σ_S Δ_S/t_S ≤ ε (the decimal as written), in exact rational arithmetic (module docstring)."""
    if privacy.definition != "pure":
        return Check("privacy", "exact discrete Laplace measurement", False,
                     f"certified for pure ε only, not {privacy.definition}")
    eps = pure_epsilon(terms)
    target = privacy.parameters["epsilon"]
    return Check("privacy",
                 f"independent discrete Laplace blocks under integer shifts (ratio ≤ e^{{‖v‖₁/t}} per coordinate; "
                 f"CKS 2020): ε = Σ_S Δ_S/t_S with {how}, exact rational arithmetic against the written target; "
                 "the release is post-processing of the integer measurements",
                 eps <= written(target), f"Σ Δ_S/t_S = {eps} ≈ {float(eps):.17g} vs ε = {target}")


def sample_blocks(rng: np.random.Generator, scales: dict, shapes: dict, size: int) -> dict:
    """For each key, ``size`` int64 tables of its shape, i.i.d. discrete Laplace of its scale: one sampler call per
    distinct scale, split in the order of the keys."""
    groups: dict[Fraction, list] = {}
    for key, t in scales.items():
        groups.setdefault(Fraction(t), []).append(key)
    out = {}
    for t, keys in groups.items():
        counts = [size * math.prod(shapes[key]) for key in keys]
        draws = sample_discrete_laplace(rng, t.numerator, t.denominator, sum(counts))
        start = 0
        for key, n in zip(keys, counts):
            out[key] = draws[start:start + n].reshape((size,) + tuple(shapes[key]))
            start += n
    return out
