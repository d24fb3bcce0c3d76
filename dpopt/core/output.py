"""Output: stdout kept for machine output (what C code such as a solver's banner writes goes to
stderr), and output folders written whole or not at all (:func:`output_folder`)."""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from dpopt.errors import OutputError


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


# ------------------------------------------------------------------ output folders
OUTPUT_NAMES = ("mechanism.json", "certificate*.json", "release*.json", "release*.csv", "release_*.parquet", "report.md",
                "*.png")
"""The names (shell patterns) of the files dpopt writes into an output folder: a folder holding
anything else (a data file, a subfolder) is not replaced."""

LOCK_TIMEOUT = 60.0
"""Seconds a run waits for another run to finish putting the same output folder in place (the
swap takes milliseconds; the computing before it does not hold the lock)."""

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def umask() -> int:
    """The process umask (read by setting it and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def output_folder(path: str | Path, owned: tuple[str, ...] = OUTPUT_NAMES) -> Iterator[Path]:
    """Write a whole output folder or nothing: yield a fresh sibling folder, then put it in place.

    The block writes into the yielded folder (``.NAME.tmp-PID-XXXX`` beside ``path``). When it
    ends normally, the folder replaces ``path`` in one step: Linux's ``renameat2`` with
    ``RENAME_EXCHANGE`` swaps the two folders atomically (elsewhere the old folder is renamed
    aside, the new one renamed in, with SIGINT and SIGTERM held until both are done), and the
    old folder is removed. When the block raises (an error, Ctrl-C), the new folder is removed
    and ``path`` is as it was. So an interrupted run leaves the old folder or the new one,
    never a mixture. Runs writing into the same ``path`` at once each compute in their own
    folder and take turns at the swap, under an exclusive lock on ``.NAME.lock`` beside it
    (kept there: removing it would let two runs hold two locks), so the last to finish wins
    and the folder is always whole.

    Parameters
    ----------
    path : str or Path
        The output folder (``--out``); created with its parents when missing.
    owned : tuple of str
        Shell patterns of the files a dpopt run writes: an existing folder is replaced only
        when everything in it matches one (default :data:`OUTPUT_NAMES`).

    Raises
    ------
    OutputError
        ``path`` is a file, the current folder or one above it, holds a file dpopt did not
        write or a subfolder, or another run kept its lock for :data:`LOCK_TIMEOUT` seconds.
    """
    target = Path(path).resolve()  # a symbolic link to a folder: the folder it names is replaced
    _check_replaceable(target, owned)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}-", dir=target.parent))
    try:
        os.chmod(staging, 0o777 & ~umask())  # what mkdir gives, not mkdtemp's owner-only 0700
        yield staging
        with _locked(target):
            _check_replaceable(target, owned)
            _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def check_output_folder(path: str | Path, owned: tuple[str, ...] = OUTPUT_NAMES) -> None:
    """Raise the :class:`OutputError` :func:`output_folder` would raise for ``path``, before a
    run spends its time (the CLI checks ``--out`` first)."""
    _check_replaceable(Path(path).resolve(), owned)


def _check_replaceable(target: Path, owned: tuple[str, ...]) -> None:
    if not os.path.lexists(target):
        return
    if not target.is_dir():
        raise OutputError(f"{target} is not a folder: give a folder for the output")
    here = Path.cwd()
    if target == here or target in here.parents:
        raise OutputError(f"{target} is the current folder or holds it: give a folder of its own for the output")
    foreign = sorted(entry.name for entry in os.scandir(target)
                     if not entry.is_file(follow_symlinks=False)
                     or not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in owned))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(f"{target} holds {shown}, which dpopt did not write: the output replaces the whole "
                          "folder, so give a new or empty folder, or one dpopt wrote")


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``.NAME.lock`` beside ``target``, waited for up to :data:`LOCK_TIMEOUT`."""
    import fcntl  # imported where used: POSIX only, and only by commands that write a folder

    lock = target.parent / f".{target.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OutputError(f"another run has held {lock} for {LOCK_TIMEOUT:g} s: "
                                      f"{target} was not replaced") from None
                time.sleep(0.02)
        _remove_stale(target)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_stale(target: Path) -> None:
    """Remove the staging folders of runs beside ``target`` that were killed (their process is gone)."""
    for entry in target.parent.glob(f".{glob.escape(target.name)}.tmp-*-*"):
        pid = entry.name.rsplit(".tmp-", 1)[1].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _swap_in(staging: Path, target: Path) -> None:
    """Put ``staging`` at ``target`` (exchanged atomically when possible) and remove the old folder."""
    signals = {signal.SIGINT, signal.SIGTERM}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        if not target.exists():
            os.rename(staging, target)
            return
        if _exchange(staging, target):
            old = staging
        else:
            old = staging.with_name(staging.name.replace(".tmp-", ".old-", 1))
            os.rename(target, old)
            try:
                os.rename(staging, target)
            except BaseException:
                os.rename(old, target)
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (``renameat2(..., RENAME_EXCHANGE)``); False where the C library
    or the file system does not offer it."""
    import ctypes  # imported where used, as in _flush_all

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))
