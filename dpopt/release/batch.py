r"""Releasing the query for every group: one mechanism, one certificate, vectorized noise.

``release_groups(spec, data, group_by)`` solves the spec once (the per-group mechanism
and its certificate), counts the query for every group of each grouping column in SQL
(:mod:`dpopt.release.sources`, or on Dask, :mod:`dpopt.release.distributed`), and adds
noise block by block: the groups, in canonical order (as declared for a public domain,
sorted otherwise), are cut into blocks of :data:`dpopt.release.blocks.BLOCK_GROUPS`, and block b of grouping
column l is released by ``mechanism.release(answers)`` (the family's one release path,
vectorised over the groups) from its own stream ``(l, b)``
(:class:`dpopt.rng.RandomSource`). The noise of a group therefore depends only
on the root entropy, the group's rank and the block size: the single-machine and the
Dask paths give bitwise identical releases for a fixed seed.

The certificate is the spec's certificate (the guarantee **per group**) plus a
``groups`` block: the grouping columns, where each set of groups comes from, the
neighbouring relation within groups, and the guarantee of the **whole release**,
composed over the groups one record can touch (:mod:`dpopt.certificate.composition`),
with a check that ``dpopt verify`` re-derives.

Where the set of groups comes from matters: groups declared in the spec (the grouping
column listed with its levels under ``data.attributes``) or given as a public list are
released whether or not they have records. Groups merely found in the data are refused
(:func:`group_domain`): which groups exist is private (releasing them as found would publish
the set of non-empty groups, and grouping by the privacy unit's id one table per person);
keys that are not public are released by private partition selection (a spec with
``releases:``, :mod:`dpopt.selection`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpopt.certificate.composition import PER_GROUP, composition_checks, groups_block, joint_block
from dpopt.certificate.model import Certificate, write_atomic
from dpopt.core.output import output_folder
from dpopt.domain.queries import CountingQuery
from dpopt.errors import CalibrationError, SpecError, UnsupportedSpecError
from dpopt.mechanisms import Mechanism
from dpopt.mechanisms.real_lattice import RealLattice
from dpopt.release import sources
from dpopt.release.bind import as_test_release, certificate_sha256, sha256_bytes
from dpopt.release.bounding import bound_contributions, pair_mean, published_bounding
from dpopt.release.blocks import BLOCK_GROUPS, add_noise, noisy_block
from dpopt.certificate.intervals import cell_intervals
from dpopt.release.lattice_sums import lattice_answer, lattice_group_answers
from dpopt.release.cells import cell_errors, cell_rows, cells_block, document_csv, release_cells
from dpopt.release.rounded import column_mode, round_array, rounded_document
from dpopt.rng import RandomSource, random_source
from dpopt.problem import compile
from dpopt.solve import Solution, solve
from dpopt.spec.load import load_spec
from dpopt.spec.models import NumericAttribute, Spec

ENGINES = ("duckdb", "dask")


# ----------------------------------------------------------------------- domains
@dataclass(frozen=True)
class GroupDomain:
    """The groups of one grouping column: their keys in canonical order and their origin."""

    keys: np.ndarray
    description: str


def group_domain(spec: Spec, column: str, public: Sequence | str | Path | None = None) -> GroupDomain:
    """Where the groups of ``column`` come from: the spec's levels or a public list, never the data alone.

    Parameters
    ----------
    public : sequence of keys, or a CSV/Parquet file with a column named ``column``
        The public groups (sorted into canonical order).

    Raises
    ------
    SpecError
        ``column`` is the privacy unit's id, or its groups are neither declared in the spec nor given as a
        public list.
    UnsupportedSpecError
        ``column`` is declared in the spec as a numeric attribute.
    DataError
        The public list cannot be read or lacks the column.
    """
    unit = spec.data.privacy_unit
    if unit is not None and column == unit.id:
        raise SpecError("--group-by", f"{column} is the privacy unit's id (data.privacy_unit.id): grouping by it "
                                      "would publish one table per person; group by a public attribute")
    declared = spec.data.attributes.get(column)
    if isinstance(declared, NumericAttribute):
        raise UnsupportedSpecError(
            f"data.attributes.{column}",
            "a grouping column must be categorical (its levels are the groups) or left out of the spec",
        )
    if declared is not None:
        return GroupDomain(np.asarray(declared), f"declared in the spec (data.attributes.{column})")
    if public is None:
        raise SpecError("--group-by", f"the groups of {column} are not declared public: list them in the spec "
                                      f"(data.attributes.{column}: [...]) or give a public list (--groups FILE); "
                                      "which groups the data hold is private (keys that are not public: a spec with "
                                      "releases and partition selection)")
    if isinstance(public, (str, Path)):
        source = sources.open_source(public)
        con = sources.connect()
        sources.require_columns(con, source, [column])
        col = sources.quote_identifier(column)
        raw = con.execute(f"SELECT DISTINCT {col} FROM {source.sql} WHERE {col} IS NOT NULL").fetchnumpy()[
            column
        ]
        keys = np.asarray(np.ma.getdata(raw))
        label = f"public list ({Path(public).name})"
    else:
        keys, label = np.asarray(list(public)), "public list (given)"
    if keys.dtype == object:
        keys = keys.astype(str)
    return GroupDomain(sources.canonical_keys(keys), label)


# ------------------------------------------------------------------ certificate
def group_certificate(
    solution: Solution, levels: Sequence[ReleasedLevel], block: int = BLOCK_GROUPS
) -> Certificate:
    """The spec's certificate with the ``groups`` block and its composition check (with a privacy unit and one
    grouping column, the whole release is the better of the composition and the joint sensitivity of the stacked
    groups: :func:`dpopt.certificate.composition.joint_block`).

    Raises
    ------
    CalibrationError
        If the composition check fails (a certificate never states an unchecked guarantee).
    """
    data = json.loads(solution.certificate.to_json())
    problem = solution.problem
    joint, joint_checks = joint_block(solution.spec, problem.query, problem.space, solution.mechanism,
                                      [len(lv.keys) for lv in levels])
    data["groups"] = groups_block(solution.spec, [(lv.column, len(lv.keys), lv.domain) for lv in levels],
                                  PER_GROUP, block, joint)
    data["whole_release"] = "groups"
    checks = joint_checks + composition_checks(solution.spec, data["groups"], joint)
    failed = [c for c in checks if not c.passed]
    if failed:
        raise CalibrationError(
            "certification failed: " + "; ".join(f"{c.claim} ({c.detail})" for c in failed)
        )
    data["checks"] = data["checks"] + [c.to_dict() for c in checks]
    return Certificate(data)


# ---------------------------------------------------------------------- release
@dataclass(frozen=True)
class ReleasedLevel:
    """The release of one grouping column.

    Attributes
    ----------
    column : str
    keys : numpy.ndarray
        The groups, in canonical order.
    values : numpy.ndarray
        (G, d) noisy answers, row g for ``keys[g]`` (int64 for integer noise, else float64).
    domain : str
    records : int
        The number of records counted: exact, for the operator (:mod:`dpopt.release.operator`), never written.
    """

    column: str
    keys: np.ndarray
    values: np.ndarray
    domain: str
    records: int


@dataclass(frozen=True)
class GroupRelease:
    """What :func:`release_groups` returns: the noisy tables of every grouping column and one certificate
    (``bounding``: the exact bounding report, for the operator; the document carries only its published part)."""

    spec: Spec
    mechanism: Mechanism
    labels: tuple[str, ...]
    levels: tuple[ReleasedLevel, ...]
    certificate: Certificate
    randomness: dict
    bounding: dict | None = None

    def level(self, column: str) -> ReleasedLevel:
        return next(level for level in self.levels if level.column == column)

    def document(self, include_values: bool = True) -> dict:
        """The JSON release document (the values as ``{column: {key: {label: value}}}`` when included),
        naming its certificate's SHA-256 (:mod:`dpopt.release.bind`)."""
        doc = {
            "name": self.spec.name,
            "spec_sha256": self.certificate["spec_sha256"],
            "certificate_sha256": certificate_sha256(self.certificate),
            "mechanism": {
                "family": self.mechanism.family,
                "parameters": self.mechanism.parameters,
                "notes": self.mechanism.notes(),
            },
            "guarantee": self.certificate["guarantee"],
            "groups": self.certificate["groups"],
            "randomness": self.randomness,
            "labels": list(self.labels),
        } | ({} if self.bounding is None else {"bounding": published_bounding(self.bounding)})
        if include_values:
            doc["release"] = {
                level.column: {
                    str(k): dict(zip(self.labels, row.tolist())) for k, row in zip(level.keys, level.values)
                }
                for level in self.levels
            }
        doc["cells"] = self.cells(include_values)
        return doc if self.spec.output is None else rounded_document(doc, self.spec.output.decimals)

    def cells(self, include_values: bool = True) -> dict:
        """The per-cell table (:mod:`dpopt.release.cells`), one row per group and cell (keys ``column``,
        ``group``); without values, each cell's errors (the same in every group)."""
        per_cell = self.certificate["utility"]["per_cell"]
        if not include_values:
            return cells_block(cell_rows(self.labels, [None] * len(self.labels), per_cell), per_cell)
        rows = [{"column": level.column, "group": str(k)} | row for level in self.levels
                for k, values in zip(level.keys, level.values) for row in cell_rows(self.labels, values, per_cell)]
        return cells_block(rows, per_cell) | {"keys": ["column", "group"]}

    def write(self, out: str | Path, csv: bool = False, ledger: dict | None = None) -> list[Path]:
        """Write ``release_<column>.parquet`` per grouping column (one row per group: the key, then each cell's
        value, standard error, 95% margin of error and interval for the true value), and with ``csv`` the same as ``release_<column>.csv``
        (DuckDB writes doubles as text at about 1.5 M values/s: 20 s for a million groups of 12 cells);
        ``release.json`` (naming every table's SHA-256, and with the ``ledger`` block of a release charged to a
        ledger), ``certificate.json``;
        the folder whole or not at all (:func:`~dpopt.core.output.output_folder`)."""
        forms = [("parquet", "parquet")] + ([("csv", "csv, header true")] if csv else [])
        names = [f"release_{level.column}.{suffix}" for level in self.levels for suffix, _ in forms]
        names += ["release.json", "certificate.json"]
        per_cell = self.certificate["utility"]["per_cell"]
        se, moe = cell_errors(per_cell, self.labels)
        intervals = per_cell.get("intervals")
        paths = []
        with output_folder(out) as staging:
            con = sources.connect()
            for level in self.levels:
                keys = level.keys.astype(object) if level.keys.dtype.kind == "U" else level.keys
                table = {level.column: keys}
                low, high = cell_intervals(level.values, intervals) if intervals else (None, None)
                for j, label in enumerate(self.labels):  # value, standard error, 95% margin of error, interval
                    table |= {label: level.values[:, j], f"{label} standard_error": np.full(len(keys), se[j], float),
                              f"{label} margin_of_error_95": np.full(len(keys), moe[j], float)}
                    if intervals:
                        table |= {f"{label} {intervals['columns'][0]}": low[:, j],
                                  f"{label} {intervals['columns'][1]}": high[:, j]}
                if self.spec.output is not None:  # the spec's rounding (post-processing; certificate: output)
                    table = {name: column if name == level.column else
                             round_array(column, self.spec.output.decimals, column_mode(name))
                             for name, column in table.items()}
                con.register("release_table", table)
                for suffix, form in forms:
                    path = staging / f"release_{level.column}.{suffix}"
                    con.execute(f"COPY release_table TO {sources.quote_literal(str(path))} (FORMAT {form})")
                    paths.append(path)
                con.unregister("release_table")
            document = self.document(include_values=False) | ({"ledger": ledger} if ledger else {})
            document["files_sha256"] = {path.name: sha256_bytes(path.read_bytes()) for path in paths}
            write_atomic(staging / "release.json", release_json(document))
            self.certificate.write(staging / "certificate.json")
        return [Path(out) / name for name in names]


def _check_grouped_spec(spec: Spec, group_by: Sequence[str]) -> None:
    if not group_by:
        raise SpecError("--group-by", "give at least one grouping column")
    if len(set(group_by)) != len(group_by):
        raise SpecError("--group-by", "a grouping column is listed twice")
    unit = spec.data.privacy_unit
    if unit is not None and unit.max_rows is None and unit.max_groups is None:
        raise SpecError("data.privacy_unit", "a grouped release needs max_rows or max_groups: with max_rows_per_group "
                                             "alone a person's rows may reach every group")
    if spec.data.n is not None:
        raise SpecError(
            "data.n",
            "fixes the size of the whole dataset, but a grouped release has one size per "
            "group: remove data.n",
        )


def release_groups(
    spec: Spec | str | Path | Mapping,
    data: str | Path,
    group_by: str | Sequence[str],
    *,
    groups: Mapping[str, Sequence | str | Path] | None = None,
    seed: int | None = None,
    insecure_seed: bool = False,
    randomness: RandomSource | None = None,
    engine: str = "duckdb",
    client=None,
    block: int = BLOCK_GROUPS,
) -> GroupRelease:
    """Release the spec's query for every group of each grouping column, with one certificate.

    Parameters
    ----------
    spec : Spec, path or dict
    data : path
        A CSV or Parquet file of records.
    group_by : str or list of str
        Grouping column(s); a record counts in one group of each.
    groups : mapping column → keys or file, optional
        Public lists of groups (for columns the spec does not declare).
    seed, insecure_seed :
        A fixed seed is refused unless ``insecure_seed`` (see :func:`dpopt.rng.random_source`).
    randomness : RandomSource, optional
        Overrides ``seed``: the streams to draw from.
    engine : {'duckdb', 'dask'}
        Where the counts and the noise are computed; ``client`` is a dask.distributed
        Client for ``'dask'`` (default: the current one, or dask's local scheduler).

    Returns
    -------
    GroupRelease

    Raises
    ------
    SpecError, UnsupportedSpecError, DataError, CalibrationError, InsecureSeedError

    Examples
    --------
    >>> rel = release_groups("specs/block_tables_discrete_zcdp.yaml", "specs/data/blocks.csv", "block",
    ...                      groups={"block": "specs/data/block_list.csv"})  # doctest: +SKIP
    >>> rel.level("block").values.shape                                     # doctest: +SKIP
    (40, 6)
    """
    spec = load_spec(spec)
    group_by = [group_by] if isinstance(group_by, str) else list(group_by)
    _check_grouped_spec(spec, group_by)
    if engine not in ENGINES:
        raise SpecError("--engine", f"must be one of {', '.join(ENGINES)} (got {engine!r})")
    randomness = random_source(seed, insecure_seed) if randomness is None else randomness
    for public in (groups or {}).values():
        if isinstance(public, (str, Path)) and Path(public).resolve() == Path(data).resolve():
            raise SpecError("--groups", "is the data file itself: the groups found in the data are private; give "
                                        "the public list of groups")
    domains = [group_domain(spec, column, (groups or {}).get(column)) for column in group_by]
    source = sources.open_source(data)
    problem = compile(spec)
    query = problem.query
    counted, bounding, kept = [], None, None
    if engine == "dask" and spec.data.privacy_unit is not None:  # bounded on the workers, counted with the noise
        kept, bounding = _bound_dask(source, spec, query, randomness, group_by, client)
    elif engine == "dask":  # counted with the noise, after the design: the data are checked first
        _check_data(source, spec, group_by)
    else:  # counted before the design: the scan checks the data (a data error is one line before any design)
        con = sources.connect()
        if spec.data.privacy_unit is not None:  # a person's cells counted with their group keys
            source, bounding = bound_contributions(con, source, spec, query, randomness, groups=group_by)
        counted = [sources.group_answers(con, source, spec, column, domain.keys, domain.description, query=query)
                   for column, domain in zip(group_by, domains)]
    solution = solve(problem)
    lattice = getattr(solution.mechanism, "lattice", None)
    if isinstance(lattice, RealLattice) and counted:  # sums measured exactly: each group's N recounted
        counted = [lattice_group_answers(con, source, query, lattice, answers) for answers in counted]
    if engine == "dask":
        try:  # dask is an optional dependency (pip install "dpopt[dask]")
            from dpopt.release.distributed import release_level_dask
        except ImportError as exc:
            raise UnsupportedSpecError(
                "--engine", f"dask is not installed ({exc.name}): pip install 'dpopt[dask]'"
            ) from None
    levels = []
    for index, (column, domain) in enumerate(zip(group_by, domains)):
        if engine == "dask":
            keys, values, records = release_level_dask(
                source,
                spec,
                solution.mechanism,
                column,
                domain.keys,
                randomness,
                index,
                client=client,
                block=block,
                records=kept,
            )
        else:
            answers = counted[index]
            keys, records = answers.keys, answers.records
            values = add_noise(solution.mechanism, answers.values, randomness, index, block)
        levels.append(ReleasedLevel(column, keys, values, domain.description, records))
    certificate = as_test_release(group_certificate(solution, levels, block), randomness.seeded)
    return GroupRelease(
        spec, solution.mechanism, tuple(query.labels), tuple(levels), certificate, randomness.describe(), bounding
    )


def release_once(
    spec: Spec | str | Path | Mapping, data: str | Path, randomness: RandomSource, engine: str = "duckdb",
    client=None,
) -> tuple[Solution, np.ndarray, int, dict | None]:
    """The ungrouped release: φ(X) counted in SQL (or on Dask) plus one noise draw from the root stream.

    With ``data.privacy_unit`` each person's rows are first cut to its bounds
    (:func:`dpopt.release.bounding.bound_contributions`). With ``engine="dask"`` a counting query
    (a stack of marginals) is counted by :func:`dpopt.release.distributed.marginal_answer_dask`
    (``client``: a dask.distributed Client, else dask's local scheduler); the noise is the same.

    Returns
    -------
    solution, noisy answer (d,), number of records counted, the bounding report (None without a privacy unit)

    Raises
    ------
    UnsupportedSpecError
        ``engine="dask"`` with a query that is not a stack of marginals, or with a privacy unit.
    """
    problem = compile(spec)  # counted before the design: the scan checks the data (one line before any design)
    source, bounding = sources.open_source(data), None
    if engine == "dask":
        value, records = _dask_answer(problem, source, client)
    else:
        con = sources.connect()
        if problem.spec.data.privacy_unit is not None:
            source, bounding = bound_contributions(con, source, problem.spec, problem.query, randomness)
        value, records = sources.answer(con, source, problem.spec, query=problem.query)
    solution = solve(problem)
    lattice = getattr(solution.mechanism, "lattice", None)
    if isinstance(lattice, RealLattice) and engine != "dask":  # a sum or mean measured exactly: N recounted
        value = lattice_answer(con, source, problem.query, lattice)
    return solution, noisy_block(solution.mechanism, value[None, :], randomness.stream())[0], records, bounding


def _dask_answer(problem, source: sources.DataSource, client) -> tuple[np.ndarray, int]:
    """φ(X) of a stack of marginals counted on Dask, and the number of records (checked against ``data.n``)."""
    query = problem.query
    if not isinstance(query, CountingQuery) or query.workload is None:
        raise UnsupportedSpecError("--engine", "an ungrouped release on Dask counts stacks of marginals "
                                               "(marginals, contingency_table, histogram, count): use duckdb")
    if problem.spec.data.privacy_unit is not None:
        raise UnsupportedSpecError("--engine", "an ungrouped release with a privacy_unit is bounded in DuckDB: "
                                               "use --engine duckdb")
    from dpopt.release.distributed import marginal_answer_dask

    value, records = marginal_answer_dask(source, problem.spec, query, client)
    sources.check_size(problem.spec, source, records)
    return value, records


def _bound_dask(source: sources.DataSource, spec: Spec, query, randomness: RandomSource, group_by: Sequence[str],
                client) -> tuple:
    """Each person's rows bounded on Dask with their group keys
    (:func:`dpopt.release.distributed_bounding.bound_contributions_dask`): the kept rows and the report."""
    try:  # dask is an optional dependency (pip install "dpopt[dask]")
        from dpopt.release.distributed_bounding import bound_contributions_dask
    except ImportError as exc:
        raise UnsupportedSpecError("--engine", f"dask is not installed ({exc.name}): pip install 'dpopt[dask]'") \
            from None
    with client.as_current() if client is not None else nullcontext():
        return bound_contributions_dask(source, spec, query, randomness, group_by)


def _check_data(source: sources.DataSource, spec: Spec, columns: Sequence[str] = ()) -> None:
    """The file has the spec's attributes (and the grouping ``columns``), every value in its domain: checked in
    SQL before the design, so that a data error is one line before any design work (for an engine that counts
    after the design).

    Raises
    ------
    DataError
    """
    con = sources.connect()
    sources.require_columns(con, source, [*spec.data.attributes, *columns])
    sources.validate(con, source, spec)


def release_json(document: dict) -> str:
    """A release document as ``dpopt release`` prints or writes it: indented JSON, UTF-8 text, one final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def write_release(document: dict, certificate: Certificate, out: str | Path) -> list[Path]:
    """An ungrouped release in the folder ``out``: ``release.json`` (the document as
    :func:`dpopt.release.bind.bind` returns it, naming the certificate's SHA-256, and the per-cell table's),
    ``release.csv`` (the per-cell table, :func:`dpopt.release.cells.document_csv`, when the document has one)
    and ``certificate.json``; the folder whole or not at all (:func:`~dpopt.core.output.output_folder`)."""
    tables = {"release.csv": document_csv(document)} if "cells" in document else {}
    if tables:
        document = document | {"files_sha256": {n: sha256_bytes(t.encode("utf-8")) for n, t in tables.items()}}
    names = ["release.json", *tables, "certificate.json"]
    with output_folder(out) as staging:
        write_atomic(staging / "release.json", release_json(document))
        for name, text in tables.items():
            write_atomic(staging / name, text)
        certificate.write(staging / "certificate.json")
    return [Path(out) / name for name in names]


def release_document(solution: Solution, noisy: np.ndarray, randomness: RandomSource,
                     bounding: dict | None = None) -> dict:
    """The document of an ungrouped release (``dpopt release`` without ``--group-by``): the
    mechanism, the guarantee, the released value of each labelled coordinate (null for a
    coordinate the design does not release, e.g. a ``query_scaling`` test-power design), the
    randomness used (never a seed: :mod:`dpopt.release.bind`), the per-cell table
    (value, standard error, 95% margin of error: :mod:`dpopt.release.cells`) and, with a privacy unit, what
    the ``bounding`` report may publish (:func:`dpopt.release.bounding.published_bounding`: the unit and the
    method, no count) and, for a person-level mean, the ``mean`` post-processed from its pair
    (:func:`dpopt.release.bounding.pair_mean`). Nothing else of the data: the number of records is private
    under add/remove, and public under replace-one only as the spec's ``data.n`` (:mod:`dpopt.release.operator`)."""
    query = solution.problem.query
    per_cell = solution.certificate["utility"]["per_cell"]
    return {
        "name": solution.spec.name,
        "spec_sha256": solution.certificate["spec_sha256"],
        "mechanism": {"family": solution.mechanism.family, "parameters": solution.mechanism.parameters},
        "guarantee": solution.certificate["guarantee"],
        "release": dict(zip(query.labels, [v if np.isfinite(v) else None for v in noisy.tolist()])),
        "cells": release_cells(per_cell, query.labels, noisy),
        "randomness": randomness.describe(),
    } | ({} if bounding is None else {"bounding": published_bounding(bounding)}) | (
        {"mean": pair_mean(query, noisy)} if getattr(query, "pair", False) else {})
