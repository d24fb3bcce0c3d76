"""Output: stdout kept for machine output (what C code such as a solver's banner writes goes to
stderr), and output folders written whole or not at all (:func:`output_folder`)."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
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
    (removed by its holder when the swap is done; a run that locked a file since removed locks
    the new one, :func:`_locked`), so the last to finish wins and the folder is always whole.
    Staging folders left beside ``path`` by runs that were killed (SIGKILL: nothing could remove
    them) are removed first (:func:`remove_stale`): they may hold released values.

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
    remove_stale(target.parent)
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
    target = Path(path).resolve()
    if target.parent.is_dir():
        remove_stale(target.parent)
    _check_replaceable(target, owned)


def _is_own(entry: os.DirEntry) -> bool:
    """A lock file (``.NAME.lock``, from this version or an earlier one that kept them) or the staging folder
    of a run that was killed: dpopt's own, removed with the folder that holds it."""
    if entry.name.startswith(".") and entry.name.endswith(".lock") and entry.is_file(follow_symlinks=False):
        return True
    return _dead_staging(entry.name)


def _dead_staging(name: str) -> bool:
    """``name`` is a staging folder (``.NAME.tmp-PID-XXXX``, or ``.old-`` during a swap) of a process that is gone."""
    match = _STAGING.fullmatch(name)
    return match is not None and not _alive(int(match.group(1)))


def _check_replaceable(target: Path, owned: tuple[str, ...]) -> None:
    if not os.path.lexists(target):
        return
    if not target.is_dir():
        raise OutputError(f"{target} is not a folder: give a folder for the output")
    here = Path.cwd()
    if target == here or target in here.parents:
        raise OutputError(f"{target} is the current folder or holds it: give a folder of its own for the output")
    entries = [entry for entry in os.scandir(target) if not _is_own(entry)]
    folders = sorted(entry.name for entry in entries if entry.is_dir())
    foreign = sorted(entry.name for entry in entries if not entry.is_dir() and (
        not entry.is_file(follow_symlinks=False)
        or not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in owned)))
    if folders or foreign:
        what = [f"the folder{'s' if len(folders) > 1 else ''} {_shown(folders)}"] if folders else []
        what += [f"{_shown(foreign)}, which dpopt did not write"] if foreign else []
        raise OutputError(f"{target} holds {' and '.join(what)}: the output replaces the whole folder, so give a "
                          "new or empty folder, or one dpopt wrote (nothing was written; the folder is as it was)")


def _shown(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


@contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``.NAME.lock`` beside ``target``, waited for up to :data:`LOCK_TIMEOUT`, and
    the lock file removed when the block ends.

    The holder removes the file while it holds the lock; a run waiting on the removed file gets the lock
    on a file no longer at that path, sees so (its inode is not the path's) and locks the path anew. So
    one run at a time holds the lock on the file at the path, and no lock file stays behind.
    """
    import fcntl  # imported where used: POSIX only, and only by commands that write a folder

    lock = target.parent / f".{target.name}.lock"
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OutputError(f"another run has held {lock} for {LOCK_TIMEOUT:g} s: "
                                          f"{target} was not replaced") from None
                    time.sleep(0.02)
            held = os.fstat(fd)
            try:
                current = os.stat(lock)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # locked a file its holder has since removed: lock the one at the path
    try:
        remove_stale(target.parent)
        yield
    finally:
        try:
            os.unlink(lock)
        except FileNotFoundError:  # removed by hand meanwhile
            pass
        finally:
            os.close(fd)  # releases the lock


_STAGING = re.compile(r"\..+\.(?:tmp|old)-(\d+)-[^/]+")
"""The name of a staging folder, ``.NAME.tmp-PID-XXXX`` (``.old-`` for the old folder during a swap)."""


def remove_stale(folder: Path) -> None:
    """Remove the staging folders in ``folder`` of runs that were killed (their process is gone), whatever
    output folder they were for: a run killed by SIGKILL could not remove its own, which may hold released
    values. A folder of a live process (or of another user's) is kept."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and _dead_staging(entry.name):
            shutil.rmtree(entry.path, ignore_errors=True)


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
