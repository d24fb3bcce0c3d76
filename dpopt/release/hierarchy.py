r"""A TopDown-style release of a geographic hierarchy: every level released, then made consistent.

``release_hierarchy(spec, data)`` for a spec with ``geography: {levels: [state, county]}``:

1. designs the release as ``dpopt solve`` does (:func:`dpopt.release.hierarchy_design.solve_hierarchy`:
   the privacy target split across the levels, nation first, one spec solved per level, each with
   its own certificate, and the whole release's certificate), so that the σ released with are the
   σ ``solve`` certified; the data's columns are checked before that design step;
2. counts the query for the nation and every unit of every level in SQL (DuckDB,
   :mod:`dpopt.release.sources`); the units and their parents are the declared public geography
   (:mod:`dpopt.release.geography`: the spec's ``geography.units`` or a public file), never the data's
   codes: a record in an undeclared unit, or whose units disagree with the declared parents, is refused,
   and a declared unit without records is released as an empty table;
3. releases every unit's table through the level mechanism's public ``release`` (stream
   (l, 0) of the release's random source for level l);
4. post-processes top-down (:func:`dpopt.postprocess.topdown`) and certifies the output in
   exact integers; optionally estimates bias and RMSE before and after by Monte Carlo at the
   published tables (:mod:`dpopt.postprocess.evaluation`).

The release document carries both the raw noisy tables (``noisy``) and the published
post-processed ones (``tables``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpopt.certificate.hierarchy_budget import NATION
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.core.output import output_folder
from dpopt.errors import SpecError
from dpopt.postprocess import Structure, spec_structure, topdown
from dpopt.postprocess.evaluation import hierarchy_errors
from dpopt.postprocess.table import mechanism_covariance
from dpopt.release import sources
from dpopt.release.bind import as_test_release, certificate_sha256, is_seeded, sha256_bytes
from dpopt.release.cells import cell_rows, cells_block, document_csv
from dpopt.release.geography import check_data_parents, declared_geography
from dpopt.release.rounded import rounded_document
from dpopt.release.hierarchy_design import HierarchySolution, check_hierarchy_spec, solve_hierarchy
from dpopt.rng import RandomSource, random_source
from dpopt.spec.load import load_spec, spec_document
from dpopt.spec.models import Postprocess, Spec

ERROR_SEED = 20260102
"""Seed of the Monte Carlo error estimate (a simulation at the published tables, not a release)."""


@dataclass(frozen=True)
class HierarchyRelease:
    """What :func:`release_hierarchy` returns."""

    spec: Spec
    names: tuple[str, ...]
    keys: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    noisy: tuple[np.ndarray, ...]
    tables: tuple[np.ndarray, ...]
    design: HierarchySolution
    block: dict
    randomness: dict
    records: int
    """The number of records counted: exact, for the operator (:mod:`dpopt.release.operator`), never in the
    document."""

    @property
    def certificates(self) -> list[Certificate]:
        """One certificate per level: the level's own, plus the ``hierarchy`` block."""
        seeded = is_seeded(self.randomness)
        return [as_test_release(c, seeded) for c in self.design.level_certificates(self.block)]

    @property
    def certificate(self) -> Certificate:
        """The whole release's certificate (every level's inside), as ``dpopt solve`` issues it plus the units."""
        return as_test_release(self.design.certificate(self.block), is_seeded(self.randomness))

    def document(self, include_values: bool = True) -> dict:
        """The release document: levels, budget, post-processing, the SHA-256 of each level's
        certificate (:mod:`dpopt.release.bind`), and (optionally) every table."""
        labels = list(self.design.problem.labels)
        digests = {f"certificate_{name}.json": certificate_sha256(cert)
                   for name, cert in zip(self.names, self.certificates)}
        doc = {"name": self.spec.name, "spec": spec_document(self.spec), "labels": labels,
               "hierarchy": self.block, "certificate_sha256": digests, "randomness": self.randomness}
        if include_values:
            doc["tables"] = {n: _as_dict(k, t, labels) for n, k, t in zip(self.names, self.keys, self.tables)}
            doc["noisy"] = {n: _as_dict(k, t, labels) for n, k, t in zip(self.names, self.keys, self.noisy)}
            doc["cells"] = self.cells()
        return doc if self.spec.output is None else rounded_document(doc, self.spec.output.decimals)

    def cells(self) -> dict:
        """The per-cell table (:mod:`dpopt.release.cells`): one row per level, unit and cell, the noisy value
        with its level's standard error and 95% margin of error, and the published (post-processed) value."""
        labels = list(self.design.problem.labels)
        rows = []
        for name, keys, noisy, tables, solution in zip(self.names, self.keys, self.noisy, self.tables,
                                                        self.design.solutions):
            per_cell = solution.certificate["utility"]["per_cell"]
            rows += [{"level": name, "unit": str(k)} | row for k, v, t in zip(keys, noisy, tables)
                     for row in cell_rows(labels, v, per_cell, t)]
        first = self.design.solutions[0].certificate["utility"]["per_cell"]
        return cells_block(rows, first, self.block["postprocess"]["method"]["algorithm"]) | {
            "keys": ["level", "unit"],
            "errors": "each level's own noise (its certificate's utility.per_cell): " + first["method"]}

    def write(self, out: str | Path) -> list[Path]:
        """``release.json`` (with the tables), ``release.csv`` (the per-cell table), ``certificate.json`` (the
        whole release), ``certificate_<level>.json`` per level; the folder whole or not at all
        (:func:`~dpopt.core.output.output_folder`)."""
        names = ["release.json", "release.csv", "certificate.json"] + [f"certificate_{n}.json" for n in self.names]
        document = self.document()
        table = document_csv(document)
        document["files_sha256"] = {names[1]: sha256_bytes(table.encode("utf-8"))}
        with output_folder(out) as staging:
            write_atomic(staging / names[0], json.dumps(document, indent=1, ensure_ascii=False) + "\n")
            write_atomic(staging / names[1], table)
            self.certificate.write(staging / names[2])
            for name, cert in zip(names[3:], self.certificates):
                cert.write(staging / name)
        return [Path(out) / name for name in names]


def _as_dict(keys, table, labels) -> dict:
    return {str(k): dict(zip(labels, row.tolist())) for k, row in zip(keys, table)}


def release_hierarchy(
    spec: Spec | str | Path | Mapping,
    data: str | Path,
    *,
    seed: int | None = None,
    insecure_seed: bool = False,
    randomness: RandomSource | None = None,
    engine: str = "numpy",
    error_draws: int = 0,
    units: str | Path | None = None,
) -> HierarchyRelease:
    """Release a spec's table for the nation and every unit of each geography level, TopDown-consistent.

    Parameters
    ----------
    spec : Spec, path or dict
        With a ``geography`` block (and optionally ``postprocess``).
    data : path
        CSV or Parquet records with the table's attributes and one code column per level.
    seed, insecure_seed, randomness :
        As :func:`dpopt.release.release_groups`.
    engine : {'numpy', 'dask'}
        Where per-parent problems run when the closed-form path does not apply.
    error_draws : int
        Monte Carlo releases for the error table (0: none).
    units : path, optional
        The public geography file (a column per level, one row per unit of the finest level), for a
        spec without ``geography.units`` (:func:`dpopt.release.geography.declared_geography`).

    Returns
    -------
    HierarchyRelease

    Raises
    ------
    SpecError, UnsupportedSpecError, DataError, CalibrationError, SolverError
    """
    spec = load_spec(spec)
    check_hierarchy_spec(spec)
    options = spec.postprocess or Postprocess()
    randomness = random_source(seed, insecure_seed) if randomness is None else randomness
    if units is not None and Path(units).resolve() == Path(data).resolve():
        raise SpecError("--groups", "is the data file itself: the units found in the data are private; give the "
                                    "public geography")
    con = sources.connect()
    source = sources.open_source(data)
    sources.require_columns(con, source, spec.geography.levels)
    sources.validate(con, source, spec)  # a missing column or an off-domain value: one line before the design
    geography = declared_geography(spec, units)
    check_data_parents(con, source, spec.geography.levels, geography)
    design = solve_hierarchy(spec)
    problem, solutions, specs = design.problem, design.solutions, design.specs
    structure = spec_structure(problem)
    nation, records = sources.answer(con, source, specs[0], query=problem.query)
    truth, keys = [nation[None, :]], [np.array([NATION])]
    for column, declared in zip(spec.geography.levels, geography.keys):
        answers = sources.group_answers(con, source, specs[0], column, keys=declared, domain="declared",
                                        query=problem.query)
        truth.append(answers.values)
        keys.append(answers.keys)
    parents = list(geography.parents)
    noisy = []
    for depth, (solution, level) in enumerate(zip(solutions, truth)):
        rng = randomness.stream(depth, 0)
        noisy.append(np.vstack([solution.mechanism.release(row, rng) for row in level.astype(float)]))
    covariances = [mechanism_covariance(s.mechanism)[0] for s in solutions]
    nation_values, totals = None, None
    if spec.geography.exact_totals:
        structure = Structure(structure.queries, structure.labels, np.ones((1, structure.cells), dtype=np.int64),
                              ("total",), structure.shape)
        nation_values = [records]
        totals = [level.sum(axis=1).astype(np.int64) for level in truth[1:]]
    result = topdown(noisy, parents, structure, nation_values, covariances, options=options, engine=engine,
                     unit_totals=totals)
    names = design.names
    block = {
        **design.block,
        "levels": [lv | {"units": int(len(k)),
                         "units_from": "nation (one unit)" if lv["level"] == NATION else geography.description}
                   for lv, k in zip(design.block["levels"], keys)],
        "checks": design.block["checks"] + [c.to_dict() for c in result.checks],
        "postprocess": {"guarantee": "unchanged by post-processing", "method": result.method},
    }
    if totals is not None:
        block["invariants"] = ("the total of the nation and of every unit is published exactly: a record keeps its "
                               "unit under this adjacency, so unit sizes are not protected (they are in the scope)")
    if error_draws:
        errors = hierarchy_errors(list(result.tables), parents, [s.mechanism for s in solutions], structure,
                                  list(names), error_draws, np.random.default_rng(ERROR_SEED), nation_values,
                                  covariances, options, totals)
        block["postprocess"]["error"] = {
            "method": f"Monte Carlo, {error_draws} releases simulated at the published tables (parametric bootstrap), "
                      f"seed {ERROR_SEED}",
            "levels": errors,
        }
    return HierarchyRelease(spec, names, tuple(keys), tuple(parents), tuple(noisy), tuple(result.tables),
                            design, block, randomness.describe(), records)
