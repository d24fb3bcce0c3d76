r"""The discrete Gaussian law N_ℤ(0, σ²) on ℤ, its moments and its exact sampler.

**Sampling** (σ² = p/q, f(m) = e^{−m²q/(2p)}, P[Y = y] ∝ f(|y|)): rejection from a bucketed envelope of f, in the
manner of Canonne, Kamath & Steinke (2020, Algorithms 1–3) but with a proposal of 4,096 steps instead of their
discrete Laplace. With M₀ = Bw ≥ 10σ (B ≤ :data:`MAX_BUCKETS` buckets of w integers), the envelope

.. math:: g(m) = f(bw) \text{ on } bw ≤ m < (b+1)w \; (b < B), \qquad
   g(m) = f(M_0)\, e^{-(m - M_0) M_0 q/p} \text{ for } m ≥ M_0

lies above f (f decreases; m² ≥ M₀² + 2M₀(m − M₀)). A round draws the bucket I ∈ {0, …, B} (B: the tail) with
probability mass_I/S₀ (mass_b = w f(bw), mass_B = f(M₀)/(1 − e^{−M₀q/p}), S_i = Σ_{j≥i} mass_j) by exact inversion
of one uniform word against ⌊2^{64} S_i/S₀⌋, i = 1…B (:class:`~dpopt.noise.exp_inversion._Thresholds`; the
integers in Arb ball arithmetic, ties resolved by further words against ⌊2^{64j} S_i/S₀⌋,
:func:`~dpopt.noise.exp_inversion.below_floors`; each S_i/S₀ is irrational by Lindemann–Weierstrass, since
S_i − xS₀ times 1 − e^{−M₀q/p} has the term −xw e⁰ and no other of exponent 0); then M uniform in the bucket, or
M₀ + G with P(G ≥ g) = e^{−gM₀q/p} in the tail (:func:`~dpopt.noise.discrete_laplace.geometric`), so that
P(M = m) ∝ g(m); then M is accepted with probability f(M)/g(M) = e^{−γ},

.. math:: γ = \frac{O(2bw + O)\, q}{2p} \quad (M = bw + O), \qquad γ = \frac{G^2 q}{2p} \quad \text{(tail)},

by CKS Algorithm 1 in integers (γ < wM₀q/p ≤ 0.05 in the buckets when w > 1: about 2 rounds in 1,000 are
rejected; with w = 1, for σ < 410, nothing to accept in the buckets: the bucket is the value); accepted,
P(M = m) ∝ f(m). A fair sign, rejecting −0, gives P[Y = y] ∝ f(|y|). With w = 1 the masses of m ≥ 1 (the tail's
too) are doubled instead, so that P(M = m) ∝ (2 − [m = 0]) f(m) and the sign needs no rejection (the e⁰ term of
the irrationality argument is then −x·mass₀). Rejected places are drawn again (independently), so the output law
is exactly N_ℤ(0, p/q): every decision is an integer comparison of uniform words, no floating-point number enters
it. Candidates are drawn for a block of places at once as numpy arrays; the ties of the inversion (probability
2^{−64} a threshold) and the tail (probability below 2^{−70}) are decided one by one in Python integers.

**Timing.** The sampler never sees the confidential value: the noise is drawn first and added afterwards, so the
random words consumed and the rounds run depend only on σ² and on the noise drawn. The running time does depend
on the noise (rejection rounds, ties resolved by further words), which this module does not hide.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential
   privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithms 1 and 3.
.. [2] L. Devroye, *Non-Uniform Random Variate Generation*, Springer 1986, §II.3 (rejection from a step
   envelope) and §III.2 (inversion by guide tables).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dpopt.noise import discrete_gaussian_tail, discrete_laplace, exp_inversion
from dpopt.noise.bernoulli import bernoulli_chunk
from dpopt.noise.discrete_laplace import _bernoulli_exp_unit, bernoulli_exp, redraw_rejected, sample_geometric
from dpopt.noise.exp_inversion import _Thresholds, below_floors
from dpopt.noise.marginal import Marginal

MAX_WIDE_SIGMA2 = 2**60
"""Largest σ² the sampler serves (p < 2^61, q ≤ 2^30)."""

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


_CHUNK_BITS = 32
"""Bits of the word that decides Algorithm 1's first trial in the buckets (2p·2^32 < 2^64 for p < 2^31)."""

_BLOCK = 1 << 16
"""Places drawn together: a round's arrays stay in cache (and their memory bounded)."""

_REACH_SIGMAS = 10
"""M₀ ≥ this · σ: the tail's share of the envelope is below e^{−50}, its threshold 0 at 64 bits."""

MAX_BUCKETS = 4096
"""Most steps of the sampler's envelope (module docstring): its thresholds are B Arb exponentials, cached per σ²."""


class _Envelope:
    """The step envelope of N_ℤ(0, p/q) (module docstring): width w, B buckets, M₀ = Bw, the word thresholds of
    the bucket's inversion and, for the ties, ⌊2^shift S_i/S₀⌋ at any shift."""

    def __init__(self, p: int, q: int, bits: int, chunk_bits: int):
        reach = math.isqrt(_REACH_SIGMAS**2 * p // q) + 1  # > 10σ
        self.p, self.q, self.bits = p, q, bits
        self.log_width = (-(-reach // MAX_BUCKETS) - 1).bit_length()  # the least w = 2^k with B ≤ MAX_BUCKETS
        self.width = 1 << self.log_width
        self.buckets = -(-reach // self.width)
        self.reach = self.buckets * self.width
        self.unit = self.width * self.reach * q <= p  # γ ≤ 1 in every bucket
        self.chunk_bits = chunk_bits
        self.one_word = self.unit and (2 * p) << chunk_bits < 2**64 and self.log_width + chunk_bits < bits
        first = self.floors(bits)
        kept = first.index(0) + 1 if 0 in first else len(first)  # to the first 0: the rest tie with W = 0 only
        self.table = _Thresholds(first[:kept], bits)

    def floors(self, shift: int) -> list[int]:
        """⌊2^shift S_i/S₀⌋ for i = 1…B, in Arb at increasing precision until every ball has one floor."""
        return _envelope_floors(self.p, self.q, self.width, self.buckets, shift)

    def draw_buckets(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` buckets I, P(I = i) = mass_i/S₀: I = #{i ∈ 1…B : U < S_i/S₀}, the first word against the table,
        a tie (the word equals the next threshold) word by word in Python integers."""
        words = exp_inversion._words(rng, size, self.bits)
        bucket, tied = self.table.count(words)
        for i in np.flatnonzero(tied):
            prefix, b = [int(words[i])], int(bucket[i])
            while b < self.buckets and below_floors(prefix, lambda shift, j=b: self.floors(shift)[j], rng,
                                                    self.bits):
                b += 1
            bucket[i] = b
        return bucket


@lru_cache(maxsize=128)
def _envelope_floors(p: int, q: int, width: int, buckets: int, shift: int) -> list[int]:
    """⌊2^shift S_i/S₀⌋, i = 1…B (:class:`_Envelope`), from Arb balls of the masses and their suffix sums."""
    import flint  # imported where used (start-up of `dpopt verify`)

    reach = width * buckets
    prec = shift + 64 + buckets.bit_length()
    while True:
        with flint.ctx.workprec(prec):
            c = flint.arb(flint.fmpq(q, 2 * p))
            both = 2 if width == 1 else 1  # w = 1: m > 0 carries both signs (module docstring)
            total = both * (-(c * reach * reach)).exp() / (1 - (-flint.arb(flint.fmpq(reach * q, p))).exp())
            suffix = [total]
            for b in range(buckets - 1, -1, -1):
                total += (both if b else 1) * width * (-(c * (b * width) ** 2)).exp()
                suffix.append(total)
            scale = flint.arb(2) ** shift / total
            out = []
            for s in suffix[-2::-1]:  # S_1 … S_B
                y = s * scale
                lo, hi = y.lower().floor().unique_fmpz(), y.upper().floor().unique_fmpz()
                if lo is None or lo != hi:
                    break
                out.append(int(lo))
        if len(out) == buckets:
            return out
        prec *= 2


@lru_cache(maxsize=64)
def _envelope(p: int, q: int, bits: int, chunk_bits: int) -> _Envelope:
    """The envelope of N_ℤ(0, p/q), built once per σ² (4–12 ms; a guide table of at most 512 KB)."""
    return _Envelope(p, q, bits, chunk_bits)


def _gaussian_candidates(rng: np.random.Generator, p: int, q: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One round of the sampler (module docstring): signed candidates M and whether each is accepted.

    When 2p·2^32 < 2^64 one word gives each place its offset O (the low k bits, w = 2^k), the first trial of
    Algorithm 1, Bernoulli(γ) (the next 32 bits against γ's binary expansion,
    :func:`~dpopt.noise.bernoulli.bernoulli_chunk`) and its sign (the top bit): disjoint bits of a uniform word are
    independent and uniform. Otherwise O, the trials and the sign are uniform integers."""
    env = _envelope(p, q, exp_inversion.WORD_BITS, _CHUNK_BITS)
    bucket = env.draw_buckets(rng, size)
    magnitude = bucket << env.log_width
    negative = None
    if env.log_width:
        first = None
        if env.one_word:  # one word: the offset O (low k bits), the trial (next 32 bits), the sign (top bit)
            mixed = exp_inversion._words(rng, size, env.bits)
            offset = (mixed & np.uint64(env.width - 1)).view(np.int64)
            negative = (mixed >> np.uint64(env.bits - 1)).view(np.int64)
        else:
            offset = rng.integers(0, env.width, size=size, dtype=np.int64)
        gamma = magnitude * 2 + offset  # γ·2p/q = O(2bw + O)
        magnitude += offset
        gamma *= offset
        if q != 1:
            gamma *= q
        if env.one_word:
            chunks = (mixed >> np.uint64(env.log_width)) & np.uint64((1 << env.chunk_bits) - 1)
            first = bernoulli_chunk(rng, chunks, gamma, 2 * p, env.chunk_bits)
        accept = _bernoulli_exp_unit(rng, gamma, 2 * p, first) if env.unit else bernoulli_exp(rng, gamma, 2 * p)
    else:
        accept = np.ones(size, dtype=bool)
    tails = np.flatnonzero(bucket == env.buckets)
    if tails.size:
        beyond = sample_geometric(rng, p, env.reach * q, tails.size)
        magnitude[tails] = env.reach + beyond
        accept[tails] = [_bernoulli_exp_fraction(rng, int(g) ** 2 * q, 2 * p) for g in beyond]
    if negative is None:
        negative = rng.integers(0, 2, size=size, dtype=np.int8)
    if env.width > 1:
        zero = np.flatnonzero(magnitude == 0)  # −0 rejected: each sign of m > 0 keeps half of f(m), 0 keeps half
        accept[zero] &= negative[zero] == 0
    magnitude *= 1 - 2 * negative
    return magnitude, accept


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
    at or above 2^62 rejected, probability e^{−2^62}) and CKS Algorithm 1 on the fraction, Bernoulli(frac/(den·K))
    by :func:`_bernoulli_fraction`."""
    whole, frac = divmod(num, den)
    if whole >= 2**62:
        return False
    if whole and int(discrete_laplace.unit_geometric(rng, 1)[0]) < whole:
        return False
    k = 1
    while _bernoulli_fraction(rng, frac, den * k):
        k += 1
    return k % 2 == 1


def sample_discrete_gaussian(rng: np.random.Generator, p: int, q: int, size: int) -> np.ndarray:
    """``size`` exact draws of N_Z(0, p/q) (module docstring) for integers p, q ≥ 1 with p < 2^61 and either
    pq < 2^61 or q ≤ 2^30 and p/q ≤ :data:`MAX_WIDE_SIGMA2` (so that M₀q and 2p stay below 2^62)."""
    if not (1 <= p < 2**61 and q >= 1 and (p * q < 2**61 or (q <= 2**30 and p <= MAX_WIDE_SIGMA2 * q))):
        raise ValueError(f"σ² = {p}/{q} is outside the exact sampler's range (up to 2^60, p < 2^61, q ≤ 2^30)")
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, _BLOCK):  # blocks that keep the temporaries in cache (and bound their memory)
        out[start:start + _BLOCK] = redraw_rejected(lambda n: _gaussian_candidates(rng, p, q, n),
                                                    min(_BLOCK, size - start))
    return out
