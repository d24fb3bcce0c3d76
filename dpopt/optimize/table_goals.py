r"""Error where the user wants it: per-table weights, the largest weighted table error, per-table targets.

A marginal workload :math:`W = [M_S]_S` (:class:`~dpopt.domain.marginal_algebra.MarginalWorkload`) released
with noise of covariance :math:`W(\sum_T a_T E_T)^+W^\top` (``marginal_gaussian``, and ``marginal_laplace`` at
:math:`a_T = \kappa_T/2b^2`) has, in table S, the expected squared error

.. math:: e_S(a) = \prod_{k\notin S} n_k \sum_{T\subseteq S} \frac{m_T}{a_T}
          = \sum_{T\subseteq S}\frac{m_T^2}{|S|\,b_T},\qquad b_T = \frac{a_T m_T}{N},

(|S| = ∏_{k∈S} n_k cells; the per-cell variance of :func:`~dpopt.mechanisms.marginal_gaussian.cell_variances`
times |S|; summed over the tables it is Σ_T m_Tλ_T/a_T). Each e_S is **linear in the inverse coefficients**
1/a_T, so with the privacy constraints of :mod:`dpopt.optimize.marginal_covariance` (linear in b) every
objective below is a convex program in b:

* ``total`` with weights w_S: :math:`\min \sum_S w_S e_S` — the unweighted program with λ_T replaced by
  :math:`\lambda^w_T = \sum_{S\supseteq T} w_S \prod_{k\notin S}n_k` (:func:`weighted_eigenvalues`), solved in
  closed form (add/remove) or by cutting planes (replace-one);
* ``max``: :math:`\min_b \max_S w_S e_S(b)` (epigraph form);
* targets τ_S on either: the constraints :math:`e_S(b) \le \tau_S`.

**Symmetry.** Permuting the levels of an attribute maps every table onto itself, so the argument of
:mod:`dpopt.optimize.marginal_covariance` still puts an optimum in the algebra. Interchangeable attributes
(:mod:`dpopt.optimize.marginal_patterns`) must now also map every table to a table with the same weight and
target (:func:`fingerprint`): then the program is invariant under those permutations, the orbit average of a
feasible b is feasible and no worse (the objective and the constraints are convex), and one variable per
orbit loses nothing.

**Lower bound** (any multipliers ν ≥ 0 of the table constraints, π ≥ 0 of the privacy rows r_D, at μ = 1):
minimising the Lagrangian over b term by term,

.. math:: \min_b \sum_o \frac{c_o}{b_o} + (R^\top\pi)_o b_o = 2\sum_o\sqrt{c_o (R^\top\pi)_o},\qquad
          c_o = \sum_S (\omega_S + \nu_S)\,q_{S,o},

with ω_S = w_S (``total``) or ω_S = ν^{max}_S w_S, ν^{max} on the simplex (``max``), then over the scale of
π, gives the bound :math:`(\sum_o\sqrt{c_o(R^\top\pi)_o})^2/\sum_D\pi_D - \sum_S\nu_S\tau_S` on the objective
(weak duality; :func:`dual_bound`), evaluated in numpy at the solver's multipliers whatever the solver did.
Under add/remove R is one row of ones. Errors scale as 1/μ².
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.domain.marginal_algebra import MarginalWorkload, Subset, subsets
from dpopt.errors import CalibrationError, SolverError
from dpopt.optimize.marginal_patterns import PatternClasses
from dpopt.optimize.solve import solve_convex
from dpopt.spec.models import Utility

SLACK = 1e-5
"""Relative margin the program leaves below each target (the privacy nudge and the lattice's rounding of
variances up raise the errors by less)."""

_MAX_ROUNDS = 60
_ADD_PER_ROUND = 64


@dataclass(frozen=True)
class TableGoals:
    """The weight and the target of each workload table (block order) and the objective.

    Attributes
    ----------
    weights : tuple of float
        w_S per block.
    targets : tuple of float or None
        τ_S per block (None: no target).
    objective : {"total", "max"}
    """

    weights: tuple[float, ...]
    targets: tuple[float | None, ...]
    objective: str = "total"

    @classmethod
    def of(cls, utility: Utility, attributes: Sequence[str], workload: MarginalWorkload) -> TableGoals:
        """The goals of a spec's ``utility`` (tables unlisted: weight 1, no target)."""
        by_set = {frozenset(attributes.index(a) for a in g.attributes): g for g in (utility.tables or [])}
        goals = [by_set.get(frozenset(s)) for s in workload.sets]
        return cls(tuple(1.0 if g is None else float(g.weight) for g in goals),
                   tuple(None if g is None or g.target is None else float(g.target) for g in goals),
                   utility.objective or "total")

    @property
    def plain(self) -> bool:
        """The unweighted total without targets (the families' default design)."""
        return self.objective == "total" and all(w == 1.0 for w in self.weights) and self.targets_absent

    @property
    def targets_absent(self) -> bool:
        return all(t is None for t in self.targets)

    def value(self, errors: Sequence[float]):
        """Σ_S w_S e_S (``total``) or max_S w_S e_S (``max``); exact for Fractions."""
        terms = [type(e)(w) * e if isinstance(e, Fraction) else w * e for w, e in zip(self.weights, errors)]
        return sum(terms, type(terms[0])(0)) if self.objective == "total" else max(terms)

    def to_dict(self, names: Sequence[str], workload: MarginalWorkload, errors: Sequence[float]) -> dict:
        """The record of the certificate: objective, its value, and per table its error, weight and target."""
        rows = []
        for block, w, tau, e in zip(workload.blocks, self.weights, self.targets, errors):
            rows.append({"table": [names[k] for k in block], "error": float(e), "weight": w, "target": tau,
                         "met": None if tau is None else bool(e <= tau)})
        return {"objective": self.objective, "value": float(self.value([float(e) for e in errors])), "tables": rows}


def table_error_terms(workload: MarginalWorkload, ts: Sequence[Subset]) -> list[dict[Subset, float]]:
    """Per block S: {T: ∏_{k∉S} n_k m_T} over the T ⊆ S of ``ts`` (e_S = Σ_T term_T / a_T)."""
    alg = workload.algebra
    keep = set(ts)
    return [{t: float(alg.co_size(s) * alg.multiplicity(t)) for t in subsets(s) if t in keep} for s in workload.sets]


def table_errors(workload: MarginalWorkload, coefficients: dict[Subset, float]) -> list[float]:
    """e_S = ∏_{k∉S} n_k Σ_{T⊆S} m_T / a_T per block (components without a coefficient are noise-free)."""
    return [sum(term / coefficients[t] for t, term in terms.items())
            for terms in table_error_terms(workload, list(coefficients))]


def exact_table_errors(workload: MarginalWorkload, coefficients: dict[Subset, Fraction | float]) -> list[Fraction]:
    """:func:`table_errors` in rational arithmetic from the stored coefficients."""
    alg = workload.algebra
    out = []
    for s in workload.sets:
        total = Fraction(0)
        for t in subsets(s):
            if t in coefficients:
                total += Fraction(alg.co_size(s) * alg.multiplicity(t)) / Fraction(coefficients[t])
        out.append(total)
    return out


def weighted_eigenvalues(workload: MarginalWorkload, weights: Sequence[float]) -> dict[Subset, float]:
    """λ^w_T = Σ_{S ⊇ T} w_S ∏_{k∉S} n_k over the blocks (the weighted total is Σ_T m_T λ^w_T / a_T)."""
    out: dict[Subset, float] = {}
    for s, w in zip(workload.sets, weights):
        term = w * workload.algebra.co_size(s)
        for t in subsets(s):
            out[t] = out.get(t, 0.0) + term
    return out


def fingerprint(workload: MarginalWorkload, ts: Sequence[Subset], goals: TableGoals) -> dict[Subset, object]:
    """Per component of the closure: (λ_T if noised, the sorted (weight, target) of the tables on T): a
    transposition of attributes preserving it maps noised components and tables onto their likes."""
    noised = set(ts)
    tables: dict[Subset, list] = {}
    for s, w, tau in zip(workload.sets, goals.weights, goals.targets):
        tables.setdefault(s, []).append((w, -1.0 if tau is None else tau))
    return {t: (workload.gram_eigenvalue(t) if t in noised else None, tuple(sorted(tables.get(t, ()))))
            for t in workload.closure}


@dataclass(frozen=True)
class GoalDesign:
    """The coefficients a_T meeting μ = 1 (scale a_T by μ²), the tables' errors, the objective and its bound."""

    coefficients: dict[Subset, float]
    errors: tuple[float, ...]
    objective: float
    lower_bound: float
    method: str


def design_for_goals(workload: MarginalWorkload, ts: tuple[Subset, ...], goals: TableGoals, mu: float,
                     replace: bool, agree: Subset = (), names: Sequence[str] = ()) -> GoalDesign:
    """Optimal a_T for ``goals`` under target μ (module docstring), with the dual bound on the objective.

    Raises
    ------
    CalibrationError
        Targets that cannot be met (one line: which table, and the best achievable).
    SolverError
        The program failed.
    """
    program = _Program(workload, ts, goals, replace, agree, tuple(names))
    scaled = [None if t is None else t * mu * mu for t in goals.targets]  # errors at μ = 1
    found = program.solve(scaled)
    if found is None:
        raise CalibrationError(_infeasible(program, goals, mu))
    b, bound = found
    alg = workload.algebra
    factor = mu * mu
    coefficients = {}
    for o, t_list in enumerate(program.orbits):
        for t in t_list:
            coefficients[t] = factor * b[o] / len(t_list) * alg.cells / alg.multiplicity(t)
    errors = tuple(table_errors(workload, coefficients))
    return GoalDesign(coefficients, errors, float(goals.value(list(errors))), bound / factor, program.method)


def _infeasible(program: _Program, goals: TableGoals, mu: float) -> str:
    """Which table's target cannot be met, and the best achievable (alone, or all targets together)."""
    for i, tau in enumerate(goals.targets):
        if tau is None:
            continue
        alone = TableGoals(tuple(1.0 if j == i else 0.0 for j in range(len(goals.weights))),
                           tuple(None for _ in goals.targets))
        best = _Program(program.workload, program.ts, alone, program.replace, program.agree).solve(
            [None] * len(goals.targets))
        best_error = _objective_at(program, alone, best[0]) / (mu * mu) if best else math.inf
        if best_error > tau * (1 - SLACK):
            return (f"utility.tables: the target {tau:.6g} of table {_label(program, i)} is below the best "
                    f"achievable for that table alone under this privacy target, {best_error:.6g}")
    ratios = TableGoals(tuple(0.0 if t is None else 1.0 / t for t in goals.targets), goals.targets, "max")
    found = _Program(program.workload, program.ts, ratios, program.replace, program.agree).solve(
        [None] * len(goals.targets))
    if not found:
        return "utility.tables: the targets cannot all be met together under this privacy target"
    errors = program.errors(found[0])
    worst = int(np.argmax([0.0 if t is None else e / (mu * mu) / t for e, t in zip(errors, goals.targets)]))
    scale = errors[worst] / (mu * mu) / goals.targets[worst]
    return (f"utility.tables: the targets cannot all be met together under this privacy target; at best every "
            f"targeted table's error is {scale:.6g} × its target (table {_label(program, worst)} binds)")


def _label(program: _Program, i: int) -> str:
    block = program.workload.blocks[i]
    return " × ".join(program.names[k] for k in block) if program.names else "{" + ", ".join(map(str, block)) + "}"


def _objective_at(program: _Program, goals: TableGoals, b: np.ndarray) -> float:
    return float(goals.value(program.errors(b)))


class _Program:
    """The program in orbit totals B_o (μ = 1): e = Q (1/B), privacy rows R B ≤ 1."""

    def __init__(self, workload: MarginalWorkload, ts: tuple[Subset, ...], goals: TableGoals, replace: bool,
                 agree: Subset, names: tuple[str, ...] = ()):
        self.workload, self.ts, self.goals, self.replace, self.agree = workload, ts, goals, replace, agree
        self.names = names
        alg = workload.algebra
        if replace:
            self.patterns = PatternClasses.of(alg.sizes, fingerprint(workload, ts, goals), agree)
            moving = {k for c in self.patterns.classes for k in c}
            groups: dict[tuple, list[Subset]] = {}
            for t in ts:
                groups.setdefault((self.patterns.type_of(t), tuple(k for k in t if k not in moving)), []).append(t)
            self.orbits = list(groups.values())
            self.types = [kind for kind, _ in groups]
        else:
            self.patterns = None
            self.orbits = [[t] for t in ts]
            self.types = []
        where = {t: o for o, members in enumerate(self.orbits) for t in members}
        # e_S = Σ_{T⊆S} m_T² / (|S| b_T), b_T = B_o / |o|
        self.q = np.zeros((len(workload.sets), len(self.orbits)))
        for i, s in enumerate(workload.sets):
            for t in subsets(s):
                if t in where:
                    o = where[t]
                    self.q[i, o] += alg.multiplicity(t) ** 2 * len(self.orbits[o]) / alg.size(s)

    @property
    def method(self) -> str:
        what = {"total": "the weighted total Σ_S w_S e_S", "max": "the largest weighted table error max_S w_S e_S"}
        privacy = ("one constraint Σ_T b_T ≤ μ² (add/remove)" if not self.replace else
                   f"cutting planes over {self.patterns.count - 1} reduced disagreement patterns (replace-one)")
        return (f"convex program in the {len(self.orbits)} orbit totals of b_T = a_T m_T/N: minimise "
                f"{what[self.goals.objective]}"
                + ("" if self.goals.targets_absent else " subject to the tables' targets")
                + f", {privacy}; cvxpy, inv_pos; lower bound: Lagrange dual at the solver's multipliers")

    def errors(self, b: np.ndarray) -> np.ndarray:
        return self.q @ (1.0 / b)

    def loads(self, b: np.ndarray) -> np.ndarray:
        if not self.replace:
            return np.array([float(np.sum(b))])
        return self.patterns.loads(self.types, b)

    def rows(self, working: list[int]) -> np.ndarray:
        if not self.replace:
            return np.ones((1, len(self.orbits)))
        return self.patterns.rows(self.types, working)

    def solve(self, targets: Sequence[float | None]) -> tuple[np.ndarray, float] | None:
        """(B at the optimum scaled to meet every privacy row, the dual bound on the objective), or None when
        the targets cannot be met."""
        import cvxpy as cp

        goals = self.goals
        active = [i for i, w in enumerate(goals.weights) if w > 0]
        c = np.maximum(np.array(goals.weights) @ self.q, 0.0)
        s = np.sqrt(np.maximum(c, 1e-12 * c.max()))
        s = s / s.sum() / (2.0 if self.replace else 1.0)  # the scale of the optimum (β of order 1)
        scale = float(np.array(goals.weights) @ (self.q @ (1.0 / s))) or 1.0
        qs = self.q / s / scale  # errors in units of `scale`, variables β = B / s
        limited = [(i, t) for i, t in enumerate(targets) if t is not None]
        if self.replace:
            base = self.patterns.loads(self.types, s)
            working = sorted({self.patterns.full} | set(self.patterns.singletons)
                             | set(np.argsort(base)[-_ADD_PER_ROUND:].tolist()))
            working = [d for d in working if d != 0]
        else:
            working = [0]
        for _ in range(_MAX_ROUNDS):
            beta = cp.Variable(len(self.orbits), pos=True)
            inv = cp.inv_pos(beta)
            errors = [qs[i] @ inv for i in range(len(qs))]
            privacy = (self.rows(working) * s) @ beta <= 1.0
            caps = [errors[i] <= t * (1 - SLACK) / scale for i, t in limited]
            if goals.objective == "total":
                objective, tops = sum(goals.weights[i] * errors[i] for i in active), []
            else:
                top = cp.Variable()
                tops = [goals.weights[i] * errors[i] <= top for i in active]
                objective = top
            problem = cp.Problem(cp.Minimize(objective), [privacy, *caps, *tops])
            solution = solve_convex(problem, ("CLARABEL", "SCS"), program="table goals",
                                    accept=("optimal", "optimal_inaccurate", "infeasible", "infeasible_inaccurate"))
            if solution.status in ("infeasible", "infeasible_inaccurate"):
                return None
            if beta.value is None or solution.status not in ("optimal", "optimal_inaccurate"):
                raise SolverError(f"table goals: solver status {solution.status}")
            value = np.maximum(np.asarray(beta.value, dtype=float), 1e-300)
            loads = self.loads(s * value)
            if not self.replace:
                break
            violated = np.flatnonzero(loads > 1.0 + 1e-9)
            known = set(working)
            new = [int(d) for d in violated[np.argsort(loads[violated])[::-1]] if int(d) not in known]
            if not new:
                break
            working = sorted(set(working) | set(new[:_ADD_PER_ROUND]))
        else:
            raise SolverError(f"table goals: no convergence in {_MAX_ROUNDS} cutting-plane rounds")
        b = s * value / float(loads.max())
        nu = np.zeros(len(qs))
        for (i, _), con in zip(limited, caps):
            nu[i] = max(float(np.asarray(con.dual_value).reshape(-1)[0]), 0.0)
        omega = np.array(goals.weights, dtype=float)
        if goals.objective == "max":
            m = np.zeros(len(qs))
            for i, con in zip(active, tops):
                m[i] = max(float(np.asarray(con.dual_value).reshape(-1)[0]), 0.0)
            omega = omega * (m / m.sum() if m.sum() > 0 else np.isin(np.arange(len(qs)), active) / len(active))
        pi = np.zeros(self.patterns.count if self.replace else 1)
        pi[working] = np.maximum(np.asarray(privacy.dual_value, dtype=float).reshape(-1), 0.0)
        bound = dual_bound(self, omega + nu, pi, nu, targets)
        return b, bound


def dual_bound(program: _Program, multipliers: np.ndarray, pi: np.ndarray, nu: np.ndarray,
               targets: Sequence[float | None]) -> float:
    """(Σ_o √(c_o (Rᵀπ)_o))² / Σ π − Σ_S ν_S τ_S, c = multiplierᵀ Q (module docstring; μ = 1)."""
    if not pi.sum() > 0:
        return 0.0
    c = np.maximum(multipliers @ program.q, 0.0)
    r_pi = program.patterns.transposed(pi, program.types) if program.replace else np.full(len(c), float(pi.sum()))
    root = float(np.sum(np.sqrt(c * np.maximum(r_pi, 0.0))))
    penalty = sum(n * t for n, t in zip(nu, targets) if t is not None)
    return max(0.0, root * root / float(pi.sum()) - penalty)


def goals_check(utility: Utility, names: Sequence[str], workload: MarginalWorkload,
                coefficients: dict[Subset, float], recorded: object) -> Check:
    """``utility.tables``: every table's error e_S = ∏_{k∉S} n_k Σ_{T⊆S} m_T / a_T recomputed in rational
    arithmetic at the released noise's coefficients, each at most its target, the objective re-derived, and the
    record (weights, targets, errors, objective) equal to the spec's goals and these values."""
    goals = TableGoals.of(utility, list(names), workload)
    errors = exact_table_errors(workload, coefficients)
    expected = goals.to_dict(names, workload, [float(e) for e in errors])
    off = _differences(expected, recorded)
    unmet = [" × ".join(names[k] for k in block) for block, tau, e in zip(workload.blocks, goals.targets, errors)
             if tau is not None and e > Fraction(tau)]
    value = goals.value(errors)
    return Check("utility.tables",
                 f"each table's expected squared error ∏_(k∉S) n_k Σ_(T⊆S) m_T / a_T recomputed exactly from the "
                 f"released noise's coefficients; every target met; the objective ({goals.objective}, weighted) and "
                 "the recorded weights, targets and errors equal the spec's and the recomputed ones",
                 not off and not unmet,
                 f"objective {float(value):.10g} over {len(errors)} tables"
                 + (f"; targets not met: {', '.join(unmet)}" if unmet else "")
                 + (f"; recorded values differ: {', '.join(off)}" if off else ""))


def _differences(expected: dict, recorded: object) -> list[str]:
    """The keys of ``expected`` the record lacks or holds otherwise (floats to 10⁻⁹ relative)."""
    if not isinstance(recorded, dict):
        return ["tables (not recorded)"]
    off = [k for k in ("objective",) if recorded.get(k) != expected[k]]
    if not _close(recorded.get("value"), expected["value"]):
        off.append("value")
    rows = recorded.get("tables")
    if not isinstance(rows, list) or len(rows) != len(expected["tables"]):
        return off + ["tables"]
    for i, (want, got) in enumerate(zip(expected["tables"], rows)):
        if not isinstance(got, dict) or any(
                not (_close(got.get(k), v) if isinstance(v, float) else got.get(k) == v) for k, v in want.items()):
            off.append(f"tables[{i}]")
    return off


def _close(got: object, want: float) -> bool:
    return isinstance(got, float) and math.isclose(got, want, rel_tol=1e-9)
