"""Checking records against the spec's domain (files are read by :func:`dpopt.release.sources.read_records`)."""

from __future__ import annotations

from dpopt.errors import DataError
from dpopt.spec.models import NumericAttribute, Spec


def validate_records(rows: list[dict], spec: Spec, source: str = "records", header=None) -> list[dict]:
    """Check records against the domain; numeric values are converted to float."""
    attributes = spec.data.attributes
    present = set(header) if header is not None else (set(rows[0]) if rows else set(attributes))
    missing = [a for a in attributes if a not in present]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}")
    out = []
    for line, row in enumerate(rows, start=2):
        record: dict[str, object] = {}
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
