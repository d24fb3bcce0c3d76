"""What the running time of a count release with private keys reveals, and the padding that bounds it (issue 35).

The number n of candidate keys (keys found in the data that the spec does not declare) is confidential: it is
never published, and only the keys partition selection keeps are released. The release's draw stage — the
noise of every key, the keep decisions (optimal selection) and the threshold comparisons — works on whole
blocks of :data:`SLOTS` candidate slots (:func:`padded_slots`): slots beyond the n keys are drawn and compared
like the others and then dropped. Its work is the same for every n up to :data:`SLOTS`, and beyond that reveals
at most ⌈n / SLOTS⌉, never n.

Not covered (stated in the certificate, :data:`TIMING`): the time to read, bound, group and sort the records and
their keys (DuckDB and Python, growing with the number of rows and of keys), and the time to write the released
keys (their number is published). Timing side channels are outside the differential-privacy guarantee; this
bounds the one a release adds through its own per-key draws.
"""

from __future__ import annotations

SLOTS = 1 << 16
"""Candidate-key slots per block of the draw stage (65,536: about 5 ms of exact discrete Laplace draws)."""

TIMING = {
    "covered": f"the draw stage (noise, keep decisions, threshold comparisons) works on whole blocks of {SLOTS:,} "
               f"candidate-key slots, padded: its work is the same for every number n of undeclared keys up to "
               f"{SLOTS:,} and reveals at most ceil(n / {SLOTS:,}) beyond",
    "not_covered": "reading, bounding, grouping and sorting the records and their keys (time grows with the rows and "
                   "the keys), and writing the released keys (their number is published)",
}
"""The timing statement of a count release's certificate block."""


def padded_slots(candidates: int) -> int:
    """The slots the draw stage processes for ``candidates`` undeclared keys: whole blocks of :data:`SLOTS`, at
    least one.

    Examples
    --------
    >>> padded_slots(0) == padded_slots(SLOTS) == SLOTS, padded_slots(SLOTS + 1) == 2 * SLOTS
    (True, True)
    """
    return SLOTS * max(1, -(-candidates // SLOTS))
