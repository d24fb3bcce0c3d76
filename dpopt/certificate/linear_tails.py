r"""Proven quantiles of a linear combination of independent noise variates: the half-width of an interval for a
cell whose noise is :math:`Z_i = \sum_k c_{ik} W_k` (a plan's query answered from a jointly released histogram,
:math:`c = MB`; :mod:`dpopt.certificate.per_cell`).

For a level L, ``half_widths`` returns for each cell an h_i with :math:`P(|Z_i| > h_i) \le 1 - L`, proven, by
the first route that applies:

1. **Lattice convolution** (every W_k on ℤ, every :math:`c_{ik}` a whole multiple of 1/D for one whole D ≤
   :data:`MAX_DENOMINATOR` (D = 1 for a map of 0/1 sums; the projection I − J/n of n cells: D = n), the law of each W_k given by its pmf): :math:`D Z_i`
   lives on ℤ (the quantile of :math:`|Z_i|` is that of :math:`|DZ_i|` over D) and its pmf is the convolution
   of the pmfs of the terms :math:`Dc_{ik}W_k`. Each W_k is cut to :math:`|W_k| \le T_k` with :math:`P(|W_k| > T_k) = 2P(W_k > T_k) \le \tau_k`, and the
   convolution :math:`\tilde p` of the cut pmfs is the law of :math:`Z_i` on the event E that no term was cut
   (a sub-probability). Then

   .. math::  P(|Z_i| > h) \le \tilde P(|Z_i| > h) + P(E^c) \le \tilde P(|Z_i| > h) + \sum_k \tau_k,

   and h_i is the smallest whole h with :math:`\tilde P(|Z_i| > h) + \sum_k \tau_k + 10^{-12} \le 1 - L` (the
   :math:`10^{-12}` covers the rounding of the double-precision sums). With :math:`\sum_k\tau_k` =
   :data:`TRUNCATION` × (1 − L) this is the exact quantile of :math:`|Z_i|` unless the quantile's tail lies within
   that much of 1 − L. Convolutions are direct (``numpy.convolve``: sums of non-negative products, no FFT
   cancellation), by repeated squaring for terms of one law and coefficient.
2. **Chernoff** (every W_k with a stated bound on its log moment generating function :math:`\Lambda_k(s) \ge
   \log E e^{sW_k}`: Gaussian, discrete Gaussian (sub-Gaussian, Canonne, Kamath & Steinke 2020, Cor. 9),
   Laplace, discrete Laplace; :meth:`dpopt.noise.marginal.Marginal.log_mgf_bound`): for every s > 0, by Markov's
   inequality on :math:`e^{sZ_i}`, independence and symmetry,

   .. math::  P(|Z_i| \ge h) \le 2\exp\Big(-sh + \sum_k \Lambda_k(c_{ik}s)\Big) \le 1 - L
              \quad\text{for}\quad h = h(s) = \frac{\sum_k \Lambda_k(c_{ik}s) + \ln\frac{2}{1-L}}{s},

   so every s gives a valid h(s); h_i is h(s) at the s a bounded scalar minimisation finds (the bound holds at
   any s, so the search's accuracy affects the width only). For sub-Gaussian terms alone the minimum is the
   closed form :math:`\sqrt{2 v \ln(2/(1-L))}`, :math:`v = \sum_k c_{ik}^2 v_k`.

Neither applies (a law without a pmf or a moment generating bound): None, and the caller keeps its Monte Carlo.

References
----------
.. [1] Canonne, C., Kamath, G. & Steinke, T. (2020). The discrete Gaussian for differential privacy. NeurIPS
   (arXiv:2004.00010), Corollary 9.
.. [2] Boucheron, S., Lugosi, G. & Massart, P. (2013). Concentration Inequalities, §2.1 (the Cramér–Chernoff
   method).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

TRUNCATION = 1e-3
"""The mass cut from the lattice convolution, as a fraction of 1 − L (added to the tail, so still proven)."""
FLOAT_SLACK = 1e-12
"""Added to the convolved tail for the rounding of double-precision sums of non-negative terms."""
MAX_DENOMINATOR = 1024
"""Coefficients that are multiples of 1/D for a whole D up to this are convolved on the lattice (1/D)ℤ."""
MAX_WORK = 1e10
"""The squared supports of all convolutions of one call add up to at most this (about 2 s of CPU: direct
convolution costs about the square of the support, 0.3 s at 41,000); the rows beyond it take the Chernoff route."""
MAX_SUPPORT = 60_001
"""Largest support of a convolved law (direct convolution costs about its square: 0.3 s CPU at 41,000); beyond
it, Chernoff."""


def _denominator(coefficients: np.ndarray) -> int | None:
    """The smallest whole D ≤ :data:`MAX_DENOMINATOR` with every D·c_k a whole number (to 1e-9 relative), or None:
    the least common multiple of each coefficient's nearest fraction's denominator, checked."""
    scale = 1
    for c in np.unique(np.abs(coefficients)):
        scale = math.lcm(scale, Fraction(float(c)).limit_denominator(MAX_DENOMINATOR).denominator)
        if scale > MAX_DENOMINATOR:
            return None
    scaled = np.abs(coefficients) * scale
    return scale if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, scaled)) else None


def _power(pmf: np.ndarray, n: int) -> np.ndarray:
    """The n-fold convolution of a (centred, odd-length) pmf, by repeated squaring."""
    out = np.ones(1)
    while n:
        if n & 1:
            out = np.convolve(out, pmf)
        n >>= 1
        if n:
            pmf = np.convolve(pmf, pmf)
    return out


def _convolved(terms: dict, tau: float, budget: list) -> tuple[np.ndarray, float] | None:
    """(pmf of Σ c·W over the cut supports, centred; total cut mass) for ``terms`` {(c, marginal key):
    (marginal, count)}, or None when the support would exceed :data:`MAX_SUPPORT` or its square the work left in
    ``budget`` (a one-element list, decreased by it)."""
    count = sum(n for _, n in terms.values())
    cuts = {key: m.cut(tau / count) for key, (m, _) in terms.items()}
    support = sum(2 * key[0] * cuts[key] * n for key, (_, n) in terms.items()) + 1
    if support > MAX_SUPPORT or support**2 > budget[0]:
        return None
    budget[0] -= support**2
    pmf, cut_mass = np.ones(1), 0.0
    for key, (marginal, n) in terms.items():
        c, top = key[0], cuts[key]
        single = np.zeros(2 * c * top + 1)
        single[::c] = np.exp(marginal.log_density(np.arange(-top, top + 1, dtype=float)))
        pmf = np.convolve(pmf, _power(single, n))
        cut_mass += n * 2.0 * float(marginal.tail(top))
    return pmf, cut_mass


def _lattice_half_width(terms: dict, level: float, budget: list) -> float | None:
    """Route 1 of the module docstring for one cell's terms."""
    excess = 1.0 - level
    found = _convolved(terms, TRUNCATION * excess, budget)
    if found is None:
        return None
    pmf, cut_mass = found
    centre = (len(pmf) - 1) // 2
    upper = np.cumsum(pmf[::-1])[::-1]  # upper[j] = Σ_{i ≥ j} p̃_i
    lower = np.cumsum(pmf)  # lower[j] = Σ_{i ≤ j} p̃_i
    h = np.arange(centre + 1)  # P̃(|Z| > h) = P̃(Z ≥ h + 1) + P̃(Z ≤ −h − 1)
    above = np.append(upper[centre + 1 + h[:-1]], 0.0)
    below = np.append(lower[centre - 1 - h[:-1]], 0.0)
    ok = np.flatnonzero(above + below + cut_mass + FLOAT_SLACK <= excess)
    return float(h[ok[0]]) if ok.size else None


def _chernoff_half_width(coefficients: np.ndarray, marginals: list, level: float) -> float | None:
    """Route 2 of the module docstring for one cell (coefficients and marginals of its non-zero terms)."""
    if any(m.log_mgf_bound(0.0) is None for m in marginals):
        return None
    log_term = math.log(2.0 / (1.0 - level))
    if all(m.gaussian_sd is not None or m.sub_gaussian is not None for m in marginals):
        v = sum(c * c * (m.gaussian_sd**2 if m.gaussian_sd is not None else m.sub_gaussian)
                for c, m in zip(coefficients, marginals))
        return math.sqrt(2.0 * v * log_term)
    radius = min(m.mgf_radius / abs(c) for c, m in zip(coefficients, marginals))
    if not math.isfinite(radius):
        return None

    def h(s: float) -> float:
        total = sum(m.log_mgf_bound(c * s) for c, m in zip(coefficients, marginals))
        return (total + log_term) / s if math.isfinite(total) else math.inf

    from scipy import optimize  # imported where used (start-up of `dpopt verify`)

    found = optimize.minimize_scalar(h, bounds=(1e-9 * radius, radius * (1.0 - 1e-9)), method="bounded",
                                     options={"xatol": 1e-10 * radius})
    return float(h(float(found.x)))  # h(s) is a valid bound at any s


def half_widths(coefficients: np.ndarray, marginals: tuple, level: float,
                chernoff: bool = True) -> tuple[np.ndarray, str] | None:
    """(h_i for each row i of Z = C·W, how) with :math:`P(|Z_i| > h_i)` ≤ 1 − L (L the level) proven (module
    docstring), or None.

    Parameters
    ----------
    coefficients : array (m, r)
        C, e.g. M·B for a query map M of a product law B·W.
    marginals : tuple of Marginal
        The laws of W_1 … W_r (independent, symmetric).
    level : float
    chernoff : bool
        Allow the Chernoff route; False: None unless every row is convolved (a caller with a bound of its own).
    """
    c = np.atleast_2d(np.asarray(coefficients, dtype=float))
    lattice = all(m.lattice for m in marginals)
    laws: dict = {}
    law_of = np.array([laws.setdefault(m.key, (len(laws), m))[0] for m in marginals])
    by_index = {j: m for j, m in laws.values()}
    out, cache, routes, budget = np.empty(c.shape[0]), {}, set(), [MAX_WORK]
    for i, row in enumerate(c):
        nonzero = np.flatnonzero(row)
        scale = _denominator(row[nonzero]) if lattice and nonzero.size else None
        if scale is not None:
            steps = np.rint(np.abs(row[nonzero]) * scale).astype(np.int64)
            kept = steps > 0  # a coefficient below 1e-9/D is a rounding residue of a zero
            pairs, counts = np.unique(np.column_stack([steps[kept], law_of[nonzero][kept]]), axis=0,
                                      return_counts=True)
            signature = (scale, pairs.tobytes(), counts.tobytes())
            if signature not in cache:
                terms = {(int(a), by_index[b].key): (by_index[b], int(n)) for (a, b), n in zip(pairs, counts)}
                found = _lattice_half_width(terms, level, budget) if terms else 0.0
                cache[signature] = None if found is None else found / scale
            if cache[signature] is not None:
                routes.add("lattice")
                out[i] = cache[signature]
                continue
        if not chernoff and nonzero.size:
            return None
        value = _chernoff_half_width(row[nonzero], [marginals[k] for k in nonzero], level) if nonzero.size else 0.0
        if value is None:
            return None
        routes.add("chernoff")
        out[i] = value
    how = []
    if "lattice" in routes:
        how.append(f"the exact {level:g} quantile of |Z_i|, a combination of independent lattice variates whose "
                   f"coefficients times a whole D ≤ {MAX_DENOMINATOR} are whole numbers (D·Z_i on ℤ), "
                   "by convolution of their pmfs, each cut where its two tails hold "
                   f"≤ {TRUNCATION:g}·(1 − L)/(number of terms) and the cut mass added to the tail "
                   "(P(|Z_i| > h) ≤ P̃(|Z_i| > h) + Σ_k τ_k ≤ 1 − L, proven)")
    if "chernoff" in routes:
        how.append("the Chernoff bound P(|Z_i| ≥ h) ≤ 2 exp(−sh + Σ_k Λ_k(c_ik s)) ≤ 1 − L with Λ_k each variate's "
                   "log moment generating function (or its sub-Gaussian bound), s minimised numerically (valid at "
                   "any s), proven")
    return out, "; ".join(how)


__all__ = ["FLOAT_SLACK", "MAX_DENOMINATOR", "MAX_SUPPORT", "MAX_WORK", "TRUNCATION", "half_widths"]
