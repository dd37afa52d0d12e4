"""`Session`: one trajectory's interpreter, with notebook state, limits, restarts and fault injection.

Contract: `run(code)` always returns an `ExecResult` (never raises for anything the code does).
The time limit kills the whole session: it is charged wall-clock time less the time the host's load
kept the session's tasks waiting for a CPU (`_clock`), and a run the host kept from its time until
a wall-clock backstop is `infra_error`, not `timeout`. A session whose process died reports how, from what the
server saw (`memory` for an OOM kill, `timeout` for the CPU-time limit, else `killed`; never from
the output text), and its next run starts fresh with a notice (a kernel restart). Notices travel
in `ExecResult.notice_before`/`notice_after`, never in `output`; output that arrived between runs
goes to `between_runs`; control characters are escaped. A run after one that left threads
running gets a fresh process: they could forge its result; every other process of the session is
killed before a run's result is reported (by the server through its pids cgroup, else by the
harness through its process tree), and the loop
ends itself if fds 1-3 are no longer its own, so nothing a run starts acts in a later one. An
injected failure reads as a real traceback of its own cell number (`faults.render_fault`) and
takes a number like a real run; only `ExecResult.injected` tells it apart. The session's
socket is untrusted: each run sends a fresh nonce, and anything but one "done" frame carrying it
(a forged, surplus or malformed frame, at any time) kills the session as `killed`. An
infrastructure failure (server gone, spawn refused) is retried once in a fresh session and
counted; if it persists the status is `infra_error`. User-code failures are never retried.
Output (one pipe for stdout+stderr) is read while the code runs and kept as head + tail.
A process may come from the Sandbox's warm pool (started ahead of need, never run): it is used
only if it is of the running server, alive and silent, so nothing tells it from a fresh one.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Protocol

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox._clock import BACKSTOP_FACTOR, RunClock
from thinc_bench.sandbox._outcome import _death_message, _Output, drain
from thinc_bench.sandbox._process import Live, start_process, stop_process
from thinc_bench.sandbox._server import InfraFailure, Server
from thinc_bench.sandbox.config import ExecResult, SandboxConfig, Status
from thinc_bench.sandbox.faults import render_fault
from thinc_bench.sandbox.runtime import _wire

# After the session socket closes, how long to wait for the process to finish dying on its own
# (so we can report its signal or exit code) before killing it. Killing it first loses B's fate
# (R had not written it yet): a CPU-limit death then reads as `killed`, which a 1 s grace let happen
# on a loaded 2-core machine (a parallel test run). The wait ends as soon as the process is gone.
DEATH_GRACE_S = 5.0
DEATH_POLL_S = 0.002
# After a kill or a death, output still in the pipe is collected for at most this long.
DRAIN_S = 0.2
# What the notebook loop reports for a cell; the harness accepts nothing else in a "done" frame.
CELL_STATUSES = frozenset({"ok", "error", "memory"})
FORK_NOTICE = (
    "[sandbox] session restarted: this process was forked, and the session's interpreter stays with "
    "the parent process; earlier state is gone.\n"
)


class Pool(Protocol):
    """What a session needs of the Sandbox that made it (`pool.Sandbox` is one)."""

    config: SandboxConfig
    _closed: bool

    def _count(self, name: str, n: int = 1) -> None: ...
    def _current_server(self) -> Server: ...
    def _warm_process(self, server: Server, reserved: Live | None) -> Live | None: ...
    def _next_sid(self) -> int: ...
    def _release_slot(self) -> None: ...
    def _run_executor(self) -> ThreadPoolExecutor: ...


def _preview(frame: dict[str, Any]) -> str:
    text = repr(frame)
    return text if len(text) <= 80 else text[:77] + "..."


def _take_done(reader: _wire.FrameReader, nonce: str) -> tuple[str, int] | None:
    """Consume every complete frame buffered; once the run's "done" is among them, return its
    status and how many other threads its process had left running.

    Raises:
        WireError: a malformed frame, one the notebook loop did not send (wrong op, nonce or status),
            or any frame after the run's result.
    """
    done = None
    while (frame := reader.next_frame()) is not None:
        if done is not None:
            raise _wire.WireError(f"a second frame after the run's result: {_preview(frame)}")
        if not _is_done(frame, nonce):
            raise _wire.WireError(f"a frame the interpreter did not send: {_preview(frame)}")
        done = (str(frame["status"]), int(frame.get("threads", 0)))
    return done


def _is_done(frame: dict[str, Any], nonce: str) -> bool:
    """Whether `frame` is exactly the notebook loop's "done" for this run: the session's side is
    untrusted (model code can write on its socket), so every field's type is checked before its value
    is used; a list or dict where a string belongs is a forged frame, not a TypeError."""
    status, threads = frame.get("status"), frame.get("threads", 0)
    return (
        frame.get("op") == "done"
        and type(frame.get("nonce")) is str
        and frame.get("nonce") == nonce
        and type(status) is str
        and status in CELL_STATUSES
        and type(threads) is int
    )


class Session:
    """One stateful interpreter; create with `Sandbox.session()`, use as a context manager."""

    def __init__(self, sandbox: Pool, *, inject_failures: int = 0, reserved: Live | None = None) -> None:
        self._sandbox = sandbox
        # A process started ahead of need that came with this session's slot; checked on first use.
        self._reserved = reserved
        self._config = sandbox.config
        self._faults_left = inject_failures
        self._live: Live | None = None
        self._notice: str | None = None
        self._runs = 0
        self._lock = threading.Lock()
        self._closed = False
        self._holds_slot = True  # False in a forked child: the slot is the parent's
        # Processes this session's code left running when one of its processes ended; the server
        # killed each of them before the session (or its slot) went on.
        self.survivors = 0
        self._threads_left = 0  # other threads the last run's process reported at its "done"
        # The last cell number the model saw in the current interpreter (`<cell-N>`): real runs and
        # injected failures both take the next one; a restart starts again at 1, as a kernel does.
        self._cell = 0
        self._between = ""  # output that arrived before the current run began
        self._stdin: str | None = None  # the current run's standard input (run() sets it)

    # ---- public ------------------------------------------------------------------------------
    @property
    def timeout_s(self) -> float:
        """A run's default wall-clock limit (`SandboxConfig.timeout_s`): a tool's timeout message names it."""
        return self._config.timeout_s

    def run(self, code: str, timeout: float | None = None, *, stdin: str | None = None) -> ExecResult:
        """Execute `code` in this session and return its result (never raises for user code).

        Args:
            code: Python source; a bare last expression's value is printed.
            timeout: wall-clock seconds for this run; default `SandboxConfig.timeout_s`.
            stdin: what the run reads as standard input (`input()`, `sys.stdin`), for tools that take
                it as an argument (rStar2-Agent's `input`); None leaves stdin at end of file.

        Raises:
            SandboxUnavailable: the session or its Sandbox is closed.
        """
        with self._lock:
            if self._closed:
                raise SandboxUnavailable(
                    "this sandbox session is closed; open a new one with Sandbox.session()"
                )
            self._sandbox._count("runs")
            if self._config.state == "fresh":
                self._cell = 0  # every run is the first cell of its own interpreter
            if self._faults_left > 0:
                self._faults_left -= 1
                self._sandbox._count("injected_failures")
                self._cell += 1
                return ExecResult("error", self._fault(code, self._cell), 0.0, injected=True)
            if self._config.state == "fresh" and self._runs > 0:
                self._discard()
                self._notice = None
            self._runs += 1
            self._stdin = stdin
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
                            "",
                            time.perf_counter() - start,
                            notice_after=f"[sandbox] infrastructure error: {exc}\n",
                        )
                    self._sandbox._count("infra_retries")
                    self._notice = f"[sandbox] session restarted after a sandbox infrastructure error ({exc}); earlier state is gone.\n"
            raise AssertionError("unreachable")

    def _fault(self, code: str, cell: int) -> str:
        """The injected failure's text: the configured one, else a traceback of this cell drawn
        with a seed of the code and cell number (the same block fails the same way on a rerun) and
        the config's `fault_seed` (training's draws are not eval's)."""
        if self._config.fault_output:
            return self._config.fault_output
        salt = self._config.fault_seed
        return render_fault(
            code, cell, random.Random(f"{salt}\0{cell}\0{code}" if salt else f"{cell}\0{code}")
        )

    async def arun(self, code: str, timeout: float | None = None, *, stdin: str | None = None) -> ExecResult:
        """Same as `run`, for asyncio: runs in the Sandbox's bounded worker pool.

        Raises:
            SandboxUnavailable: the session or its Sandbox is closed.
        """
        loop = asyncio.get_running_loop()
        run = functools.partial(self.run, code, timeout, stdin=stdin)
        return await loop.run_in_executor(self._sandbox._run_executor(), run)

    def close(self) -> None:
        """Kill the session's processes (its scratch folder goes with them) and free its pool slot."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._discard()
            if (reserved := self._reserved) is not None:
                self._reserved = None
                stop_process(reserved)
            if self._holds_slot:
                self._sandbox._release_slot()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _after_fork_in_child(self) -> None:
        """In a forked child: let go of the parent's interpreter (its descriptors are copies, so
        closing them here leaves the parent's session untouched) and start afresh on next use."""
        self._lock = threading.Lock()
        self._holds_slot = False
        self._cell = 0
        live, self._live = self._live, None
        if live is not None:  # copies of the parent's descriptors: closing them leaves its open
            live.close()
            self._notice = FORK_NOTICE
        if (reserved := self._reserved) is not None:
            self._reserved = None
            reserved.close()

    # ---- internals ---------------------------------------------------------------------------
    def _start(self) -> Live:
        try:
            server = self._sandbox._current_server()
        except SandboxUnavailable as exc:
            if self._sandbox._closed:
                raise
            raise InfraFailure(str(exc)) from exc
        reserved, self._reserved = self._reserved, None
        live = self._sandbox._warm_process(server, reserved) or start_process(
            server, self._sandbox._next_sid()
        )
        self._live = live
        self._sandbox._count("sessions_started")
        return live

    def _discard(self) -> dict[str, Any]:
        """Kill and forget the current process; returns how it ended (empty if unknown)."""
        live, self._live = self._live, None
        self._cell = 0  # the interpreter and its cell count are gone
        if live is None:
            return {}
        info = stop_process(live)
        self._count_survivors(info)
        return info

    def _count_survivors(self, info: dict[str, Any]) -> None:
        """Processes the session's code left running when its process ended (all killed by the
        server's sweep), and any the sweep could not remove."""
        survivors, left = int(info.get("survivors") or 0), int(info.get("survivors_left") or 0)
        self.survivors += survivors
        if survivors:
            self._sandbox._count("survivors", survivors)
        if left:
            self._sandbox._count("survivors_left", left)

    def _reap_dead(self, live: Live) -> dict[str, Any]:
        """The session socket closed: wait briefly for the process to finish dying, then collect it."""
        deadline = time.monotonic() + DEATH_GRACE_S
        while time.monotonic() < deadline:
            reply = live.server.request({"op": "poll", "sid": live.sid})
            if reply.get("exited"):
                self._live = None
                self._cell = 0
                live.close()
                self._count_survivors(reply)
                return reply
            time.sleep(DEATH_POLL_S)
        return self._discard()

    def _run_once(self, code: str, limit: float, start: float) -> ExecResult:
        notice, self._notice = self._notice, None
        self._between = ""
        if self._live is not None:  # what a leftover thread or process wrote since the last run
            early = _Output(self._config.max_output_bytes)
            drain(self._live.out_r, early, 0)
            self._between = early.render()[0]
        if self._live is not None and self._live.server.dead:
            self._discard()
            notice = (
                notice
                or "[sandbox] session restarted: the sandbox server was restarted; earlier state is gone.\n"
            )
        if self._live is not None and (why := self._idle_problem(self._live)):
            notice = f"[sandbox] session restarted: {why}; earlier state is gone.\n"
        if self._live is not None and self._threads_left:
            # Code of an earlier run still runs in that process and could forge this run's result
            # or output: this run gets a process of its own.
            notice = (
                f"[sandbox] session restarted: the previous run left {self._threads_left} thread(s) "
                "running, which could write into this run's result; earlier state is gone.\n"
            )
            self._discard()
            self._sandbox._count("threads_left")
        self._threads_left = 0
        live = self._live or self._start()
        output = _Output(self._config.max_output_bytes)

        nonce = os.urandom(8).hex()  # the loop echoes it; a frame forged before this run cannot
        clock = RunClock(limit, self._backstop(limit), live.watch, time.perf_counter(), self._cpus(live))
        try:
            self._send_run(live, code, nonce, clock.deadline())
        except TimeoutError:  # the process stopped reading its socket: a wedged session
            return self._timed_out(live, output, notice, clock, time.perf_counter(), start)
        except OSError:
            # The process died between runs (a background thread's os._exit, say).
            server = live.server
            _status, why = _death_message(self._discard(), self._config)
            if server.dead:
                raise InfraFailure("the sandbox server died") from None
            notice = f"[sandbox] session restarted: the previous process ended between runs ({why}); earlier state is gone.\n"
            live = self._start()
            clock = RunClock(limit, self._backstop(limit), live.watch, time.perf_counter(), self._cpus(live))
            self._send_run(live, code, nonce, clock.deadline())
        with selectors.DefaultSelector() as sel:
            sel.register(live.sock, selectors.EVENT_READ, "sock")
            sel.register(live.out_r, selectors.EVENT_READ, "out")
            while True:
                now = time.perf_counter()
                if now >= clock.deadline() and clock.check(now) != "running":
                    return self._timed_out(live, output, notice, clock, now, start)
                for key, _mask in sel.select(max(clock.deadline() - now, 0.0)):
                    if key.data == "out":
                        drain(live.out_r, output, 0)
                        continue
                    try:
                        live.reader.feed_from_socket()
                        done = _take_done(live.reader, nonce)
                    except _wire.WireError as exc:
                        return self._violated(live, output, notice, start, str(exc))
                    if done is not None:
                        status, self._threads_left = done
                        if surplus := self._surplus(live):  # a frame behind the result: forged
                            return self._violated(live, output, notice, start, surplus)
                        tail, replaced = self._clean(live)
                        if surplus := self._surplus(live):  # one a process wrote before it was killed
                            return self._violated(live, output, notice, start, surplus)
                        if replaced:
                            return self._replaced(live, output, notice, start)
                        drain(live.out_r, output, 0)
                        return self._result(status, output, notice, start, tail)  # type: ignore[arg-type]
                    if live.reader.eof:
                        return self._died(live, output, notice, start)

    def _cpus(self, live: Live) -> float:
        """The cores the session's processes may use together: its cpu cgroup's quota where there is
        one, else the cores this process may run on (the run clock divides the session's CPU use by it)."""
        cores = float(len(os.sched_getaffinity(0)))
        if "cpu" in live.server.launch.groups.paths:
            return min(cores, float(self._config.cpus_per_session))
        return cores

    def _backstop(self, limit: float) -> float:
        backstop = self._config.timeout_backstop_s
        return BACKSTOP_FACTOR * limit if backstop is None else max(backstop, limit)

    def _clean(self, live: Live) -> tuple[str, bool]:
        """Before a run's result: kill every process of the session but its own (one left could
        write into a later run or relay its channels), and say whether one of its own exec'd another
        program (it could answer for later runs). Through the session's pids cgroup where there is
        one (the server kills), else through its process tree (`ProcWatch`, the harness kills).
        Returns (notice of what was killed, exec'd); ('', False) when neither can be read (what a run
        left dies with the session).

        Raises:
            InfraFailure: the server is gone.
        """
        if "pids" in live.server.hello.get("cgroups", ()):
            return self._clean_by_group(live)
        watch = live.watch
        if watch is None:
            return "", False
        killed = left = 0
        if not watch.only_own():  # a few preads: nothing but B, no child, no thread
            killed, left = watch.sweep()
        return self._survivors_notice(killed, left), watch.exec_replaced()

    def _clean_by_group(self, live: Live) -> tuple[str, bool]:
        # The common case costs a few preads, not a server round trip: the group holds only the
        # session's own processes. (No process can appear after the read: B's code is not running,
        # and threads it left get the next run a fresh process.)
        watch = live.cgroup_watch()
        tail = ""
        if watch is None or not watch.only_own():  # one pread: only its own, no thread, no zombie
            if watch is None or len(watch.pids()) != live.own_processes():
                reply = live.server.request({"op": "clean", "sid": live.sid})
                tail = self._survivors_notice(int(reply.get("killed") or 0), int(reply.get("left") or 0))
            if watch is not None:
                watch.only_own()  # learns them once they are alone
        return tail, watch is not None and watch.exec_replaced()

    def _survivors_notice(self, killed: int, left: int) -> str:
        if left:
            self._sandbox._count("survivors_left", left)
        if not killed:
            return ""
        self.survivors += killed
        self._sandbox._count("survivors", killed)
        return (
            f"\n[sandbox] the run left {killed} process(es) running (started by its code "
            "and not waited for); they were killed when it ended, so nothing it started "
            "acts in a later run.\n"
        )

    def _surplus(self, live: Live) -> str:
        """Bytes already behind the run's "done" (one non-blocking look): the loop sends nothing
        after it, so they mean that code of this session forged one of the two frames."""
        try:
            live.reader.feed_from_socket(socket.MSG_DONTWAIT)
        except BlockingIOError:
            return ""
        if live.reader.buffered:
            return "a frame after the run's result"
        return ""

    def _send_run(self, live: Live, code: str, nonce: str, deadline: float) -> None:
        """Send the run request; a process that stops reading cannot block us past the deadline.

        Raises:
            TimeoutError: the request did not fit in the socket before the deadline.
            OSError: the process is gone.
        """
        live.sock.settimeout(max(deadline - time.perf_counter(), 0.001))
        self._cell += 1  # the loop names the cell `<cell-N>` with this number
        try:
            request = {"op": "run", "code": code, "nonce": nonce, "cell": self._cell}
            if self._stdin is not None:
                request["stdin"] = self._stdin
            _wire.send_frame(live.sock, request)
        finally:
            live.sock.settimeout(None)

    def _idle_problem(self, live: Live) -> str | None:
        """Between runs the socket must be silent: bytes mean a cell wrote on it (the session is
        killed), end of stream means the process died (collected). None when all is well.

        Raises:
            InfraFailure: the process died because the server did.
        """
        try:
            live.reader.feed_from_socket(socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None  # the common case: nothing there
        if live.reader.eof and live.reader.buffered == 0:
            _status, why = _death_message(self._discard(), self._config)
            if live.server.dead:
                raise InfraFailure("the sandbox server died")
            return f"the previous process ended between runs ({why})"
        self._discard()
        self._sandbox._count("protocol_violations")
        return (
            "the previous run's code wrote on the sandbox's control channel (fd 3) after its result, "
            "so its process was killed"
        )

    def _result(
        self, status: Status, output: _Output, notice: str | None, start: float, tail: str = ""
    ) -> ExecResult:
        text, truncated = output.render()
        between, self._between = self._between, ""
        elapsed = time.perf_counter() - start
        return ExecResult(
            status,
            text,
            elapsed,
            truncated,
            between_runs=between,
            notice_before=notice or "",
            notice_after=tail.lstrip("\n"),
        )

    def _timed_out(
        self, live: Live, output: _Output, notice: str | None, clock: RunClock, now: float, start: float
    ) -> ExecResult:
        """The run used its time (`timeout`), or the host kept it from its time until the backstop
        (`infra_error`); either way the session is killed. `start`: when run() was called."""
        wall = now - clock.start
        if wall < clock.backstop - 1e-3 or clock.charged_s(now) >= clock.limit - 1e-3:
            what = (
                "of time (waiting for a busy CPU not counted)" if clock.load_aware else "of wall-clock time"
            )
            tail = (
                f"\n[sandbox] timeout: the run exceeded {clock.limit:g} s {what}; the session was killed.\n"
            )
            restart = "the previous run timed out and its process was killed"
            return self._end_session(live, output, notice, start, ("timeout", "timeouts", restart, tail))
        tail = (
            f"\n[sandbox] infrastructure error: the host was too busy to give the run its time: "
            f"{wall:.1f} s of wall-clock time, {clock.waited_s:.1f} s of it waiting for a CPU, "
            f"{clock.charged_s(now):.1f} s of its {clock.limit:g} s used; the session was killed.\n"
        )
        restart = "the previous run was stopped because the host was too busy to run it"
        return self._end_session(
            live, output, notice, start, ("infra_error", "host_saturated", restart, tail)
        )

    def _violated(
        self, live: Live, output: _Output, notice: str | None, start: float, why: str
    ) -> ExecResult:
        tail = (
            f"\n[sandbox] killed: the code wrote on the sandbox's control channel (fd 3), {why}; "
            "the session was killed and the next run starts a fresh one.\n"
        )
        restart = "the previous run's code wrote on the sandbox's control channel and its process was killed"
        return self._end_session(
            live, output, notice, start, ("killed", "protocol_violations", restart, tail)
        )

    def _replaced(self, live: Live, output: _Output, notice: str | None, start: float) -> ExecResult:
        tail = (
            "\n[sandbox] killed: the interpreter replaced itself with another program (exec), which "
            "could answer for later runs; the session was killed and the next run starts a fresh one.\n"
        )
        restart = "the previous run's code replaced the interpreter (exec) and its process was killed"
        return self._end_session(
            live, output, notice, start, ("killed", "protocol_violations", restart, tail)
        )

    def _end_session(
        self,
        live: Live,
        output: _Output,
        notice: str | None,
        start: float,
        how: tuple[Status, str, str, str],
    ) -> ExecResult:
        """Kill the session on the harness's initiative: (status, counter, restart notice, output tail)."""
        status, counter, restart, tail = how
        self._discard_keeping_output(live, output)
        self._sandbox._count(counter)
        self._notice = f"[sandbox] session restarted: {restart}; earlier state is gone.\n"
        return self._result(status, output, notice, start, tail)

    def _died(self, live: Live, output: _Output, notice: str | None, start: float) -> ExecResult:
        drain(live.out_r, output, DRAIN_S)
        info = self._reap_dead(live)
        self._sandbox._count("sessions_died")
        status, why = _death_message(info, self._config)
        self._notice = (
            f"[sandbox] session restarted: the previous process died ({why}); earlier state is gone.\n"
        )
        tail = f"\n[sandbox] the session process died: {why}; the next run starts a fresh session.\n"
        return self._result(status, output, notice, start, tail)

    def _discard_keeping_output(self, live: Live, output: _Output) -> None:
        out_r = os.dup(live.out_r)
        try:
            self._discard()
            drain(out_r, output, DRAIN_S)
        finally:
            os.close(out_r)
