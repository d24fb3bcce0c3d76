r"""A floor on the second moment of i.i.d. symmetric additive noise under ρ-zCDP (or μ-GDP), from the listed moves.

Let the noise have d i.i.d. coordinates, each of a law P on ℝ (continuous, or on a lattice such as ℤ) symmetric
about 0, with E X² = σ² < ∞, and let P_t be the law of X + t. For a shift t > 0 with χ² = χ²(P_t ‖ P) < ∞ (else
D₂ = ∞ and no Rényi target holds), the likelihood ratios L_± = dP_{±t}/dP exist and E_P[L_± X] = E X ± t.

* **Hammersley–Chapman–Robbins.** E_P[(L_+ − 1)X] = t, so by Cauchy–Schwarz t² ≤ E_P[(L_+ − 1)²]·E X² = χ²σ².
* **Both directions** (derived here). E_P[(L_+ − L_−)X] = 2t, so
  4t² ≤ E_P[(L_+ − L_−)²]σ² = (E L_+² + E L_−² − 2E[L_+L_−])σ² ≤ 2(1 + χ²)σ², since L_+L_− ≥ 0 and, P being
  symmetric, χ²(P_{−t} ‖ P) = χ²(P_t ‖ P).

Hence, with a = t²/σ²,

.. math:: D_2(P_t \,\|\, P) = \log(1 + \chi^2) \ge \psi(a) = \log\max(1 + a,\; 2a) .

The second branch wins for a > 1, shifts larger than the noise's standard deviation. How far from the least χ² at a
given second moment (a convex program over laws on ℤ with shift 1, solved numerically with cvxpy to explore, not to
prove): over all laws HCR alone is within 0.1% for a ≤ 0.5 and 6% at a = 1.32, approached by laws that are not
symmetric; over symmetric laws the least χ² at a = 1.32 is 1.96, against 1.32 by HCR and 1.64 by ψ. The Gaussian
N(0, σ²), D₂ = a exactly, meets neither: ψ(a) < a for every a > 0 (e^a > 1 + a and e^a > 2a), so the floor stays
below what Gaussian noise needs. On one coordinate moved by t with D₂ ≤ 2ρ the floor is t²/(e^{2ρ} − 1) when
e^{2ρ} ≤ 2, else 2t²/e^{2ρ}, against the Gaussian's t²/(2ρ): 0.74 of it at ρ = 0.5.

**Moves.** Rényi divergences of independent coordinates add, so a move v (a difference vector of neighbouring
answers) has D₂ = Σ_i D₂(P_{|v_i|} ‖ P) ≥ Σ_i ψ(v_i²/σ²) (ψ(0) = 0). ρ-zCDP bounds every D_α by ρα, so D₂ ≤ 2ρ; μ-GDP
implies ρ = μ²/2 (its trade-off lies above the Gaussian pair's, whose D_α = αμ²/2). For each move pattern
F(s) = Σ_k c_k ψ(m_k²/s) (c_k coordinates moved by m_k) decreases strictly in s = σ² from +∞ to 0, so every
admissible σ² is at least its root of F(s) = 2ρ; the floor is the largest root over the listed patterns (each a
real move, so a subset of the moves only lowers it).

**Numerics.** Each root is bracketed by bisection on log s in double precision; the floor returned is a point s
where F(s) ≥ 2ρ(1 + 10⁻⁹), so every s at or below it is proven to fail: the float sums of at most a few thousand
logarithms err by far less than 10⁻⁹ relative, as do the magnitudes' conversion to floats (exact for binary
values, 10⁻¹⁶ relative for decimal ones) and ρ read as a float at least the decimal written.

References
----------
.. [1] J. M. Hammersley, "On estimating restricted parameters", JRSS B 12(2), 1950; D. G. Chapman and H. Robbins,
   "Minimum variance estimation without regularity assumptions", Ann. Math. Statist. 22(4), 1951.
.. [2] M. Bun and T. Steinke, "Concentrated differential privacy: simplifications, extensions, and lower bounds",
   TCC 2016 (ρ-zCDP, additivity of Rényi divergences over independent coordinates).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.core.decimals import float_below
from dpopt.sensitivity.patterns import ShiftPattern

FLOOR_TARGETS = ("zcdp", "gdp")
"""The targets :func:`second_moment_floor` serves (both bound D₂)."""

MARGIN = 1e-9
"""F(s) must exceed 2ρ by this relative margin for s to count as proven to fail (module docstring)."""

_BISECTIONS = 80
"""Bisection steps on log s: the bracket spans at most 2⁶⁴ times, so 80 steps leave it below 10⁻⁹ relative."""


def d2_floor(a: np.ndarray | float) -> np.ndarray:
    """ψ(a) = log max(1 + a, 2a): the least D₂(P_t ‖ P) of a symmetric law P with a = t²/E X² (module docstring).

    Examples
    --------
    >>> float(d2_floor(0.5)) == math.log(1.5), float(d2_floor(4.0)) == math.log(8.0)
    (True, True)
    """
    a = np.asarray(a, dtype=float)
    return np.where(a > 1.0, np.log(2.0 * np.maximum(a, 1.0)), np.log1p(a))


def budget(definition: str, parameters: dict) -> float:
    """The bound 2ρ on D₂ that a ``zcdp`` or ``gdp`` target imposes (ρ = μ²/2), read as a float at least the decimal
    written (a larger budget only lowers the floor).

    Raises
    ------
    ValueError
        A target other than :data:`FLOOR_TARGETS`.
    """
    if definition not in FLOOR_TARGETS:
        raise ValueError(f"no second-moment floor under {definition}")
    value = math.nextafter(float_below(parameters["rho" if definition == "zcdp" else "mu"]), math.inf)
    return 2.0 * value if definition == "zcdp" else math.nextafter(value * value, math.inf)


def second_moment_floor(pattern: ShiftPattern, d2_budget: float) -> float:
    """The largest σ² proven to fail D₂ ≤ ``d2_budget`` on some move of ``pattern`` (module docstring): every
    i.i.d. symmetric noise meeting the budget has E X² above it on each coordinate.

    Parameters
    ----------
    pattern : ShiftPattern
        The distinct coordinate shifts of the listed moves and how many coordinates each move shifts by each.
    d2_budget : float
        2ρ (:func:`budget`), positive.

    Examples
    --------
    >>> from fractions import Fraction
    >>> one = ShiftPattern((Fraction(1),), np.array([[1]]))  # one coordinate moved by 1, 2ρ = log 2: ψ(1/s) = log 2
    >>> 0.999999 < second_moment_floor(one, math.log(2.0)) <= 1.0
    True
    """
    squares = np.array([float(m) ** 2 for m in pattern.magnitudes])
    counts = pattern.counts.astype(float)
    norms = counts @ squares  # ‖v‖₂² of each pattern
    target = d2_budget * (1.0 + MARGIN)

    def fails(s: np.ndarray) -> np.ndarray:
        return (counts * d2_floor(squares[None, :] / s[:, None])).sum(axis=1) >= target

    # F(s) ≤ ‖v‖²/s once s ≥ max m² (ψ(a) ≤ a for a ≤ 1): above hi every s meets the budget; far below, F is huge
    hi = 2.0 * np.maximum(norms / d2_budget, squares.max())
    lo = hi * 2.0**-64
    proven = fails(lo)  # False only for a budget beyond 2⁶⁴ times the move's χ²: that move gives no floor
    for _ in range(_BISECTIONS):
        mid = np.sqrt(lo * hi)
        bad = fails(mid)
        lo, hi = np.where(bad, mid, lo), np.where(bad, hi, mid)
    return float(np.where(proven, lo, 0.0).max())
