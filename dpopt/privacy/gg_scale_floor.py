r"""Scale floors of generalized Gaussian noise under (ε, δ): no smaller scale hides a one-coordinate shift.

i.i.d. GG noise of shape p (continuous GG(0, b, p), or the discrete law P[K = k] ∝ e^{−(|k|/s)^p} on ℤ) meets an
(ε, δ)-DP target (or (ε, δ)-pDP, which implies it) only if each coordinate's noise alone does: releasing one
coordinate is post-processing, so a neighbouring move v gives, on a coordinate with |v_k| = t,

.. math:: P[K + t \in A] \le e^{\varepsilon} P[K \in A] + \delta \quad\text{for every event } A .

**Continuous law.** The family is log-concave, so the hockey-stick divergence of the shift t falls as the scale b
grows (it depends on t/b only and grows with the shift: :mod:`dpopt.privacy.gg_profile`, "Worst move"); the
smallest b meeting it, :func:`~dpopt.privacy.gg_profile.gg_scale_for_approx`, less 10⁻⁹ relative, is a floor
(:func:`continuous_scale_floor`). For p = 2 the shift may be a whole move's ‖v‖₂: ⟨Z, v/‖v‖₂⟩ of i.i.d.
N(0, σ²) noise is N(0, σ²), shifted by ‖v‖₂.

**Discrete law** (:func:`discrete_scale_floor`): not a scale family, so the floor is proven on intervals of s.

* *|K| grows stochastically with s.* For s′ > s, P_{s′}[k]/P_s[k] ∝ exp(|k|^p(s^{−p} − s′^{−p})) increases in |k|:
  a monotone likelihood ratio in |K|, hence |K| is stochastically larger under s′ (Lehmann). By symmetry
  P_s[K ≥ m] = P_s[|K| ≥ m]/2 increases in s for m ≥ 1, and P_s[K ≥ m] = 1 − P_s[|K| ≥ 1 − m]/2 decreases for
  m ≤ 0. The same order makes E|K|, E K² grow and P[|K| ≤ γ] fall with s.
* *An interval fails.* With A = {y ≥ a}, a ≥ 1, every s ∈ [s₀, s₁] has

  .. math:: \delta_s \ge \ell(a - t) - e^{\varepsilon} P_{s_1}[K \ge a], \qquad
            \ell(m) = P_{s_0}[K \ge m]\ (m \ge 1), \quad P_{s_1}[K \ge m]\ (m \le 0),

  so when the largest right side over a exceeds δ, no s in the interval meets the target (s₀ = 0 is the point
  mass at 0).
* *March.* From s = 0, intervals [s₀, s₀(1 + η)] are proven in turn, η doubling after a success and halving
  after a failure; the march stops when η < 2⁻⁸ fails. Every s below the floor it returns fails the target.

The sums are in double precision over |k| ≤ s·746^{1/p} + t + 2 (beyond, e^{−(|k|/s)^p} underflows); an interval
counts as proven only when its margin over δ exceeds 10⁻¹⁰ times the terms compared plus 10⁻²⁵⁰: far above the
rounding of these positive sums (at most about 10⁻¹¹ relative for 10⁵ terms) and the mass lost to underflow (terms
below 10⁻³⁰⁷, fewer than 10⁷ of them), which alone can make a subnormal tail look positive against a zero.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.privacy.gg_profile import gg_scale_for_approx

ROUND_DOWN = 1 - 1e-9
"""A continuous floor is the smallest scale meeting the target (to a few ulps) moved down by 10⁻⁹ relative."""

MIN_STEP = 2.0**-8
"""The smallest relative step of the discrete march: its floor is within 0.4% of the last scale it proves."""

MAX_TERMS = 2_000_000
"""The march stops (its floor stays valid) before a law needs more terms than this."""

_SLACK = 1e-10
"""The margin over δ an interval needs, relative to the probabilities compared (module docstring)."""

_UNDERFLOW = 1e-250
"""The margin over δ an interval needs besides, for the mass lost to underflow (module docstring)."""


def continuous_scale_floor(epsilon: float, delta: float, shift: float, p: int) -> float:
    """A floor on the scale b of GG(0, b, p) noise whose one coordinate hides a shift by ``shift`` under
    (ε, δ)-DP (module docstring): :func:`~dpopt.privacy.gg_profile.gg_scale_for_approx` less 10⁻⁹ relative.

    Examples
    --------
    >>> b = continuous_scale_floor(1.0, 0.05, 1.0, 1)  # Laplace: b = 1/(ε − 2 log(1 − δ))
    >>> 0 < 1 / (1.0 - 2 * math.log(0.95)) - b < 1e-8
    True
    """
    return gg_scale_for_approx(epsilon, delta, shift, p) * ROUND_DOWN


def discrete_scale_floor(p: int, shift: int, epsilon: float, delta: float) -> float:
    r"""A floor on the scale s of the discrete GG law on ℤ whose one coordinate hides the integer shift ``shift``
    under (ε, δ)-DP: every s below it fails the target (module docstring, "March"); 0.0 when none is proven.

    Parameters
    ----------
    p : int
        The shape, ≥ 1.
    shift : int
        t ≥ 1, the largest move of one coordinate (Δ∞ on counts).
    epsilon, delta : float
        The target, at least the decimals the spec writes (a larger target only lowers the floor).

    Examples
    --------
    >>> s = discrete_scale_floor(1, 1, 1.0, 0.0)  # discrete Laplace, pure ε = 1 on a unit shift: s ≥ 1
    >>> 0.99 < s <= 1.0
    True
    """
    if not 0 <= delta < 0.5 or shift < 1:
        return 0.0
    factor = math.exp(epsilon) * (1 + 1e-12)
    low, step = 0.0, 1.0
    high = shift / 8.0
    while True:
        proven = _interval_fails(p, shift, factor, delta, low, high)
        if proven is None:
            return low
        if proven:
            low, step = high, min(2 * step, 1.0)
        elif step < MIN_STEP or low == 0.0:
            return low
        else:
            step /= 2
        high = low * (1 + step)


def _interval_fails(p: int, shift: int, factor: float, delta: float, low: float, high: float) -> bool | None:
    """Whether every s in [low, high] is proven to fail the target (module docstring); None past
    :data:`MAX_TERMS`."""
    top = math.ceil(high * 746.0 ** (1.0 / p)) + shift + 2
    if top > MAX_TERMS:
        return None
    m = np.arange(1 - shift, top + 1)  # index of m: m − 1 + shift
    at_low, at_high = _at_least(p, low, m), _at_least(p, high, m)
    a = np.arange(1, top + 1)  # the events {y ≥ a}
    lower = np.where(a - shift >= 1, at_low[a - 1], at_high[a - 1])  # ℓ(a − t)
    upper = factor * at_high[a - 1 + shift]
    margin = lower - upper - _SLACK * (lower + upper) - _UNDERFLOW
    return bool(margin.max() > delta)


def _at_least(p: int, s: float, m: np.ndarray) -> np.ndarray:
    """P_s[K ≥ m] for the integers m (m[0] ≤ 0 < m[-1], m[-1] past the law's float support); s = 0 is the point
    mass at 0."""
    if s == 0.0:
        return (m <= 0).astype(float)
    k = np.arange(1, int(m[-1]) + 1, dtype=float)
    w = np.exp(-((k / s) ** p))
    tail = np.append(np.cumsum(w[::-1])[::-1], 0.0)  # tail[j] = Σ_{k ≥ j+1} w(k)
    head = np.concatenate(([0.0], np.cumsum(w)))  # head[j] = Σ_{k=1}^{j} w(k)
    total = 1.0 + 2.0 * tail[0]
    upward = tail[np.clip(m - 1, 0, None)]
    downward = 1.0 + tail[0] + head[np.clip(-m, 0, None)]
    return np.where(m >= 1, upward, downward) / total
