"""The documentation's commands run by a pre-imported Python (tests/test_snippets.py).

A short ``dpopt`` command spends much of its run importing scipy, matplotlib, cvxpy and dpopt: ``dpopt
solve specs/table_replace_gdp.yaml --out DIR`` took 8.5 s of wall time from a new process and 5.3 s forked
from this server (2 cores at load 7; the same certificate, byte for byte). :func:`serve` imports them once,
then forks a child per request: the child takes the caller's standard streams (passed over a Unix socket,
``SCM_RIGHTS``), working folder, environment and arguments, runs ``dpopt.cli.main()`` as the console script
does (or a Python snippet as ``python -c`` does) and exits as that process would (its exit code, its
``atexit`` handlers, its interpreter shutdown); the server sends the caller the child's exit status. The
caller, :func:`request`, is the ``dpopt`` on the snippets' ``PATH`` (:func:`client_script`) or the runner of a
Python block (:func:`python_command`); it imports only the standard library (``python -I -S``: milliseconds).

What differs from a new process: the modules are already imported (in the server's environment, the one the
snippets get) and the server's ``sys.path`` is kept; each request's environment is set in ``os.environ``
before its command runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys

PRELOAD = ("dpopt.cli", "dpopt.solve", "dpopt.report.folder", "dpopt.certificate.verify", "dpopt.release",
           "dpopt.release.bind", "dpopt.plan", "dpopt.ledger", "cvxpy", "scipy.stats", "matplotlib.figure",
           "matplotlib.backends.backend_agg")
"""Imported by the server before it forks: what a ``solve``, ``verify``, ``release`` or report imports."""
HEADER = struct.Struct("!I")
_CLIENT = "import sys\nsys.path.insert(0, {folder!r})\nfrom preloaded import request\n"


def request(path: str, mode: str, argument: list[str] | str) -> int:
    """Run ``dpopt argument...`` (``mode`` "dpopt") or the Python source ``argument`` ("python") in a child of
    the server at ``path``, on this process' standard streams, folder and environment; its exit code
    (128 + the signal when a signal ended it, as a shell reports it)."""
    payload = json.dumps({"mode": mode, "argument": argument, "cwd": os.getcwd(),
                          "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        socket.send_fds(connection, [HEADER.pack(len(payload)) + payload], [0, 1, 2])
        answer = b""
        while chunk := connection.recv(64):
            answer += chunk
    code = int(answer)
    return 128 - code if code < 0 else code


def client_script(path: str) -> str:
    """The text of an executable ``dpopt`` that asks the server at ``path`` (:func:`request`)."""
    return (f"#!{sys.executable} -IS\n" + _CLIENT.format(folder=os.path.dirname(__file__))
            + f"sys.exit(request({path!r}, 'dpopt', sys.argv[1:]))\n")


def python_command(path: str, source: str) -> list[str]:
    """The command that runs the Python ``source`` as ``python -c`` would, asking the server at ``path``."""
    runner = (_CLIENT.format(folder=os.path.dirname(__file__))
              + f"sys.exit(request({path!r}, 'python', sys.argv[1]))\n")
    return [sys.executable, "-IS", "-c", runner, source]


def _receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the request ended early")
        data += chunk
    return json.loads(data[HEADER.size:]), fds


def _child(message: dict, fds: list[int]) -> None:
    """Become the requested process: its streams, folder, environment and arguments; never returns (the
    command's end, or ``SystemExit`` with its code, ends the interpreter as that process would end)."""
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["env"])
    if message["mode"] == "dpopt":
        from dpopt.cli import main

        sys.argv = [os.path.join(os.path.dirname(sys.executable), "dpopt"), *message["argument"]]
        sys.path.insert(0, os.path.dirname(sys.executable))
        raise SystemExit(main())
    sys.argv = ["-c"]
    sys.path.insert(0, "")
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    exec(compile(message["argument"], "<string>", "exec"), module.__dict__)  # noqa: S102 - the snippet
    raise SystemExit(0)


def serve(path: str) -> None:
    """Import :data:`PRELOAD`, listen at ``path``, print ``ready``; then fork a child (:func:`_child`) per
    request and send each caller its child's exit code (``os.waitstatus_to_exitcode``) when the child ends."""
    import importlib
    import selectors
    import signal

    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    callers: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                connection, _ = listener.accept()
                message, fds = _receive(connection)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for held in (listener, connection, *callers.values()):
                        held.close()
                    _child(message, fds)
                for fd in fds:
                    os.close(fd)
                callers[pid] = connection
                continue
            os.read(wake_read, 1 << 12)
            while callers:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                with callers.pop(pid) as connection, contextlib.suppress(OSError):  # a caller gone (timeout)
                    connection.sendall(str(os.waitstatus_to_exitcode(status)).encode())


if __name__ == "__main__":
    serve(sys.argv[1])
