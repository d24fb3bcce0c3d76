"""Compile a spec once into a :class:`Problem`: what every later stage reads.

Like cvxpy's reduction chain, compilation is a chain of stages, each taking the previous
stage's output and recording what it did:

1. ``load``: the validated :class:`~dpopt.spec.models.Spec` (:func:`dpopt.load_spec`);
2. ``query``: the compiled query φ(X) = A h(X), or a bounded sum / mean
   (:func:`dpopt.domain.queries.compile_query`);
3. ``invariants``: the record domain and the invariant map C of the invariants
   (:func:`dpopt.sensitivity.invariants.invariant_stage`);
4. ``sensitivity``: the sensitivity space under the adjacency, with the semi-adjacent
   parameter a(t) under invariants (:func:`dpopt.sensitivity.derive.derive_space`).

The design, certificate, release and plan stages take the :class:`Problem` (or the typed
piece they need) and never compile the spec again. ``dpopt verify`` compiles the spec its
certificate embeds itself: it never trusts a Problem handed over by the solver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.sensitivity.derive import derive_space
from dpopt.sensitivity.invariants import InvariantDomain, invariant_stage
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.load import load_spec, spec_sha256
from dpopt.spec.models import Spec

SENSITIVITY_FIELDS = ("data", "query", "invariants", "adjacency", "semi_adjacency")
"""The spec fields a :class:`Problem` is compiled from; the target, the mechanism choice and
the utility are read by the later stages (:meth:`Problem.restated`)."""


@dataclass(frozen=True)
class Step:
    """What one compilation stage did.

    Attributes
    ----------
    stage : str
        ``load``, ``query``, ``invariants`` or ``sensitivity``; ``restate`` for
        :meth:`Problem.restated`.
    function : str
        The function that ran (dotted path).
    result : str
        Its output, in words.
    """

    stage: str
    function: str
    result: str

    def to_dict(self) -> dict:
        return {"stage": self.stage, "function": self.function, "result": self.result}


@dataclass(frozen=True)
class Problem:
    """A spec compiled once: the query, the invariant domain and the sensitivity space.

    Attributes
    ----------
    spec : Spec
        The validated spec (its privacy target, mechanism choice and utility, and its
        canonical form for the certificate's provenance and hash).
    query : CountingQuery or NumericQuery
        The compiled query (its labels name the released coordinates).
    domain : InvariantDomain or None
        The record domain and invariant map; None without invariants (and for a sum or
        mean with the total only).
    space : SensitivitySpace
        The sensitivity space; under invariants a
        :class:`~dpopt.sensitivity.semi_space.SemiSensitivitySpace` carrying a(t).
    steps : tuple of Step
        The record of each stage, in order.
    """

    spec: Spec
    query: CountingQuery | NumericQuery
    domain: InvariantDomain | None
    space: SensitivitySpace
    steps: tuple[Step, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        """One label per released coordinate (table cells row-major)."""
        return tuple(self.query.labels)

    @property
    def iid_metric_scale(self) -> float | None:
        """What the ``l2`` / ``max_variance`` metric is per unit of one coordinate's variance under i.i.d. centred
        noise: d (E‖Z‖² = d·E X²), 1 (max_i Var Z_i = E X²), or None (another metric, a workload or weights)."""
        utility = self.spec.utility
        if utility.workload is not None or utility.weights is not None:
            return None
        return {"l2": float(self.space.dimension), "max_variance": 1.0}.get(utility.metric)

    def restated(self, spec: Spec) -> Problem:
        """The same problem under another privacy target, mechanism choice or utility.

        The query, invariant domain and sensitivity space depend on
        :data:`SENSITIVITY_FIELDS` only, so a plan designing one query at several budgets
        compiles it once. The record ends with one ``restate`` step naming the new spec.

        Raises
        ------
        ValueError
            ``spec`` differs from :attr:`spec` in a field the compilation read.
        """
        changed = [f for f in SENSITIVITY_FIELDS if getattr(spec, f) != getattr(self.spec, f)]
        if changed:
            raise ValueError(f"the spec differs in {', '.join(changed)}: compile it instead of restating")
        step = Step("restate", "dpopt.problem.Problem.restated",
                    f"spec {spec.name!r}, SHA-256 {spec_sha256(spec)}: query, invariants and sensitivity reused")
        return replace(self, spec=spec, steps=(*(s for s in self.steps if s.stage != "restate"), step))

    def record(self) -> list[dict]:
        """The compilation record (JSON-ready), one entry per stage."""
        return [step.to_dict() for step in self.steps]


def compile(spec: Spec | str | Path | Mapping[str, Any]) -> Problem:
    """Compile a spec into a :class:`Problem`: its query, invariant domain and sensitivity space.

    Parameters
    ----------
    spec : Spec, path or dict
        Anything :func:`dpopt.load_spec` accepts.

    Returns
    -------
    Problem

    Raises
    ------
    SpecError, UnsupportedSpecError
        Malformed or unsupported spec (a mean without ``data.n``, invariants under an
        adjacency other than replace-one, a query the invariants determine ...).

    Examples
    --------
    >>> import dpopt
    >>> problem = dpopt.compile({"dpopt": 1, "name": "t", "data": {"attributes": {"a": ["x", "y"]}, "n": 5},
    ...                          "query": {"kind": "histogram", "attribute": "a"},
    ...                          "invariants": [{"kind": "total"}], "adjacency": "replace_one",
    ...                          "privacy": {"gdp": {"mu": 1.0}}})
    >>> [s.stage for s in problem.steps], problem.space.semi_adjacent_parameter, float(problem.space.l2_squared)
    (['load', 'query', 'invariants', 'sensitivity'], 1, 2.0)
    """
    spec = load_spec(spec)
    steps = [Step("load", "dpopt.spec.load.load_spec", f"spec {spec.name!r}, SHA-256 {spec_sha256(spec)}")]
    query = compile_query(spec)
    steps.append(Step("query", "dpopt.domain.queries.compile_query", _describe_query(query)))
    domain = invariant_stage(spec, query)
    steps.append(Step("invariants", "dpopt.sensitivity.invariants.invariant_stage", _describe_domain(spec, domain)))
    space = derive_space(spec, query, domain)
    a = space.semi_adjacent_parameter
    steps.append(Step(
        "sensitivity", "dpopt.sensitivity.derive.derive_space",
        f"{space.method}; dimension {space.dimension}, rank {space.rank}, l1 {space.l1}, l2² {space.l2_squared}, "
        f"linf {space.linf}" + ("" if a is None else f"; semi-adjacent parameter a = {a}"),
    ))
    return Problem(spec, query, domain, space, tuple(steps))



class OnProblem:
    """A mixin for results that hold a compiled ``problem``: its ``spec`` and ``space`` as properties."""

    problem: Problem

    @property
    def spec(self) -> Spec:
        return self.problem.spec

    @property
    def space(self) -> SensitivitySpace:
        return self.problem.space


def _describe_query(query: CountingQuery | NumericQuery) -> str:
    if isinstance(query, NumericQuery):
        pair = f" as (Σ(x − {query.midpoint}), count)" if query.pair else ""
        return f"bounded {query.kind} of {query.attribute} over [{query.lower}, {query.upper}]{pair}"
    return f"{query.kind}: A is {query.dimension} x {query.cells} over the cells of {', '.join(query.attributes) or '(none)'}"


def _describe_domain(spec: Spec, domain: InvariantDomain | None) -> str:
    if not spec.invariants:
        return "no invariants"
    if domain is None:
        return "total only (fixed by replace-one): no record domain needed"
    return (f"record domain {' x '.join(map(str, domain.shape))} over {', '.join(domain.attributes)}; "
            f"{len(domain.margin_groups)} margin group(s), {len(domain.linear)} linear invariant(s)")
