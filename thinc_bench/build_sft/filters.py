"""The ThinC-SFT filters: named, counted decisions over teacher trajectories.

Each stored teacher rollout becomes a `Candidate` (its verdict, stop reason, execution statuses and
statistics in the student's tokens); `apply_filters` runs the filters in `FILTERS` order and records,
per trajectory, every filter it fails and the first one, which is the one the funnel charges it to.
Samples the infrastructure failed to produce (`infra_error`) or the grader could not judge
(`ungraded`: timeout or crash, graded again on the next run) are counted apart, never charged to the
teacher. Then a trajectory must have ended by answering (`finished`), and pass the paper's four (correct
answer, clean executions, >= 3 executed code blocks, plan < 50% of model tokens), ThinC conformance,
decontamination and the per-problem cap (`dedup`: the shortest trajectories in model tokens win, ties
by sample index). Pure: no IO, no tokenizer, no grader.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from thinc_bench.trajectory import Conformance

FilterName = Literal[
    "infra_error",
    "ungraded",
    "finished",
    "correct",
    "exec_ok",
    "min_code_blocks",
    "plan_share",
    "conformance",
    "decontamination",
    "dedup",
]
FILTERS: tuple[FilterName, ...] = get_args(FilterName)
"""Funnel order: what is not the teacher's fault first (`infra_error`, `ungraded`), then the teacher's."""
FILTER_HELP: dict[FilterName, str] = {
    "infra_error": "not produced: backend or sandbox outage (infrastructure, not the teacher)",
    "ungraded": "grader timed out or failed (not the teacher); rerunning the build grades it again",
    "finished": "did not end by answering: cut by the token budget or the tool-call limit",
    "correct": "final \\boxed{} answer is not equivalent to the gold answer (the one grader)",
    "exec_ok": "a code execution ended in error, timeout, memory or kill",
    "min_code_blocks": "fewer executed code blocks (tool calls) than --min-code-blocks",
    "plan_share": "plan tokens >= --max-plan-share of model tokens (student tokenizer)",
    "conformance": "not ThinC: no closed plan, prose between blocks or around the box, a code block "
    "without its output, code after the last output, or code drafted inside the plan",
    "decontamination": "problem copies an evaluation benchmark problem (word n-grams as written or with "
    "numbers masked, or the same answer and maths)",
    "dedup": "over --max-per-problem for its problem (shortest trajectories kept)",
}
"""What dropping a trajectory at each stage means, for stats.json, the report and the card."""
OWN_FILTER_CHECKS = ("n_code_blocks", "plan_share")
"""Conformance checks the conformance filter skips: the code-block count and the plan share are
filters of their own (counted in executions and student tokens); every other check counts."""
FINISHED_STOP_REASONS = frozenset({"answer", "eos"})
"""Stop reasons of a trajectory that ended by answering (`eval.rollout.StopReason`); `max_tokens` and
`max_tool_calls` cut it, and an SFT example must not end in an EOS the teacher never wrote."""
UNGRADED_STATUSES = frozenset({"grader_timeout", "grader_error"})
"""Grade statuses that say nothing about the answer: the grader's trouble, retried on the next run."""


@dataclass(frozen=True)
class FilterConfig:
    """Thresholds that can be changed and re-applied to stored rollouts (`--refilter`)."""

    min_code_blocks: int = 3
    max_plan_share: float = 0.5
    max_per_problem: int = 1


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
    stop_reason: str = "answer"
    prose_chars: int = 0

    @property
    def n_executed(self) -> int:
        """Code executions (tool calls): the harness records one status per block it ran."""
        return len(self.exec_statuses)

    @property
    def plan_share(self) -> float:
        return self.plan_tokens / self.model_tokens if self.model_tokens else 0.0


@dataclass(frozen=True)
class Decision:
    """The filters' verdict on one candidate: every failed filter, and the one it is charged to."""

    candidate: Candidate
    failed: tuple[FilterName, ...]
    reasons: tuple[str, ...]

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


def _failures(c: Candidate, config: FilterConfig) -> list[tuple[FilterName, str]]:
    if c.grade_status == "infra_error":
        return [("infra_error", "the sample could not be produced")]
    bad_exec = [s for s in c.exec_statuses if s != "ok"]
    checks: list[tuple[FilterName, bool, str]] = [
        ("ungraded", c.grade_status not in UNGRADED_STATUSES, f"grade {c.grade_status}"),
        ("finished", c.stop_reason in FINISHED_STOP_REASONS, f"stopped by {c.stop_reason}"),
        # an ungraded answer is unknown, not incorrect: only `ungraded` is charged for it
        ("correct", c.grade_status in UNGRADED_STATUSES | {"correct"}, f"grade {c.grade_status}"),
        ("exec_ok", not bad_exec, f"executions {', '.join(bad_exec)}"),
        (
            "min_code_blocks",
            c.n_executed >= config.min_code_blocks,
            f"{c.n_executed} executed of {c.n_code_blocks} code blocks < {config.min_code_blocks}",
        ),
        (
            "plan_share",
            c.plan_share < config.max_plan_share,
            f"plan {c.plan_tokens}/{c.model_tokens} tokens = {c.plan_share:.2f} >= {config.max_plan_share}",
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
    if config.min_code_blocks < 0 or not 0 < config.max_plan_share <= 1 or config.max_per_problem < 1:
        raise ValueError(
            f"filter thresholds {config}: use min_code_blocks >= 0, 0 < max_plan_share <= 1, "
            "max_per_problem >= 1"
        )
    failures = [_failures(c, config) for c in candidates]
    survivors: dict[str, list[int]] = defaultdict(list)
    for index, (candidate, failed) in enumerate(zip(candidates, failures, strict=True)):
        if not failed:
            survivors[candidate.problem_id].append(index)
    for indices in survivors.values():
        ranked = sorted(indices, key=lambda i: (candidates[i].model_tokens, candidates[i].sample_idx))
        for rank, index in enumerate(ranked[config.max_per_problem :], start=config.max_per_problem + 1):
            failures[index].append(("dedup", f"rank {rank} by length among {len(ranked)} survivors"))
    return [
        Decision(c, tuple(n for n, _ in f), tuple(r for _, r in f))
        for c, f in zip(candidates, failures, strict=True)
    ]


def funnel(decisions: Sequence[Decision]) -> list[FunnelStep]:
    """The funnel in `FILTERS` order: each trajectory is charged to the first filter it fails."""
    remaining = len(decisions)
    steps = []
    for name in FILTERS:
        removed = sum(d.dropped_by == name for d in decisions)
        remaining -= removed
        steps.append(FunnelStep(name, removed, remaining, sum(name in d.failed for d in decisions)))
    return steps
