r"""The grouped release on Dask, for record files that outgrow one machine.

The same release as :mod:`dpopt.release.batch`, computed by ``dask.dataframe`` (a
``dask.distributed`` cluster when a Client is active, dask's local scheduler otherwise):

1. each partition of records is checked against the spec's domain and encoded as
   (group key, cell, weight) — the cell of the histogram as in :mod:`dpopt.release.sources`,
   weight 1 for counting queries and the value for a bounded sum;
2. the weights are summed per (key, cell) across partitions (a distributed group-by,
   persisted on the workers); only the distinct keys come back to the client, to put the
   groups in canonical order (sorted, or as declared for a public domain);
3. the (key, cell) sums are tagged with their group's rank and block b = ⌊rank/B⌋ and
   shuffled by block; each worker builds the block's answers and adds noise from the
   block's own stream (l, b), :func:`dpopt.release.blocks.noisy_block`.

A block's noise depends only on the root entropy, the block index and the groups in it,
so the result is bitwise identical to the single-machine path for a fixed seed (for a
bounded sum the true sums may differ in the last bits: floating-point addition order).

Steps 1–2 alone (:func:`cell_sums`) also count a release plan's shared table per group
(:func:`table_sums_dask`, for :func:`dpopt.plan.release.release_plan_groups`).
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.errors import DataError, UnsupportedSpecError
from dpopt.mechanisms import Mechanism
from dpopt.release.blocks import BLOCK_GROUPS, noisy_block
from dpopt.rng import RandomSource
from dpopt.release.sources import (
    DataSource,
    GroupAnswers,
    apply_query,
    canonical_keys,
    describe_value,
    key_index,
)
from dpopt.spec.models import NumericAttribute, Spec


def read_records(source: DataSource, columns: list[str], split_row_groups: bool = False) -> dd.DataFrame:
    """The file as a Dask DataFrame of ``columns``.

    CSV columns are read as text with only empty fields missing, as DuckDB reads them; with
    ``split_row_groups`` a Parquet file is one partition per row group.
    """
    try:
        if source.format == "csv":
            return dd.read_csv(
                str(source.path), dtype=str, keep_default_na=False, na_values=[""], usecols=columns
            )
        if split_row_groups:
            return dd.read_parquet(str(source.path), columns=columns, split_row_groups=True)
        return dd.read_parquet(str(source.path), columns=columns)
    except (OSError, ValueError, KeyError) as exc:
        reason = exc.__cause__ or exc  # dask wraps the reader's own message
        raise DataError(f"cannot read data file {source}: {str(reason).splitlines()[0]}") from None


def level_codes(series: pd.Series, levels) -> np.ndarray:
    """Each value's index among the levels (compared as text), −1 when missing or not a level.

    A categorical column (Parquet dictionary) is mapped through its few categories only.
    """
    index = pd.Index(list(levels))
    if isinstance(series.dtype, pd.CategoricalDtype):
        by_category = index.get_indexer(series.cat.categories.astype(str))
        codes = series.cat.codes.to_numpy()
        return np.where(codes >= 0, by_category[codes], -1).astype(np.int64)
    codes = index.get_indexer(series.astype(str)).astype(np.int64)
    codes[series.isna().to_numpy()] = -1
    return codes


def _invalid(series: pd.Series, domain) -> np.ndarray:
    """The pandas reading of :func:`dpopt.release.sources.invalid_sql`."""
    if isinstance(domain, NumericAttribute):
        x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        return series.isna().to_numpy() | np.isnan(x) | (x < domain.min) | (x > domain.max)
    return level_codes(series, domain) < 0


def _problems(part: pd.DataFrame, spec: Spec, column: str) -> pd.DataFrame:
    """The first off-domain value of this partition (declared attribute order), or a missing group key."""
    for name, domain in spec.data.attributes.items():
        bad = np.flatnonzero(_invalid(part[name], domain))
        if bad.size:
            value = part[name].iloc[bad[0]]
            return pd.DataFrame({"column": [name], "value": [None if pd.isna(value) else str(value)]})
    if part[column].isna().any():
        return pd.DataFrame({"column": [column], "value": [None]})
    return pd.DataFrame({"column": pd.Series([], dtype=object), "value": pd.Series([], dtype=object)})


def cell_codes(part: pd.DataFrame, attributes, levels) -> np.ndarray:
    """Each record's cell of the table over ``attributes`` (row-major, the last attribute fastest,
    as :func:`dpopt.release.sources.level_code_sql` numbers it); −1 when a value is not a level."""
    cell = np.zeros(len(part), dtype=np.int64)
    for attribute, lv in zip(attributes, levels):
        codes = level_codes(part[attribute], lv)
        cell = np.where((cell < 0) | (codes < 0), -1, cell * len(lv) + codes)
    return cell


def _encode(part: pd.DataFrame, column: str, query) -> pd.DataFrame:
    """(key, cell, weight) per record; records with an off-domain value get cell −1."""
    if isinstance(query, CountingQuery):
        cell = cell_codes(part, query.attributes, query.levels)
        weight = np.ones(len(part), dtype=np.int64)
    else:
        cell = np.zeros(len(part), dtype=np.int64)
        weight = pd.to_numeric(part[query.attribute], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return pd.DataFrame({"key": part[column].to_numpy(), "cell": cell, "weight": weight}, index=part.index)


def _encode_table(part: pd.DataFrame, column: str, attributes, levels, numeric) -> pd.DataFrame:
    """(key, cell, 1, value of each numeric attribute) per record."""
    frame = {"key": part[column].to_numpy(), "cell": cell_codes(part, attributes, levels),
             "count": np.ones(len(part), dtype=np.int64)}
    for k, attribute in enumerate(numeric):
        frame[f"sum{k}"] = pd.to_numeric(part[attribute], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return pd.DataFrame(frame, index=part.index)


def table_sums_dask(source: DataSource, spec: Spec, column: str, attributes: list[str], levels,
                    numeric: list[str], client=None) -> list[tuple]:
    """Per group of ``column`` and cell of the table over ``attributes``: the number of records
    and the sum of each ``numeric`` attribute, counted on Dask (the rows of the SQL
    ``SELECT key, cell, count(*), sum(x₁), … GROUP BY key, cell``).

    Returns
    -------
    list of (key, cell, count, sum₁, …) for the (key, cell) pairs that hold records
    """
    weights = {"count": np.int64} | {f"sum{k}": float for k in range(len(numeric))}
    encode = partial(_encode_table, attributes=attributes, levels=levels, numeric=numeric)
    with client.as_current() if client is not None else nullcontext():
        sums, _ = cell_sums(source, spec, column, encode, weights)
        table = sums.compute()
    return list(table[["key", "cell", *weights]].itertuples(index=False, name=None))


def _tag(part: pd.DataFrame, keys: np.ndarray, block: int) -> pd.DataFrame:
    rank = key_index(keys, _plain(part["key"].to_numpy()))
    return pd.DataFrame(
        {
            "rank": rank,
            "block": rank // block,
            "cell": part["cell"].to_numpy(),
            "weight": part["weight"].to_numpy(),
        }
    )


def _blocks(
    part: pd.DataFrame,
    query,
    mechanism: Mechanism | None,
    randomness: RandomSource | None,
    level: int,
    block: int,
    groups: int,
    columns: list[str],
) -> pd.DataFrame:
    """Answers (noisy when a mechanism is given) of every block held in this partition."""
    frames = []
    for b, rows in part.groupby("block", sort=True):
        start = int(b) * block
        size = min(block, groups - start)
        cells = query.cells if isinstance(query, CountingQuery) else 1
        dtype = np.int64 if isinstance(query, CountingQuery) else float
        flat = (rows["rank"].to_numpy() - start) * cells + rows["cell"].to_numpy()
        sums = np.bincount(flat, weights=rows["weight"].to_numpy(), minlength=size * cells)
        hist = sums.reshape(size, cells).astype(dtype)  # counts are exact in float64 below 2^53
        answers = apply_query(query, hist) if isinstance(query, CountingQuery) else hist
        values = (
            answers
            if mechanism is None
            else noisy_block(mechanism, answers, randomness.stream(level, int(b)))
        )
        frame = pd.DataFrame(values, columns=columns)
        frame.insert(0, "rank", np.arange(start, start + size))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else _empty(columns)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"rank": pd.Series([], dtype=np.int64)} | {c: pd.Series([], dtype=float) for c in columns}
    )


def _plain(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(str) if values.dtype == object else values


def cell_sums(source: DataSource, spec: Spec, column: str, encode, weights: dict,
              records: dd.DataFrame | None = None) -> tuple[dd.DataFrame, int]:
    """The weights of the records summed per (group key, cell), persisted on the workers, and the
    number of records — after checking every value against the spec's domain.

    Parameters
    ----------
    encode
        ``encode(partition, column)`` → a frame of ``key``, ``cell`` and the ``weights`` columns.
    weights
        The weight columns' names and dtypes.
    records
        The records to count (default: the file's), e.g. the rows a privacy unit's bounding kept
        (:func:`dpopt.release.distributed_bounding.bound_contributions_dask`).

    Raises
    ------
    DataError
        An unreadable file or missing column, the first off-domain value, or a missing group key.
    """
    if records is None:
        records = read_records(source, list(dict.fromkeys([*spec.data.attributes, column])))
    problems = records.map_partitions(_problems, spec, column, meta={"column": object, "value": object})
    coded = records.map_partitions(encode, column, meta={"key": records[column].dtype, "cell": np.int64, **weights})
    sums = coded.groupby(["key", "cell"])[list(weights)].sum(split_out=max(1, records.npartitions // 4))
    sums, problems, total = dask.persist(sums.reset_index(), problems, coded["cell"].count())
    found = problems.compute()
    if len(found):
        name, value = found.iloc[0]["column"], found.iloc[0]["value"]
        if name == column and column not in spec.data.attributes:
            raise DataError(f"{source}, column {column}: missing group key")
        raise DataError(f"{source}, {describe_value(source, name, spec.data.attributes[name], value)}")
    return sums, int(total.compute())


def _blocked_sums(source: DataSource, spec: Spec, column: str, keys: np.ndarray | None, block: int,
                  records: dd.DataFrame | None = None):
    """(keys, records, a Dask frame of (rank, block, cell, weight) with a zero row in every block), counting
    ``records`` (default: the file's)."""
    query = compile_query(spec)
    if isinstance(query, NumericQuery) and query.kind == "mean":
        raise UnsupportedSpecError(
            "query.kind", "a grouped mean needs a public size per group: release the sum per group instead"
        )
    if isinstance(query, CountingQuery):  # the Dask engine counts each block's histogram over the query's cells
        require_memory(dense_bytes(block, query.cells), f"a block of {block} groups' {query.cells}-cell histograms "
                                                        "in the Dask engine (use the DuckDB engine for marginals)")
    weight = {"weight": np.int64 if isinstance(query, CountingQuery) else float}
    sums, total = cell_sums(source, spec, column, partial(_encode, query=query), weight, records)
    observed = canonical_keys(_plain(sums["key"].unique().compute().to_numpy()))
    if keys is None:
        keys = observed
    else:
        outside = key_index(keys, observed) < 0
        if outside.any():
            raise DataError(
                f"{source}, column {column}: {observed[outside][0].item()!r} is not one of the public groups"
            )
    tagged = sums.map_partitions(
        _tag,
        keys,
        block,
        meta={"rank": np.int64, "block": np.int64, "cell": np.int64, "weight": sums["weight"].dtype},
    )
    n_blocks = -(-len(keys) // block)
    markers = pd.DataFrame(
        {
            "rank": np.arange(n_blocks) * block,
            "block": np.arange(n_blocks),
            "cell": 0,
            "weight": np.zeros(n_blocks, dtype=tagged["weight"].dtype),
        }
    )
    both = dd.concat([tagged, dd.from_pandas(markers, npartitions=1)])
    return (
        keys,
        total,
        both.shuffle("block", npartitions=max(1, min(n_blocks, both.npartitions))),
    )


def _gather(blocked, query, mechanism, randomness, level: int, block: int, groups: int, d: int) -> np.ndarray:
    columns = [f"v{j}" for j in range(d)]
    integer = isinstance(query, CountingQuery) and (
        mechanism is None or mechanism.integer_release
    )
    meta = _empty(columns).astype({c: np.int64 if integer else float for c in columns})
    out = blocked.map_partitions(
        _blocks, query, mechanism, randomness, level, block, groups, columns, meta=meta
    ).compute()
    out = out.sort_values("rank")
    return out[columns].to_numpy()


def group_answers_dask(
    source: DataSource,
    spec: Spec,
    column: str,
    keys: np.ndarray | None = None,
    domain: str = "observed",
    client=None,
    block: int = BLOCK_GROUPS,
) -> GroupAnswers:
    """The true answers per group computed on Dask (the counts the release adds noise to)."""
    query = compile_query(spec)
    with client.as_current() if client is not None else nullcontext():
        keys, records, blocked = _blocked_sums(source, spec, column, keys, block)
        values = _gather(blocked, query, None, None, 0, block, len(keys), query.dimension)
    return GroupAnswers(column, keys, values, domain, records)


def release_level_dask(
    source: DataSource,
    spec: Spec,
    mechanism: Mechanism,
    column: str,
    keys: np.ndarray | None,
    randomness: RandomSource,
    level: int,
    client=None,
    block: int = BLOCK_GROUPS,
    records: dd.DataFrame | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The noisy answers of every group of ``column``, counted and noised on the Dask workers (from
    ``records``, default the file's: with a privacy unit, the rows bounding kept).

    Returns
    -------
    keys (canonical order), values (G × d), number of records
    """
    query = compile_query(spec)
    with client.as_current() if client is not None else nullcontext():
        keys, records, blocked = _blocked_sums(source, spec, column, keys, block, records)
        values = _gather(blocked, query, mechanism, randomness, level, block, len(keys), query.dimension)
    return keys, values, records


# ------------------------------------------------------------------ an ungrouped marginal workload
def _partition_marginals(part: pd.DataFrame, query: CountingQuery) -> np.ndarray:
    """This partition's counts of every distinct attribute set of the workload, each table laid out with
    its attributes in increasing order, concatenated (:func:`marginal_answer_dask` adds them up)."""
    workload = query.workload
    codes = [level_codes(part[a], lv) for a, lv in zip(query.attributes, query.levels)]
    valid = np.logical_and.reduce([c >= 0 for c in codes]) if codes else np.ones(len(part), dtype=bool)
    codes = [c[valid].astype(np.int32) for c in codes]  # an off-domain record is named by the check, never counted
    tables = []
    for t in sorted(set(workload.sets)):
        cell = np.zeros(int(valid.sum()), dtype=np.int32 if workload.algebra.size(t) < 2**31 else np.int64)
        for k in t:  # row-major, the last attribute of t fastest
            cell = cell * workload.algebra.sizes[k] + codes[k]
        tables.append(np.bincount(cell, minlength=workload.algebra.size(t)).astype(np.int64))
    return np.concatenate(tables) if tables else np.zeros(0, dtype=np.int64)


def _add(*parts: np.ndarray) -> np.ndarray:
    return np.sum(parts, axis=0)


def marginal_answer_dask(source: DataSource, spec: Spec, query: CountingQuery, client=None,
                         fan_in: int = 8) -> tuple[np.ndarray, int]:
    """The released vector of a counting query whose :attr:`~CountingQuery.workload` is a stack of marginals,
    counted on Dask: per partition, one ``bincount`` per distinct attribute set of the workload (never the
    histogram), summed across partitions in a tree of fan-in ``fan_in``, then laid out as the blocks
    (:meth:`MarginalWorkload.vector`), the same vector :func:`dpopt.release.sources.answer` counts in SQL.

    Returns
    -------
    values (d,) float, number of records

    Raises
    ------
    DataError
        An unreadable file or missing column, the first off-domain value (declared attribute order).
    """
    workload = query.workload
    with client.as_current() if client is not None else nullcontext():
        partitions = read_records(source, list(spec.data.attributes), split_row_groups=True).to_delayed()
        # the first attribute stands for the group key: a missing value of it is off-domain anyway
        checks = [dask.delayed(_problems)(p, spec, next(iter(spec.data.attributes))) for p in partitions]
        parts = [dask.delayed(_partition_marginals)(p, query) for p in partitions]
        while len(parts) > 1:
            parts = [dask.delayed(_add)(*parts[i:i + fan_in]) for i in range(0, len(parts), fan_in)]
        found, counts = dask.compute(checks, parts[0])
    found = [f for f in found if len(f)]
    if found:
        name, value = found[0].iloc[0]["column"], found[0].iloc[0]["value"]
        raise DataError(f"{source}, {describe_value(source, name, spec.data.attributes[name], value)}")
    sets = sorted(set(workload.sets))
    offsets = np.cumsum([0] + [workload.algebra.size(t) for t in sets])
    by_set = {t: counts[offsets[i]: offsets[i + 1]].reshape(workload.algebra.table_shape(t))
              for i, t in enumerate(sets)}
    vector = workload.vector([by_set[t] for t in workload.sets])
    records_counted = int(counts[: offsets[1]].sum()) if sets else 0
    return vector.astype(float), records_counted
