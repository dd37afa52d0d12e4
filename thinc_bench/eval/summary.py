"""From sample records to summary.json: every metric per benchmark and the paper-style average.

`summarize(records, same=...)` is pure: it groups records by benchmark and by injected-failure count
k, keeps infrastructure failures out of every accuracy (and counts them), and calls the metric
functions of `metrics`. Accuracy (avg@n, pass@k, maj@k) uses the clean (k = 0) samples; Recovery@k
compares each k > 0 with the clean samples of the same problems. The overall row averages the
per-benchmark accuracies, as the ThinC paper's "Avg." column does. No IO here.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thinc_bench import metrics
from thinc_bench.eval.store import INFRA_STATUS, SampleRecord

SUMMARY_VERSION = 1
"""Bump when a key of summary.json is renamed or removed (reports read it)."""


_PER_BENCHMARK_ONLY = frozenset({"accuracy", "pass_at_k", "maj_at_k", "n_records", "n_infra_errors"})
"""Keys that only mean something within one benchmark (problem ids may repeat across benchmarks)."""

TRUNCATED_REASONS = frozenset({"max_tokens"})
"""Finish reasons that mean the budget cut the trajectory before it ended."""


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


def _block(records: Sequence[SampleRecord], same: Callable[[str, str], bool]) -> dict[str, Any]:
    """All metrics of one set of clean samples (one benchmark, k = 0)."""
    scored = [r for r in records if r.status != INFRA_STATUS]
    block: dict[str, Any] = {
        "n_records": len(records),
        "n_infra_errors": len(records) - len(scored),
    }
    if not scored:
        return block
    grouped = _by_problem(scored)
    correct = _correct(grouped)
    n_min = min(len(v) for v in correct.values())
    block["accuracy"] = metrics.avg_at_n(correct)
    block["pass_at_k"] = {str(k): metrics.pass_at_k_estimate(correct, k) for k in _pass_ks(n_min)}
    votes = {pid: [metrics.Vote(r.answer, r.correct) for r in rs] for pid, rs in grouped.items()}
    block["maj_at_k"] = {str(n_min): metrics.maj_at_k(votes, n_min, same)}
    block["tool_calls"] = metrics.tool_calls([r.n_tool_calls for r in scored])
    block["lengths"] = metrics.response_lengths(
        [r.gen_tokens for r in scored], [r.total_tokens for r in scored]
    )
    block["grounding"] = metrics.grounding_rate([r.grounded for r in scored], [r.correct for r in scored])
    block["execution_errors"] = metrics.execution_errors(
        [r.n_exec_errors for r in scored], [r.n_tool_calls for r in scored]
    )
    block["no_answer"] = metrics.no_answer_rate([r.answer for r in scored])
    block["truncation"] = metrics.truncation_rate([r.finish_reason in TRUNCATED_REASONS for r in scored])
    block["grader_timeouts"] = metrics.share([r.status == "grader_timeout" for r in scored])
    block["thinc_conformance"] = metrics.share([r.style == "thinc" for r in scored])
    return block


def _recovery(records: Sequence[SampleRecord], clean: Sequence[SampleRecord]) -> dict[str, Any]:
    by_k: dict[int, list[SampleRecord]] = defaultdict(list)
    for record in records:
        if record.k > 0 and record.status != INFRA_STATUS:
            by_k[record.k].append(record)
    clean_correct = _correct(_by_problem(r for r in clean if r.status != INFRA_STATUS))
    out: dict[str, Any] = {}
    for k in sorted(by_k):
        faulted = _correct(_by_problem(by_k[k]))
        if set(faulted) & set(clean_correct):
            out[str(k)] = metrics.recovery_at_k(k, faulted, clean_correct)
    return out


def summarize(
    records: Sequence[SampleRecord],
    *,
    same: Callable[[str, str], bool],
    benchmarks: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The content of summary.json for a run's records.

    Args:
        records: every sample record of the run (all k).
        same: mathematical equivalence of two answers, for maj@k (eval passes `grading.equivalent`).
        benchmarks: the order of benchmarks in the output; default: order of first appearance.

    Returns:
        A JSON-ready dict: `per_benchmark` (metrics per benchmark, plus `recovery` per k), `overall`
        (mean accuracy over benchmarks, totals), and `summary_version`.
    """
    order = list(benchmarks) if benchmarks is not None else list(dict.fromkeys(r.benchmark for r in records))
    per_benchmark: dict[str, Any] = {}
    for name in order:
        mine = [r for r in records if r.benchmark == name]
        clean = [r for r in mine if r.k == 0]
        block = _block(clean, same)
        block["recovery"] = _recovery(mine, clean)
        per_benchmark[name] = block
    accuracies = [b["accuracy"].value for b in per_benchmark.values() if "accuracy" in b]
    overall = {
        "mean_accuracy": sum(accuracies) / len(accuracies) if accuracies else None,
        "n_benchmarks_scored": len(accuracies),
        "n_records": len(records),
        "n_infra_errors": sum(r.status == INFRA_STATUS for r in records),
    }
    clean_all = [r for r in records if r.k == 0]
    if clean_all:
        pooled = _block(clean_all, same)
        overall.update({k: v for k, v in pooled.items() if k not in _PER_BENCHMARK_ONLY})
    summary: dict[str, Any] = _plain(
        {"summary_version": SUMMARY_VERSION, "per_benchmark": per_benchmark, "overall": overall}
    )
    return summary


def _plain(value: Any) -> Any:
    """Dataclasses (metric results) to dicts, recursively, so json.dumps takes the summary."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
