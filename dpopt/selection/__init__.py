"""Person-level releases with private group keys and private quantiles (issue 28).

A spec with a ``releases`` list (:mod:`dpopt.spec.selection`) is designed and certified from the spec
alone (:mod:`dpopt.selection.design`), verified by re-derivation (:mod:`dpopt.selection.verify`),
released from records in DuckDB (:mod:`dpopt.selection.release`) and reported
(:mod:`dpopt.selection.report`).
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports

__all__ = lazy_exports(__name__, {
    "certify": "dpopt.selection.design",
    "is_selection_certificate": "dpopt.selection.kind",
    "release_selection": "dpopt.selection.release",
    "selection_html": "dpopt.selection.report",
    "selection_markdown": "dpopt.selection.report",
    "verify_selection": "dpopt.selection.verify",
})
