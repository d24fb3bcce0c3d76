r"""μ-GDP of the discrete Gaussian under integer shifts: a certified slope per lattice variance.

For Y ~ N_ℤ(0, σ²) (pmf ∝ e^{−k²/(2σ²)}) and an integer shift Δ the pair P = law(Y), Q = law(Y + Δ) has a
monotone likelihood ratio, so its trade-off function T(P, Q) is the piecewise-linear curve through the
Neyman–Pearson tests "reject when Y ≥ k" (k ∈ ℤ), (α_k, β_k) = (T(k), 1 − T(k − Δ)), T(k) = P[Y ≥ k]. A
piecewise-linear curve through points on or above the convex G_μ(α) = Φ(Φ̄⁻¹(α) − μ) lies above it, so the
pair is μ-GDP (Dong, Roth & Su 2022, Def. 2.6) iff every vertex is, i.e. with z_k = Φ̄⁻¹(T(k)):

.. math:: z_k - z_{k-\Delta} \le \mu \quad\text{for every } k\in\mathbb{Z}.

z_k − z_{k−Δ} is a sum of Δ consecutive increments d_j = z_{j+1} − z_j, and d_{−1−j} = d_j by symmetry
(z_{−j} = −z_{j+1}), so every shift Δ is (|Δ|·m)-GDP with the **slope** m = sup_{j ≥ 0} d_j. A vector of
independent coordinates N_ℤ(0, σ_i²) shifted by an integer vector Δ is then
√(Σ_i m_i²Δ_i²)-GDP (the tensor product of trade-off functions is monotone and
G_a ⊗ G_b = G_{√(a²+b²)}, DRS Prop. 2.8): exactly the continuous Gaussian's μ at the **effective variances**
1/m_i². For the continuous Gaussian m = 1/σ; for the discrete one σm ≈ 1 + 1/(24σ²) (the maximum is at
j = 0, where d_0 = 2z_1 and P[Y = 0] = 1/Z exceeds the continuous mass of [−½, ½]).

**Certified slope** (:func:`unit_shift_gdp`). The increments d_0, …, d_{A−1} are evaluated in float64 (log
tails by a reverse log-sum-exp, z_j by :func:`dpopt.core.normal.ndtri_exp`, which imports no scipy), their
largest value M is enlarged by the margin :data:`MARGIN`, m = (1 + η)M, after checking that η M/2 exceeds the
float64 error bound of an increment (:func:`_increment_error`). For j ≥ A an analytic bound, valid when
A − ½ ≥ σ; write y = (j − ½)/σ and t = 1/y:

* **z_j ≥ y.** f(k) = e^{−k²/(2σ²)} is convex for k ≥ σ, so the midpoint rule underestimates its integral
  (Hermite–Hadamard): Σ_{k≥j} f(k) ≤ ∫_{j−½}^∞ f = σ√(2π) Φ̄(y); and Z = Σ_k f(k) = σ√(2π) Σ_n e^{−2π²σ²n²}
  ≥ σ√(2π) (Poisson summation). Hence T(j) ≤ Φ̄(y).
* **d_j ≤ N_j/h(y)** with N_j = −log(T(j+1)/T(j)): log Φ̄ has derivative −h, the Gaussian hazard
  h(z) = φ(z)/Φ̄(z), which increases, so N_j = ∫_{z_j}^{z_{j+1}} h ≥ d_j h(z_j) ≥ d_j h(y).
* **σN_j ≤ y + 1/σ + 1/y.** T(j+1)/T(j) is the mean of e^{−(2K+1)/(2σ²)} over the tail law K ≥ j, whose
  overshoot K − j is stochastically below a geometric law of ratio r_j = e^{−(2j+1)/(2σ²)}; by Jensen
  N_j ≤ (j + ½ + r_j/(1 − r_j))/σ², and r_j/(1 − r_j) ≤ 2σ²/(2j + 1) (e^s − 1 ≥ s).
* **h(y) ≥ y/(1 − t² + 3t⁴)**: the asymptotic series of Mills' ratio cut after a positive term is an upper
  bound, Φ̄(y) < φ(y)(1/y − 1/y³ + 3/y⁵) for y > 0 (Abramowitz & Stegun 26.2.12).

So σd_j ≤ (1 + t/σ + t²)(1 − t² + 3t⁴) = 1 + t/σ − t³/σ + 2t⁴ + 3t⁵/σ + 3t⁶ ≤ G(t) = 1 + t/σ + 2t⁴ + 3t⁵/σ
+ 3t⁶, which increases in t, i.e. decreases in j: B(A) = G(σ/(A − ½))/σ ≤ m closes the argument. G − 1 ≈
1/(A − ½) + 2t⁴, below η once A ≳ 1/(0.6η) and y ≳ 16: A ≈ max(σ + 1, 16,668, 16.1σ) increments, about
17,000 at σ² = 10⁶ (the geometric bound with z_j ≥ (j − 2)/σ, used before, needed A ≥ σ²/2).

The float64 sums run to K = A + 400 + ⌈100σ²/A⌉ and bound the rest by f(K)/(1 − r_K) (the geometric
law again); that overestimate moves T(j), j ≤ A, by a relative e^{−(K²−A²)/(2σ²)}(1 + σ²/K) < e^{−94}.

References
----------
.. [1] C. Canonne, G. Kamath and T. Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
.. [2] J. Dong, A. Roth and W. Su, "Gaussian differential privacy", JRSS B 84 (2022), Def. 2.6, Prop. 2.8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpopt.core.normal import ndtri_exp

MARGIN = 1e-4
"""η: the certified slope is (1 + η) times the largest increment evaluated (a variance cost of about 2η)."""

MAX_SIGMA2 = Fraction(2**28)
"""Largest lattice variance certified: the float64 evaluation runs over about max(16.1σ, 16,668) increments (264,000
at 2²⁸, about 0.13 s of CPU) and its error bound (:func:`_increment_error`, 2.4·10⁻¹⁰ relative at 2²⁸) stays below
half the margin ηM/2 (5·10⁻⁵ relative) up to about 2³¹; ``tests/test_discrete_gaussian_gdp.py`` checks a 50-digit
sample of increments at 2²⁸."""

_UNIT = 2.0**-53


@dataclass(frozen=True)
class UnitShiftGdp:
    """The certified slope m of N_ℤ(0, σ²): a shift by an integer Δ is (|Δ|·m)-GDP (module docstring)."""

    sigma2: Fraction
    slope: Fraction
    largest_increment: float
    checked: int
    tail_bound: float

    @property
    def effective_variance(self) -> Fraction:
        """1/m²: the continuous Gaussian variance with the same μ per unit shift."""
        return 1 / (self.slope * self.slope)

    def describe(self) -> str:
        return (f"σ_ℤ² = {self.sigma2}: increments d_j evaluated for 0 ≤ j < {self.checked}, largest "
                f"{self.largest_increment:.17g}; slope m = (1 + {MARGIN:g})·max = {float(self.slope):.17g} "
                f"(σm = {float(self.slope) * math.sqrt(float(self.sigma2)):.12g}); tail bound B({self.checked}) = "
                f"{self.tail_bound:.17g} ≤ m")


def _start(s2: float) -> int:
    """A first A for the tail bound: A − ½ ≥ σ, 1/(A − ½) ≤ 0.6η and y = (A − ½)/σ ≥ 16.1 (2t⁴ ≤ 0.3η), so that
    B(A) ≈ (1 + 0.9η)/σ is below m ≥ (1 + η)/σ."""
    sigma = math.sqrt(s2)
    return int(max(math.ceil(sigma + 1), math.ceil(1 / (0.6 * MARGIN)) + 1, math.ceil(0.5 + 16.1 * sigma)))


def _tail_bound(j: int, s2: float) -> float | None:
    """B(j) = G(σ/(j − ½))/σ ≥ d_k for every k ≥ j (module docstring); None when j − ½ < σ."""
    sigma = math.sqrt(s2)
    if j - 0.5 < sigma:
        return None
    t = sigma / (j - 0.5)
    g = 1 + t / sigma + 2 * t**4 + 3 * t**5 / sigma + 3 * t**6
    return g / sigma * (1 + 1e-12)


def _increment_error(count: int, z_max: float) -> float:
    """A bound on the float64 error of one increment d_j: the reverse log-sum-exp over ``count`` terms gives
    T(j) to a relative 2·count·u (u = 2⁻⁵³), which moves z_j ≥ 0 by at most that over the hazard h(z_j) ≥
    h(0) = 0.797; ndtri_exp adds a few ulp of |z| + 1 (3.2 measured against mpmath, taken as 8u(|z| + 1)); two z
    per increment."""
    return 2 * (2 * count * _UNIT / 0.797 + 8 * _UNIT * (z_max + 1))


@lru_cache(maxsize=256)
def unit_shift_gdp(sigma2: Fraction) -> UnitShiftGdp | None:
    """The certified slope of N_ℤ(0, σ²) (module docstring); None beyond :data:`MAX_SIGMA2` or when the
    float64 error bound is not below the margin."""
    sigma2 = Fraction(sigma2)
    if not 0 < sigma2 <= MAX_SIGMA2:
        return None
    s2 = float(sigma2)
    checked = _start(s2)
    while True:
        count = checked + 400 + math.ceil(100 * s2 / checked)  # the tail beyond count: module docstring
        k = np.arange(count + 1, dtype=float)
        log_w = -k * k / (2 * s2)
        r_end = math.exp(-(2 * count + 1) / (2 * s2))
        log_w[-1] += -math.log1p(-r_end)  # Σ_{k ≥ count} w(k) ≤ w(count)/(1 − r_count)
        log_suffix = np.logaddexp.accumulate(log_w[::-1])[::-1]  # log Σ_{k ≥ j} w(k)
        log_z = math.log(2 * math.exp(log_suffix[0]) - 1.0)  # Z = 2Σ_{k≥0} w(k) − 1
        z = -ndtri_exp(log_suffix[1:checked + 1] - log_z)  # z_j = Φ̄⁻¹(T(j)), j = 1..checked
        increments = np.concatenate([[2 * z[0]], np.diff(z)])  # d_0 = 2z_1, d_j = z_{j+1} − z_j
        largest = float(increments.max())
        slope = largest * (1 + MARGIN)
        bound = _tail_bound(checked, s2)
        if bound is not None and bound <= slope:
            break
        checked *= 2
        if checked > 4 * s2 + 10 * _start(s2):
            return None
    if _increment_error(count, float(z[-1])) > MARGIN * largest / 2 or not np.all(np.isfinite(increments)):
        return None
    return UnitShiftGdp(sigma2, Fraction(slope), largest, checked, bound)
