"""Benchmark metrics as pure functions over plain values.

Owns avg@n, pass@k, maj@k with standard errors across problems, distributions of tool calls and
response lengths, grounding rate, Recovery@k and the error / no-answer / truncation rates. Inputs are
mappings from problem id to per-sample values (or flat per-trajectory sequences); outputs are frozen
dataclasses that `dataclasses.asdict` turns into summary.json. A bad input (no samples, k > n,
mismatched lengths) is our bug and raises ValueError.
Does not read records, grade answers or call math-verify: answer equivalence for maj@k is injected.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

DEFAULT_LENGTH_BINS = 20  # enough to show a length distribution's shape in a report figure
MAX_INTEGER_BINS = (
    64  # one bin per tool-call count up to this many distinct counts; wider spreads get equal bins
)
P90 = 0.9  # the tail quantile reported beside the median


@dataclass(frozen=True)
class Estimate:
    """A mean over problems with its standard error.

    Attributes:
        value: mean over problems of the per-problem score.
        stderr: sample standard deviation (ddof=1) of the per-problem scores / sqrt(n_problems), the
            CLT standard error over questions of Miller 2024 (arXiv:2411.00640, §2; per-question
            averaging of resampled answers, §3); None with fewer than two problems.
        n_problems: problems averaged.
        n_samples: samples read, over all problems.
    """

    value: float
    stderr: float | None
    n_problems: int
    n_samples: int


def _estimate(scores: Sequence[float], n_samples: int) -> Estimate:
    stderr = statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else None
    return Estimate(statistics.fmean(scores), stderr, len(scores), n_samples)


def _require_samples(by_problem: Mapping[str, Sequence[object]]) -> None:
    if not by_problem:
        raise ValueError("no problems given; a metric needs at least one problem with samples")
    empty = [pid for pid, samples in by_problem.items() if not samples]
    if empty:
        raise ValueError(f"problems {empty[:5]} have no samples; drop them before computing metrics")


def avg_at_n(correct_by_problem: Mapping[str, Sequence[bool]]) -> Estimate:
    """Mean accuracy: the mean over problems of each problem's fraction of correct samples.

    This is the unbiased pass@1 estimator c/n of Chen et al. 2021 (arXiv:2107.03374, eq. 1 with
    k = 1) averaged over problems; problems may have different sample counts.

    Args:
        correct_by_problem: problem id -> correctness of each of its samples.

    Returns:
        The estimate with its standard error across problems.

    Raises:
        ValueError: no problems, or a problem without samples.
    """
    _require_samples(correct_by_problem)
    scores = [sum(c) / len(c) for c in correct_by_problem.values()]
    return _estimate(scores, sum(len(c) for c in correct_by_problem.values()))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: 1 - C(n-c, k) / C(n, k).

    Chen et al. 2021 (arXiv:2107.03374, eq. 1), in their numerically stable product form
    1 - prod_{i=n-c+1}^{n} (1 - k/i).

    Args:
        n: samples drawn.
        c: correct samples among them.
        k: the k of pass@k.

    Returns:
        The probability that at least one of k samples drawn without replacement is correct.

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_at_k_estimate(correct_by_problem: Mapping[str, Sequence[bool]], k: int) -> Estimate:
    """Mean over problems of `pass_at_k`, with its standard error across problems.

    Raises:
        ValueError: no problems, a problem without samples, or a problem with fewer than k samples.
    """
    _require_samples(correct_by_problem)
    short = [pid for pid, c in correct_by_problem.items() if len(c) < k]
    if short:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem; problems {short[:5]} have fewer")
    scores = [pass_at_k(len(c), sum(c), k) for c in correct_by_problem.values()]
    return _estimate(scores, sum(len(c) for c in correct_by_problem.values()))


class Vote(NamedTuple):
    """One sample's extracted answer (None when there is none) and whether it is correct."""

    answer: str | None
    correct: bool


def majority_vote(votes: Sequence[Vote], same: Callable[[str, str], bool]) -> Vote | None:
    """Return the representative of the largest group of equivalent answers, or None without answers.

    Answers join the first group whose representative (its first member) is `same(representative,
    answer)`; identical strings join without a call. Groups are compared to their representative
    only, because equivalence need not be transitive. Ties go to the group whose first member
    appears earliest. None answers never vote.
    """
    groups: list[tuple[Vote, int]] = []
    for vote in votes:
        if vote.answer is None:
            continue
        for g, (rep, size) in enumerate(groups):
            assert rep.answer is not None
            if rep.answer == vote.answer or same(rep.answer, vote.answer):
                groups[g] = (rep, size + 1)
                break
        else:
            groups.append((vote, 1))
    if not groups:
        return None
    return max(groups, key=lambda group: group[1])[0]  # max keeps the first of equal sizes


def maj_at_k(
    samples_by_problem: Mapping[str, Sequence[Vote]], k: int, same: Callable[[str, str], bool]
) -> Estimate:
    """Majority-vote accuracy over the first k samples of each problem.

    A problem counts as solved when the representative of its majority group is correct (see
    `majority_vote`); a problem whose first k samples have no answer counts as unsolved.

    Args:
        samples_by_problem: problem id -> votes in sample order; plain (answer, correct) tuples work.
        k: samples per problem to vote over.
        same: answer equivalence, called as same(representative, candidate); the eval CLI passes
            `grading.equivalent`.

    Returns:
        The estimate with its standard error across problems; n_samples counts votes used.

    Raises:
        ValueError: k < 1, or a problem with fewer than k samples.
    """
    if k < 1:
        raise ValueError(f"maj@k needs k >= 1; got k={k}")
    _require_samples(samples_by_problem)
    short = [pid for pid, v in samples_by_problem.items() if len(v) < k]
    if short:
        raise ValueError(f"maj@{k} needs at least {k} samples per problem; problems {short[:5]} have fewer")
    winners = [majority_vote([Vote(*v) for v in votes[:k]], same) for votes in samples_by_problem.values()]
    scores = [float(w is not None and w.correct) for w in winners]
    return _estimate(scores, k * len(scores))


@dataclass(frozen=True)
class Bin:
    """Histogram bin [lo, hi); the last bin of a histogram also holds hi."""

    lo: float
    hi: float
    count: int


@dataclass(frozen=True)
class Distribution:
    """Summary of one per-trajectory quantity (tool calls, tokens)."""

    n: int
    mean: float
    median: float
    p90: float
    max: float
    histogram: tuple[Bin, ...]


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _histogram(ordered: Sequence[float], n_bins: int, integer: bool) -> tuple[Bin, ...]:
    lo, hi = ordered[0], ordered[-1]
    if integer and hi - lo + 1 <= MAX_INTEGER_BINS:
        edges = [lo + i for i in range(int(hi - lo) + 2)]
    elif lo == hi:
        return (Bin(lo, hi, len(ordered)),)
    else:
        edges = [lo + (hi - lo) * i / n_bins for i in range(n_bins + 1)]
    counts = [0] * (len(edges) - 1)
    for value in ordered:
        index = min(int((value - lo) / (edges[1] - edges[0])), len(counts) - 1)
        counts[index] += 1
    return tuple(Bin(a, b, n) for a, b, n in zip(edges, edges[1:], counts, strict=False))


def distribution(
    values: Sequence[float], *, n_bins: int = DEFAULT_LENGTH_BINS, integer: bool = False
) -> Distribution:
    """Mean, median, p90, max and a histogram of `values`.

    Args:
        values: one number per trajectory.
        n_bins: equal-width bins between min and max.
        integer: one bin [v, v + 1) per integer value instead, while there are at most
            `MAX_INTEGER_BINS` of them.

    Raises:
        ValueError: `values` is empty or `n_bins` < 1.
    """
    if not values or n_bins < 1:
        raise ValueError(
            f"a distribution needs values and n_bins >= 1; got {len(values)} values, n_bins={n_bins}"
        )
    ordered = sorted(values)
    return Distribution(
        n=len(ordered),
        mean=statistics.fmean(ordered),
        median=statistics.median(ordered),
        p90=_quantile(ordered, P90),
        max=ordered[-1],
        histogram=_histogram(ordered, n_bins, integer),
    )


def tool_calls(calls_per_trajectory: Sequence[int]) -> Distribution:
    """Distribution of code executions per trajectory, one histogram bin per count."""
    return distribution(calls_per_trajectory, integer=True)


@dataclass(frozen=True)
class Lengths:
    """Response length in tokens: model-generated only, and total (interpreter outputs included)."""

    model_tokens: Distribution
    total_tokens: Distribution


def response_lengths(model_tokens: Sequence[int], total_tokens: Sequence[int]) -> Lengths:
    """Distributions of model-generated and total tokens per trajectory.

    Raises:
        ValueError: the sequences are empty or differ in length.
    """
    if len(model_tokens) != len(total_tokens):
        raise ValueError(f"{len(model_tokens)} model lengths but {len(total_tokens)} total lengths")
    return Lengths(distribution(model_tokens), distribution(total_tokens))


@dataclass(frozen=True)
class Rate:
    """numerator / denominator; value is None when the denominator is 0."""

    numerator: int
    denominator: int
    value: float | None


def rate(numerator: int, denominator: int) -> Rate:
    """Build a Rate.

    Raises:
        ValueError: unless 0 <= numerator <= denominator.
    """
    if not 0 <= numerator <= denominator:
        raise ValueError(f"a rate needs 0 <= numerator <= denominator; got {numerator}/{denominator}")
    return Rate(numerator, denominator, numerator / denominator if denominator else None)


def share(flags: Sequence[bool]) -> Rate:
    """The share of True among `flags` (no-answer rate, truncation rate, ...)."""
    return rate(sum(flags), len(flags))


def no_answer_rate(answers: Sequence[str | None]) -> Rate:
    """Share of samples whose final text has no extracted answer."""
    return share([a is None for a in answers])


def truncation_rate(truncated: Sequence[bool]) -> Rate:
    """Share of samples cut by a length or block limit before they finished."""
    return share(truncated)


@dataclass(frozen=True)
class Grounding:
    """Grounding rate among trajectories with an answer, and among the correct ones."""

    answered: Rate
    correct: Rate


def grounding_rate(grounded: Sequence[bool | None], correct: Sequence[bool]) -> Grounding:
    """Share of answers equal to a value printed by the interpreter (DESIGN.md, Grounding).

    Args:
        grounded: per sample, whether its answer is grounded; None when it has no answer.
        correct: per sample, whether it is correct.

    Raises:
        ValueError: the sequences differ in length, or a correct sample has no answer.
    """
    if len(grounded) != len(correct):
        raise ValueError(f"{len(grounded)} grounded flags but {len(correct)} correct flags")
    if any(c and g is None for g, c in zip(grounded, correct, strict=True)):
        raise ValueError(
            "a sample is correct but has no answer (grounded is None); check the grading records"
        )
    answered = [g for g in grounded if g is not None]
    among_correct = [bool(g) for g, c in zip(grounded, correct, strict=True) if c]
    return Grounding(share(answered), share(among_correct))


@dataclass(frozen=True)
class Recovery:
    """Recovery@k: accuracy with the first k executions failed, beside clean accuracy on the same problems."""

    k: int
    accuracy: float
    clean_accuracy: float
    ratio: float | None
    n_problems: int


def recovery_at_k(
    k: int, faulted_by_problem: Mapping[str, Sequence[bool]], clean_by_problem: Mapping[str, Sequence[bool]]
) -> Recovery:
    """Recovery@k (DESIGN.md): avg@n with k injected failures and without, over the problems both have.

    Args:
        k: injected failures per trajectory.
        faulted_by_problem: problem id -> correctness of samples run with k injected failures.
        clean_by_problem: problem id -> correctness of samples run without faults.

    Returns:
        Both accuracies over the shared problems and accuracy / clean_accuracy (None when the clean
        accuracy is 0).

    Raises:
        ValueError: k < 0, or no problem has samples in both runs.
    """
    if k < 0:
        raise ValueError(f"Recovery@k needs k >= 0; got k={k}")
    shared = [pid for pid in faulted_by_problem if faulted_by_problem[pid] and clean_by_problem.get(pid)]
    if not shared:
        raise ValueError(f"Recovery@{k}: no problem has samples in both the faulted and the clean run")
    faulted = avg_at_n({pid: faulted_by_problem[pid] for pid in shared}).value
    clean = avg_at_n({pid: clean_by_problem[pid] for pid in shared}).value
    return Recovery(k, faulted, clean, faulted / clean if clean else None, len(shared))


@dataclass(frozen=True)
class ExecutionErrors:
    """Execution errors per execution, and the share of trajectories with at least one."""

    per_execution: Rate
    trajectories_with_error: Rate


def execution_errors(errors: Sequence[int], executions: Sequence[int]) -> ExecutionErrors:
    """Execution-error rates from per-trajectory error and execution counts.

    Raises:
        ValueError: the sequences differ in length, or a trajectory has more errors than executions.
    """
    if len(errors) != len(executions):
        raise ValueError(f"{len(errors)} error counts but {len(executions)} execution counts")
    bad = [i for i, (e, n) in enumerate(zip(errors, executions, strict=True)) if not 0 <= e <= n]
    if bad:
        raise ValueError(f"trajectories {bad[:5]} have error counts outside 0..executions")
    return ExecutionErrors(rate(sum(errors), sum(executions)), share([e > 0 for e in errors]))
