"""Design every eligible family for the spec, predict its utility, pick the best.

Generic over families: a family registered in :mod:`dpopt.mechanisms` joins the
comparison without any change here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpopt.errors import CalibrationError, DpoptError, UnsupportedSpecError
from dpopt.mechanisms import Mechanism, UtilityValue, better, registry
from dpopt.sensitivity.space import SensitivitySpace
from dpopt.spec.models import FAMILIES, Spec


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


def design_candidates(spec: Spec, space: SensitivitySpace) -> list[Candidate]:
    """Design each family the spec allows (``auto``: every registered family).

    Raises
    ------
    UnsupportedSpecError
        When the spec names a family this version does not provide.
    """
    available = registry()
    if spec.mechanism != "auto":
        missing = [f for f in spec.families if f not in available]
        if missing:
            raise UnsupportedSpecError(
                "mechanism",
                f"family {', '.join(repr(m) for m in missing)} is not available in this version "
                f"(available: {', '.join(f for f in FAMILIES if f in available)})",
            )
    families = [f for f in spec.families if f in available]
    candidates = []
    for family in families:
        cls = available[family]
        reason = cls.supports(spec, space)
        if reason is None and spec.invariants and not cls.noise_in_span:
            reason = "its noise leaves the span of the sensitivity space, so it would alter the invariants"
        if reason is not None:
            candidates.append(Candidate(family, reason=reason))
            continue
        try:
            mechanism = cls.design(spec, space)
            utility = mechanism.expected_utility(spec.utility)
        except DpoptError as exc:
            candidates.append(Candidate(family, reason=str(exc)))
            continue
        candidates.append(Candidate(family, mechanism, utility))
    return candidates


def select(candidates: list[Candidate], metric: str) -> Candidate:
    """The feasible candidate with the best predicted utility (first listed on ties).

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
    return min(feasible, key=lambda c: sign * c.utility.value)
