"""Releasing a whole plan from a CSV/Parquet file: one DuckDB pass, one document.

One aggregate scan counts the records of every cell of the table over all the categorical
attributes the plan's counting queries use, and sums every numeric attribute a sum or mean
query uses, per cell. Every query's true answer follows from that table (a marginal of it,
then the query's matrix; a sum of the per-cell sums; a mean divides by n), and each is
released by its mechanism's :meth:`~dpopt.mechanisms.Mechanism.release` with its own
random stream (stream i for query i of the plan). A joint design (:mod:`dpopt.plan.joint`)
releases the shared histogram once (one scan, :func:`dpopt.release.sources.answer`) and
answers every query from it. A grouped release may count on Dask instead of DuckDB
(``engine="dask"``); the release from the counts is the same code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpopt.certificate.composition import PLAN_PER_GROUP, composition_checks, groups_block
from dpopt.certificate.model import Certificate
from dpopt.domain.queries import CountingQuery
from dpopt.errors import CalibrationError, SpecError, UnsupportedSpecError
from dpopt.plan.solve import PlanSolution, solve_plan
from dpopt.plan.spec import load_plan, plan_cells, query_spec
from dpopt.mechanisms.real_lattice import RealLattice
from dpopt.problem import Problem
from dpopt.release import sources
from dpopt.release.batch import ENGINES, group_domain
from dpopt.release.bounding import bound_contributions, pair_mean, published_bounding
from dpopt.release.cells import cell_rows, cells_block
from dpopt.release.lattice_sums import lattice_answer, units_sql
from dpopt.release.operator import operator_report
from dpopt.rng import RandomSource
from dpopt.spec.models import Plan


def _union(problems: list[Problem]) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """(categorical attributes of the compiled counting queries, their levels, numeric attributes summed)."""
    attributes: dict[str, None] = {}
    numeric: dict[str, None] = {}
    for problem in problems:
        query = problem.query
        if isinstance(query, CountingQuery):
            attributes.update(dict.fromkeys(query.attributes))
        else:
            numeric[query.attribute] = None
    levels = [tuple(problems[0].spec.data.attributes[a]) for a in attributes]
    return list(attributes), levels, list(numeric)


def _cell_sql(attributes: list[str], levels) -> str:
    cell = "0"
    for attribute, lv in zip(attributes, levels):
        cell = f"({cell}) * {len(lv)} + {sources.level_code_sql(attribute, lv)}"
    return cell


def _answers(problems: list[Problem], attributes: list[str], shape: tuple, numeric: list[str],
             counts: np.ndarray, totals: np.ndarray) -> list[np.ndarray]:
    """Every compiled query's answer from the counts (and numeric sums) of the cells of the shared table."""
    table = counts.reshape(shape) if shape else counts
    records = float(counts.sum())
    answers = []
    for problem in problems:
        query = problem.query
        if isinstance(query, CountingQuery):
            own = [attributes.index(a) for a in query.attributes]
            other = tuple(i for i in range(len(attributes)) if i not in own)
            marginal = table.sum(axis=other) if other else table
            kept = sorted(own)  # the summed table keeps the union's axis order; put it in the query's
            h = np.transpose(marginal, axes=[kept.index(u) for u in own]) if own else marginal
            answers.append(query.answers(np.reshape(h, -1)))
        else:
            total = float(totals[numeric.index(query.attribute)].sum())
            if query.pair:  # a mean with a privacy unit: (centred sum, count)
                answers.append(np.array([total - query.midpoint * records, records]))
            else:
                answers.append(np.array([total if query.kind == "sum" else total / records]))
    return answers


def plan_answers(solution: PlanSolution, data: str | Path,
                 counted: tuple[Any, sources.DataSource] | None = None) -> tuple[list[np.ndarray], int]:
    """Every query's true answer, from one aggregate scan of ``data``, and the number of records.

    ``counted``: the (DuckDB connection, source) to scan instead of ``data`` (the rows kept by bounding).

    Raises
    ------
    DataError
        Missing columns, a value outside its attribute's domain (naming the first such
        record), or a size that contradicts ``data.n``.
    """
    problems = [d.problem for d in solution.designs]
    spec = problems[0].spec
    con, source = (sources.connect(), sources.open_source(data)) if counted is None else counted
    sources.validate(con, source, spec)
    attributes, levels, numeric = _union(problems)
    sums = "".join(f", sum({sources._number_sql(a)})" for a in numeric)
    rows = sources._run(con, source, f"SELECT {_cell_sql(attributes, levels)} AS cell, count(*){sums} "
                                     f"FROM {source.sql} GROUP BY ALL").fetchall()
    shape = tuple(len(lv) for lv in levels)
    cells = int(np.prod(shape)) if shape else 1
    counts = np.zeros(cells)
    totals = np.zeros((len(numeric), cells))
    for row in rows:
        counts[int(row[0])] = row[1]
        for k in range(len(numeric)):
            totals[k, int(row[0])] = row[2 + k] or 0.0
    records = int(counts.sum())
    sources.check_size(spec, source, records)
    return _answers(problems, attributes, shape, numeric, counts, totals), records


def _checked(plan: Plan | str | Path | Mapping[str, Any], data: str | Path, columns: list[str] = ()) -> Plan:
    """The plan, once the data file has its attributes (and the grouping ``columns``) with every value in its
    domain: checked in SQL before the design, so that a data error is one line before any design work.

    Raises
    ------
    DataError
    """
    plan = load_plan(plan)
    con, source = sources.connect(), sources.open_source(data)
    sources.require_columns(con, source, [*plan.data.attributes, *columns])
    sources.validate(con, source, query_spec(plan, 0, plan.privacy.model_dump(exclude_none=True)))
    return plan


def _units(solution: PlanSolution) -> tuple[list[Problem], list, list]:
    """What is released: (compiled specs, mechanisms, post-processing maps or None) — the queries,
    or the joint design's shared histogram with its maps."""
    if solution.joint is not None:
        return [solution.joint.problem], [solution.joint.mechanism], [solution.joint.maps]
    return [d.problem for d in solution.designs], [d.mechanism for d in solution.designs], [None] * len(
        solution.designs)


def _lattice_group_units(con, source: sources.DataSource, column: str, problems: list[Problem],
                         mechanisms: list) -> dict[int, dict[str, int]]:
    """For each released unit u that is a sum measured on a lattice, every group's exact N (units of g)
    (:func:`dpopt.release.lattice_sums.units_sql`), keyed by the group as text."""
    out = {}
    for u, (problem, mechanism) in enumerate(zip(problems, mechanisms)):
        lattice = getattr(mechanism, "lattice", None)
        if isinstance(lattice, RealLattice) and problem.query.kind == "sum":  # a mean's n is not a group's
            key = f"CAST({sources.quote_identifier(column)} AS VARCHAR)"
            rows = sources._run(con, source, f"SELECT {key}, CAST(sum({units_sql(problem.query, lattice)}) AS VARCHAR) "
                                             f"FROM {source.sql} GROUP BY ALL").fetchall()
            out[u] = {str(k): int(v) for k, v in rows}
    return out


def release_plan_groups(plan: Plan | str | Path | Mapping[str, Any], data: str | Path, group_by: list[str],
                        randomness: RandomSource, engine: str = "duckdb",
                        client=None) -> tuple[PlanSolution, dict, Certificate]:
    """The plan released for every group of each grouping column (one scan per column).

    Groups are the column's levels, declared in the plan (``data.attributes``); a column the plan does
    not declare is refused (:func:`dpopt.release.batch.group_domain`). The plan's guarantee holds per
    group; a record is in one group of each of the L columns, so the whole release meets the L-fold
    composition of the plan's target (:func:`dpopt.certificate.composition.compose`), recorded in the
    certificate's ``groups`` block and re-checked by ``dpopt verify``. Noise of unit u in group g of column l comes from the
    stream at path (l, g, u).

    Parameters
    ----------
    engine : {'duckdb', 'dask'}
        Where the records are counted per (group, cell): a DuckDB scan, or Dask
        (:func:`dpopt.release.distributed.table_sums_dask`; ``client`` a dask.distributed
        Client, default the current one or dask's local scheduler). The same counts, so for a
        fixed seed the same release bit for bit (a sum or mean query's true sums may differ
        in the last bits: floating-point addition order).

    Raises
    ------
    SpecError
        No or repeated grouping columns, an unknown engine, or a plan that fixes ``data.n``.
    """
    plan = load_plan(plan)
    if plan.data.privacy_unit is not None:
        raise SpecError("--group-by", "a grouped release with a privacy_unit is not supported yet (a person's rows "
                                      "may span groups): put the grouping attribute in the queries instead")
    if not group_by or len(set(group_by)) != len(group_by):
        raise SpecError("--group-by", "give distinct grouping columns")
    if engine not in ENGINES:
        raise SpecError("--engine", f"must be one of {', '.join(ENGINES)} (got {engine!r})")
    if plan.data.n is not None:
        raise SpecError("data.n", "fixes the size of the whole dataset, but a grouped release has one size per "
                                  "group: remove data.n")
    domains = [group_domain(query_spec(plan, 0, plan.privacy.model_dump(exclude_none=True)), column)
               for column in group_by]  # refused before any design: no column found only in the data
    solution = solve_plan(_checked(plan, data, group_by))
    problems, mechanisms, maps = _units(solution)
    specs = [p.spec for p in problems]
    source = sources.open_source(data)
    attributes, levels, numeric = _union(problems)
    if engine == "dask":
        try:  # dask is an optional dependency (pip install "dpopt[dask]")
            from dpopt.release.distributed import table_sums_dask
        except ImportError as exc:
            raise UnsupportedSpecError("--engine", f"dask is not installed ({exc.name}): "
                                                   "pip install 'dpopt[dask]'") from None

        def scan(column: str) -> list[tuple]:
            return table_sums_dask(source, specs[0], column, attributes, levels, numeric, client=client)
    else:
        con = sources.connect()  # columns and values were checked before the design (_checked)
        sums = "".join(f", sum({sources._number_sql(a)})" for a in numeric)

        def scan(column: str) -> list[tuple]:
            key = f"CAST({sources.quote_identifier(column)} AS VARCHAR)"
            return sources._run(con, source, f"SELECT {key} AS g, {_cell_sql(attributes, levels)} AS cell, "
                                             f"count(*){sums} FROM {source.sql} GROUP BY ALL").fetchall()
    shape = tuple(len(lv) for lv in levels)
    cells = int(np.prod(shape)) if shape else 1
    names = [d.name for d in solution.designs]
    labels = [d.problem.labels for d in solution.designs]
    released: dict[str, dict] = {}
    levels_block = []
    per_cells = plan_per_cell(solution)
    cell_table = []
    for l, (column, domain) in enumerate(zip(group_by, domains)):
        rows = scan(column)  # every key one of the declared levels: the data were checked (_checked)
        keys = [str(k) for k in domain.keys]
        index = {k: i for i, k in enumerate(keys)}
        counts = np.zeros((len(keys), cells))
        totals = np.zeros((len(keys), len(numeric), cells))
        for row in rows:
            g = index[str(row[0])]
            counts[g, int(row[1])] = row[2]
            for k in range(len(numeric)):
                totals[g, k, int(row[1])] = row[3 + k] or 0.0
        exact = {} if engine == "dask" else _lattice_group_units(con, source, column, problems, mechanisms)
        tables = {}
        for g, k in enumerate(keys):
            answers = _answers(problems, attributes, shape, numeric, counts[g], totals[g])
            for u, units in exact.items():  # a sum measured exactly: the group's N on its lattice
                answers[u] = mechanisms[u].lattice.answers(np.array([units.get(k, 0)]))
            noisy = [m.release(a, rng=randomness.stream(l, g, u)) for u, (m, a) in enumerate(zip(mechanisms, answers))]
            per_query = [mp @ noisy[0] for mp in maps[0]] if maps[0] is not None else noisy
            tables[k] = {n: dict(zip(lb, v.tolist())) for n, lb, v in zip(names, labels, per_query)}
            cell_table += [{"column": column, "group": str(k), "query": n} | row
                           for n, lb, v, pc in zip(names, labels, per_query, per_cells) for row in cell_rows(lb, v, pc)]
        released[column] = tables
        levels_block.append((column, len(keys), domain.description))
    per_group = specs[0].model_copy(update={"privacy": solution.plan.privacy})
    block = groups_block(per_group, levels_block, PLAN_PER_GROUP)
    checks = composition_checks(per_group, block)
    if not all(c.passed for c in checks):
        raise CalibrationError("certification failed: " + "; ".join(c.detail for c in checks))
    data_out = json.loads(solution.certificate.to_json())
    data_out["groups"] = block
    data_out["whole_release"] = "groups"
    data_out["checks"] = data_out["checks"] + [c.to_dict() for c in checks]
    document = {
        "name": solution.plan.name,
        "spec_sha256": solution.certificate["spec_sha256"],
        "guarantee": {"per_group": solution.certificate["guarantee"], "whole_release": block["composition"]},
        "groups": released,
        "cells": _cells(cell_table, per_cells, ["column", "group", "query"]),
        "randomness": randomness.describe(),
    }
    return solution, document, Certificate(data_out)


def _bound_once(solution: PlanSolution, counted: tuple, randomness: RandomSource) -> tuple[sources.DataSource, dict]:
    """Each person's rows cut once to the plan's ``privacy_unit`` over the cells of every categorical attribute
    (:func:`dpopt.plan.spec.plan_cells`); each query's certificate is for the bounds it then sees
    (:func:`dpopt.plan.spec.plan_unit`)."""
    data = solution.plan.data
    cells = plan_cells(data)
    levels = tuple(tuple(data.attributes[a]) for a in cells)
    query = CountingQuery("contingency_table", tuple(cells), levels, (tuple(cells),), ())
    spec = solution.designs[0].problem.spec
    spec = spec.model_copy(update={"data": data})  # the plan's own unit, not the first query's view of it
    return bound_contributions(*counted, spec, query, randomness)


def release_plan(plan: Plan | str | Path | Mapping[str, Any], data: str | Path,
                 randomness: RandomSource) -> tuple[PlanSolution, dict, dict]:
    """Solve the plan, answer every query in one pass and release each with its mechanism.

    Returns
    -------
    solution, document, operator
        The document holds one table per query (labels → noisy values), the plan's composed
        guarantee and each query's mechanism, nothing exact of the data; ``operator`` the exact number of
        records and bounding report, not private (:func:`dpopt.release.operator.operator_report`).
    """
    solution = solve_plan(_checked(plan, data))
    joint = solution.joint
    tables = []
    counted, bounding = (sources.connect(), sources.open_source(data)), None
    if solution.plan.data.privacy_unit is not None:  # bounded once, before every query: see plan_unit
        bounded, bounding = _bound_once(solution, counted, randomness)
        counted = (counted[0], bounded)
    if joint is not None:  # one release of the shared histogram, every query its post-processing
        histogram, records = sources.answer(*counted, joint.spec, query=joint.problem.query)
        noisy_histogram = joint.mechanism.release(histogram, rng=randomness.stream(0))
        noisy_answers = [m @ noisy_histogram for m in joint.maps]
        mechanism = {"family": joint.mechanism.family, "design": "joint"}
    else:
        answers, records = plan_answers(solution, data, counted)
        answers = [lattice_answer(*counted, d.problem.query, d.mechanism.lattice)  # a sum measured exactly
                   if isinstance(getattr(d.mechanism, "lattice", None), RealLattice) else a
                   for d, a in zip(solution.designs, answers)]
        noisy_answers = [d.mechanism.release(v, rng=randomness.stream(i))
                         for i, (d, v) in enumerate(zip(solution.designs, answers))]
    per_cells = plan_per_cell(solution)
    rows = []
    for design, noisy, per_cell in zip(solution.designs, noisy_answers, per_cells):
        labels = design.problem.labels
        rows += [{"query": design.name} | row for row in cell_rows(labels, noisy, per_cell)]
        tables.append({
            "name": design.name,
            "mechanism": mechanism if joint is not None else
            {"family": design.mechanism.family, "parameters": design.mechanism.parameters},
            "target": joint.spec.privacy.model_dump(exclude_none=True) if joint is not None else design.target,
            "release": dict(zip(labels, [v if np.isfinite(v) else None for v in noisy.tolist()])),
        } | ({"mean": pair_mean(design.problem.query, noisy)} if getattr(design.problem.query, "pair", False) else {}))
    document = {
        "name": solution.plan.name,
        "spec_sha256": solution.certificate["spec_sha256"],
        "guarantee": solution.certificate["guarantee"],
        "tables": tables,
        "cells": _cells(rows, per_cells, ["query"]),
        "randomness": randomness.describe(),
    } | ({} if bounding is None else {"bounding": published_bounding(bounding)})
    return solution, document, operator_report(records, bounding)


def _cells(rows: list[dict], per_cells: list[dict], keys: list[str]) -> dict:
    """The ``cells`` block of a plan release (:mod:`dpopt.release.cells`): one row per query (and group) and cell."""
    return cells_block(rows, per_cells[0]) | {
        "keys": keys, "errors": "each query's own noise: " + "; ".join(sorted({p["method"] for p in per_cells}))}


def plan_per_cell(solution: PlanSolution) -> list[dict]:
    """Each query's per-cell standard error and 95% margin of error (the ``utility.per_cell`` block format):
    its certificate's, or for a joint design the shared histogram's noise mapped by the query's map
    (:func:`dpopt.plan.joint.joint_per_cell`, recorded in the plan certificate)."""
    if solution.joint is not None:  # recorded in the plan certificate's rows (dpopt.plan.joint.joint_per_cell)
        return [row["per_cell"] for row in solution.certificate["queries"]]
    return [c["utility"]["per_cell"] for c in solution.certificates]
