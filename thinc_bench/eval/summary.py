"""From sample records to summary.json: every metric per benchmark and the mean over benchmarks.

`summarize(records, same=...)` is pure: it groups records by benchmark and by injected-failure count
k and calls the metric functions of `metrics`. Accuracy (avg@n, pass@k, maj@k) uses the clean
(k = 0) samples; Recovery@k compares every sample of each k > 0 with the clean samples of the same
problems. Every overall figure is the mean over benchmarks of the per-benchmark figure, as a results
table's "Avg." column is for accuracy (so BeyondAIME's 100 problems weigh what AIME's 30 weigh); the
figures pooled over every trajectory sit apart under `overall.pooled`. No IO.

Denominators never move silently, and never in the model's favour (`thinc_bench.outcomes`). Samples
infrastructure kept from being produced (`infra_error`) or whose grading machinery failed
(`grader_error`) are left out of every rate and counted: `excluded` for the clean samples (per
benchmark, and overall as their sum), `excluded_recovery` for each k > 0. Samples the harness could
not process (`harness_error`) and answers the grader could not judge in bounded time
(`grader_timeout`) are the model's: scored as wrong everywhere, and counted apart (`harness_errors`,
`grader_timeouts`). The trajectory measures (tool calls, lengths, grounding, conformance, failure
modes) read the samples whose trajectory was processed, so `harness_error` samples are in accuracy
but not in them. A problem left with no scored sample is reported as missing (`missing`, count and
ids), never dropped unseen. pass@k and maj@k keep the requested k (the samples asked for per
problem): each is computed on the problems that have k usable samples, with that count and the count
of the others beside it, instead of lowering k for every problem because one sample was lost.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thinc_bench import metrics, outcomes
from thinc_bench.eval.store import SampleRecord
from thinc_bench.outcomes import EXCLUDED_STATUSES, GRADER_TIMEOUT_STATUS, HARNESS_STATUS, INFRA_STATUS

SUMMARY_VERSION = 5
"""Bump when a key of summary.json is renamed or removed, or changes meaning (reports read it).

5: `harness_error` samples are the model's: wrong in every rate and counted in `harness_errors`
(`excluded` counts `infra_error` and `grader_error` only). Recovery@k's `accuracy` is over every
faulted sample (those that met fewer than k failures included), with `saw_k_correct` beside
`fewer_than_k`. `overall`'s rates and means are the mean over benchmarks (`n_benchmarks` per figure
where fewer benchmarks have it); the pooled figures moved to `overall.pooled`. `judge`: the judge
versions of the records.

4: `grader_timeout` samples are scored as wrong (the answer's, not infrastructure) and counted in
`grader_timeouts` (clean samples, per benchmark and overall); `excluded` counts `infra_error`,
`harness_error` and `grader_error`.

3: `excluded` and `n_infra_errors` count clean (k = 0) samples overall as per benchmark (overall is
the sum over benchmarks); the k > 0 exclusions are `excluded_recovery` {k: {status: count}}, per
benchmark and overall.

2: lengths are response (completion) / model / prompt tokens; `excluded`, `missing`, `truncation_by`,
`conformance_checks`, `thinc_style` and `failure_modes` added; grader timeouts and errors left out of
accuracy; pass@k / maj@k entries carry `n_problems_short` (and maj@k `n_unresolved`); Recovery@k
carries stderr, ratio on problems with clean accuracy > 0, `saw_k` and `fewer_than_k`."""

NO_VOTE_STATUSES = frozenset({INFRA_STATUS})
"""Statuses whose sample is not drawn for maj@k (no trajectory); a `harness_error` sample is drawn
without an answer (it counts, like a sample with no box), and grader failures still vote."""

TIMEOUT_STATUS = GRADER_TIMEOUT_STATUS

_PER_BENCHMARK_ONLY = frozenset(
    {
        "accuracy",
        "pass_at_k",
        "maj_at_k",
        "n_records",
        "n_infra_errors",
        "excluded",
        "excluded_recovery",
        "grader_timeouts",
        "harness_errors",
        "missing",
        "n_samples",
    }
)
"""Keys that only mean something within one benchmark (problem ids may repeat across benchmarks)."""

TRUNCATED_REASONS = ("max_tokens", "max_tool_calls")
"""Finish reasons that mean a budget cut the trajectory before it ended: the token budget and the
tool-call limit, reported together (`truncation`) and apart (`truncation_by`)."""


def _pass_ks(n: int) -> list[int]:
    """pass@k for k = 1, 2, 4, ... up to n, and n itself (the usual curve points)."""
    ks = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted({*ks, n})


def _by_problem(records: Iterable[SampleRecord]) -> dict[str, list[SampleRecord]]:
    grouped: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.problem_id, r.sample_idx)):
        grouped[record.problem_id].append(record)
    return dict(grouped)


def _correct(grouped: dict[str, list[SampleRecord]]) -> dict[str, list[bool]]:
    return {pid: [r.correct for r in rs] for pid, rs in grouped.items()}


def _scored(records: Iterable[SampleRecord]) -> list[SampleRecord]:
    """Samples in every rate: all but infrastructure's (`outcomes.EXCLUDED_STATUSES`)."""
    return [r for r in records if not outcomes.is_excluded(r.status)]


def _processed(records: Iterable[SampleRecord]) -> list[SampleRecord]:
    """Scored samples with a processed trajectory, the ones trajectory measures can read."""
    return [r for r in _scored(records) if r.status != HARNESS_STATUS]


def _at_k(estimate: metrics.Estimate | None, n_short: int, **extra: int) -> dict[str, Any]:
    return {
        **(dataclasses.asdict(estimate) if estimate else {"value": None}),
        "n_problems_short": n_short,
        **extra,
    }


def _accuracy(records: Sequence[SampleRecord], n: int, same: Callable[[str, str], bool]) -> dict[str, Any]:
    """avg@n, pass@k and maj@k of one benchmark's clean records, at the requested n."""
    grouped = _by_problem(_scored(records))
    correct = _correct(grouped)
    block: dict[str, Any] = {"accuracy": metrics.avg_at_n(correct)}
    block["pass_at_k"] = {}
    for k in _pass_ks(n):
        enough = {pid: c for pid, c in correct.items() if len(c) >= k}
        estimate = metrics.pass_at_k_estimate(enough, k) if enough else None
        block["pass_at_k"][str(k)] = _at_k(estimate, len(correct) - len(enough))
    drawn = _by_problem(r for r in records if r.status not in NO_VOTE_STATUSES)
    votes = {
        pid: [metrics.Vote(r.answer, None if r.status in EXCLUDED_STATUSES else r.correct) for r in rs]
        for pid, rs in drawn.items()
        if len(rs) >= n
    }
    estimate = metrics.maj_at_k(votes, n, same) if votes else None
    unresolved = len(votes) - (estimate.n_problems if estimate else 0)
    block["maj_at_k"] = {str(n): _at_k(estimate, len(drawn) - len(votes), n_unresolved=unresolved)}
    return block


def _block(
    records: Sequence[SampleRecord], same: Callable[[str, str], bool], n: int | None
) -> dict[str, Any]:
    """All metrics of one set of clean samples (one benchmark, k = 0); n: samples requested per problem."""
    scored = _scored(records)
    excluded = _excluded(records)
    problems = list(dict.fromkeys(r.problem_id for r in sorted(records, key=lambda r: r.problem_id)))
    with_score = {r.problem_id for r in scored}
    missing = [pid for pid in problems if pid not in with_score]
    block: dict[str, Any] = {
        "n_records": len(records),
        "n_infra_errors": excluded[INFRA_STATUS],
        "excluded": excluded,
        "grader_timeouts": sum(r.status == TIMEOUT_STATUS for r in records),
        "harness_errors": sum(r.status == HARNESS_STATUS for r in records),
        "missing": {"count": len(missing), "ids": missing},
    }
    if not scored:
        return block
    if n is not None:
        block["n_samples"] = n
        block.update(_accuracy(records, n, same))
    scored = _processed(records)
    if not scored:
        return block
    block["tool_calls"] = metrics.tool_calls([r.n_tool_calls for r in scored])
    measured = [r for r in scored if r.response_tokens is not None]
    if measured:  # version-1 records do not say how long their prompt was
        block["lengths"] = metrics.response_lengths(
            [r.response_tokens or 0 for r in measured],
            [r.gen_tokens for r in measured],
            None
            if any(r.prompt_tokens is None for r in measured)
            else [r.prompt_tokens or 0 for r in measured],
        )
    block["grounding"] = metrics.grounding_rate([r.grounded for r in scored], [r.correct for r in scored])
    block["execution_errors"] = metrics.execution_errors(
        [r.n_exec_errors for r in scored], [r.n_tool_calls for r in scored]
    )
    block["no_answer"] = metrics.no_answer_rate([r.answer for r in scored])
    block["truncation"] = metrics.truncation_rate([r.finish_reason in TRUNCATED_REASONS for r in scored])
    block["truncation_by"] = {
        reason: metrics.share([r.finish_reason == reason for r in scored]) for reason in TRUNCATED_REASONS
    }
    checked = [r for r in scored if r.checks]
    block["thinc_conformance"] = metrics.share([all(r.checks.values()) for r in checked])
    names = list(dict.fromkeys(name for r in checked for name in r.checks))
    block["conformance_checks"] = {
        name: metrics.share([r.checks[name] for r in checked if name in r.checks]) for name in names
    }
    block["thinc_style"] = metrics.share([r.style == "thinc" for r in scored])
    block["failure_modes"] = metrics.failure_modes(
        [r.posthoc for r in scored],
        [None if r.nl_literals is None else len(r.nl_literals) for r in scored],
        [r.nl_ratio for r in scored],
        [r.plan_share for r in scored],
    )
    return block


def _recovery(records: Sequence[SampleRecord], clean: Sequence[SampleRecord]) -> dict[str, Any]:
    by_k: dict[int, list[SampleRecord]] = defaultdict(list)
    for record in _scored(records):  # every faulted sample, whatever it did after its failures
        if record.k > 0:
            by_k[record.k].append(record)
    clean_correct = _correct(_by_problem(_scored(clean)))
    out: dict[str, Any] = {}
    for k in sorted(by_k):
        faulted = {
            pid: [
                metrics.Faulted(r.correct, min(r.k, r.n_tool_calls) if r.n_injected is None else r.n_injected)
                for r in rs
            ]
            for pid, rs in _by_problem(by_k[k]).items()
        }
        out[str(k)] = metrics.recovery_at_k(k, faulted, clean_correct)
    return out


def _excluded(records: Iterable[SampleRecord]) -> dict[str, int]:
    """Samples without a verdict, by status: the one way `excluded` is counted everywhere."""
    statuses = [r.status for r in records]
    return {status: statuses.count(status) for status in EXCLUDED_STATUSES}


def _excluded_recovery(records: Sequence[SampleRecord]) -> dict[str, dict[str, int]]:
    """`excluded` of each injected-failure count k > 0 (out of Recovery@k as excluded is out of accuracy)."""
    ks = sorted({r.k for r in records if r.k > 0})
    return {str(k): _excluded(r for r in records if r.k == k) for k in ks}


def _sum_counts(blocks: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for block in blocks:
        for key, n in block.items():
            total[key] = total.get(key, 0) + n
    return total


def _requested(records: Sequence[SampleRecord]) -> int | None:
    """Samples per problem when not given: the most any problem has (every status counted)."""
    counts: dict[str, int] = defaultdict(int)
    for record in records:
        counts[record.problem_id] += 1
    return max(counts.values(), default=None)


def summarize(
    records: Sequence[SampleRecord],
    *,
    same: Callable[[str, str], bool],
    benchmarks: Sequence[str] | None = None,
    samples: int | None = None,
) -> dict[str, Any]:
    """The content of summary.json for a run's records.

    Args:
        records: every sample record of the run (all k).
        same: mathematical equivalence of two answers, for maj@k (eval passes `grading.equivalent`).
        benchmarks: the order of benchmarks in the output; default: order of first appearance.
        samples: samples requested per problem, the n of pass@n and maj@n; default: the most any
            problem of the benchmark has recorded.

    Returns:
        A JSON-ready dict: `per_benchmark` (metrics per benchmark, plus `recovery` per k), `overall`
        (mean accuracy over benchmarks, totals), and `summary_version`.
    """
    order = list(benchmarks) if benchmarks is not None else list(dict.fromkeys(r.benchmark for r in records))
    per_benchmark: dict[str, Any] = {}
    for name in order:
        mine = [r for r in records if r.benchmark == name]
        clean = [r for r in mine if r.k == 0]
        block = _block(clean, same, samples or _requested(clean))
        block["recovery"] = _recovery(mine, clean)
        block["excluded_recovery"] = _excluded_recovery(mine)
        per_benchmark[name] = block
    accuracies = [b["accuracy"].value for b in per_benchmark.values() if "accuracy" in b]
    overall = {
        "mean_accuracy": sum(accuracies) / len(accuracies) if accuracies else None,
        "n_benchmarks_scored": len(accuracies),
        "n_records": len(records),
        "n_infra_errors": sum(b["n_infra_errors"] for b in per_benchmark.values()),
        "excluded": _sum_counts(b["excluded"] for b in per_benchmark.values()) or _excluded([]),
        "grader_timeouts": sum(b["grader_timeouts"] for b in per_benchmark.values()),
        "harness_errors": sum(b["harness_errors"] for b in per_benchmark.values()),
        "excluded_recovery": {
            k: _sum_counts(b["excluded_recovery"].get(k, {}) for b in per_benchmark.values())
            for k in sorted({k for b in per_benchmark.values() for k in b["excluded_recovery"]}, key=int)
        },
        "missing": {
            "count": sum(b["missing"]["count"] for b in per_benchmark.values()),
            "ids": [f"{name}/{pid}" for name, b in per_benchmark.items() for pid in b["missing"]["ids"]],
        },
    }
    clean_all = [r for r in records if r.k == 0]
    if clean_all:
        pooled = _plain(_block(clean_all, same, None))
        pooled_keys = [k for k in pooled if k not in _PER_BENCHMARK_ONLY]
        blocks = [_plain(b) for b in per_benchmark.values()]
        overall.update(
            {key: mean for key in pooled_keys if (mean := benchmark_mean([b.get(key) for b in blocks]))}
        )
        overall["pooled"] = {key: pooled[key] for key in pooled_keys}
    judges = sorted({r.judge or "unrecorded" for r in records if not outcomes.is_excluded(r.status)})
    summary: dict[str, Any] = _plain(
        {
            "summary_version": SUMMARY_VERSION,
            "judge": judges,
            "per_benchmark": per_benchmark,
            "overall": overall,
        }
    )
    return summary


_MEAN_LEAVES = frozenset({"value", "mean", "median", "p90", "max"})
"""Leaves of a metric block whose mean over benchmarks is kept: a rate's value and a distribution's
centre, tail and maximum (a mean of maxima). Counts and histograms have no such mean and are dropped."""

_DROPPED_LEAVES = frozenset({"numerator", "denominator", "n", "histogram"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def benchmark_mean(blocks: Sequence[Any]) -> Any:
    """The mean over benchmarks of one metric's per-benchmark blocks (summary.json values), shaped like
    them: a bare number averaged; in a block, each rate's `value` and each distribution's `mean`,
    `median`, `p90` and `max` averaged over the benchmarks that have one, with `n_benchmarks` beside
    them; counts and histograms dropped; nested blocks likewise. None when no benchmark has the
    metric. The report reads the result as it reads one benchmark's block."""
    present = [b for b in blocks if b is not None]
    if present and all(_number(b) for b in present):
        return sum(float(b) for b in present) / len(present)
    dicts = [b for b in present if isinstance(b, dict)]
    if not dicts:
        return None
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for b in dicts for k in b):
        if key in _DROPPED_LEAVES:
            continue
        values = [b.get(key) for b in dicts]
        if key in _MEAN_LEAVES:
            numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
            out[key] = sum(numbers) / len(numbers) if numbers else None
            out["n_benchmarks"] = max(out.get("n_benchmarks", 0), len(numbers))
        elif (mean := benchmark_mean(values)) is not None:
            out[key] = mean
    return out or None


def _plain(value: Any) -> Any:
    """Dataclasses (metric results) to dicts, recursively, so json.dumps takes the summary."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
