r"""The discrete Gaussian law N_ℤ(0, σ²) on ℤ, its moments and its exact sampler
(Canonne, Kamath & Steinke 2020).

Sampling is CKS Algorithm 3: with t = ⌊σ⌋ + 1, draw Y from the discrete Laplace of
scale t and accept it with probability exp(−(|Y| − σ²/t)²/(2σ²)); the product of the two
is proportional to exp(−Y²/(2σ²)). With σ² = p/q the exponent is (|Y|tq − p)²/(2pqt²), a
ratio of integers, split into its whole part (a unit geometric G ≥ whole, probability
e^{−whole}) and its fraction (CKS Algorithm 1): every accept/reject decision is an integer
comparison of uniform words, no floating-point number enters it
(:mod:`dpopt.noise.exp_inversion`). All candidates of a round are drawn at once, as numpy
arrays, and only the rejected places are drawn again.

The int64 round's range (σ² ≤ 2^30, numerator < 2^31, denominator ≤ 2^30) keeps a = |Y|tq − p
within int64 except for |Y| ≥ 2^62/(tq) (probability below e^{−2^16}; Python integers); a²
may not fit, and the division of a² by 2pqt² is done exactly in uint64 arithmetic
(:func:`_divmod_square`). There, whole parts at or above 2^40 − 1 are capped at 2^40: the
capped and exact samplers differ only if G ≥ 2^40 − 1, probability e^{−(2^40 − 1)}.

**Beyond int64** (:func:`_wide_candidates`, σ² = p/q ≥ 1 up to :data:`MAX_WIDE_SIGMA2`). The same round,
with the exponent never squared in full: with s = tq and |a| = Ms + R (0 ≤ R < s, M ≥ 0, from |Y| − ⌊p/s⌋ and
p mod s in int64),

.. math:: \frac{a^2}{2pqt^2} = \frac{q(M + R/s)^2}{2p}
   = \underbrace{\frac{qM^2}{2p}}_{\gamma_1} + \underbrace{\frac{qM}{p}\cdot\frac{R}{s}}_{\gamma_2}
   + \underbrace{\frac{R}{s}\cdot\frac{R}{s}\cdot\frac{q}{2p}}_{\gamma_3},

and Bernoulli(e^{−γ}) is the product of independent Bernoulli(e^{−γ_i}). γ₁ (numerator and denominator in int64)
takes the whole/fraction split above; γ₂ and γ₃ are products of fractions at most 1 (qM ≤ p, R < s, q ≤ 2p), so
CKS Algorithm 1's Bernoulli(γ/k) is a product of independent Bernoulli(n_i/d_i) and Bernoulli(1/k), each one
uniform int64 word against an integer (:func:`_bernoulli_exp_product`). Candidates with qM > p or qM² ≥ 2^62
(|Y| beyond about σ²: probability about e^{−σ} at large σ) are decided one by one in Python integers
(:func:`_bernoulli_exp_fraction`), exactly. The wide path's whole parts at or above 2^62 are rejected (G ≥ 2^62
has probability e^{−2^62}).

**Timing.** The sampler never sees the confidential value: the noise is drawn first and
added afterwards, so the random words consumed and the rounds run depend only on σ² and on
the noise drawn. The running time does depend on the noise (rejection rounds, ties resolved
by further words), which this module does not hide.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithm 3.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.noise import discrete_gaussian_tail, discrete_laplace
from dpopt.noise.discrete_laplace import bernoulli_exp_split, redraw_rejected, sample_discrete_laplace
from dpopt.noise.marginal import Marginal

_WHOLE_CAP = 2**40
"""Whole parts of the acceptance exponent at or above this are capped to it (module docstring)."""

MAX_WIDE_SIGMA2 = 2**60
"""Largest σ² the sampler serves (the wide path, :func:`_wide_candidates`; p < 2^61, q ≤ 2^30)."""

TABULATED_MAX_SIGMA2 = 2**30
"""Largest σ² whose law :class:`DiscreteGaussianMarginal` tabulates (40σ entries, 10 MB at 2^30); above, and in
:func:`discrete_gaussian_moments`, the closed forms of :mod:`dpopt.noise.discrete_gaussian_tail`."""

_LIMB_BITS = 62
"""Bits of one int64 word of a uniform integer beyond int64 (:func:`_bernoulli_fraction`; smaller in tests)."""


class DiscreteGaussianMarginal(Marginal):
    r"""N_ℤ(0, σ²): pmf ∝ exp(−k²/(2σ²)) on ℤ (Canonne, Kamath & Steinke 2020).

    Up to σ² = :data:`TABULATED_MAX_SIGMA2`, tabulated: normalised by the sum over |k| ≤ ⌈40σ⌉ + 10 (the rest is
    below e^{−800}). Above, in closed form with nothing of size σ formed (:mod:`dpopt.noise.discrete_gaussian_tail`):
    the normaliser σ√(2π) (Poisson summation), P(W > k) by Euler–Maclaurin taken at the upper end of its proven
    error bracket (≤ σ⁻⁴/120 wide), so a quantile read from it (the smallest k with P(W > k) ≤ α) is never too
    small; E|W| and E W² = σ² in closed form.
    """

    lattice = True

    def __init__(self, sigma2: float):
        if not (sigma2 > 0 and math.isfinite(sigma2)):
            raise ValueError(f"σ² must be positive and finite (got {sigma2})")
        self.sigma2 = float(sigma2)
        self.sub_gaussian = self.sigma2  # E e^{tW} ≤ e^{t²σ²/2} (CKS 2020, Corollary 9)
        self._closed = self.sigma2 > TABULATED_MAX_SIGMA2
        if self._closed:
            self._log_norm = math.log(math.sqrt(2.0 * math.pi * self.sigma2))
            return
        top = int(math.ceil(40.0 * math.sqrt(self.sigma2))) + 10
        k = np.arange(0, top + 1, dtype=float)
        half = np.exp(-k * k / (2.0 * self.sigma2))
        self._log_norm = math.log(2.0 * float(half[1:].sum()) + 1.0)
        pmf = half * math.exp(-self._log_norm)
        self._tail = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(W > k), k = 0..top

    @property
    def key(self) -> tuple:
        return ("discrete_gaussian", self.sigma2)

    @property
    def scale(self) -> float:
        return max(1.0, math.sqrt(self.sigma2))

    def log_density(self, x):
        k = np.asarray(x, dtype=float)
        return -k * k / (2.0 * self.sigma2) - self._log_norm

    def tail(self, x):
        if self._closed:
            return discrete_gaussian_tail.tail_upper(self.sigma2, np.maximum(np.floor(np.asarray(x, dtype=float)), 0))
        k = np.clip(np.floor(np.asarray(x, dtype=float)), 0, self._tail.size - 1).astype(int)
        return self._tail[k]

    def abs_moment(self, p: float) -> float:
        """E|W|^p: summed over the window when tabulated; in closed form above (p = 1: Euler–Maclaurin; p = 2:
        σ², Poisson summation)."""
        if not self._closed:
            return super().abs_moment(p)
        if p == 2.0:
            return self.sigma2
        if p == 1.0:
            return discrete_gaussian_tail.mean_abs_with_error(self.sigma2)[0]
        raise ValueError(f"E|W|^{p:g} of N_Z(0, σ²) above σ² = 2^30 is stated for p = 1 and 2 only")


def discrete_gaussian_moments(sigma2: float, gamma: float | None = None) -> dict[str, float]:
    """E|Y|, E[Y²], E[Y⁴] and, given γ, P(|Y| ≤ γ) of N_Z(0, σ²), by summing the series in float64.

    Terms beyond |y| = 40σ + 2 are below e^{−800} of the largest and are left out. Above σ² =
    :data:`TABULATED_MAX_SIGMA2`, the closed forms (:func:`dpopt.noise.discrete_gaussian_tail.moments`).
    """
    if sigma2 > TABULATED_MAX_SIGMA2:
        return discrete_gaussian_tail.moments(sigma2, gamma)
    top = math.ceil(40.0 * math.sqrt(sigma2) + 2)
    y = np.arange(-top, top + 1, dtype=float)
    w = np.exp(-(y * y) / (2.0 * sigma2))
    w /= w.sum()
    out = {
        "mean_abs": float(np.sum(w * np.abs(y))),
        "second_moment": float(np.sum(w * y * y)),
        "fourth_moment": float(np.sum(w * y**4)),
    }
    if gamma is not None:
        out["within"] = float(np.sum(w[np.abs(y) <= gamma]))
    return out


def _gaussian_candidates(rng: np.random.Generator, p: int, q: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of CKS Algorithm 3: Y ~ discrete Laplace of scale t = ⌊σ⌋ + 1 and the Bernoulli of
    exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−a²/den), a = |Y|tq − p, den = 2pqt², whole and fractional parts in
    integers (:func:`_divmod_square`)."""
    t = math.isqrt(p // q) + 1
    den = 2 * p * q * t * t
    y = sample_discrete_laplace(rng, t, 1, size)
    magnitude = np.abs(y)
    fits = magnitude < 2**62 // (t * q)  # a fits in int64 (|Y| beyond: probability below e^{−2^16})
    whole, frac = _divmod_square(np.where(fits, magnitude, 0) * (t * q) - p, den)
    for i in np.flatnonzero(~fits):
        w, frac[i] = divmod((int(magnitude[i]) * t * q - p) ** 2, den)
        whole[i] = min(w, _WHOLE_CAP)
    return y, bernoulli_exp_split(rng, whole, frac, den)


def _divmod_square(a: np.ndarray, den: int) -> tuple[np.ndarray, np.ndarray]:
    """(⌊a²/den⌋, a² mod den) for int64 a and den < 2^62, exactly (when some |a| ≥ 2^31, whole parts at or
    above 2^40 − 1 are capped at :data:`_WHOLE_CAP`).

    Below 2^31, int64 division. Beyond, a² leaves int64, so the whole part w is guessed in floating point
    (relative error below 2^−50 of a value below 2^40: off by at most 1) and then checked in integers: r = a² − w·den is computed modulo 2^64
    (uint64 arithmetic wraps), and w is right exactly when r < den (for w off by ±1, r is den + frac or
    2^64 − den + frac, both ≥ den since 2den < 2^63). Off by one, w moves towards the side r shows. The
    floating-point value only proposes; the decision is the integer check.
    """
    if not a.size or int(np.abs(a).max()) < 2**31:  # a² < 2^62: int64 suffices
        return np.divmod(a * a, den)
    guess = np.floor(np.square(a.astype(np.float64)) / float(den))
    capped = guess >= _WHOLE_CAP
    whole = np.where(capped, _WHOLE_CAP, guess).astype(np.int64)
    magnitude = np.abs(a).astype(np.uint64)
    den64 = np.uint64(den)
    rest = magnitude * magnitude - whole.astype(np.uint64) * den64
    rest[capped] = 0  # w ≥ 2^40 − 1: rejected unless G ≥ 2^40 − 1 (module docstring)
    wrong = np.flatnonzero(rest >= den64)
    while wrong.size:
        low = rest[wrong] >= np.uint64(2**63)  # r "negative": w too large
        whole[wrong] += np.where(low, -1, 1)
        rest[wrong] = np.where(low, rest[wrong] + den64, rest[wrong] - den64)
        wrong = wrong[rest[wrong] >= den64]
    return whole, rest.astype(np.int64)


def _bernoulli_exp_product(rng: np.random.Generator, factors: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """Bernoulli(exp(−γ)) per place for γ = Π_i n_i/d_i, each int64 array 0 ≤ n_i ≤ d_i < 2^62 (CKS Algorithm 1).

    K ← 1; repeat A ~ Bernoulli(γ/K), K ← K + 1 while A = 1; return [K odd]. Bernoulli(γ/K) is the product of the
    independent Bernoulli(n_1/(d_1 K)) and Bernoulli(n_i/d_i), i ≥ 2 (:func:`~dpopt.noise.discrete_laplace._bernoulli_ratio`).
    """
    def trial(live: np.ndarray, k: int) -> np.ndarray:
        (n, d), rest = factors[0], factors[1:]
        accept = discrete_laplace._bernoulli_ratio(rng, n[live], d, k)
        for n_i, d_i in rest:
            accept &= discrete_laplace._bernoulli_ratio(rng, n_i[live], d_i, 1)
        return accept

    size = factors[0][0].size
    live = np.arange(size)
    out = np.zeros(size, dtype=bool)
    k = 1
    while live.size:
        accept = trial(live, k)
        if k % 2 == 1:
            out[live[~accept]] = True
        live = live[accept]
        k += 1
    return out


def _bernoulli_fraction(rng: np.random.Generator, num: int, den: int) -> bool:
    """Bernoulli(num/den) for Python integers 0 ≤ num ≤ den: a uniform integer below den (limbs of
    :data:`_LIMB_BITS` bits, rejected while ≥ den) compared with num."""
    bits = max(1, (den - 1).bit_length())
    while True:
        value, have = 0, 0
        while have < bits:
            value = (value << _LIMB_BITS) | int(rng.integers(0, 2**_LIMB_BITS, dtype=np.int64))
            have += _LIMB_BITS
        value >>= have - bits
        if value < den:
            return value < num


def _bernoulli_exp_fraction(rng: np.random.Generator, num: int, den: int) -> bool:
    """Bernoulli(exp(−num/den)) for Python integers num ≥ 0, den ≥ 1: G ≥ ⌊num/den⌋ (a unit geometric; whole parts
    at or above 2^62 rejected) and CKS Algorithm 1 on the fraction, Bernoulli(frac/(den·K)) by
    :func:`_bernoulli_fraction`."""
    whole, frac = divmod(num, den)
    if whole >= 2**62:
        return False
    if whole and int(discrete_laplace.unit_geometric(rng, 1)[0]) < whole:
        return False
    k = 1
    while _bernoulli_fraction(rng, frac, den * k):
        k += 1
    return k % 2 == 1


def _wide_candidates(rng: np.random.Generator, p: int, q: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of CKS Algorithm 3 for σ² = p/q ≥ 1 without squaring a (module docstring, "Beyond int64"):
    Y ~ discrete Laplace of scale t = ⌊σ⌋ + 1, accepted with probability e^{−γ₁}e^{−γ₂}e^{−γ₃}."""
    t = math.isqrt(p // q) + 1
    s = t * q
    whole_p, rest_p = divmod(p, s)
    y = sample_discrete_laplace(rng, t, 1, size)
    m = np.abs(y) - whole_p  # a = m·s − rest_p
    above = m >= 1  # a > 0: a = (m − [rest_p > 0])·s + (−rest_p mod s)
    big_m = np.where(above, m - (1 if rest_p else 0), -m)
    big_r = np.where(above, (-rest_p) % s, rest_p)
    wide = big_m > min(p // q, math.isqrt((2**62 - 1) // q))  # qM > p, or qM² beyond int64
    accept = np.zeros(size, dtype=bool)
    common = np.flatnonzero(~wide)
    if common.size:
        mc, rc = big_m[common], big_r[common]
        whole, frac = np.divmod(q * mc * mc, 2 * p)
        ok = bernoulli_exp_split(rng, whole, frac, 2 * p)
        ok &= _bernoulli_exp_product(rng, [(q * mc, p), (rc, s)])
        ok &= _bernoulli_exp_product(rng, [(rc, s), (rc, s), (np.full(rc.size, q, dtype=np.int64), 2 * p)])
        accept[common] = ok
    for i in np.flatnonzero(wide):
        a = int(big_m[i]) * s + int(big_r[i])
        accept[i] = _bernoulli_exp_fraction(rng, a * a, 2 * p * q * t * t)
    return y, accept


def sample_discrete_gaussian(rng: np.random.Generator, p: int, q: int, size: int) -> np.ndarray:
    """``size`` exact draws of N_Z(0, p/q) (CKS Algorithm 3); q a power of two ≤ 2^30.

    In int64 (:func:`_gaussian_candidates`) when 2pqt² < 2^62 (σ² up to 2^30 with p < 2^31); beyond, for
    1 ≤ σ² ≤ :data:`MAX_WIDE_SIGMA2` and p < 2^61, the wide round (:func:`_wide_candidates`).
    """
    t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1
    if 2 * p * q * t * t < 2**62:
        return redraw_rejected(lambda n: _gaussian_candidates(rng, p, q, n), size)
    if not (q <= p < 2**61 and q <= 2**30 and p <= MAX_WIDE_SIGMA2 * q):
        raise ValueError(f"σ² = {p}/{q} is outside the exact sampler's range (up to 2^60, p < 2^61, q ≤ 2^30)")
    return redraw_rejected(lambda n: _wide_candidates(rng, p, q, n), size)
