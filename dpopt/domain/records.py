"""Checking records against the spec's domain (files are read by :func:`dpopt.release.sources.read_records`).

Person ids (``data.privacy_unit.id``) are compared as text, exactly: a record without an id, a blank id and an
id with surrounding whitespace are refused (:func:`person_id_problem`), never normalised, so that ``"P1"`` and
``" P1"`` can never be two persons by accident nor one person by a silent rewrite. The same rule holds on
every path: Python rows here, DuckDB (:func:`dpopt.release.bounding.bound_contributions`, with
:data:`ID_WHITESPACE` as SQL) and Dask (:func:`dpopt.release.distributed_bounding.bound_contributions_dask`).
"""

from __future__ import annotations

from dpopt.errors import DataError
from dpopt.spec.models import NumericAttribute, Spec

ID_WHITESPACE = " \t\n\v\f\r"
"""The whitespace an id may not begin or end with (ASCII: space, tab, line feed, vertical tab, form feed,
carriage return), the same characters in Python and in SQL."""


def person_id_problem(value) -> str | None:
    """Why ``value`` cannot be a person id (``missing``, ``blank``, ``surrounding whitespace``), or None.

    ``value`` is read as its text (``str``); a missing value is None, a float NaN or '' (an empty CSV field, as
    DuckDB and pandas read it)."""
    if value is None or (isinstance(value, float) and value != value):
        return "missing person id"
    text = str(value)
    if text == "":
        return "missing person id"
    if not text.strip(ID_WHITESPACE):
        return "blank person id (only whitespace)"
    if text != text.strip(ID_WHITESPACE):
        return f"person id {text!r} begins or ends with whitespace: ids are compared exactly, strip them"
    return None


def validate_records(rows: list[dict], spec: Spec, source: str = "records", header=None) -> list[dict]:
    """Check records against the domain; numeric values are converted to float. With a ``privacy_unit``,
    every record's id must be a person id (:func:`person_id_problem`); it is kept, as its text."""
    attributes = spec.data.attributes
    present = set(header) if header is not None else (set(rows[0]) if rows else set(attributes))
    unit = spec.data.privacy_unit
    missing = [a for a in [*attributes, *([unit.id] if unit is not None else [])] if a not in present]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}")
    out = []
    for line, row in enumerate(rows, start=2):
        record: dict[str, object] = {}
        if unit is not None:
            problem = person_id_problem(row.get(unit.id))
            if problem is not None:
                raise DataError(f"{source} row {line}, column {unit.id}: {problem}")
            record[unit.id] = str(row[unit.id])
        for name, domain in attributes.items():
            value = row[name]
            if isinstance(domain, NumericAttribute):
                try:
                    x = float(value)
                except (TypeError, ValueError):
                    raise DataError(f"{source} row {line}, column {name}: {value!r} is not a number") from None
                if not domain.min <= x <= domain.max:
                    raise DataError(
                        f"{source} row {line}, column {name}: {x} is outside [{domain.min}, {domain.max}]"
                    )
                record[name] = x
            else:
                if str(value) not in domain:
                    raise DataError(
                        f"{source} row {line}, column {name}: {value!r} is not a level ({', '.join(domain)})"
                    )
                record[name] = str(value)
        out.append(record)
    if spec.data.n is not None and len(out) != spec.data.n and spec.adjacency.kind != "add_remove":
        raise DataError(f"{source}: has {len(out)} records but the spec fixes n = {spec.data.n}")
    return out
