"""The judge behind `thinc_bench.grading`: Grader (cache, fast paths, worker pool) and its shortcuts.

`Grader` turns (gold, prediction) pairs into `Grade`s through the exact integer fast path, a
per-process verdict cache and the killable worker pool; the module-level `grade`, `equivalent`,
`check_golds` and `is_grounded` use one lazily started default Grader. Extraction and
normalisation are pure text (`_text`); only the workers (`_worker`) call math-verify.
"""

import asyncio
import atexit
import functools
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from thinc_bench.errors import ConfigError, GraderError
from thinc_bench.grading._messages import Outcome, Result, Task
from thinc_bench.grading._pool import WorkerPool
from thinc_bench.grading._printed import grounding_candidates, integer_grounded
from thinc_bench.grading._text import (
    MAX_ANSWER_CHARS,
    align_to_gold,
    as_integer,
    as_trajectory,
    canonical_surface,
    final_answer,
    normalize_answer,
)
from thinc_bench.trajectory import Trajectory

logger = logging.getLogger(__name__)

GradeStatus = Literal[
    "correct",
    "incorrect",
    "no_answer",
    "unparseable_answer",
    "gold_error",
    "grader_timeout",
    "grader_error",
]

JUDGE_VERSION = 2
"""Bump whenever a rule that can change a verdict changes, so a record says which judge gave it and
`python -m thinc_bench.eval.regrade` can bring old runs to the current one.

2: plain-text SymPy / Python forms read in answers and golds; a check that crashes or raises is the
answer's when a control check of its gold passes (`unparseable_answer`), else `grader_error`.
1: (unrecorded) every judge before records named theirs."""


def judge_version() -> str:
    """The judge as records name it: the rules' version and the versions of what does the mathematics."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    return f"thinc-judge {JUDGE_VERSION} (math-verify {of('math-verify')}, sympy {of('sympy')})"


DEFAULT_TIMEOUT_S = 5.0
"""math-verify's own default per parse/compare; every benchmark gold verifies in < 0.1 s."""

MAX_DEFAULT_WORKERS = 8
"""Default worker count is the CPUs available, capped: each worker holds ~150 MB of sympy."""

CACHE_SIZE = 200_000
"""Verdicts kept (LRU): a GRPO run sees ~1e5 distinct (gold, answer) pairs; ~200 B each is ~40 MB."""

_LIVE: "weakref.WeakSet[Grader]" = weakref.WeakSet()
"""Every Grader of this process, so that a forked child can make each its own."""

_CACHEABLE: frozenset[Outcome] = frozenset(
    {"correct", "incorrect", "unparseable_answer", "gold_error", "grader_timeout"}
)
# A timeout is a verdict (the pool retried it; it is the answer's); errors are the infrastructure's
# and worth another try later.

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Grade:
    """The verdict on one response. `correct` is derived from `status`; `detail` explains errors."""

    status: GradeStatus
    answer: str | None
    detail: str | None = None
    correct: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "correct", self.status == "correct")


@dataclass(frozen=True)
class GradeRequest:
    """One (gold, full response) pair for `grade_many`; the response as text or parsed trajectory."""

    gold: str
    pred: "str | Trajectory"


def _done(value: T) -> "Future[T]":
    fut: Future[T] = Future()
    fut.set_result(value)
    return fut


def _chain(fut: "Future[T]", fn: "Callable[[T], Future[U]]") -> "Future[U]":
    """`fn(result)` is itself a future: the returned future follows it (a check that decides on a second)."""
    out: Future[U] = Future()

    def _relay(src: "Future[T]") -> None:
        exc = src.exception()
        if exc is not None:
            out.set_exception(exc)
            return
        try:
            inner = fn(src.result())
        except BaseException as err:  # a GraderError of a closed pool: the caller's, as from `_run`
            out.set_exception(err)
            return

        def _copy(done: "Future[U]") -> None:
            error = done.exception()
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(done.result())

        inner.add_done_callback(_copy)

    fut.add_done_callback(_relay)
    return out


def _then(fut: "Future[T]", fn: Callable[[T], U]) -> "Future[U]":
    out: Future[U] = Future()

    def _relay(src: "Future[T]") -> None:
        exc = src.exception()
        if exc is not None:
            out.set_exception(exc)
        else:
            out.set_result(fn(src.result()))

    fut.add_done_callback(_relay)
    return out


class Grader:
    """Owns the worker pool and the verdict cache. Thread-safe; use as a context manager.

    Args:
        workers: worker processes; default: available CPUs, at most MAX_DEFAULT_WORKERS.
        timeout_s: hard limit per check (one parse+verify); past it the worker is killed and the
            item retried once in a fresh worker; past it again the item is `grader_timeout`, the
            answer's own (wrong: it cannot be judged in bounded time). Default DEFAULT_TIMEOUT_S.
        cache_size: verdicts kept in the LRU cache; default CACHE_SIZE.

    Raises:
        ConfigError: a setting is out of range.
    """

    def __init__(
        self,
        *,
        workers: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        if workers is None:
            workers = min(len(os.sched_getaffinity(0)), MAX_DEFAULT_WORKERS)
        if workers < 1 or timeout_s <= 0 or cache_size < 0:
            raise ConfigError(
                f"Grader(workers={workers}, timeout_s={timeout_s}, cache_size={cache_size}): "
                "need workers >= 1, timeout_s > 0 and cache_size >= 0"
            )
        self.workers = workers
        self.timeout_s = timeout_s
        self._cache_size = cache_size
        self._cache: OrderedDict[Task, Result] = OrderedDict()
        self._inflight: dict[Task, Future[Result]] = {}
        self._lock = threading.Lock()
        self._pool: WorkerPool | None = None
        self._closed = False
        _LIVE.add(self)

    def __enter__(self) -> "Grader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers. Idempotent; later calls that need a worker raise GraderError."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _after_fork_in_child(self) -> None:
        """Make this Grader the child's own: fresh lock, no in-flight items, workers started lazily.

        The parent's pool lives on in the parent; its threads did not survive the fork and its
        sockets are the parent's, so the child only closes its copies. The verdict cache is kept.
        """
        self._lock = threading.Lock()
        self._inflight = {}
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.forget()

    def _run(self, tasks: list[Task]) -> list["Future[Result]"]:
        """Cached and in-flight verdicts first; the rest go to the pool as one batch."""
        with self._lock:
            if self._closed:
                raise GraderError("this Grader is closed; make a new one")
            missing = [t for t in dict.fromkeys(tasks) if t not in self._cache and t not in self._inflight]
            new: dict[Task, Future[Result]] = {}
            if missing:
                if self._pool is None:
                    self._pool = WorkerPool(self.workers, self.timeout_s)
                new = dict(zip(missing, self._pool.submit(missing), strict=True))
                self._inflight.update(new)
            futures: list[Future[Result]] = []
            for task in tasks:
                hit = self._cache.get(task)
                if hit is not None:
                    self._cache.move_to_end(task)
                    futures.append(_done(hit))
                else:
                    futures.append(self._inflight[task])
        # Outside the lock: a callback on an already finished future runs at once and takes it.
        for task, fut in new.items():
            fut.add_done_callback(functools.partial(self._remember, task))
        return futures

    def _remember(self, task: Task, fut: "Future[Result]") -> None:
        with self._lock:
            self._inflight.pop(task, None)
            if fut.cancelled() or fut.exception() is not None:
                return
            result = fut.result()
            if result.outcome in _CACHEABLE and self._cache_size:
                self._cache[task] = result
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)

    def _grade_future(self, gold: str, pred: "str | Trajectory") -> "Future[Grade]":
        answer = final_answer(pred)
        if answer is None:
            return _done(Grade("no_answer", None))
        g = normalize_answer(gold)
        a = align_to_gold(normalize_answer(answer), g)
        if canonical_surface(g) == canonical_surface(a):  # the same text: right even if it never parses
            return _done(Grade("correct", answer))
        gi, ai = as_integer(g), as_integer(a)
        if gi is not None and ai is not None:  # exact at any length: both sides are plain integers
            return _done(Grade("correct" if gi == ai else "incorrect", answer))
        if len(answer) > MAX_ANSWER_CHARS:
            return _done(Grade("unparseable_answer", answer, f"answer longer than {MAX_ANSWER_CHARS} chars"))
        return _chain(self._run([Task("verify", g, a)])[0], lambda r: self._attribute(g, answer, r))

    def _attribute(self, gold: str, answer: str, result: Result) -> "Future[Grade]":
        """Who a failed check belongs to (`thinc_bench.outcomes`), with evidence: when the machinery
        failed on this answer (its worker died on it twice, or the check raised), the gold alone is
        checked again in a fresh worker, past the cache. If that control passes, the machinery works
        and the failure is the answer's: `unparseable_answer` (wrong, with the reason), so an answer
        that crashes the judge cannot take its sample out of the denominator. If the control fails
        too, it is the infrastructure's: `grader_error` (excluded, graded again on resume)."""
        if result.outcome != "grader_error":
            return _done(Grade(result.outcome, answer, result.detail))
        with self._lock:
            if self._closed or self._pool is None:
                return _done(Grade("grader_error", answer, result.detail))
            control = self._pool.submit([Task("check_gold", gold, "")])[0]

        def decide(c: Result) -> Grade:
            if c.outcome == "correct":
                return Grade(
                    "unparseable_answer",
                    answer,
                    f"the judge failed on this answer ({result.detail}) while a control check of the gold "
                    "passed: the answer's, counted as wrong",
                )
            if c.outcome in ("gold_error", "grader_timeout"):
                return Grade(
                    "gold_error", answer, f"{result.detail}; the gold alone does not check ({c.outcome})"
                )
            return Grade(
                "grader_error",
                answer,
                f"{result.detail}; a control check of the gold failed too ({c.detail})",
            )

        out: Future[Grade] = Future()

        def settle(done: "Future[Result]") -> None:
            error = done.exception()
            if error is None:
                out.set_result(decide(done.result()))
            else:  # no worker could even start for the control: the machinery's
                out.set_result(
                    Grade(
                        "grader_error", answer, f"{result.detail}; the control check could not run ({error})"
                    )
                )

        control.add_done_callback(settle)
        return out

    def grade(self, *, gold: str, pred: "str | Trajectory") -> Grade:
        """Grade the response `pred` against `gold`.

        Args:
            gold: the reference answer in its source form ("025", "33,124,147", LaTeX).
            pred: the whole response (text or parsed trajectory); its answer is `final_answer(pred)`,
                the last box of the final text, or a final run of boxes graded together as a list.
                Plain integers are compared exactly at any length; any other answer longer than
                MAX_ANSWER_CHARS is unparseable_answer without a parse.

        Returns:
            The Grade; an answer that cannot be judged in bounded time is `grader_timeout` (not
            correct, a verdict on the answer); infrastructure trouble is `grader_error`.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        return self._grade_future(gold, pred).result()

    def grade_many(self, requests: Sequence[GradeRequest]) -> list[Grade]:
        """Grade many responses at once, spread over all workers; results in request order.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        futures = [self._grade_future(r.gold, r.pred) for r in requests]
        return [f.result() for f in futures]

    async def agrade(self, *, gold: str, pred: "str | Trajectory") -> Grade:
        """`grade` for asyncio callers: awaits the worker without blocking the event loop.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        return await asyncio.wrap_future(self._grade_future(gold, pred))

    def equivalent(self, a: str, b: str) -> bool:
        """Whether two extracted answers are mathematically equal (`a` takes math-verify's gold role).

        Timeouts and errors count as not equal. Used for maj@k grouping.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        na, nb = normalize_answer(a), normalize_answer(b)
        na, nb = align_to_gold(na, nb), align_to_gold(nb, na)
        if na and canonical_surface(na) == canonical_surface(nb):
            return True
        ia, ib = as_integer(na), as_integer(nb)
        if ia is not None and ib is not None:
            return ia == ib
        if max(len(na), len(nb)) > MAX_ANSWER_CHARS:  # too long to parse: only the same text is equal
            return False
        return self._run([Task("verify", na, nb)])[0].result().outcome == "correct"

    def check_golds(self, golds: Sequence[str]) -> list[bool]:
        """Whether each gold parses to mathematics and verifies against itself.

        A gold that times out is bad (False). An infrastructure failure is not the gold's fault.

        Raises:
            GraderError: a worker crashed twice on a gold, or the workers cannot start.
        """
        norm = [normalize_answer(g) for g in golds]
        todo = [Task("check_gold", g, "") for g in norm if as_integer(g) is None]
        results = dict(zip(todo, (f.result() for f in self._run(todo)), strict=True))
        verdicts: list[bool] = []
        for gold, g in zip(golds, norm, strict=True):
            r = results.get(Task("check_gold", g, ""))
            if r is not None and r.outcome == "grader_error":
                raise GraderError(f"grading infrastructure failed while checking gold {gold!r}: {r.detail}")
            verdicts.append(r is None or r.outcome == "correct")
        return verdicts

    def grounded(self, answer: str | None, outputs: Sequence[str]) -> bool | None:
        """Whether `answer` equals a value printed in `outputs`; None when there is no answer.

        Only what the code printed counts (`_printed.code_printed`: no tracebacks, warnings or
        harness notices). Integer answers need a standalone printed number of the same value (1 is
        not in "10", 20 not in "1e+20", 234 not in "1,234,567"; `Fraction(1, 2)` reads as 1/2),
        compared as digit strings at any length (a printed `2**20000` grounds its own 6,021 digits).
        Other answers are compared by math-verify with up to MAX_GROUNDING_CANDIDATES printed
        values (numbers, fractions, sympy prints, list elements). A decimal grounds an irrational
        answer when they agree to math-verify's 6-decimal float rounding (0.7071067811865476
        grounds `\\frac{\\sqrt{2}}{2}`; 0.7071 does not). A candidate that times out does not ground.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        if answer is None:
            return None
        na = normalize_answer(answer)
        ai = as_integer(na)
        if ai is not None:
            return integer_grounded(ai, outputs)
        if not na or len(na) > MAX_ANSWER_CHARS:
            return False
        tasks = [Task("ground", na, c) for c in grounding_candidates(outputs)]
        return any(f.result().outcome == "correct" for f in self._run(tasks))

    def is_grounded(self, trajectory: "Trajectory | str") -> bool | None:
        """`grounded` on the response's `final_answer` and its interpreter outputs.

        Raises:
            GraderError: the grader is closed or its workers cannot start.
        """
        traj = as_trajectory(trajectory)
        return self.grounded(final_answer(traj), traj.outputs)


_default: Grader | None = None
_default_lock = threading.Lock()


def _default_grader() -> Grader:
    """The lazily created process-wide Grader, closed at exit."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Grader()
            atexit.register(_close_default)
        return _default


def _close_default() -> None:
    if _default is not None:
        _default.close()


def _after_fork_in_child() -> None:
    """Every Grader of the parent becomes the child's own (another thread may have held a lock)."""
    global _default_lock
    _default_lock = threading.Lock()
    for grader in list(_LIVE):
        grader._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def grade(*, gold: str, pred: "str | Trajectory") -> Grade:
    """`Grader.grade` on the default grader."""
    return _default_grader().grade(gold=gold, pred=pred)


def grade_many(requests: Sequence[GradeRequest]) -> list[Grade]:
    """`Grader.grade_many` on the default grader."""
    return _default_grader().grade_many(requests)


async def agrade(*, gold: str, pred: "str | Trajectory") -> Grade:
    """`Grader.agrade` on the default grader."""
    return await _default_grader().agrade(gold=gold, pred=pred)


def equivalent(a: str, b: str) -> bool:
    """`Grader.equivalent` on the default grader."""
    return _default_grader().equivalent(a, b)


def check_golds(golds: Sequence[str]) -> list[bool]:
    """`Grader.check_golds` on the default grader."""
    return _default_grader().check_golds(golds)


def grounded(answer: str | None, outputs: Sequence[str]) -> bool | None:
    """`Grader.grounded` on the default grader (no worker is started for integer answers)."""
    return _default_grader().grounded(answer, outputs)


def is_grounded(trajectory: "Trajectory | str") -> bool | None:
    """`Grader.is_grounded` on the default grader."""
    return _default_grader().is_grounded(trajectory)
