"""The zygote: one plain subprocess that imports math-verify once and forks warm grading workers.

Why not multiprocessing's start methods: spawn and forkserver re-import the parent's `__main__` in
every worker (a script without a `__main__` guard would grade recursively), and the forkserver is
process-global state that a forked child inherits but cannot use (`ChildProcessError`). The zygote
is started with `subprocess` (nothing of the parent is re-imported), talks over a socketpair, and
hands each new worker's socket to the parent with SCM_RIGHTS; the parent kills a worker by pid
and the kernel reaps it (the zygote ignores SIGCHLD). A worker dies with the zygote
(PR_SET_PDEATHSIG) and the zygote exits when its parent's socket closes, so nothing outlives a
killed parent for long. Linux only, like the sandbox.
It does not schedule work or decide timeouts: that is `_pool`.
"""

import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from thinc_bench.errors import GraderError

START_TIMEOUT_S = 120.0
"""The zygote imports sympy + math-verify (~2 s idle, far more on a loaded 2-core box)."""

WORKER_MEMORY_MB = 4_096
"""Address-space cap per worker: a runaway sympy bigint fails fast instead of swapping the machine;
a warm worker maps ~600 MB."""

_PID_BYTES = 16
# The checkout's root goes first: `python -c` would put the working directory (maybe another checkout) first.
_ZYGOTE_MAIN = (
    "import sys; sys.path.insert(0, {root!r}); from thinc_bench.grading._zygote import main; main({fd})"
)
_PR_SET_PDEATHSIG = 1


class Zygote:
    """Client side: starts the zygote on first use and asks it for workers. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _ZYGOTE_MAIN.format(root=root, fd=theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            ours.close()
            raise GraderError(f"cannot start the grading zygote ({type(exc).__name__}: {exc})") from exc
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            ready = ours.recv(1)
        except TimeoutError:
            ready = b""
        if ready != b"R":
            ours.close()
            self._proc.kill()
            code = self._proc.wait()
            raise GraderError(
                f"the grading zygote did not start within {START_TIMEOUT_S} s (exit code {code}); check "
                f"that `{sys.executable} -c 'import math_verify, thinc_bench'` works"
            )
        ours.settimeout(None)
        return ours

    def fork_worker(self) -> tuple[int, Connection]:
        """Return a new warm worker's pid and its connection (the worker has already said "ready").

        Raises:
            GraderError: the zygote cannot start, or died.
        """
        with self._lock:
            if self._sock is None:
                self._sock = self._start()
            try:
                self._sock.sendall(b"F")
                msg, fds, _, _ = socket.recv_fds(self._sock, _PID_BYTES, 1)
                while msg and len(msg) < _PID_BYTES:
                    msg += self._sock.recv(_PID_BYTES - len(msg))
            except OSError as exc:
                self._drop()
                raise GraderError(f"the grading zygote failed ({type(exc).__name__}: {exc})") from exc
            if len(msg) != _PID_BYTES or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                self._drop()
                raise GraderError("the grading zygote died; the next item starts a new one")
        return int(msg), Connection(fds[0])

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        """Stop the zygote (its idle workers end when their connections close)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None

    def forget(self) -> None:
        """In a forked child: drop this copy of the parent's zygote without touching it."""
        self._lock = threading.Lock()
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._proc = None  # the parent's child: never waited on or killed from here


def _worker_child(conn: Connection) -> None:
    """In the forked worker: die with the zygote, cap memory, then serve until the pipe closes."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    soft = WORKER_MEMORY_MB * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
    from thinc_bench.grading._worker import serve

    serve(conn)


def main(fd: int) -> None:
    """Zygote entry point: warm up, then fork one worker per request byte until the socket closes."""
    sock = socket.socket(fileno=fd)
    import thinc_bench.grading._worker  # noqa: F401 - the warm-up every worker inherits

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps workers the parent kills
    sock.sendall(b"R")
    while sock.recv(1) == b"F":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                sock.close()
                ours.close()
                _worker_child(Connection(theirs.detach()))
                code = 0
            finally:  # a forked worker never returns into the zygote loop
                os._exit(code)
        theirs.close()
        socket.send_fds(sock, [f"{pid:{_PID_BYTES}d}".encode()], [ours.fileno()])
        ours.close()
