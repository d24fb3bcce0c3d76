"""The folder ``dpopt solve --out`` writes: ``mechanism.json``, ``certificate.json`` and ``report.md``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from dpopt.certificate.model import write_atomic
from dpopt.report.document import build_report
from dpopt.report.render import write_report
from dpopt.solve import Solution


def write_solution(solution: Solution, folder: str | Path,
                   progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write a solution's mechanism (:meth:`~dpopt.solve.Solution.mechanism_document`), its
    certificate and its report (figures next to it, no empirical audit: ``dpopt audit`` runs
    one) in ``folder``, each atomically; ``progress`` is told each stage of the report.

    Returns the files written.
    """
    out = Path(folder)
    mechanism = out / "mechanism.json"
    write_atomic(mechanism, json.dumps(solution.mechanism_document(), indent=2) + "\n")
    solution.certificate.write(out / "certificate.json")
    report = build_report(solution.certificate, audit_draws=None, utility_families="selected",
                          utility_scales=(0.5, 1.0, 2.0), progress=progress)
    return [mechanism, out / "certificate.json", *write_report(report, out / "report.md", image_prefix="")]
