"""A check: one claim, how it was established, whether it holds."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    """One verified claim of a certificate.

    Attributes
    ----------
    claim : str
        A stable name, e.g. ``"privacy"``, ``"sensitivity.l2"``, ``"utility"``.
    method : str
        How it was checked (formula, precision, paper).
    passed : bool
    detail : str
        The numbers: computed value, target, margin.
    """

    claim: str
    method: str
    passed: bool
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)
