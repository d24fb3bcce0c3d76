r"""The capability table at work: screen a family against its row, and its cheap a-priori bound.

:data:`dpopt.core.families.FAMILIES` declares, for every family, what it serves; this module reads a
row against a compiled spec without importing the family (:func:`screen`), evaluates the row's
**quick bound** from the target, the dimension, the rank and the exact sensitivity norms alone — no
listed difference vector, nothing of domain size (:func:`quick_bound`) — and renders the table for the
docs (:func:`capability_table`).

Quick bounds (metric ``l2`` without a workload or weights, and ``max_variance``):

``iid``: noise that adds i.i.d. symmetric noise of variance σ² to every coordinate (Laplace, staircase,
R²DP, discrete Laplace). Take v ∈ S with ‖v‖₂² = Δ₂²; each |v_k| ≤ Δ∞. The Hammersley–Chapman–Robbins
bound for one coordinate shifted by t gives χ²(P_{Z+t} ‖ P_Z) ≥ t²/σ².

* ρ-zCDP (μ-GDP: ρ = μ²/2, as μ-GDP bounds every Rényi divergence by the Gaussian pair's): Rényi
  divergences of independent coordinates add, so Σ_k D₂(|v_k|) ≤ 2ρ, with D₂ = log(1 + χ²)
  ≥ log(1 + v_k²/σ²). That is concave in v_k² ∈ [0, Δ∞²], hence ≥ (v_k²/Δ∞²)·log(1 + Δ∞²/σ²)
  (the chord), and summing, (Δ₂²/Δ∞²)·log(1 + Δ∞²/σ²) ≤ 2ρ:

  .. math:: σ^2 \ge Δ_∞^2 / (\exp(2ρΔ_∞^2/Δ_2^2) − 1).

* pure ε: the losses of independent coordinates add, Σ_k ε₁(|v_k|) ≤ ε, and a likelihood ratio in
  [e^{−ε₁}, e^{ε₁}] has χ² ≤ (e^{ε₁} − 1)(1 − e^{−ε₁}) = 2(cosh ε₁ − 1), so ε₁(t) ≥ arccosh(1 + t²/(2σ²)),
  concave in t²; the chord again gives

  .. math:: σ^2 \ge Δ_∞^2 / (2(\cosh(εΔ_∞^2/Δ_2^2) − 1)).

E‖Z‖₂² = dσ², max_variance = σ². (Approximate DP and pDP give no such bound: None.) ``iid_zcdp`` is the
same under zcdp and gdp only, for the generalized Gaussian (i.i.d. only for those targets: under pure ε
it may truncate its noise to a public box).

``k_norm_ball``: above rank :data:`~dpopt.core.families.HULL_MAX_RANK` the K-norm mechanism's K is the
smallest l1, l2 or l∞ ball of span(S) containing S, at the ε₀ of
:func:`~dpopt.privacy.pure_conversion.pure_epsilon_for`. With E R² = (s+1)(s+2)/ε₀² and the balls'
second moments (an orthonormal basis keeps ‖v‖₂ = Δ₂): l2 ball radius Δ₂, E‖Z‖² = s(s+1)Δ₂²/ε₀²;
l1 ball radius c ≥ max‖Bᵀv‖₁ ≥ Δ₂, E‖Z‖² = 2sc²/ε₀² ≥ 2sΔ₂²/ε₀²; l∞ ball radius c ≥ Δ₂/√s,
E‖Z‖² = s(s+1)(s+2)c²/(3ε₀²) ≥ (s+1)(s+2)Δ₂²/(3ε₀²). The smallest, for every s ≥ 1, is 2sΔ₂²/ε₀².
Up to rank :data:`~dpopt.core.families.CROSS_MAX_RANK`, on a counting query measured exactly (no
``sampler: floating_point``; the bound does not read the query) K is instead the cross-polytope of the
lattice coordinates (:mod:`dpopt.mechanisms.k_norm_cross`), a discrete law below that bound (on the add/remove
histogram it is the discrete Laplace, of variance 2e^{−ε}/(1 − e^{−ε})² < 2/ε² per cell). Its noise Z = cR has
c = Z[J] (R is the identity on the pivot columns J), c_k independent discrete Laplace of scales M_k/ε′ with M_k ≥ 1
(integer bounds of a spanning S) and ε′ ≤ ε₀, so E‖Z‖² ≥ Σ_k E c_k² ≥ s·2e^{−ε₀}/(1 − e^{−ε₀})² = s/(2 sinh²(ε₀/2))
(the variance of the discrete Laplace grows with its scale; equality on the add/remove histogram). The family
may still take a ball (the cross-polytope refused), so the bound is the smaller of the two, and at least the one for
every symmetric ε₀-DP additive noise along a neighbouring shift of norm Δ₂ (Hammersley–Chapman–Robbins with
χ² ≤ 4 sinh²(ε₀/2), :func:`~dpopt.mechanisms.k_norm.shift_cost_lower_bound` with one vector):
E‖Z‖² ≥ max(Δ₂²/(4 sinh²(ε₀/2)), min(2sΔ₂²/ε₀², s/(2 sinh²(ε₀/2)))).

Every bound is rounded down by 1e-9 relative (the norms are exact; the float formulas round to ~1e-15).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dpopt.core.families import CROSS_MAX_RANK, FAMILIES, HULL_MAX_RANK, INTEGER_QUERIES, Capability, capability
from dpopt.domain.queries import CountingQuery
from dpopt.privacy.pure_conversion import pure_epsilon_for
from dpopt.problem import Problem

_ROUND_DOWN = 1 - 1e-9


def screen(name: str, problem: Problem) -> str | None:
    """None when the row of ``name`` admits the spec, else the reason (the family is not imported).

    Checks, in order: the privacy definition, the query kind, the integer answers, the person with
    several rows, the metric, a workload or weights, invariants, the dimension.
    """
    row, spec = capability(name), problem.spec
    definition, kind, utility = spec.privacy.definition, spec.query.kind, spec.utility
    if definition not in row.definitions:
        return f"{name} cannot meet a {definition} target (it serves {', '.join(row.definitions)})"
    if row.queries is not None and kind not in row.queries:
        return f"{name} serves {', '.join(row.queries)} queries, not a {kind} query"
    if row.integer and not (isinstance(problem.query, CountingQuery) and problem.query.integer_answers):
        return (f"discrete noise needs an integer-valued query ({', '.join(INTEGER_QUERIES)}, or linear with "
                f"whole weights), not a {kind} query" + (" with fractional weights" if kind == "linear" else ""))
    if not row.privacy_unit and spec.data.privacy_unit is not None:
        return f"{name} assumes one row per person (a privacy_unit needs a family that serves it)"
    if row.metrics is not None and utility.metric not in row.metrics:
        return f"{name} is designed for the metric {', '.join(row.metrics)} only, not '{utility.metric}'"
    if not row.workload and (utility.workload is not None or utility.weights is not None):
        return f"{name} optimises the unweighted error of the query: a workload or weights are not served"
    if utility.table_goals and not row.tables:
        return (f"{name} does not weigh tables: utility.tables and objective are served by "
                f"{', '.join(r.name for r in FAMILIES if r.tables)}")
    if spec.invariants and not row.invariants:
        return "its noise leaves the span of the sensitivity space, so it would alter the invariants"
    if row.max_dimension is not None and problem.space.dimension > row.max_dimension:
        return f"dimension {problem.space.dimension} exceeds {row.max_dimension} for {name}"
    return None


def iid_bound(problem: Problem) -> float | None:
    """The ``iid`` bound of the module docstring: dσ² (l2) or σ² (max_variance); None elsewhere."""
    scale = problem.iid_metric_scale
    space, privacy = problem.space, problem.spec.privacy
    if scale is None or space.linf == 0:
        return None
    share = float(space.linf**2 / space.l2_squared)  # Δ∞²/Δ₂² ∈ (0, 1]
    linf2 = float(space.linf**2)
    p = privacy.parameters
    if privacy.definition == "pure":
        variance = linf2 / (4.0 * math.sinh(p["epsilon"] * share / 2.0) ** 2)  # 2(cosh x − 1) = 4 sinh²(x/2)
    elif privacy.definition in ("zcdp", "gdp"):
        rho = p["rho"] if privacy.definition == "zcdp" else p["mu"] ** 2 / 2.0
        variance = linf2 / math.expm1(2.0 * rho * share)
    else:
        return None
    value = scale * variance * _ROUND_DOWN
    return value if math.isfinite(value) and value > 0 else None


def iid_zcdp_bound(problem: Problem) -> float | None:
    """:func:`iid_bound` under zcdp and gdp only (a family whose pure-ε variants may depend on the answer)."""
    return iid_bound(problem) if problem.spec.privacy.definition in ("zcdp", "gdp") else None


def k_norm_ball_bound(problem: Problem) -> float | None:
    """The ``k_norm_ball`` bound of the module docstring above rank :data:`HULL_MAX_RANK`, 2sΔ₂²/ε₀² for the
    floating-point balls; up to rank :data:`CROSS_MAX_RANK` unless the spec asks for ``sampler: floating_point``
    and S may be listed or states the generators of its hull (the lattice cross-polytope may serve a counting query) max(Δ₂²/(4 sinh²(ε₀/2)), min(2sΔ₂²/ε₀², s/(2 sinh²(ε₀/2))));
    metric l2 without workload or weights; None at or below the rank (K may be the hull)."""
    utility, space = problem.spec.utility, problem.space
    if utility.metric != "l2" or utility.workload is not None or utility.weights is not None:
        return None
    if space.rank <= HULL_MAX_RANK:
        return None
    epsilon0 = math.nextafter(pure_epsilon_for(problem.spec.privacy), math.inf)
    value = 2.0 * space.rank * float(space.l2_squared) / epsilon0**2
    may_list = space.listable or space.states_hull  # the lattice may serve: its basis is read from either
    if problem.spec.sampler != "floating_point" and space.rank <= CROSS_MAX_RANK and may_list:
        sinh2 = math.sinh(epsilon0 / 2.0) ** 2
        value = max(float(space.l2_squared) / (4.0 * sinh2), min(value, space.rank / (2.0 * sinh2)))
    value *= _ROUND_DOWN
    return value if math.isfinite(value) and value > 0 else None


QUICK_BOUNDS: dict[str, tuple[Callable[[Problem], float | None], str]] = {
    "iid": (iid_bound,
            "i.i.d. noise per coordinate: Hammersley–Chapman–Robbins from Δ₂, Δ∞ (pure, zcdp, gdp)"),
    "iid_zcdp": (iid_zcdp_bound, "as `iid`, under zcdp and gdp only"),
    "k_norm_ball": (k_norm_ball_bound, f"above rank {HULL_MAX_RANK}, K is a ball: E‖Z‖² ≥ 2sΔ₂²/ε₀² (floating "
                                       f"point); up to rank {CROSS_MAX_RANK} (the lattice cross-polytope on counts) ≥ "
                                       "max(Δ₂²/(4 sinh²(ε₀/2)), min(2sΔ₂²/ε₀², s/(2 sinh²(ε₀/2))))"),
}
"""Each quick bound by key (:attr:`~dpopt.core.families.Capability.bound`): the function and one line
for the docs. A bound reads the target, d, rank and the exact norms only, never a listed vector."""


def quick_bound(name: str, problem: Problem) -> float | None:
    """The row's quick bound for the spec (lower bound on a metric to minimise), or None."""
    key = capability(name).bound
    return None if key is None else QUICK_BOUNDS[key][0](problem)


def _cell(values: tuple[str, ...] | None) -> str:
    return "any" if values is None else ", ".join(values)


def capability_table(rows: tuple[Capability, ...] = FAMILIES) -> str:
    """The table as Markdown (the docs page shows it; ``tests/test_capabilities.py`` compares)."""
    lines = ["| family | definitions | queries | metrics | workload | table goals | invariants | size limit "
             "| quick bound | exact noise | serves |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        limit = "—" if row.max_dimension is None else f"d ≤ {row.max_dimension}"
        if row.integer:
            limit = "integer answers" if limit == "—" else f"{limit}; integer answers"
        if not row.privacy_unit:
            limit = "one row per person" if limit == "—" else f"{limit}; one row per person"
        bound = "—" if row.bound is None else f"`{row.bound}`: {QUICK_BOUNDS[row.bound][1]}"
        workload, tables, invariants = ("yes" if flag else "no" for flag in (row.workload, row.tables, row.invariants))
        lines.append(f"| `{row.name}` | {_cell(row.definitions)} | {_cell(row.queries)} "
                     f"| {_cell(row.metrics)} | {workload} | {tables} | {invariants} | {limit} | {bound} "
                     f"| {row.exact or 'never (floating point, idealized note): ' + (row.inexact or 'no lattice version')} "
                     f"| {row.serves} |")
    return "\n".join(lines)
