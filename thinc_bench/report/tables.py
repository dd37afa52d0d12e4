"""The report's tables as data: headline metrics, Recovery@k and published numbers beside measured ones.

Every headline number is read from a run's summary (summary.json, or the merged shards' recomputed
summary); nothing here recomputes a metric that summary.json holds. The "average" row takes the
mean accuracy over benchmarks ("Avg.") from `overall`, the pooled rates from `overall`, and pass@k / maj@k as the
mean of the per-benchmark values (summary.json keeps those per benchmark only). Each cell carries its
raw value (tests compare it with summary.json) and whether it is the best across runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from thinc_bench.report.runs import Run

Direction = Literal["higher", "lower", "none"]
Format = Literal["pct", "float", "int"]


@dataclass(frozen=True)
class Metric:
    """One headline column: where its value sits in a summary block and how to show it."""

    key: str
    label: str
    direction: Direction
    fmt: Format
    get: Callable[[dict[str, Any]], float | None]
    help: str


def _path(*keys: str) -> Callable[[dict[str, Any]], float | None]:
    def get(block: dict[str, Any]) -> float | None:
        value: Any = block
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return None if value is None else float(value)

    return get


def _largest_key(summary: dict[str, Any], benchmark: str, name: str) -> str | None:
    by_k = summary.get("per_benchmark", {}).get(benchmark, {}).get(name) or {}
    return max(by_k, key=int) if by_k else None


def _largest_k(name: str) -> Callable[[dict[str, Any]], float | None]:
    def get(block: dict[str, Any]) -> float | None:
        by_k = block.get(name) or {}
        if not by_k:
            return None
        value = by_k[max(by_k, key=int)].get("value")
        return None if value is None else float(value)

    return get


METRICS: tuple[Metric, ...] = (
    Metric("accuracy", "avg@n", "higher", "pct", _path("accuracy", "value"), "mean accuracy over problems"),
    Metric("pass_at_k", "pass@k", "higher", "pct", _largest_k("pass_at_k"), "unbiased pass@k, largest k"),
    Metric("maj_at_k", "maj@k", "higher", "pct", _largest_k("maj_at_k"), "majority vote over k samples"),
    Metric(
        "tool_calls", "tool calls", "none", "float", _path("tool_calls", "mean"), "executions per trajectory"
    ),
    Metric(
        "response_tokens",
        "tokens",
        "none",
        "int",
        _path("lengths", "response_tokens", "mean"),
        "completion tokens per response, model and interpreter (the prompt apart)",
    ),
    Metric(
        "grounding",
        "grounded",
        "higher",
        "pct",
        _path("grounding", "answered", "value"),
        "answers printed by code",
    ),
    Metric(
        "exec_errors",
        "exec err",
        "lower",
        "pct",
        _path("execution_errors", "per_execution", "value"),
        "failed executions / executions",
    ),
    Metric("no_answer", "no answer", "lower", "pct", _path("no_answer", "value"), "no \\boxed{} answer"),
    Metric(
        "truncation",
        "truncated",
        "lower",
        "pct",
        _path("truncation", "value"),
        "stopped by the token budget or the tool-call limit",
    ),
    Metric(
        "conformance",
        "ThinC",
        "higher",
        "pct",
        _path("thinc_conformance", "value"),
        "share passing every ThinC conformance check",
    ),
    Metric(
        "posthoc",
        "post-hoc",
        "lower",
        "pct",
        _path("failure_modes", "posthoc", "value"),
        "(A) answer stated in prose before any output showed it, then verified by code",
    ),
    Metric(
        "nl_literals",
        "NL literals",
        "lower",
        "pct",
        _path("failure_modes", "nl_literals", "value"),
        "(B) trajectories typing a number computed in prose into code",
    ),
    Metric(
        "nl_ratio",
        "NL ratio",
        "lower",
        "pct",
        _path("failure_modes", "nl_ratio"),
        "(C) prose outside the plan / model tokens (role overlap)",
    ),
)
"""Headline columns. Tool calls and tokens have no "best": fewer is only better at equal accuracy."""

FAILURE_MODE_METRICS = ("posthoc", "nl_literals", "nl_ratio")
"""The three TIR failure modes (summary `failure_modes`), shown together in their own figure."""


def fmt(value: float | None, kind: Format) -> str:
    """A number as the report prints it: percentages with one decimal, like the published numbers."""
    if value is None:
        return "–"
    if kind == "pct":
        return f"{100 * value:.1f}"
    if kind == "int":
        return f"{value:.0f}"
    return f"{value:.2f}"


def _cell(
    metric: Metric, block: dict[str, Any] | None, value: float | None = None, why: str | None = None
) -> dict[str, Any]:
    if block is not None:
        value = metric.get(block)
    cell: dict[str, Any] = {"key": metric.key, "value": value, "text": fmt(value, metric.fmt), "best": False}
    if metric.key == "accuracy" and block is not None:
        stderr = _path("accuracy", "stderr")(block)
        cell["stderr"] = stderr
        cell["stderr_text"] = fmt(stderr, "pct") if stderr is not None else None
        cell |= _error_trajectories(block)
    if metric.key in ("pass_at_k", "maj_at_k") and block and value is not None:
        cell["note"] = _coverage(block.get(metric.key) or {})
    if value is None:
        cell["why"] = why or (missing_reason(metric, block) if block is not None else "no value")
    return cell


MISSING = {
    "accuracy": "no scored sample",
    "tool_calls": "no scored sample",
    "response_tokens": "the records do not say how long their responses were (older thinc_bench)",
    "grounding": "no scored sample gave an answer",
    "exec_errors": "no code was executed",
    "no_answer": "no scored sample",
    "truncation": "no scored sample",
    "conformance": "the records carry no conformance checks (older thinc_bench)",
    "posthoc": "no answered sample to judge (or older records without failure modes)",
    "nl_literals": "no sample with code to judge (or older records without failure modes)",
    "nl_ratio": "no model tokens to measure (or older records without failure modes)",
}
"""Why a headline metric can have no value in a summary block that has records."""


def _error_trajectories(block: dict[str, Any]) -> dict[str, Any]:
    """Beside accuracy: how many clean trajectories met an execution error (a model that writes slips
    it then fixes scores the same accuracy as one that writes none); empty when none was scored."""
    errors = (block.get("execution_errors") or {}).get("trajectories_with_error")
    if not isinstance(errors, dict) or not errors.get("denominator"):
        return {}
    count, total = int(errors["numerator"]), int(errors["denominator"])
    return {"exec_errors": count / total, "exec_errors_text": f"{count}/{total}"}


def missing_reason(metric: Metric, block: dict[str, Any]) -> str:
    """Why `metric` has no value in a per-benchmark or overall summary block: the reader's tooltip."""
    if not block:
        return "this run has no records of this benchmark"
    if "accuracy" not in block and "mean_accuracy" not in block and block.get("n_records") is not None:
        n, lost = block.get("n_records", 0), excluded(block)
        return f"no scored sample: {lost} of {n} clean samples excluded (no verdict)"
    if metric.key in ("pass_at_k", "maj_at_k"):
        by_k = block.get(metric.key) or {}
        if not by_k:
            return "not computed (older summary)"
        k = max(by_k, key=int)
        entry = by_k[k]
        short, unresolved = int(entry.get("n_problems_short") or 0), int(entry.get("n_unresolved") or 0)
        if metric.key == "pass_at_k" or not unresolved:
            return (
                f"no problem has {k} usable samples ({short} problems have fewer: a sample lost to an "
                "infrastructure, harness or grader error)"
            )
        return (
            f"no majority group of {k} samples has a known verdict ({unresolved} unresolved, {short} short)"
        )
    return MISSING.get(metric.key, "no value")


def _coverage(by_k: dict[str, Any]) -> str | None:
    """ "n/m problems" when the largest k was computed on fewer problems than the benchmark has
    (problems with fewer than k usable samples, or maj@k groups without a known verdict), else None."""
    if not by_k:
        return None
    entry = by_k[max(by_k, key=int)]
    used = int(entry.get("n_problems") or 0)
    total = used + int(entry.get("n_problems_short") or 0) + int(entry.get("n_unresolved") or 0)
    return f"{used}/{total} problems" if total > used else None


def _mark_interrupted(cell: dict[str, Any], run: Run, benchmark: str | None) -> None:
    """Say on an accuracy cell of an interrupted run, where readers look, that it covers part of the
    plan: "3 of 6 problems · run interrupted" (the whole run's trajectories on the average)."""
    partial = run.summary.get("partial")
    if not partial:
        return
    planned = (partial.get("problems") or {}).get(benchmark) if benchmark else None
    if planned is not None:
        block = run.summary.get("per_benchmark", {}).get(benchmark) or {}
        scored = int((block.get("accuracy") or {}).get("n_problems") or 0)
        cell["note"] = f"{scored} of {planned} problems · run interrupted"
    else:
        cell["note"] = f"{partial.get('saved')} of {partial.get('planned')} trajectories · run interrupted"
    cell["note_title"] = "the run was stopped before its plan finished; rerun its command to resume it"
    cell["interrupted"] = True


def _average_cells(run: Run, shown: int) -> list[dict[str, Any]]:
    """The average row: benchmarks without a scored sample (or not in the run, of the `shown` columns)
    are left out of it, and the cell says so."""
    overall = run.summary.get("overall", {})
    per = run.summary.get("per_benchmark", {})
    blocks = [b for b in per.values() if "accuracy" in b]
    total = max(len(per), shown)
    partial = f"{len(blocks)}/{total} benchmarks" if 0 < len(blocks) < total else None
    cells = []
    for metric in METRICS:
        if metric.key == "accuracy":
            why = "no benchmark has a scored sample"
            cells.append(_cell(metric, None, overall.get("mean_accuracy"), why))
            cells[-1] |= _error_trajectories(overall.get("pooled") or overall)  # counts: pooled
        elif metric.key in ("pass_at_k", "maj_at_k"):
            values = [v for v in (metric.get(b) for b in blocks) if v is not None]
            whole = bool(values) and len(values) == len(blocks)
            why = f"{len(blocks) - len(values)} of {len(blocks)} scored benchmarks have no {metric.label}"
            cells.append(_cell(metric, None, fmean(values) if whole else None, why))
        else:
            cells.append(_cell(metric, overall))
        if partial and metric.key in ("accuracy", "pass_at_k", "maj_at_k") and cells[-1]["value"] is not None:
            cells[-1]["note"] = partial
    return cells


def _mark_best(
    groups: list[list[dict[str, Any]]],
    skip: frozenset[str] = frozenset(),
    comparable: Sequence[bool] | None = None,
) -> None:
    """Flag, per metric, the one best value across the comparable runs (`comparable`: measured on the
    same problems; default all): only with 2+ of them, never on a tie (a star that two runs share, or
    every run's 0.0, marks nothing), and not for `skip` (pass@k / maj@k at different k: pass@8 beats
    pass@4 by construction)."""
    compared = [g for g, ok in zip(groups, comparable or [True] * len(groups), strict=True) if ok]
    if len(compared) < 2:
        return
    for i, metric in enumerate(METRICS):
        if metric.direction == "none" or metric.key in skip:
            continue
        cells = [g[i] for g in compared if g[i]["value"] is not None]
        if len(cells) < 2:
            continue
        best = (max if metric.direction == "higher" else min)(cells, key=lambda c: c["value"])
        if sum(c["text"] == best["text"] for c in cells) > 1:  # a tie as the reader sees it
            continue
        best["best"] = True


def _measured_on(run: Run, benchmark: str) -> int | None:
    """How many problems of `benchmark` the run scored (None: none, or an interrupted run's part)."""
    if run.summary.get("partial"):
        return None
    block = run.summary.get("per_benchmark", {}).get(benchmark) or {}
    return (block.get("accuracy") or {}).get("n_problems") or None


def _same_problems(counts: Sequence[Any]) -> list[bool]:
    """Which runs to compare: those measured on the problem set most runs share (a run measured on
    fewer problems, or on a part of the benchmarks, is not compared with the others)."""
    known = [c for c in counts if c is not None]
    if not known:
        return [False] * len(counts)
    common = max(set(known), key=lambda c: (known.count(c), str(c)))
    return [c == common for c in counts]


def excluded(block: dict[str, Any]) -> int:
    """Clean samples kept out of accuracy (infrastructure and grader machinery since summary version 5;
    harness errors too before it, grader timeouts before version 4); version-1 summaries counted
    infrastructure errors only."""
    counts = block.get("excluded")
    return int(sum(counts.values())) if counts else int(block.get("n_infra_errors", 0))


def _excluded_cell(block: dict[str, Any]) -> dict[str, Any]:
    """The excluded column: clean samples, then the k > 0 runs' exclusions apart (they are out of
    Recovery@k, not out of accuracy)."""
    by_k = {k: int(sum(c.values())) for k, c in (block.get("excluded_recovery") or {}).items()}
    faulted = sum(by_k.values())
    detail = ", ".join(f"k={k}: {n}" for k, n in by_k.items() if n)
    counts = ", ".join(f"{s}: {n}" for s, n in (block.get("excluded") or {}).items() if n)
    timeouts = int(block.get("grader_timeouts") or 0)
    harness = int(block.get("harness_errors") or 0)
    return {
        "value": excluded(block),
        "faulted": faulted,
        "timeouts": timeouts,
        "harness": harness,
        "title": "clean samples infrastructure kept from a verdict (out of accuracy)"
        + (f": {counts}" if counts else "")
        + (f"; injected-failure runs: {detail} (out of Recovery@k)" if faulted else "")
        + (
            f"; {timeouts} unverifiable answers (grader timeouts) are in accuracy as wrong"
            if timeouts
            else ""
        )
        + (
            f"; {harness} trajectories the harness could not process are in accuracy as wrong"
            if harness
            else ""
        ),
    }


def denominators(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per run whose denominators lost or bent anything, the counts the page states at its top: samples
    left out of every rate (infrastructure, with evidence), and the model's failures counted as wrong
    (output the harness could not process, answers too deep to judge), clean and faulted runs together."""
    out = []
    for r, run in enumerate(runs):
        overall = run.summary.get("overall", {})
        faulted = {k: int(sum(c.values())) for k, c in (overall.get("excluded_recovery") or {}).items()}
        counts = {
            "excluded": excluded(overall),
            "excluded_faulted": sum(faulted.values()),
            "harness_errors": int(overall.get("harness_errors") or 0),
            "grader_timeouts": int(overall.get("grader_timeouts") or 0),
        }
        if any(counts.values()):
            out.append({"run": r, "label": run.label, **counts})
    return out


def headline(runs: Sequence[Run], benchmarks: Sequence[str]) -> dict[str, Any]:
    """Rows per benchmark plus the average; each row holds one cell group per run."""
    rows: list[dict[str, Any]] = []
    for name in benchmarks:
        groups = []
        for run in runs:
            block = run.summary.get("per_benchmark", {}).get(name)
            groups.append([_cell(m, block or {}) for m in METRICS])
        ks: dict[str, list[str] | None] = {
            m: sorted({k for run in runs if (k := _largest_key(run.summary, name, m)) is not None}, key=int)
            for m in ("pass_at_k", "maj_at_k")
        }
        for run, group in zip(runs, groups, strict=True):
            _mark_interrupted(group[0], run, name)
        comparable = _same_problems([_measured_on(run, name) for run in runs])
        _mark_best(groups, frozenset(m for m, found in ks.items() if found and len(found) > 1), comparable)
        infra = [_excluded_cell(run.summary.get("per_benchmark", {}).get(name, {})) for run in runs]
        rows.append({"benchmark": name, "groups": groups, "ks": ks, "infra": infra, "average": False})
    averages = [_average_cells(run, len(benchmarks)) for run in runs]
    for run, group in zip(runs, averages, strict=True):
        _mark_interrupted(group[0], run, None)
    differ = {m for row in rows for m, found in row["ks"].items() if found and len(found) > 1}
    # averages compare only over the same benchmarks and problems: a run measured on 1 of 4 is no rival
    coverage = [tuple(_measured_on(run, name) for name in benchmarks) for run in runs]
    whole = [None if any(c is None for c in cover) else cover for cover in coverage]
    _mark_best(averages, frozenset(differ), _same_problems(whole))
    infra = [_excluded_cell(run.summary.get("overall", {})) for run in runs]
    rows.append({"benchmark": "average", "groups": averages, "ks": {}, "infra": infra, "average": True})
    columns = []
    for m in METRICS:
        all_ks = sorted({k for row in rows for k in row["ks"].get(m.key) or []}, key=int)
        label = m.label.replace("@k", f"@{all_ks[0]}") if len(all_ks) == 1 else m.label
        columns.append({"key": m.key, "label": label, "help": m.help, "direction": m.direction})
        for row in rows:  # a per-row k is shown only where the runs' k differ across rows
            row["ks"][m.key] = row["ks"].get(m.key) if len(all_ks) > 1 else None
    return {"columns": columns, "rows": rows}


def recovery(runs: Sequence[Run], benchmarks: Sequence[str]) -> dict[str, Any]:
    """Recovery@k as a pivot: one row per run and benchmark, one column per k (faulted, clean, ratio)."""
    rows: list[dict[str, Any]] = []
    for r, run in enumerate(runs):
        for name in benchmarks:
            by_k = run.summary.get("per_benchmark", {}).get(name, {}).get("recovery") or {}
            if by_k:
                rows.append({"run": r, "label": run.label, "benchmark": name, "by_k": by_k})
    ks = sorted({k for row in rows for k in row["by_k"]}, key=int)
    return {"ks": ks, "rows": rows}


def mean_recovery(run: Run, k: int) -> dict[str, float] | None:
    """Recovery@k accuracy and clean accuracy averaged over the benchmarks that have both, or None."""
    recs = [
        b["recovery"][str(k)]
        for b in run.summary.get("per_benchmark", {}).values()
        if str(k) in (b.get("recovery") or {})
    ]
    recs = [r for r in recs if r.get("accuracy") is not None and r.get("clean_accuracy") is not None]
    if not recs:
        return None
    out = {"accuracy": fmean(r["accuracy"] for r in recs), "clean": fmean(r["clean_accuracy"] for r in recs)}
    ratios = [r["ratio"] for r in recs if r.get("ratio") is not None]
    if ratios:
        out["ratio"] = fmean(ratios)
    return out


def measured(run: Run, metric: str) -> float | None:
    """The run's own number comparable with a published metric key of reference.yaml."""
    overall = run.summary.get("overall", {})
    if metric == "avg_accuracy":
        value = overall.get("mean_accuracy")
        return None if value is None else 100 * float(value)
    if metric == "tool_calls":
        return _path("tool_calls", "mean")(overall)
    if metric == "grounding":
        value = _path("grounding", "answered", "value")(overall)
        return None if value is None else 100 * value
    if metric in FAILURE_MODE_METRICS:
        value = next(m.get(overall) for m in METRICS if m.key == metric)
        return None if value is None else 100 * value
    if metric.startswith("recovery_accuracy_k"):
        rec = mean_recovery(run, int(metric.removeprefix("recovery_accuracy_k")))
        return None if rec is None else 100 * rec["accuracy"]
    if metric.startswith("recovery_rate_k"):  # the source's rate is undefined: our ratio stands beside it
        rec = mean_recovery(run, int(metric.removeprefix("recovery_rate_k")))
        return None if rec is None or "ratio" not in rec else 100 * rec["ratio"]
    return None


MEASURED_AS = {
    "avg_accuracy": ("accuracy", "avg@n, mean over benchmarks"),
    "tool_calls": ("mean", "code executions per trajectory, mean over benchmarks"),
    "grounding": ("rate", "grounded answers / answers, mean over benchmarks"),
    "recovery_accuracy_k5": (
        "accuracy",
        "Recovery@5: accuracy of every sample run with its first 5 executions failed, mean over benchmarks "
        "(an accuracy, compared with a published accuracy)",
    ),
    "recovery_rate_k3": (
        "ratio to clean",
        "a ratio: Recovery@3 accuracy / clean accuracy on the same problems (those with clean accuracy > 0), mean over "
        "benchmarks, x 100: a rate relative to clean accuracy. The source calls its figure a recovery rate "
        "without defining it, so our Recovery@3 accuracy is shown beside it too",
    ),
    "posthoc": ("rate", "trajectories, mean over benchmarks"),
    "nl_literals": ("rate", "trajectories, mean over benchmarks"),
    "nl_ratio": ("share", "model tokens, mean over benchmarks"),
}
"""What the run's own number is (a short tag shown beside it, and the whole sentence on hover): an
accuracy, a rate relative to clean accuracy, or a mean, so no published figure is read against a
quantity of another kind without saying so."""


def measured_beside(run: Run, metric: str) -> str | None:
    """A second own number shown beside a published figure whose kind the source leaves open."""
    if metric.startswith("recovery_rate_k"):
        rec = mean_recovery(run, int(metric.removeprefix("recovery_rate_k")))
        return None if rec is None else f"accuracy {100 * rec['accuracy']:.1f}"
    return None


def published(
    runs: Sequence[Run], reference: dict[str, Any], benchmarks: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Reference numbers grouped by metric, each group with the runs' own comparable numbers; each
    entry carries its provenance in words and whether it applies to this report's benchmarks."""
    from thinc_bench.report.reference import applies, provenance

    groups: dict[str, dict[str, Any]] = {}
    for entry in reference.get("numbers", []):
        metric = entry["metric"]
        group = groups.setdefault(
            metric,
            {
                "metric": metric,
                "label": reference.get("metrics", {}).get(metric, metric),
                "entries": [],
                "measured": [
                    {
                        "label": run.label,
                        "value": measured(run, metric),
                        "beside": measured_beside(run, metric),
                    }
                    for run in runs
                ],
                "measured_as": MEASURED_AS.get(metric, (None, None))[1],
                "measured_tag": MEASURED_AS.get(metric, (None, None))[0],
                "applies": applies(entry, benchmarks, reference),
            },
        )
        group["entries"].append(
            {
                **entry,
                "provenance": provenance(entry, reference),
                "applies": applies(entry, benchmarks, reference),
            }
        )
    return list(groups.values())
