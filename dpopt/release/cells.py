r"""The per-cell table of a release: every released number with its standard error, 95% margin of error and
an interval for its true value.

A release output carries, for each released cell, the cell's **label** (the query's label, the
same string as the certificate's ``utility.per_cell`` block), the released **value**, its
**standard error** and its **95% margin of error** (from the certificate's per-cell block,
:mod:`dpopt.certificate.per_cell`: 1.96·SE for Gaussian noise, the exact 95% quantile of |noise|
from the noise law otherwise, a Monte Carlo quantile where no law is available — the block's
``method`` says which), and the **post-processed** value where the release has one, and an **interval for the true value** (``ci_95_low``,
``ci_95_high``, named from the spec's ``intervals.level``: :mod:`dpopt.certificate.intervals`, around the
noise-stage value, covering the truth whatever the post-processing publishes). The noise
does not depend on the data, so the standard error and the margin hold for every group and unit
of a grouped or hierarchical release.

:func:`cells_block` is the table as a release document carries it; :func:`cells_csv` writes the
same rows as CSV (one row per group and cell, a spreadsheet's long format).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

import numpy as np

from dpopt.certificate.intervals import cell_intervals
from dpopt.errors import CertificateError

COLUMNS = ("label", "value", "standard_error", "margin_of_error_95", "postprocessed")
"""The per-cell columns before the interval's, in the order every release output writes them."""


def columns(per_cell: dict) -> tuple[str, ...]:
    """:data:`COLUMNS`, then the interval's two columns (``ci_95_low``, ``ci_95_high`` at level 0.95) when the
    certificate's block has intervals."""
    block = per_cell.get("intervals")
    return COLUMNS + (tuple(block["columns"]) if block else ())


def _number(x) -> float | int | None:
    if x is None:
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else None


def cell_errors(per_cell: dict, labels: Sequence[str]) -> tuple[list, list]:
    """(standard errors, margins of error) of ``labels`` from a certificate's ``utility.per_cell`` block.

    Raises
    ------
    CertificateError
        The block's cells are not the release's labels, in order.
    """
    cells = per_cell["cells"]
    if [c["cell"] for c in cells] != [str(label) for label in labels]:
        raise CertificateError("the certificate's per-cell labels are not the release's cells")
    return [c["standard_error"] for c in cells], [c["margin_of_error"] for c in cells]


def cell_rows(labels: Sequence[str], values, per_cell: dict, postprocessed=None, bounds=None) -> list[dict]:
    """One row per cell: label, value, standard error, 95% margin of error, post-processed value (or None), and
    the interval's low and high ends (None where the value or its half-width is missing; ``bounds``: (low, high)
    computed elsewhere, e.g. :func:`dpopt.postprocess.monte_carlo.monte_carlo_bounds`)."""
    se, moe = cell_errors(per_cell, labels)
    post = [None] * len(labels) if postprocessed is None else list(postprocessed)
    names = columns(per_cell)
    block = per_cell.get("intervals")
    if block is None:
        return [dict(zip(names, (str(label), _number(v), s, m, _number(p))))
                for label, v, s, m, p in zip(labels, values, se, moe, post)]
    low, high = cell_intervals(list(values), block) if bounds is None else bounds
    return [dict(zip(names, (str(label), _number(v), s, m, _number(p), _number(lo), _number(hi))))
            for label, v, s, m, p, lo, hi in zip(labels, values, se, moe, post, low, high)]


def cells_block(rows: list[dict], per_cell: dict, post_method: str | None = None) -> dict:
    """The ``cells`` entry of a release document: the level, how the errors were obtained, the rows."""
    block = {"level": per_cell["level"], "errors": per_cell["method"], "columns": list(columns(per_cell)),
             "rows": rows}
    if per_cell.get("intervals"):
        block["intervals"] = {k: v for k, v in per_cell["intervals"].items() if k != "half_widths"}
    if post_method:
        block["postprocessed"] = (f"{post_method}; its error is that of the post-processing "
                                  "(see postprocess.error in the certificate where estimated)")
    return block


def cells_csv(rows: list[dict], keys: Sequence[str] = (), columns: Sequence[str] = COLUMNS) -> str:
    """The rows as CSV text: the columns ``keys`` (e.g. ``column``, ``group``) first, then ``columns``;
    a missing number is an empty field."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*keys, *columns], lineterminator="\n", restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()


def release_cells(per_cell: dict, labels: Sequence[str], values, postprocessed=None,
                  post_method: str | None = None, bounds=None) -> dict:
    """The ``cells`` block of an ungrouped release: :func:`cell_rows` then :func:`cells_block`."""
    return cells_block(cell_rows(labels, values, per_cell, postprocessed, bounds), per_cell, post_method)


def document_csv(document: dict) -> str:
    """The per-cell table of a release document as CSV (:func:`cells_csv`, with the block's key columns and
    columns)."""
    block = document["cells"]
    return cells_csv(block["rows"], block.get("keys", ()), block.get("columns", COLUMNS))
