r"""Records read through DuckDB: CSV and Parquet, counts computed in SQL.

No row reaches Python on the release path. For a counting query each record's cell of
the histogram h (row-major over the query's attributes, first attribute slowest, as in
:mod:`dpopt.domain.queries`) is computed in SQL,

.. code-block:: sql

    (CASE CAST(a AS VARCHAR) WHEN 'a0' THEN 0 WHEN 'a1' THEN 1 END) * |b|
      + (CASE CAST(b AS VARCHAR) WHEN 'b0' THEN 0 ... END)

and DuckDB counts records per (group, cell); the answer is φ = A h with the query's
sparse matrix A. A ``marginals`` query is counted table by table instead, in one
``GROUP BY GROUPING SETS`` scan over the level codes (:func:`marginals_by_key`): the
histogram over all its attributes is never formed; a ``kronecker`` query counts the marginals
over its terms' supports that way and applies its factors (prefix sums, ranges) to them. A value outside the spec's domain gives a NULL cell, which the same
scan detects; only then does a second query locate the first offending record so that
the :class:`~dpopt.errors.DataError` names the row, the column and the value, with the
messages of :func:`dpopt.domain.records.validate_records` (CSV files are read as text,
as the ``csv`` module did; Parquet columns keep their types and are compared by their
text form for categorical attributes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from dpopt.core.memory import dense_bytes, require_memory
from dpopt.domain.queries import CountingQuery, KroneckerQuery, NumericQuery, compile_query
from dpopt.errors import DataError, UnsupportedSpecError
from dpopt.spec.models import NumericAttribute, Spec

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def quote_identifier(name: str) -> str:
    """A SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """A SQL string literal, single-quoted."""
    return "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True)
class DataSource:
    """A CSV or Parquet file of records, one column per attribute.

    Attributes
    ----------
    path : Path
    format : {'csv', 'parquet'}
    """

    path: Path
    format: str

    @property
    def sql(self) -> str:
        """The table expression DuckDB scans."""
        if self.format == "csv":
            return f"read_csv({quote_literal(str(self.path))}, header = true, all_varchar = true)"
        return f"read_parquet({quote_literal(str(self.path))})"

    def where(self, index: int) -> str:
        """How a message names record ``index`` (0-based): the CSV line, or the Parquet record number."""
        return f"row {index + 2}" if self.format == "csv" else f"record {index + 1}"

    def __str__(self) -> str:
        return str(self.path)


def open_source(path: str | Path) -> DataSource:
    """A data source from a file name (``.csv``, ``.parquet`` or ``.pq``).

    Raises
    ------
    DataError
        The file does not exist or its format is not known.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"cannot read data file {path}: no such file")
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"cannot read data file {path}: use a .csv or .parquet file")
    return DataSource(path, fmt)


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection."""
    return duckdb.connect(":memory:")


def _run(con: duckdb.DuckDBPyConnection, source: DataSource, sql: str):
    try:
        return con.execute(sql)
    except duckdb.InterruptException:  # Ctrl-C during the query: an interrupt, not a bad data file
        raise KeyboardInterrupt from None
    except duckdb.Error as exc:
        raise DataError(f"cannot read data file {source}: {str(exc).splitlines()[0]}") from None


def columns(con: duckdb.DuckDBPyConnection, source: DataSource) -> list[str]:
    """The column names of the file."""
    return [row[0] for row in _run(con, source, f"DESCRIBE SELECT * FROM {source.sql}").fetchall()]


def require_columns(con: duckdb.DuckDBPyConnection, source: DataSource, names: Sequence[str]) -> None:
    """Raise DataError naming the columns the file lacks."""
    present = set(columns(con, source))
    missing = [n for n in names if n not in present]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}")


# ----------------------------------------------------------------- SQL fragments
def level_code_sql(column: str, levels: Sequence[str]) -> str:
    """The level index of ``column`` (NULL when the value is not a level)."""
    cases = " ".join(f"WHEN {quote_literal(level)} THEN {i}" for i, level in enumerate(levels))
    return f"(CASE CAST({quote_identifier(column)} AS VARCHAR) {cases} END)"


def cell_sql(query: CountingQuery) -> str:
    """The record's cell of the histogram over the query's attributes (row-major), NULL if off-domain."""
    if not query.attributes:
        return "0"
    expr = "0"
    for attribute, levels in zip(query.attributes, query.levels):
        expr = f"({expr}) * {len(levels)} + {level_code_sql(attribute, levels)}"
    return expr


def _number_sql(column: str) -> str:
    """The value as a DOUBLE, NULL when it is not a number (surrounding blanks allowed, as float() does).

    The ``trim`` also keeps DuckDB (2.0) from pushing the TRY_CAST of a CSV column into the
    reader as a strict conversion that fails on the first non-number.
    """
    return f"TRY_CAST(trim(CAST({quote_identifier(column)} AS VARCHAR)) AS DOUBLE)"


def invalid_sql(name: str, domain) -> str:
    """A predicate true for a value outside the attribute's domain (NULL, not a level, not a number,
    NaN, or out of bounds)."""
    col = quote_identifier(name)
    if isinstance(domain, NumericAttribute):
        x = _number_sql(name)
        return f"({x} IS NULL OR isnan({x}) OR {x} < {domain.min!r} OR {x} > {domain.max!r})"
    levels = ", ".join(quote_literal(level) for level in domain)
    return f"({col} IS NULL OR CAST({col} AS VARCHAR) NOT IN ({levels}))"


# -------------------------------------------------------------------- validation
def describe_value(source: DataSource, name: str, domain, value) -> str:
    """'column C: V is not a level (…)' / 'is not a number' / 'is outside [a, b]', as the csv reader said."""
    shown = "" if value is None and source.format == "csv" else value
    if isinstance(domain, NumericAttribute):
        try:
            x = float(shown)
        except (TypeError, ValueError):
            return f"column {name}: {shown!r} is not a number"
        return f"column {name}: {x} is outside [{domain.min}, {domain.max}]"
    return f"column {name}: {shown!r} is not a level ({', '.join(domain)})"


def any_invalid(con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec, names: Sequence[str]) -> bool:
    """One aggregate scan: does any record have a value of ``names`` outside its domain?"""
    if not names:
        return False
    attributes = spec.data.attributes
    flags = " OR ".join(invalid_sql(n, attributes[n]) for n in names)
    return bool(_run(con, source, f"SELECT count(*) FILTER (WHERE {flags}) FROM {source.sql}").fetchone()[0])


def validate(con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec) -> None:
    """Check every attribute the spec declares, in SQL.

    Raises
    ------
    DataError
        Missing columns, or the first record (in file order) with a value outside its
        attribute's domain, naming the row, the column (the first declared one that is
        off-domain in that record) and the value.
    """
    attributes = spec.data.attributes
    names = list(attributes)
    require_columns(con, source, names)
    if not any_invalid(con, source, spec, names):
        return
    cols = ", ".join(quote_identifier(n) for n in names)
    flags = ", ".join(invalid_sql(n, attributes[n]) for n in names)
    any_bad = " OR ".join(invalid_sql(n, attributes[n]) for n in names)
    row = _run(
        con,
        source,
        f"SELECT rn, {cols}, {flags} FROM (SELECT row_number() OVER () - 1 AS rn, {cols} FROM {source.sql}) "
        f"WHERE {any_bad} ORDER BY rn LIMIT 1",
    ).fetchone()
    index, values, bad = row[0], row[1 : 1 + len(names)], row[1 + len(names) :]
    name = next(n for n, flag in zip(names, bad) if flag)
    problem = describe_value(source, name, attributes[name], values[names.index(name)])
    raise DataError(f"{source} {source.where(index)}, {problem}")


def first_row_where(con: duckdb.DuckDBPyConnection, source: DataSource, predicate: str, column: str):
    """(index, value) of the first record (file order) where ``predicate`` holds."""
    col = quote_identifier(column)
    return _run(
        con,
        source,
        f"SELECT rn, {col} FROM (SELECT row_number() OVER () - 1 AS rn, {col} FROM {source.sql}) "
        f"WHERE {predicate} ORDER BY rn LIMIT 1",
    ).fetchone()


def check_size(spec: Spec, source: DataSource, records: int) -> None:
    """A fixed ``data.n`` must match the file (as :func:`dpopt.domain.records.validate_records`)."""
    if spec.data.n is not None and records != spec.data.n and spec.adjacency.kind != "add_remove":
        raise DataError(f"{source}: has {records} records but the spec fixes n = {spec.data.n}")


# ----------------------------------------------------------------------- answers
def _precheck(
    con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec, query, group_columns: Sequence[str] = ()
) -> None:
    """Columns present, and the attributes the counting scan does not itself check are in their domain.

    The scan that counts records detects off-domain values of the query's own attributes
    (a NULL cell); the others are checked here in one aggregate scan (none for most specs).
    Either way :func:`validate` then names the first offending record.
    """
    require_columns(con, source, [*spec.data.attributes, *group_columns])
    used = set(query.attributes) if isinstance(query, CountingQuery) else {query.attribute}
    if any_invalid(con, source, spec, [a for a in spec.data.attributes if a not in used]):
        validate(con, source, spec)


def answer(con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec, *,
           query: CountingQuery | NumericQuery | None = None) -> tuple[np.ndarray, int]:
    """φ(X) on the whole file, counted in SQL, and the number of records.

    ``query`` is the spec's compiled query when the caller holds it (``Problem.query``); else
    it is compiled here.

    Raises
    ------
    DataError
        As :func:`validate` (every declared attribute is checked), or a size that
        contradicts ``data.n``.
    """
    query = compile_query(spec) if query is None else query
    if isinstance(query, KroneckerQuery):  # the supports' marginals in one scan, then the factors
        values, records = answer(con, source, spec, query=query.support_query)
        return query.from_support(values), records
    _precheck(con, source, spec, query)
    if isinstance(query, CountingQuery) and query.kind == "marginals":
        _, values, off_domain = marginals_by_key(con, source, query)
        if off_domain:
            validate(con, source, spec)
        records = int(values[0, : query.workload.offsets[1]].sum())  # each record is in one cell of a table
        check_size(spec, source, records)
        return values[0].astype(float), records
    if isinstance(query, CountingQuery):
        require_memory(dense_bytes(query.cells), f"the {query.cells}-cell histogram of the query's attributes")
        rows = _run(
            con, source, f"SELECT {cell_sql(query)} AS cell, count(*) FROM {source.sql} GROUP BY ALL"
        ).fetchall()
        if any(cell is None for cell, _ in rows):
            validate(con, source, spec)
        h = np.zeros(query.cells)
        for cell, n in rows:
            h[int(cell)] = n
        records = int(h.sum())
        check_size(spec, source, records)
        return query.answers(h), records
    domain = spec.data.attributes[query.attribute]
    total, records, bad = _run(
        con,
        source,
        f"SELECT sum({_number_sql(query.attribute)}), count(*), "
        f"count(*) FILTER (WHERE {invalid_sql(query.attribute, domain)}) FROM {source.sql}",
    ).fetchone()
    if bad:
        validate(con, source, spec)
    check_size(spec, source, records)
    total = float(total or 0.0)
    if query.kind == "sum":
        return np.array([total]), records
    if query.pair:
        return np.array([total - query.midpoint * records, float(records)]), records
    return np.array([total / records if records else 0.0]), records


@dataclass(frozen=True)
class GroupAnswers:
    """The query's true answer for every group of one grouping column.

    Attributes
    ----------
    column : str
    keys : numpy.ndarray
        The groups in canonical order: as declared for a public domain, else sorted.
    values : numpy.ndarray
        (G, d) true answers, row g for ``keys[g]``.
    domain : str
        Where the set of groups comes from (see :mod:`dpopt.release.batch`).
    records : int
    """

    column: str
    keys: np.ndarray
    values: np.ndarray
    domain: str
    records: int


def canonical_keys(values: np.ndarray) -> np.ndarray:
    """The distinct group keys of ``values`` in canonical (sorted) order."""
    ordered = np.sort(np.asarray(values))
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if ordered.size else ordered


def key_index(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each value among the distinct ``keys`` (any order), −1 for a value that is not a key.

    Keys and values of different kinds (text and numbers) are compared by their text form.
    The values are sorted first so that the binary searches run in order (a merge).
    """
    keys, values = np.asarray(keys), np.asarray(values)
    if keys.dtype.kind != values.dtype.kind:
        keys, values = keys.astype(str), values.astype(str)
    if not len(keys):
        return np.full(len(values), -1)
    order = np.arange(len(keys)) if bool(np.all(keys[1:] > keys[:-1])) else np.argsort(keys, kind="stable")
    ordered = keys[order]
    by_value = np.argsort(values, kind="stable")
    pos = np.minimum(np.searchsorted(ordered, values[by_value]), len(keys) - 1)
    index = np.empty(len(values), dtype=np.int64)
    index[by_value] = np.where(ordered[pos] == values[by_value], order[pos], -1)
    return index


def apply_query(query: CountingQuery, counts: np.ndarray) -> np.ndarray:
    """Rows φ = A h for the histogram rows ``counts`` (G × m); a table's A is the identity; a ``linear`` query's
    rows by :meth:`~dpopt.domain.queries.CountingQuery.answers` (exact for decimal weights)."""
    if query.user_matrix is not None:
        return query.answers(counts)
    a = query.matrix
    if a.shape[0] == a.shape[1] and a.nnz == a.shape[0] and np.all(a.diagonal() == 1):
        return counts
    return np.asarray((a @ counts.T).T)


CODES = "dpopt_level_codes"
"""The temporary table :func:`marginals_by_key` counts from (the records' level codes, dropped after)."""


def _code_type(levels: int) -> str:
    """The narrowest unsigned DuckDB integer holding the level codes 0 … levels − 1."""
    return "UTINYINT" if levels <= 1 << 8 else "USMALLINT" if levels <= 1 << 16 else "UINTEGER"


def marginals_by_key(con, source: DataSource, query: CountingQuery, column: str | None = None):
    """Every table of a marginals query counted from records in one SQL scan, never the histogram.

    One ``GROUP BY GROUPING SETS`` over the level codes of the query's attributes (each
    table's attributes, with the key ``column`` when given), the codes read once into a temporary
    table (:data:`CODES`; its memory grows with the records × attributes, not with the tables);
    numpy lays the counts out as the released vector (each table row-major in its listed order).

    Returns
    -------
    keys : numpy.ndarray or None
        The distinct keys in canonical order (None without ``column``).
    values : numpy.ndarray or None
        (G, d) int64 answers, one row per key (one row without ``column``); None when
        ``off_domain``.
    off_domain : bool
        Whether some record has a value of a table's attribute outside its levels.

    Raises
    ------
    DataError
        A record without a key.
    """
    workload = query.workload
    sets = sorted(set(workload.sets))
    key = [] if column is None else ["key"]
    names = [*key, *(f"c{i}" for i in range(len(query.attributes)))]
    selected = [f"{quote_identifier(column)} AS key" for _ in key] + [
        f"CAST({level_code_sql(a, lv)} AS {_code_type(len(lv))}) AS c{i}"
        for i, (a, lv) in enumerate(zip(query.attributes, query.levels))]
    grouping = ", ".join("(" + ", ".join([*key, *(f"c{k}" for k in t)]) + ")" for t in sets)
    # the level codes are stored once in a temporary table: grouping sets over the codes computed in a
    # subquery held DuckDB (2.0) at ~2 GB for 435 pairs of 30 attributes × 10⁶ records, ~0.3 GB this way
    _run(con, source,
         f"CREATE OR REPLACE TEMP TABLE {CODES} AS SELECT {', '.join(selected)} FROM {source.sql}")
    try:
        sql = (f"SELECT GROUPING_ID({', '.join(names)}) AS gid, {', '.join(names)}, count(*) AS n "
               f"FROM {CODES} GROUP BY GROUPING SETS ({grouping})")
        result = _run(con, source, sql).fetchnumpy()
    finally:
        con.execute(f"DROP TABLE IF EXISTS {CODES}")
    gid = np.asarray(result["gid"], dtype=np.int64)
    bit = {name: 1 << (len(names) - 1 - i) for i, name in enumerate(names)}
    mine = {t: gid == sum(bit[f"c{k}"] for k in range(len(query.attributes)) if k not in t) for t in sets}
    if any(np.ma.is_masked(result[f"c{k}"][mine[t]]) for t in sets for k in t):
        return None, None, True
    if column is None:
        keys, row = None, np.zeros(len(gid), dtype=np.int64)
    else:
        observed = _key_values(con, source, column, result["key"])
        keys = canonical_keys(observed)
        row = key_index(keys, observed)
    values = np.zeros((1 if keys is None else len(keys), workload.dimension), dtype=np.int64)
    counts = np.asarray(result["n"], dtype=np.int64)
    for i, (listed, t) in enumerate(zip(workload.blocks, workload.sets)):
        codes = [np.asarray(np.ma.getdata(result[f"c{k}"])[mine[t]], dtype=np.int64) for k in listed]
        sizes = [workload.algebra.sizes[k] for k in listed]
        cell = np.ravel_multi_index(codes, sizes) if listed else np.zeros(int(mine[t].sum()), dtype=np.int64)
        np.add.at(values, (row[mine[t]], workload.offsets[i] + cell), counts[mine[t]])
    return keys, values, False


PIVOT_CELLS = 64
"""Up to this many cells, DuckDB counts each group's whole histogram in one row (one count per
cell); beyond, it counts (group, cell) pairs and numpy gathers them."""


def _histograms_by_key(con, source: DataSource, query: CountingQuery, column: str):
    """(key values, histograms (one row per distinct key), whether some record had no cell), from SQL."""
    cells = f"SELECT {quote_identifier(column)} AS key, {cell_sql(query)} AS cell FROM {source.sql}"
    if query.cells <= PIVOT_CELLS:
        counts = ", ".join(f"count(*) FILTER (WHERE cell = {c}) AS c{c}" for c in range(query.cells))
        result = _run(
            con,
            source,
            f"SELECT key, count(*) FILTER (WHERE cell IS NULL) AS bad, {counts} FROM ({cells}) GROUP BY key",
        ).fetchnumpy()
        rows = np.column_stack([np.asarray(result[f"c{c}"], dtype=np.int64) for c in range(query.cells)])
        return result["key"], rows.reshape(-1, query.cells), bool(np.any(np.asarray(result["bad"]) > 0))
    result = _run(con, source, f"SELECT key, cell, count(*) AS n FROM ({cells}) GROUP BY ALL").fetchnumpy()
    cell = result["cell"]
    if np.ma.is_masked(cell) or (cell.dtype == object and any(c is None for c in cell)):
        return result["key"], None, True
    distinct = canonical_keys(np.ma.getdata(result["key"]))
    rows = np.zeros((len(distinct), query.cells), dtype=np.int64)
    rows[key_index(distinct, np.ma.getdata(result["key"])), np.asarray(cell, dtype=np.int64)] = result["n"]
    return distinct, rows, False


def group_answers(
    con: duckdb.DuckDBPyConnection,
    source: DataSource,
    spec: Spec,
    column: str,
    keys: np.ndarray | None = None,
    domain: str = "observed",
    *,
    query: CountingQuery | NumericQuery | None = None,
) -> GroupAnswers:
    """φ(X_g) for every group g of ``column``, counted in SQL and laid out in numpy.

    Parameters
    ----------
    keys : numpy.ndarray, optional
        The public groups, in their canonical order (a group without records gets the
        answer of an empty dataset); by default the groups observed in the file, sorted.
    query : CountingQuery or NumericQuery, optional
        The spec's compiled query when the caller holds it; else it is compiled here.

    Raises
    ------
    DataError
        A record outside the domain, a missing group key, or a key outside ``keys``.
    UnsupportedSpecError
        A mean (it divides by a public n that a group does not have).
    """
    query = compile_query(spec) if query is None else query
    if isinstance(query, NumericQuery) and query.kind == "mean":
        raise UnsupportedSpecError(
            "query.kind", "a grouped mean needs a public size per group: release the sum per group instead"
        )
    _precheck(con, source, spec, query, [column])
    if isinstance(query, CountingQuery) and query.kind == "marginals":
        found, rows, off_domain = marginals_by_key(con, source, query, column)
        if off_domain:
            validate(con, source, spec)
        keys = found if keys is None else keys
        values = np.zeros((len(keys), query.dimension), dtype=np.int64)
        values[_index_or_raise(con, source, column, keys, found)] = rows
        return GroupAnswers(column, keys, values, domain, int(rows[:, : query.workload.offsets[1]].sum()))
    if isinstance(query, CountingQuery):
        raw_keys, rows, off_domain = _histograms_by_key(con, source, query, column)
        if off_domain:
            validate(con, source, spec)
        group_values = _key_values(con, source, column, raw_keys)
        keys = canonical_keys(group_values) if keys is None else keys
        counts = np.zeros((len(keys), query.cells), dtype=np.int64)
        counts[_index_or_raise(con, source, column, keys, group_values)] = rows
        return GroupAnswers(column, keys, apply_query(query, counts), domain, int(rows.sum()))
    attr = spec.data.attributes[query.attribute]
    result = _run(
        con,
        source,
        f"SELECT {quote_identifier(column)} AS key, sum({_number_sql(query.attribute)}) AS s, count(*) AS n, "
        f"count(*) FILTER (WHERE {invalid_sql(query.attribute, attr)}) AS bad FROM {source.sql} GROUP BY ALL",
    ).fetchnumpy()
    if np.any(np.asarray(result["bad"]) > 0):
        validate(con, source, spec)
    group_values = _key_values(con, source, column, result["key"])
    keys = canonical_keys(group_values) if keys is None else keys
    index = _index_or_raise(con, source, column, keys, group_values)
    values = np.zeros((len(keys), 1))
    values[index, 0] = np.asarray(result["s"], dtype=float)
    return GroupAnswers(column, keys, values, domain, int(np.asarray(result["n"]).sum()))


def _key_values(con, source: DataSource, column: str, raw) -> np.ndarray:
    """The fetched group keys as a plain array; a NULL key is a DataError naming its record."""
    if np.ma.is_masked(raw) or (raw.dtype == object and any(v is None for v in raw)):
        index, _ = first_row_where(con, source, f"{quote_identifier(column)} IS NULL", column)
        raise DataError(f"{source} {source.where(index)}, column {column}: missing group key")
    values = np.asarray(np.ma.getdata(raw))
    if values.dtype == object:
        values = values.astype(str)
    return values


def _index_or_raise(con, source: DataSource, column: str, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    index = key_index(keys, values)
    if np.any(index < 0):
        value = values[np.flatnonzero(index < 0)[0]].item()
        col = quote_identifier(column)
        found = first_row_where(con, source, f"CAST({col} AS VARCHAR) = {quote_literal(str(value))}", column)
        where = source.where(found[0]) if found else "a record"
        raise DataError(f"{source} {where}, column {column}: {value!r} is not one of the public groups")
    return index


def read_rows(source: DataSource, spec: Spec) -> list[dict[str, object]]:
    """Every record as a dict of the spec's attributes (numbers as float, levels as str), validated in SQL."""
    con = connect()
    validate(con, source, spec)
    names = list(spec.data.attributes)
    cols = ", ".join(quote_identifier(n) for n in names)
    rows = _run(con, source, f"SELECT {cols} FROM {source.sql}").fetchall()
    numeric = [isinstance(spec.data.attributes[n], NumericAttribute) for n in names]
    records = [
        {n: (float(v) if is_num else str(v)) for n, v, is_num in zip(names, row, numeric)} for row in rows
    ]
    check_size(spec, source, len(records))
    return records


def read_records(path: str | Path, spec: Spec) -> list[dict[str, object]]:
    """Read a CSV or Parquet file of records (a header row naming attributes) and validate it.

    The file is read through DuckDB and checked in SQL with the semantics of
    :func:`dpopt.domain.records.validate_records`: every
    declared attribute must be present (other columns are ignored); categorical values
    must be declared levels; numeric values must lie within the declared bounds (values
    are never clipped silently); a fixed ``data.n`` must match.

    Raises
    ------
    DataError
        Naming the file, row and column of the first value outside the domain.
    """
    return read_rows(open_source(path), spec)
