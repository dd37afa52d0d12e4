"""The GRPO reward: exact match by the one judge (`grading.grade`), 1 for correct and 0 otherwise.

The reward grades the same text the eval CLI grades (the rollout's full text, passed through the
rollout function as the `thinc_text` column), so a trajectory earns 1 exactly when eval counts it
correct. Which failures are the model's and which the infrastructure's is `thinc_bench.outcomes`,
the rule eval's rates follow (issue 49): only infrastructure failures with evidence (a sandbox or backend outage, a
grader worker crash: `infra_error`, `grader_error`) get None, which TRL treats as "no reward" (left
out of the group's mean and standard deviation, advantage 0) and the rollout leaves out of the loss;
they are counted (`unscored_frac`). Everything the model's output caused earns 0 and stays in the
loss: a wrong, missing or unparseable answer; an answer the judge cannot finish in bounded time
(`grader_timeout`), otherwise a policy could escape every negative reward by writing answers the
judge cannot finish; and a trajectory the harness failed to process (`harness_error`: its text made
the rollout or the judge raise), for the same reason. Those two are counted per step
(`rollout/grader_timeout`, `rollout/harness_error`). The reward never raises for one row.
Format rewards are deliberately absent: the explainers name only the exact-match reward.

The rollout function grades its own trajectories (`grade_rollouts`) when it knows the gold answers,
so an unscored row can leave the loss entirely (`env_mask` 0 on all its tokens) before TRL counts
the loss denominator; the reward then reads that verdict (`grade_status`) instead of grading again.
Per-step statistics go through TRL's `log_metric` callback, over the scored rows only; they are not
reward functions: tool calls, failed calls, grounding, truncation, ThinC conformance and the three
failure modes of interleaved reasoning, each measured as eval measures it (`rollout_stats`).

A rollout with injected execution failures (recovery training, `train.injection`) is rewarded on
its final answer only when it recovered (`recovered`): it met all k failures and its boxed answer
is grounded in an output printed after the last of them, so avoiding code, or answering from a
value computed before the failure, is never what an injected group rewards. While injection is on,
the logs split the reward, tool calls and grounding between injected and clean rows
(`rollout/reward_injected`, `rollout/tool_calls_clean`, ...) and give the recovered share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from thinc_bench import grading, metrics, outcomes, trajectory

logger = logging.getLogger(__name__)

REWARD_CORRECT = 1.0
"""Reward of a correct final answer (the explainers' exact match with the ground truth)."""
REWARD_WRONG = 0.0
"""Reward of a wrong, missing or unparseable answer: all are the model's mistakes."""

INFRA_STATUS = outcomes.INFRA_STATUS
"""The status of a row whose trajectory an infrastructure failure ended (no text to judge)."""
HARNESS_STATUS = outcomes.HARNESS_STATUS
"""The status of a row the harness failed to roll out or grade because of its text: reward 0, counted."""
TIMEOUT_STATUS = outcomes.GRADER_TIMEOUT_STATUS
"""An answer the judge cannot finish in bounded time: the answer's own failure, reward 0, counted."""
UNSCORED_METRIC = "unscored_frac"
"""Logged per step: share of rows left unscored (infrastructure failure), so out of the advantages."""
STAT_PREFIX = "rollout/"
"""Prefix of the per-step rollout statistics in the logs (`rollout/tool_calls`, ...)."""


def is_unscored(status: str) -> bool:
    """True for a row without a verdict: an infrastructure failure, never a wrong answer."""
    return outcomes.is_excluded(status)


def is_masked(status: str) -> bool:
    """True for a row whose tokens leave the loss (`env_mask` 0): an unscored one. A `harness_error`
    row stays in the loss at reward 0 (its tokens are the model's); one whose rollout raised has no
    model token to train, only a placeholder the rollout already masks."""
    return is_unscored(status)


def recovered(k: int, met: int, text: str | grading.Trajectory) -> bool:
    """Whether a rollout given `k` injected failures recovered from them: k is 0, or it met all k
    (`met`: injected failures are the first executions, one output block each) and its final answer
    is grounded (`grading.grounded`) in an output block after the k-th, the answer's own evidence
    printed by code that ran after the last failure. No code, fewer than k executions, an answer
    reached in prose or printed only before the failure: not recovered."""
    if k <= 0:
        return True
    if met < k:
        return False
    traj = grading.as_trajectory(text)
    return bool(grading.grounded(grading.final_answer(traj), traj.outputs[met:]))


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
    log_extra: Callable[[str, list[Any]], None] | None = None,
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
        log_extra: TRL's completions-table callback: each row's `problem_text` goes in a `problem`
            column, since TRL's own `prompt` column is the row TRL sliced, which a streamed pool
            (`refill`, `drop_solved`) does not answer.
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
    rewards = row_rewards(statuses, texts, **columns)
    if log_extra is not None and columns.get("problem_text") is not None:
        log_extra("problem", list(columns["problem_text"]))
    if log_metric is not None:
        for name, value in rollout_stats(texts, reasons, rewards, grade_status=statuses, **columns).items():
            log_metric(name, value)
    return rewards


def row_rewards(
    statuses: Sequence[str], texts: Sequence[str | grading.Trajectory], **columns: Any
) -> list[float | None]:
    """Each row's reward from its grade status: None unscored, 1 correct, else 0, and 0 for an injected
    row that did not recover (`columns`: `inject_k`, `n_injected`, optionally `inject_recovered`)."""
    rewards: list[float | None] = [
        None if is_unscored(s) else REWARD_CORRECT if s == "correct" else REWARD_WRONG for s in statuses
    ]
    _gate_injected(rewards, texts, **columns)
    return rewards


def _gate_injected(
    rewards: list[float | None],
    texts: Sequence[str | grading.Trajectory],
    inject_k: Sequence[int] | None = None,
    n_injected: Sequence[int] | None = None,
    inject_recovered: Sequence[bool | None] | None = None,
    **_: Any,
) -> None:
    """Set to 0 the reward of an injected row that did not recover (`recovered`; the rollout's own
    `inject_recovered` column when it computed them)."""
    if inject_k is None or n_injected is None:
        return
    for i, reward in enumerate(rewards):
        if not reward or inject_k[i] <= 0:
            continue
        ok = inject_recovered[i] if inject_recovered is not None else None
        if ok is None:
            ok = recovered_or_false(inject_k[i], n_injected[i], texts[i])
        if not ok:
            rewards[i] = REWARD_WRONG


def recovered_or_false(k: int, met: int, text: str | grading.Trajectory) -> bool:
    """`recovered`, False (no reward) when the judge raises on a hostile text."""
    try:
        return recovered(k, met, text)
    except Exception as exc:  # one row's text never ends the step
        logger.warning("reward: the recovery check raised %s: %s; the row gets 0", type(exc).__name__, exc)
        return False


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


def _measure(text: str | grading.Trajectory, problem: str | None) -> dict[str, Any]:
    """Eval's per-trajectory measures of one row (`eval.run._measures`' quantities): conformance to
    ThinC, its style, and the three failure modes; a measure that raises on a hostile text is None."""
    out: dict[str, Any] = {}
    try:
        traj = grading.as_trajectory(text)
        checks = trajectory.check_conformance(traj)
        out["conformance"] = float(checks.passed) if checks.checks else None
        out["thinc_style"] = float(trajectory.classify(traj) == "thinc")
        answer = grading.final_answer(traj)
        flag = metrics.posthoc(traj, answer, lambda a, t: bool(grading.grounded(a, [t])))
        out["posthoc"] = None if flag is None else float(flag)
        out["nl_literals"] = None if problem is None else float(bool(metrics.nl_literals(traj, problem)))
        out["nl_ratio"] = metrics.nl_ratio(traj)
    except Exception as exc:  # a logged statistic must not end the step
        logger.warning("rollout statistics: a measure raised %s: %s", type(exc).__name__, exc)
    return out


MEASURES = ("conformance", "thinc_style", "posthoc", "nl_literals", "nl_ratio")
"""The per-step ThinC measures (`rollout/<name>`): eval's conformance and failure-mode quantities."""


def rollout_stats(
    texts: Sequence[str | grading.Trajectory],
    stop_reason: Sequence[str],
    rewards: Sequence[float | None],
    n_tool_calls: Sequence[int] | None = None,
    n_exec_errors: Sequence[int] | None = None,
    inject_k: Sequence[int] | None = None,
    n_injected: Sequence[int] | None = None,
    grade_status: Sequence[str] | None = None,
    problem_text: Sequence[str] | None = None,
    inject_recovered: Sequence[bool | None] | None = None,
    **_: Any,
) -> dict[str, float]:
    """The batch's statistics over its scored rows (None rewards left out), by log name.

    `unscored_frac` is over every row (infrastructure failures, out of the loss); `harness_error`
    and `grader_timeout` the shares of scored rows with those statuses (the model's failures, 0);
    `tool_calls` is code executions per trajectory, `failed_calls` failed executions per
    trajectory, `exec_error_rate` the share of a trajectory's executions that failed (trajectories
    that ran code; injected failures count), `grounded` whether the final answer equals a printed
    value (trajectories with an answer), `truncated` whether the token budget or tool-call limit
    stopped it. ThinC measures as eval computes them per sample: `conformance` (every conformance
    check passed), `thinc_style` (code without prose between blocks), `posthoc` (failure mode A:
    the answer in prose before an output showed it), `nl_literals` (B: a prose-computed number typed
    into code; share of rows with one) and `nl_ratio` (C: prose outside the plan / model text).
    With injection on (`inject_k` given): `injected_frac` the share of rows given k > 0 failures,
    `tool_calls_injected|clean` and `grounded_injected|clean` the two rates over each part,
    `reward_injected` / `reward_clean` the mean reward of those rows and of the others (as eval's
    Recovery@k, over every injected row, whether or not it met its failures), `injected_failures`
    the failures an injected row met (below k: it stopped running code first), `recovered` the
    share of injected rows whose answer an output after the last failure grounds (`recovered`). A
    statistic with no row to average is left out.
    """
    scored = [i for i, r in enumerate(rewards) if r is not None]
    stats: dict[str, float | None] = {UNSCORED_METRIC: 1 - len(scored) / len(rewards) if rewards else None}
    if grade_status is not None:
        for status in outcomes.MODEL_FAILURE_STATUSES:
            stats[STAT_PREFIX + status] = _mean([float(grade_status[i] == status) for i in scored])
    stats[STAT_PREFIX + "truncated"] = _mean(
        [float(stop_reason[i] in ("max_tokens", "max_tool_calls")) for i in scored]
    )
    verdicts = [_grounded(texts[i]) for i in scored]
    stats[STAT_PREFIX + "grounded"] = _mean([float(v) for v in verdicts if v is not None])
    if n_tool_calls is not None:
        stats[STAT_PREFIX + "tool_calls"] = _mean([float(n_tool_calls[i]) for i in scored])
        if n_exec_errors is not None:
            stats[STAT_PREFIX + "failed_calls"] = _mean([float(n_exec_errors[i]) for i in scored])
            stats[STAT_PREFIX + "exec_error_rate"] = _mean(
                [n_exec_errors[i] / n_tool_calls[i] for i in scored if n_tool_calls[i]]
            )
    measured = [_measure(texts[i], None if problem_text is None else problem_text[i]) for i in scored]
    for name in MEASURES:
        stats[STAT_PREFIX + name] = _mean([m[name] for m in measured if m.get(name) is not None])
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
            given = inject_recovered or [None] * len(rewards)
            stats[STAT_PREFIX + "recovered"] = _mean(
                [
                    float(
                        bool(given[i])
                        if given[i] is not None
                        else recovered_or_false(inject_k[i], n_injected[i], texts[i])
                    )
                    for i in injected
                ]
            )
    return {k: v for k, v in stats.items() if v is not None}
