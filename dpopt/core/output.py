"""Keeping stdout for machine output: what C code (a solver's banner) writes goes to stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout


def _flush_all() -> None:
    """Flush Python's streams and the C library's stdio buffers (where C code such as a solver
    writes), so that buffered output lands on the descriptor it was written under."""
    import ctypes  # imported where used (start-up of every CLI command)

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to load by that name (e.g. Windows): Python only
        pass


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to file descriptor 1 to stderr while the block runs.

    At the OS level (``os.dup2``), so that solver banners printed by C code (HiGHS, ...) are
    caught too, and at the Python level (``sys.stdout``, which an embedding program may
    have replaced): machine output (``--json``, a release document) is printed after the
    block, and stdout carries nothing else.
    """
    _flush_all()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (closed stdout): nothing to protect at the OS level
        saved = None
    try:
        if saved is not None:
            os.dup2(2, 1)
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _flush_all()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
