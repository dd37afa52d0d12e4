"""The GRPO reward: exact match by the one judge (`grading.grade`), 1 for correct and 0 otherwise.

The reward grades the same text the eval CLI grades (the rollout's full text, passed through the
rollout function as the `thinc_text` column), so a trajectory earns 1 exactly when eval counts it
correct. Infrastructure failures (a sandbox or backend outage, a grader crash) are not wrong
answers: they get None, which TRL treats as "no reward" (left out of the group's mean and standard
deviation, advantage 0; STYLE rule 7). An answer the grader cannot judge in bounded time
(`grader_timeout`) is the answer's own and earns 0: otherwise a policy could escape every negative
reward by writing answers the judge cannot finish. A trajectory the harness failed to process
(`harness_error`: the rollout or its grading raised) earns 0 as well, for the same reason, and its
tokens leave the loss like an unscored row's (`is_masked`); the reward never raises for one row.
Format rewards are deliberately absent: the explainers name only the exact-match reward.

The rollout function grades its own trajectories (`grade_rollouts`) when it knows the gold answers,
so an unscored row can leave the loss entirely (`env_mask` 0 on all its tokens) before TRL counts
the loss denominator; the reward then reads that verdict (`grade_status`) instead of grading again.
Per-step statistics (tool calls, execution-error rate, grounding, truncation, the unscored share)
go through TRL's `log_metric` callback, over the scored rows only; they are not reward functions.

A rollout with injected execution failures (recovery training, `train.injection`) is rewarded on
its final answer only when it went through its failures in code (`injection.earns_reward`: it met
all k and then ran a block clean), else 0, so avoiding code is never what an injected group rewards.
While injection is on, the logs split the reward, tool calls and grounding between injected and
clean rows (`rollout/reward_injected`, `rollout/tool_calls_clean`, ...) so recovery shows over training.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from thinc_bench import grading
from thinc_bench.train.injection import earns_reward

logger = logging.getLogger(__name__)

REWARD_CORRECT = 1.0
"""Reward of a correct final answer (the explainers' exact match with the ground truth)."""
REWARD_WRONG = 0.0
"""Reward of a wrong, missing or unparseable answer: all are the model's mistakes."""

UNSCORED_GRADES = frozenset({"grader_error"})
"""Grade statuses caused by our infrastructure, not by the model: no reward rather than 0."""
INFRA_STATUS = "infra_error"
"""The status of a row whose trajectory an infrastructure failure ended (no text to judge)."""
HARNESS_STATUS = "harness_error"
"""The status of a row the harness failed to roll out or grade: reward 0, tokens out of the loss."""
UNSCORED_METRIC = "unscored_frac"
"""Logged per step: share of rows left unscored (infrastructure failure), so out of the advantages."""
STAT_PREFIX = "rollout/"
"""Prefix of the per-step rollout statistics in the logs (`rollout/tool_calls`, ...)."""


def is_unscored(status: str) -> bool:
    """True for a row without a verdict: an infrastructure failure, never a wrong answer."""
    return status == INFRA_STATUS or status in UNSCORED_GRADES


def is_masked(status: str) -> bool:
    """True for a row whose tokens leave the loss (`env_mask` 0): unscored, or failed in the harness
    (its tokens may be a placeholder or text we could not read; it still weighs in its group at 0)."""
    return is_unscored(status) or status == HARNESS_STATUS


def grade_rollouts(
    answer: Sequence[str], texts: Sequence[str | grading.Trajectory], stop_reason: Sequence[str]
) -> list[str]:
    """The grade status of each trajectory (`infra_error` where the rollout itself failed), in one batch.

    Raises:
        ValueError: the columns have different lengths.
    """
    if not len(texts) == len(answer) == len(stop_reason):
        raise ValueError(
            f"reward got {len(texts)} completions, {len(answer)} answers, {len(stop_reason)} reasons"
        )
    todo = [i for i, r in enumerate(stop_reason) if r not in (INFRA_STATUS, HARNESS_STATUS)]
    statuses = [r if r in (INFRA_STATUS, HARNESS_STATUS) else INFRA_STATUS for r in stop_reason]
    for i, status in zip(todo, _grade_each(answer, texts, todo), strict=True):
        statuses[i] = status
    return statuses


def _grade_each(
    answer: Sequence[str], texts: Sequence[str | grading.Trajectory], todo: list[int]
) -> list[str]:
    """The grade status of each row in `todo`, in one batch; when the batch raises, row by row, so
    one text the judge cannot handle is that row's `harness_error` and the others keep their verdict."""
    requests = [grading.GradeRequest(gold=answer[i], pred=texts[i]) for i in todo]
    try:
        return [verdict.status for verdict in grading.grade_many(requests)]
    except Exception:  # a reward function must not end the step (issue 37)
        statuses: list[str] = []
        for request in requests:
            try:
                statuses.append(grading.grade(gold=request.gold, pred=request.pred).status)
            except Exception as exc:
                logger.error("reward: grading raised %s: %s; the row gets 0", type(exc).__name__, exc)
                statuses.append(HARNESS_STATUS)
        return statuses


def exact_match_reward(
    completions: Sequence[Any],
    answer: Sequence[str],
    thinc_text: Sequence[str] | None = None,
    stop_reason: Sequence[str] | None = None,
    grade_status: Sequence[str] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    **columns: Any,
) -> list[float | None]:
    """Exact-match reward for a batch of completions, in TRL's reward-function signature.

    Args:
        completions: TRL's decoded completions (used only when `thinc_text` is absent).
        answer: the gold answers (the dataset's `answer` column), one per completion.
        thinc_text: the rollout's full text per completion, as eval grades it.
        stop_reason: the rollout's stop reason; `infra_error` means no trajectory to judge.
        grade_status: the rollout's own verdicts (`grade_rollouts`); graded here when absent.
        log_metric: TRL's per-step metric callback; the rollout statistics are logged through it.
        **columns: the rollout's other columns (`n_tool_calls`, `n_exec_errors`, `inject_k` and
            `n_injected` are logged).

    Returns:
        1.0 correct, 0.0 otherwise (a grader timeout and a harness error included), None for an
        infrastructure failure.

    Raises:
        ValueError: the columns have different lengths.
    """
    raw = list(thinc_text) if thinc_text is not None else [_as_text(c) for c in completions]
    # Parsed once (both dialects are tried) for the grade and the statistics alike.
    parse = grade_status is None or log_metric is not None
    texts: list[str | grading.Trajectory] = [grading.as_trajectory(t) for t in raw] if parse else list(raw)
    reasons = list(stop_reason) if stop_reason is not None else [""] * len(texts)
    statuses = list(grade_status) if grade_status is not None else grade_rollouts(answer, texts, reasons)
    if len(statuses) != len(texts):
        raise ValueError(f"reward got {len(texts)} completions and {len(statuses)} grade statuses")
    rewards: list[float | None] = [
        None if is_unscored(s) else REWARD_CORRECT if s == "correct" else REWARD_WRONG for s in statuses
    ]
    _gate_injected(rewards, **columns)
    if log_metric is not None:
        for name, value in rollout_stats(texts, reasons, rewards, **columns).items():
            log_metric(name, value)
    return rewards


def _gate_injected(
    rewards: list[float | None],
    inject_k: Sequence[int] | None = None,
    n_injected: Sequence[int] | None = None,
    n_tool_calls: Sequence[int] | None = None,
    n_exec_errors: Sequence[int] | None = None,
    **_: Any,
) -> None:
    """Set to 0 the reward of an injected row that did not go through its failures in code."""
    if inject_k is None or n_injected is None or n_tool_calls is None or n_exec_errors is None:
        return
    for i, reward in enumerate(rewards):
        if reward and not earns_reward(inject_k[i], n_injected[i], n_tool_calls[i], n_exec_errors[i]):
            rewards[i] = REWARD_WRONG


def _as_text(completion: Any) -> str:
    """TRL passes plain strings, or a list of chat messages for conversational prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content", "")) for m in completion)


def _grounded(text: str | grading.Trajectory) -> bool | None:
    """`grading.is_grounded`, None (left out of the statistic) when it raises on a hostile text."""
    try:
        return grading.is_grounded(text)
    except Exception as exc:  # a logged statistic must not end the step
        logger.warning("rollout statistics: grounding raised %s: %s", type(exc).__name__, exc)
        return None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rollout_stats(
    texts: Sequence[str | grading.Trajectory],
    stop_reason: Sequence[str],
    rewards: Sequence[float | None],
    n_tool_calls: Sequence[int] | None = None,
    n_exec_errors: Sequence[int] | None = None,
    inject_k: Sequence[int] | None = None,
    n_injected: Sequence[int] | None = None,
    **_: Any,
) -> dict[str, float]:
    """The batch's statistics over its scored rows (None rewards left out), by log name.

    `unscored_frac` is over every row; `tool_calls` is code executions per trajectory,
    `exec_error_rate` the share of a trajectory's executions that failed (trajectories that ran
    code; injected failures count), `grounded` whether the final answer equals a printed value
    (trajectories with an answer), `truncated` whether the token budget or tool-call limit stopped
    it. With injection on (`inject_k` given): `injected_frac` the share of
    rows given k > 0 failures, `tool_calls_injected|clean` and `grounded_injected|clean` the two
    rates over each part, `reward_injected` / `reward_clean` the mean reward of those rows and
    of the others (as eval's Recovery@k, over every injected row, whether or not it met its
    failures), `injected_failures` the failures an injected row met (below k: it stopped running
    code first). A statistic with no row to average is left out.
    """
    scored = [i for i, r in enumerate(rewards) if r is not None]
    stats: dict[str, float | None] = {UNSCORED_METRIC: 1 - len(scored) / len(rewards) if rewards else None}
    stats[STAT_PREFIX + "truncated"] = _mean(
        [float(stop_reason[i] in ("max_tokens", "max_tool_calls")) for i in scored]
    )
    verdicts = [_grounded(texts[i]) for i in scored]
    stats[STAT_PREFIX + "grounded"] = _mean([float(v) for v in verdicts if v is not None])
    if n_tool_calls is not None:
        stats[STAT_PREFIX + "tool_calls"] = _mean([float(n_tool_calls[i]) for i in scored])
        if n_exec_errors is not None:
            stats[STAT_PREFIX + "exec_error_rate"] = _mean(
                [n_exec_errors[i] / n_tool_calls[i] for i in scored if n_tool_calls[i]]
            )
    if inject_k is not None:
        injected = [i for i in scored if inject_k[i] > 0]
        for part, rows in (("injected", set(injected)), ("clean", set(scored) - set(injected))):
            stats[f"{STAT_PREFIX}grounded_{part}"] = _mean(
                [float(v) for i, v in zip(scored, verdicts, strict=True) if i in rows and v is not None]
            )
            if n_tool_calls is not None:
                stats[f"{STAT_PREFIX}tool_calls_{part}"] = _mean(
                    [float(n_tool_calls[i]) for i in sorted(rows)]
                )
        stats[STAT_PREFIX + "injected_frac"] = _mean([float(inject_k[i] > 0) for i in scored])
        stats[STAT_PREFIX + "reward_injected"] = _mean([float(rewards[i] or 0) for i in injected])
        stats[STAT_PREFIX + "reward_clean"] = _mean(
            [float(rewards[i] or 0) for i in scored if not inject_k[i]]
        )
        if n_injected is not None:
            stats[STAT_PREFIX + "injected_failures"] = _mean([float(n_injected[i]) for i in injected])
    return {k: v for k, v in stats.items() if v is not None}
