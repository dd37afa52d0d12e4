"""`Sandbox`: owns the fork-server process, the bounded pool of sessions and the counters.

Contract: `Sandbox(config)` starts nothing until `start()`/`with`; `session()` hands out one
`Session` per trajectory, waiting for one of `max_sessions` slots. Control requests to the server
are serialised under one lock (each takes about a millisecond). When the server dies, the next
request restarts it (counted in `stats.server_starts`); sessions of the dead server notice and
start fresh. The protections in force are logged once per Sandbox (a warning naming each missing
one and why) and kept in `protection_summary()` for the run's config.json. A process forked from
one holding Sandboxes gets them back unstarted: the child's first use starts its own server, and
the parent's server, sessions and cgroups are never touched from the child.
A few session processes are started ahead of need (`warm_sessions`, see `_warm`): a session takes
one when it opens and uses it at its first run if it is alive, silent and of the running server
(else the next, else its own); their starts yield to sessions' control requests and pause while
the sessions' memory group is near its cap.
It does not run code itself: sessions talk to their processes directly.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import _protections
from thinc_bench.sandbox._process import Live, idle_and_clean, start_process, stop_process
from thinc_bench.sandbox._server import Server
from thinc_bench.sandbox._warm import WarmPool
from thinc_bench.sandbox.config import SandboxConfig
from thinc_bench.sandbox.runtime import _cgroups
from thinc_bench.sandbox.session import Session

logger = logging.getLogger(__name__)

# How long session() waits for a free pool slot before declaring the pool exhausted.
POOL_WAIT_S = 600.0
# No session process is started ahead of need while the sessions' memory group (the cap of all
# sessions together) has less than this share of its limit left: near the cap, the kernel's OOM
# killer would take the largest session, a trajectory's, to make room for one nobody uses yet.
WARM_HEADROOM_SHARE = 0.1


@dataclass
class SandboxStats:
    """Counters since the Sandbox started (a snapshot is returned by `Sandbox.stats`)."""

    server_starts: int = 0
    sessions_started: int = 0
    runs: int = 0
    timeouts: int = 0
    sessions_died: int = 0
    infra_errors: int = 0
    infra_retries: int = 0
    injected_failures: int = 0
    protocol_violations: int = 0
    # Processes a session's code left running when a run ended (killed before its result was
    # reported, which notes how many; needs the pids cgroup) or when the session (or its
    # process) ended: each one was killed before the session went on or its slot was reused. `survivors_left`: ones the
    # sweep could not remove within a second (0 unless the kernel is wedged).
    survivors: int = 0
    survivors_left: int = 0
    # Runs whose process was replaced because the run before left threads running (they could
    # forge the next run's result).
    threads_left: int = 0
    # Session processes started ahead of need (SandboxConfig.warm_sessions), those handed to a
    # session, and those killed instead: they died, spoke, or belonged to a server that had died.
    warm_started: int = 0
    warm_taken: int = 0
    warm_discarded: int = 0
    # Runs the host kept from their time until the wall-clock backstop (`infra_error`, not timeouts).
    host_saturated: int = 0


class Sandbox:
    """A pool of isolated, stateful Python sessions backed by one warm fork-server.

    Example:
        >>> with Sandbox(SandboxConfig()) as sb, sb.session() as s:
        ...     s.run("x = 6*7").status, s.run("x").output
        ('ok', '42\\n')
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config if config is not None else SandboxConfig()
        self._server: Server | None = None
        self._generation = 0
        self._lock = threading.Lock()
        self._stats = SandboxStats()
        self._stats_lock = threading.Lock()
        self._warm = self._new_warm_pool()
        self._sid = 0
        self._executor: ThreadPoolExecutor | None = None
        self._logged = False
        self._closed = False
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self.protections: tuple[list[str], list[str]] = ([], [])
        self.protection_lines: list[_protections.Protection] = []
        _LIVE.add(self)

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Sandbox:
        """Start the fork-server now (otherwise the first session starts it).

        Raises:
            SandboxUnavailable: the server cannot start, or `isolation="bwrap"` and no jail is possible.
        """
        self._current_server()
        return self

    def close(self) -> None:
        """Stop the server; every session process dies with it, the ones started ahead of need too."""
        with self._lock:
            self._closed = True
        for live in self._warm.close():  # the server's shutdown kills them; our ends close here
            live.close()
        with self._lock:
            if self._server is not None:
                self._server.close()
                self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def stats(self) -> SandboxStats:
        """A snapshot of the counters."""
        with self._stats_lock:
            return dataclasses.replace(self._stats)

    @property
    def jailed(self) -> bool:
        """Whether the running server is inside the bubblewrap jail."""
        return self._current_server().launch.jailed

    def session(self, *, inject_failures: int = 0) -> Session:
        """Open a session (one per trajectory); it takes a pool slot until closed.

        Args:
            inject_failures: the first k runs return an injected execution failure (Recovery@k);
                the code is not executed and state does not advance.

        Raises:
            SandboxUnavailable: no slot freed within POOL_WAIT_S, or the sandbox is closed.
        """
        if self._closed:
            raise SandboxUnavailable("this Sandbox is closed; open a new one")
        got, reserved = self._warm.acquire(POOL_WAIT_S)
        if not got:
            raise SandboxUnavailable(
                f"all {self.config.max_sessions} sandbox sessions stayed busy for {POOL_WAIT_S} s; "
                "close finished sessions or raise SandboxConfig.max_sessions"
            )
        if reserved is None:
            reserved = self._warm.take()
        session = Session(self, inject_failures=inject_failures, reserved=reserved)
        self._sessions.add(session)
        return session

    def protection_summary(self) -> dict[str, Any]:
        """The protections of the running server, for config.json: active names, and each missing
        one with the reason (starts the server if needed).

        Raises:
            SandboxUnavailable: the server cannot start.
        """
        visible = self._current_server().launch.visible
        return {
            "active": [p.name for p in self.protection_lines if p.active],
            "inactive": {p.name: p.why for p in self.protection_lines if not p.active},
            "packages": dict(visible.versions),  # what model code may import besides the stdlib
        }

    # ---- used by Session ---------------------------------------------------------------------
    def _current_server(self) -> Server:
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("this Sandbox is closed; open a new one")
            if self._server is None or self._server.dead or self._server.proc.poll() is not None:
                if self._server is not None:
                    self._server.close()
                self._generation += 1
                self._server = Server(self.config, self._generation)
                self._count("server_starts")
                self._log_protections(self._server)
                self._warm.begin()
            return self._server

    def _new_warm_pool(self) -> WarmPool[Live]:
        return WarmPool(
            self.config.warm_sessions, self.config.max_sessions, self._start_warm, self._drop_warm
        )

    def _start_warm(self) -> Live | None:
        """Start one session process ahead of need on the running server (never starts a server:
        the next session does, and says so)."""
        with self._lock:
            server = self._server
        if self._closed or server is None or server.dead or server.proc.poll() is not None:
            return None
        group = server.launch.groups.session_parents.get("memory")
        if group is not None:
            headroom = _cgroups.memory_headroom(group)
            cap = self.config.resolved_total_memory_mb() * 2**20
            if headroom is not None and headroom < WARM_HEADROOM_SHARE * cap:
                return None  # the refiller tries again in a moment
        live = start_process(server, self._next_sid(), background=True)
        self._count("warm_started")
        return live

    def _drop_warm(self, live: Live) -> None:
        stop_process(live)
        self._count("warm_discarded")

    def _warm_process(self, server: Server, reserved: Live | None) -> Live | None:
        """A process started ahead of need that can serve a session on `server` now (`reserved`
        first, then the pool's), or None; each one that died or spoke while waiting is killed."""
        live = reserved if reserved is not None else self._warm.take()
        while live is not None:
            if idle_and_clean(live, server):
                self._count("warm_taken")
                return live
            self._drop_warm(live)
            live = self._warm.take()
        return None

    def _log_protections(self, server: Server) -> None:
        lines = _protections.describe(server.launch, server.hello)
        self.protection_lines = lines
        self.protections = ([p.name for p in lines if p.active], [p.name for p in lines if not p.active])
        if self._logged:
            return
        self._logged = True
        if server.hello.get("preload_failed"):
            logger.warning("sandbox preload failed for: %s", "; ".join(server.hello["preload_failed"]))
        missing = [p for p in lines if not p.active and not p.minor]
        minor = [p for p in lines if not p.active and p.minor]
        if missing:  # name only what is missing; config.json keeps the whole summary
            logger.warning(
                "sandbox protections missing: %s",
                "; ".join(f"{p.name} (because {p.why})" for p in missing),
            )
        else:
            logger.info("sandbox protections: all %d that contain a session active", len(lines) - len(minor))
        if minor:  # nothing for the user to do: the host withholds it, and sessions stay contained
            logger.info(
                "sandbox: not available on this host: %s", "; ".join(f"{p.name} ({p.why})" for p in minor)
            )

    def _after_fork_in_child(self) -> None:
        """Reset process-local state in a forked child (see the module docstring)."""
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._stats = SandboxStats()
        for live in self._warm.close_in_child():  # the parent's processes: drop our copies only
            live.close()
        self._warm = self._new_warm_pool()
        if self._server is not None:
            self._server.forget_in_child()
            _FORK_ORPHANS.append(self._server)  # never finalised here: its Popen is the parent's
            self._server = None
        if self._executor is not None:
            _FORK_ORPHANS.append(self._executor)  # its threads exist only in the parent
            self._executor = None
        for session in list(self._sessions):
            session._after_fork_in_child()

    def _next_sid(self) -> int:
        with self._lock:
            self._sid += 1
            return self._sid

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self._stats, name, getattr(self._stats, name) + n)

    def _release_slot(self) -> None:
        self._warm.release()

    def _run_executor(self) -> ThreadPoolExecutor:
        # Called on the event loop by every arun(): no lock once the pool exists, because the
        # lock is held for a whole server (re)start (~1 s), which would stall every rollout.
        if (executor := self._executor) is not None:
            return executor
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.config.max_concurrent_runs, thread_name_prefix="sandbox-run"
                )
            return self._executor

    def __repr__(self) -> str:
        return f"Sandbox(generation={self._generation}, pid={os.getpid()}, config={self.config})"


# Every Sandbox of this process, so that a forked child can reset them (os.register_at_fork).
_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_FORK_ORPHANS: list[object] = []


def _reset_after_fork() -> None:
    for sandbox in list(_LIVE):
        sandbox._after_fork_in_child()


os.register_at_fork(after_in_child=_reset_after_fork)
