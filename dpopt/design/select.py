"""Design every eligible family for the spec, predict its utility, pick the best.

Generic over families: a family declared in the capability table
(:data:`dpopt.core.families.FAMILIES`) joins the comparison without any change here.

The order of work, so that a family that cannot serve or cannot win costs next to nothing:

1. **Screen** each family against its row of the table (:func:`dpopt.design.capabilities.screen`):
   a family the row rules out is never imported; its row gives the reason.
2. ``auto`` only (a list of families asks for their comparison): a family whose row has a **quick
   bound** (:func:`~dpopt.design.capabilities.quick_bound`: from the target and the exact norms, never
   a listed vector) waits, unimported, with that bound. Every other family is imported, asked
   :meth:`~dpopt.mechanisms.Mechanism.supports`, and designed at once, or, when it states a proven
   bound (:meth:`~dpopt.mechanisms.Mechanism.utility_bound`), waits with it.
3. The waiting families, the best bound first: one whose bound a designed candidate's closed form
   already beats is not designed (it could not have been selected; its row gives the bound and the
   candidate that beats it). Otherwise it is imported and screened by ``supports``, its own bound
   (when it has one) gets the same test, and it is designed.

A family whose ``supports``, bound or design raises (a dpopt error, or ZeroDivisionError,
OverflowError ... from its numerics on an extreme target) gets a row with the reason, and
the others go on; :class:`MemoryError` and :class:`KeyboardInterrupt` end the design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpopt.core.families import family_names
from dpopt.design.capabilities import quick_bound, screen
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
    skipped: str | None = None
    """Why it was not designed, when it was not: ``capability table`` (its row rules the spec out, the
    family not imported), ``supports`` (the family refuses), ``utility bound`` (it cannot win)."""
    beaten_by: str | None = None
    """The family whose predicted utility beats this one's bound (``utility bound``): if that family's
    certificate cannot be built, this one is designed after all (:func:`redesign_beaten`)."""

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
            if self.skipped is not None:
                row["skipped"] = self.skipped
        return row


def design_candidates(problem: Problem) -> list[Candidate]:
    """Design each family the spec allows (``auto``: every declared family) on the compiled
    problem's sensitivity space (a family reads its target and utility from ``problem.spec``), in
    the order of the module docstring.

    Raises
    ------
    UnsupportedSpecError
        When the spec names a family this version does not provide.
    """
    spec = problem.spec
    available = registry()  # membership imports nothing
    if spec.mechanism != "auto":
        missing = [f for f in spec.families if f not in available]
        if missing:
            raise UnsupportedSpecError(
                "mechanism",
                f"family {', '.join(repr(m) for m in missing)} is not available in this version "
                f"(available: {', '.join(f for f in family_names() if f in available)})",
            )
    families = [f for f in spec.families if f in available]
    auto = spec.mechanism == "auto"
    metric = spec.utility.metric
    rows: dict[str, Candidate] = {}
    waiting: list[tuple[str, float, bool]] = []  # (family, bound, imported and admitted already)
    for family in families:
        reason = screen(family, problem)
        if reason is not None:
            rows[family] = Candidate(family, reason=reason, skipped="capability table")
            continue
        quick = _quick_bound(family, problem) if auto else None
        if quick is not None:
            waiting.append((family, quick, False))
            continue
        refusal = _refusal(family, problem)
        if refusal is not None:
            rows[family] = refusal
            continue
        bound = _bound(registry()[family], problem) if auto else None
        if bound is None:
            rows[family] = _designed(registry()[family], problem)
        else:
            waiting.append((family, bound, True))
    sign = -1.0 if better(metric) == "higher" else 1.0
    for family, bound, admitted in sorted(waiting, key=lambda item: sign * item[1]):  # most promising first
        winner = _beats(rows, families, family, bound, metric)
        if winner is None and not admitted:
            refusal = _refusal(family, problem)
            if refusal is not None:
                rows[family] = refusal
                continue
            own = _bound(registry()[family], problem)
            if own is not None:
                bound, winner = own, _beats(rows, families, family, own, metric)
        if winner is None:
            rows[family] = _designed(registry()[family], problem)
        else:
            rows[family] = Candidate(family, skipped="utility bound", beaten_by=winner.family, reason=(
                f"not designed: its utility bound ({metric} {_BOUND_WORD[better(metric)]} {bound:.6g}) "
                f"cannot beat {winner.family} ({winner.utility.value:.6g})"))
    return [rows[f] for f in families]


def redesign_beaten(problem: Problem, candidates: list[Candidate], family: str) -> list[Candidate]:
    """``candidates`` with every family skipped because ``family`` beat its bound designed after all (when
    ``family``'s certificate could not be built, the bound no longer shows that they cannot win)."""
    out = []
    for c in candidates:
        if c.beaten_by != family:
            out.append(c)
            continue
        refusal = _refusal(c.family, problem)
        out.append(refusal if refusal is not None else _designed(registry()[c.family], problem))
    return out


def _refusal(family: str, problem: Problem) -> Candidate | None:
    """The row of a family (imported here) that refuses the spec or whose ``supports`` fails, or None."""
    try:
        cls = registry()[family]
        reason = cls.supports(problem)
    except Exception as exc:  # noqa: BLE001 - one family's failure is its row, not the design's end
        reason = failure_reason(exc)
    return None if reason is None else Candidate(family, reason=reason, skipped="supports")


def _quick_bound(family: str, problem: Problem) -> float | None:
    """The row's quick bound; None when it has none or the spec upsets it (see :func:`_bound`)."""
    try:
        return quick_bound(family, problem)
    except Exception as exc:  # noqa: BLE001 - see failure_reason
        failure_reason(exc)
        return None


_BOUND_WORD = {"lower": "≥", "higher": "≤"}

TIE_TOLERANCE = 1e-12
"""Relative difference below which two utilities count as tied (floating-point rounding of
closed forms): a tie goes to the family listed first, as in :func:`select`."""

EXACT_MARGIN = 1e-3
"""A candidate whose noise is exact (:attr:`~dpopt.mechanisms.base.Mechanism.exact_noise`) is kept over a
better floating-point one when its predicted utility is within this relative margin (0.1%) of the best:
the exact lattice measurement costs its dyadic rounding (below 2^-20 relative), and a floating-point
release's guarantee assumes idealized arithmetic (:mod:`dpopt.mechanisms.lattice`)."""


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

    A candidate c wins over every design of ``family`` when c's value (a closed form; for an
    estimate, the end of its confidence interval nearer the bound) is better than the bound by
    more than :data:`TIE_TOLERANCE`, or within it and c is listed first; and, when c's noise is
    not exact, by more than :data:`EXACT_MARGIN` too (an exact design of ``family`` within that
    margin of the best would be selected: :func:`select`).
    """
    sign = -1.0 if better(metric) == "higher" else 1.0
    winners = []
    for c in rows.values():
        value = _proven_value(c, sign)
        if value is None:
            continue
        gap = sign * (bound - value)  # > 0: c is better than the bound
        tolerance = TIE_TOLERANCE * max(abs(bound), abs(value))
        if not c.mechanism.exact_noise:
            if gap > tolerance + EXACT_MARGIN * abs(value):
                winners.append(c)
        elif gap > tolerance or (gap >= -tolerance and order.index(c.family) < order.index(family)):
            winners.append(c)
    return min(winners, key=lambda c: sign * c.utility.value, default=None)


def _proven_value(c: Candidate, sign: float) -> float | None:
    """A designed candidate's predicted value when it is a closed form, the end of its confidence interval on the
    worse side when it is an estimate (``sign`` −1: higher is better), else None."""
    if not c.feasible:
        return None
    if c.utility.method == "closed form":
        return c.utility.value
    if c.utility.ci is None:
        return None
    return max(c.utility.ci) if sign > 0 else min(c.utility.ci)


def select(candidates: list[Candidate], metric: str) -> Candidate:
    """The feasible candidate with the best predicted utility; the first listed among those within
    :data:`TIE_TOLERANCE` (relative) of the best, so that a family containing another (generalized
    Gaussian at p = 1, 2 is Laplace, Gaussian noise) does not win by the rounding of its closed forms;
    but the best exact candidate when it is within :data:`EXACT_MARGIN` of the best and the best is not exact.
    Candidates are compared by :attr:`~dpopt.mechanisms.base.UtilityValue.score`: a ``ci_volume`` by its
    log-volume (every family's, so like with like, beyond the double range too; :func:`_slack`).

    Raises
    ------
    CalibrationError
        When no candidate can meet the target; the message lists the reason of each family the spec reached
        (past the capability table), else of every family.
    """
    feasible = [c for c in candidates if c.feasible]
    if not feasible:
        tried = [c for c in candidates if c.skipped != "capability table"]  # the families the spec reached
        reasons = "; ".join(f"{c.family}: {c.reason}" for c in tried or candidates) or "no family applies"
        raise CalibrationError(f"no mechanism can meet this spec ({reasons})")
    sign = -1.0 if better(metric) == "higher" else 1.0
    best = min(sign * c.utility.score for c in feasible)
    chosen = next(c for c in feasible if sign * c.utility.score <= best + _slack(best, TIE_TOLERANCE, metric))
    exact = [c for c in feasible if c.mechanism.exact_noise]
    if chosen.mechanism.exact_noise or not exact:
        return chosen
    value = min(sign * c.utility.score for c in exact)
    if value > best + _slack(best, EXACT_MARGIN, metric):
        return chosen
    return next(c for c in exact if sign * c.utility.score <= value + _slack(value, TIE_TOLERANCE, metric))


def _slack(score: float, relative: float, metric: str) -> float:
    """What a relative margin allows above ``score`` (:attr:`~dpopt.mechanisms.base.UtilityValue.score`):
    relative·|score| for a value; log(1 + relative) for a ``ci_volume``, compared by its log-volume (V ≤ V₀(1 + m) ⇔
    log V ≤ log V₀ + log(1 + m), so the margins mean what they mean for any other metric, in any dimension)."""
    return math.log1p(relative) if metric == "ci_volume" else relative * abs(score)
