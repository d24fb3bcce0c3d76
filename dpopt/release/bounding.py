r"""Contribution bounding on release: each person's rows cut to the spec's ``privacy_unit`` bounds.

Before anything is counted, DuckDB keeps, for every person (the ``id`` column),

1. at most c = ``max_rows_per_group`` rows in each cell of the query's histogram (the cell: the
   level codes of the query's attributes; one cell for a count or a sum),
2. then at most g = ``max_groups`` of the person's cells,
3. then at most k = ``max_rows`` rows in all,

each choice uniformly at random (the semantics of Tumult's ``MaxRowsPerGroupPerID`` /
``MaxGroupsPerID`` / ``MaxRowsPerID`` and OpenDP's ``truncate_per_group`` / ``truncate_num_groups``),
so the kept rows satisfy every bound and :mod:`dpopt.sensitivity.person` applies to them.

The random choices are window functions ordered by keyed hashes,

.. code-block:: sql

    row_number() OVER (PARTITION BY id, cell ORDER BY sha256(secret || ':' || row_number))
    dense_rank()  OVER (PARTITION BY id ORDER BY sha256(secret || ':' || cell || ':' || id))

with a 256-bit ``secret`` drawn from the release's CSPRNG (:mod:`dpopt.rng`, its own stream
:data:`BOUNDING_STREAM`). SHA-256 with a secret prefix of fixed length is modelled as a random
function of distinct inputs (the encodings are unambiguous: the secret has fixed length, a row
number and a cell — comma-joined level codes, after any group key as its length, '#' and its
value — contain no ':' outside a length-prefixed value, and the person id comes last), so within each person the
sort keys are i.i.d. uniform and distinct with overwhelming probability: the order is a
uniformly random permutation of the person's rows (cells), and the first c (g, k) of it a
uniformly random subset, independent across persons. Without the secret nobody can predict
which rows are kept. The choice for one person does not depend on the others' rows, so
bounding then adding noise calibrated to the person-level sensitivity is DP for persons.

Numeric values outside their declared bounds are clamped to them first (a value that is not a
number is still refused), and counted per attribute: the certificate's sensitivity holds for the
clamped values. :func:`bound_contributions` reports how many values were clamped and how many rows and
persons were truncated. **These counts are computed from the confidential data without noise and
are not protected by the certificate**: they are the operator's (:mod:`dpopt.release.operator`), and a
release document carries only :func:`published_bounding` (the spec's privacy unit and the method).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np

from dpopt.domain.queries import CountingQuery, NumericQuery
from dpopt.domain.records import ID_WHITESPACE, person_id_problem
from dpopt.errors import DataError
from dpopt.release.sources import DataSource, _run, first_row_where, level_code_sql, quote_identifier, \
    quote_literal, require_columns, validate
from dpopt.rng import RandomSource
from dpopt.spec.models import NumericAttribute, Spec

BOUNDING_STREAM = (1 << 31,)
"""The path of the CSPRNG stream the bounding secret is drawn from (noise streams use () and (l, b))."""

TRUNCATION_CAVEAT = ("rows, rows_kept, rows_dropped, persons, persons_truncated and clamped are computed from the "
                     "confidential data without noise: they are not covered by the certificate and never published")
NOT_PUBLISHED = ("the exact counts of bounding (rows and persons kept, dropped and truncated, values clamped) are not "
                 "private: they are not published (`dpopt release --operator-report FILE` gives them to the operator)")


def published_bounding(report: dict) -> dict:
    """What a release document says of contribution bounding: the spec's ``privacy_unit`` and the ``method``,
    never a count of the data (those, in ``report``, are not private: :data:`NOT_PUBLISHED`)."""
    return {"privacy_unit": report["privacy_unit"], "method": report["method"], "note": NOT_PUBLISHED}


def pair_mean(query: NumericQuery, noisy: np.ndarray) -> dict:
    r"""The mean post-processed from a released (centred sum, count) pair (:class:`~dpopt.domain.queries.NumericQuery`).

    .. math:: \hat\mu = \operatorname{clip}(m + \tilde S / \tilde n,\ a,\ b)

    (null when the noisy count is not positive); post-processing of the release, so covered by its certificate.
    """
    centred, count = (float(x) for x in noisy)
    ratio = query.midpoint + centred / count if count > 0 else None
    return {"value": None if ratio is None else min(max(ratio, query.lower), query.upper),
            "unclipped": ratio,
            "method": "post-processing: midpoint + centered_sum / count, clipped to the attribute's bounds "
                      "(null when the noisy count is not positive)"}


@dataclass(frozen=True)
class BoundedSource(DataSource):
    """The kept (or clamped) rows of a file: a temporary table or view of the connection that made them."""

    table: str

    @property
    def sql(self) -> str:
        return quote_identifier(self.table)


def _cell_key_sql(query: CountingQuery | NumericQuery, groups: Sequence[str] = ()) -> str:
    """The row's cell as text: its level codes joined by commas ('' for a count or a sum), after the values of
    the grouping columns ``groups``, each as its length, '#' and the value (so no value can shift the rest)."""
    keys = [f"CAST(length(CAST({quote_identifier(g)} AS VARCHAR)) AS VARCHAR) || '#' || "
            f"CAST({quote_identifier(g)} AS VARCHAR)" for g in groups]
    if isinstance(query, CountingQuery):
        keys += [f"CAST({level_code_sql(a, lv)} AS VARCHAR)" for a, lv in zip(query.attributes, query.levels)]
    return f"concat_ws(',', {', '.join(keys)})" if keys else "''"


def bounding_sql(source: DataSource, spec: Spec, query: CountingQuery | NumericQuery, secret: str,
                 cell: str | None = None, groups: Sequence[str] = ()) -> str:
    """The SELECT of the rows kept by bounding (the file's columns only), see the module; ``cell`` is the SQL
    text of a row's cell (default: the query's level codes, :func:`_cell_key_sql`); with grouping columns
    ``groups`` a cell is a group's cell (a person's cells in every group count against their bounds)."""
    unit = spec.data.privacy_unit
    pid = quote_identifier(unit.id)
    key = quote_literal(secret)
    keyed = (f"SELECT *, {_cell_key_sql(query, groups) if cell is None else cell} AS dpopt_cell, "
             f"sha256({key} || ':' || CAST(dpopt_rn AS VARCHAR)) AS dpopt_row_key FROM "
             f"(SELECT *, row_number() OVER () AS dpopt_rn FROM {source.sql})")
    step, ranked = keyed, False
    windows = ((unit.max_rows_per_group, f"row_number() OVER (PARTITION BY {pid}, dpopt_cell ORDER BY dpopt_row_key)"),
               (unit.max_groups, f"dense_rank() OVER (PARTITION BY {pid} ORDER BY "
                                 f"sha256({key} || ':' || dpopt_cell || ':' || CAST({pid} AS VARCHAR)))"),
               (unit.max_rows, f"row_number() OVER (PARTITION BY {pid} ORDER BY dpopt_row_key)"))
    for bound, window in windows:
        if bound is not None:
            previous = " EXCLUDE (dpopt_r)" if ranked else ""
            step = f"SELECT * FROM (SELECT *{previous}, {window} AS dpopt_r FROM ({step})) WHERE dpopt_r <= {int(bound)}"
            ranked = True
    extra = "dpopt_rn, dpopt_cell, dpopt_row_key" + (", dpopt_r" if ranked else "")
    return f"SELECT * EXCLUDE ({extra}) FROM ({step})"


def _clamp(con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec) -> tuple[DataSource, dict[str, int]]:
    """A view of the file with every number outside its attribute's bounds clamped to them, and how many
    values of each numeric attribute were (NULL, NaN and non-numbers are left for validation to refuse)."""
    numeric = {n: d for n, d in spec.data.attributes.items() if isinstance(d, NumericAttribute)}
    if not numeric:
        return source, {}
    outside, replaced = [], []
    for name, domain in numeric.items():
        x = f"TRY_CAST(trim(CAST({quote_identifier(name)} AS VARCHAR)) AS DOUBLE)"
        out = f"({x} IS NOT NULL AND NOT isnan({x}) AND ({x} < {domain.min!r} OR {x} > {domain.max!r}))"
        outside.append(f"count(*) FILTER (WHERE {out})")
        replaced.append(f"CASE WHEN {out} THEN CAST(least(greatest({x}, {domain.min!r}), {domain.max!r}) AS VARCHAR) "
                        f"ELSE CAST({quote_identifier(name)} AS VARCHAR) END AS {quote_identifier(name)}")
    counts = _run(con, source, f"SELECT {', '.join(outside)} FROM {source.sql}").fetchone()
    view = BoundedSource(source.path, source.format, "dpopt_clamped")
    _run(con, source, f"CREATE OR REPLACE TEMP VIEW {view.sql} AS SELECT * REPLACE ({', '.join(replaced)}) "
                      f"FROM {source.sql}")
    return view, {name: int(n) for name, n in zip(numeric, counts)}


def bound_contributions(con: duckdb.DuckDBPyConnection, source: DataSource, spec: Spec,
                        query: CountingQuery | NumericQuery | None, randomness: RandomSource, *,
                        cell: str | None = None, stream: tuple[int, ...] = BOUNDING_STREAM,
                        groups: Sequence[str] = ()) -> tuple[BoundedSource, dict]:
    """Clamp numbers to their bounds, validate the file, keep each person's rows within the bounds (a cell of
    a grouped release is a group's cell: ``groups`` the grouping columns), and say how many values were
    clamped and rows dropped.

    ``cell`` (SQL text of a row's cell, instead of the ``query``'s) and ``stream`` (the CSPRNG path of the
    secret) serve releases that bound each of their parts on its own cells (:mod:`dpopt.selection`).

    Returns
    -------
    source : BoundedSource
        The kept rows, to count on ``con``.
    report : dict
        ``privacy_unit``, ``clamped`` (values clamped to their bounds, per numeric attribute), ``rows``,
        ``rows_kept``, ``rows_dropped``, ``persons``, ``persons_truncated`` and the ``note`` that these
        counts are not private.

    Raises
    ------
    DataError
        A missing id column (naming it), a record without an id, with a blank id or an id with surrounding
        whitespace (naming the row: :func:`dpopt.domain.records.person_id_problem`), or a value
        outside the spec's domain (as :func:`dpopt.release.sources.validate`).
    """
    unit = spec.data.privacy_unit
    require_columns(con, source, [*spec.data.attributes, unit.id, *groups])
    source, clamped = _clamp(con, source, spec)
    validate(con, source, spec)
    pid = quote_identifier(unit.id)
    text = f"CAST({pid} AS VARCHAR)"
    stripped = f"trim({text}, {' || '.join(f'chr({ord(c)})' for c in ID_WHITESPACE)})"
    bad = first_row_where(con, source, f"{pid} IS NULL OR {text} <> {stripped} OR {stripped} = ''", unit.id)
    if bad is not None:  # the rule of dpopt.domain.records.person_id_problem, in SQL
        raise DataError(f"{source} {source.where(bad[0])}, column {unit.id}: {person_id_problem(bad[1])}")
    secret = randomness.stream(*stream).bytes(32).hex()
    bounded = BoundedSource(source.path, source.format, "dpopt_bounded")
    kept_sql = bounding_sql(source, spec, query, secret, cell, groups)
    _run(con, source, f"CREATE OR REPLACE TEMP TABLE {bounded.sql} AS {kept_sql}")
    rows, persons = _run(con, source, f"SELECT count(*), count(DISTINCT {pid}) FROM {source.sql}").fetchone()
    kept = _run(con, source, f"SELECT count(*) FROM {bounded.sql}").fetchone()[0]
    truncated = _run(con, source, (
        f"SELECT count(*) FROM (SELECT {pid} AS p, count(*) AS n FROM {source.sql} GROUP BY ALL) AS a "
        f"JOIN (SELECT {pid} AS p, count(*) AS n FROM {bounded.sql} GROUP BY ALL) AS b USING (p) WHERE a.n > b.n"
    )).fetchone()[0]
    report = {
        "privacy_unit": unit.model_dump(exclude_none=True),
        "clamped": clamped,
        "rows": int(rows), "rows_kept": int(kept), "rows_dropped": int(rows - kept),
        "persons": int(persons), "persons_truncated": int(truncated),
        "method": "per person, uniformly random rows (SQL window functions ordered by SHA-256 keyed with a "
                  "256-bit CSPRNG secret): ≤ max_rows_per_group per cell, then ≤ max_groups cells, then ≤ max_rows",
        "note": TRUNCATION_CAVEAT,
    }
    return bounded, report
