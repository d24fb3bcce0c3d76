"""dpopt: from a short spec to a privacy mechanism with a certificate.

>>> import dpopt
>>> spec = dpopt.load_spec("specs/count_add_remove.yaml")   # doctest: +SKIP
>>> sol = dpopt.solve(spec)                                   # doctest: +SKIP
>>> sol.mechanism.release([1234.0])                           # doctest: +SKIP

The names below are imported on first use (PEP 562, as scipy does), so that ``import
dpopt`` and ``dpopt --help`` cost next to nothing; every stage's module still imports
what it needs at its top.
"""

from __future__ import annotations

from dpopt._lazy import lazy_exports
from dpopt._version import __version__

__all__ = ["__version__", *lazy_exports(__name__, {
    "BudgetExceededError": "dpopt.errors",
    "CalibrationError": "dpopt.errors",
    "Candidate": "dpopt.design.select",
    "Certificate": "dpopt.certificate.model",
    "CertificateError": "dpopt.errors",
    "Check": "dpopt.core.checks",
    "DataError": "dpopt.errors",
    "DpoptError": "dpopt.errors",
    "Ledger": "dpopt.ledger.store",
    "LedgerError": "dpopt.errors",
    "Mechanism": "dpopt.mechanisms.base",
    "Problem": "dpopt.problem",
    "SensitivitySpace": "dpopt.sensitivity.space",
    "SolverError": "dpopt.errors",
    "Solution": "dpopt.solve",
    "Spec": "dpopt.spec.models",
    "SpecError": "dpopt.errors",
    "UnsupportedSpecError": "dpopt.errors",
    "UtilityValue": "dpopt.mechanisms.base",
    "Verification": "dpopt.certificate.verify",
    "compile": "dpopt.problem",
    "consistent_table": "dpopt.postprocess.table",
    "derive": "dpopt.sensitivity.derive",
    "intervals": "dpopt.certificate.intervals",
    "load_spec": "dpopt.spec.load",
    "postprocess_release": "dpopt.postprocess.table",
    "registry": "dpopt.mechanisms.base",
    "render_html": "dpopt.report.render",
    "render_markdown": "dpopt.report.render",
    "solve": "dpopt.solve",
    "synthesize": "dpopt.synthesis.run",
    "topdown": "dpopt.postprocess.hierarchy",
    "verify": "dpopt.certificate.verify",
    "verify_hierarchy_release": "dpopt.certificate.hierarchy_release",
})]
