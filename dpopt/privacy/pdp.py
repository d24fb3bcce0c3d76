r"""(ε, δ)-probabilistic differential privacy (pDP) for Gaussian and generalized Gaussian noise.

A mechanism is (ε, δ)-pDP (Machanavajjhala et al. 2008; Liu 2019, Eq. 3, in the operational
form every proof of the paper uses) if for all neighbours x, x'

.. math:: \Pr_{s^* \sim M(x)}\big[\,|L(s^*)| > \varepsilon\,\big] \le \delta,
          \qquad L(s^*) = \log\frac{f(s^* \mid x)}{f(s^* \mid x')} .

pDP implies (ε, δ)-DP; the converse fails, and pDP is **not** (ε, δ)-DP: it bounds the
probability of a large privacy loss, a different (stronger) statement than the approximate-DP
inequality, whose δ has another meaning. Certificates in pDP say so.

For GG(0, b, p) noise (i.i.d. coordinates, p ≥ 1) and a difference d = s(x) − s(x'), the
triangle inequality gives :math:`|L| \le b^{-p}\sum_k [(|e_k|+|d_k|)^p - |e_k|^p]` (digest §3.2,
B.1–B.5), increasing in every |d_k|. Calibrations here:

* **Gaussian, Lemma 10 / Eq. 18** (p = 2, any query; uses :math:`\langle e, d\rangle` and Δ₂):
  :math:`\sigma \ge \Delta_2\big(\sqrt{z^2 + 2\varepsilon} - z\big)/(2\varepsilon)`,
  :math:`z = \Phi^{-1}(\delta/2)`. Certified by
  :math:`2\Phi\big(-(2\varepsilon\sigma^2 - \Delta_2^2)/(2\Delta_2\sigma)\big) \le \delta` in 60 digits.
* **GG, Corollary 8 closed form** (one coordinate moves per neighbour, "disjoint"): with
  :math:`q = P^{-1}(1/p, 1-\delta)`, :math:`b = \Delta / ((q+\varepsilon)^{1/p} - q^{1/p})`
  (derived in the digest §4.2; for p = 2 it is Lemma 10 exactly).
* **GG, Corollary 7 by Monte Carlo** (several coordinates move): the exceedance probability of
  the bound is estimated on draws with a recorded seed; b is the smallest value whose
  Clopper–Pearson upper bound is ≤ δ (:func:`gg_pdp_scale_monte_carlo`), a statement held
  with a stated confidence.

Comparisons: the exact pDP level of the Gaussian mechanism (:func:`gaussian_pdp_level`,
not in the paper), the classical (ε, δ)-DP calibration (Eq. 19, ε < 1) and the analytic
Gaussian (:mod:`dpopt.privacy.gaussian`).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 2019,
   Eq. 3, Corollaries 7–8, Lemma 10, Eqs. 18–19 (digest ``papers/002_generalized_gaussian.md`` §4).
.. [2] A. Machanavajjhala, D. Kifer, J. Abowd, J. Gehrke, L. Vilhuber, "Privacy: theory
   meets practice on the map", ICDE 2008.
.. [3] C. Clopper and E. Pearson, "The use of confidence or fiducial limits illustrated in
   the case of the binomial", Biometrika 1934.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpopt.core import normal
from dpopt.core.rounding import nudge_until
from dpopt.errors import CalibrationError
from dpopt.noise.generalized_gaussian import GeneralizedGaussian
from dpopt.privacy.gaussian import gaussian_mu

if TYPE_CHECKING:
    import mpmath

PDP_CAVEAT = (
    "probabilistic DP: for every pair of neighbouring datasets, with probability at least 1 − δ "
    "over the released value, the privacy loss is at most ε in absolute value. pDP implies "
    "(ε, δ)-DP, but it is NOT the (ε, δ)-DP guarantee: its δ bounds the chance of a large loss, "
    "not an additive slack in the DP inequality"
)
"""The sentence a pDP certificate carries in its guarantee."""

PDP_MONTE_CARLO_SEED = 2019_0406
PDP_MONTE_CARLO_DRAWS = 200_000
PDP_CONFIDENCE = 0.99
_MP_DIGITS = 60
_CHUNK = 50_000


def _check_target(epsilon: float, delta: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise CalibrationError(f"epsilon must be positive and finite (got {epsilon})")
    if not (0.0 < delta < 1.0):
        raise CalibrationError(f"delta must lie in (0, 1) (got {delta})")


def _mp(x: float | Fraction) -> mpmath.mpf:
    import mpmath  # imported where used (start-up of `dpopt verify`)

    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


# ------------------------------------------------------------------ Gaussian
def gaussian_pdp_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    r"""Lemma 10 / Eq. 18: the smallest σ (float, rounded up until the 60-digit check passes).

    .. math:: \sigma = \frac{\Delta_2}{2\varepsilon}\Big(\sqrt{z^2 + 2\varepsilon} - z\Big),
              \qquad z = \Phi^{-1}(\delta/2) < 0 .

    Examples
    --------
    >>> round(gaussian_pdp_sigma(1.0, 0.05, 1.0), 6)   # digest §4.4 table
    2.188437
    """
    _check_target(epsilon, delta)
    z = float(normal.ndtri(delta / 2.0))
    sigma = l2_sensitivity * (math.sqrt(z * z + 2.0 * epsilon) - z) / (2.0 * epsilon)
    l2_squared = Fraction(l2_sensitivity) ** 2
    return nudge_until(sigma, lambda s: gaussian_pdp_bound_mp(s, epsilon, l2_squared) <= delta, up=True)


def gaussian_pdp_bound(sigma: float, epsilon: float, l2_sensitivity: float) -> float:
    r"""Lemma 10's bound on :math:`\sup_{x\simeq x'}\Pr(|L|>\varepsilon)` for N(0, σ²I) noise:
    :math:`2\Phi\big(-(2\varepsilon\sigma^2 - \Delta_2^2)/(2\Delta_2\sigma)\big)`, capped at 1.

    From :math:`|L| \le (2|\langle e,d\rangle| + \|d\|^2)/(2\sigma^2)` with
    :math:`\langle e,d\rangle \sim N(0, \sigma^2\|d\|^2)`; the bound increases in ‖d‖, so the
    supremum is at ‖d‖ = Δ₂ (digest §4.4).
    """
    x = (2.0 * epsilon * sigma * sigma - l2_sensitivity**2) / (2.0 * l2_sensitivity * sigma)
    return min(1.0, 2.0 * float(normal.ndtr(-x)))


def gaussian_pdp_bound_mp(sigma: float, epsilon: float, l2_squared: Fraction) -> mpmath.mpf:
    """:func:`gaussian_pdp_bound` in 60-digit arithmetic from the exact Δ₂² (the certificate check)."""
    import mpmath  # imported where used (start-up of `dpopt verify`)

    with mpmath.workdps(_MP_DIGITS):
        s, e, d2 = _mp(sigma), _mp(epsilon), _mp(l2_squared)
        x = (2 * e * s * s - d2) / (2 * mpmath.sqrt(d2) * s)
        return min(mpmath.mpf(1), 2 * mpmath.ncdf(-x))


def gaussian_pdp_level(sigma: float, epsilon: float, l2_sensitivity: float) -> float:
    r"""The exact pDP level :math:`\sup\Pr(|L|>\varepsilon)` of N(0, σ²I) noise (not in the paper).

    The loss is exactly :math:`L \sim N(\mu^2/2, \mu^2)` with μ = ‖d‖/σ, so
    :math:`\Pr(|L|>\varepsilon) = \Phi(-\varepsilon/\mu - \mu/2) + \Phi(\mu/2 - \varepsilon/\mu)`,
    increasing in μ (its derivative is
    :math:`\varphi(\mu/2-\varepsilon/\mu)[(\varepsilon/\mu^2)(1+e^{-\varepsilon}) + (1-e^{-\varepsilon})/2] > 0`),
    hence attained at ‖d‖ = Δ₂.
    """
    mu = l2_sensitivity / sigma
    return float(normal.ndtr(-epsilon / mu - mu / 2.0) + normal.ndtr(mu / 2.0 - epsilon / mu))


def gaussian_pdp_sigma_exact(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """The smallest σ whose exact pDP level (:func:`gaussian_pdp_level`) is ≤ δ (not in the paper)."""
    _check_target(epsilon, delta)
    hi = gaussian_pdp_sigma(epsilon, delta, l2_sensitivity)  # Lemma 10 is valid, so level(hi) <= delta
    lo = hi
    while gaussian_pdp_level(lo, epsilon, l2_sensitivity) <= delta:
        lo /= 2.0
    from scipy import optimize  # imported where used, as below (start-up of `dpopt verify`)

    return optimize.brentq(
        lambda s: gaussian_pdp_level(s, epsilon, l2_sensitivity) - delta, lo, hi, xtol=1e-14
    )


def classical_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    r"""The classical (ε, δ)-DP calibration (Dwork & Roth 2014, Thm A.1; Liu Eq. 19):
    :math:`\sigma = \sqrt{2\ln(1.25/\delta)}\,\Delta_2/\varepsilon`.

    Raises
    ------
    CalibrationError
        For ε ≥ 1, where the theorem does not hold (digest pitfall 9).
    """
    _check_target(epsilon, delta)
    if epsilon >= 1.0:
        raise CalibrationError(f"the classical Gaussian calibration needs epsilon < 1 (got {epsilon})")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * l2_sensitivity / epsilon


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """The analytic-Gaussian (ε, δ)-DP calibration σ = Δ₂/μ*(ε, δ) (Balle & Wang 2018)."""
    return l2_sensitivity / gaussian_mu(epsilon, delta)


def gaussian_calibrations(
    epsilon: float, delta: float, l2_sensitivity: float = 1.0
) -> dict[str, float | None]:
    """σ of the Gaussian mechanism under each calibration, for the same (ε, δ).

    Keys: ``pdp_lemma10`` (Eq. 18), ``pdp_exact`` (exact pDP level), ``adp_classical``
    (Eq. 19; None when ε ≥ 1), ``adp_analytic`` (Balle & Wang). The two pDP values and the
    two (ε, δ)-DP values answer different questions (see the module docstring).
    """
    return {
        "pdp_lemma10": gaussian_pdp_sigma(epsilon, delta, l2_sensitivity),
        "pdp_exact": gaussian_pdp_sigma_exact(epsilon, delta, l2_sensitivity),
        "adp_classical": classical_gaussian_sigma(epsilon, delta, l2_sensitivity) if epsilon < 1 else None,
        "adp_analytic": analytic_gaussian_sigma(epsilon, delta, l2_sensitivity),
    }


# ------------------------------------------------------- GG, disjoint queries
def gg_pdp_scale_disjoint(epsilon: float, delta: float, p: float, sensitivity: float) -> float:
    r"""Corollary 8 in closed form: the smallest b for GG(0, b, p) noise when one coordinate moves.

    :math:`\Pr\big((|e|+\Delta)^p - |e|^p > \varepsilon b^p\big) \le \delta` with
    :math:`(|e|/b)^p \sim \mathrm{Gamma}(1/p, 1)` and the left side increasing in |e| gives

    .. math:: b = \frac{\Delta}{(q+\varepsilon)^{1/p} - q^{1/p}}, \qquad q = Q^{-1}(1/p, \delta),

    valid for real p ≥ 1 (p = 1: b = Δ/ε, pure ε-DP; p = 2: Lemma 10). Rounded up until
    :func:`gg_pdp_bound_disjoint_mp` confirms the level.

    Examples
    --------
    >>> round(gg_pdp_scale_disjoint(1.0, 0.05, 3, 1.0), 6)   # digest §4.2
    4.662445
    """
    _check_target(epsilon, delta)
    if p < 1:
        raise CalibrationError(f"the generalized Gaussian pDP bound needs p >= 1 (got {p})")
    from scipy import special  # imported where used (start-up of `dpopt verify`)

    q = float(special.gammainccinv(1.0 / p, delta))
    gap = q ** (1.0 / p) * math.expm1(math.log1p(epsilon / q) / p) if q > 0 else epsilon ** (1.0 / p)
    b = sensitivity / gap
    return nudge_until(b, lambda s: gg_pdp_bound_disjoint_mp(s, epsilon, p, sensitivity) <= delta, up=True)


_MAX_DOUBLINGS = 4096
"""Doublings of the bracket's upper end u before :func:`gg_pdp_bound_disjoint_mp` gives up:
u = 2^4096 is far beyond any loss threshold of a target in floating-point range."""


def gg_pdp_bound_disjoint_mp(
    scale: float, epsilon: float, p: float, sensitivity: float | Fraction
) -> mpmath.mpf:
    r"""Corollary 8's bound on the pDP level at b, in 60-digit arithmetic.

    With c = Δ/b, the event :math:`(u + c)^p - u^p > \varepsilon` (u = |e|/b) is
    :math:`\{u > u^*\}`; u* is bracketed by 200 bisection steps and the lower end (a
    conservative u) is used: the bound is :math:`Q(1/p, u_-^{\,p})`. For p = 1 the loss bound is
    the constant c, so the level is 0 if c ≤ ε and 1 otherwise.
    """
    import mpmath  # imported where used (start-up of `dpopt verify`)

    with mpmath.workdps(_MP_DIGITS):
        pp, e, c = _mp(p), _mp(epsilon), _mp(sensitivity) / _mp(scale)

        def excess(u):
            return (u + c) ** pp - u**pp - e

        if excess(mpmath.mpf(0)) > 0:
            return mpmath.mpf(1)
        if pp == 1:
            return mpmath.mpf(0)
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        for _ in range(_MAX_DOUBLINGS):
            if excess(hi) > 0:
                break
            hi *= 2
        else:  # c = Δ/b below 60-digit resolution next to u: (u + c)^p − u^p never exceeds ε
            raise CalibrationError(f"the pDP level of scale {float(scale):g} at epsilon={float(epsilon):g} is out of "
                                   f"the range of {_MP_DIGITS}-digit arithmetic")
        for _ in range(200):
            mid = (lo + hi) / 2
            if excess(mid) <= 0:
                lo = mid
            else:
                hi = mid
        return mpmath.gammainc(1 / pp, lo**pp, mpmath.inf, regularized=True)


def gg_pdp_level_scalar(scale: float, epsilon: float, p: float, sensitivity: float) -> float:
    r"""The exact pDP level of scalar GG(0, b, p) noise for a neighbour at distance Δ (not in the paper).

    :math:`\Pr(|\,|e+\Delta|^p - |e|^p\,| > \varepsilon b^p)`; the loss is increasing in e, so the
    event is :math:`\{e < e_-\} \cup \{e > e_+\}` with the two roots found by brentq.
    """
    g = GeneralizedGaussian(p, scale)
    level = epsilon * scale**p

    def loss(e: float) -> float:
        return abs(e + sensitivity) ** p - abs(e) ** p

    from scipy import optimize

    span = scale * 10.0 + sensitivity
    while loss(span) <= level:
        span *= 2.0
    hi_root = optimize.brentq(lambda e: loss(e) - level, -sensitivity / 2.0, span, xtol=1e-14)
    while loss(-span) >= -level:
        span *= 2.0
    lo_root = optimize.brentq(lambda e: loss(e) + level, -span, -sensitivity / 2.0, xtol=1e-14)
    return float(g.cdf(lo_root) + g.sf(hi_root))


def gg_pdp_scale_scalar_exact(epsilon: float, delta: float, p: float, sensitivity: float) -> float:
    """The smallest b whose exact scalar pDP level (:func:`gg_pdp_level_scalar`) is ≤ δ."""
    hi = gg_pdp_scale_disjoint(epsilon, delta, p, sensitivity)
    lo = hi
    while gg_pdp_level_scalar(lo, epsilon, p, sensitivity) <= delta:
        lo /= 2.0
    from scipy import optimize

    return optimize.brentq(
        lambda b: gg_pdp_level_scalar(b, epsilon, p, sensitivity) - delta, lo, hi, xtol=1e-12
    )


# ------------------------------------------------- GG, Monte Carlo (Cor. 7)
@dataclass(frozen=True)
class MonteCarloPDP:
    """The outcome of a Monte Carlo pDP calibration or check.

    Attributes
    ----------
    scale : float
        b.
    profiles : tuple of tuple of float
        The difference magnitudes each bound was evaluated for.
    exceedances : tuple of int
        Per profile, the number of draws whose loss bound exceeds ε at b.
    draws, seed : int
    confidence : float
        Joint confidence of the statement "every profile's exceedance probability is ≤ δ"
        (Clopper–Pearson, Bonferroni over the profiles).
    upper_bounds : tuple of float
        Per profile, the one-sided Clopper–Pearson upper bound at level 1 − (1 − confidence)/J.
    """

    scale: float
    profiles: tuple[tuple[float, ...], ...]
    exceedances: tuple[int, ...]
    draws: int
    seed: int
    confidence: float
    upper_bounds: tuple[float, ...]

    def holds(self, delta: float) -> bool:
        """Every upper confidence bound is ≤ δ (binomial tail test, see :func:`clopper_pearson_upper`)."""
        from scipy import stats

        alpha = (1.0 - self.confidence) / len(self.profiles)
        return all(float(stats.binom.cdf(k, self.draws, delta)) <= alpha for k in self.exceedances)


def clopper_pearson_upper(k: int, n: int, confidence: float) -> float:
    r"""One-sided Clopper–Pearson upper bound: the u with :math:`\Pr(\mathrm{Bin}(n,u) \le k) = 1 - c`.

    Equivalently :math:`\mathrm{Beta}^{-1}(c; k+1, n-k)` (1 when k = n).
    """
    from scipy import stats

    return 1.0 if k >= n else float(stats.beta.ppf(confidence, k + 1, n - k))


def _polynomial_coefficients(u: np.ndarray, profile: np.ndarray, p: int) -> np.ndarray:
    r"""For draws u (n × m) of |GG(0, 1, p)| and magnitudes d (m,), the coefficients
    :math:`A_j = \binom{p}{j}\sum_k u_k^{p-j} d_k^j`, j = 1..p−1 (shape (n, p−1))."""
    columns = [math.comb(p, j) * np.sum(u ** (p - j) * profile**j, axis=1) for j in range(1, p)]
    return np.stack(columns, axis=1) if columns else np.zeros((u.shape[0], 0))


def _loss_bound(coefficients: np.ndarray, power_term: float, c, p: int) -> np.ndarray:
    r""":math:`h(c) = \sum_{j=1}^{p-1} A_j c^j + P c^p` with c = 1/b (Horner's rule): Corollary 7's bound on |L|."""
    c = np.asarray(c, dtype=float)
    h = np.full(coefficients.shape[0], float(power_term))
    for j in range(p - 1, 0, -1):
        h = h * c + coefficients[:, j - 1]
    return h * c


def _draws(p: int, profiles, draws: int, seed: int):
    """Yield (profile index, chunk of |GG(0,1,p)| draws) in a fixed order from one seeded stream."""
    rng = np.random.default_rng(seed)
    unit = GeneralizedGaussian(p, 1.0)
    for i, profile in enumerate(profiles):
        done = 0
        while done < draws:
            size = min(_CHUNK, draws - done)
            yield i, np.abs(unit.sample(rng, (size, len(profile))))
            done += size


CACHED_COEFFICIENTS = 2_000_000
"""Most coefficients A_j (draws × profiles × (p − 1) floats, 16 MB) of one (p, profiles, draws, seed) kept for reuse
by :func:`_coefficients`."""


def _coefficients(p: int, profiles, draws: int, seed: int):
    """Yield (profile index, A_j of a chunk of draws) as ``_polynomial_coefficients`` of :func:`_draws` gives
    them; the same arrays, remembered for the last few (p, profiles, draws, seed) when they are small (one
    calibration tests its scale a dozen times on the same draws, and a report re-calibrates at other ε)."""
    if draws * len(profiles) * max(p - 1, 1) <= CACHED_COEFFICIENTS:
        yield from _cached_coefficients(p, profiles, draws, seed)
        return
    for i, u in _draws(p, profiles, draws, seed):
        yield i, _polynomial_coefficients(u, np.asarray(profiles[i]), p)


@functools.lru_cache(maxsize=4)
def _cached_coefficients(p: int, profiles: tuple, draws: int, seed: int) -> tuple:
    chunks = []
    for i, u in _draws(p, profiles, draws, seed):
        a = _polynomial_coefficients(u, np.asarray(profiles[i]), p)
        a.setflags(write=False)
        chunks.append((i, a))
    return tuple(chunks)


def _power_terms(profiles, p: int, lp_power: float | None) -> list[float]:
    """P = min(Σ_k d_k^p, Δ_p^p) per profile (Σ_k d_k^p alone, Lemma 2's form, without Δ_p^p)."""
    sums = [float(np.sum(np.asarray(d) ** p)) for d in profiles]
    return sums if lp_power is None else [min(total, lp_power) for total in sums]


def gg_pdp_monte_carlo(
    scale: float,
    epsilon: float,
    p: int,
    profiles,
    *,
    lp_power: float | None = None,
    draws: int = PDP_MONTE_CARLO_DRAWS,
    seed: int = PDP_MONTE_CARLO_SEED,
    confidence: float = PDP_CONFIDENCE,
) -> MonteCarloPDP:
    r"""Count, on the recorded draws, how often Corollary 7's loss bound exceeds ε at b.

    For a profile d (the magnitudes of the coordinates one neighbour moves) the bound is

    .. math:: h_b(U) = \sum_k \sum_{j=1}^{p-1}\binom{p}{j}|U_k|^{p-j}(d_k/b)^j + P/b^p,
              \qquad P = \min\big(\textstyle\sum_k d_k^p,\ \Delta_p^p\big),

    with U i.i.d. GG(0, 1, p) (Eq. 13 divided by b^p; with P = Σ d_k^p it is Lemma 2's form
    :math:`\sum_k[(|U_k| + d_k/b)^p - |U_k|^p]`). It dominates |L| for every difference whose
    magnitudes are ≤ d coordinate-wise.
    """
    if int(p) != p or p < 1:
        raise CalibrationError(f"the Monte Carlo pDP calibration needs an integer p >= 1 (got {p})")
    p = int(p)
    profiles = tuple(tuple(float(x) for x in d) for d in profiles)
    terms = _power_terms(profiles, p, lp_power)
    counts = [0] * len(profiles)
    c = 1.0 / scale
    for i, coefficients in _coefficients(p, profiles, draws, seed):
        h = _loss_bound(coefficients, terms[i], c, p)
        counts[i] += int(np.count_nonzero(h > epsilon * (1.0 - 1e-12)))  # ties count as exceedances
    level = 1.0 - (1.0 - confidence) / len(profiles)
    return MonteCarloPDP(
        scale,
        profiles,
        tuple(counts),
        draws,
        seed,
        confidence,
        tuple(clopper_pearson_upper(k, draws, level) for k in counts),
    )


def _largest_certifiable_count(draws: int, delta: float, alpha: float) -> int:
    """The largest k with Pr(Bin(draws, δ) ≤ k) ≤ α (−1 if even k = 0 fails)."""
    from scipy import stats

    k = int(stats.binom.ppf(alpha, draws, delta))
    while k >= 0 and stats.binom.cdf(k, draws, delta) > alpha:
        k -= 1
    while stats.binom.cdf(k + 1, draws, delta) <= alpha:
        k += 1
    return k


def gg_pdp_scale_monte_carlo(
    epsilon: float,
    delta: float,
    p: int,
    profiles,
    *,
    lp_power: float | None = None,
    draws: int = PDP_MONTE_CARLO_DRAWS,
    seed: int = PDP_MONTE_CARLO_SEED,
    confidence: float = PDP_CONFIDENCE,
) -> MonteCarloPDP:
    r"""Corollary 7 by Monte Carlo: the smallest b whose exceedance counts pass the
    Clopper–Pearson test, with the recorded seed (the paper's Fig. 2 method, digest §4.3).

    Each draw's bound :math:`h_b` is a polynomial in c = 1/b with non-negative coefficients, so
    it exceeds ε exactly when b < b_i, its own root; the number of exceedances k(b) is the
    number of b_i above b. The calibrated b is the (k_max+1)-th largest b_i (nudged up), with
    k_max the largest count the one-sided Clopper–Pearson bound accepts at level
    1 − (1−confidence)/J for J profiles.

    *Why the confidence survives the search on the same draws*: k(b) is non-increasing in b
    for the common draws, so the event "the chosen b has true exceedance > δ" implies that
    the test passes at a fixed b just below the true threshold, an event of probability
    ≤ α for each profile.

    Raises
    ------
    CalibrationError
        When δ is too small for the number of draws (no count passes the test).
    """
    _check_target(epsilon, delta)
    if int(p) != p or p < 1:
        raise CalibrationError(f"the Monte Carlo pDP calibration needs an integer p >= 1 (got {p})")
    p = int(p)
    profiles = tuple(tuple(float(x) for x in d) for d in profiles)
    if not profiles:
        raise CalibrationError("no difference profile to calibrate for")
    alpha = (1.0 - confidence) / len(profiles)
    k_max = _largest_certifiable_count(draws, delta, alpha)
    if k_max < 0:
        raise CalibrationError(
            f"delta={delta} is too small to certify with {draws} Monte Carlo draws at confidence "
            f"{confidence} (about {math.ceil(math.log(1 / alpha) / delta)} draws are needed)"
        )
    terms = _power_terms(profiles, p, lp_power)
    roots: list[list[np.ndarray]] = [[] for _ in profiles]
    for i, coefficients in _coefficients(p, profiles, draws, seed):
        roots[i].append(_roots(coefficients, terms[i], epsilon, p))
    scale = 0.0
    for per_profile in roots:
        b = np.sort(np.concatenate(per_profile))[::-1]  # b_i in decreasing order
        scale = max(scale, float(b[k_max]))
    scale *= 1.0 + 1e-9  # the (k_max+1)-th root itself sits on the tie tolerance of the count
    scale = nudge_until(
        scale,
        lambda s: gg_pdp_monte_carlo(
            s, epsilon, p, profiles, lp_power=lp_power, draws=draws, seed=seed, confidence=confidence
        ).holds(delta),
        up=True,
        max_steps=60,
    )
    return gg_pdp_monte_carlo(
        scale, epsilon, p, profiles, lp_power=lp_power, draws=draws, seed=seed, confidence=confidence
    )


def _roots(coefficients: np.ndarray, power_term: float, epsilon: float, p: int) -> np.ndarray:
    """Per draw, the b at which h_b = ε (bisection in c = 1/b on the increasing polynomial)."""
    n = coefficients.shape[0]
    lo = np.zeros(n)
    hi = np.ones(n)
    while True:
        short = _loss_bound(coefficients, power_term, hi, p) < epsilon
        if not short.any():
            break
        hi = np.where(short, hi * 2.0, hi)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        below = _loss_bound(coefficients, power_term, mid, p) < epsilon
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 1.0 / lo
