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
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

UP = frozenset({"margin_of_error_95", "ci_95_high"})
"""Columns rounded up (a margin, an upper end)."""
DOWN = frozenset({"ci_95_low"})
"""Columns rounded down (a lower end)."""
TEXT = frozenset({"label", "note", "column", "group", "release", "key"})
"""Columns that are names, never rounded."""


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


def _row(row: dict, decimals: int) -> dict:
    return {k: v if k in TEXT else round_number(v, decimals, ROUND_CEILING if k in UP else
                                                ROUND_FLOOR if k in DOWN else ROUND_HALF_EVEN)
            for k, v in row.items()}


def rounded_document(document: dict, decimals: int) -> dict:
    """A copy of an ungrouped release document with its published numbers rounded (see the module): the
    ``release`` values, every row of ``cells``, the ``postprocess`` values and a pair's ``mean``; the ``cells``
    block says how."""
    out = dict(document)
    if isinstance(document.get("release"), dict):
        out["release"] = {k: round_number(v, decimals) for k, v in document["release"].items()}
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
