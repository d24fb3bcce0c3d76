"""Loading a spec from YAML, JSON or a dict, with one-line error messages."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Mapping

import yaml
from pydantic import ValidationError

from dpopt.errors import SpecError
from dpopt.spec.models import (
    ContingencyTableQuery,
    HistogramQuery,
    LinearInvariant,
    LinearQuery,
    MarginalsQuery,
    MarginsInvariant,
    MeanQuery,
    NumericAttribute,
    Spec,
    SumQuery,
)


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e-5`` as a float.

    PyYAML follows YAML 1.1, whose float pattern needs a dot (``1.0e-5``); a spec
    written ``delta: 1e-5`` would otherwise arrive as the string ``"1e-5"``.
    """


_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def read_document(path: str | Path) -> Any:
    """Parse a YAML or JSON file (JSON is YAML) into Python objects.

    Raises
    ------
    SpecError
        The file is missing or is not valid YAML/JSON.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError("", f"cannot read spec file {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        line = str(exc).replace("\n", " ")
        raise SpecError("", f"{path} is not valid YAML/JSON: {line}") from None


def load_spec(source: str | Path | Mapping[str, Any] | Spec) -> Spec:
    """Load and validate a spec.

    Parameters
    ----------
    source : path, dict or Spec
        A YAML or JSON file, an already parsed mapping, or a :class:`Spec`.

    Returns
    -------
    Spec
        The frozen, validated spec.

    Raises
    ------
    SpecError
        With ``field`` the dotted path of the first problem found.

    Examples
    --------
    >>> spec = load_spec({"dpopt": 1, "name": "count", "data": {"attributes": {"a": ["x", "y"]}},
    ...                   "query": {"kind": "count"}, "adjacency": "add_remove",
    ...                   "privacy": {"pure": {"epsilon": 1}}})
    >>> spec.privacy.definition
    'pure'
    """
    if isinstance(source, Spec):
        return source
    raw = dict(source) if isinstance(source, Mapping) else read_document(source)
    if not isinstance(raw, Mapping):
        raise SpecError("", "a spec must be a mapping of fields (got " + type(raw).__name__ + ")")
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as exc:
        raise _first_problem(exc, raw) from None
    check_references(spec)
    return spec


def _first_problem(exc: ValidationError, raw: Any) -> SpecError:
    """Turn pydantic's first error into a SpecError with a readable field path.

    Pydantic inserts union-member and tag labels into ``loc``; walking the input
    alongside ``loc`` keeps only the keys and indices the user actually wrote.
    """
    errors = exc.errors(include_url=False)
    err = errors[0]
    path: list[str] = []
    node = raw
    for part in err["loc"]:
        if isinstance(node, Mapping) and part in node:
            path.append(str(part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(f"[{part}]")
            node = node[part]
    if err["type"] == "missing" and err["loc"]:
        path.append(str(err["loc"][-1]))
    field = ".".join(path).replace(".[", "[")
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        message = "is required"
    elif err["type"] == "extra_forbidden":
        message = "is not a known field"
    elif "input" in err and not isinstance(err["input"], (Mapping, list)):
        message += f" (got {err['input']!r})"
    more = len(errors) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return SpecError(field, message)


def check_references(spec: Spec) -> None:
    """Check what pydantic cannot: names refer to attributes of the right kind.

    Raises
    ------
    SpecError
        Naming the field that refers to an unknown or unsuitable attribute.
    """
    attributes = spec.data.attributes

    def categorical(name: str, field: str) -> None:
        if name not in attributes:
            raise SpecError(field, f"unknown attribute '{name}' (known: {', '.join(attributes)})")
        if isinstance(attributes[name], NumericAttribute):
            raise SpecError(field, f"attribute '{name}' is numeric; this needs a categorical one")

    def distinct(names: list[str], field: str) -> None:
        if len(set(names)) != len(names):
            raise SpecError(field, "lists an attribute twice")

    query = spec.query
    if isinstance(query, (HistogramQuery, LinearQuery)):
        categorical(query.attribute, "query.attribute")
    if isinstance(query, ContingencyTableQuery):
        distinct(query.attributes, "query.attributes")
        for i, name in enumerate(query.attributes):
            categorical(name, f"query.attributes[{i}]")
    if isinstance(query, MarginalsQuery):
        for i, group in enumerate(query.attributes):
            distinct(group, f"query.attributes[{i}]")
            for j, name in enumerate(group):
                categorical(name, f"query.attributes[{i}][{j}]")
    if isinstance(query, LinearQuery):
        levels = len(attributes[query.attribute])
        if len(query.matrix[0]) != levels:
            raise SpecError(
                "query.matrix",
                f"has {len(query.matrix[0])} columns but attribute '{query.attribute}' "
                f"has {levels} levels",
            )
    if isinstance(query, (SumQuery, MeanQuery)):
        if query.attribute not in attributes:
            raise SpecError("query.attribute", f"unknown attribute '{query.attribute}'")
        if not isinstance(attributes[query.attribute], NumericAttribute):
            raise SpecError(
                "query.attribute",
                f"attribute '{query.attribute}' is categorical; {query.kind} needs a numeric one",
            )
    for i, invariant in enumerate(spec.invariants):
        if isinstance(invariant, MarginsInvariant):
            distinct(invariant.attributes, f"invariants[{i}].attributes")
            for j, name in enumerate(invariant.attributes):
                categorical(name, f"invariants[{i}].attributes[{j}]")
        if isinstance(invariant, LinearInvariant) and invariant.value is not None:
            if len(invariant.value) != len(invariant.matrix):
                raise SpecError(f"invariants[{i}].value", "needs one entry per row of the matrix")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces) used for hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def spec_document(spec: Spec) -> dict[str, Any]:
    """The spec as a plain JSON-ready dict (defaults filled in)."""
    return spec.model_dump(mode="json", exclude_none=True)


def spec_sha256(spec: Spec) -> str:
    """SHA-256 of the canonical JSON of the validated spec."""
    return hashlib.sha256(canonical_json(spec_document(spec)).encode()).hexdigest()
