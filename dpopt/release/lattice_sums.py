r"""A bounded sum or mean counted on its lattice in SQL: the exact integer N = Σ_i ⌊x_i/g + ½⌋.

An exact lattice measurement (:mod:`dpopt.mechanisms.real_lattice`) needs the answer as the sum of the records'
rounded values, computed exactly. In DuckDB each value x (a DOUBLE, clamped to its bounds) is scaled by g⁻¹ = 2^-e
(exact: a power of two), its floor and fractional part are exact, and ⌊q⌋ + [q − ⌊q⌋ ≥ ½] = ⌊q + ½⌋ is summed as
a 128-bit integer (HUGEINT): no rounding depends on the order of the rows. The answer handed to the mechanism is
g·N/n, from which :meth:`~dpopt.mechanisms.real_lattice.RealLattice.units` recovers N exactly.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np

from dpopt.domain.queries import NumericQuery
from dpopt.errors import DataError
from dpopt.mechanisms.real_lattice import MAX_UNITS, RealLattice
from dpopt.release.sources import DataSource, GroupAnswers, _key_values, _number_sql, _run, key_index, quote_identifier


def _literal(value: Fraction) -> str:
    """A DOUBLE literal equal to ``value`` (bounds given as doubles in the spec; a power of two)."""
    return f"CAST({float(value)!r} AS DOUBLE)"


def units_sql(query: NumericQuery, lattice: RealLattice) -> str:
    """The SQL of one record's ⌊clamp(x)/g + ½⌋ as HUGEINT (exact for every double)."""
    x = _number_sql(query.attribute)
    q = (f"(greatest(least({x}, {_literal(lattice.upper)}), {_literal(lattice.lower)}) * "
         f"{_literal(1 / lattice.granularity)})")
    return f"(CAST(floor({q}) AS HUGEINT) + CAST({q} - floor({q}) >= 0.5 AS INTEGER))"


def lattice_answer(con: duckdb.DuckDBPyConnection, source: DataSource, query: NumericQuery,
                   lattice: RealLattice) -> np.ndarray:
    """g·N/n of the file's records (N the exact lattice sum), shape (1,).

    Raises
    ------
    DataError
        N beyond :data:`~dpopt.mechanisms.real_lattice.MAX_UNITS`, or the file cannot be read.
    """
    (total,) = _run(con, source, f"SELECT sum({units_sql(query, lattice)}) FROM {source.sql}").fetchone()
    units = int(total or 0)
    if abs(units) > MAX_UNITS:
        raise DataError(f"{source}: the lattice sum is beyond 2^50 units of g = {lattice.granularity} "
                        "(set `sampler: floating_point`)")
    return lattice.answers(np.array([units]))


def lattice_group_answers(con: duckdb.DuckDBPyConnection, source: DataSource, query: NumericQuery,
                          lattice: RealLattice, counted: GroupAnswers) -> GroupAnswers:
    """``counted`` (the groups of one column, already checked) with each group's answer g·N_g on the lattice."""
    column = counted.column
    result = _run(con, source, f"SELECT {quote_identifier(column)} AS key, CAST(sum({units_sql(query, lattice)}) "
                               f"AS VARCHAR) AS s FROM {source.sql} GROUP BY ALL").fetchnumpy()
    units = np.zeros(len(counted.keys), dtype=object)
    if len(result["s"]):
        found = _key_values(con, source, column, result["key"])
        units[key_index(counted.keys, found)] = [int(v) for v in np.asarray(result["s"])]
    if any(abs(int(u)) > MAX_UNITS for u in units):
        raise DataError(f"{source}: a group's lattice sum is beyond 2^50 units of g = {lattice.granularity}")
    values = lattice.answers(np.asarray(units, dtype=np.int64)).reshape(-1, 1)
    return GroupAnswers(column, counted.keys, values, counted.domain, counted.records)
