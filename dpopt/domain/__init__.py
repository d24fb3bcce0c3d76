"""Record domains, queries and records."""

from dpopt.domain.queries import CountingQuery, NumericQuery, compile_query
from dpopt.domain.records import validate_records

__all__ = ["CountingQuery", "NumericQuery", "compile_query", "validate_records"]
