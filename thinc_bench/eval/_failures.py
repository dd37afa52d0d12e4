"""How one trajectory's failure stays its own (issue 37): its stage, its record, the quorum that
stops a run only when every trajectory so far failed the same way, and the regrade of samples whose
grading failed.

`eval.run` catches what one trajectory raises and asks this module for the rest; build_sft's teacher
rollouts go through the same engine. The rule mirrors the openai backend's for refused requests: one
input the harness mishandles is a record (`harness_error`, excluded, counted, retried by a rerun),
a bug every trajectory meets is one line.
"""

from __future__ import annotations

import dataclasses
import linecache
import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING

from thinc_bench.benchmarks import Problem
from thinc_bench.errors import BackendUnavailable, GraderError, HarnessError, SandboxUnavailable
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.store import HARNESS_STATUS, SampleRecord

if TYPE_CHECKING:
    from thinc_bench.eval.rollout import RolloutResult
    from thinc_bench.eval.store import RunDir
    from thinc_bench.grading import Grader

logger = logging.getLogger("thinc_bench.eval")


HARNESS_QUORUM = 8
"""Trajectories that all failed in the harness the same way (stage and exception type), with none
finished, before the run stops: one input the harness mishandles is a record, a bug hit by every
trajectory is one line (the rule the openai backend applies to refused requests)."""

ERROR_CHARS = 500
"""Most characters of an exception's message kept in a `harness_error` record's `error`."""

INFRA_EXCEPTIONS = (SandboxUnavailable, BackendUnavailable, GraderError)
"""Exceptions of the machinery, not of the harness's handling of one trajectory: `infra_error`."""


_LOOP_MODULES = ("thinc_bench.eval.rollout", "thinc_bench.eval.function_calling")


class Stage:
    """Where a trajectory's processing is (`generate` / `execute` / `parse` / `grade` / `measures`),
    so a failure names it. Inside the rollout loop the exception's innermost frame of the loop tells
    what it was doing: calling the generator (generate), running code in the session (execute), or
    reading the text itself (parse)."""

    def __init__(self) -> None:
        self.name = "execute"  # the session's start

    def of(self, exc: BaseException) -> str:
        if self.name != "rollout":
            return self.name
        loop = [
            tb for tb in _frames(exc.__traceback__) if tb.tb_frame.f_globals.get("__name__") in _LOOP_MODULES
        ]
        if not loop:
            return "parse"
        code = loop[-1].tb_frame.f_code
        if code.co_name.startswith("_execute"):
            return "execute"
        line = linecache.getline(code.co_filename, loop[-1].tb_lineno)
        if "generator." in line:
            return "generate"
        return "execute" if "session." in line else "parse"


def _frames(tb: TracebackType | None) -> Iterator[TracebackType]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def failed_record(
    problem: Problem, sample_idx: int, k: int, status: str, error: str, result: RolloutResult | None
) -> SampleRecord:
    """The record of a trajectory whose processing failed: what the rollout produced, if it finished
    (its text and tokens), and no verdict."""
    return SampleRecord(
        benchmark=problem.benchmark,
        problem_id=problem.id,
        sample_idx=sample_idx,
        k=k,
        text=result.text if result else "",
        answer=None,
        gold=problem.answer,
        correct=False,
        status=status,
        n_tool_calls=result.n_tool_calls if result else 0,
        n_exec_errors=result.n_exec_errors if result else 0,
        gen_tokens=result.gen_tokens if result else 0,
        total_tokens=result.total_tokens if result else 0,
        prompt_tokens=result.prompt_tokens if result else None,
        response_tokens=result.completion_tokens if result else None,
        grounded=None,
        finish_reason=result.stop_reason if result else status,
        exec_statuses=[e.status for e in result.executions] if result else [],
        error=error,
        n_injected=sum(e.injected for e in result.executions) if result else None,
        meta=dict(problem.meta),
    )


async def regrade(config: EvalConfig, run: RunDir, grader: Grader | None = None) -> int:
    """Grade again the saved samples whose grading failed (`grader_error`: a worker crash, a pool
    restart; docs/grading.md "Timeouts"); a new verdict is appended (the last record of a key wins),
    one still failing is not. Returns how many were tried. The answer's own timeouts are verdicts and
    stay; the rest of the record (grounding, measures) was measured when it was produced."""
    from thinc_bench import trajectory
    from thinc_bench.grading import Grader, judge_version

    todo = [r for r in run.records() if r.status == "grader_error"]
    if not todo:
        return 0
    with ExitStack() as owned:
        judge = grader or owned.enter_context(Grader())
        for record in todo:
            verdict = await judge.agrade(gold=record.gold, pred=trajectory.parse(record.text, config.dialect))
            if verdict.status != "grader_error":
                run.append(
                    dataclasses.replace(
                        record,
                        status=verdict.status,
                        answer=verdict.answer,
                        correct=verdict.correct,
                        judge=judge_version(),
                    )
                )
    logger.info("graded %d samples again whose grading had failed", len(todo))
    return len(todo)


class Quorum:
    """Stops a run whose trajectories all fail in the harness the same way (`HARNESS_QUORUM`)."""

    def __init__(self) -> None:
        self.failures: Counter[str] = Counter()
        self.succeeded = False
        self.last = ""

    def count(self, record: SampleRecord) -> None:
        """Count one record.

        Raises:
            HarnessError: the quorum is reached (every record so far a harness error of one kind).
        """
        if record.status != HARNESS_STATUS:
            self.succeeded = True
            return
        error = str(record.error)
        self.last = error
        self.failures[":".join(error.split(":", 2)[:2])] += 1  # "stage: ExceptionType"
        kind, n = self.failures.most_common(1)[0]
        if not self.succeeded and len(self.failures) == 1 and n >= HARNESS_QUORUM:
            raise HarnessError(
                f"the first {n} trajectories all failed in the harness at {kind} (last: {self.last}); "
                "this is a thinc_bench bug or a broken environment, not the model: the records are saved "
                "(status harness_error) and a rerun retries them once it is fixed"
            )
