r"""Contribution bounding on Dask: the same kept rows as :mod:`dpopt.release.bounding` in DuckDB.

Record files that outgrow one machine are bounded on the Dask workers with the semantics and the
keys of the SQL engine, so that the same file and the same 256-bit secret keep exactly the same rows:

1. every record gets its 1-based position in the file r (a cumulative sum across partitions, the
   ``row_number() OVER ()`` of the SQL) and its row key ``sha256(secret ':' r)`` (hex, as DuckDB's
   ``sha256``); its cell is the query's level codes joined by commas ('' for a count or a sum);
2. the records are shuffled by person (``id``), so each person's rows meet in one partition;
3. per person, in pandas: at most c rows per cell (the c smallest row keys), then at most g cells
   (the g smallest ``sha256(secret ':' cell ':' id)``, a dense rank), then at most k rows (the k
   smallest row keys) — the three window functions of :func:`dpopt.release.bounding.bounding_sql`.

Each choice is a uniformly random subset per person for the reasons given in
:mod:`dpopt.release.bounding` (SHA-256 with a secret prefix modelled as a random function). Numeric
values outside their bounds are clamped and counted as there; the counts reported are not private.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import dask
import dask.dataframe as dd
import pandas as pd

from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.domain.records import person_id_problem
from dpopt.errors import DataError
from dpopt.release.bounding import BOUNDING_STREAM, TRUNCATION_CAVEAT
from dpopt.release.distributed import _problems, level_codes, read_records
from dpopt.release.sources import DataSource, describe_value
from dpopt.rng import RandomSource
from dpopt.spec.models import NumericAttribute, Spec

_KEYS = ["dpopt_rn", "dpopt_cell", "dpopt_row_key"]


def _digest(texts) -> list[str]:
    return [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]


def _keyed(part: pd.DataFrame, query: CountingQuery | NumericQuery, secret: str,
           groups: Sequence[str] = ()) -> pd.DataFrame:
    """The partition with its cell (each grouping column's value as its length, '#' and the text, then the level
    codes, joined by commas, as :func:`dpopt.release.bounding._cell_key_sql`) and row key (``sha256(secret ':' r)``)."""
    parts = [[f"{len(v)}#{v}" for v in part[g].astype(str)] for g in groups]
    if isinstance(query, CountingQuery) and query.attributes:
        parts += [level_codes(part[a], lv).astype(str) for a, lv in zip(query.attributes, query.levels)]
    cell = [",".join(c) for c in zip(*parts)] if parts else [""] * len(part)
    return part.assign(dpopt_cell=cell,
                       dpopt_row_key=_digest(f"{secret}:{r}" for r in part["dpopt_rn"].to_numpy()))


def _bound_persons(part: pd.DataFrame, pid: str, unit, secret: str) -> pd.DataFrame:
    """The rows kept of the persons in this partition (each person whole in it), the file's columns only."""
    part = part.sort_values("dpopt_row_key", kind="stable")
    if unit.max_rows_per_group is not None:
        part = part[part.groupby([pid, "dpopt_cell"], sort=False).cumcount().to_numpy() < unit.max_rows_per_group]
    if unit.max_groups is not None:
        cells = part[[pid, "dpopt_cell"]].drop_duplicates()
        cells = cells.assign(key=_digest(f"{secret}:{c}:{p}" for p, c in cells.itertuples(index=False)))
        cells = cells.sort_values("key", kind="stable")
        chosen = cells[cells.groupby(pid, sort=False).cumcount().to_numpy() < unit.max_groups]
        keep = pd.MultiIndex.from_frame(part[[pid, "dpopt_cell"]]).isin(pd.MultiIndex.from_frame(chosen[[pid, "dpopt_cell"]]))
        part = part[keep]
    if unit.max_rows is not None:
        part = part[part.groupby(pid, sort=False).cumcount().to_numpy() < unit.max_rows]
    return part.drop(columns=_KEYS)


def _bad_ids(ids: pd.Series) -> pd.Series:
    """Which values cannot be person ids (:func:`dpopt.domain.records.person_id_problem`; pandas' missing
    values, NaN, None or NA, are missing ids)."""
    return ids.isna() | ids.map(lambda v: person_id_problem(v) is not None, na_action="ignore").fillna(False).astype(bool)


def _clamp(records: dd.DataFrame, spec: Spec) -> tuple[dd.DataFrame, dict]:
    """Numbers outside their attribute's bounds clamped (kept as text, as the SQL engine keeps them), and
    the lazy count of each numeric attribute's clamped values."""
    counts = {}
    for name, domain in spec.data.attributes.items():
        if not isinstance(domain, NumericAttribute):
            continue
        x = dd.to_numeric(records[name], errors="coerce")
        outside = (x < domain.min) | (x > domain.max)
        counts[name] = outside.sum()
        records = records.assign(**{name: records[name].mask(outside, x.clip(domain.min, domain.max).astype(str))})
    return records, counts


def _numbered(records: dd.DataFrame) -> dd.DataFrame:
    """The records with their 1-based position in the file, ``dpopt_rn``."""
    ones = records.assign(dpopt_rn=1)
    return ones.assign(dpopt_rn=ones["dpopt_rn"].cumsum())


def bound_records_dask(records: dd.DataFrame, spec: Spec, query: CountingQuery | NumericQuery,
                       secret: str, groups: Sequence[str] = ()) -> dd.DataFrame:
    """The records each person keeps under ``spec.data.privacy_unit`` (see the module), keyed by ``secret``
    (hex text, as :func:`dpopt.release.bounding.bounding_sql` takes it); with grouping columns ``groups`` a
    cell is a group's cell, as there."""
    unit = spec.data.privacy_unit
    numbered = _numbered(records)
    meta = numbered._meta.assign(dpopt_cell=pd.Series([], dtype=object), dpopt_row_key=pd.Series([], dtype=object))
    keyed = numbered.map_partitions(_keyed, query, secret, tuple(groups), meta=meta)
    by_person = keyed.shuffle(unit.id, npartitions=keyed.npartitions)
    return by_person.map_partitions(_bound_persons, unit.id, unit, secret, meta=records._meta)


def bound_contributions_dask(source: DataSource, spec: Spec, query: CountingQuery | NumericQuery,
                             randomness: RandomSource, groups: Sequence[str] = ()) -> tuple[dd.DataFrame, dict]:
    """:func:`dpopt.release.bounding.bound_contributions` on Dask: clamp, keep each person's rows within the
    bounds (the secret from the same CSPRNG stream, so the same seed keeps the same rows), and report; with
    grouping columns ``groups`` a person's cells are counted with their group keys (``dpopt release --group-by
    --engine dask``). DuckDB keys a group by its value cast to text, Dask by the file's text: text keys (or
    Parquet columns of strings) give both engines the same cells, hence the same kept rows.

    Returns
    -------
    kept : dask.dataframe.DataFrame
        The kept rows (the spec's attributes and the id column), persisted (on the workers of a cluster).
    report : dict
        As the SQL engine's: ``privacy_unit``, ``clamped``, ``rows``, ``rows_kept``, ``rows_dropped``,
        ``persons``, ``persons_truncated``, ``method`` and the ``note`` that these counts are not private.

    Raises
    ------
    DataError
        An unreadable file or a missing column, a record without an id, with a blank id or an id with
        surrounding whitespace (naming the row, as the SQL engine), or a value outside
        the spec's domain once numbers are clamped (naming the column and the value).
    """
    unit = spec.data.privacy_unit
    records = read_records(source, list(dict.fromkeys([*spec.data.attributes, unit.id, *groups])))
    numbered = _numbered(records)
    ids = numbered[unit.id]
    bad = ids.map_partitions(_bad_ids, meta=(unit.id, bool))
    first = numbered["dpopt_rn"][bad].min()
    records, clamped = _clamp(records, spec)
    problems = records.map_partitions(_problems, spec, unit.id, meta={"column": object, "value": object})
    secret = randomness.stream(*BOUNDING_STREAM).bytes(32).hex()
    kept = bound_records_dask(records, spec, query, secret, groups).persist()  # counted below and by the caller
    per_raw = records.groupby(unit.id).size()
    per_kept = kept.groupby(unit.id).size()
    first, found = dask.compute(first, problems)
    if pd.notna(first):  # the rule of dpopt.domain.records.person_id_problem
        value = ids[numbered["dpopt_rn"] == first].compute().iloc[0]
        problem = person_id_problem(None if pd.isna(value) else value)
        raise DataError(f"{source} {source.where(int(first) - 1)}, column {unit.id}: {problem}")
    if len(found):
        name, value = found.iloc[0]["column"], found.iloc[0]["value"]
        raise DataError(f"{source}, {describe_value(source, name, spec.data.attributes[name], value)}")
    clamped, per_raw, per_kept = dask.compute(clamped, per_raw, per_kept)
    truncated = int((per_kept.reindex(per_raw.index, fill_value=0) < per_raw).sum())
    report = {
        "privacy_unit": unit.model_dump(exclude_none=True),
        "clamped": {name: int(n) for name, n in clamped.items()},
        "rows": int(per_raw.sum()), "rows_kept": int(per_kept.sum()),
        "rows_dropped": int(per_raw.sum() - per_kept.sum()),
        "persons": len(per_raw), "persons_truncated": truncated,
        "method": "per person, uniformly random rows (Dask: rows keyed by SHA-256 with a 256-bit CSPRNG secret, "
                  "shuffled by person): ≤ max_rows_per_group per cell, then ≤ max_groups cells, then ≤ max_rows",
        "note": TRUNCATION_CAVEAT,
    }
    return kept, report
