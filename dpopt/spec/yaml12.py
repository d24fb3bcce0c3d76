"""YAML read as the YAML 1.2 core schema, strictly, on PyYAML.

PyYAML implements YAML 1.1, which reads ``1:30`` as 90 (base 60), ``0x10`` as 16, ``010``
as 8, ``yes``/``no``/``on``/``off`` as booleans and ``1e-5`` as a string, and keeps the last
of two equal keys. The loader here resolves plain scalars by the 1.2 core schema (YAML 1.2.2,
§10.3.2), narrowed to what a spec is written in:

- null: ``null``, ``Null``, ``NULL``, ``~`` and the empty scalar;
- boolean: ``true``, ``True``, ``TRUE``, ``false``, ``False``, ``FALSE`` (nothing else);
- integer: ``[-+]?[0-9]+``, decimal only (no ``0x``/``0o``: a spec has no use for them,
  and refusing them keeps ``0x10`` from passing as 16);
- float: ``[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?``, ``.inf``, ``.nan`` (a
  :class:`~dpopt.core.decimals.SpelledFloat` keeping its text when the float does not keep its
  decimal, :func:`~dpopt.core.decimals.read_float`);
- anything else a string.

Only the core tags (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``, ``!!seq``,
``!!map``) are constructed; ``!!timestamp``, ``!!binary``, ``!!set``, ``!!omap`` and the
merge key ``<<`` are YAML 1.1 and refused or read as plain keys. A key given twice is an
error naming it and its line. Before anything is constructed, the composed document is
checked: no container nested deeper than :data:`~dpopt.core.documents.MAX_DEPTH`, no alias
that contains itself, and aliases that expand the document by at most
:data:`ALIAS_ALLOWANCE` nodes beyond the nodes written (an 839-byte "billion laughs" alias
bomb expands to hundreds of megabytes).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from dpopt.core.decimals import read_float
from dpopt.core.documents import MAX_DEPTH
from dpopt.errors import DocumentError

ALIAS_ALLOWANCE = 10_000
"""Nodes aliases may add to a document beyond as many as it writes: the expanded document has
at most ``2 · written + ALIAS_ALLOWANCE`` nodes, so its size stays linear in the file's."""

_CORE = "tag:yaml.org,2002:"
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


@functools.cache
def _loader() -> type:
    """The loader class (built on first use: PyYAML is imported by the first YAML document read)."""
    import yaml  # imported where used (start-up of `dpopt verify`, which reads JSON)

    base = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader  # LibYAML parses 5x faster

    class CoreLoader(base):
        yaml_implicit_resolvers: dict = {}
        yaml_constructors = {
            tag: yaml.SafeLoader.yaml_constructors[tag]
            for tag in (_CORE + "null", _CORE + "str", _CORE + "seq", _CORE + "map", None)
        }  # None: any other tag is refused (construct_undefined)

        def construct_yaml_bool(self, node: Any) -> bool:
            value = self.construct_scalar(node)
            if not _BOOL.match(value):
                raise yaml.constructor.ConstructorError(None, None, f"'{value}' is not a boolean (true or false)",
                                                        node.start_mark)
            return value.lower() == "true"

        def construct_yaml_int(self, node: Any) -> int:
            value = self.construct_scalar(node)
            if not _INT.match(value):
                raise yaml.constructor.ConstructorError(None, None, f"'{value}' is not a decimal integer",
                                                        node.start_mark)
            try:
                return int(value)
            except ValueError:  # more digits than sys.get_int_max_str_digits()
                raise yaml.constructor.ConstructorError(None, None, f"an integer of {len(value)} digits is too long",
                                                        node.start_mark) from None

        def construct_yaml_float(self, node: Any) -> float:
            value = self.construct_scalar(node)
            if not _FLOAT.match(value):
                raise yaml.constructor.ConstructorError(None, None, f"'{value}' is not a number", node.start_mark)
            lower = value.lower()
            if lower.endswith(".inf"):
                return float(lower.replace(".inf", "inf"))
            return float("nan") if lower == ".nan" else read_float(value)

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, (str, int, float, bool, type(None))):
                    raise yaml.constructor.ConstructorError(None, None, "a key must be a plain value",
                                                            key_node.start_mark)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"the key '{key}' is given twice",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    for tag, pattern, first in (
        ("null", _NULL, ["~", "n", "N", ""]),
        ("bool", _BOOL, list("tTfF")),
        ("int", _INT, list("-+0123456789")),
        ("float", _FLOAT, list("-+0123456789.")),
    ):
        CoreLoader.add_implicit_resolver(_CORE + tag, pattern, first)
    for tag in ("bool", "int", "float"):
        CoreLoader.add_constructor(_CORE + tag, getattr(CoreLoader, f"construct_yaml_{tag}"))
    return CoreLoader


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "an unknown place"


def _children(node: Any) -> list[Any]:
    import yaml  # imported where used, as in _loader

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def check_nodes(root: Any) -> None:
    """Check a composed YAML document before it is constructed (an explicit stack, no recursion).

    Raises
    ------
    DocumentError
        A container nested deeper than :data:`~dpopt.core.documents.MAX_DEPTH`, an alias
        inside the node it names, or aliases that would expand the document beyond
        ``2 · written + ALIAS_ALLOWANCE`` nodes.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            entered.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in children)
            depth[key] = 1 + max((depth[id(child)] for child in children), default=0) if children else 0
            if depth[key] > MAX_DEPTH:
                raise DocumentError(f"nests containers deeper than {MAX_DEPTH} levels ({_where(node.start_mark)})")
            continue
        if key in size:
            continue
        if key in entered:
            raise DocumentError(f"has an alias inside the node it names ({_where(node.start_mark)})")
        entered.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children)
    written, expanded = len(size), size[id(root)]
    if expanded > 2 * written + ALIAS_ALLOWANCE:
        raise DocumentError(
            f"has aliases that expand its {written} nodes to {expanded:.3g} (at most twice the nodes written "
            f"plus {ALIAS_ALLOWANCE:,} are read)"
        )


def _one_line(exc: Exception) -> str:
    """A PyYAML error as one line: context, problem and place."""
    problem = getattr(exc, "problem", None)
    if problem is None:
        return " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None)
    return " ".join(f"{context + ': ' if context else ''}{problem} ({_where(mark)})".split())


def parse_yaml(text: str) -> Any:
    """Parse YAML ``text`` by the strict 1.2 core schema of this module.

    Raises
    ------
    DocumentError
        Invalid YAML, a tag or scalar outside the core schema, a key given twice, nesting
        too deep, a recursive alias or an alias bomb: one line with the place.
    """
    import yaml  # imported where used, as in _loader

    loader = _loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_nodes(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DocumentError(f"is not valid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise DocumentError(f"nests containers deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
