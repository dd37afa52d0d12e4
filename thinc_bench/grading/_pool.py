"""A pool of killable math-verify worker processes with a hard per-item timeout.

Owns process lifecycle and the wire protocol: `submit(tasks)` returns one Future per task; one
thread per slot feeds its worker small batches and reads results back one at a time, so when an
item overruns `timeout_s` the worker is killed, the rest of its batch is requeued, and a fresh
worker takes over. Who a failure belongs to (docs/grading.md "Timeouts"): an item that overruns
its deadline gets one more try in a fresh worker (one overrun may be the machine's load), and a
second overrun is the answer's own, `grader_timeout`: it cannot be judged in bounded time. A
worker that dies mid-item gets the item once more, then the item is `grader_error`, the
infrastructure's. Workers are forked warm by the pool's `Zygote` (safe in
a threaded or asyncio parent, in a script without a `__main__` guard, in `python -c`). In a child
forked from the parent, `forget` drops the inherited pool without touching the parent's workers.
Thread-safe.
It does not know what the tasks mean or cache anything: that is `grading`.
"""

import contextlib
import logging
import os
import signal
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import NamedTuple

from thinc_bench.errors import GraderError
from thinc_bench.grading._messages import Result, Task
from thinc_bench.grading._zygote import Zygote

logger = logging.getLogger(__name__)

MAX_BATCH = 16
"""Items per message to a worker: amortises pipe round trips, small enough to keep slots balanced."""

MAX_CRASH_RETRIES = 1
"""A worker dying on an item is infrastructure until it happens twice on the same item."""

MAX_DEADLINE_RETRIES = 1
"""An item overrunning its deadline is tried once more in a fresh worker before the overrun is the
answer's (`grader_timeout`): a loaded machine can slow one check past it, not two in a row."""

WORKER_START_TIMEOUT_S = 60.0
"""A worker forked from the warm zygote answers "ready" in milliseconds; this only bounds a wedge."""


@dataclass
class _Job:
    task: Task
    future: "Future[Result]"
    crashes: int = 0
    overruns: int = 0


class _Worker(NamedTuple):
    pid: int
    conn: Connection


class WorkerPool:
    """Fixed number of worker slots fed from one shared queue; workers start on first use."""

    def __init__(self, workers: int, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._zygote = Zygote()
        self._workers: set[_Worker] = set()
        self._queue: deque[_Job] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._slots = [
            threading.Thread(target=self._slot_loop, name=f"grader-slot-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._slots:
            t.start()

    def submit(self, tasks: list[Task]) -> list["Future[Result]"]:
        """Queue tasks; each Future resolves to a Result (never raises unless workers cannot start).

        Raises:
            GraderError: the pool is closed.
        """
        jobs = [_Job(t, Future()) for t in tasks]
        with self._cv:
            if self._closed:
                raise GraderError("the grader is closed; create a new Grader to grade again")
            self._queue.extend(jobs)
            self._cv.notify_all()
        return [j.future for j in jobs]

    def close(self) -> None:
        """Stop the slots and their workers; queued items fail with GraderError."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        for t in self._slots:
            if t is not threading.current_thread():
                t.join(timeout=self.timeout_s + 5)
        with self._cv:
            leftover = list(self._queue)
            self._queue.clear()
        for job in leftover:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(GraderError("the grader was closed before this item ran"))
        self._zygote.close()

    def forget(self) -> None:
        """In a forked child: drop the inherited pool (its threads did not survive the fork) and close
        this process's copies of its sockets; the parent's zygote and workers are untouched."""
        self._closed = True
        for worker in list(self._workers):
            worker.conn.close()
        self._workers.clear()
        self._zygote.forget()

    def pids(self) -> list[int]:
        """Pids of the live workers (for tests and diagnostics)."""
        return [w.pid for w in list(self._workers)]

    def _take(self) -> list[_Job] | None:
        with self._cv:
            while not self._queue and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            n = min(MAX_BATCH, max(1, len(self._queue) // len(self._slots)))
            batch: list[_Job] = []
            while self._queue and len(batch) < n:
                job = self._queue.popleft()
                if job.future.running() or job.future.set_running_or_notify_cancel():
                    batch.append(job)
            return batch

    def _requeue_front(self, jobs: list[_Job]) -> None:
        with self._cv:
            self._queue.extendleft(reversed(jobs))
            self._cv.notify_all()

    def _start_worker(self) -> _Worker:
        pid, conn = self._zygote.fork_worker()
        worker = _Worker(pid, conn)
        if not conn.poll(WORKER_START_TIMEOUT_S):
            self._stop_worker(worker, kill=True)
            raise GraderError(f"a grading worker did not start within {WORKER_START_TIMEOUT_S} s")
        try:
            conn.recv()
        except (EOFError, OSError) as exc:
            self._stop_worker(worker, kill=True)
            raise GraderError(
                "a grading worker died while starting; check that `python -c 'import math_verify'` works"
            ) from exc
        self._workers.add(worker)
        return worker

    def _stop_worker(self, worker: _Worker, *, kill: bool) -> None:
        """Ask a worker to exit, or kill it (the zygote's SIGCHLD setting lets the kernel reap it)."""
        self._workers.discard(worker)
        if not kill:
            try:
                worker.conn.send(None)
            except OSError:
                kill = True
        if kill:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(worker.pid, signal.SIGKILL)
        worker.conn.close()

    def _slot_loop(self) -> None:
        worker: _Worker | None = None
        while (batch := self._take()) is not None:
            if not batch:
                continue
            try:
                if worker is None:
                    worker = self._start_worker()
            except GraderError as exc:
                for job in batch:
                    job.future.set_exception(exc)
                continue
            worker = self._run_batch(worker, batch)
        if worker is not None:
            self._stop_worker(worker, kill=False)

    def _run_batch(self, worker: _Worker, batch: list[_Job]) -> _Worker | None:
        """Send a batch, collect results item by item; return the worker if it is still usable."""
        try:
            worker.conn.send(list(enumerate(job.task for job in batch)))
        except OSError:
            self._stop_worker(worker, kill=True)
            self._requeue_front(batch)
            return None
        for i, job in enumerate(batch):
            if not worker.conn.poll(self.timeout_s):
                self._stop_worker(worker, kill=True)
                self._requeue_front(batch[i + 1 :])
                self._on_overrun(job)
                return None
            try:
                item_id, result = worker.conn.recv()
            except (EOFError, OSError):
                self._stop_worker(worker, kill=True)
                self._on_crash(job)
                self._requeue_front(batch[i + 1 :])
                return None
            if item_id != i:  # a protocol bug, not a model error: be loud, keep serving
                self._stop_worker(worker, kill=True)
                logger.error("grading worker answered item %s, expected %s", item_id, i)
                job.future.set_result(Result("grader_error", f"protocol: got item {item_id}, expected {i}"))
                self._requeue_front(batch[i + 1 :])
                return None
            job.future.set_result(result)
        return worker

    def _on_crash(self, job: _Job) -> None:
        job.crashes += 1
        if job.crashes > MAX_CRASH_RETRIES:
            logger.error("grading worker died twice on %s", _short(job.task))
            job.future.set_result(Result("grader_error", "the grading worker died on this item twice"))
        else:
            logger.warning("grading worker died; retrying %s", _short(job.task))
            self._requeue_front([job])

    def _on_overrun(self, job: _Job) -> None:
        job.overruns += 1
        if job.overruns > MAX_DEADLINE_RETRIES:
            logger.warning("no verdict within %.1f s, twice, on %s", self.timeout_s, _short(job.task))
            job.future.set_result(
                Result("grader_timeout", f"no verdict within {self.timeout_s} s, twice in a fresh worker")
            )
        else:
            logger.info("grading worker killed after %.1f s; retrying %s", self.timeout_s, _short(job.task))
            self._requeue_front([job])


def _short(task: Task) -> str:
    return f"{task.kind}(gold={task.a[:60]!r}, pred={task.b[:60]!r})"
