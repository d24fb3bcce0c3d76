"""Releasing a whole plan from a CSV/Parquet file: one DuckDB pass, one document.

One aggregate scan counts the records of every cell of the table over all the categorical
attributes the plan's counting queries use, and sums every numeric attribute a sum or mean
query uses, per cell. Every query's true answer follows from that table (a marginal of it,
then the query's matrix; a sum of the per-cell sums; a mean divides by n), and each is
released by its mechanism's :meth:`~dpopt.mechanisms.Mechanism.release` with its own
random stream (stream i for query i of the plan). A joint design (:mod:`dpopt.plan.joint`)
releases the shared histogram once (one scan, :func:`dpopt.release.sources.answer`) and
answers every query from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpopt.domain.queries import CountingQuery, compile_query
from dpopt.plan.solve import PlanSolution, solve_plan
from dpopt.release import sources
from dpopt.release.rng import RandomSource
from dpopt.spec.models import Plan, Spec


def _union(specs: list[Spec]) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """(categorical attributes of the counting queries, their levels, numeric attributes summed)."""
    attributes: dict[str, None] = {}
    numeric: dict[str, None] = {}
    for spec in specs:
        query = compile_query(spec)
        if isinstance(query, CountingQuery):
            attributes.update(dict.fromkeys(query.attributes))
        else:
            numeric[query.attribute] = None
    levels = [tuple(specs[0].data.attributes[a]) for a in attributes]
    return list(attributes), levels, list(numeric)


def plan_answers(solution: PlanSolution, data: str | Path) -> tuple[list[np.ndarray], int]:
    """Every query's true answer, from one aggregate scan of ``data``, and the number of records.

    Raises
    ------
    DataError
        Missing columns, a value outside its attribute's domain (naming the first such
        record), or a size that contradicts ``data.n``.
    """
    specs = [d.spec for d in solution.designs]
    con, source = sources.connect(), sources.open_source(data)
    sources.validate(con, source, specs[0])
    attributes, levels, numeric = _union(specs)
    cell = "0"
    for attribute, lv in zip(attributes, levels):
        cell = f"({cell}) * {len(lv)} + {sources.level_code_sql(attribute, lv)}"
    sums = "".join(f", sum({sources._number_sql(a)})" for a in numeric)
    rows = sources._run(con, source, f"SELECT {cell} AS cell, count(*){sums} FROM {source.sql} GROUP BY ALL").fetchall()
    shape = tuple(len(lv) for lv in levels)
    cells = int(np.prod(shape)) if shape else 1
    counts = np.zeros(cells)
    totals = np.zeros((len(numeric), cells))
    for row in rows:
        counts[int(row[0])] = row[1]
        for k in range(len(numeric)):
            totals[k, int(row[0])] = row[2 + k] or 0.0
    records = int(counts.sum())
    sources.check_size(specs[0], source, records)
    table = counts.reshape(shape) if shape else counts
    answers = []
    for spec in specs:
        query = compile_query(spec)
        if isinstance(query, CountingQuery):
            own = [attributes.index(a) for a in query.attributes]
            other = tuple(i for i in range(len(attributes)) if i not in own)
            marginal = table.sum(axis=other) if other else table
            kept = sorted(own)  # the summed table keeps the union's axis order; put it in the query's
            h = np.transpose(marginal, axes=[kept.index(u) for u in own]) if own else marginal
            answers.append(np.asarray(query.matrix @ np.reshape(h, -1), dtype=float))
        else:
            total = float(totals[numeric.index(query.attribute)].sum())
            answers.append(np.array([total if query.kind == "sum" else total / records]))
    return answers, records


def release_plan(plan: Plan | str | Path | Mapping[str, Any], data: str | Path,
                 randomness: RandomSource) -> tuple[PlanSolution, dict]:
    """Solve the plan, answer every query in one pass and release each with its mechanism.

    Returns
    -------
    solution, document
        The document holds one table per query (labels → noisy values), the plan's composed
        guarantee and each query's mechanism.
    """
    solution = solve_plan(plan)
    joint = solution.joint
    tables = []
    if joint is not None:  # one release of the shared histogram, every query its post-processing
        histogram, records = sources.answer(sources.connect(), sources.open_source(data), joint.spec)
        noisy_histogram = joint.mechanism.release(histogram, rng=randomness.stream(0))
        noisy_answers = [m @ noisy_histogram for m in joint.maps]
        mechanism = {"family": joint.mechanism.family, "design": "joint"}
    else:
        answers, records = plan_answers(solution, data)
        noisy_answers = [d.mechanism.release(v, rng=randomness.stream(i))
                         for i, (d, v) in enumerate(zip(solution.designs, answers))]
    for design, noisy in zip(solution.designs, noisy_answers):
        labels = compile_query(design.spec).labels
        tables.append({
            "name": design.name,
            "mechanism": mechanism if joint is not None else
            {"family": design.mechanism.family, "parameters": design.mechanism.parameters},
            "target": joint.spec.privacy.model_dump(exclude_none=True) if joint is not None else design.target,
            "release": dict(zip(labels, [v if np.isfinite(v) else None for v in noisy.tolist()])),
        })
    document = {
        "name": solution.plan.name,
        "spec_sha256": solution.certificate["spec_sha256"],
        "guarantee": solution.certificate["guarantee"],
        "tables": tables,
        "randomness": randomness.describe(),
        "records": records,
    }
    return solution, document
