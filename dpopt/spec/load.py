"""Loading a spec from YAML, JSON or a dict, with one-line error messages."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import types
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Mapping, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from dpopt.core.documents import decode, parse_json
from dpopt.core.memory import format_bytes
from dpopt.errors import DocumentError, SpecError
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
from dpopt.spec.yaml12 import parse_yaml

ModelT = TypeVar("ModelT", bound=BaseModel)


MAX_SPEC_BYTES = 8 * 1024**2
"""The largest spec file read (8 MiB, about 1.6 million numbers of a matrix): YAML is parsed at about
0.7 MB per second of CPU, and a query whose matrix fills more is refused later by the size guards
anyway (:mod:`dpopt.core.memory`)."""

_last_read: dict[tuple, Any] = {}


def read_document(path: str | Path, max_bytes: int | None = MAX_SPEC_BYTES) -> Any:
    """Parse a YAML or JSON file strictly into Python objects.

    A ``.json`` file is read as JSON, anything else as YAML by the 1.2 core schema
    (:mod:`dpopt.spec.yaml12`); both refuse bytes that are not UTF-8, a key given twice and
    nesting deeper than :data:`~dpopt.core.documents.MAX_DEPTH` (:mod:`dpopt.core.documents`).
    The last document read is kept (keyed by the file's device, inode, size and modification
    time) and a copy of it returned when the same unchanged file is read again: a command
    looks at a spec several times (is it a plan? a hierarchy?) before loading it.

    Parameters
    ----------
    path : str or Path
        The file.
    max_bytes : int or None
        Refuse a larger file before parsing it (default :data:`MAX_SPEC_BYTES`); None for a
        certificate, which may hold large designs.

    Raises
    ------
    SpecError
        The file is missing, larger than ``max_bytes``, or is not a well-formed YAML/JSON
        document (one line naming the file, the problem and its place).
    """
    path = Path(path)
    try:
        stat = path.stat()
        key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if max_bytes is not None and stat.st_size > max_bytes:
            raise SpecError("", f"{path} is {format_bytes(stat.st_size)}, above the {format_bytes(max_bytes)} a spec "
                                "file may take: a query or workload matrix that large is beyond what dpopt derives")
        if key in _last_read:
            return _copy(_last_read[key])
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError("", f"cannot read spec file {path}: {exc.strerror or exc}") from None
    try:
        text = decode(data)
        document = parse_json(text) if path.suffix.lower() == ".json" else parse_yaml(text)
    except DocumentError as exc:
        raise SpecError("", f"{path} {exc}") from None
    _last_read.clear()
    _last_read[key] = _copy(document)
    return document


def is_selection_document(document: Any) -> bool:
    """True for a spec (not a certificate) with a ``releases`` list (private keys, quantiles:
    :mod:`dpopt.spec.selection`, whose models are imported only for such a spec)."""
    return isinstance(document, Mapping) and "releases" in document and "spec_sha256" not in document


def _copy(document: Any) -> Any:
    """A copy of a parsed document (mappings, lists and scalars; a matrix's rows of numbers copied at C speed)."""
    if isinstance(document, dict):
        return {key: _copy(value) for key, value in document.items()}
    if isinstance(document, list):
        return [_copy(v) for v in document] if any(isinstance(v, (dict, list)) for v in document) else list(document)
    return document


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
        With ``field`` the dotted path of the first problem found: an unknown key at any
        depth first (with the closest valid key), then a value outside a fixed list (with
        the closest valid value and the list), then pydantic's first error.

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
    if "queries" in raw:
        raise SpecError("queries", "this is a release plan (a list of queries): solve it with `dpopt solve` or "
                                   "dpopt.plan.solve_plan, not as a single-query spec")
    if "releases" in raw:
        raise SpecError("releases", "this spec lists releases (private keys, quantiles): solve it with `dpopt solve` "
                                    "or dpopt.selection.certify, not as a single-query spec")
    if "synthesize" in raw:
        raise SpecError("synthesize", "this spec asks for synthetic records: run `dpopt synthesize SPEC --data FILE "
                                      "--out DIR` or dpopt.synthesize, not a single-query release")
    spec = validated(raw, Spec)
    check_references(spec)
    return mean_pair_utility(spec)


def mean_pair_utility(spec: Spec) -> Spec:
    """The spec with a person-level mean's plain ``l2`` utility weighted [1, h²] (h = half the attribute's width).

    A mean with a ``privacy_unit`` is released as (Σ(x − m), n) (:class:`dpopt.domain.queries.NumericQuery`);
    to first order its error is (e_S − (μ − m) e_n)/n, whose variance is at most (σ_S² + h²σ_n²)/n² over
    every position of μ in [a, b]: that weighted error, not the plain l2 of two numbers in different units,
    is what the design then minimises (:mod:`dpopt.sensitivity.person`). A utility with weights, a workload
    or another metric is kept as given.
    """
    query, utility = spec.query, spec.utility
    if (spec.data.privacy_unit is None or not isinstance(query, MeanQuery) or utility.metric != "l2"
            or utility.weights is not None or utility.workload is not None):
        return spec
    bounds = spec.data.attributes[query.attribute]
    half = (bounds.max - bounds.min) / 2
    return spec.model_copy(update={"utility": utility.model_copy(update={"weights": [1.0, half * half]})})


def validated(raw: Mapping[str, Any], model: type[ModelT]) -> ModelT:
    """``raw`` validated as ``model`` (a spec document's model).

    Raises
    ------
    SpecError
        The first unknown key (:func:`unknown_keys`), else pydantic's first problem (:func:`_first_problem`).
    """
    unknown_keys(raw, model)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise _first_problem(exc, raw) from None


def load_composite(source: str | Path | Mapping[str, Any] | ModelT, model: type[ModelT],
                   check: Callable[[ModelT], None]) -> ModelT:
    """Load a composite spec (private keys and quantiles, synthesis): read, validate as ``model``, then ``check``
    its cross-references; an instance of ``model`` is returned as it is.

    Raises
    ------
    SpecError
        A document that is not a mapping, the first problem :func:`validated` finds, or ``check``'s.
    """
    if isinstance(source, model):
        return source
    raw = dict(source) if isinstance(source, Mapping) else read_document(source)
    if not isinstance(raw, Mapping):
        raise SpecError("", "a spec must be a mapping of fields (got " + type(raw).__name__ + ")")
    spec = validated(raw, model)
    check(spec)
    return spec


# ------------------------------------------------------------------ typos
def _did_you_mean(word: str, valid: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid word (difflib ratio ≥ 0.6), else ''."""
    close = difflib.get_close_matches(word, valid, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _members(annotation: Any) -> list[Any]:
    """The alternatives of a type: Annotated and Optional/Union unwrapped, flattened."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _model_for(models: list[type[BaseModel]], raw: Mapping) -> type[BaseModel] | None:
    """The model a mapping is meant for: the only one, or the member whose ``kind`` tag it gives."""
    if len(models) == 1:
        return models[0]
    for model in models:
        kind = model.model_fields.get("kind")
        if kind is not None and raw.get("kind") in get_args(kind.annotation):
            return model
    return None


def _join(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)


def unknown_keys(raw: Any, annotation: Any, path: str = "") -> None:
    """Check every mapping of ``raw`` against the model its position calls for, at any depth.

    Raises
    ------
    SpecError
        At the first key no model field has, with the closest valid key
        (``unknown key 'privcy' (did you mean 'privacy'?)``) or the list of valid keys.
    """
    members = _members(annotation)
    if isinstance(raw, Mapping):
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if models:
            model = _model_for(models, raw)
            # no model chosen (a tagged union without a valid tag): the keys of any member are known
            fields = model.model_fields if model is not None else {
                name: None for m in models for name in m.model_fields
            }
            for key in raw:
                if key not in fields:
                    hint = _did_you_mean(str(key), list(fields)) or f" (valid keys: {', '.join(fields)})"
                    raise SpecError(path, f"unknown key '{key}'{hint}")
            if model is not None:
                for key, value in raw.items():
                    unknown_keys(value, fields[key].annotation, _join(path, key))
            return
        mappings = [m for m in members if get_origin(m) is dict]
        if mappings:
            for key, value in raw.items():
                unknown_keys(value, get_args(mappings[0])[1], _join(path, key))
    elif isinstance(raw, list):
        lists = [m for m in members if get_origin(m) is list]
        if lists:
            for i, value in enumerate(raw):
                if isinstance(value, (Mapping, list)):  # a number or a name has no keys (long matrices: fast)
                    unknown_keys(value, get_args(lists[0])[0], _join(path, i))


def _user_path(raw: Any, loc: tuple) -> list[str]:
    """The keys and indices of ``loc`` the user wrote (pydantic adds union and tag labels)."""
    path: list[str] = []
    node = raw
    for part in loc:
        if isinstance(node, Mapping) and part in node:
            path.append(str(part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(f"[{part}]")
            node = node[part]
    return path


def _options(expected: str) -> list[str]:
    """The quoted alternatives of pydantic's ``expected`` context (``"'a', 'b' or 'c'"``)."""
    return re.findall(r"'([^']*)'", expected)


def _bad_choice(errors: list[dict], raw: Any) -> SpecError | None:
    """A value outside a fixed list (a literal, or a tagged union's ``kind``), with the closest
    valid value and every valid one; the alternatives of a union (``auto`` or a family) are merged."""
    for err in errors:
        if err["type"] == "union_tag_invalid":
            field = ".".join(_user_path(raw, err["loc"]) + ["kind"]).replace(".[", "[")
            tag, valid = str(err["ctx"]["tag"]), _options(err["ctx"]["expected_tags"])
            return SpecError(field, f"unknown kind '{tag}'{_did_you_mean(tag, valid)}; valid: {', '.join(valid)}")
        if err["type"] == "literal_error" and isinstance(err.get("input"), str):
            path = _user_path(raw, err["loc"])
            valid = list(dict.fromkeys(
                option
                for other in errors
                if other["type"] == "literal_error" and other.get("input") == err["input"]
                and _user_path(raw, other["loc"]) == path
                for option in _options(other["ctx"]["expected"])
            ))
            value = err["input"]
            field = ".".join(path).replace(".[", "[")
            return SpecError(field, f"unknown value '{value}'{_did_you_mean(value, valid)}; valid: {', '.join(valid)}")
    return None


_BOUND_WORDS = {"greater_than": ("gt", "greater than"), "greater_than_equal": ("ge", "at least"),
                "less_than": ("lt", "less than"), "less_than_equal": ("le", "at most")}
"""Pydantic's bound errors, reworded with the bound in short form (``at most 1e+100``, not its 101 digits)."""


def _first_problem(exc: ValidationError, raw: Any) -> SpecError:
    """Turn pydantic's errors into one SpecError with a readable field path.

    A value outside a fixed list is reported first (:func:`_bad_choice`), else the first
    error. Pydantic inserts union-member and tag labels into ``loc``; walking the input
    alongside ``loc`` keeps only the keys and indices the user actually wrote.
    """
    errors = exc.errors(include_url=False)
    choice = _bad_choice(errors, raw)
    if choice is not None:
        return choice
    err = errors[0]
    path = _user_path(raw, err["loc"])
    if err["type"] == "missing" and err["loc"]:
        path.append(str(err["loc"][-1]))
    field = ".".join(path).replace(".[", "[")
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        message = "is required"
    elif err["type"] == "extra_forbidden":
        message = "is not a known field"
    elif err["type"] in _BOUND_WORDS and isinstance(err.get("ctx", {}).get(_BOUND_WORDS[err["type"]][0]), float):
        key, word = _BOUND_WORDS[err["type"]]
        message = f"Input should be {word} {err['ctx'][key]:g}"
    if err["type"] not in ("missing", "extra_forbidden") and "input" in err \
            and not isinstance(err["input"], (Mapping, list)):
        given = repr(err["input"])
        message += f" (got {given})" if len(given) <= 60 else f" (got {given[:24]}..., {len(given)} characters)"
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
    if isinstance(query, MarginalsQuery) and query.attributes is not None:
        for i, group in enumerate(query.attributes):
            distinct(group, f"query.attributes[{i}]")
            for j, name in enumerate(group):
                categorical(name, f"query.attributes[{i}][{j}]")
    if isinstance(query, MarginalsQuery) and query.all_of_size is not None:
        if query.over is not None:
            distinct(query.over, "query.over")
            for j, name in enumerate(query.over):
                categorical(name, f"query.over[{j}]")
        among = len(query.over) if query.over is not None else sum(
            not isinstance(levels, NumericAttribute) for levels in attributes.values())
        if query.all_of_size > among:
            raise SpecError("query.all_of_size",
                            f"is {query.all_of_size}, but there are only {among} categorical attribute(s) to choose from")
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
    _check_privacy_unit(spec)
    for i, invariant in enumerate(spec.invariants):
        if isinstance(invariant, MarginsInvariant):
            distinct(invariant.attributes, f"invariants[{i}].attributes")
            for j, name in enumerate(invariant.attributes):
                categorical(name, f"invariants[{i}].attributes[{j}]")
        if isinstance(invariant, LinearInvariant) and invariant.value is not None:
            if len(invariant.value) != len(invariant.matrix):
                raise SpecError(f"invariants[{i}].value", "needs one entry per row of the matrix")


def _check_privacy_unit(spec: Spec) -> None:
    """``data.privacy_unit``: its id is not a declared attribute; the spec is one the person-level
    derivation (:mod:`dpopt.sensitivity.person`) serves."""
    unit = spec.data.privacy_unit
    if unit is None:
        return
    if unit.id in spec.data.attributes:
        raise SpecError("data.privacy_unit.id", f"'{unit.id}' is a declared attribute; the id column must not be one")
    if spec.adjacency.kind == "hamming":
        raise SpecError("adjacency", "a privacy_unit protects one person: use add_remove or replace_one")
    if spec.data.n is not None:
        raise SpecError("data.n", "with a privacy_unit the number of rows is not public: remove data.n")
    if spec.invariants:
        raise SpecError("invariants", "invariants are not supported with a privacy_unit: an invariant fixes counts "
                                      "that adding or removing a person with several rows changes, and the Semi-DP "
                                      "distance a(t) is derived for one-record moves only")
    if spec.geography is not None:
        raise SpecError("data.privacy_unit", "geography is not supported with a privacy_unit yet (a person's rows may "
                                             "lie in several units, which the per-level budget does not count)")


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces) used for hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def spec_document(spec: Spec) -> dict[str, Any]:
    """The spec as a plain JSON-ready dict (defaults filled in)."""
    return spec.model_dump(mode="json", exclude_none=True)


def spec_sha256(spec: Spec) -> str:
    """SHA-256 of the canonical JSON of the validated spec."""
    return hashlib.sha256(canonical_json(spec_document(spec)).encode()).hexdigest()
