"""One certified measurement of marginal tables, as ``dpopt release`` makes it.

A measurement is an ordinary dpopt spec (:func:`measurement_spec`: a ``marginals`` query) designed and
certified by :func:`dpopt.solve.solve`, counted in SQL (:mod:`dpopt.release.sources`), released by the family's
one public release (:func:`dpopt.release.blocks.noisy_block`) from its own CSPRNG stream and, when its tables are
published (``exact: false`` or a list) or scored (adaptive selection's one-way tables), post-processed to
consistent, non-negative, whole tables (:func:`dpopt.release.postprocessed.postprocess_once`: the spec's
``postprocess`` block). With ``exact: true`` (the default) the published tables are the synthetic records'
tabulations instead (:mod:`dpopt.synthesis.pipeline`), so the other measurements are not post-processed table by
table. Its certificate (with its ``postprocess`` block, if any) is embedded whole in the synthesis certificate and
verified by ``dpopt verify``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpopt.certificate.model import Certificate
from dpopt.domain.queries import compile_query
from dpopt.errors import DataError, UnsupportedSpecError
from dpopt.problem import compile
from dpopt.release import sources
from dpopt.release.blocks import noisy_block
from dpopt.release.postprocessed import postprocess_once
from dpopt.solve import Solution, solve
from dpopt.spec.load import load_spec
from dpopt.spec.models import Postprocess
from dpopt.spec.synthesis import SynthesisSpec
from dpopt.synthesis.budget import budget_parts
from dpopt.postprocess.marginals import require_roundable

Clique = tuple[str, ...]


def tabulated(spec: SynthesisSpec) -> bool:
    """Whether the published tables are the synthetic records' tabulations: ``exact: true`` (the default)."""
    return spec.synthesize.exact is None or spec.synthesize.exact is True


def measurement_spec(spec: SynthesisSpec, part: str, groups: list[list[str]], privacy: dict) -> dict:
    """The spec of one measurement: the synthesis spec's domain, adjacency, mechanism and sampler, a
    ``marginals`` query of ``groups``, the target ``privacy`` and, unless the published tables are the records'
    tabulations (:func:`tabulated`; the ``one_way`` part keeps it: the selection scores its tables), a
    ``postprocess`` block: consistent non-negative tables, whole numbers where
    :func:`~dpopt.postprocess.marginals.require_roundable` accepts it."""
    document = spec.model_dump(mode="json", exclude_none=True, include={"dpopt", "data", "adjacency", "mechanism",
                                                                        "sampler"})
    document |= {"name": f"{spec.name} ({part})", "query": {"kind": "marginals", "attributes": groups},
                 "privacy": privacy, "utility": {"metric": "l2"}}
    if tabulated(spec) and part != "one_way":
        return document
    document["postprocess"] = {"nonnegative": True, "integer": True, "consistent": True}
    try:
        require_roundable(compile_query(load_spec(document)), Postprocess())
    except UnsupportedSpecError:  # tables sharing 2+ attributes over many cells: real-valued consistent tables
        document["postprocess"]["integer"] = False
    return document


def first_measurement_spec(spec: SynthesisSpec) -> dict:
    """The spec of the measurement made before anything is selected (the whole of ``fixed``; ``adaptive``: the
    one-way marginals): it depends on the spec alone (the golden certificates check its design)."""
    part = budget_parts(spec)[0]
    privacy = {part["definition"]: {k: float(v) for k, v in part.items() if k not in ("part", "definition")}}
    if spec.synthesize.selection == "fixed":
        groups = [sorted(g, key=spec.attributes.index) for g in spec.groups()]
        return measurement_spec(spec, "measurement", groups, privacy)
    return measurement_spec(spec, "one_way", [[a] for a in spec.attributes], privacy)


@dataclass(frozen=True)
class Measurement:
    """A released (and, when its spec says so, post-processed) set of marginal tables and its certificate.

    Attributes
    ----------
    part : str
        ``measurement``, ``one_way`` or ``selected`` (the budget part it spends).
    solution : Solution
    certificate : Certificate
        With its ``postprocess`` block when post-processed (and ``test_release`` when seeded).
    tables : dict or None
        Attribute names (in domain order) → the post-processed table, axes in that order; None when the
        measurement is not post-processed (:func:`measurement_spec`).
    released : dict
        The same keys → the mechanism's noisy table before post-processing (real-valued, possibly negative).
    released_total : float
        The least-squares estimate of the number of records from the noisy tables: the grand total of their
        orthogonal projection onto consistent tables (:meth:`~dpopt.domain.marginal_algebra.MarginalWorkload.
        project`), unbiased, unlike the published total, which the non-negative projection raises.
    """

    part: str
    solution: Solution
    certificate: Certificate
    tables: dict[Clique, np.ndarray] | None
    released: dict[Clique, np.ndarray]
    released_total: float

    @property
    def cell_sd(self) -> float:
        """The root mean squared noise per cell before post-processing, √(E‖Z‖²/d) (the certified l2 error)."""
        utility = self.certificate["utility"]["value"]
        return math.sqrt(utility / self.solution.problem.query.workload.dimension)

    @property
    def total(self) -> float:
        """The post-processed tables' grand total (the same for every table: they are consistent)."""
        if self.tables is None:
            raise ValueError(f"the {self.part} measurement is not post-processed: it has no published total")
        return float(next(iter(self.tables.values())).sum())

    def table_sd(self) -> dict[Clique, float]:
        """Each table's per-cell noise standard deviation: the root mean of its cells' closed-form variances where
        the family states them (:meth:`~dpopt.mechanisms.base.Mechanism.cell_variances`), else :attr:`cell_sd`."""
        variances = self.solution.mechanism.cell_variances()
        if variances is None:
            return {k: self.cell_sd for k in self.released}
        query = self.solution.problem.query
        order = list(self.released)  # domain_order_tables keeps the workload's order
        return {k: math.sqrt(float(np.mean(variances[start:start + query.workload.algebra.size(s)])))
                for k, s, start in zip(order, query.workload.sets, query.workload.offsets)}


def measure(spec: SynthesisSpec, part: str, document: dict, data: str | Path, rng: np.random.Generator,
            seeded: bool) -> Measurement:
    """Count, design, release and post-process one measurement (module docstring).

    Raises
    ------
    DataError
        Missing columns, an off-domain value (one line naming the row, the column and the value), an empty file.
    """
    problem = compile(document)
    source = sources.open_source(data)
    value, records = sources.answer(sources.connect(), source, problem.spec, query=problem.query)
    if records == 0:
        raise DataError(f"{source}: has no records")
    solution = solve(problem)
    noisy = noisy_block(solution.mechanism, value[None, :], rng)[0]
    tables, certificate = None, solution.certificate
    if problem.spec.postprocess is not None:
        post, certificate = postprocess_once(solution, noisy, data)
        tables = domain_order_tables(spec, problem.query, post.answers)
    if seeded:
        certificate = Certificate({**certificate.data, "test_release": True})
    workload = problem.query.workload
    total = float(workload.tables(workload.project(noisy))[0].sum())
    return Measurement(part, solution, certificate, tables, domain_order_tables(spec, problem.query, noisy), total)


def domain_order_tables(spec: SynthesisSpec, query, answers) -> dict[Clique, np.ndarray]:
    """The released vector as tables keyed by their attributes in domain order, axes in that order."""
    workload, used, order = query.workload, list(query.attributes), spec.attributes
    out = {}
    for s, table in zip(workload.sets, workload.tables(np.asarray(answers, dtype=float))):
        names = [used[k] for k in s]
        axes = sorted(range(len(names)), key=lambda i: order.index(names[i]))
        out[tuple(names[i] for i in axes)] = np.transpose(table, axes)
    return out
