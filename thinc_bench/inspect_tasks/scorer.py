"""The scorer: each trajectory judged by eval's own `grade_rollout`, the metrics by eval's `summarize`.

Every rule is the project's, called, never restated here: the answer, the verdict and grounding
(`grading`), the per-trajectory measures (conformance, the three failure modes), what a failed
trajectory's record is (`eval.run.failure_record`), which statuses are left out of the rates
(`outcomes.is_excluded`: infrastructure's, with evidence) and every figure (`eval.summary.summarize`: accuracy with its
standard error across problems, pass@k, maj@k, tool calls, execution errors, grounding, failure
modes, Recovery@k beside the clean accuracy on the same problems). So a change of those rules in
thinc_bench reaches Inspect's numbers with nothing to edit here.

- A sample's `Score.value` is `{"correct": 1/0 for a clean sample (NaN for a faulted one, which only
  Recovery@k reads), "thinc_bench": 1/0}`; Inspect's own `accuracy()` and `stderr()` read `correct`,
  reduced over epochs by the task's reducers (`mean` is avg@n; `pass_at_<k>` is pass@k, Chen et
  al.'s estimator, as thinc_bench's).
- `Score.metadata["record"]` is the sample's `SampleRecord` (`samples.jsonl`'s line, less its text:
  the messages hold it); the `thinc_bench` metric reads every epoch's record (`scores="unreduced"`)
  and reports `summarize`'s figures.
- A sample whose status every rate leaves out (`outcomes.is_excluded`: an outage, a grader crash) is
  raised as a sample error, never scored: Inspect counts it apart and `inspect eval-retry` runs it
  again, as a resumed run retries it in the CLI. Every other status is scored as `summarize` scores it
  (a harness error or a grader timeout is the model's: wrong).
"""

from __future__ import annotations

import atexit
import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, get_model
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState
from inspect_ai.util import store

from thinc_bench.errors import ConfigError, DatasetError, ThincError
from thinc_bench.grading import Grader
from thinc_bench.inspect_tasks.dataset import problem_of
from thinc_bench.inspect_tasks.names import registered
from thinc_bench.inspect_tasks.records import (
    ROLLOUT_KEY,
    STOP_KEY,
    completion_text,
    native_rollout,
    stored_rollout,
)
from thinc_bench.inspect_tasks.sandbox import recorded
from thinc_bench.inspect_tasks.settings import TaskArgs, tokenizer_name

if TYPE_CHECKING:
    from thinc_bench.eval.config import EvalConfig
    from thinc_bench.eval.rollout import RolloutResult
    from thinc_bench.eval.store import SampleRecord

RECORD_KEY = "record"
"""Score metadata: the sample's `SampleRecord` as a dict, without its text."""

_GRADER: Grader | None = None


class SampleExcluded(ThincError):
    """A sample without a verdict (an outage, a grader crash): a sample error, retried, never scored."""


def grader() -> Grader:
    """The process's judge (worker processes started once, closed at exit)."""
    global _GRADER
    if _GRADER is None:
        _GRADER = Grader()
        atexit.register(_GRADER.close)
    return _GRADER


@metric(name=registered("thinc_bench_metrics"), scores="unreduced")
def thinc_bench_metrics() -> Metric:
    """thinc_bench's figures of the task (`eval.summary.summarize` over every epoch's record)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        from thinc_bench import grading
        from thinc_bench.eval.store import SampleRecord
        from thinc_bench.eval.summary import summarize

        records = [
            SampleRecord.from_dict({**s.score.metadata[RECORD_KEY], "text": ""})
            for s in scores
            if s.score.metadata and RECORD_KEY in s.score.metadata
        ]
        if not records:
            return {}
        return headline(summarize(records, same=grading.equivalent))

    return compute


def headline(summary: Mapping[str, Any]) -> dict[str, float]:
    """The figures of a summary that Inspect shows, by name: one benchmark's block (a task's), or the
    overall one. Every Recovery@k figure `summarize` gives is kept (`recovery@<k>_<name>`)."""
    blocks = list(summary["per_benchmark"].values())
    block = blocks[0] if len(blocks) == 1 else summary["overall"]
    figures: dict[str, Any] = {
        "accuracy": _get(block, "accuracy", "value"),
        "accuracy_stderr": _get(block, "accuracy", "stderr"),
        "mean_accuracy": None if len(blocks) == 1 else summary["overall"].get("mean_accuracy"),
        "tool_calls": _get(block, "tool_calls", "mean"),
        "execution_errors": _get(block, "execution_errors", "per_execution", "value"),
        "trajectories_with_error": _get(block, "execution_errors", "trajectories_with_error", "value"),
        "grounding": _get(block, "grounding", "answered", "value"),
        "grounding_correct": _get(block, "grounding", "correct", "value"),
        "posthoc": _get(block, "failure_modes", "posthoc", "value"),
        "nl_literals": _get(block, "failure_modes", "nl_literals", "value"),
        "nl_ratio": _get(block, "failure_modes", "nl_ratio"),
        "no_answer": _get(block, "no_answer", "value"),
        "truncation": _get(block, "truncation", "value"),
        "thinc_conformance": _get(block, "thinc_conformance", "value"),
        "response_tokens": _get(block, "lengths", "response_tokens", "mean"),
        "grader_timeouts": block.get("grader_timeouts"),
    }
    for k, estimate in (block.get("pass_at_k") or {}).items():
        figures[f"pass@{k}"] = estimate.get("value")
    for n, estimate in (block.get("maj_at_k") or {}).items():
        figures[f"maj@{n}"] = estimate.get("value")
    for k, recovery in (block.get("recovery") or {}).items():
        for name, value in recovery.items():
            value = value.get("value") if isinstance(value, Mapping) else value
            if name != "k":
                figures[f"recovery@{k}_{name}"] = value
    return {
        name: float(value)
        for name, value in figures.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


def _get(block: Mapping[str, Any], *path: str) -> Any:
    value: Any = block
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


@scorer(metrics=[{"correct": [accuracy(), stderr()]}, thinc_bench_metrics()], name=registered("judge"))
def judge(**task_args: Any) -> Scorer:
    """thinc_bench's judge and metrics (see the module docstring).

    Args:
        **task_args: the task's arguments (`settings.TaskArgs`), so the record is read in the task's
            dialect and counted with its tokenizer.
    """
    args = TaskArgs.of(**task_args)

    async def score(state: TaskState, target: Target) -> Score:
        from thinc_bench import outcomes

        record = await record_of(args, state, target)
        if outcomes.is_excluded(record.status):
            raise SampleExcluded(
                f"{record.benchmark}/{record.problem_id}/{record.sample_idx}/k{record.k}: {record.status} "
                f"({record.error or 'no verdict'}); left out of every rate, as in thinc_bench's eval, and "
                "retried by `inspect eval-retry`"
            )
        correct = float(record.correct)
        metadata = {RECORD_KEY: {**dataclasses.asdict(record), "text": ""}}
        return Score(
            value={"correct": correct if record.k == 0 else math.nan, "thinc_bench": correct},
            answer=record.answer,
            explanation=f"{record.status}; stop: {record.finish_reason}; tool calls: {record.n_tool_calls} "
            f"({record.n_exec_errors} failed, {record.n_injected or 0} injected); grounded: {record.grounded}",
            metadata=metadata,
        )

    return score


async def record_of(args: TaskArgs, state: TaskState, target: Target) -> SampleRecord:
    """The sample's `SampleRecord`: the trajectory in the log, judged by `eval.run.grade_rollout`
    (a failure while judging is its failed record, as in eval)."""
    from thinc_bench.backends import load_tokenizer
    from thinc_bench.eval._failures import Stage
    from thinc_bench.eval.run import failure_record, grade_rollout, token_counter
    from thinc_bench.eval.store import SampleRecord
    from thinc_bench.inspect_tasks.solvers import FAILED_KEY, SETTINGS_KEY, record_tokenizer, resolve

    problem = problem_of(state.input_text, target.text, state.metadata)
    k, sample_idx = int(state.metadata.get("k", 0)), state.epoch - 1
    ran: Mapping[str, Any] = store().get(SETTINGS_KEY) or {}
    if ran:  # the settings the trajectory ran with, whatever the scorer was given (`inspect score`)
        args = dataclasses.replace(
            args,
            dialect=ran["dialect"],
            tool_name=ran["tool_name"],
            budget=ran["max_tokens"],
            chat_template_kwargs=ran["chat_template_kwargs"],
            tokenizer=ran["tokenizer"],
        )
    stored = store().get(ROLLOUT_KEY)
    if isinstance(stored, Mapping) and FAILED_KEY in stored:
        return SampleRecord.from_dict(stored[FAILED_KEY])
    first = next((i for i, m in enumerate(state.messages) if isinstance(m, ChatMessageAssistant)), None)
    prompt, completion = state.messages[:first], state.messages[first:] if first is not None else []
    stage = Stage()
    stage.name = "parse"
    result: RolloutResult | None = None
    try:
        if isinstance(stored, Mapping):  # the token path
            config, _ = resolve(args, get_model(), native=False)
            tokenizer = load_tokenizer(args.tokenizer or tokenizer_name(config))
            result = stored_rollout(completion_text(completion), stored)
        else:  # the native path, or another agent's loop with thinc_bench's tool
            config, spec = resolve(args, get_model(), native=True)
            tokenizer = load_tokenizer(record_tokenizer(args, config, spec))
            result = _native(config, prompt, completion, tokenizer)
        return await grade_rollout(
            problem,
            sample_idx,
            k,
            result,
            dialect=config.dialect,
            grader=grader(),
            count_tokens=token_counter(tokenizer),
            stage=stage,
        )
    except (ConfigError, DatasetError):
        raise  # a setting, not the trajectory: a sample error naming the fix
    except Exception as exc:
        return failure_record(problem, sample_idx, k, exc, stage.name, result)


def _native(
    config: EvalConfig, prompt: list[ChatMessage], completion: list[ChatMessage], tokenizer: Any
) -> RolloutResult:
    from thinc_bench.inspect_tasks.solvers import inspect_prompt
    from thinc_bench.prompts import parse_template_kwargs, python_tool, render_prompt_ids, tool_spec

    template_kwargs = parse_template_kwargs(config.chat_template_kwargs)
    prompt_ids = render_prompt_ids(
        tokenizer, inspect_prompt(prompt), template_kwargs, [python_tool(config.tool_name)]
    )
    return native_rollout(
        completion,
        recorded(),
        tokenizer=tokenizer,
        prompt_ids=prompt_ids,
        tool_names=tool_spec(config.tool_name).names,
        template_kwargs=template_kwargs,
        budget=int(config.max_tokens or 1),
        stopped=store().get(STOP_KEY),
    )
