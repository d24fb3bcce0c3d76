r"""Query scaling: pose :math:`\mathrm{Diag}(\xi)^{1/2} f` instead of f, with ξ chosen for the
statistical procedure (Shoham & Rinott), and its generalisation to any sensitivity region.

**The transform.** The analyst poses the adjusted query
:math:`f_\xi = \mathrm{Diag}(\xi)^{1/2} f`; the agency answers it with the Gaussian
mechanism :math:`f_\xi(S) + U`, :math:`U \sim N(0, \sigma^2 I)`; the analyst inverts,
:math:`\mathrm{Diag}(\xi)^{-1/2}(f_\xi(S) + U) \sim N(f(S), \sigma^2\mathrm{Diag}(\xi)^{-1})`.
Conventions for ξ here: :math:`\xi_i = 0` means coordinate i is not asked (nothing about
it is released); :math:`\xi_i = \infty` means it is released exactly, which is allowed
only for a coordinate that never changes between neighbours (:math:`\psi_i = 0`, the
limit of the paper's :math:`\xi^*_i \propto 1/\psi_i^2`; digest pitfall 6).

**Sensitivity.** Over a sensitivity region K (the differences f(S) − f(S')),
:math:`\Delta(f_\xi)^2 = \max_{v \in K} \sum_i \xi_i v_i^2`, attained at a generator of
K's hull (a convex function). For the paper's box (disjoint columns, product domain:
Lemma 2.2) this is :math:`\psi^\top\mathrm{Diag}(\xi)\psi`. The privacy of the Gaussian
mechanism depends only on :math:`\Delta(f_\xi)/\sigma` (Lemma 2.3; Balle & Wang 2018), so
"same privacy as f" is :math:`\Delta(f_\xi) = \Delta(f)` at the same σ.

**Optimal ξ on a box** (Theorems 2.1 and 2.4):

* smallest confidence region: :math:`\xi^*_i = (\|\psi\|^2/k)/\psi_i^2`, with volume ratio
  :math:`\bigl((\prod\psi_i^2)^{1/k}/(\tfrac1k\sum\psi_i^2)\bigr)^{k/2} \le 1` against ξ = 1;
* most powerful test of H0: f = 0 against H1: f = η: all weight on
  :math:`j^* = \arg\max_i \eta_i^2/\psi_i^2`, :math:`\xi^*_{j^*} = \|\psi\|^2/\psi_{j^*}^2`.

**Any region, diagonal ξ** (:func:`optimal_diagonal_scaling`): with the constraint rows
:math:`a = v^2` (entrywise) of the generators, the three designs are convex programs in ξ:
``ci_volume`` maximises :math:`\sum\log\xi_i`, ``test_power`` maximises
:math:`\sum\xi_i\eta_i^2` (an LP), ``l2`` minimises :math:`\sum w_i/\xi_i`
(:math:`w_i = \|W e_i\|^2`), all subject to :math:`a^\top\xi \le 1` for every generator.
A single distinct row (a box) has the closed forms above. Each solution is certified by
a duality gap computed here from the solver's multipliers (any non-negative multipliers
give a valid bound, so the solver's status is never trusted).

**Any region, any linear map (beyond the paper)** (:func:`minimum_volume_adjustment`):
posing :math:`A f` with A acting on the span of K gives a confidence-region volume
proportional to :math:`\Delta_K(A)^r/\sqrt{\det A^\top A}`; scale-invariant, so the best A
maximises :math:`\log\det B` (:math:`B = A^\top A`) subject to :math:`v^\top B v \le 1` on the
generators: the minimum-volume (Löwner–John) ellipsoid enclosing K, centred at 0 (K is
symmetric). On a box it is :math:`B = \mathrm{Diag}(1/(k\psi_i^2))`, i.e. :math:`\xi^*`; on
other regions it can beat every diagonal ξ. API for other designs (e.g. the correlated
``gaussian_optimal`` noise): input the generators of the sensitivity region (rows),
output the map (:class:`LinearAdjustment`, with the equivalent noise covariance for a
μ-GDP target).

References
----------
.. [1] T. Shoham and Y. Rinott, "Adjusting queries to statistical procedures under
   differential privacy" (digest: ``papers/001_query_adjusting.md``).
.. [2] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for differential
   privacy: analytical calibration and optimal denoising", ICML 2018.
.. [3] M. J. Todd, *Minimum-Volume Ellipsoids: Theory and Algorithms*, SIAM 2016 (the
   MVEE problem and its dual, Ch. 2–3).
"""

from dpopt.optimize.query_scaling.box import (
    FixedDataDesign,
    adjust_query,
    box_sensitivity,
    design_fixed_data,
    invert_adjusted_release,
    power_optimal_xi,
    scaled_ci_volume,
    scaled_log_ci_volume,
    scaled_test_power,
    volume_optimal_xi,
    volume_ratio,
)
from dpopt.optimize.query_scaling.diagonal import (
    OBJECTIVES,
    DiagonalScaling,
    adjusted_l2_squared,
    constraint_rows,
    optimal_diagonal_scaling,
)
from dpopt.optimize.query_scaling.duality import GAP_TOLERANCE
from dpopt.optimize.query_scaling.ellipsoid import (
    LinearAdjustment,
    adjustment_log_volume,
    minimum_volume_adjustment,
    region_coordinates,
)

__all__ = [
    "GAP_TOLERANCE",
    "OBJECTIVES",
    "DiagonalScaling",
    "FixedDataDesign",
    "LinearAdjustment",
    "adjust_query",
    "adjusted_l2_squared",
    "adjustment_log_volume",
    "box_sensitivity",
    "constraint_rows",
    "design_fixed_data",
    "invert_adjusted_release",
    "minimum_volume_adjustment",
    "optimal_diagonal_scaling",
    "power_optimal_xi",
    "region_coordinates",
    "scaled_ci_volume",
    "scaled_log_ci_volume",
    "scaled_test_power",
    "volume_optimal_xi",
    "volume_ratio",
]
