"""``dpopt solve --out`` builds its report from the solve's own problem and mechanism.

The reference is the report built the other way, from the certificate alone (the spec compiled
again, the mechanism rebuilt from its recorded parameters, as ``dpopt report`` does): the two
must hold the same figures, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dpopt
from dpopt.report import document
from dpopt.report.document import build_report

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {"audit_draws": None, "utility_families": "selected", "utility_scales": (1.0,)}


@pytest.mark.parametrize("name", ["count_add_remove.yaml", "table_2x2_margins_pure.yaml"])
def test_the_solution_is_used_and_the_figures_are_the_rebuilt_ones(monkeypatch, name):
    sol = dpopt.solve(ROOT / "specs" / name)
    rebuilt = build_report(sol.certificate, **OPTIONS)

    def refuse(*_args, **_kwargs):
        raise AssertionError("the spec was compiled again")

    monkeypatch.setattr(document, "compile", refuse)
    monkeypatch.setattr(document, "rebuild_mechanism", refuse)
    reused = build_report(sol.certificate, solution=sol, **OPTIONS)
    assert [(f.name, f.png) for f in reused.figures] == [(f.name, f.png) for f in rebuilt.figures]
    assert reused.notes == rebuilt.notes


def test_a_solution_of_another_certificate_is_refused():
    sol = dpopt.solve(ROOT / "specs" / "count_add_remove.yaml")
    other = dpopt.solve(ROOT / "specs" / "count_add_remove.yaml")
    with pytest.raises(ValueError, match="not the certificate's"):
        build_report(other.certificate, solution=sol, **OPTIONS)
