r"""Certified lower bounds on the error of pure-ε releases of a marginal workload.

Two bounds on :math:`E\|M(x) - Wx\|^2`, for two classes of mechanisms, both from one quantity,
the optimum of the Gaussian matrix-mechanism program at unit sensitivity,

.. math:: B_1 = \min_{G \succeq 0}\ \operatorname{tr}(W G^+ W^\top)\quad\text{s.t.}\quad
          \delta^\top G\,\delta \le 1 \text{ for every neighbouring difference } \delta,

bounded from below in closed form (:func:`unit_gaussian_bound`): under add/remove (δ = e_j) by Li &
Miklau's SVD bound :math:`(\sum_T m_T\sqrt{\lambda_T})^2/N`; under replace-one (δ = e_i − e_j) by the
Lagrange dual bound :math:`L(\nu) = (\sum_T m_T\sqrt{\lambda_T(A^\top\nu)_T})^2/(N\sum_D\nu_D)` of
:mod:`dpopt.optimize.marginal_covariance` at two explicit ν (every pair of cells alike, which gives
:math:`2(\sum_{T\ne\emptyset} m_T\sqrt{\lambda_T})^2/(N-1)`; and every weight on the pairs that
differ in every attribute), the larger kept. Hamming-k multiplies by k² (k(e_j − e_i) is a neighbouring
difference).

**Any unbiased ε-DP mechanism** (``unbiased``): every mechanism M, ε-DP under the adjacency, whose mean is
Wx plus a constant (every additive noise Wx + Z with Z's law independent of x, whatever that law; every
strategy with any noise and a linear unbiased reconstruction, HDMM's included) has, at every x (under replace-one: every x with at least k records in each cell, so the worst case
over datasets of n ≥ kN records),

.. math:: E\|M(x) - Wx\|^2 \ \ge\ \frac{B_1}{4\sinh^2(\varepsilon/2)} .

*Proof* (Hammersley–Chapman–Robbins, several shifts). Let P be the law of M(x), Q_j that of M(x + δ_j)
for neighbouring differences δ_j, L_j = dQ_j/dP. ε-DP both ways gives :math:`e^{-\varepsilon} \le L_j
\le e^\varepsilon` P-a.s., so with :math:`E_P L_j = 1`, :math:`(L_j - e^{-\varepsilon})(L_j - e^{\varepsilon})
\le 0` gives :math:`\chi^2(Q_j\|P) = E_P(L_j-1)^2 \le e^\varepsilon + e^{-\varepsilon} - 2 = 4\sinh^2(\varepsilon/2)
=: c`. For u ∈ ℝ^d and weights α, unbiasedness and Cauchy–Schwarz give
:math:`u^\top W\textstyle\sum_j\alpha_j\delta_j = E_P[\sum_j\alpha_j(L_j-1)\,u^\top(M - EM)] \le
\sqrt{\alpha^\top\Gamma\alpha}\sqrt{u^\top\mathrm{Cov}(M)u}`, Γ_ij = E_P(L_i−1)(L_j−1), so
:math:`\mathrm{Cov}(M) \succeq WD\,\Gamma^+D^\top W^\top` (D = [δ_j]) with Γ ⪰ 0, Γ_jj ≤ c. The trace of
the right side is at least the optimum of the program with "Γ_jj ≤ c" in place of "δᵀGδ ≤ 1", whose
dual bounds (weights λ on the differences: :math:`(\operatorname{tr}\sqrt{WD\Lambda D^\top W^\top})^2
/ (c\sum\lambda)`) are the bounds above divided by c: for λ uniform on the differences of one
pattern class, :math:`D\Lambda D^\top` lies in the ANOVA algebra with eigenvalue
:math:`(A^\top\nu)_T/N` on E_T. ∎ Mechanisms with a data-dependent bias (clipping to non-negative
counts, shrinkage) are not covered.

**Any strategy with Laplace noise** (``laplace_strategies``): every design y = Ax + Lap(Δ₁(A)/ε)^{⊗},
answered by any linear unbiased map (least squares is the best, Gauss–Markov), for any strategy matrix A
(HDMM's templates, the identity, hierarchies, this family), has error
:math:`2\Delta_1(A)^2\operatorname{tr}(W(A^\top A)^+W^\top)/\varepsilon^2 \ge 2 B_1/\varepsilon^2`,
because Δ₁(A) ≥ Δ₂(A) (a column difference's l1 norm bounds its l2 norm) and
:math:`\Delta_2(A)^2\operatorname{tr}(W(A^\top A)^+W^\top)` is the program's objective at G = AᵀA/Δ₂².
This is :meth:`MarginalLaplaceMechanism.utility_bound` (a bound on every design of the family).

Neither bound sees the gap between l1 and l2 sensitivity that pure ε pays in many dimensions
(Hardt & Talwar's volume bounds do, with constants that are not explicit): on all 2-way marginals of
(10, 2, 6, 5, 8) at ε = 1 they are 2,091 and 4,543 against 33,692 achieved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpopt.domain.marginal_algebra import MarginalWorkload
from dpopt.optimize.marginal_covariance import components, svd_bound


@dataclass(frozen=True)
class PureLowerBounds:
    """The two bounds of the module docstring, at the spec's ε, adjacency and multiplier.

    Attributes
    ----------
    unbiased : float
        Every ε-DP mechanism whose mean is Wx plus a constant.
    laplace_strategies : float
        Every strategy matrix with Laplace noise and a linear unbiased reconstruction.
    unit_gaussian : float
        B₁ (at multiplier 1).
    method : str
    """

    unbiased: float
    laplace_strategies: float
    unit_gaussian: float
    method: str

    def to_dict(self) -> dict:
        return {"unbiased_pure": self.unbiased, "laplace_strategies": self.laplace_strategies,
                "unit_gaussian_program": self.unit_gaussian, "method": self.method}


def hcr_constant(epsilon: float) -> float:
    """4 sinh²(ε/2) = (e^ε − 1)(1 − e^{−ε}): the largest χ² divergence between ε-DP neighbours."""
    return math.expm1(epsilon) * -math.expm1(-epsilon)


def unit_gaussian_bound(workload: MarginalWorkload, replace: bool) -> tuple[float, str]:
    """A lower bound on B₁ (module docstring) and how it was obtained."""
    if not replace:
        return svd_bound(workload, 1.0), "SVD bound (Σ_T m_T √λ_T)² / N"
    alg = workload.algebra
    ts = components(workload, True)
    n = alg.cells
    uniform = 2.0 * math.fsum(alg.multiplicity(t) * math.sqrt(workload.gram_eigenvalue(t)) for t in ts) ** 2 / (n - 1)
    moving = {k for k, size in enumerate(alg.sizes) if size >= 2}

    def gap(t) -> float:  # (Aᵀν)_T at ν on the pattern "differ in every attribute": 2(1 − ∏ ρ_k), ρ_k = −1/(n_k − 1)
        return 2.0 * (1.0 - math.prod(-1.0 / (alg.sizes[k] - 1) for k in t if k in moving))

    full = math.fsum(alg.multiplicity(t) * math.sqrt(float(workload.gram_eigenvalue(t)) * gap(t)) for t in ts) ** 2 / n
    if full > uniform:
        return full, "Lagrange dual bound L(ν), ν on the pairs that differ in every attribute"
    return uniform, "Lagrange dual bound L(ν), ν uniform on all pairs of cells: 2(Σ_{T≠∅} m_T √λ_T)² / (N − 1)"


def pure_lower_bounds(workload: MarginalWorkload, epsilon: float, replace: bool, multiplier: int) -> PureLowerBounds:
    """Both bounds (module docstring) for target ε, the adjacency and the Hamming multiplier k."""
    unit, how = unit_gaussian_bound(workload, replace)
    scaled = unit * multiplier * multiplier
    return PureLowerBounds(
        scaled / hcr_constant(epsilon), 2.0 * scaled / (epsilon * epsilon), unit,
        f"B₁ ≥ {how}" + (f", × k² = {multiplier}²" if multiplier != 1 else "")
        + "; unbiased ε-DP: B₁ / (4 sinh²(ε/2)) (Hammersley–Chapman–Robbins with χ² ≤ 4 sinh²(ε/2)); "
          "Laplace on any strategy: 2 B₁ / ε² (Δ₁ ≥ Δ₂)")
