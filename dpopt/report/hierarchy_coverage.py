"""Coverage of a hierarchical release's intervals, measured in simulation at every level, for its report.

The report reads a certificate, not data: each level's mechanism is rebuilt from its certificate
(:func:`dpopt.certificate.verify.rebuild_mechanism`) and released on a **synthetic sparse hierarchy** — a
nation, :data:`CHILDREN` units under every unit of the level above, at the bottom level ⌈cells/6⌉ occupied cells
per unit holding 1 to 8 records each, the other cells 0, every upper table the sum of its children — then
post-processed top-down as ``dpopt release`` does, in as many releases as a single table's report simulates
(:func:`dpopt.report.intervals.releases`) (:func:`dpopt.report.coverage.hierarchy_coverage`). Each
level's coverage is the share of its cell-releases whose interval holds the synthetic truth, with its binomial
standard error, against the naive interval (published value ± margin of error) on the same releases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpopt.certificate.verify import rebuild_mechanism
from dpopt.mechanisms import Mechanism
from dpopt.postprocess import spec_structure
from dpopt.problem import Problem, compile
from dpopt.report.coverage import Coverage, hierarchy_coverage
from dpopt.report.intervals import MAX_CELLS, SEED, TABLES, releases
from dpopt.report.sparse_cases import sparse_hierarchy
from dpopt.spec.load import load_spec
from dpopt.spec.models import Spec

CHILDREN = 2
"""Units under each unit of the level above, in the synthetic hierarchy."""


@dataclass(frozen=True)
class LevelSolution:
    """What the simulation reads of a level: its mechanism (rebuilt) and its certificate."""

    mechanism: Mechanism
    certificate: dict


@dataclass(frozen=True)
class RebuiltHierarchy:
    """A hierarchical design rebuilt from its certificate (the fields :func:`hierarchy_coverage` reads)."""

    spec: Spec
    problem: Problem
    solutions: list
    names: list


def rebuilt_hierarchy(cert) -> RebuiltHierarchy:
    """Every level's mechanism from its certificate's family and parameters, on the level spec it embeds."""
    levels = list(cert["levels"].values())
    problems = [compile(sub["spec"]) for sub in levels]
    return RebuiltHierarchy(load_spec(cert["spec"]), problems[0],
                            [LevelSolution(rebuild_mechanism(sub, p.space), sub) for sub, p in zip(levels, problems)],
                            list(cert["levels"]))


def synthetic_hierarchy(cells: int, depth: int, rng: np.random.Generator) -> tuple[list, list]:
    """(true tables, nation first; parents of every level below the nation) of the module's synthetic sparse
    hierarchy with ``depth`` levels below the nation (:func:`dpopt.report.sparse_cases.sparse_hierarchy`)."""
    return sparse_hierarchy(rng, [CHILDREN] * depth, cells, max(1, -(-cells // 6)))


def simulate_hierarchy(cert) -> dict | None:
    """Per-level coverage (:class:`~dpopt.report.coverage.Coverage`, nation first) of the certificate's intervals
    on the synthetic hierarchy, or None where not simulated: a level without intervals, a query that is not a
    table of counts (:data:`~dpopt.report.intervals.TABLES`), more than
    :data:`~dpopt.report.intervals.MAX_CELLS` cells."""
    blocks = [sub["utility"]["per_cell"].get("intervals") for sub in cert["levels"].values()]
    if not all(b and b["half_widths"] is not None and b["range"]["lower"] == 0.0 for b in blocks):
        return None
    design = rebuilt_hierarchy(cert)
    if design.spec.query.kind not in TABLES:
        return None
    cells = spec_structure(design.problem).cells
    if cells > MAX_CELLS:
        return None
    rng = np.random.default_rng(SEED)
    truth, parents = synthetic_hierarchy(cells, len(design.names) - 1, rng)
    count = releases(cells)
    results: list[Coverage] = hierarchy_coverage(design, truth, parents, count, rng)
    return {"results": results, "releases": count, "units": [t.shape[0] for t in truth]}


def coverage_rows(simulated: dict) -> list[list[str]]:
    """The report's table: one row per level."""
    rows = [["level", "units (synthetic)", "coverage ± SE", "worst cell", "mean width", "noise-stage width",
             "naive coverage", "naive worst cell"]]
    for units, result in zip(simulated["units"], simulated["results"]):
        s = result.summary()
        rows.append([result.name, str(units), f"{s['coverage']:.3f} ± {s['coverage_se']:.3f}",
                     f"{s['worst_cell_coverage']:.3f}", f"{s['mean_width']:.3g}", f"{s['noise_stage_width']:.3g}",
                     f"{s['naive_coverage']:.3f}", f"{s['naive_worst_cell_coverage']:.3f}"])
    return rows


__all__ = ["CHILDREN", "coverage_rows", "rebuilt_hierarchy", "simulate_hierarchy", "synthetic_hierarchy"]
