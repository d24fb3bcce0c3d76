"""Loading a plan, and the single-query spec each of its queries is designed as."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from dpopt.domain.queries import CountingQuery, compile_query
from dpopt.errors import SpecError
from dpopt.spec.load import _first_problem, canonical_json, check_references, mean_pair_utility, read_document
from dpopt.spec.models import Data, NumericAttribute, Plan, PrivacyUnit, Spec

SPEC_KEYS = ("dpopt", "name", "description", "data", "invariants", "semi_adjacency", "adjacency", "privacy",
             "mechanism", "utility")
"""Keys a single-query spec shares with a plan."""

KIND = "plan"
"""``certificate["kind"]`` of a plan certificate."""


def is_plan_document(document: Any) -> bool:
    """True for a plan (a mapping with a ``queries`` list)."""
    return isinstance(document, Mapping) and "queries" in document


def is_plan_certificate(data: Any) -> bool:
    """True for the JSON of a plan certificate."""
    return isinstance(data, dict) and data.get("kind") == KIND


def load_plan(source: str | Path | Mapping[str, Any] | Plan | Spec) -> Plan:
    """Load and validate a plan; a single-query spec is read as a plan of one.

    Raises
    ------
    SpecError
        Naming the first bad field (``queries[1].query.attribute`` ...).

    Examples
    --------
    >>> plan = load_plan({"dpopt": 1, "name": "p", "data": {"attributes": {"a": ["x", "y"]}},
    ...                   "queries": [{"query": {"kind": "count"}},
    ...                               {"name": "by a", "query": {"kind": "histogram", "attribute": "a"}}],
    ...                   "adjacency": "add_remove", "privacy": {"zcdp": {"rho": 0.5}}})
    >>> [q.name for q in plan.queries]
    ['q1', 'by a']
    """
    if isinstance(source, Plan):
        return source
    if isinstance(source, Spec):
        source = source.model_dump(mode="json", exclude_none=True)
    raw = dict(source) if isinstance(source, Mapping) else read_document(source)
    if not isinstance(raw, Mapping):
        raise SpecError("", "a plan must be a mapping of fields (got " + type(raw).__name__ + ")")
    if not is_plan_document(raw):
        if "query" not in raw:
            raise SpecError("queries", "is required (or a single query)")
        raw = {**{k: raw[k] for k in SPEC_KEYS if k in raw}, "queries": [{"name": "query", "query": raw["query"]}],
               **{k: v for k, v in raw.items() if k not in SPEC_KEYS and k != "query"}}
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as exc:
        raise _first_problem(exc, raw) from None
    for i in range(len(plan.queries)):
        query_spec(plan, i, plan.privacy.model_dump(exclude_none=True))
    return plan


def query_spec(plan: Plan, index: int, privacy: Mapping[str, Any]) -> Spec:
    """The single-query spec of ``plan.queries[index]`` under the per-query target ``privacy``.

    The plan's domain, invariants and adjacency; the query's own utility and mechanism when
    it gives them, else the plan's.

    Raises
    ------
    SpecError
        With the field path inside the plan (``queries[i].…``).
    """
    q = plan.queries[index]
    document = {
        "dpopt": 1,
        "name": f"{plan.name} / {q.name}",
        "data": plan.data.model_dump(mode="json", exclude_none=True),
        "query": q.query.model_dump(mode="json"),
        "invariants": [inv.model_dump(mode="json", exclude_none=True) for inv in plan.invariants],
        "adjacency": plan.adjacency.model_dump(mode="json"),
        "privacy": dict(privacy),
        "mechanism": q.mechanism if q.mechanism is not None else plan.mechanism,
        "utility": (q.utility or plan.utility).model_dump(mode="json", exclude_none=True),
    }
    if plan.semi_adjacency is not None:
        document["semi_adjacency"] = plan.semi_adjacency.model_dump(mode="json")
    if plan.sampler is not None:
        document["sampler"] = plan.sampler
    if plan.intervals is not None:
        document["intervals"] = plan.intervals.model_dump(mode="json")
    if plan.output is not None:
        document["output"] = plan.output.model_dump(mode="json")
    try:
        spec = Spec.model_validate(document)
        check_references(spec)
        if plan.data.privacy_unit is not None:
            query = compile_query(spec)
            unit = plan_unit(plan.data, query.attributes if isinstance(query, CountingQuery) else ())
            spec = spec.model_copy(update={"data": spec.data.model_copy(update={"privacy_unit": unit})})
        spec = mean_pair_utility(spec)
    except ValidationError as exc:
        raise _prefixed(_first_problem(exc, document), index) from None
    except SpecError as exc:
        raise _prefixed(exc, index) from None
    return spec


def plan_cells(data: Data) -> list[str]:
    """The attributes of the cell a plan's privacy unit bounds by: every categorical attribute it declares."""
    return [name for name, domain in data.attributes.items() if not isinstance(domain, NumericAttribute)]


def plan_unit(data: Data, attributes: Sequence[str]) -> PrivacyUnit:
    """The bounds a plan query over these categorical ``attributes`` sees once each person's rows are cut, for
    the whole plan, to ``data.privacy_unit`` over the cells of :func:`plan_cells`.

    A person keeps R = min(k, c·min(g, M)) rows (M cells), ≤ g cells, ≤ c in a cell; a query cell gathers the
    F = M / m cells that agree on its attributes, so it holds ≤ min(R, c·min(g, F)) of them, and the person
    is in ≤ g query cells. The greedy filling under these bounds needs ⌈R/c⌉ ≤ g of the M cells, so it is a
    person the plan's bounding keeps: the norms of :mod:`dpopt.sensitivity.person` under this unit are exact.
    """
    unit = data.privacy_unit
    cells = math.prod(len(data.attributes[a]) for a in plan_cells(data))
    fiber = cells // math.prod(len(data.attributes[a]) for a in attributes)
    rows = min(n for n in (unit.max_rows, None if unit.max_rows_per_group is None
                           else unit.max_rows_per_group * min(unit.max_groups or cells, cells)) if n is not None)
    per_cell = None if unit.max_rows_per_group is None else \
        min(rows, unit.max_rows_per_group * min(unit.max_groups or fiber, fiber))
    return PrivacyUnit(id=unit.id, max_rows=rows, max_groups=unit.max_groups, max_rows_per_group=per_cell)


def _prefixed(exc: SpecError, index: int) -> SpecError:
    field = exc.field if exc.field.startswith(("query", "utility", "mechanism")) else ""
    where = f"queries[{index}]" + (f".{field}" if field else "")
    return type(exc)(where, exc.problem)


def plan_document(plan: Plan) -> dict[str, Any]:
    """The plan as a plain JSON-ready dict (defaults filled in)."""
    return plan.model_dump(mode="json", exclude_none=True)


def plan_sha256(plan: Plan) -> str:
    """SHA-256 of the canonical JSON of the validated plan."""
    return hashlib.sha256(canonical_json(plan_document(plan)).encode()).hexdigest()
