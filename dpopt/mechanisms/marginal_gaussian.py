r"""Gaussian noise with the optimal covariance of a marginal workload, at any domain size (``marginal_gaussian``).

The query is a stack of marginals :math:`W = [M_S]_S` of a table of N cells (marginals,
contingency table, histogram, count). The release is Wx + Z with
:math:`Z = W\xi,\ \xi \sim N(0, G^+)`, :math:`G = \sum_T a_T E_T` in the ANOVA algebra
(:mod:`dpopt.domain.marginal_algebra`): by the symmetry argument of
:mod:`dpopt.optimize.marginal_covariance` the optimum of ``gaussian_optimal``'s SDP lies in
this algebra, so the same optimum is found in one coefficient per component T of the
workload's closure, with a certified optimality gap (the SVD bound under add/remove, a
Lagrange dual bound under replace-one), and nothing of size N is ever formed.

**Privacy** (evaluated at the stored coefficients, independently of the optimiser). The
noise N(0, Σ), Σ = WG⁺Wᵀ, is exactly μ_Σ-GDP with
:math:`\mu_\Sigma^2 = \max_{v} v^\top\Sigma^+ v = \max_\delta \delta^\top G\delta` over the
generators v = Wδ of the sensitivity space (Kim et al., Lemma A.2; see
:mod:`dpopt.mechanisms.gaussian_optimal`): add/remove :math:`\sum_T a_T m_T/N`, replace-one
:math:`\max_D 2\sum_T a_T\,\mathrm{gap}_T(D)` over every disagreement pattern D, both in exact
rational arithmetic from the stored floats (:func:`~dpopt.optimize.marginal_covariance.exact_mahalanobis_squared`);
Hamming-k neighbours multiply μ_Σ by k (their differences are sums of k replace-one
differences, and μ_Σ is a norm). Then μ_Σ² is compared with the target exactly (gdp, zcdp) or
through the 60-digit analytic-Gaussian profile (approx) by
:func:`~dpopt.privacy.gaussian_calibration.gaussian_privacy_check`. The range check asks a
positive finite a_T for every component the adjacency moves, so that range(Σ) is the span of
the sensitivity space (a zero a_T would release that component exactly).

**Sampling** (no N-sized array): the T-component of ξ's marginals is
:math:`c_T = \sqrt{\prod_{k\notin T} n_k / a_T}\;\mathrm{center}_T(g)`, g ~ N(0, I) on the
T-table, independent across T, and Z = :meth:`MarginalWorkload.from_components` (c). Its
covariance is WG⁺Wᵀ: M_T ξ ~ N(0, ∏_{k∉T} n_k · a_T⁻¹ I) on range(E_T)'s T-table.

**Errors** in closed form: E‖Z‖² = Σ_T m_Tλ_T/a_T; a cell of block S has variance
:math:`\sum_{T\subseteq S}\frac{\prod_{k\notin T}n_k}{a_T}\frac{m_T}{\prod_{k\in T}n_k}\Big/\big(\prod_{k\in S\setminus T}n_k\big)^2`.

**Exact measurement** (``sampler: exact``, the default, under ρ-zCDP; :mod:`dpopt.mechanisms.lattice`). The
T-part of the noise is the centred T-marginal of s_T g, s_T² = ∏_{k∉T} n_k / a_T. With L_T = ∏_{k∈T} n_k,
the integer map A_T = ⊗_{k∈T}(n_k I − J) of the T-marginal x_T of the counts is L_T times its centring, so
y_T = A_T x_T + η_T, η_T i.i.d. N_ℤ(0, σ_T²) with σ_T² ≥ L_T² s_T² (dyadic, rounded up), is an exact
measurement, and center_T(y_T)/L_T is the T-component plus noise of variance σ_T²/L_T² per unit of the
centring (the continuous design's at a_T' = ∏_{k∉T} n_k L_T²/σ_T² ≤ a_T). The release is
:meth:`MarginalWorkload.from_components` of those estimates and of the components no neighbour moves (public:
the grand total under replace-one, the invariant margins), computed from the integers y_T and the public
components alone. Privacy: the shift of y_T is A_T δ_T, ‖A_T δ_T‖² = L_T² ‖center_T δ_T‖², so CKS Theorem 14
gives ρ ≤ μ'²/2 with μ'² the exact Mahalanobis sensitivity at the a_T' (checked exactly).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from dpopt.core.checks import Check
from dpopt.core.memory import dense_bytes, require_memory
from dpopt.core.rounding import nudge_until
from dpopt.domain.marginal_algebra import MarginalAlgebra, MarginalWorkload, Subset, subsets
from dpopt.domain.queries import CountingQuery
from dpopt.errors import CalibrationError
from dpopt.mechanisms.base import Mechanism
from dpopt.mechanisms.lattice import (
    EXACT_MEASUREMENT_NOTE,
    GDP_TARGETS,
    check_draws,
    discrete_variance,
    effective_variance,
    exact_refusal,
    integer_answers,
    GDP_RANGE_REFUSAL,
    lattice_variance,
    target_lattice_variance,
)
from dpopt.mechanisms.marginal_design import (
    baselines,
    design_record_check,
    objective_value,
    optimise,
    semi_dp_bracket,
    target_mu,
)
from dpopt.privacy.discrete_gaussian_gdp import MAX_SIGMA2
from dpopt.noise.discrete_gaussian import DiscreteGaussianMarginal, sample_discrete_gaussian
from dpopt.noise.gaussian import GaussianMarginal
from dpopt.noise.law import ProductLaw
from dpopt.optimize.marginal_covariance import (
    components,
    exact_mahalanobis_squared,
    expected_error,
    optimal_coefficients,
    pattern_refusal,
    svd_bound,
)
from dpopt.optimize.table_goals import TableGoals, goals_check, table_errors
from dpopt.privacy.gaussian import gaussian_epsilon
from dpopt.privacy.gaussian_calibration import gaussian_privacy_check
from dpopt.privacy.zcdp import zcdp_epsilon_cks
from dpopt.problem import Problem
from dpopt.sensitivity.plain import hamming_factor
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.sensitivity.subspace import canonical_basis
from dpopt.spec.models import Privacy

MARGINAL_KINDS = ("marginals", "contingency_table", "histogram", "count")
"""Query kinds that are stacks of marginals of one table."""

MAX_IMAGE_ENTRIES = 2_000_000
"""Largest release map C (cells × lattice draws) :meth:`MarginalGaussianMechanism.linear_noise_image` states densely."""
MAX_LAW_DIMENSION = 1500
"""Largest query dimension whose noise law is stated with a dense orthonormal basis (the
second route of ``dpopt verify`` and the audit); above it the law is described in words."""

_TARGETS = ("gdp", "zcdp", "approx")


def synthesize_noise(workload: MarginalWorkload, parts: dict[Subset, np.ndarray], batch: int) -> np.ndarray:
    """Released vectors (batch, d) of the components ``parts`` (leading axis ``batch``; the
    closure's other components are 0)."""
    alg = workload.algebra
    full = {t: parts[t] if t in parts else np.zeros((batch,) + alg.table_shape(t)) for t in workload.closure}
    return workload.from_components(full).reshape(batch, workload.dimension)


def cell_variances(workload: MarginalWorkload, coefficients: dict[Subset, float]) -> np.ndarray:
    """diag W(Σ_T a_T E_T)⁺Wᵀ: in a cell of block S, Σ_{T⊆S} (∏_{k∉T} n_k / a_T)(m_T/∏_{k∈T} n_k)/(∏_{S∖T} n_k)²."""
    alg = workload.algebra
    out = np.empty(workload.dimension)
    for i, s in enumerate(workload.sets):
        value = 0.0
        for t in subsets(s):
            a = coefficients.get(t)
            if a is not None:
                rest = alg.size(tuple(k for k in s if k not in t))
                value += alg.co_size(t) / a * alg.multiplicity(t) / alg.size(t) / (rest * rest)
        out[workload.offsets[i]: workload.offsets[i + 1]] = value
    return out


def lattice_variances(workload: MarginalWorkload, coefficients: dict[Subset, float],
                      target: str = "zcdp") -> dict[Subset, Fraction | None]:
    """σ_T² on the lattice of A_T (module docstring), derived from the a_T: L_T² ∏_{k∉T} n_k / a_T rounded up,
    under GDP and (ε, δ) enlarged until the effective variance is at least that
    (:func:`~dpopt.mechanisms.lattice.target_lattice_variance`); None beyond the exact sampler's range."""
    alg = workload.algebra
    return {t: target_lattice_variance(Fraction(alg.co_size(t)) / Fraction(a), alg.size(t), target)
            for t, a in coefficients.items()}


def variance_coefficients(workload: MarginalWorkload, coefficients: dict[Subset, float],
                          sampler: str, target: str = "zcdp") -> dict[Subset, float]:
    """The a_T the released noise's variances are those of: the a_T for the floating-point sampler; on the lattice
    ∏_{k∉T} n_k L_T² / Var N_ℤ(0, σ_T²) (the discrete Gaussians' variances, :func:`lattice_variances`)."""
    if sampler != "exact":
        return coefficients
    alg = workload.algebra
    return {t: alg.co_size(t) * alg.size(t) ** 2 / discrete_variance(s2)
            for t, s2 in lattice_variances(workload, coefficients, target).items()}


def workload_scope_check(problem: Problem, mechanism) -> Check:
    """The attributes, levels, blocks, adjacency, multiplier and invariant margins a marginal family
    recorded (``attributes``, ``workload``, ``replace``, ``multiplier``, ``fixed``) equal the compiled spec's."""
    spec, query = problem.spec, problem.query
    ok = isinstance(query, CountingQuery) and query.kind in MARGINAL_KINDS
    if ok:
        compiled = query.workload
        ok = (compiled.algebra == mechanism.workload.algebra and compiled.blocks == mechanism.workload.blocks
              and tuple(query.attributes) == mechanism.attributes
              and (spec.adjacency.kind != "add_remove") == mechanism.replace
              and _multiplier(problem) == mechanism.multiplier and _fixed_sets(problem) == mechanism.fixed)
    return Check("mechanism.workload",
                 "attributes, levels, marginal blocks, adjacency, multiplier (Hamming distance or semi-adjacent "
                 "parameter) and invariant margins of the parameters equal the compiled spec's",
                 ok, f"{len(mechanism.workload.blocks)} blocks over {len(mechanism.attributes)} attributes, "
                     f"{'replace' if mechanism.replace else 'add/remove'}, multiplier {mechanism.multiplier}, "
                     f"{len(mechanism.fixed)} invariant margin(s)")


def workload_parameters(mechanism) -> dict:
    """The recorded attributes, levels, blocks, adjacency and multiplier of a marginal family
    (read back by :func:`workload_from_parameters`)."""
    names = mechanism.attributes
    return {
        "attributes": list(names),
        "levels": list(mechanism.workload.algebra.sizes),
        "blocks": [[names[k] for k in block] for block in mechanism.workload.blocks],
        "adjacency": "replace_one" if mechanism.replace else "add_remove",
        "multiplier": mechanism.multiplier,
    }


def workload_from_parameters(parameters: dict, space: SensitivitySpace) -> tuple[tuple[str, ...], MarginalWorkload]:
    """The attribute names and the workload recorded in a marginal family's parameters."""
    attributes = tuple(str(a) for a in parameters["attributes"])
    sizes = tuple(int(n) for n in parameters["levels"])
    if len(sizes) != len(attributes) or min(sizes, default=1) < 1:
        raise ValueError("attributes and levels do not match")
    blocks = tuple(tuple(attributes.index(a) for a in block) for block in parameters["blocks"])
    workload = MarginalWorkload(MarginalAlgebra(sizes), blocks)
    if workload.dimension != space.dimension:
        raise ValueError(f"the blocks have {workload.dimension} cells, the query dimension is {space.dimension}")
    if parameters["adjacency"] not in ("add_remove", "replace_one"):
        raise ValueError(f"adjacency {parameters['adjacency']!r}")
    return attributes, workload


def positive_by_set(attributes: tuple[str, ...], entries: list, set_key: str, value_key: str) -> dict[Subset, float]:
    """``{attribute set: value}`` from recorded entries ``{set_key: [names], value_key: x}``, each set
    once, every value positive and finite (else ValueError)."""
    out: dict[Subset, float] = {}
    for entry in entries:
        key = tuple(sorted(attributes.index(a) for a in entry[set_key]))
        value = float(entry[value_key])
        if not (math.isfinite(value) and value > 0) or key in out:
            raise ValueError(f"{value_key} of {entry[set_key]}: {entry[value_key]!r} (positive, finite, once)")
        out[key] = value
    return out


def _fixed_sets(problem: Problem) -> tuple[Subset, ...]:
    """The attribute sets (as query axes) of the spec's invariant margins."""
    attributes = problem.query.attributes
    return tuple(tuple(sorted(attributes.index(a) for a in inv.attributes))
                 for inv in problem.spec.invariants if inv.kind == "margins")


def _multiplier(problem: Problem) -> int:
    """a under invariants (Semi-DP), else the Hamming factor (1 for add/remove and replace-one)."""
    a = problem.space.semi_adjacent_parameter
    return int(a) if problem.spec.invariants and a is not None else hamming_factor(problem.spec)


def _invariants_reason(problem: Problem) -> str | None:
    """Why invariants are not served (None when they are): margins over the query's attributes under replace-one."""
    spec, attributes = problem.spec, problem.query.attributes
    if spec.adjacency.kind != "replace_one":
        return "invariants are served under replace_one adjacency only"
    for inv in spec.invariants:
        if inv.kind == "linear":
            return "a linear invariant is not a margin: the algebra expresses invariant margins only"
        if inv.kind == "margins" and any(a not in attributes for a in inv.attributes):
            return "an invariant margin over an attribute outside the query's table is not served"
    if problem.space.semi_adjacent_parameter is None:
        return "the sensitivity space gives no semi-adjacent parameter a"
    return None


class MarginalGaussianMechanism(Mechanism):
    """Gaussian noise W ξ, ξ ~ N(0, (Σ_T a_T E_T)⁺), on a marginal workload W.

    Parameters
    ----------
    attributes : tuple of str
        The table's attributes (axis k ↔ ``attributes[k]``).
    workload : MarginalWorkload
    replace : bool
        Replace-one (or Hamming) neighbours: the grand total gets no noise.
    multiplier : int
        How many replace-one differences a neighbouring difference sums: the Hamming distance
        (capped at a public n), the semi-adjacent parameter a under invariants, else 1.
    coefficients : dict
        a_T for each T of :func:`~dpopt.optimize.marginal_covariance.components`.
    fixed : tuple of Subset
        The attribute sets of the invariant margins (their components are released exactly).
    agree : Subset
        Under invariants, the attribute set of the invariant margin on which the differing records of two
        conforming datasets are re-paired (:meth:`_privacy_checks`); () otherwise.
    design : dict, optional
        How the coefficients were obtained (recorded for the reader, not used to rebuild).
    sampler : {"floating_point", "exact"}
        ``exact``: the lattice measurement of the module docstring (lattice variances derived from the a_T).
    """

    family = "marginal_gaussian"
    title = "Gaussian, optimal covariance of a marginal workload (ANOVA algebra)"
    noise_in_span = True

    def __init__(self, attributes: tuple[str, ...], workload: MarginalWorkload, replace: bool, multiplier: int,
                 coefficients: dict[Subset, float], design: dict | None = None, fixed: tuple[Subset, ...] = (),
                 agree: Subset = (), sampler: str = "floating_point", target: str = "zcdp"):
        self.attributes = tuple(attributes)
        self.workload = workload
        self.replace = bool(replace)
        self.multiplier = int(multiplier)
        self.fixed = tuple(tuple(sorted(f)) for f in fixed)
        self.agree = tuple(sorted(agree))
        self.coefficients = {tuple(t): float(a) for t, a in coefficients.items()}
        self.design_info = dict(design or {})
        self.dimension = workload.dimension
        if sampler not in ("floating_point", "exact"):
            raise ValueError(f"sampler {sampler!r} (floating_point or exact)")
        self.sampler = sampler
        self.target = "gdp" if target in GDP_TARGETS else "zcdp"  # the privacy the lattice variances serve
        self.needs_integer_answers = sampler == "exact"
        self.lattice = self._lattice() if sampler == "exact" else {}
        if sampler == "exact" and None in self.lattice.values():
            raise ValueError("a lattice variance is beyond the exact sampler's range")

    # ---------------------------------------------------------------- facts
    @classmethod
    def supports(cls, problem: Problem) -> str | None:
        spec, query = problem.spec, problem.query
        if spec.data.privacy_unit is not None:
            return "the marginal algebra assumes one row per person (use gaussian or gaussian_optimal with a privacy_unit)"
        if spec.privacy.definition not in _TARGETS:
            return (f"Gaussian noise serves gdp, zcdp and approx targets, not {spec.privacy.definition} "
                    "(pure ε needs Laplace-type noise)")
        if not isinstance(query, CountingQuery) or query.kind not in MARGINAL_KINDS:
            return (f"the ANOVA algebra expresses stacks of marginals ({', '.join(MARGINAL_KINDS)}); a {query.kind} "
                    "query is not invariant under permuting each attribute's levels")
        if spec.utility.metric != "l2" or spec.utility.workload is not None or spec.utility.weights is not None:
            return ("the algebra optimises the unweighted l2 error of the marginals; a workload, per-cell weights or "
                    f"the '{spec.utility.metric}' metric break the symmetry that puts the optimum in the algebra "
                    "(gaussian_optimal serves them up to 120 cells)")
        reason = _invariants_reason(problem) if spec.invariants else None
        if reason is not None:
            return reason
        if spec.adjacency.kind != "add_remove":
            return pattern_refusal(query.workload, _fixed_sets(problem))
        return None

    @classmethod
    def utility_bound(cls, problem: Problem) -> float | None:
        """Under add/remove the design's error is the SVD bound (the nudge only raises it)."""
        spec = problem.spec
        if spec.adjacency.kind != "add_remove" or cls.supports(problem) is not None:
            return None
        return svd_bound(problem.query.workload, target_mu(spec.privacy))

    @classmethod
    def design(cls, problem: Problem) -> MarginalGaussianMechanism:
        """Optimise the a_T, then scale them by the largest factor ≤ 1 the exact check accepts.

        Raises
        ------
        CalibrationError
            Coefficients the exact check cannot certify.
        SolverError
            The replace-one program failed.
        """
        spec, space = problem.spec, problem.space
        workload = problem.query.workload
        replace = spec.adjacency.kind != "add_remove"
        k, fixed = _multiplier(problem), _fixed_sets(problem)
        mu = target_mu(spec.privacy)
        attributes = tuple(problem.query.attributes)
        goals = TableGoals.of(spec.utility, attributes, workload)
        # under invariant margins: the differing records re-paired on one invariant margin, the best one
        designs = [(optimise(workload, mu / k, replace, fixed, agree, goals, attributes), agree)
                   for agree in fixed or ((),)]
        result, agree = min(designs, key=lambda pair: pair[0].error)

        def scaled(factor: float) -> MarginalGaussianMechanism:
            return cls(attributes, workload, replace, k, {t: a * factor for t, a in result.coefficients.items()},
                       fixed=fixed, agree=agree)

        sampler = "floating_point"

        factor = float(nudge_until(1.0, lambda f: all(c.passed for c in scaled(f).privacy_checks(space, spec.privacy)),
                                   up=False))
        mechanism = scaled(factor)
        refusal = cls.exact_reason(spec, mechanism.coefficients, workload)
        target = spec.privacy.definition
        if refusal is None:
            sampler = "exact"
        error = expected_error(workload, mechanism.coefficients)
        objective = objective_value(goals, workload, mechanism.coefficients)
        exact = mechanism._mahalanobis_squared()
        info = {
            "method": result.method,
            "target_mu": mu,
            "scale_factor": factor,
            "mu_sigma_squared": str(exact),
            "expected_l2": error,
            "lower_bound": result.lower_bound,
            "optimality_gap": max(0.0, (objective - result.lower_bound) / objective),
            "components": len(mechanism.coefficients),
            "sampler": sampler if refusal is None else f"floating_point: {refusal}",
            "baselines": baselines(problem, workload, mu, replace, k),
        }
        if not replace:
            info["svd_bound"] = svd_bound(workload, mu)
        if fixed:
            info["semi_dp"] = semi_dp_bracket(workload, mechanism.coefficients, replace, k, fixed, agree)
            everything = tuple(sorted({x for f in fixed for x in f}))
            free = [x for x, n in enumerate(workload.algebra.sizes) if n >= 2 and x not in everything]
            # every covariance meeting the exact Semi-DP target meets a² max over the patterns avoiding every
            # invariant attribute (attained by conforming pairs), so this program's dual bound bounds its error;
            # with no attribute outside the invariants no such pattern exists and the bound is 0
            relaxed = (result if agree == everything
                       else optimal_coefficients(workload, mu / k, replace, fixed, everything) if free else None)
            info["semi_dp"]["error_lower_bound"] = relaxed.lower_bound if relaxed is not None else 0.0
        if spec.utility.table_goals:
            released = variance_coefficients(workload, mechanism.coefficients, sampler, target)
            info["tables"] = goals.to_dict(attributes, workload, table_errors(workload, released))
            info["tables"]["lower_bound"] = result.lower_bound
            unmet = [row["table"] for row in info["tables"]["tables"] if row["met"] is False]
            if unmet:
                raise CalibrationError(f"utility.tables: the released noise misses the target of {unmet[0]}")
        return cls(attributes, workload, replace, k, mechanism.coefficients, info, fixed, agree, sampler, target)

    @staticmethod
    def exact_reason(spec, coefficients: dict[Subset, float], workload: MarginalWorkload) -> str | None:
        """Why the design keeps the floating-point sampler (None: it measures exactly on the lattice)."""
        if spec.sampler == "floating_point":
            return "the spec asks for sampler: floating_point"
        reason = exact_refusal(spec.privacy.definition, True)
        if reason is not None:
            return reason
        alg = workload.algebra
        definition = spec.privacy.definition
        continuous = {t: Fraction(alg.co_size(t)) / Fraction(a) for t, a in coefficients.items()}
        # a GDP target only raises the lattice variance (target_lattice_variance), and a certified slope costs up to
        # a second at σ² near MAX_SIGMA2: the components outside the range at their first variance go first
        start = {t: lattice_variance(v, alg.size(t)) for t, v in continuous.items()}
        outside = next((t for t, s in start.items() if s is None or (definition in GDP_TARGETS and s > MAX_SIGMA2)),
                       None)
        if outside is None:
            outside = next((t for t, v in continuous.items()
                            if target_lattice_variance(v, alg.size(t), definition) is None), None)
        if outside is not None:
            return (f"the lattice variance of component {outside} is outside the exact sampler's range "
                    "(2^-9 to 2^60 in units of the lattice"
                    + (f"; up to {MAX_SIGMA2} where the GDP slope is certified)" if definition in GDP_TARGETS else ")"))
        return None

    @classmethod
    def from_parameters(cls, parameters: dict, space: SensitivitySpace) -> MarginalGaussianMechanism:
        attributes, workload = workload_from_parameters(parameters, space)
        coefficients = positive_by_set(attributes, parameters["coefficients"], "component", "a")
        adjacency = parameters["adjacency"]
        fixed = tuple(tuple(sorted(attributes.index(a) for a in f)) for f in parameters["invariant_margins"])
        agree = tuple(attributes.index(a) for a in parameters.get("pairs_agree_on", []))
        return cls(attributes, workload, adjacency == "replace_one", int(parameters["multiplier"]),
                   coefficients, parameters.get("design"), fixed, agree, parameters.get("sampler", "floating_point"),
                   parameters.get("lattice_privacy", "zcdp"))

    @property
    def parameters(self) -> dict:
        names = self.attributes
        return {
            **workload_parameters(self),
            "invariant_margins": [[names[k] for k in f] for f in self.fixed],
            "pairs_agree_on": [names[k] for k in self.agree],
            "coefficients": [{"component": [names[k] for k in t], "a": a} for t, a in self.coefficients.items()],
            "sampler": self.sampler,
            **({"lattice_privacy": "gdp"} if self.sampler == "exact" and self.target == "gdp" else {}),
            "design": self.design_info,
        }

    def scope_checks(self, problem: Problem) -> list[Check]:
        """The table, blocks and adjacency in the parameters are those the spec compiles to; the design record's
        closed-form entries re-derived (:func:`~dpopt.mechanisms.marginal_design.design_record_check`); with table
        goals, each table's error against its target and the objective
        (:func:`~dpopt.optimize.table_goals.goals_check`)."""
        refusal = self.exact_reason(problem.spec, self.coefficients, self.workload)
        checks = [workload_scope_check(problem, self),
                  design_record_check(problem, self, "exact" if refusal is None else f"floating_point: {refusal}")]
        if problem.spec.utility.table_goals or "tables" in self.design_info:
            checks.append(goals_check(problem.spec.utility, self.attributes, self.workload,
                                      self._variance_coefficients(), self.design_info.get("tables")))
        return checks

    def _lattice(self) -> dict[Subset, Fraction | None]:
        return lattice_variances(self.workload, self.coefficients, self.target)

    def _effective_coefficients(self, definition: str | None = None) -> dict[Subset, Fraction | float]:
        """The a_T the privacy of the released noise is evaluated at: a_T' = ∏_{k∉T} n_k L_T² / σ_T² ≤ a_T
        on the lattice, else the a_T."""
        if self.sampler != "exact":
            return self.coefficients
        alg = self.workload.algebra
        out = {}
        for t, s2 in self.lattice.items():
            variance = effective_variance(s2, definition or self.target)
            if variance is None:
                raise CalibrationError(GDP_RANGE_REFUSAL)
            out[t] = Fraction(alg.co_size(t) * alg.size(t) ** 2) / variance
        return out

    def _variance_coefficients(self) -> dict[Subset, float]:
        return variance_coefficients(self.workload, self.coefficients, self.sampler, self.target)

    def _mahalanobis_squared(self, agree: Subset | None = None, definition: str | None = None) -> Fraction:
        agree = self.agree if agree is None else agree
        return (exact_mahalanobis_squared(self.workload, self._effective_coefficients(definition), self.replace, agree)
                * self.multiplier ** 2)

    def semi_dp_bracket(self) -> dict:
        """Under invariant margins, the exact Semi-DP Mahalanobis sensitivity μ_Σ² of the released noise (at the
        lattice's a_T' on the lattice) bracketed: :func:`~dpopt.mechanisms.marginal_design.semi_dp_bracket`."""
        return semi_dp_bracket(self.workload, self._effective_coefficients(), self.replace, self.multiplier,
                               self.fixed, self.agree)

    def _privacy_checks(self, space: SensitivitySpace, privacy: Privacy) -> list[Check]:
        needed = set(components(self.workload, self.replace, self.fixed))
        rank = sum(self.workload.algebra.multiplicity(t) for t in needed)
        range_ok = set(self.coefficients) == needed and rank == space.rank and all(
            math.isfinite(a) and a > 0 for a in self.coefficients.values()) and (
            not self.agree or self.agree in self.fixed)
        range_check = Check(
            "covariance.range",
            "a positive finite a_T for exactly the components T of the workload's closure that neighbours move "
            "(m_T > 0; ∅ only under add/remove; none inside an invariant margin), so range(Σ) = span(S); its rank "
            "Σ m_T equals the space's; records are re-paired only on an invariant margin's attributes",
            range_ok, f"{len(self.coefficients)} coefficients for {len(needed)} components; rank {rank} vs {space.rank}")
        if privacy.definition not in _TARGETS:
            return [range_check, Check("privacy", "Gaussian noise", False, f"cannot meet a {privacy.definition} target")]
        if self.sampler == "exact" and exact_refusal(privacy.definition, True) is not None:
            return [range_check, Check("privacy", "exact lattice measurement", False,
                                       exact_refusal(privacy.definition, True))]
        try:
            squared = self._mahalanobis_squared(definition=privacy.definition)
        except CalibrationError as exc:
            return [range_check, Check("privacy", "exact Mahalanobis sensitivity", False, str(exc))]
        inner = gaussian_privacy_check(squared, 1.0, privacy)
        names = ", ".join(self.attributes[k] for k in self.agree)
        how = ("Σ_T a_T m_T / N" if not self.replace else
               f"max over the {2 ** sum(1 for n in self.workload.algebra.sizes if n >= 2) - 1} disagreement patterns D "
               "of 2 Σ_T a_T gap_T(D) (integers, over the count vectors of the classes of attributes interchangeable "
               "in the a_T)" + (f", D avoiding {names}: the differing records of two conforming datasets have equal "
                               f"{names} margins, so they pair up into at most a pairs that agree on {names}"
                               if self.agree else ""))
        privacy_check = Check(
            "privacy",
            f"exact Mahalanobis sensitivity μ_Σ² = {how}"
            + (f", × {self.multiplier}² ({'semi-adjacent parameter a, triangle inequality of the G-seminorm' if self.fixed else 'Hamming'})"
               if self.multiplier != 1 else "")
            + (", in rational arithmetic at a_T' = ∏_{k∉T} n_k L_T²/σ_T² from the lattice variances σ_T² (derived "
               "from the stored a_T); the lattice measurement's Rényi divergences are at most α μ_Σ²/2 (CKS 2020, "
               f"Theorem 14: independent discrete Gaussians, integer shifts): {inner.method}"
               if self.sampler == "exact" and privacy.definition not in GDP_TARGETS else
               ", in rational arithmetic at a_T' = ∏_{k∉T} n_k L_T² m_T² from the lattice variances σ_T² (derived "
               "from the stored a_T; m_T the certified GDP slope of N_ℤ(0, σ_T²) under integer shifts, "
               "dpopt.privacy.discrete_gaussian_gdp); independent coordinates tensorise (Dong, Roth & Su 2022, "
               f"Prop. 2.8), so the lattice measurement is μ_Σ-GDP: {inner.method}"
               if self.sampler == "exact" else
               f", in rational arithmetic from the stored a_T; N(0, Σ) is then exactly μ_Σ-GDP: {inner.method}"),
            range_ok and inner.passed,
            f"μ_Σ = {math.sqrt(float(squared)):.17g}; {inner.detail}",
        )
        return [range_check, privacy_check]

    def privacy_summary(self, space: SensitivitySpace) -> dict:
        mu = math.sqrt(float(self._mahalanobis_squared()))
        exact = self.sampler == "exact" and self.target != "gdp"
        return {
            "mu": mu,
            "rho": mu * mu / 2.0,
            "epsilon_at_delta": {f"{delta:g}": zcdp_epsilon_cks(delta, mu * mu / 2.0)[0] if exact
                                 else gaussian_epsilon(delta, mu) for delta in (1e-5, 1e-6, 1e-10)},
            "conversion": "exact: μ_Σ² = max_δ δᵀGδ (Mahalanobis sensitivity in the ANOVA algebra), "
                          + ("ρ = μ_Σ²/2 for the lattice measurement (CKS 2020, Theorem 14), (ε, δ) from ρ by the "
                             "CKS conversion (Prop. 12)"
                             if exact else "analytic-Gaussian (ε, δ) profile"
                             + (" (the lattice measurement at its certified GDP slopes)" if self.sampler == "exact"
                                else "")),
        }

    def notes(self) -> list[str]:
        out = [EXACT_MEASUREMENT_NOTE] if self.sampler == "exact" else super().notes()
        if self.sampler != "exact" and str(self.design_info.get("sampler", "")).startswith("floating_point:"):
            out.append(f"no exact lattice measurement: {self.design_info['sampler'].split(': ', 1)[1]}")
        if self.replace:
            out.append("the grand total is the same on neighbouring datasets and is released exactly")
        if self.fixed:
            bracket = self.semi_dp_bracket()
            out.append(f"Semi-DP: the components inside the invariant margins get no noise; μ_Σ ≤ a · max over record "
                       f"pairs that agree on {', '.join(self.attributes[k] for k in self.agree) or 'nothing'} "
                       f"(a = {self.multiplier}); "
                       + ("this is the exact Semi-DP sensitivity (attained by a conforming pair)"
                          if bracket["relative_gap"] == 0 else
                          f"the exact Semi-DP sensitivity (squared) lies between "
                          f"{float(Fraction(bracket['attained'])):.17g} (attained by a conforming pair) and this bound "
                          f"{float(Fraction(bracket['certified'])):.17g}"))
        info = self.design_info
        if info:
            out.append(f"coefficients from {info.get('method')}; scaled by {info.get('scale_factor'):.17g} so that the "
                       f"exact check holds; certified optimality gap {info.get('optimality_gap'):.3g} (relative, "
                       "against a lower bound valid for every Gaussian noise covariance)")
        return out

    # ------------------------------------------------------------ noise
    def _scales(self) -> dict[Subset, float]:
        """√(∏_{k∉T} n_k / a_T): the standard deviation of the T-marginal of ξ before centring."""
        alg = self.workload.algebra
        return {t: math.sqrt(alg.co_size(t) / a) for t, a in self.coefficients.items()}

    def sampler_check_draws(self, default: int) -> int:
        """:func:`~dpopt.mechanisms.lattice.check_draws` at Σ_T ∏_{k∈T} n_k variates a draw, on the lattice and in
        floating point alike: ‖Z‖² of a draw sums that many independent squared Gaussian parts either way, so the
        argument there holds for both (a floating-point draw of 10⁴ cells cost 0.35 ms; 2,000 of them were most of
        the check of ``specs/marginals_8attr_3way_invariants.yaml``, at solve and at verify)."""
        noised = self.lattice if self.sampler == "exact" else self.coefficients
        return check_draws(default, sum(self.workload.algebra.size(t) for t in noised))

    def sample_coordinates(self, coordinates: Sequence[int], size: int, rng: np.random.Generator) -> np.ndarray:
        """Draws of the given cells only: a cell of block S is Σ_{T⊆S} of its share of the T-part of the noise
        (:meth:`_sample`), so the blocks holding the cells are synthesised, as a workload of their own, from the
        parts T of their closure alone, drawn as :meth:`_sample` draws them. Over every block this is
        :meth:`sample` itself, draw for draw."""
        offsets = self.workload.offsets
        block_of = [int(np.searchsorted(offsets, c, side="right")) - 1 for c in coordinates]
        chosen = sorted(set(block_of))
        sub = MarginalWorkload(self.workload.algebra, tuple(self.workload.blocks[i] for i in chosen))
        starts = dict(zip(chosen, sub.offsets))
        columns = [starts[b] + int(c) - offsets[b] for c, b in zip(coordinates, block_of)]
        require_memory(dense_bytes(2, size, sub.dimension), f"{int(size):,} noise draws of {sub.dimension:,} cells")
        return self._sample(rng, int(size), set(sub.closure), sub)[:, columns]

    def _sample(self, rng: np.random.Generator, size: int, parts: set[Subset] | None = None,
                workload: MarginalWorkload | None = None) -> np.ndarray:
        """Noise draws of ``workload`` (default: the mechanism's) from the parts T in ``parts`` (default: all)."""
        workload = self.workload if workload is None else workload
        alg = workload.algebra
        if self.sampler == "exact":
            noise = self._lattice_noise(rng, size, parts)
            return synthesize_noise(workload, {t: alg.center(noise[t], len(t)) / alg.size(t) for t in noise}, size)
        drawn = {t: s for t, s in self._scales().items() if parts is None or t in parts}
        return synthesize_noise(workload, {t: s * alg.center(rng.standard_normal((size,) + alg.table_shape(t)), len(t))
                                           for t, s in drawn.items()}, size)

    def _lattice_noise(self, rng: np.random.Generator, size: int,
                       parts: set[Subset] | None = None) -> dict[Subset, np.ndarray]:
        """For each noised T (in ``parts``, default all), ``size`` T-tables of i.i.d. N_ℤ(0, σ_T²) (int64): one call
        of the sampler per distinct σ_T², split in the order of the components."""
        alg = self.workload.algebra
        groups: dict[Fraction, list[Subset]] = {}
        for t, s2 in self.lattice.items():
            if parts is None or t in parts:
                groups.setdefault(s2, []).append(t)
        out = {}
        for s2, ts in groups.items():
            draws = sample_discrete_gaussian(rng, s2.numerator, s2.denominator, size * sum(alg.size(t) for t in ts))
            start = 0
            for t in ts:
                n = size * alg.size(t)
                out[t] = draws[start:start + n].reshape((size,) + alg.table_shape(t))
                start += n
        return out

    def _release(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Floating point: φ(X) + Z. Exact: the lattice measurements y_T = A_T x_T + η_T in int64 and the
        release computed from them and the public components alone (module docstring)."""
        if self.sampler != "exact":
            return values + self._sample(rng, values.shape[0])
        alg = self.workload.algebra
        noise = self._lattice_noise(rng, values.shape[0])

        def component(t: Subset, marginal: np.ndarray) -> np.ndarray | None:
            if t not in self.lattice:
                return None
            measured = _integer_centring(marginal, alg.table_shape(t)) + noise[t]
            return alg.center(measured, len(t)) / alg.size(t)

        return exact_marginal_release(self.workload, values, component)

    def _factors(self) -> dict[Subset, np.ndarray]:
        """For each T, the (d × ∏_{k∈T} n_k) map g ↦ Z of the sampler (its T-part)."""
        alg = self.workload.algebra
        out = {}
        for t, s in self._scales().items():
            eye = np.eye(alg.size(t)).reshape((alg.size(t),) + alg.table_shape(t))
            out[t] = s * synthesize_noise(self.workload, {t: alg.center(eye, len(t))}, alg.size(t)).T
        return out

    def noise_law(self) -> ProductLaw | str:
        """Z = Σ_T F_T g_T: each F_T has m_T equal singular values, and the ranges are orthogonal
        (W E_T Wᵀ W E_U Wᵀ = λ_U W E_T E_U Wᵀ = 0), so Z is a product of Gaussians on the left
        singular vectors (computed from the sampler's own maps, densely, up to
        :data:`MAX_LAW_DIMENSION` cells). The lattice measurement's noise is a linear image of discrete
        Gaussians, not a product law: no law is stated (its privacy is the exact check's)."""
        if self.sampler == "exact":
            return ("the exact lattice measurement's noise is a linear image of independent discrete Gaussians, not a "
                    "product law in an orthonormal basis; its Rényi divergences are bounded exactly by the privacy "
                    "check (CKS 2020, Theorem 14)")
        if self.dimension > MAX_LAW_DIMENSION:
            return (f"the noise law is stated densely up to {MAX_LAW_DIMENSION} released cells (this release has "
                    f"{self.dimension}); its covariance is W(Σ_T a_T E_T)⁺Wᵀ in closed form")
        alg = self.workload.algebra
        columns, sds = [], []
        for t, f in self._factors().items():
            u, sv, _ = np.linalg.svd(f, full_matrices=False)
            m = alg.multiplicity(t)
            columns.append(canonical_basis(u[:, :m]))  # of the range: LAPACK's basis of m equal σ is the machine's
            sds.extend(sv[:m])
        basis = np.concatenate(columns, axis=1)
        return ProductLaw(tuple(GaussianMarginal(float(s)) for s in sds), self.dimension, basis, None,
                          f"W ξ, ξ ~ N(0, (Σ_T a_T E_T)⁺), in the orthogonal ranges of the {len(columns)} components")

    def cell_variances(self) -> np.ndarray:
        """Var Z_i per released cell, in closed form (module docstring; on the lattice, at the discrete
        Gaussians' variances)."""
        return cell_variances(self.workload, self._variance_coefficients())

    def sub_gaussian_cell_proxies(self) -> tuple[np.ndarray, np.ndarray, str] | None:
        """On the lattice, cell i's noise is Σ_T Σ_j c_ij η_T,j (the release is linear in the y_T), so its variance
        and its sub-Gaussian proxy Σ c_ij² σ_T² are the closed-form cell variances at a_T' computed from
        Var N_ℤ(0, σ_T²) and from σ_T² respectively (:func:`cell_variances`)."""
        if self.sampler != "exact":
            return None
        alg = self.workload.algebra
        proxies = {t: alg.co_size(t) * alg.size(t) ** 2 / float(s2) for t, s2 in self.lattice.items()}
        return (self.cell_variances(), cell_variances(self.workload, proxies),
                "closed form: the release is linear in the lattice measurements y_T, cell i of block S has "
                "Σ_{T⊆S} (∏_{k∉T} n_k/a_T')(m_T/∏_{k∈T} n_k)/(∏_{S∖T} n_k)² at a_T' = ∏_{k∉T} n_k L_T²/Var N_ℤ(0, σ_T²) "
                "(the proxy: at σ_T² in place of the variance)")

    def linear_noise_image(self) -> tuple[np.ndarray, tuple] | None:
        """On the lattice: the release adds Z = Σ_T synthesize(centre(η_T)/|T|) to the answer, linear in the
        lattice noise η (:meth:`_sample`); C's columns are its images of the unit tables, one η_T,j at a time,
        and W_k = η_T,j ~ N_ℤ(0, σ_T²). None off the lattice or above :data:`MAX_IMAGE_ENTRIES` entries."""
        if self.sampler != "exact":
            return None
        alg = self.workload.algebra
        rank = sum(alg.size(t) for t in self.lattice)
        if rank * self.dimension > MAX_IMAGE_ENTRIES:
            return None
        columns, marginals = [], []
        for t, s2 in self.lattice.items():
            n = alg.size(t)
            units = np.eye(n).reshape((n,) + alg.table_shape(t))
            columns.append(synthesize_noise(self.workload, {t: alg.center(units, len(t)) / n}, n).reshape(n, -1).T)
            marginals += [DiscreteGaussianMarginal(float(s2))] * n
        return np.concatenate(columns, axis=1), tuple(marginals)

    def _expected_l2(self, workload: np.ndarray | None) -> float | None:
        if workload is not None:
            return None
        return expected_error(self.workload, self._variance_coefficients())


def exact_marginal_release(workload: MarginalWorkload, values: np.ndarray,
                           component: Callable[[Subset, np.ndarray], np.ndarray | None]) -> np.ndarray:
    """The release of an exact marginal measurement from its ANOVA components: for each T of the closure, the
    T-marginal of the integer answers (int64, from the first workload set holding T), handed to ``component``,
    which returns the released T-component computed from it and the lattice noise, or None when T is public (no
    neighbour moves it: its component is the marginal centred, without noise). Shape (m, d) like ``values``.

    Raises
    ------
    DataError
        Answers that are not whole counts (:func:`~dpopt.mechanisms.lattice.integer_answers`).
    """
    alg = workload.algebra
    tables = workload.tables(integer_answers(values))  # float views of whole numbers, exact below 2^53
    holding = _first_holding(workload.sets)
    parts: dict[Subset, np.ndarray] = {}
    for t in workload.closure:
        i = holding(t)
        marginal = np.rint(alg.marginal(tables[i], workload.sets[i], t)).astype(np.int64)
        part = component(t, marginal)
        parts[t] = alg.center(marginal, len(t)) if part is None else part
    return workload.from_components(parts).reshape(values.shape[0], workload.dimension)


def _first_holding(sets: tuple[Subset, ...]):
    """t ↦ the index of the first workload set holding t (sets indexed by attribute: a release looks up every
    component of the closure, and the closure of many marginals is as long as the sets)."""
    by_attribute: dict[int, list[int]] = {}
    for i, s in enumerate(sets):
        for x in s:
            by_attribute.setdefault(x, []).append(i)
    return lambda t: next(i for i in by_attribute[t[0]] if set(t) <= set(sets[i])) if t else 0


def _integer_centring(table: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A_T x = ⊗_k (n_k I − J) applied to int64 T-tables (last axes of ``table``, sizes ``shape``): n_k v − Σ_k v
    along each axis, exactly (refused beyond int64)."""
    bound = int(np.abs(table).max(initial=0)) * math.prod(shape) * 2 ** len(shape)
    if bound >= 2**62:
        raise CalibrationError("the lattice measurement's integers would exceed int64; use sampler: floating_point")
    out = table
    for axis, n in zip(range(table.ndim - len(shape), table.ndim), shape):
        out = n * out - out.sum(axis=axis, keepdims=True)
    return out
