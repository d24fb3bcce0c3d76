r"""The generalized Gaussian as an exponential mechanism, and what it actually costs.

The exponential mechanism (McSherry & Talwar 2007; Liu Eq. 14) with utility
:math:`u(s^* \mid s) = -\|s^* - s\|_p^p` (Eq. 15) has density

.. math:: f(s^*\mid s) \propto \exp\Big(\frac{\varepsilon\, u(s^*\mid s)}{2\Delta u}\Big)
          = \prod_k \exp\big(-|s^*_k - s_k|^p / b^p\big), \qquad b^p = \frac{2\Delta u}{\varepsilon},

i.e. GG(s, b, p) noise — restricted to the box on a bounded domain (Eq. 16: the truncated GG).
Its nominal guarantee is ε, but the actual cost is smaller (Corollary 12): ε/2 when the
normalizer does not depend on s (unbounded domain, p = 1: b = 2Δ₁/ε, twice the Laplace scale),
and strictly less than ε on a box. :func:`exponential_gg_actual_epsilon` evaluates that actual
cost with the certified truncated-loss bound of :mod:`dpopt.privacy.truncated_gg`.

Utility sensitivity on a box :math:`[c_{k0}, c_{k1}]` of width :math:`R_k`, for a neighbour moving
coordinate k by at most :math:`D_k`:

* coordinate-wise supremum (:func:`lp_utility_sensitivity`): :math:`|\,|t-s|^p - |t-s'|^p| \le
  R^p - (R-D)^p` for s, s', t in [0, R] (x ↦ x^p is convex and increasing, so the largest change
  over a window of length D is at its right end), attained at t = 0, s = R − D, s' = R;
* Lemma 9's bounds (:func:`lemma9_utility_sensitivity`): (a) p = 1: Δ₁; (b) p = 2:
  :math:`2\sum_k D_k R_k`; (c) p ≥ 3: :math:`\sum_k\sum_{j=1}^{p}\binom{p}{j}M_k^{p-j}\Delta^{(j)}_{1,k}`
  with :math:`M_k = \max(|c_{k0}|, |c_{k1}|)` and :math:`\Delta^{(j)}_{1,k} \le M_k^j - (M_k - D_k)^j`
  (the l1 sensitivity of :math:`s_k^j`, bounded as in the digest §5 for a box [0, R]).

References
----------
.. [1] F. Liu, "Generalized Gaussian mechanism for differential privacy", IEEE TKDE 2019, §2.7,
   Lemma 9, Corollary 12, Appendices D–E (digest ``papers/002_generalized_gaussian.md`` §5).
.. [2] F. McSherry and K. Talwar, "Mechanism design via differential privacy", FOCS 2007.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.privacy.truncated_gg import worst_case_loss


def exponential_gg_scale(epsilon: float, p: float, utility_sensitivity: float) -> float:
    r""":math:`b = (2\Delta u/\varepsilon)^{1/p}` (Eqs. 15–16)."""
    return (2.0 * utility_sensitivity / epsilon) ** (1.0 / p)


def lp_utility_sensitivity(p: float, widths, rows) -> float:
    r""":math:`\Delta u = \max_{\text{rows}} \sum_k \big(R_k^p - (R_k - |v_k|)^p\big)` for
    :math:`u = -\|s^*-s\|_p^p` on the box (module docstring)."""
    widths = np.asarray(widths, dtype=float)
    rows = np.minimum(np.atleast_2d(np.asarray(rows, dtype=float)), widths)
    return float(np.max(np.sum(widths**p - (widths - rows) ** p, axis=1)))


def lemma9_utility_sensitivity(p: int, lower, upper, per_coordinate) -> float:
    r"""Lemma 9's bound on Δu for :math:`u = -\|s^*-s\|_p^p` with :math:`s_k \in [c_{k0}, c_{k1}]`
    (p = 1: Δ₁ ≤ Σ_k D_k; p = 2: 2 Σ_k D_k R_k; p ≥ 3: part c, module docstring)."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    d = np.asarray(per_coordinate, dtype=float)
    if p == 1:
        return float(np.sum(d))
    if p == 2:
        return float(2.0 * np.sum(d * (upper - lower)))
    m = np.maximum(np.abs(lower), np.abs(upper))
    total = 0.0
    for j in range(1, p + 1):
        power_sensitivity = m**j - np.maximum(m - d, 0.0) ** j
        total += math.comb(p, j) * float(np.sum(m ** (p - j) * power_sensitivity))
    return total


def exponential_gg_actual_epsilon(
    scale: float, p: float, widths=None, rows=None, l1_sensitivity=None
) -> float:
    r"""The actual worst-case privacy loss of the GG exponential mechanism at scale b.

    Unbounded domain (``widths`` None, p = 1 only): the normalizer does not depend on s and the
    loss is exactly :math:`\Delta_1/b` (= ε/2 at the EM scale). On a box: the certified bound on
    the truncated GG's worst-case loss (:func:`dpopt.privacy.truncated_gg.worst_case_loss`).
    """
    if widths is None:
        if p != 1:
            raise ValueError("on an unbounded domain the l_p^p utility has infinite sensitivity for p > 1")
        return float(l1_sensitivity) / scale
    return worst_case_loss("truncated", scale, p, widths, rows)[0]
