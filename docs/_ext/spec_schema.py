"""The spec reference, generated from the pydantic models at build time.

``.. spec-schema:: dpopt.spec.models.Spec`` (in MyST: a ```` ```{spec-schema} ```` block) walks the model
and every model it contains, and writes one section per mapping of the spec (``data``,
``data.privacy_unit``, ``query`` with one section per ``kind`` ...): a table of its keys with their
type, whether they are required or their default, the values allowed, and a description; then an
example, the first example spec in ``specs/`` that uses that section, quoted from the file. A key added
to a model appears here without editing a page (``tests/test_docs.py`` checks it).

Descriptions come from the field's ``description`` when it has one, else from :data:`KEY_NOTES`, else
from the docstring of the model the key holds.
"""

from __future__ import annotations

import importlib
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from docutils import nodes
from docutils.parsers.rst import directives
from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from sphinx.util.docutils import SphinxDirective

SPECS = Path(__file__).resolve().parents[2] / "specs"

KEY_NOTES = {
    "dpopt": "the spec format's version",
    "name": "a title, shown in the certificate and the report",
    "description": "free text, kept in the certificate",
    "data.attributes": "each attribute: a list of its levels (categorical) or {min, max} (bounded numeric)",
    "data.n": "the number of records when it is public (fixed under replace-one)",
    "privacy_unit.id": "the column identifying a person (not a declared attribute)",
    "privacy_unit.max_rows": "k: at most this many rows per person",
    "privacy_unit.max_groups": "g: at most this many cells of the query's histogram per person",
    "privacy_unit.max_rows_per_group": "c: at most this many rows of a person in any one cell",
    "attribute": "the attribute the query reads",
    "attributes": "the attributes, in order (cells are row-major, the first attribute varying slowest)",
    "marginals.attributes": "the marginal tables, each a list of attributes (give this or all_of_size)",
    "marginals.all_of_size": "every marginal table over this many attributes",
    "marginals.over": "the attributes all_of_size chooses from (default: every categorical attribute)",
    "matrix": "rows of a matrix over the cells of the histogram (row-major)",
    "linear.labels": "a name for each row of the matrix (unique, non-blank), used in every output; default: a row "
                     "of ones on consecutive levels is `attr=first..last`, another row `row i`",
    "value": "the published values t of C·φ(X) = t (optional: else taken from the data)",
    "kind": "which variant this mapping is",
    "reading": "the reading of Definition 13 (Cho & Awan) for a(t)",
    "distance": "k: neighbouring datasets differ in at most k records",
    "epsilon": "ε",
    "delta": "δ",
    "mu": "μ of μ-GDP",
    "rho": "ρ of ρ-zCDP",
    "metric": "the utility metric the design optimises",
    "gamma": "the half-width γ of usefulness P(|noise| ≤ γ)",
    "alpha": "the level of the confidence region or test (default 0.05)",
    "alternative": "the shift η of the alternative H1: φ = θ₀ + η (test_power)",
    "workload": "a matrix W: the error is E‖W·noise‖₂² (l2)",
    "weights": "per-cell weights w: the error is Σ w_i E[noise_i²] (l2); for geography, one weight per level",
    "prior": "the prior histogram (kl, renyi) or the prior values (mallows)",
    "floor": "released counts are clipped at this floor (kl, renyi)",
    "order": "the order of the Rényi divergence or of the Mallows distance",
    "Output.decimals": "round every published number to this many decimal places (post-processing, stated in the "
                       "certificate's output block; margins and interval ends rounded outward)",
    "nonnegative": "publish non-negative counts",
    "integer": "publish whole numbers (controlled rounding)",
    "consistent": "tables agree with each other and with the invariants",
    "levels": "the geography columns, from the top (the nation is implicit)",
    "shares": "the budget split over levels: equal, optimal, or one share per level",
    "exact_totals": "publish the total of every unit exactly",
    "invariants": "statistics published exactly (Semi-DP)",
    "mechanism": "auto, one family, or a list of families to compare",
    "sampler": "exact (default: measure on a lattice with exactly sampled noise where the family can) or floating_point",
    "queries": "the plan's queries, under one privacy target",
    "PlanQuery.name": "the query's name in the plan's outputs",
    "PlanQuery.weight": "the weight of this query's error in the plan's objective",
    "PlanQuery.share": "a fixed share of the budget for this query",
    "Utility.tables": "per table of a marginal query: a weight in the objective and/or an error target",
    "Utility.objective": "total (the weighted sum of the tables' errors, default) or max (the largest weighted one)",
    "TableGoal.attributes": "the table: one group of the query's attributes, in any order",
    "TableGoal.weight": "the weight of this table's expected squared error in the objective (default 1)",
    "TableGoal.target": "an upper bound on this table's expected squared error, summed over its cells",
}


@dataclass(frozen=True)
class Key:
    """One row of a section: a key and what the model says of it."""

    name: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass(frozen=True)
class Section:
    """One mapping of the spec: its path (``data.privacy_unit``, ``query (kind: count)``) and keys."""

    path: str
    model: type[BaseModel]
    keys: tuple[Key, ...]
    example: str


def _constraint(meta: Any) -> str:
    """A constraint of ``annotated_types`` as text (``> 0``, ``at least 1 item``), else ''."""
    for kind, attribute, sign in ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", "≥"),
                                  (annotated_types.Lt, "lt", "<"), (annotated_types.Le, "le", "≤")):
        if isinstance(meta, kind):
            return f"{sign} {getattr(meta, attribute)}"
    if isinstance(meta, annotated_types.MinLen):
        return f"at least {meta.min_length} item{'s' * (meta.min_length != 1)}"
    if isinstance(meta, annotated_types.MaxLen):
        return f"at most {meta.max_length} items"
    return ""


def _members(annotation: Any) -> list[Any]:
    """The members of a union (``X | None`` included), else the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return list(typing.get_args(annotation))
    return [annotation]


def _family_names() -> tuple[str, ...]:
    from dpopt.core.families import family_names

    return family_names()


def _allowed(annotation: Any) -> list[str]:
    """The fixed values an annotation allows (Literal values, mechanism family names)."""
    values: list[str] = []
    for member in _members(annotation):
        origin = typing.get_origin(member)
        if origin is typing.Literal:
            values += [str(v) for v in typing.get_args(member)]
        elif origin is typing.Annotated:
            base, *meta = typing.get_args(member)
            if any(isinstance(m, AfterValidator) and m.func.__name__ == "_family" for m in meta):
                values += list(_family_names())
            else:
                values += _allowed(base)
        elif origin is list:
            values += _allowed(typing.get_args(member)[0])
        elif isinstance(member, type) and issubclass(member, BaseModel) and _kind(member):
            values.append(f"kind: {_kind(member)}")
    return list(dict.fromkeys(values))


def type_text(annotation: Any) -> str:
    """A reader's name for an annotation: ``number > 0``, ``list of text (at least 1 item)``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        constraints = [c for m in meta for c in ([_constraint(m)] + [
            _constraint(x) for x in getattr(m, "metadata", [])]) if c]
        text = type_text(base)
        return f"{text}, {', '.join(constraints)}" if constraints else text
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(annotation) if m is not type(None)]
        if len(members) > 1 and all(isinstance(m, type) and issubclass(m, BaseModel) and _kind(m) for m in members):
            return "mapping with a kind (one section per kind below)"
        return " or ".join(dict.fromkeys(type_text(m) for m in members))
    if origin is typing.Literal:
        return " or ".join(dict.fromkeys(type_text(type(v)) for v in typing.get_args(annotation)))
    if origin is list:
        inner = typing.get_args(annotation)[0]
        text = type_text(inner)
        constrained = typing.get_origin(inner) is typing.Annotated and "," in text
        return f"list of ({text})" if constrained else f"list of {text}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"mapping from {type_text(key)} to {type_text(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"mapping ({annotation.__name__})"
    names = {str: "text", float: "number", int: "integer", bool: "true or false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default is PydanticUndefined:
        return "(computed)"
    value = info.default
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_defaults=True)
    return "none" if value is None else repr(value) if not isinstance(value, str) else value


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every model an annotation holds (through unions, lists, mappings, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return list(dict.fromkeys(found))


def _description(model: type[BaseModel], name: str, info: FieldInfo, path: str) -> str:
    if info.description:
        return info.description
    leaf = path.rsplit(".", 1)[-1].split(" ")[0]
    for key in (f"{model.__name__}.{name}", f"{_kind(model)}.{name}", f"{path}.{name}", f"{leaf}.{name}", name):
        if key in KEY_NOTES:
            return KEY_NOTES[key]
    held = _models_in(info.annotation)
    return first_paragraph(held[0].__doc__) if len(held) == 1 else ""


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def inline(text: str) -> list[nodes.Node]:
    """Docstring text as nodes: ````x```` and ``:role:`x``` become literals, the rest plain text."""
    out: list[nodes.Node] = []
    for k, part in enumerate(re.split(r"``(.+?)``|(?::[a-z]+:)`~?(.+?)`", text)):
        if part:
            out.append(nodes.literal(text=part) if k % 3 else nodes.Text(part))
    return out


def _kind(model: type[BaseModel]) -> str | None:
    """The literal ``kind`` of a variant model (``count`` for CountQuery), else None."""
    field = model.model_fields.get("kind")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return None
    return str(typing.get_args(field.annotation)[0])


def _spec_documents() -> list[tuple[str, dict]]:
    from dpopt.spec.yaml12 import parse_yaml

    return [(f"specs/{p.name}", parse_yaml(p.read_text(encoding="utf-8"))) for p in sorted(SPECS.glob("*.yaml"))]


def _find(document: Any, steps: list[str], kind: str | None) -> Any:
    """The part of a spec document at a path of keys (``[]`` steps into each item of a list)."""
    if not steps:
        if kind is None or (isinstance(document, dict) and document.get("kind") == kind):
            return document
        return None
    step, rest = steps[0], steps[1:]
    if step == "[]":
        for item in document if isinstance(document, list) else []:
            found = _find(item, rest, kind)
            if found is not None:
                return found
        return None
    if isinstance(document, dict) and step in document:
        return _find(document[step], rest, kind)
    return None


def _example(steps: list[str], kind: str | None, documents: list[tuple[str, dict]]) -> str:
    """The shortest YAML of an example spec for a section, with the file it comes from."""
    import yaml

    key = next((s for s in reversed(steps) if s != "[]"), "")
    found = [(name, _find(document, steps, kind)) for name, document in documents]
    texts = [f"# from {name}\n" + yaml.safe_dump({key: part}, sort_keys=False, allow_unicode=True,
                                                 default_flow_style=None, width=100)
             for name, part in found if part is not None]
    return min(texts, key=len, default="")


def sections(root: type[BaseModel]) -> list[Section]:
    """Every mapping reachable from ``root``, breadth first, with its keys and an example."""
    documents = _spec_documents()
    out: list[Section] = []
    queue: list[tuple[str, list[str], type[BaseModel]]] = [("(top level)", [], root)]
    seen: set[tuple[str, type]] = set()
    while queue:
        path, steps, model = queue.pop(0)
        if (path, model) in seen:
            continue
        seen.add((path, model))
        keys = []
        for name, info in model.model_fields.items():
            annotation = info.annotation
            allowed = _allowed(annotation)
            constraints = [c.replace("item", "character") if annotation is str else c
                           for c in map(_constraint, info.metadata) if c]  # pydantic moves them off the type
            text = ", ".join([type_text(annotation), *constraints])
            keys.append(Key(name, text, _default(info), ", ".join(allowed),
                            _description(model, name, info, path)))
            listed = typing.get_origin(annotation) is list or any(
                typing.get_origin(m) is list for m in _members(annotation))
            child_steps = steps + [name] + (["[]"] if listed else [])
            base = name if path == "(top level)" else f"{path.split(' ')[0]}.{name}"
            for child in _models_in(annotation):
                kind = _kind(child)
                queue.append((f"{base} (kind: {kind})" if kind else base, child_steps, child))
        kind = _kind(model)
        example = _example(steps, kind, documents) if steps else ""
        out.append(Section(path, model, tuple(keys), example))
    return out


def table(headers: list[str], rows: list[list[nodes.Node | list[nodes.Node]]]) -> nodes.table:
    """A docutils table: a header row, then one row per list of cells (a node or a list of nodes each)."""
    table = nodes.table(classes=["spec-keys"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in headers]
    head = nodes.thead()
    group += head
    head += nodes.row("", *[nodes.entry("", nodes.paragraph(text=h)) for h in headers])
    body = nodes.tbody()
    group += body
    for cells in rows:
        body += nodes.row("", *[nodes.entry("", nodes.paragraph("", "", *(cell if isinstance(cell, list) else [cell])))
                                for cell in cells])
    return table


class SpecSchemaDirective(SphinxDirective):
    """``spec-schema MODEL``: the generated reference of a spec model (dotted import path)."""

    required_arguments = 1
    has_content = False
    option_spec = {"sections": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        """One section per mapping; with ``:sections: a, b`` only those paths (``(top level)`` the root)."""
        wanted = {p.strip() for p in self.options.get("sections", "").split(",") if p.strip()}
        module_name, _, class_name = self.arguments[0].rpartition(".")
        root = getattr(importlib.import_module(module_name), class_name)
        self.env.note_dependency(importlib.import_module(module_name).__file__)
        out: list[nodes.Node] = []
        for section in sections(root):
            if wanted and section.path not in wanted:
                continue
            ident = nodes.make_id(f"{root.__name__}-{section.path}")
            node = nodes.section(ids=[ident])
            node += nodes.title(text=f"{section.path}" if section.path != "(top level)"
                                else f"{root.__name__}: top-level keys")
            doc = " ".join((section.model.__doc__ or "").split())
            if doc:
                node += nodes.paragraph("", "", *inline(doc))
            rows = [[nodes.literal(text=k.name), nodes.Text(k.type), nodes.Text(k.default),
                     nodes.Text(k.allowed), inline(k.description)] for k in section.keys]
            node += table(["key", "type", "required / default", "allowed values", "description"], rows)
            if section.example:
                node += nodes.literal_block(section.example, section.example, language="yaml")
            out.append(node)
        return out


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("spec-schema", SpecSchemaDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
