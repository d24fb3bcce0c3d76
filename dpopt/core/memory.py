"""Size guards: refuse, before allocating, a structure that would not fit in memory.

Every place that builds something of domain size (a dense query matrix, a span basis, the
vectors of a sensitivity space, a covariance) first estimates its bytes and calls
:func:`require_memory`; above the limit it raises :class:`~dpopt.errors.MemoryLimitError`
with one line naming the structure, instead of taking the machine. The limit is
:data:`DEFAULT_LIMIT` (2 GiB) unless the environment variable ``DPOPT_MEMORY_LIMIT`` sets
another (bytes, or a number with a ``K``/``M``/``G``/``T`` suffix in powers of 1024).
"""

from __future__ import annotations

import math
import os
import re

from dpopt.errors import MemoryLimitError, SpecError

ENVIRONMENT_VARIABLE = "DPOPT_MEMORY_LIMIT"
"""The environment variable that sets the limit."""

DEFAULT_LIMIT = 2 * 1024**3
"""Bytes one structure may take when ``DPOPT_MEMORY_LIMIT`` is not set (2 GiB)."""

FLOAT64 = 8
"""Bytes of one float64 entry, the unit of most estimates."""

LABEL_BYTES = 58
"""Bytes one output label takes at least: an ASCII ``str`` object of one character (49 bytes of header,
``sys.getsizeof("")``, and the character) and its 8-byte pointer in the tuple of labels."""

_SUFFIXES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_LIMIT = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def memory_limit() -> int:
    """The limit in bytes: ``DPOPT_MEMORY_LIMIT`` when set, else :data:`DEFAULT_LIMIT`.

    Raises
    ------
    SpecError
        When the variable is set to something that is not a size (``"2G"``, ``"500M"``,
        ``"1073741824"``).
    """
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_LIMIT
    match = _LIMIT.fullmatch(text)
    if match is None:
        raise SpecError(ENVIRONMENT_VARIABLE, f"{text!r} is not a size (bytes, or a number with K, M, G or T)")
    return int(float(match.group(1)) * _SUFFIXES[match.group(2).upper()])


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps the number at least 1 (``7.28 TiB``)."""
    for unit, size in (("EiB", 1024**6), ("PiB", 1024**5), ("TiB", 1024**4), ("GiB", 1024**3),
                       ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


def dense_bytes(*shape: int, itemsize: int = FLOAT64) -> int:
    """Bytes of a dense array of ``shape`` with ``itemsize``-byte entries, ``prod(shape) · itemsize``.

    Python integers, so a shape whose product overflows 64 bits is still estimated exactly.
    """
    return math.prod(int(n) for n in shape) * itemsize


def require_memory(nbytes: int, what: str) -> None:
    """Refuse, before it is allocated, a structure of ``nbytes`` bytes above the limit.

    Parameters
    ----------
    nbytes : int
        Estimated bytes of the structure (e.g. :func:`dense_bytes` of its shape).
    what : str
        The structure, in words a user recognises (``"the dense 999999 x 1000000 Helmert
        basis of span: sum_zero"``).

    Raises
    ------
    MemoryLimitError
        When ``nbytes`` exceeds :func:`memory_limit`; the message names ``what``, the
        estimate, the limit and the variable that raises it.
    """
    limit = memory_limit()
    if nbytes > limit:
        raise MemoryLimitError(
            what,
            f"would take {format_bytes(nbytes)}, above the memory limit of {format_bytes(limit)} "
            f"(set {ENVIRONMENT_VARIABLE} to raise it)",
        )
