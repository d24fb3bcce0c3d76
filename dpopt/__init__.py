"""dpopt: from a short spec to a privacy mechanism with a certificate.

>>> import dpopt
>>> spec = dpopt.load_spec("specs/count_add_remove.yaml")   # doctest: +SKIP
>>> sol = dpopt.solve(spec)                                   # doctest: +SKIP
>>> sol.mechanism.release([1234.0])                           # doctest: +SKIP
"""

from dpopt._version import __version__
from dpopt.certificate import Certificate, Check, Verification, render_html, render_markdown, verify
from dpopt.errors import (
    CalibrationError,
    CertificateError,
    DataError,
    DpoptError,
    SolverError,
    SpecError,
    UnsupportedSpecError,
)
from dpopt.mechanisms import Mechanism, UtilityValue, registry
from dpopt.optimize import Candidate
from dpopt.postprocess import consistent_table, postprocess_release, topdown
from dpopt.sensitivity import SensitivitySpace, derive
from dpopt.solve import Solution, solve
from dpopt.spec import Spec, load_spec

__all__ = [
    "CalibrationError",
    "Candidate",
    "Certificate",
    "CertificateError",
    "Check",
    "DataError",
    "DpoptError",
    "Mechanism",
    "SensitivitySpace",
    "SolverError",
    "Solution",
    "Spec",
    "SpecError",
    "UnsupportedSpecError",
    "UtilityValue",
    "Verification",
    "__version__",
    "consistent_table",
    "derive",
    "load_spec",
    "postprocess_release",
    "registry",
    "render_html",
    "render_markdown",
    "solve",
    "topdown",
    "verify",
]
