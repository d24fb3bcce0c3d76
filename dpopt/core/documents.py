"""Reading YAML and JSON documents strictly: what is not read exactly as written is refused.

Shared by the spec loader (:mod:`dpopt.spec.load`) and the certificate reader
(:mod:`dpopt.certificate.model`): bytes must be UTF-8 (:func:`decode`), a JSON object must
not give a key twice (Python's :mod:`json` keeps the last value silently), and no document
nests deeper than :data:`MAX_DEPTH` containers (:func:`check_shape`), so that no later
stage recurses past the interpreter's stack. Each problem is one :class:`DocumentError`
line naming where it is.
"""

from __future__ import annotations

import json
from typing import Any

from dpopt.core.decimals import read_float
from dpopt.errors import DocumentError

MAX_DEPTH = 64
"""Containers (mappings and lists) a document may nest; a spec needs at most 6, a
certificate about 10."""


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped).

    Raises
    ------
    DocumentError
        At the first byte that is not UTF-8, naming its offset and its line.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DocumentError(
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line})"
        ) from None


class _Duplicated(dict):
    """A JSON object that gave ``key`` twice (found by :func:`check_shape`, which knows its path)."""

    key: str


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`parse_json`: a dict, marked when a key repeats."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    marked = _Duplicated(obj)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    return marked


def _where(path: list[str]) -> str:
    return "at the top level" if not path else "in " + "".join(
        part if part.startswith("[") or i == 0 else "." + part for i, part in enumerate(path)
    )


def check_shape(document: Any) -> None:
    """Refuse a parsed document nested deeper than :data:`MAX_DEPTH`, or (from
    :func:`parse_json`) an object that gave a key twice.

    An explicit stack (no recursion), so a document of any depth is checked.

    Raises
    ------
    DocumentError
        Naming the path of the first offending container.
    """
    if not isinstance(document, (dict, list)):
        return
    # entries (container, depth, parent entry, key): a path is spelled only for an error (a certificate's per-cell
    # list holds 10⁵ objects)
    stack: list[tuple] = [(document, 0, None, None)]
    while stack:
        entry = stack.pop()
        node, depth = entry[0], entry[1]
        if depth >= MAX_DEPTH:
            raise DocumentError(f"nests containers deeper than {MAX_DEPTH} levels ({_where(_path(entry)[:3])} ...)")
        if isinstance(node, _Duplicated):
            raise DocumentError(f"gives the key '{node.key}' twice {_where(_path(entry))}")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        brackets = not isinstance(node, dict)
        stack.extend((value, depth + 1, entry, f"[{key}]" if brackets else str(key))
                     for key, value in items if isinstance(value, (dict, list)))


def _path(entry: tuple) -> list[str]:
    """The keys from the root to a :func:`check_shape` entry."""
    keys = []
    while entry[2] is not None:
        keys.append(entry[3])
        entry = entry[2]
    return keys[::-1]


def parse_json(text: str) -> Any:
    """Parse JSON ``text`` strictly: no key twice in an object, at most :data:`MAX_DEPTH` levels.

    Raises
    ------
    DocumentError
        Invalid JSON (with line and column), a repeated key (with its path), nesting too
        deep, or an integer too long to convert.
    """
    try:
        document = json.loads(text, object_pairs_hook=_object, parse_float=read_float)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise DocumentError(f"nests containers deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more digits than sys.get_int_max_str_digits()
        raise DocumentError(f"is not valid JSON: {exc}".split("; use")[0]) from None
    check_shape(document)
    return document
