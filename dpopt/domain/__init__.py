"""Record domains, queries and records."""

from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.domain.records import read_records, validate_records

__all__ = ["CountingQuery", "NumericQuery", "compile_query", "read_records", "validate_records"]
