"""The ThinC-SFT filters: named, counted decisions over teacher trajectories.

Each stored teacher rollout becomes a `Candidate` (its verdict, stop reason, execution statuses and
statistics in the student's tokens); `apply_filters` runs the filters in `FILTERS` order and records,
per trajectory, every filter it fails and the first one, which is the one the funnel charges it to.
Only what the infrastructure did is counted apart, never charged to the teacher: a sample it failed
to produce (`infra_error`, produced again on the next run) and a grader worker that crashed
(`ungraded`, graded again). What the teacher's own text caused is the teacher's failure, rejected and
counted as such: processing it raised (`processed`: `harness_error`, or the filter stage could not
read it) and its answer could not be judged in bounded time (`judgeable`: `grader_timeout`). Then the
sources' four (both explainers: correct, executions that succeed, at least three code blocks, the plan
below 50% of total tokens, interpreter output included; `FilterConfig.plan_share_of="model"` counts
model-written tokens only), the plan free of computation (`plan_computation`: the explainers' "no
step-by-step derivation or numerical computation"), the boxed answer grounded in an interpreter
output (`grounded`: the explainers' answer "directly from the interpreter's output", by the grader's
grounding rule), ThinC conformance, decontamination and the per-problem cap (`dedup`: the shortest
trajectories in model tokens win, ties by sample index). A trajectory must also have ended by
answering (`finished`). With a recovery share (`FilterConfig.recovery_share` > 0), `exec_ok` also
accepts a *recovered* trajectory (`recovered`): a block failed, a later one ran clean, and the answer
was printed by a clean one; it counts only its clean executions for `min_code_blocks`, yields to a
clean trajectory of its problem in `dedup`, and, when capped, recovered ones past the share of the kept
set are charged to `exec_ok` (longest first). Pure: no IO, no tokenizer, no grader.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from thinc_bench import outcomes
from thinc_bench.trajectory import Conformance, ShareOf

FilterName = Literal[
    "infra_error",
    "ungraded",
    "processed",
    "finished",
    "judgeable",
    "correct",
    "exec_ok",
    "min_code_blocks",
    "plan_share",
    "plan_computation",
    "grounded",
    "conformance",
    "decontamination",
    "dedup",
]
FILTERS: tuple[FilterName, ...] = get_args(FilterName)
"""Funnel order: the infrastructure's failures first (`infra_error`, `ungraded`: not the teacher's,
counted apart), then the teacher's, its unprocessable text first."""
INFRASTRUCTURE: frozenset[FilterName] = frozenset({"infra_error", "ungraded"})
"""Stages that are not the teacher's failure: excluded and counted apart, retried by the next run."""
FILTER_HELP: dict[FilterName, str] = {
    "infra_error": "not produced: backend or sandbox outage (the infrastructure, not the teacher); "
    "rerunning the build produces it again",
    "ungraded": "the grader failed (a worker crash, not the teacher); rerunning the build grades it again",
    "processed": "the teacher's text could not be processed (harness_error: processing it raised, in the "
    "rollout or the filter stage): the teacher's failure",
    "finished": "did not end by answering: cut by the token budget or the tool-call limit",
    "judgeable": "the answer could not be judged in bounded time (grader_timeout: too large or deep): the "
    "teacher's failure",
    "correct": "final \\boxed{} answer is not equivalent to the gold answer (the one grader)",
    "exec_ok": "a code execution ended in error, timeout, memory or kill",
    "min_code_blocks": "fewer executed code blocks (tool calls) than --min-code-blocks",
    "plan_share": "plan tokens >= --max-plan-share of the trajectory's tokens (student tokenizer; "
    "--plan-share-of: all tokens, interpreter output included, or model tokens)",
    "plan_computation": "the plan computes: arithmetic with its result, an equation solved in prose, or a "
    "derivation chain (no step-by-step derivation or numerical computation in the plan)",
    "grounded": "the boxed answer is not a value an interpreter output printed (the grader's grounding rule)",
    "conformance": "not ThinC: no closed plan, prose between blocks or around the box, a code block "
    "without its output, code after the last output, or code drafted inside the plan",
    "decontamination": "problem copies an evaluation benchmark problem (word n-grams as written or with "
    "numbers masked, the same answer and maths, or a confirmed near duplicate: renumbered, reworded, re-asked "
    "or translated)",
    "dedup": "over --max-per-problem for its problem (shortest trajectories kept)",
}
"""What dropping a trajectory at each stage means, for stats.json, the report and the card."""
RECOVERED_EXEC_OK_HELP = (
    "a code execution ended in error, timeout, memory or kill and was not recovered: a later block "
    "ran clean and the answer is printed by a clean one (recovered trajectories kept: --recovery-share {share})"
)
"""`exec_ok`'s meaning in a build with a recovery share (`format(share=...)`)."""
RECOVERABLE_STATUSES = frozenset({"error", "timeout", "memory", "killed"})
"""Failed executions a later clean one can recover: the code's failures. An `infra_error` execution is
the harness's, and its notice is nothing a student should learn to read."""
OWN_FILTER_CHECKS = ("n_code_blocks", "plan_share", "no_computation_in_plan")
"""Conformance checks the conformance filter skips: the code-block count, the plan share and the plan's
computation are filters of their own (counted in executions, in student tokens, and apart); every
other check counts."""
FINISHED_STOP_REASONS = frozenset({"answer", "eos"})
"""Stop reasons of a trajectory that ended by answering (`eval.rollout.StopReason`); `max_tokens` and
`max_tool_calls` cut it, and an SFT example must not end in an EOS the teacher never wrote."""
UNGRADED_STATUSES = frozenset({outcomes.GRADER_ERROR_STATUS})
"""Grade statuses that say nothing about the answer: the grader's trouble, retried on the next run.
(`grader_timeout` is a verdict: the answer cannot be judged in bounded time, docs/grading.md.)"""
NOT_PRODUCED_STATUSES = frozenset({outcomes.INFRA_STATUS})
"""Statuses of samples the infrastructure kept from being produced (a backend or sandbox outage),
produced again on the next run; charged to the `infra_error` filter."""
UNPROCESSED_STATUSES = frozenset({outcomes.HARNESS_STATUS})
"""Statuses of samples whose processing raised: the teacher's text caused it (`thinc_bench.outcomes`,
issue 49's rule), so they are the teacher's failure, charged to `processed`."""
UNJUDGEABLE_STATUSES = frozenset({outcomes.GRADER_TIMEOUT_STATUS})
"""An answer too large or deep to judge in bounded time: the teacher's, charged to `judgeable`."""


@dataclass(frozen=True)
class FilterConfig:
    """Thresholds that can be changed and re-applied to stored rollouts (`--refilter`)."""

    min_code_blocks: int = 3
    max_plan_share: float = 0.5
    max_per_problem: int = 1
    plan_share_of: ShareOf = "total"
    """The plan share's denominator: all tokens of the trajectory (the sources' rule) or model tokens."""
    plan_computation: bool = True
    """Reject plans that compute (`plan_computation`); off for an NL-only contrast, whose plan is the
    whole solution."""
    grounded: bool = True
    """Reject answers no interpreter output printed (`grounded`); off for an NL-only contrast."""
    recovery_share: float = 0.0
    """Above 0, `exec_ok` keeps recovered trajectories too (`recovered`); 0 is the sources' rule: executions that succeed."""
    cap_recovered: bool = True
    """Recovered trajectories may be at most `recovery_share` of the kept set (a model teacher's failures
    come as they come); off for the template teacher, which writes that share itself."""


@dataclass(frozen=True)
class Candidate:
    """What the filters need to know about one teacher trajectory."""

    problem_id: str
    sample_idx: int
    grade_status: str
    exec_statuses: tuple[str, ...]
    n_code_blocks: int
    plan_tokens: int
    model_tokens: int
    conformance_failures: tuple[str, ...] = ()
    contamination: str | None = None
    total_tokens: int | None = None
    """Trajectory tokens, model and interpreter alike (`<think>` opener and EOS excluded, as for
    `model_tokens`); None where not measured (then the model tokens stand in)."""
    plan_computation: tuple[str, ...] = ()
    """The computations found in the plan (`trajectory.plan_computation`), each as `kind: words`."""
    grounded: bool | None = None
    """The answer equals a value an interpreter output printed (`grading.is_grounded`); None: no answer
    or not measured."""
    stop_reason: str = "answer"
    prose_chars: int = 0
    grounded_clean: bool | None = None
    """The answer is printed by an execution that ran clean (`grading.grounded` on those outputs only);
    measured for trajectories with a failed execution, None where not measured."""

    @property
    def n_executed(self) -> int:
        """Code executions (tool calls): the harness records one status per block it ran."""
        return len(self.exec_statuses)

    @property
    def plan_share(self) -> float:
        """Plan tokens / all trajectory tokens (the sources' rule)."""
        return self.share_of("total")

    def tokens_of(self, of: ShareOf) -> int:
        """All trajectory tokens (`total`; the model tokens where not measured) or the model-written ones."""
        return self.model_tokens if of == "model" or self.total_tokens is None else self.total_tokens

    def share_of(self, of: ShareOf) -> float:
        """Plan tokens / all trajectory tokens (`total`) or / model-written tokens (`model`)."""
        whole = self.tokens_of(of)
        return self.plan_tokens / whole if whole else 0.0


@dataclass(frozen=True)
class Decision:
    """The filters' verdict on one candidate: every failed filter, and the one it is charged to."""

    candidate: Candidate
    failed: tuple[FilterName, ...]
    reasons: tuple[str, ...]
    recovered: bool = False
    """A recovered trajectory (`recovered`) in a build with a recovery share, kept or not (one past the
    cap is charged to `exec_ok`)."""

    @property
    def dropped_by(self) -> FilterName | None:
        return self.failed[0] if self.failed else None

    @property
    def kept(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class FunnelStep:
    """One funnel row: trajectories this stage removed, those left after it, and all that fail it."""

    name: FilterName
    removed: int
    remaining: int
    failing: int


def conformance_failures(conformance: Conformance) -> tuple[str, ...]:
    """The failed conformance checks the conformance filter counts (all but `OWN_FILTER_CHECKS`)."""
    return tuple(name for name in conformance.failed if name not in OWN_FILTER_CHECKS)


def unrecovered(c: Candidate) -> str | None:
    """Why a trajectory with a failed execution is not a recovered one, or None when it is.

    Recovered: every failed execution is one of the code's own (`RECOVERABLE_STATUSES`), the last
    execution ran clean (so each failure is followed by a clean one), and the answer is printed by a
    clean execution (`Candidate.grounded_clean`), not only by a block that then failed.
    """
    statuses = c.exec_statuses
    if not statuses or all(s == "ok" for s in statuses):
        return "no execution failed"
    harness = sorted({s for s in statuses if s != "ok" and s not in RECOVERABLE_STATUSES})
    if harness:
        return f"{', '.join(harness)} is the harness's failure, not the code's"
    if statuses[-1] != "ok":
        return f"the last execution ended in {statuses[-1]}"
    if c.grounded_clean is not True:
        return "the answer is not printed by a clean execution"
    return None


def recovered(c: Candidate) -> bool:
    """A block failed, a later one ran clean, and the answer is printed by a clean one (`unrecovered`)."""
    return unrecovered(c) is None


def _failures(c: Candidate, config: FilterConfig, is_recovered: bool) -> list[tuple[FilterName, str]]:
    if c.grade_status in NOT_PRODUCED_STATUSES:
        return [("infra_error", f"the sample could not be produced ({c.grade_status})")]
    if c.grade_status in UNPROCESSED_STATUSES:
        return [("processed", f"processing the teacher's text raised ({c.grade_status})")]
    bad_exec = [s for s in c.exec_statuses if s != "ok"]
    exec_reason = f"executions {', '.join(bad_exec)}"
    if bad_exec and config.recovery_share > 0:
        exec_reason += f", not recovered: {unrecovered(c)}"
    # a recovered trajectory's failed attempts are not blocks of its reasoning
    counted = c.exec_statuses.count("ok") if is_recovered else c.n_executed
    share = c.share_of(config.plan_share_of)
    checks: list[tuple[FilterName, bool, str]] = [
        ("ungraded", c.grade_status not in UNGRADED_STATUSES, f"grade {c.grade_status}"),
        ("finished", c.stop_reason in FINISHED_STOP_REASONS, f"stopped by {c.stop_reason}"),
        ("judgeable", c.grade_status not in UNJUDGEABLE_STATUSES, f"grade {c.grade_status}"),
        # an ungraded answer is unknown, not incorrect: only `ungraded` is charged for it
        (
            "correct",
            c.grade_status in UNGRADED_STATUSES | UNJUDGEABLE_STATUSES | {"correct"},
            f"grade {c.grade_status}",
        ),
        ("exec_ok", not bad_exec or is_recovered, exec_reason),
        (
            "min_code_blocks",
            counted >= config.min_code_blocks,
            f"{counted} {'clean' if is_recovered else 'executed'} of {c.n_code_blocks} code blocks "
            f"< {config.min_code_blocks}",
        ),
        (
            "plan_share",
            share < config.max_plan_share,
            f"plan {c.plan_tokens} of {c.tokens_of(config.plan_share_of)} {config.plan_share_of} tokens "
            f"= {share:.2f} >= {config.max_plan_share}",
        ),
        (
            "plan_computation",
            not (config.plan_computation and c.plan_computation),
            f"the plan computes: {'; '.join(c.plan_computation)[:120]}",
        ),
        (
            "grounded",
            not config.grounded or c.grounded is True,
            "no answer to ground" if c.grounded is None else "no interpreter output printed the answer",
        ),
        ("conformance", not c.conformance_failures, f"failed {', '.join(c.conformance_failures)}"),
        ("decontamination", c.contamination is None, f"overlaps {c.contamination}"),
    ]
    return [(name, reason) for name, ok, reason in checks if not ok]


def apply_filters(candidates: Sequence[Candidate], config: FilterConfig) -> list[Decision]:
    """Decide every candidate, in input order.

    Args:
        candidates: the stored trajectories.
        config: the thresholds.

    Returns:
        One decision per candidate; `dedup` is charged only to trajectories that pass every other filter.

    Raises:
        ValueError: a threshold is out of range.
    """
    if (
        config.min_code_blocks < 0
        or not 0 < config.max_plan_share <= 1
        or config.max_per_problem < 1
        or not 0 <= config.recovery_share <= 1
        or config.plan_share_of not in ("total", "model")
    ):
        raise ValueError(
            f"filter thresholds {config}: use min_code_blocks >= 0, 0 < max_plan_share <= 1, "
            "max_per_problem >= 1, 0 <= recovery_share <= 1, plan_share_of total or model"
        )
    flags = [config.recovery_share > 0 and recovered(c) for c in candidates]
    failures = [_failures(c, config, flag) for c, flag in zip(candidates, flags, strict=True)]
    survivors: dict[str, list[int]] = defaultdict(list)
    for index, (candidate, failed) in enumerate(zip(candidates, failures, strict=True)):
        if not failed:
            survivors[candidate.problem_id].append(index)
    for indices in survivors.values():
        # clean first: a recovered trajectory is kept for a problem only beside or instead of clean ones
        ranked = sorted(
            indices, key=lambda i: (flags[i], candidates[i].model_tokens, candidates[i].sample_idx)
        )
        for rank, index in enumerate(ranked[config.max_per_problem :], start=config.max_per_problem + 1):
            failures[index].append(("dedup", f"rank {rank} by length among {len(ranked)} survivors"))
    if config.cap_recovered and 0 < config.recovery_share < 1:
        _cap_recovered(candidates, failures, flags, config.recovery_share)
    return [
        Decision(c, tuple(n for n, _ in f), tuple(r for _, r in f), flag)
        for c, f, flag in zip(candidates, failures, flags, strict=True)
    ]


def _cap_recovered(
    candidates: Sequence[Candidate],
    failures: list[list[tuple[FilterName, str]]],
    flags: list[bool],
    share: float,
) -> None:
    """Charge to `exec_ok` the recovered survivors past `share` of the kept set, the longest first.

    With C clean trajectories kept, R recovered ones fit when R <= share * (C + R), i.e. R <= share *
    C / (1 - share). Dedup already preferred clean ones, so no problem loses a clean trajectory here.
    """
    kept = [i for i, f in enumerate(failures) if not f]
    recovered_kept = sorted((i for i in kept if flags[i]), key=lambda i: (candidates[i].model_tokens, i))
    clean = len(kept) - len(recovered_kept)
    allowed = math.floor(share * clean / (1 - share) + 1e-9)
    for index in recovered_kept[allowed:]:
        failures[index].append(
            (
                "exec_ok",
                f"recovered, past --recovery-share {share}: {allowed} of {len(recovered_kept)} recovered "
                f"kept beside {clean} clean",
            )
        )


def funnel(decisions: Sequence[Decision]) -> list[FunnelStep]:
    """The funnel in `FILTERS` order: each trajectory is charged to the first filter it fails."""
    remaining = len(decisions)
    steps = []
    for name in FILTERS:
        removed = sum(d.dropped_by == name for d in decisions)
        remaining -= removed
        steps.append(FunnelStep(name, removed, remaining, sum(name in d.failed for d in decisions)))
    return steps
