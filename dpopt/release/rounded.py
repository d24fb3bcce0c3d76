r"""The rounding a spec states (``output: {decimals: N}``), applied to a release document before it is written.

Rounding is post-processing of released values: it costs no privacy. The certificate states it (its
``output`` block, :func:`dpopt.certificate.build.output_block`) and ``dpopt verify`` checks that block is the
spec's. Each number is rounded in decimal arithmetic from its shortest round-trip text (``Decimal(repr(x))``):

- values, standard errors and post-processed values half to even to N places;
- margins of error and upper interval ends **up**, lower interval ends **down**: an interval that held the
  true value with probability ≥ 95% still does after rounding (it only grows).

With N = 0 the rounded numbers are integers.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

import numpy as np

TEXT = frozenset({"label", "note", "column", "group", "release", "key", "level", "unit"})
"""Columns that are names, never rounded."""

_UP = re.compile(r"(^|.* )(margin_of_error_95|ci_[0-9_]+_high)$")
_DOWN = re.compile(r"(^|.* )ci_[0-9_]+_low$")


def column_mode(name: str) -> str:
    """How a column is rounded: margins of error (``margin_of_error_95``) and upper interval ends (``ci_95_high``,
    ``ci_99_5_high``; in a grouped table ``<label> ci_95_high``) up, lower ends down, everything else half to
    even."""
    return ROUND_CEILING if _UP.match(name) else ROUND_FLOOR if _DOWN.match(name) else ROUND_HALF_EVEN


def round_number(x, decimals: int, mode: str = ROUND_HALF_EVEN):
    """``x`` rounded to ``decimals`` places (``mode``: a :mod:`decimal` rounding); None, booleans and non-finite
    numbers are returned as they are; an int with 0 decimals is the int.

    Examples
    --------
    >>> round_number(27.108253112012957, 1), round_number(8.543284941589409, 1, ROUND_CEILING), round_number(2.5, 0)
    (27.1, 8.6, 2)
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return x
    quantum = Decimal(1).scaleb(-decimals)
    rounded = Decimal(repr(x)).quantize(quantum, rounding=mode)
    return int(rounded) if decimals == 0 else float(rounded)


def round_array(x, decimals: int, mode: str = ROUND_HALF_EVEN) -> np.ndarray:
    """:func:`round_number` of every entry of an array (a grouped table's column). Whole numbers are kept as they
    are (every rounding leaves them unchanged); the others are rounded one by one in decimal arithmetic, so a
    number is written the same in every output. With 0 places and every entry finite, an int64 array."""
    x = np.asarray(x, dtype=float)
    out = x.copy()
    fractional = np.flatnonzero(np.isfinite(x) & (x != np.floor(x)))
    out[fractional] = [float(round_number(v, decimals, mode)) for v in x[fractional].tolist()]
    return out.astype(np.int64) if decimals == 0 and np.all(np.isfinite(out)) else out


def round_tree(value, decimals: int):
    """Every number of a JSON-like tree (dicts, lists) rounded half to even (:func:`round_number`)."""
    if isinstance(value, dict):
        return {k: round_tree(v, decimals) for k, v in value.items()}
    if isinstance(value, list):
        return [round_tree(v, decimals) for v in value]
    return round_number(value, decimals)


def _row(row: dict, decimals: int) -> dict:
    return {k: v if k in TEXT else round_number(v, decimals, column_mode(k)) for k, v in row.items()}


def rounded_document(document: dict, decimals: int) -> dict:
    """A copy of a release document with its published numbers rounded (see the module): the ``release`` values
    (a grouped release's per group), every row of ``cells``, the ``postprocess`` values, a pair's ``mean``, a
    hierarchy's ``tables`` and ``noisy`` values,, a plan's tables (each query's values and mean) and
    a private-key release's values and noisy pairs; the ``cells`` block says how."""
    out = dict(document)
    for key in ("release", "tables", "noisy"):
        if isinstance(document.get(key), dict):
            out[key] = round_tree(document[key], decimals)
    if isinstance(document.get("releases"), list):  # private keys and quantiles: each release's values and pairs
        out["releases"] = [r | {k: round_tree(r[k], decimals) for k in ("values", "pairs") if k in r}
                           for r in document["releases"]]
    if isinstance(document.get("tables"), list):  # a plan's queries: their values, not their targets
        out["tables"] = [rounded_document(table, decimals) for table in document["tables"]]
    if "cells" in document:
        cells = document["cells"]
        out["cells"] = cells | {"rows": [_row(r, decimals) for r in cells["rows"]],
                                "rounding": f"{decimals} decimal places (certificate: output)"}
    if "postprocess" in document:
        post = document["postprocess"]
        out["postprocess"] = post | {"values": {k: round_number(v, decimals) for k, v in post["values"].items()}}
    if isinstance(document.get("mean"), dict) and "value" in document["mean"]:
        out["mean"] = document["mean"] | {"value": round_number(document["mean"]["value"], decimals)}
    return out
