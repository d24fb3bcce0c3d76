r"""Differentially private partition selection: which group keys found in the data may be released.

A group key (a partition) that is not declared in the spec is released only when a mechanism
decides to keep it. A person contributes to at most g partitions (after contribution bounding),
so a neighbouring data set changes the user count n of at most g partitions by one and may make
up to g partitions appear.

**Optimal mechanism** (Desfontaines, Voss, Gipson & Mandayam, "Differentially private partition
selection", PoPETs 2022, Thm. 1). For one partition under (ε, δ), the keep probabilities

.. math:: \pi_0 = 0, \qquad
   \pi_n = \min\bigl(e^{\varepsilon}\pi_{n-1} + \delta,\;
   1 + e^{-\varepsilon}(\pi_{n-1} + \delta - 1),\; 1\bigr)

are the largest that are (ε, δ)-DP for every neighbouring pair of counts (n, n + 1) (both
outcomes, both directions). With g partitions per person each gets (ε/g, δ′), δ′ = 1 − (1 − δ)^{1/g}
(google/differential-privacy ``cc/algorithms/partition-selection.h``, ``CalculateAdjustedDelta``),
and the g decisions compose to (ε, 1 − (1 − δ′)^g) = (ε, δ) (Kairouz, Oh & Viswanath 2015,
Thm. 3.3 at i = k: k mechanisms (ε₀, δ₀)-DP compose to (kε₀, 1 − (1 − δ₀)^k)).
:func:`keep_probability` is the closed form of the same probabilities (the two crossovers of
``PreaggPartitionSelection::ProbabilityOfKeep`` in that file); :func:`pair_delta` the exact δ of
any keep-probability table by enumeration of the neighbouring count pairs.

**Thresholding baselines.** Row counts get discrete Laplace noise of scale b (or discrete Gaussian
noise N_ℤ(0, σ²)) and a key is kept when its noisy count is ≥ τ (an integer); the same noisy count is
released. On the keys both data sets have, this is the noise mechanism (ε from the person-level
l1 or l2 sensitivity; post-processing by the threshold). A key only the larger data set has holds
≤ t rows of the added person; the probability that any such key passes is

.. math:: \delta_{\text{new}} = \max_{v} \Bigl(1 - \prod_j \bigl(1 - P[v_j + Z \ge \tau]\bigr)\Bigr),

the maximum over the person's allowed contributions v (≤ t rows in each of ≤ g keys, ≤ R in all),
found exactly by dynamic programming (:func:`new_keys_delta`). The whole release is then
(ε, δ_noise + δ_new)-DP: P[M(D′) ∈ E] ≤ P[M(D′)_S ∈ E_S] + δ_new on one side; on the other,
P[M(D) ∈ E] ≤ min(1, e^ε P[M(D′) ∈ E]/(1 − δ_new) + δ_noise), which exceeds e^ε P[M(D′) ∈ E] by at
most δ_new + δ_noise (S: the keys both data sets have; the new keys' decisions are independent).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpopt._lazy import lazy_module
from dpopt.core.decimals import float_below, written
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError

mpmath = lazy_module("mpmath")

MAX_DP_STEPS = 50_000_000
"""The dynamic programme of :func:`new_keys_delta` runs up to this many steps (g·R·t); beyond, the
upper bound with every one of the g keys at t rows is used (stated as a bound)."""

SAFETY = 1 - 1e-9
"""Thresholds are calibrated for δ·SAFETY: a margin for the bisection, below the rounded-up value of
:func:`new_keys_delta` that the certificate compares with δ."""


def per_partition_budget(epsilon: object, delta: object, partitions: int) -> tuple[float, float]:
    """(ε′, δ′) ≈ (ε/g, 1 − (1 − δ)^{1/g}): the budget of one partition's decision when a person is in
    ≤ g of them, as floats that compose within the target as written (:mod:`dpopt.core.decimals`):
    g·ε′ ≤ ε exactly and :func:`composed_delta` (δ′, g) ≤ δ (each moved down until it holds)."""
    eps, bound = written(epsilon), float_below(delta)
    eps_one = nudge_until(float(eps / partitions), lambda e: partitions * Fraction(e) <= eps, up=False)
    delta_one = nudge_until(-math.expm1(math.log1p(-bound) / partitions),
                            lambda d: composed_delta(d, partitions) <= bound, up=False)
    return eps_one, delta_one


def composed_delta(delta_one: float, partitions: int) -> Fraction:
    """1 − (1 − δ′)^g, the δ of g independent (ε′, δ′) decisions (Kairouz, Oh & Viswanath 2015, Thm. 3.3 at
    i = k), exactly (δ′ a double, read as the rational it is)."""
    return 1 - (1 - Fraction(delta_one)) ** partitions


def optimal_keep_probabilities(epsilon: float, delta: float) -> np.ndarray:
    r"""π_0, π_1, …, π_N = 1 by the recurrence of Desfontaines et al. (2022, Thm. 1), see the module.

    Raises
    ------
    CalibrationError
        δ so small or ε so small that π does not reach 1 within 10⁷ users.
    """
    pis = [0.0]
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)
    while pis[-1] < 1.0:
        previous = pis[-1]
        pis.append(min(grow * previous + delta, 1.0 + shrink * (previous + delta - 1.0), 1.0))
        if len(pis) > 10**7:
            raise CalibrationError(f"the optimal partition selection at ε = {epsilon:g}, δ = {delta:g} does not "
                                   "keep a partition for certain below 10⁷ users")
    return np.array(pis)


def keep_probability(n: int, epsilon: float, delta: float) -> float:
    r"""π_n in closed form (the crossovers of google/differential-privacy's ``PreaggPartitionSelection``).

    .. math:: \pi_n = \delta\,\frac{e^{n\varepsilon} - 1}{e^{\varepsilon} - 1}\ (n \le n_1), \quad
       \pi_n = \pi_{n_1} - \Bigl(1 - \pi_{n_1} + \frac{\delta}{e^{\varepsilon} - 1}\Bigr)
       \bigl(e^{-(n - n_1)\varepsilon} - 1\bigr)\ (n_1 < n \le n_2), \quad 1 \text{ beyond},

    with :math:`n_1 = 1 + \lfloor \log(1 + \tanh(\varepsilon/2)(1/\delta - 1))/\varepsilon \rfloor` and
    :math:`n_2 = n_1 + \lfloor \log(1 + (e^{\varepsilon} - 1)(1 - \pi_{n_1})/\delta)/\varepsilon \rfloor`.
    """
    n1 = 1 + math.floor(math.log1p(math.tanh(epsilon / 2) * (1 / delta - 1)) / epsilon)

    def rising(m: int) -> float:
        return math.expm1(m * epsilon) / math.expm1(epsilon) * delta

    if n <= 0:
        return 0.0
    if n <= n1:
        return rising(n)
    p1 = rising(n1)
    n2 = n1 + math.floor(math.log1p(math.expm1(epsilon) / delta * (1 - p1)) / epsilon)
    if n <= n2:
        return min(p1 - (1 - p1 + delta / math.expm1(epsilon)) * math.expm1(-(n - n1) * epsilon), 1.0)
    return 1.0


def exp_lower(x: float) -> Fraction:
    """A rational lower bound on e^x (the lower end of an Arb ball at 128 bits: rigorous, within 2⁻¹²⁰
    relative)."""
    import flint  # imported where used (start-up of `dpopt verify`)

    exact = Fraction(x)
    with flint.ctx.workprec(128):
        mantissa, exponent = flint.arb(flint.fmpq(exact.numerator, exact.denominator)).exp().lower().man_exp()
    return Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


def pair_delta(pis: np.ndarray, epsilon: float) -> float:
    r"""The exact δ at ε of a decision keeping a partition of n users with probability π_n (π_n = π_N past
    the table's end): the largest of P[out | n′] − e^ε P[out | n] over out ∈ {keep, drop} and every
    neighbouring pair {n, n′} = {m, m + 1}, m ≥ 0, both ways (a binary output's only events).

    Evaluated in exact rationals on the table's doubles (each converted exactly: they are the probabilities
    the exact sampler :func:`dpopt.noise.bernoulli.bernoulli_rational` keeps with), every term A − e^ε B with
    B ≥ 0 bounded above through a rigorous lower bound on e^ε (:func:`exp_lower`); rounded up to a double.
    """
    table = [Fraction(float(p)) for p in pis]
    table.append(table[-1])
    e = exp_lower(epsilon)
    worst = Fraction(0)
    for low, high in zip(table[:-1], table[1:]):
        worst = max(worst, high - e * low, low - e * high, (1 - low) - e * (1 - high), (1 - high) - e * (1 - low))
    return _float_above(worst)


def _float_above(x: Fraction) -> float:
    """The least double ≥ x."""
    value = float(x)
    return value if Fraction(value) >= x else math.nextafter(value, math.inf)


def certified_keep_probabilities(epsilon: float, delta: float) -> tuple[np.ndarray, float]:
    """The recurrence's table for a δ just below ``delta`` (1 − 10⁻⁹, then 1 − 10⁻⁶, 1 − 10⁻³ of it), the first
    whose exact δ (:func:`pair_delta`) is ≤ ``delta`` (the doubles' rounding never pushes δ over the target),
    and the δ it was built for.

    Raises
    ------
    CalibrationError
        None of them meets δ.
    """
    for margin in (1e-9, 1e-6, 1e-3):
        design = delta * (1 - margin)
        pis = optimal_keep_probabilities(epsilon, design)
        if pair_delta(pis, epsilon) <= delta:
            return pis, design
    raise CalibrationError(f"the optimal partition selection could not be certified at ε = {epsilon:g}, δ = {delta:g}")


# ------------------------------------------------------------------------- thresholding
def discrete_laplace_tail(k: int, scale: mpmath.mpf) -> mpmath.mpf:
    r"""P[Z ≥ k] for Z discrete Laplace of scale b, :math:`P[Z = z] = \frac{1 - r}{1 + r} r^{|z|}`, r = e^{−1/b}:
    :math:`r^k/(1 + r)` for k ≥ 1 and :math:`1 - r^{1-k}/(1 + r)` for k ≤ 0 (summing the geometric series)."""
    r = mpmath.exp(-1 / mpmath.mpf(scale))
    return r**k / (1 + r) if k >= 1 else 1 - r ** (1 - k) / (1 + r)


def discrete_gaussian_tail(k: int, sigma2: Fraction) -> mpmath.mpf:
    r"""An upper bound on P[Z ≥ k] for Z ~ N_ℤ(0, σ²) (pmf ∝ e^{−j²/(2σ²)}), 1 for k ≤ 0:

    .. math:: P[Z \ge k] \le \bar\Phi(k/\sigma) + \varphi(k/\sigma)/\sigma \quad (k \ge 1),

    since Σ_{j ≥ k} e^{−j²/(2σ²)} ≤ e^{−k²/(2σ²)} + ∫_k^∞ e^{−x²/(2σ²)} dx (a decreasing summand) and the
    normaliser Σ_j e^{−j²/(2σ²)} = σ√(2π) Σ_n e^{−2π²σ²n²} ≥ σ√(2π) (Poisson summation). In 50-digit arithmetic.
    """
    if k <= 0:
        return mpmath.mpf(1)
    with mpmath.workdps(50):
        sigma = mpmath.sqrt(mpmath.mpf(Fraction(sigma2).numerator) / Fraction(sigma2).denominator)
        x = mpmath.mpf(k) / sigma
        return mpmath.ncdf(-x) + mpmath.npdf(x) / sigma


def new_keys_delta(tail, rows: int, per_key: int, keys: int) -> tuple[float, str]:
    r"""δ_new = max over allowed v of 1 − Π_j (1 − tail(v_j)), tail(v) = P[v + Z ≥ τ] (increasing in v),
    rounded up.

    v: ≤ ``per_key`` (t) rows in each of ≤ ``keys`` (g) keys, ≤ ``rows`` (R) in all. Exact by dynamic
    programming over the keys (minimising Σ_j log(1 − tail(v_j)) with a budget of rows) when g·R·t ≤
    :data:`MAX_DP_STEPS`; else the bound with all g keys at t rows. Returns (δ_new, how).

    The programme runs in doubles: each weight log(1 − tail) is its 50-digit value rounded (relative error
    ≤ u = 2⁻⁵³); a sum of ≤ g of these non-positive weights adds ≤ g·u (every partial sum has the sign of
    the total); the least of sums each within that relative error is within it of the exact least; and
    1 − eˣ = −expm1(x) has relative condition number |x|eˣ/(1 − eˣ) ≤ 1 for x ≤ 0, plus its own rounding
    (≤ 2u). The double result times 1 + (2g + 8)u, rounded up, is returned: an upper bound on the exact
    δ_new (the factor covers the first-order (g + 3)u with room for the products of errors).
    """
    with mpmath.workdps(50):
        weight = np.array([0.0] + [float(mpmath.log1p(-tail(v))) for v in range(1, per_key + 1)])
    inflate = 1.0 + (2 * keys + 8) * 2.0**-53
    if keys * rows * per_key > MAX_DP_STEPS:
        value = float(-np.expm1(keys * weight[per_key]))
        return math.nextafter(value * inflate, math.inf), f"bound: every one of {keys} new keys at {per_key} rows"
    best = np.zeros(rows + 1)  # least Σ log(1 − tail(v_j)) with ≤ r rows on the keys so far
    for _ in range(keys):
        step = best.copy()
        for v in range(1, min(per_key, rows) + 1):
            step[v:] = np.minimum(step[v:], best[:-v] + weight[v])
        best = step
    value = float(-np.expm1(best[rows]))
    return math.nextafter(value * inflate, math.inf), (f"exact: dynamic programme over ≤ {keys} new keys, ≤ "
                                                       f"{per_key} rows each, ≤ {rows} in all, rounded up")


def integer_threshold(tail, delta: float, rows: int, per_key: int, keys: int) -> int:
    """The least integer τ > t with δ_new(τ) ≤ δ·:data:`SAFETY` for integer noise Z with P[Z ≥ k] ≤ tail(k)
    (δ_new falls with τ; at τ ≤ t one key of t rows passes with probability ≥ 1/2 > δ).

    Raises
    ------
    CalibrationError
        No τ below 10⁹ meets δ.
    """
    def holds(tau: int) -> bool:
        return new_keys_delta(lambda v: tail(tau - v), rows, per_key, keys)[0] <= delta * SAFETY

    high = per_key + 1
    while not holds(high):
        high *= 2
        if high > 10**9:
            raise CalibrationError(f"no threshold below 10⁹ meets δ = {delta:g}")
    low = per_key
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if holds(mid) else (mid, high)
    return high


def laplace_threshold(scale: mpmath.mpf, delta: float, rows: int, per_key: int, keys: int) -> int:
    """:func:`integer_threshold` under discrete Laplace noise of scale b (:func:`discrete_laplace_tail`)."""
    return integer_threshold(lambda k: discrete_laplace_tail(k, scale), delta, rows, per_key, keys)


def discrete_gaussian_threshold(sigma2: Fraction, delta: float, rows: int, per_key: int, keys: int) -> int:
    """:func:`integer_threshold` under N_ℤ(0, σ²) noise (the tail bound :func:`discrete_gaussian_tail`)."""
    return integer_threshold(lambda k: discrete_gaussian_tail(k, sigma2), delta, rows, per_key, keys)
