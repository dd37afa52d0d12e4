"""The pool's capacity: slots of sessions, and session processes started ahead of need.

Why: starting a session process is a fork-server round trip (5-40 ms, serialised with every other
control request), paid on a trajectory's first run. A few processes started in the background
take it off the trajectory's path. One invariant keeps the pool within `max_sessions`: sessions
holding a slot + processes ready + processes being started never exceed it (a session holds at
most one process, so neither do live session processes). A session that finds every slot taken
while a process is ready takes that process and its place. A ready process is checked when it is
handed out (the server that forked it is the current one, its socket and output pipe are silent
and open); one that died or spoke while waiting is killed and counted, never handed out.
It forks nothing itself: the Sandbox passes in how to start and how to stop a process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

# After a failed start (server restarting, fork refused), the refiller waits this long or until
# the pool is used again: a sandbox whose server is gone must not spin.
RETRY_S = 0.5
JOIN_S = 30.0

P = TypeVar("P")


class WarmPool(Generic[P]):
    """Slot accounting and a background refiller of up to `size` ready processes."""

    def __init__(
        self,
        size: int,
        max_sessions: int,
        start: Callable[[], P | None],
        stop: Callable[[P], None],
    ) -> None:
        self.size = min(size, max_sessions)
        self.max_sessions = max_sessions
        self._start, self._stop = start, stop
        self._cond = threading.Condition()
        self._in_use = 0
        self._ready: deque[P] = deque()
        self._starting = 0
        self._closed = False
        self._failed_at = 0.0
        self._thread: threading.Thread | None = None

    # ---- slots -------------------------------------------------------------------------------
    def acquire(self, timeout: float) -> tuple[bool, P | None]:
        """Take a slot for a new session, waiting up to `timeout` s; (False, None) when none freed.

        When only a ready process holds the last free place, it comes with the slot (the session
        owns it from then on); otherwise the second item is None.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._in_use + len(self._ready) + self._starting < self.max_sessions:
                    self._in_use += 1
                    self._cond.notify_all()
                    return True, None
                if self._ready:
                    self._in_use += 1
                    process = self._ready.popleft()
                    self._cond.notify_all()
                    return True, process
                left = deadline - time.monotonic()
                if left <= 0:
                    return False, None
                self._cond.wait(left)

    def release(self) -> None:
        """A session closed (its process is dead): its slot is free."""
        with self._cond:
            self._in_use -= 1
            self._cond.notify_all()

    def take(self) -> P | None:
        """A ready process for a session that holds a slot, or None (the caller starts one)."""
        self._ensure_thread()
        with self._cond:
            process = self._ready.popleft() if self._ready else None
            self._cond.notify_all()  # the refiller starts a replacement
            return process

    # ---- lifecycle ---------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self.size == 0 or self._thread is not None:
            return
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._refill, name="sandbox-warm", daemon=True)
                self._thread.start()

    def begin(self) -> None:
        """Start filling (the server is up)."""
        self._ensure_thread()

    def close(self) -> list[P]:
        """Stop the refiller and return the ready processes (the caller drops them with the server)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_S)
        with self._cond:
            ready = list(self._ready)
            self._ready.clear()
            return ready

    def close_in_child(self) -> list[P]:
        """In a forked child: the refiller (and maybe the lock's holder) stayed in the parent, so
        nothing here locks; returns the ready processes, which are the parent's."""
        self._closed = True
        return list(self._ready)

    def ready_count(self) -> int:
        with self._cond:
            return len(self._ready)

    def wait_full(self, timeout: float) -> bool:
        """Wait until `size` processes are ready (or no more may start); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < self._target() or self._starting:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._cond.wait(left)
            return True

    def _target(self) -> int:
        """How many processes should be ready now: `size`, within the slots sessions leave."""
        return max(0, min(self.size, self.max_sessions - self._in_use))

    def _refill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (
                    len(self._ready) + self._starting >= self._target()
                    or time.monotonic() - self._failed_at < RETRY_S
                ):
                    if time.monotonic() - self._failed_at < RETRY_S:
                        self._cond.wait(RETRY_S)
                    else:
                        self._cond.wait()
                if self._closed:
                    return
                self._starting += 1
            process: P | None = None
            surplus: P | None = None
            try:
                process = self._start()
            except Exception as exc:  # noqa: BLE001 - the session's own start reports it; log and retry
                logger.debug("sandbox warm pool: could not start a session process: %r", exc)
            with self._cond:
                self._starting -= 1
                if process is None:
                    self._failed_at = time.monotonic()
                elif self._closed:
                    surplus = process
                else:
                    self._ready.append(process)
                self._cond.notify_all()
            if surplus is not None:
                self._stop(surplus)
