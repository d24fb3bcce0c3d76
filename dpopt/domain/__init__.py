"""Record domains, queries and records.

The names below are imported on first use (PEP 562), so that a command imports only the
modules it uses (e.g. ``dpopt verify`` of a Gaussian certificate).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "CountingQuery": "dpopt.domain.queries",
    "NumericQuery": "dpopt.domain.queries",
    "compile_query": "dpopt.domain.queries",
    "validate_records": "dpopt.domain.records",
})
