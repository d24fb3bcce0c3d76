"""What a release tells its operator only: exact counts of the confidential data, never published.

A release document and its folder carry only what the certificate covers (the noisy values, the mechanism,
the guarantee) and what the spec declares public (its attributes, ``data.n``, invariants). The number of
records is private under add/remove adjacency, and the contribution-bounding counts (rows and persons kept,
dropped and truncated, values clamped: :func:`dpopt.release.bounding.bound_contributions`) are private under
every adjacency: they are computed without noise. The operator, who sees the data anyway, may want them to
judge the bounds; ``dpopt release --operator-report FILE`` writes them to ``FILE``, a file that must lie
outside the published folder ``--out`` and says on its first key that it is not private.
"""

from __future__ import annotations

import json
from pathlib import Path

from dpopt.certificate.model import write_atomic
from dpopt.errors import SpecError

OPERATOR_NOTE = ("NOT PRIVATE: exact counts of the confidential data, computed without noise and not covered by "
                 "any certificate; for the operator of the release only, never to be published")


def operator_report(records: int | dict[str, int] | None, bounding: dict | list | None = None) -> dict:
    """The operator's report: the :data:`OPERATOR_NOTE` first, the number of ``records`` counted (per
    grouping column for a grouped release; None when the release did not count them) and, with a privacy
    unit, the exact ``bounding`` report(s)."""
    return {"not_private": OPERATOR_NOTE, "records": records} | ({} if bounding is None else {"bounding": bounding})


def check_operator_path(path: str | Path, out: str | Path | None) -> None:
    """Refuse an operator report inside the published folder ``out`` (or the folder itself).

    Raises
    ------
    SpecError
        ``--operator-report`` names ``out`` or a path inside it.
    """
    if out is None:
        return
    target, folder = Path(path).resolve(), Path(out).resolve()
    if target == folder or folder in target.parents:
        raise SpecError("--operator-report", f"{path} lies inside the release folder {out}: its counts are not "
                                             "private, so write it outside the published folder")


def write_operator_report(path: str | Path, report: dict) -> Path:
    """Write the operator's report as indented JSON, atomically; returns its path."""
    write_atomic(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return Path(path)
