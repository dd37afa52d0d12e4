"""Estimators over plain values: accuracy, pass@k, maj@k, distributions, rates and Recovery@k.

Owns avg@n, pass@k, maj@k with standard errors across problems, distributions of tool calls and
response lengths, grounding rate, Recovery@k and the error / no-answer / truncation rates. Inputs are
mappings from problem id to per-sample values (or flat per-trajectory sequences); outputs are frozen
dataclasses that `dataclasses.asdict` turns into summary.json. A bad input (no samples, k > n,
mismatched lengths) is our bug and raises ValueError. Which samples and problems enter a metric
(the denominators) is the caller's choice (eval's summary); these functions never drop one silently.
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


@dataclass(frozen=True)
class PairedDifference:
    """The accuracy of run B minus run A on the problems both answered, with the paired standard error.

    Pairing by problem removes the between-problem variance both runs share (a hard problem is hard
    for both), so the same difference is judged against a smaller standard error than two unpaired
    ones would give (Miller 2024, arXiv:2411.00640, section 4: "paired differences").

    Attributes:
        value: mean over shared problems of (B's avg@n - A's avg@n) on that problem.
        stderr: sample standard deviation (ddof=1) of the per-problem differences / sqrt(n_problems);
            None with fewer than two problems.
        n_problems: problems both runs have samples of.
        a: A's avg@n on those problems; b: B's.
        better, worse: problems where B's per-problem accuracy is above / below A's.
    """

    value: float
    stderr: float | None
    n_problems: int
    a: float
    b: float
    better: int
    worse: int

    @property
    def z(self) -> float | None:
        """The difference in standard errors (None without one, or when it is 0 and so is the difference)."""
        if self.stderr is None or (self.stderr == 0 and self.value == 0):
            return None
        return math.copysign(math.inf, self.value) if self.stderr == 0 else self.value / self.stderr


def paired_difference(
    a_by_problem: Mapping[str, Sequence[bool]], b_by_problem: Mapping[str, Sequence[bool]]
) -> PairedDifference:
    """B minus A, paired by problem: per-problem avg@n differences averaged over the shared problems.

    Each run may have its own number of samples per problem (avg@4 against avg@1 is fine: each
    problem's score is its own mean). Problems only one run has, or with no samples, are left out.

    Raises:
        ValueError: the runs share no problem with samples.
    """
    shared = [pid for pid in a_by_problem if a_by_problem[pid] and b_by_problem.get(pid)]
    if not shared:
        raise ValueError("the two runs share no problem with samples; compare runs of the same benchmark")
    a = [sum(a_by_problem[pid]) / len(a_by_problem[pid]) for pid in shared]
    b = [sum(b_by_problem[pid]) / len(b_by_problem[pid]) for pid in shared]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    estimate = _estimate(diffs, len(diffs))
    return PairedDifference(
        estimate.value,
        estimate.stderr,
        len(shared),
        statistics.fmean(a),
        statistics.fmean(b),
        sum(d > 0 for d in diffs),
        sum(d < 0 for d in diffs),
    )


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
    """One sample's extracted answer (None when there is none) and its verdict.

    `correct` is None when the verdict is unknown (the grader timed out or failed on this sample):
    the answer still votes, but the group's correctness comes from a member with a known verdict.
    """

    answer: str | None
    correct: bool | None


def majority_vote(votes: Sequence[Vote], same: Callable[[str, str], bool]) -> Vote | None:
    """Return the largest group of equivalent answers as one Vote, or None without answers.

    Answers join the first group whose representative (its first member) is `same(representative,
    answer)`; identical strings join without a call. Groups are compared to their representative
    only, because equivalence need not be transitive. Ties go to the group whose first member
    appears earliest. None answers never vote. The returned Vote carries the representative's
    answer and the first known verdict among the group's members (None when no member has one), so
    one member's grader timeout never decides the group.
    """
    groups: list[list[Vote]] = []
    for vote in votes:
        if vote.answer is None:
            continue
        for group in groups:
            rep = group[0].answer
            assert rep is not None
            if rep == vote.answer or same(rep, vote.answer):
                group.append(vote)
                break
        else:
            groups.append([vote])
    if not groups:
        return None
    winner = max(groups, key=len)  # max keeps the first of equal sizes
    verdict = next((v.correct for v in winner if v.correct is not None), None)
    return Vote(winner[0].answer, verdict)


def maj_at_k(
    samples_by_problem: Mapping[str, Sequence[Vote]], k: int, same: Callable[[str, str], bool]
) -> Estimate | None:
    """Majority-vote accuracy over the first k samples of each problem.

    A problem counts as solved when its majority group is correct (see `majority_vote`); a problem
    whose first k samples have no answer counts as unsolved (no-answer samples are drawn but do not
    vote). A problem whose majority group has no known verdict (every member's grading timed out or
    failed) is left out, so `n_problems` can be below the number of problems given.

    Args:
        samples_by_problem: problem id -> votes in sample order; plain (answer, correct) tuples work.
        k: samples per problem to vote over.
        same: answer equivalence, called as same(representative, candidate); the eval CLI passes
            `grading.equivalent`.

    Returns:
        The estimate with its standard error across problems (n_samples counts votes drawn), or
        None when no problem has a known verdict.

    Raises:
        ValueError: k < 1, or a problem with fewer than k samples.
    """
    if k < 1:
        raise ValueError(f"maj@k needs k >= 1; got k={k}")
    _require_samples(samples_by_problem)
    short = [pid for pid, v in samples_by_problem.items() if len(v) < k]
    if short:
        raise ValueError(f"maj@{k} needs at least {k} samples per problem; problems {short[:5]} have fewer")
    scores: list[float] = []
    for votes in samples_by_problem.values():
        winner = majority_vote([Vote(*v) for v in votes[:k]], same)
        if winner is None:
            scores.append(0.0)
        elif winner.correct is not None:
            scores.append(float(winner.correct))
    return _estimate(scores, k * len(scores)) if scores else None


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
    """Lengths in tokens per trajectory.

    Attributes:
        response_tokens: the completion, model and interpreter tokens alike (the response
            length, the quantity `--max-tokens` bounds).
        model_tokens: model-generated tokens of the completion only.
        prompt_tokens: the chat prompt, apart (None when the records do not carry it).
    """

    response_tokens: Distribution
    model_tokens: Distribution
    prompt_tokens: Distribution | None


def response_lengths(
    response_tokens: Sequence[int], model_tokens: Sequence[int], prompt_tokens: Sequence[int] | None = None
) -> Lengths:
    """Distributions of completion, model-generated and (when given) prompt tokens per trajectory.

    Raises:
        ValueError: the sequences are empty, differ in length, or a trajectory has more model tokens
            than completion tokens.
    """
    if len(model_tokens) != len(response_tokens):
        raise ValueError(f"{len(model_tokens)} model lengths but {len(response_tokens)} response lengths")
    bad = [i for i, (m, r) in enumerate(zip(model_tokens, response_tokens, strict=True)) if m > r]
    if bad:
        raise ValueError(f"trajectories {bad[:5]} have more model tokens than completion tokens")
    prompt = None
    if prompt_tokens is not None:
        if len(prompt_tokens) != len(response_tokens):
            raise ValueError(
                f"{len(prompt_tokens)} prompt lengths but {len(response_tokens)} response lengths"
            )
        prompt = distribution(prompt_tokens)
    return Lengths(distribution(response_tokens), distribution(model_tokens), prompt)


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
    """Share of answers equal to a value printed by the interpreter (docs/DESIGN.md, Grounding).

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


class Faulted(NamedTuple):
    """One sample of a faulted run: its correctness and how many injected failures it really saw."""

    correct: bool
    injected: int


@dataclass(frozen=True)
class Recovery:
    """Recovery@k (docs/DESIGN.md): accuracy with the first k executions failed, over every faulted
    sample, beside clean accuracy on the same problems.

    Every sample run with k injected failures counts, whatever it did next: one that gives up on code
    after its first failure and answers in prose is exactly the failure the measure exists for (the
    source reports interleaved baselines falling to near 0% after consecutive failures), so it is never
    left out. Which samples met all k failures is a breakdown beside it, not a filter.

    Attributes:
        k: injected failures per trajectory.
        accuracy: avg@n of every faulted sample (None without problems shared with the clean run).
        stderr: its standard error across problems (None with fewer than two problems).
        clean_accuracy: avg@n of the clean samples of the same problems.
        ratio: faulted / clean accuracy over the problems whose clean accuracy is above 0 (a problem the
            model never solves cannot show recovery): a rate relative to clean accuracy; None when
            there is none.
        n_problems: problems in `accuracy` and `clean_accuracy`.
        n_problems_ratio: problems in `ratio`.
        saw_k: samples that met all k injected failures / faulted samples.
        fewer_than_k: correct / samples among those that ran fewer than k executions (they stopped
            calling code before all k failures came): a breakdown of `accuracy`, never an exclusion.
        saw_k_correct: correct / samples among those that met all k failures (the other part of the
            breakdown).
    """

    k: int
    accuracy: float | None
    stderr: float | None
    clean_accuracy: float | None
    ratio: float | None
    n_problems: int
    n_problems_ratio: int
    saw_k: Rate
    fewer_than_k: Rate
    saw_k_correct: Rate


def recovery_at_k(
    k: int,
    faulted_by_problem: Mapping[str, Sequence[Faulted]],
    clean_by_problem: Mapping[str, Sequence[bool]],
) -> Recovery:
    """Recovery@k (docs/DESIGN.md): avg@n of every sample run with k injected failures, beside clean avg@n.

    Args:
        k: injected failures per trajectory.
        faulted_by_problem: problem id -> (correct, injected failures seen) per sample of the k run;
            plain tuples work.
        clean_by_problem: problem id -> correctness of samples run without faults.

    Returns:
        Both accuracies over the problems that have a clean sample and a faulted sample, the ratio on
        those with clean accuracy > 0, the share that met all k failures, and the correct share of
        those that did and of those that ran fewer executions (breakdowns of the same samples).

    Raises:
        ValueError: k < 1.
    """
    if k < 1:
        raise ValueError(f"Recovery@k needs k >= 1; got k={k}")
    faulted = {pid: [Faulted(*s) for s in v] for pid, v in faulted_by_problem.items()}
    samples = [s for v in faulted.values() for s in v]
    full = [s.correct for s in samples if s.injected >= k]
    fewer = [s.correct for s in samples if s.injected < k]
    saw_k, fewer_rate, full_rate = share([s.injected >= k for s in samples]), share(fewer), share(full)
    shared = [pid for pid, v in faulted.items() if v and clean_by_problem.get(pid)]
    if not shared:
        return Recovery(k, None, None, None, None, 0, 0, saw_k, fewer_rate, full_rate)
    correct = {pid: [s.correct for s in faulted[pid]] for pid in shared}
    accuracy = avg_at_n(correct)
    clean = avg_at_n({pid: clean_by_problem[pid] for pid in shared})
    solvable = [pid for pid in shared if any(clean_by_problem[pid])]
    ratio = None
    if solvable:
        clean_solvable = avg_at_n({pid: clean_by_problem[pid] for pid in solvable}).value
        ratio = avg_at_n({pid: correct[pid] for pid in solvable}).value / clean_solvable
    return Recovery(
        k,
        accuracy.value,
        accuracy.stderr,
        clean.value,
        ratio,
        len(shared),
        len(solvable),
        saw_k,
        fewer_rate,
        full_rate,
    )


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
