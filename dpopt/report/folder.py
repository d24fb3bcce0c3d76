"""The folder ``dpopt solve --out`` writes: ``mechanism.json``, ``certificate.json`` and ``report.md``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from dpopt.certificate.model import INDENTED_CELLS, ascii_json, dumps_sharing, write_atomic
from dpopt.core.output import output_folder
from dpopt.report.document import build_report
from dpopt.report.render import write_report
from dpopt.solve import Solution


def write_solution(solution: Solution, folder: str | Path,
                   progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write a solution's mechanism (:meth:`~dpopt.solve.Solution.mechanism_document`), its
    certificate and its report (figures next to it, no empirical audit: ``dpopt audit`` runs
    one) in ``folder``, the folder whole or not at all (:func:`~dpopt.core.output.output_folder`);
    ``progress`` is told each stage of the report.

    Returns the files written.
    """
    report = build_report(solution.certificate, audit_draws=None, utility_families="selected",
                          utility_scales=(0.5, 1.0, 2.0), progress=progress, solution=solution)
    # indented for a person up to INDENTED_CELLS cells; past that one line (json's C encoder: the indented
    # encoder is pure Python, 2 s for the range example's 175,270 cells)
    indent = 2 if solution.mechanism.dimension <= INDENTED_CELLS else None
    document = solution.mechanism_document()
    shared = None
    if indent is None and not solution.certificate.indented() and document["per_cell"] is not None:
        # both files carry the per-cell errors (34 MB for the range example): encoded once, 0.5 s less
        shared = (document["per_cell"], json.dumps(document["per_cell"], ensure_ascii=False))
    with output_folder(folder) as staging:
        mechanism = (dumps_sharing(document, shared[0], ascii_json(shared[1])) if shared is not None
                     else json.dumps(document, indent=indent))
        write_atomic(staging / "mechanism.json", mechanism + "\n")
        solution.certificate.write(staging / "certificate.json", shared)
        written = write_report(report, staging / "report.md", image_prefix="")
    out = Path(folder)
    return [out / "mechanism.json", out / "certificate.json", *(out / path.name for path in written)]
