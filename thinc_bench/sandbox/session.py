"""`Session`: one trajectory's interpreter, with notebook state, limits, restarts and fault injection.

Contract: `run(code)` always returns an `ExecResult` (never raises for anything the code does).
The wall timeout kills the whole session; a session whose process died reports how, and its next
run starts fresh with a notice first in that run's output (a kernel restart). An infrastructure
failure (server gone, spawn refused, protocol broken) is retried once in a fresh session and
counted; if it persists the status is `infra_error`. User-code failures are never retried.
Output (one pipe for stdout+stderr) is read while the code runs and kept as head + tail.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import selectors
import signal
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import _wire
from thinc_bench.sandbox.config import ExecResult, Status

if TYPE_CHECKING:
    from thinc_bench.sandbox.pool import Sandbox, _Server

# Fork + namespaces + mounts take ~10 ms; 30 s means the server or kernel is wedged.
SESSION_START_TIMEOUT_S = 30.0
# After the session socket closes, how long to wait for the process to finish dying on its own
# (so we can report its signal or exit code) before killing it.
DEATH_GRACE_S = 1.0
DEATH_POLL_S = 0.002
# After a kill or a death, output still in the pipe is collected for at most this long.
DRAIN_S = 0.2
READ_CHUNK_BYTES = 65536


class InfraFailure(Exception):
    """The sandbox machinery (not the user's code) failed; retried once, then `infra_error`."""


@dataclass
class _Live:
    sid: int
    server: _Server
    sock: socket.socket
    out_r: int
    reader: _wire.FrameReader


class _Output:
    """Keeps the first and last bytes of a stream and counts what was cut between them."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not per chunk
            del self.tail[: len(self.tail) - self.tail_limit]

    def render(self) -> tuple[str, bool]:
        tail = self.tail[-self.tail_limit :] if self.tail_limit else b""
        cut = self.total - len(self.head) - len(tail)
        if cut <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace"), False
        marker = f"\n[... {cut} bytes of output cut ...]\n"
        text = (
            bytes(self.head).decode("utf-8", errors="replace")
            + marker
            + bytes(tail).decode("utf-8", errors="replace")
        )
        return text, True


def _death_message(info: dict[str, Any]) -> tuple[Status, str]:
    if info.get("how") == "signal":
        sig = int(info.get("code", 0))
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            return "timeout", "its CPU-time limit was reached (SIGXCPU)"
        return "killed", f"it was killed by signal {name}"
    return "killed", f"it exited with code {info.get('code')} (os._exit or a fatal error)"


class Session:
    """One stateful interpreter; create with `Sandbox.session()`, use as a context manager."""

    def __init__(self, sandbox: Sandbox, *, inject_failures: int = 0) -> None:
        self._sandbox = sandbox
        self._config = sandbox.config
        self._faults_left = inject_failures
        self._live: _Live | None = None
        self._notice: str | None = None
        self._runs = 0
        self._lock = threading.Lock()
        self._closed = False

    # ---- public ------------------------------------------------------------------------------
    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Execute `code` in this session and return its result (never raises for user code).

        Args:
            code: Python source; a bare last expression's value is printed.
            timeout: wall-clock seconds for this run; default `SandboxConfig.timeout_s`.

        Raises:
            SandboxUnavailable: the session or its Sandbox is closed.
        """
        with self._lock:
            if self._closed:
                raise SandboxUnavailable(
                    "this sandbox session is closed; open a new one with Sandbox.session()"
                )
            self._sandbox._count("runs")
            if self._faults_left > 0:
                self._faults_left -= 1
                self._sandbox._count("injected_failures")
                return ExecResult("error", self._config.fault_output, 0.0, injected=True)
            if self._config.state == "fresh" and self._runs > 0:
                self._discard()
                self._notice = None
            self._runs += 1
            limit = self._config.timeout_s if timeout is None else timeout
            start = time.perf_counter()
            for attempt in (1, 2):
                try:
                    return self._run_once(code, limit, start)
                except InfraFailure as exc:
                    self._sandbox._count("infra_errors")
                    self._discard()
                    if attempt == 2:
                        return ExecResult(
                            "infra_error",
                            f"[sandbox] infrastructure error: {exc}",
                            time.perf_counter() - start,
                        )
                    self._sandbox._count("infra_retries")
                    self._notice = f"[sandbox] session restarted after a sandbox infrastructure error ({exc}); earlier state is gone.\n"
            raise AssertionError("unreachable")

    async def arun(self, code: str, timeout: float | None = None) -> ExecResult:
        """Same as `run`, for asyncio: runs in the Sandbox's bounded worker pool.

        Raises:
            SandboxUnavailable: the session or its Sandbox is closed.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._sandbox._run_executor(), self.run, code, timeout)

    def close(self) -> None:
        """Kill the session's processes (its scratch folder goes with them) and free its pool slot."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._discard()
            self._sandbox._release_slot()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- internals ---------------------------------------------------------------------------
    def _start(self) -> _Live:
        try:
            server = self._sandbox._current_server()
        except SandboxUnavailable as exc:
            if self._sandbox._closed:
                raise
            raise InfraFailure(str(exc)) from exc
        sid = self._sandbox._next_sid()
        harness_end, child_end = socket.socketpair()
        out_r, out_w = os.pipe()
        try:
            server.request({"op": "spawn", "sid": sid}, [child_end.fileno(), out_w])
        finally:
            child_end.close()
            os.close(out_w)
        fcntl.fcntl(out_r, fcntl.F_SETFL, fcntl.fcntl(out_r, fcntl.F_GETFL) | os.O_NONBLOCK)
        live = _Live(sid, server, harness_end, out_r, _wire.FrameReader(harness_end))
        self._live = live
        harness_end.settimeout(SESSION_START_TIMEOUT_S)
        try:
            frame = live.reader.read_frame()
        except (OSError, _wire.WireError) as exc:
            raise InfraFailure(f"session process did not start: {exc!r}") from exc
        finally:
            harness_end.settimeout(None)
        if frame.get("op") != "ready":
            raise InfraFailure(f"session setup failed: {frame.get('error', frame)}")
        self._sandbox._count("sessions_started")
        return live

    def _discard(self) -> dict[str, Any]:
        """Kill and forget the current process; returns how it ended (empty if unknown)."""
        live, self._live = self._live, None
        if live is None:
            return {}
        info: dict[str, Any] = {}
        try:
            if not live.server.dead:
                info = live.server.request({"op": "kill", "sid": live.sid})
        except InfraFailure:
            info = {}
        finally:
            live.sock.close()
            os.close(live.out_r)
        return info

    def _reap_dead(self, live: _Live) -> dict[str, Any]:
        """The session socket closed: wait briefly for the process to finish dying, then collect it."""
        deadline = time.monotonic() + DEATH_GRACE_S
        while time.monotonic() < deadline:
            reply = live.server.request({"op": "poll", "sid": live.sid})
            if reply.get("exited"):
                self._live = None
                live.sock.close()
                os.close(live.out_r)
                return reply
            time.sleep(DEATH_POLL_S)
        return self._discard()

    def _drain(self, out_r: int, output: _Output, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                data = os.read(out_r, READ_CHUNK_BYTES)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(DEATH_POLL_S)
                continue
            if not data:
                return
            output.add(data)

    def _run_once(self, code: str, limit: float, start: float) -> ExecResult:
        notice, self._notice = self._notice, None
        if self._live is not None and self._live.server.dead:
            self._discard()
            notice = (
                notice
                or "[sandbox] session restarted: the sandbox server was restarted; earlier state is gone.\n"
            )
        live = self._live or self._start()
        output = _Output(self._config.max_output_bytes)
        try:
            _wire.send_frame(live.sock, {"op": "run", "code": code})
        except OSError:
            # The process died between runs (a background thread's os._exit, say).
            server = live.server
            _status, why = _death_message(self._discard())
            if server.dead:
                raise InfraFailure("the sandbox server died") from None
            notice = f"[sandbox] session restarted: the previous process ended between runs ({why}); earlier state is gone.\n"
            live = self._start()
            _wire.send_frame(live.sock, {"op": "run", "code": code})
        deadline = start + limit
        with selectors.DefaultSelector() as sel:
            sel.register(live.sock, selectors.EVENT_READ, "sock")
            sel.register(live.out_r, selectors.EVENT_READ, "out")
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    return self._timed_out(live, output, notice, limit, start)
                for key, _mask in sel.select(remaining):
                    if key.data == "out":
                        self._drain(live.out_r, output, 0)
                        continue
                    live.reader.feed_from_socket()
                    frame = live.reader.next_frame()
                    if frame is not None and frame.get("op") == "done":
                        self._drain(live.out_r, output, 0)
                        return self._result(str(frame.get("status")), output, notice, start)  # type: ignore[arg-type]
                    if live.reader.eof:
                        return self._died(live, output, notice, start)

    def _result(
        self, status: Status, output: _Output, notice: str | None, start: float, tail: str = ""
    ) -> ExecResult:
        text, truncated = output.render()
        if status not in ("ok", "error", "memory", "timeout", "killed"):
            status = "killed"  # the process wrote something else on its socket: treat as a dead kernel
        return ExecResult(status, (notice or "") + text + tail, time.perf_counter() - start, truncated)

    def _timed_out(
        self, live: _Live, output: _Output, notice: str | None, limit: float, start: float
    ) -> ExecResult:
        self._discard_keeping_output(live, output)
        self._sandbox._count("timeouts")
        self._notice = "[sandbox] session restarted: the previous run timed out and its process was killed; earlier state is gone.\n"
        tail = (
            f"\n[sandbox] timeout: the run exceeded {limit:g} s of wall-clock time; the session was killed.\n"
        )
        return self._result("timeout", output, notice, start, tail)

    def _died(self, live: _Live, output: _Output, notice: str | None, start: float) -> ExecResult:
        self._drain(live.out_r, output, DRAIN_S)
        info = self._reap_dead(live)
        self._sandbox._count("sessions_died")
        status, why = _death_message(info)
        self._notice = (
            f"[sandbox] session restarted: the previous process died ({why}); earlier state is gone.\n"
        )
        tail = f"\n[sandbox] the session process died: {why}; the next run starts a fresh session.\n"
        return self._result(status, output, notice, start, tail)

    def _discard_keeping_output(self, live: _Live, output: _Output) -> None:
        out_r = os.dup(live.out_r)
        try:
            self._discard()
            self._drain(out_r, output, DRAIN_S)
        finally:
            os.close(out_r)
