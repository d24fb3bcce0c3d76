"""Design every eligible family for the spec, predict its utility, pick the best.

Generic over families: a family registered in :mod:`dpopt.mechanisms` joins the
comparison without any change here.

Pruning (``auto`` only; a list of families asks for their comparison): a family that
states a proven bound on its utility (:meth:`Mechanism.utility_bound`) is designed after
the others (the best bound first, so that its design can rule out the rest), and not at all
when a calibrated candidate already beats that bound — it could not have been selected. Its row then gives the bound and the candidate that beats it.

A family whose ``supports``, bound or design raises (a dpopt error, or ZeroDivisionError,
OverflowError ... from its numerics on an extreme target) gets a row with the reason, and
the others go on; :class:`MemoryError` and :class:`KeyboardInterrupt` end the design.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpopt.core.families import family_names
from dpopt.errors import CalibrationError, DpoptError, UnsupportedSpecError
from dpopt.mechanisms import Mechanism, UtilityValue, better, registry
from dpopt.problem import Problem


@dataclass(frozen=True)
class Candidate:
    """One family's answer to the spec: a designed mechanism and its predicted utility,
    or the reason it cannot serve."""

    family: str
    mechanism: Mechanism | None = None
    utility: UtilityValue | None = None
    reason: str | None = None

    @property
    def feasible(self) -> bool:
        return self.mechanism is not None

    def to_dict(self) -> dict:
        row: dict = {"family": self.family}
        if self.feasible:
            row["parameters"] = self.mechanism.parameters
            row["utility"] = self.utility.to_dict()
        else:
            row["reason"] = self.reason
        return row


def design_candidates(problem: Problem) -> list[Candidate]:
    """Design each family the spec allows (``auto``: every registered family) on the compiled
    problem's sensitivity space (a family reads its target and utility from ``problem.spec``).

    Raises
    ------
    UnsupportedSpecError
        When the spec names a family this version does not provide.
    """
    spec = problem.spec
    available = registry()
    if spec.mechanism != "auto":
        missing = [f for f in spec.families if f not in available]
        if missing:
            raise UnsupportedSpecError(
                "mechanism",
                f"family {', '.join(repr(m) for m in missing)} is not available in this version "
                f"(available: {', '.join(f for f in family_names() if f in available)})",
            )
    families = [f for f in spec.families if f in available]
    metric = spec.utility.metric
    rows: dict[str, Candidate] = {}
    bounded: list[tuple[str, float]] = []
    for family in families:
        cls = available[family]
        try:
            reason = cls.supports(problem)
        except Exception as exc:  # noqa: BLE001 - one family's failure is its row, not the design's end
            reason = failure_reason(exc)
        if reason is None and spec.invariants and not cls.noise_in_span:
            reason = "its noise leaves the span of the sensitivity space, so it would alter the invariants"
        if reason is not None:
            rows[family] = Candidate(family, reason=reason)
            continue
        bound = _bound(cls, problem) if spec.mechanism == "auto" else None
        if bound is None:
            rows[family] = _designed(cls, problem)
        else:
            bounded.append((family, bound))
    sign = -1.0 if better(metric) == "higher" else 1.0
    for family, bound in sorted(bounded, key=lambda item: sign * item[1]):  # the most promising first
        winner = _beats(rows, families, family, bound, metric)
        if winner is None:
            rows[family] = _designed(available[family], problem)
        else:
            rows[family] = Candidate(family, reason=(
                f"not designed: its utility bound ({metric} {_BOUND_WORD[better(metric)]} {bound:.6g}) "
                f"cannot beat {winner.family} ({winner.utility.value:.6g})"))
    return [rows[f] for f in families]


_BOUND_WORD = {"lower": "≥", "higher": "≤"}

TIE_TOLERANCE = 1e-12
"""Relative difference below which two utilities count as tied (floating-point rounding of
closed forms): a tie goes to the family listed first, as in :func:`select`."""


def failure_reason(exc: Exception) -> str:
    """The row of a family that raised ``exc``: a dpopt error's own message, or the exception
    that a family's numerics raised (ZeroDivisionError, OverflowError, ...) named as a failure.

    :class:`MemoryError` is not a family's verdict on the spec: it propagates, as do
    :class:`KeyboardInterrupt` and the other non-:class:`Exception` signals.
    """
    if isinstance(exc, MemoryError):
        raise exc
    if isinstance(exc, DpoptError):
        return str(exc)
    return f"failed on this spec ({type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'})"


def _bound(cls: type[Mechanism], problem: Problem) -> float | None:
    """The family's utility bound; None when it has none or the spec upsets it (``design``
    then reports the problem in the family's row)."""
    try:
        return cls.utility_bound(problem)
    except Exception as exc:  # noqa: BLE001 - see failure_reason
        failure_reason(exc)
        return None


def _designed(cls: type[Mechanism], problem: Problem) -> Candidate:
    """The family designed and its utility predicted, or its row with the reason it failed
    (any :class:`Exception` but :class:`MemoryError`: one family never ends the design)."""
    try:
        mechanism = cls.design(problem)
        utility = mechanism.expected_utility(problem.spec.utility)
    except Exception as exc:  # noqa: BLE001 - see failure_reason
        return Candidate(cls.family, reason=failure_reason(exc))
    return Candidate(cls.family, mechanism, utility)


def _beats(rows: dict[str, Candidate], order: list[str], family: str, bound: float,
           metric: str) -> Candidate | None:
    """The best designed candidate that ``family`` cannot overtake given its bound, or None.

    A candidate c wins over every design of ``family`` when c's value (a closed form) is
    better than the bound by more than :data:`TIE_TOLERANCE`, or within it and c is
    listed first.
    """
    sign = -1.0 if better(metric) == "higher" else 1.0
    winners = []
    for c in rows.values():
        if not c.feasible or c.utility.method != "closed form":
            continue
        gap = sign * (bound - c.utility.value)  # > 0: c is better than the bound
        tolerance = TIE_TOLERANCE * max(abs(bound), abs(c.utility.value))
        if gap > tolerance or (gap >= -tolerance and order.index(c.family) < order.index(family)):
            winners.append(c)
    return min(winners, key=lambda c: sign * c.utility.value, default=None)


def select(candidates: list[Candidate], metric: str) -> Candidate:
    """The feasible candidate with the best predicted utility; the first listed among those within
    :data:`TIE_TOLERANCE` (relative) of the best, so that a family containing another (generalized
    Gaussian at p = 1, 2 is Laplace, Gaussian noise) does not win by the rounding of its closed forms.

    Raises
    ------
    CalibrationError
        When no candidate can meet the target; the message lists each family's reason.
    """
    feasible = [c for c in candidates if c.feasible]
    if not feasible:
        reasons = "; ".join(f"{c.family}: {c.reason}" for c in candidates) or "no family applies"
        raise CalibrationError(f"no mechanism can meet this spec ({reasons})")
    sign = -1.0 if better(metric) == "higher" else 1.0
    best = min(sign * c.utility.value for c in feasible)
    return next(c for c in feasible if sign * c.utility.value <= best + TIE_TOLERANCE * abs(best))
