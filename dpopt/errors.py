"""Typed errors: one class per failure kind, each with a one-line message.

The CLI turns :class:`SpecError` and :class:`UnsupportedSpecError` into exit code 2
and a single line naming the field and the problem; no traceback reaches the user.
An error class may set ``exit_code`` to another code (:class:`BudgetExceededError`: 3).
"""

from __future__ import annotations


class DpoptError(Exception):
    """Base class of every error dpopt raises on purpose."""


class DocumentError(DpoptError, ValueError):
    """A YAML or JSON file is not a well-formed document: not UTF-8, invalid syntax, a key
    given twice, nesting too deep, aliases that expand too far. Readers turn it into the
    error of what they read (:class:`SpecError` for a spec, :class:`CertificateError` for a
    certificate)."""


class SpecError(DpoptError, ValueError):
    """A spec is malformed or asks for something impossible.

    Parameters
    ----------
    field : str
        Dotted path of the offending field (``privacy.approx.delta``), or ``""``
        when the problem concerns the whole spec.
    problem : str
        What is wrong, in words.
    """

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)


class UnsupportedSpecError(SpecError):
    """A well-formed spec asks for a combination dpopt cannot (yet) certify."""


class MemoryLimitError(UnsupportedSpecError):
    """A structure the spec needs would take more memory than the limit allows.

    Raised by :func:`dpopt.core.memory.require_memory` before anything of that size is
    allocated; ``field`` names the structure, ``problem`` the estimate and the limit. A
    family whose structure would exceed the limit refuses the spec, as for any other
    unsupported combination.
    """


class CalibrationError(DpoptError):
    """No parameter of a mechanism family meets the privacy target (or the
    request is numerically out of range)."""


class SolverError(DpoptError):
    """An optimisation failed, or its result did not pass the independent check."""


class DataError(DpoptError, ValueError):
    """Records given for a release do not fit the spec's domain."""


class OutputError(DpoptError):
    """An output folder cannot be written: it is a file, holds files dpopt did not write, or
    another run keeps its lock (:func:`dpopt.core.output.output_folder`)."""


class CertificateError(DpoptError):
    """A certificate file cannot be read or is not a dpopt certificate."""


class BudgetExceededError(DpoptError):
    """A release would bring a privacy budget ledger past its budget: refused, nothing released.

    The CLI exits with :attr:`exit_code` (3), distinct from a bad spec (2).
    """

    exit_code = 3


class LedgerError(DpoptError):
    """A privacy budget ledger is missing or damaged (its hash chain does not hold)."""


class LedgerDamagedError(LedgerError):
    """A ledger's header cannot be read as one (edited or corrupted): ``dpopt ledger verify`` fails (exit 1)."""
