r"""A TopDown-style release of a geographic hierarchy: every level released, then made consistent.

``release_hierarchy(spec, data)`` for a spec with ``geography: {levels: [state, county]}``:

1. splits the privacy target across the levels, nation first (:mod:`dpopt.certificate.hierarchy_budget`)
   and solves one spec per level (the spec with that level's budget), each with its own
   certificate that ``dpopt verify`` re-checks;
2. counts the query for the nation and every unit of every level in SQL (DuckDB,
   :mod:`dpopt.release.sources`); units are the distinct codes found in the data (each code
   of a level lies in one unit of the level above, checked);
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

from dpopt.certificate.composition import within_group_adjacency
from dpopt.certificate.hierarchy_budget import NATION, budget_check, level_specs
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.errors import DataError, SpecError, UnsupportedSpecError
from dpopt.postprocess import Structure, spec_structure, topdown
from dpopt.postprocess.evaluation import hierarchy_errors
from dpopt.postprocess.table import mechanism_covariance
from dpopt.problem import compile
from dpopt.release import sources
from dpopt.release.bind import as_test_release, certificate_sha256, is_seeded
from dpopt.rng import RandomSource, random_source
from dpopt.solve import Solution, solve
from dpopt.spec.load import load_spec, spec_document
from dpopt.spec.models import Postprocess, Spec

ERROR_SEED = 20260102
"""Seed of the Monte Carlo error estimate (a simulation at the published tables, not a release)."""


def _check_spec(spec: Spec) -> None:
    if spec.geography is None:
        raise SpecError("geography", "a hierarchical release needs geography: {levels: [...]}")
    if spec.invariants:
        raise UnsupportedSpecError("invariants", "a hierarchical release supports no invariants yet (every level is noisy)")
    if spec.data.n is not None:
        raise SpecError("data.n", "fixes the size of the whole dataset; a hierarchy has one size per unit: remove data.n")
    if spec.postprocess is not None and not spec.postprocess.consistent:
        raise SpecError("postprocess.consistent", "a hierarchy is post-processed top-down: consistent must be true")
    if spec.geography.exact_totals and spec.adjacency.kind == "add_remove":
        raise UnsupportedSpecError(
            "geography.exact_totals",
            "unit totals are protected under add_remove; publish them exactly only under replace_one or hamming",
        )
    clash = [c for c in spec.geography.levels if c in spec.data.attributes]
    if clash:
        raise SpecError("geography.levels", f"'{clash[0]}' is a data attribute of the table; levels name unit-code columns")


def _parents(con, source, upper: str, lower: str, upper_keys: np.ndarray, lower_keys: np.ndarray) -> np.ndarray:
    """For each unit of ``lower`` (in ``lower_keys`` order) the index of its unit in ``upper``."""
    u, low = sources.quote_identifier(upper), sources.quote_identifier(lower)
    pairs = con.execute(f"SELECT DISTINCT {low} AS child, {u} AS parent FROM {source.sql}").fetchnumpy()
    child = np.asarray(np.ma.getdata(pairs["child"]))
    parent = np.asarray(np.ma.getdata(pairs["parent"]))
    child, parent = (child.astype(str) if child.dtype == object else child), (parent.astype(str) if parent.dtype == object else parent)
    if len(sources.canonical_keys(child)) != len(child):
        raise DataError(f"{source}: a {lower} code lies in more than one {upper}; give codes unique across the nation")
    out = np.full(len(lower_keys), -1)
    out[sources.key_index(lower_keys, child)] = sources.key_index(upper_keys, parent)
    if np.any(out < 0):
        raise DataError(f"{source}: a {lower} unit has no {upper}")
    return out


@dataclass(frozen=True)
class HierarchyRelease:
    """What :func:`release_hierarchy` returns."""

    spec: Spec
    names: tuple[str, ...]
    keys: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    noisy: tuple[np.ndarray, ...]
    tables: tuple[np.ndarray, ...]
    solutions: tuple[Solution, ...]
    block: dict
    randomness: dict
    records: int

    @property
    def certificates(self) -> list[Certificate]:
        """One certificate per level: the level's own, plus the ``hierarchy`` block."""
        out = []
        for solution in self.solutions:
            data = json.loads(solution.certificate.to_json())
            data["hierarchy"] = self.block
            data["whole_release"] = "hierarchy"
            data["postprocess"] = self.block["postprocess"]
            out.append(as_test_release(Certificate(data), is_seeded(self.randomness)))
        return out

    def document(self, include_values: bool = True) -> dict:
        """The release document: levels, budget, post-processing, the SHA-256 of each level's
        certificate (:mod:`dpopt.release.bind`), and (optionally) every table."""
        labels = list(self.solutions[0].problem.labels)
        digests = {f"certificate_{name}.json": certificate_sha256(cert)
                   for name, cert in zip(self.names, self.certificates)}
        doc = {"name": self.spec.name, "spec": spec_document(self.spec), "labels": labels,
               "hierarchy": self.block, "certificate_sha256": digests, "randomness": self.randomness,
               "records": self.records}
        if include_values:
            doc["tables"] = {n: _as_dict(k, t, labels) for n, k, t in zip(self.names, self.keys, self.tables)}
            doc["noisy"] = {n: _as_dict(k, t, labels) for n, k, t in zip(self.names, self.keys, self.noisy)}
        return doc

    def write(self, out: str | Path) -> list[Path]:
        """``release.json`` (with the tables), ``certificate_<level>.json`` per level."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "release.json"]
        write_atomic(written[0], json.dumps(self.document(), indent=1, ensure_ascii=False) + "\n")
        for name, cert in zip(self.names, self.certificates):
            cert.write(out / f"certificate_{name}.json")
            written.append(out / f"certificate_{name}.json")
        return written


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

    Returns
    -------
    HierarchyRelease

    Raises
    ------
    SpecError, UnsupportedSpecError, DataError, CalibrationError, SolverError
    """
    spec = load_spec(spec)
    _check_spec(spec)
    options = spec.postprocess or Postprocess()
    randomness = random_source(seed, insecure_seed) if randomness is None else randomness
    specs, shares, how = level_specs(spec)
    problem = compile(specs[0])  # the levels differ in their budget only: one compilation serves all
    solutions = [solve(problem.restated(s)) for s in specs]
    structure = spec_structure(problem)
    con = sources.connect()
    source = sources.open_source(data)
    sources.require_columns(con, source, spec.geography.levels)
    nation, records = sources.answer(con, source, specs[0], query=problem.query)
    truth, keys = [nation[None, :]], [np.array([NATION])]
    for column in spec.geography.levels:
        answers = sources.group_answers(con, source, specs[0], column, query=problem.query)
        truth.append(answers.values)
        keys.append(answers.keys)
    parents = [np.zeros(len(keys[1]), dtype=np.int64)]
    for depth in range(1, len(spec.geography.levels)):
        upper, lower = spec.geography.levels[depth - 1], spec.geography.levels[depth]
        parents.append(_parents(con, source, upper, lower, keys[depth], keys[depth + 1]))
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
    whole, check = budget_check(spec, specs)
    names = (NATION, *spec.geography.levels)
    block = {
        "spec": spec_document(spec),
        "levels": [
            {"level": name, "units": int(len(k)), "share": str(share), "privacy": s.privacy.model_dump(exclude_none=True),
             "mechanism": {"family": sol.mechanism.family, "parameters": sol.mechanism.parameters},
             "certificate": f"certificate_{name}.json",
             "units_from": "nation (one unit)" if name == NATION else f"observed: the distinct values of {name} in the data"}
            for name, k, share, s, sol in zip(names, keys, shares, specs, solutions)
        ],
        "shares": how,
        "adjacency": within_group_adjacency(spec),
        "composition": whole,
        "checks": [check.to_dict()] + [c.to_dict() for c in result.checks],
        "postprocess": {"guarantee": "unchanged by post-processing", "method": result.method},
    }
    if totals is not None:
        block["invariants"] = ("the total of the nation and of every unit is published exactly: a record keeps its "
                               "unit under this adjacency, so unit sizes are not protected (they are in the scope)")
    if spec.adjacency.kind == "add_remove":
        block["caveat"] = ("the set of non-empty units of each level is published as found in the data; the guarantee "
                           "covers the released tables given that set")
    if error_draws:
        errors = hierarchy_errors(list(result.tables), parents, [s.mechanism for s in solutions], structure,
                                  list(names), error_draws, np.random.default_rng(ERROR_SEED), nation_values,
                                  covariances, options, totals)
        block["postprocess"]["error"] = {
            "method": f"Monte Carlo, {error_draws} releases simulated at the published tables (parametric bootstrap), "
                      f"seed {ERROR_SEED}",
            "levels": errors,
        }
    if not check.passed:
        raise SpecError("geography.shares", f"the level budgets exceed the target ({check.detail})")
    return HierarchyRelease(spec, names, tuple(keys), tuple(parents), tuple(noisy), tuple(result.tables),
                            tuple(solutions), block, randomness.describe(), records)
