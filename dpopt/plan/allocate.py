r"""Budget allocation: the shares that minimise the weighted total of the per-query utilities.

The plan's target has an additive currency C (ρ for zCDP; μ² for μ-GDP, since composing
μ_i-GDP mechanisms is √(Σμ_i²)-GDP, Dong, Roth & Su 2022, Cor. 3.3; ε for pure DP,
basic composition). Query i gets the share s_i of C (Σ s_i = 1) and its designed
mechanism has the predicted utility u_i(s_i) (lower is better). The plan minimises

.. math:: \min_{s > 0}\ \sum_i w_i\,u_i(s_i) \quad\text{s.t.}\quad \sum_i s_i = F

(F = 1 minus the shares the user fixed). Each u_i is modelled as a power law
u_i(s) = a_i s^{−p_i}, measured on the family chosen for the query (two designs at two
budgets): p = 1 for the Gaussian under zCDP/GDP with any l2 metric (E‖WZ‖² = c σ² and
σ² ∝ 1/ρ ∝ 1/μ²), p = 2 for Laplace with l2 under pure DP (Var ∝ 1/ε²), p = 1 with l1.

**Closed form** (all p_i = p). With b_i = w_i a_i the Lagrange condition
p b_i s_i^{−p−1} = λ gives

.. math:: s_i = F\,\frac{b_i^{1/(p+1)}}{\sum_j b_j^{1/(p+1)}},\qquad
          \min = F^{-p}\Big(\sum_i b_i^{1/(p+1)}\Big)^{p+1},

for p = 1: s_i ∝ √(w_i a_i), i.e. ρ_i ∝ √(w_i c_i) for Gaussian errors c_i/ρ_i, and the
minimum (Σ√b_i)²/F is the Cauchy–Schwarz bound (Σ b_i/s_i)(Σ s_i) ≥ (Σ√b_i)², attained
iff s_i ∝ √b_i. The objective is strictly convex, so this stationary point is the optimum.

**Convex program** otherwise (mixed exponents): the same objective in cvxpy
(``power(s, −p)`` is convex on s > 0), whose answer is re-checked here (feasibility and
equal marginal costs p_i b_i s_i^{−p_i−1}, the KKT condition), never trusted from the
solver status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.errors import SolverError
from dpopt.optimize.solve import solve_convex

KKT_RTOL = 1e-3
"""Largest relative spread of the marginal costs accepted from the convex program."""


@dataclass(frozen=True)
class Allocation:
    """Shares of the budget (summing to 1), how they were found, and the model's objective."""

    shares: tuple[float, ...]
    method: str
    objective: float

    def to_dict(self) -> dict:
        return {"shares": list(self.shares), "method": self.method, "model_objective": self.objective}


def power_law(u1: float, s1: float, u2: float, s2: float) -> tuple[float, float]:
    """(a, p) of u(s) = a s^{−p} through (s1, u1) and (s2, u2)."""
    p = math.log(u1 / u2) / math.log(s2 / s1)
    return u1 * s1**p, p


def model_objective(b: np.ndarray, p: np.ndarray, s: np.ndarray) -> float:
    """Σ b_i s_i^{−p_i}."""
    return float(np.sum(b * s ** (-p)))


def closed_form_shares(b: np.ndarray, p: float, free: float = 1.0) -> np.ndarray:
    """s_i = F b_i^{1/(p+1)} / Σ_j b_j^{1/(p+1)} (module docstring)."""
    root = np.asarray(b, dtype=float) ** (1.0 / (p + 1.0))
    return free * root / root.sum()


def convex_shares(b: np.ndarray, p: np.ndarray, free: float = 1.0) -> np.ndarray:
    """The convex program of the module docstring, solved with cvxpy and re-checked.

    Raises
    ------
    SolverError
        No solution, or one that fails the independent KKT check.
    """
    import cvxpy as cp

    b, p = np.asarray(b, dtype=float), np.asarray(p, dtype=float)
    scale = b.max()
    s = cp.Variable(b.size, pos=True)
    terms = [float(bi / scale) * cp.power(s[i], float(-pi), approx=False) for i, (bi, pi) in enumerate(zip(b, p))]
    problem = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms))), [cp.sum(s) == free])
    if not problem.is_dcp():
        raise SolverError("the allocation program is not DCP (an exponent is not positive)")
    solve_convex(problem, program="allocation")
    if s.value is None:
        raise SolverError(f"allocation: the convex program returned no solution ({problem.status})")
    shares = np.maximum(np.asarray(s.value, dtype=float), 1e-15)
    shares *= free / shares.sum()
    marginal = p * b * shares ** (-p - 1.0)
    spread = float(marginal.max() / marginal.min() - 1.0)
    if spread > KKT_RTOL:
        raise SolverError(f"allocation: the convex program's answer fails the KKT check (spread {spread:.3g})")
    return shares


def allocate(b: np.ndarray, p: np.ndarray, fixed: list[float | None]) -> Allocation:
    """Optimal shares for the weighted costs ``b`` and exponents ``p``; ``fixed`` shares are kept.

    Returns
    -------
    Allocation
        Closed form when every free query has the same exponent (within 10⁻⁶), else the
        convex program.
    """
    b, p = np.asarray(b, dtype=float), np.asarray(p, dtype=float)
    free_ix = [i for i, f in enumerate(fixed) if f is None]
    shares = np.array([0.0 if f is None else f for f in fixed])
    free = 1.0 - float(shares.sum())
    method = "fixed by the plan"
    if free_ix:
        bf, pf = b[free_ix], p[free_ix]
        if np.ptp(pf) <= 1e-6 * max(1.0, abs(pf.mean())):
            shares[free_ix] = closed_form_shares(bf, float(pf.mean()), free)
            method = f"closed form s_i ∝ (w_i a_i)^(1/(p+1)), p = {pf.mean():.6g} (Lagrange; Cauchy–Schwarz for p = 1)"
        else:
            shares[free_ix] = convex_shares(bf, pf, free)
            method = "convex program (cvxpy), KKT re-checked"
        if len(free_ix) < len(fixed):
            method += "; fixed shares kept"
    return Allocation(tuple(float(x) for x in shares), method, model_objective(b, p, shares))
