"""One table from a noisy release: least squares, then non-negative, then integer.

:func:`consistent_table` runs the three TopDown steps on one release (one query, or several
tables of the same histogram stacked in ``structure.queries``) and certifies the output;
:func:`postprocess_release` takes the pieces from a solved spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpopt.core.checks import Check
from dpopt.errors import SolverError
from dpopt.postprocess.certify import POSTPROCESSING_THEOREM, table_checks
from dpopt.postprocess.least_squares import metric, weighted_least_squares
from dpopt.postprocess.nonnegative import nonnegative_least_squares
from dpopt.postprocess.rounding import controlled_round
from dpopt.postprocess.structure import Structure, check_values, spec_structure
from dpopt.spec.models import Postprocess


@dataclass(frozen=True)
class PostprocessResult:
    """A post-processed table and how it was obtained.

    Attributes
    ----------
    table : numpy.ndarray (m,)
        The published table (int64 when ``integer``).
    answers : numpy.ndarray (d,)
        The released coordinates recomputed from it (A·table).
    least_squares : numpy.ndarray (m,)
        The generalised least-squares table (real, may be negative).
    nonnegative : numpy.ndarray (m,) or None
        The non-negative least-squares table (real).
    checks : list of Check
        Exact integer checks of the output.
    method : dict
        The steps, metric and rounding route (for the certificate).
    """

    table: np.ndarray
    answers: np.ndarray
    least_squares: np.ndarray = field(repr=False)
    nonnegative: np.ndarray | None = field(repr=False)
    checks: list[Check] = field(repr=False)
    method: dict = field(repr=False)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def consistent_table(
    noisy,
    structure: Structure,
    values=None,
    covariance: np.ndarray | None = None,
    *,
    options: Postprocess = Postprocess(),
    covariance_source: str | None = None,
) -> PostprocessResult:
    """The table closest to a noisy release that is consistent, non-negative and integral.

    Parameters
    ----------
    noisy : array (d,)
        The released answers, ordered as ``structure.queries``.
    structure : Structure
        Queries A and invariants C (:mod:`dpopt.postprocess.structure`).
    values : array (k,)
        The invariant values t (whole numbers), one per row of C.
    covariance : array (d, d), optional
        The noise covariance Σ (the metric is Σ⁺ on its support, and the noiseless
        directions are kept); isotropic when None.
    options : Postprocess
        Which properties to enforce (all by default).

    Returns
    -------
    PostprocessResult

    Raises
    ------
    SolverError
        Inconsistent invariants, no non-negative table meets them, or no rounding exists;
        also when the certified output fails a check.

    Examples
    --------
    >>> from dpopt.postprocess import table_structure
    >>> s = table_structure((2, 2), total=True)
    >>> consistent_table([3.4, -0.6, 2.2, 5.1], s, [10]).table.tolist()
    [3, 0, 2, 5]
    """
    y = np.asarray(noisy, dtype=float).reshape(-1)
    if y.size != structure.queries.shape[0]:
        raise ValueError(f"noisy has {y.size} entries; the structure releases {structure.queries.shape[0]}")
    m = metric(covariance, y.size, covariance_source)
    if options.consistent:
        t = check_values(structure, values)
        used = structure
    else:  # cell by cell: the released numbers themselves, no invariant, no cross-query consistency
        t = np.zeros(0, dtype=np.int64)
        used = Structure(np.eye(y.size), structure.labels, np.zeros((0, y.size), np.int64), (), (y.size,))
    ls = weighted_least_squares(y, used, t, m)
    nn, route = nonnegative_least_squares(y, used, t, m) if options.nonnegative else (None, "")
    estimate = nn if nn is not None else ls
    method = {
        "steps": ["weighted least squares (null-space method)"]
        + ([f"non-negative least squares: {route}"] if nn is not None else []),
        "metric": m.source,
        "exact_directions": int(m.exact.shape[1]),
        "consistent": options.consistent,
        "nonnegative": options.nonnegative,
        "integer": options.integer,
        "preserves_guarantee": POSTPROCESSING_THEOREM,
    }
    if options.integer:
        table, route = controlled_round(estimate, used, t)
        method["steps"].append(f"controlled rounding: {route}")
    else:
        table = estimate
    answers = used.queries @ table
    answers = np.round(answers).astype(np.int64) if options.integer else answers
    checks = table_checks(table, used, t, answers, nonnegative=options.nonnegative, integer=options.integer)
    if options.integer and np.any(np.abs(table - estimate) >= 1):
        checks.append(Check("postprocess.within_one", "|integer − real| < 1 per cell", False, "a cell moved by 1 or more"))
    failed = [c.claim for c in checks if not c.passed]
    if failed:
        raise SolverError("post-processing failed its own checks: " + ", ".join(failed))
    return PostprocessResult(table, answers, ls, nn, checks, method)


def mechanism_covariance(mechanism) -> tuple[np.ndarray | None, str]:
    """The mechanism's noise covariance where its family exposes one, else None (isotropic)."""
    covariance = getattr(mechanism, "noise_covariance", None)
    if covariance is None:
        return None, f"isotropic ({mechanism.family} exposes no covariance: i.i.d. coordinates)"
    return np.asarray(covariance(), dtype=float), f"Σ⁺ of the {mechanism.family} noise covariance, on its support"


def postprocess_release(solution, noisy, table=None, values=None, options: Postprocess | None = None) -> PostprocessResult:
    """Post-process a release of a solved spec.

    Parameters
    ----------
    solution : dpopt.Solution
    noisy : array (d,)
        ``solution.mechanism.release(...)``.
    table : array (m,), optional
        The confidential table, to compute the invariant values t = C·table (they are
        published exactly); or give ``values``.
    values : array (k,), optional
    options : Postprocess, optional
        Defaults to the spec's ``postprocess`` block, else all properties.
    """
    structure = spec_structure(solution.problem)
    if values is None:
        values = structure.invariant_values(table) if table is not None else None
    if values is None and structure.constraints.shape[0]:
        values = [solution.spec.data.n] if structure.constraint_names == ("total",) else None
    options = options or solution.spec.postprocess or Postprocess()
    covariance, source = mechanism_covariance(solution.mechanism)
    return consistent_table(noisy, structure, values, covariance, options=options, covariance_source=source)


def certificate_block(result: PostprocessResult) -> dict:
    """The certificate's ``postprocess`` block: the claim that the guarantee is kept and the method."""
    return {
        "guarantee": "unchanged by post-processing",
        "method": result.method,
    }


__all__ = ["PostprocessResult", "certificate_block", "consistent_table", "mechanism_covariance", "postprocess_release"]
