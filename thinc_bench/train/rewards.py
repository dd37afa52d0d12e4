"""The GRPO reward: exact match by the one judge (`grading.grade`), 1 for correct and 0 otherwise.

The reward grades the same text the eval CLI grades (the rollout's full text, passed through the
rollout function as the `thinc_text` column), so a trajectory earns 1 exactly when eval counts it
correct. Infrastructure failures (a sandbox or backend outage, a grader timeout or crash) are not
wrong answers: they get None, which TRL treats as "no reward from this function" (STYLE rule 7).
Format rewards are deliberately absent (off by default in the paper's recipe).

TRL leaves a row out of its group's mean and standard deviation (advantage 0) only when *every*
reward function returned None for it; one number from a zero-weight logging statistic, and the row
is summed to reward 0, a wrong answer with a negative advantage. `grpo_reward_funcs` therefore
returns the exact match followed by the logged statistics gated on it: every function says None on
the rows the exact match could not score, and the share of such rows is logged as `unscored_frac`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from thinc_bench import grading

REWARD_CORRECT = 1.0
"""Reward of a correct final answer (the paper's binary exact-match reward)."""
REWARD_WRONG = 0.0
"""Reward of a wrong, missing or unparseable answer: all are the model's mistakes."""

UNSCORED_GRADES = frozenset({"grader_timeout", "grader_error"})
"""Grade statuses caused by our infrastructure, not by the model: no reward rather than 0."""


def exact_match_reward(
    completions: Sequence[Any],
    answer: Sequence[str],
    thinc_text: Sequence[str] | None = None,
    stop_reason: Sequence[str] | None = None,
    **_: Any,
) -> list[float | None]:
    """Exact-match reward for a batch of completions, in TRL's reward-function signature.

    Args:
        completions: TRL's decoded completions (used only when `thinc_text` is absent).
        answer: the gold answers (the dataset's `answer` column), one per completion.
        thinc_text: the rollout's full text per completion, as eval grades it.
        stop_reason: the rollout's stop reason; `infra_error` means no trajectory to judge.

    Returns:
        1.0 correct, 0.0 otherwise, None for an infrastructure failure.

    Raises:
        ValueError: the columns have different lengths.
    """
    texts = list(thinc_text) if thinc_text is not None else [_as_text(c) for c in completions]
    reasons = list(stop_reason) if stop_reason is not None else [""] * len(texts)
    if not len(texts) == len(answer) == len(reasons):
        raise ValueError(
            f"reward got {len(texts)} completions, {len(answer)} answers, {len(reasons)} reasons"
        )
    verdicts = grading.grade_many(
        [grading.GradeRequest(gold=g, pred=t) for g, t in zip(answer, texts, strict=True)]
    )
    rewards: list[float | None] = []
    for verdict, reason in zip(verdicts, reasons, strict=True):
        if reason == "infra_error" or verdict.status in UNSCORED_GRADES:
            rewards.append(None)
        else:
            rewards.append(REWARD_CORRECT if verdict.correct else REWARD_WRONG)
    return rewards


def _as_text(completion: Any) -> str:
    """TRL passes plain strings, or a list of chat messages for conversational prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content", "")) for m in completion)


def tool_calls(completions: Sequence[Any], n_tool_calls: Sequence[int], **_: Any) -> list[float]:
    """Code executions per trajectory, logged as a zero-weight reward (TRL logs each reward's mean)."""
    return [float(n) for n in n_tool_calls]


def exec_error_rate(
    completions: Sequence[Any], n_tool_calls: Sequence[int], n_exec_errors: Sequence[int], **_: Any
) -> list[float | None]:
    """Share of a trajectory's executions that failed; None when it ran no code."""
    return [e / n if n else None for n, e in zip(n_tool_calls, n_exec_errors, strict=True)]


def truncated(completions: Sequence[Any], stop_reason: Sequence[str], **_: Any) -> list[float]:
    """1 when the trajectory hit its token budget or tool-call limit."""
    return [float(r in ("max_tokens", "max_tool_calls")) for r in stop_reason]


def grounded(completions: Sequence[Any], thinc_text: Sequence[str], **_: Any) -> list[float | None]:
    """1 when the final answer equals a value the code printed; None without an answer."""
    verdicts = [grading.is_grounded(text) for text in thinc_text]
    return [None if v is None else float(v) for v in verdicts]


LOGGED_STATS = (tool_calls, exec_error_rate, grounded, truncated)
"""Per-step statistics passed to GRPOTrainer as reward functions of weight 0: logged, never optimised."""


RewardFunc = Callable[..., Sequence[float | None]]

UNSCORED_METRIC = "unscored_frac"
"""Logged per step: share of rows left unscored (infrastructure failure), so out of the advantages."""


def grpo_reward_funcs(
    reward: RewardFunc = exact_match_reward, stats: Sequence[RewardFunc] = LOGGED_STATS
) -> list[RewardFunc]:
    """The GRPO reward functions in TRL's order: `reward` (weight 1), then `stats` (weight 0).

    Each statistic returns None wherever `reward` returned None in the same batch, so TRL treats the
    row as unscorable (left out of the group statistics, advantage 0) instead of a zero reward.
    TRL calls synchronous reward functions in list order with the same `completions` object, which
    is how a statistic finds its batch's verdicts.

    Raises (from a statistic):
        RuntimeError: it ran on a batch `reward` has not scored (the order was changed).
    """
    last: dict[str, Any] = {}

    @functools.wraps(reward)
    def scored(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        rewards = list(reward(completions, **kwargs))
        unscored = [r is None for r in rewards]
        last["batch"], last["unscored"] = completions, unscored
        log_metric = kwargs.get("log_metric")
        if log_metric is not None and unscored:
            log_metric(UNSCORED_METRIC, sum(unscored) / len(unscored))
        return rewards

    def gate(stat: RewardFunc) -> RewardFunc:
        @functools.wraps(stat)
        def gated(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            if last.get("batch") is not completions:
                raise RuntimeError(
                    f"reward statistic {stat.__name__} ran on a batch {reward.__name__} has not scored; "
                    "pass the reward first in reward_funcs"
                )
            values = stat(completions, **kwargs)
            return [None if u else v for u, v in zip(last["unscored"], values, strict=True)]

        return gated

    return [scored, *(gate(s) for s in stats)]
