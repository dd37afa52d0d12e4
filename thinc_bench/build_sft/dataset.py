"""From stored teacher rollouts to the ThinC-SFT dataset, its statistics, report and card.

`finish(config, out)` reads `out/rollouts/` (the run directory eval's engine wrote), tokenizes each
trajectory with the student tokenizer (`masks`), decides it (`filters`), and writes everything
from those decisions alone: `dataset/` (save_to_disk), `thinc_sft.parquet`, `stats.json`,
`decontamination.json` (every pass's verdicts and the near-duplicate review list), `report.html` (template `report/templates/sft.html.jinja`) and `README.md`, the dataset card
(template `thinc-sft.md.jinja`, every number taken from stats.json). Rerunning it on the same
rollouts with other thresholds is `--refilter`. It does not generate.
"""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.errors import DatasetError

if TYPE_CHECKING:
    from thinc_bench.build_sft.config import BuildSFTConfig
    from thinc_bench.build_sft.filters import Decision
    from thinc_bench.eval.store import SampleRecord
    from thinc_bench.trajectory import Trajectory

logger = logging.getLogger(__name__)

DECONTAMINATION_FILE = "decontamination.json"
"""Every decontamination pass's verdicts and the near-duplicate review list (`Decontaminator.report`)."""
STATS_SCHEMA_VERSION = 1
"""Bump when a stats.json key is renamed or removed (the report and card templates read them)."""
NANO_NO_DECONTAMINATION = (
    "nano's train and test splits are disjoint by construction (a hash of family and numbers), and every "
    "problem of a family shares its wording with the test split, which n-gram overlap would call contamination"
)
"""Why a `--source nano` build checks no benchmark (see build_sft.config.NANO_CLI)."""


def decontamination_skipped(config: BuildSFTConfig, benchmark_names: Sequence[str]) -> str | None:
    """Why decontamination did not run (no benchmark to check against), or None when it ran."""
    if benchmark_names:
        return None
    if config.source == "nano":
        return NANO_NO_DECONTAMINATION
    return "--decontam-benchmarks was empty"


def dataset_name(config: BuildSFTConfig) -> str:
    """The dataset's name on its card: ThinC-SFT-nano for the nano source (the nano chain's card)."""
    return "ThinC-SFT-nano" if config.source == "nano" else "ThinC-SFT"


EXAMPLES_PER_FILTER = 3
"""Rejected trajectories shown per filter: enough to see the pattern, small enough to read."""
EXAMPLE_CHARS = 4000
"""Longest trajectory text kept in stats.json examples (the full text stays in samples.jsonl)."""
HISTOGRAM_BINS = 10
"""Bins of the continuous distributions (plan share, model tokens)."""


def finish(config: BuildSFTConfig, out: Path) -> dict[str, Any]:
    """Filter the stored rollouts in `out` and write the dataset, stats.json, report and card.

    Raises:
        ConfigError: `out` holds no rollouts.
        DatasetError: a stored rollout's problem is not in the source any more.
    """
    from thinc_bench import benchmarks, trajectory
    from thinc_bench.backends._sources import load_tokenizer
    from thinc_bench.build_sft.config import TEMPLATE_TEACHERS
    from thinc_bench.build_sft.decontam import Decontaminator
    from thinc_bench.build_sft.filters import Candidate, FilterConfig, apply_filters, conformance_failures
    from thinc_bench.build_sft.masks import after_native_thinking, tokenize_example, without_failed_blocks
    from thinc_bench.eval.store import RunDir
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool

    run_config = json.loads((out / "rollouts" / "config.json").read_text(encoding="utf-8"))
    records = RunDir(out / "rollouts", run_config).records()
    source = config.load_source()
    problems = {p.id: p for p in source.problems}
    missing = sorted({r.problem_id for r in records} - set(problems))
    if missing:
        raise DatasetError(
            f"{len(missing)} stored rollouts' problems (first {missing[0]!r}) are not in source "
            f"{config.source!r} (or are now dropped as duplicates); refilter with the source the build used"
        )
    # source order, then sample: not the order rollouts finished in, so the same build writes the same
    # dataset rows and shows the same rejected examples whatever the concurrency did
    position = {pid: i for i, pid in enumerate(problems)}
    records = sorted(records, key=lambda r: (position[r.problem_id], r.sample_idx))
    names = [b.strip() for b in config.decontam_benchmarks.split(",") if b.strip()]
    index = Decontaminator(
        {
            n: benchmarks.load(
                n, data_dir=config.decontam_data_dir, check_golds=False, local_flag="--decontam-data-dir"
            )
            for n in names
        },
        n=config.decontam_ngram,
        threshold=config.decontam_threshold,
        maths_threshold=config.decontam_maths_threshold,
    )
    # every pass, and the near-duplicate candidates kept for review, as GRPO's decontamination.json
    matches, decontamination = index.report(
        [problems[i] for i in dict.fromkeys(r.problem_id for r in records)]
    )
    (out / DECONTAMINATION_FILE).write_text(
        json.dumps(decontamination, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    tokenizer = load_tokenizer(config.student_tokenizer_path())
    system = load_system_prompt(config.student_system_prompt)
    tools = [python_tool(config.tool_name)] if config.dialect == "tool_call" else None
    rows, candidates = [], []

    def one(record: SampleRecord) -> tuple[dict[str, Any], Candidate]:
        """The dataset row and the filters' facts of one stored rollout."""
        problem = problems[record.problem_id]
        messages = build_messages(problem.problem, system)
        text = after_native_thinking(record.text) if config.teacher_thinks else record.text
        example = tokenize_example(tokenizer, messages, trajectory.parse(text, config.dialect), tools=tools)
        example = without_failed_blocks(example, record.exec_statuses)  # the slip is context, not trained
        conformance = trajectory.check_conformance(
            example.trajectory,
            min_code_blocks=config.min_code_blocks,
            max_prose_chars=config.max_prose_chars,
            share_of=config.plan_share_of,  # type: ignore[arg-type]  # checked in BuildSFTConfig
        )
        computed = trajectory.plan_computation(trajectory.plan_words(example.trajectory))
        status, grounded = _grounded(record.status, example.trajectory)
        match = matches.get(record.problem_id)
        candidate = Candidate(
            problem_id=record.problem_id,
            sample_idx=record.sample_idx,
            grade_status=status,
            exec_statuses=tuple(record.exec_statuses),
            n_code_blocks=example.trajectory.n_code_blocks,
            plan_tokens=example.plan_tokens,
            model_tokens=example.model_tokens,
            total_tokens=example.total_tokens,
            plan_computation=tuple(f"{f.kind}: {f.text}" for f in computed),
            grounded=grounded,
            conformance_failures=conformance_failures(conformance),
            contamination=None
            if match is None
            else f"{match.benchmark} {match.problem_id} ({match.method} {match.overlap:.2f})",
            stop_reason=record.finish_reason,
            prose_chars=sum(map(len, trajectory.prose_outside_plan(example.trajectory))),
            grounded_clean=_grounded_clean(record, example.trajectory) if config.recovery_share else None,
        )
        row = {
            "id": problem.id,
            "sample_idx": record.sample_idx,
            "problem": problem.problem,
            "answer": problem.answer,
            "source": problem.benchmark,
            "messages": [*messages, {"role": "assistant", "content": text}],
            "segments": [{"kind": s.kind, "text": s.raw} for s in example.trajectory.segments],
            "n_code_blocks": example.trajectory.n_code_blocks,
            "plan_tokens": example.plan_tokens,
            "model_tokens": example.model_tokens,
            "total_tokens": example.total_tokens,
            "plan_share": example.plan_share,
            "teacher_tokens": record.gen_tokens,
            "n_tool_calls": record.n_tool_calls,
            "input_ids": example.input_ids,
            "assistant_masks": example.assistant_masks,
        }
        return row, candidate

    for record in records:
        try:
            row, candidate = one(record)
        except Exception as exc:  # one hostile rollout never ends the build (issue 37)
            logger.error(
                "rollout %s/%d: %s: %s", record.problem_id, record.sample_idx, type(exc).__name__, exc
            )
            row, candidate = _unreadable(record, problems[record.problem_id])
        rows.append(row)
        candidates.append(candidate)
    filters = FilterConfig(
        config.min_code_blocks,
        config.max_plan_share,
        config.max_per_problem,
        plan_share_of=config.plan_share_of,  # type: ignore[arg-type]  # checked in BuildSFTConfig
        plan_computation=config.reject_plan_computation,
        grounded=config.require_grounded,
        recovery_share=config.recovery_share,
        cap_recovered=config.teacher not in TEMPLATE_TEACHERS,  # the template writes its share itself
    )
    decisions = apply_filters(candidates, filters)
    kept = [row for row, d in zip(rows, decisions, strict=True) if d.kept]
    _write_dataset(kept, out)
    stats = build_stats(config, run_config, records, decisions, matches, names)
    stats["decontamination"]["near_duplicate"] = {
        "settings": decontamination["near_duplicate"],
        "per_benchmark": decontamination["per_benchmark"],
    }
    stats["source_dedup"] = source.stats()
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    write_pages(out, stats)
    return stats


def _unreadable(record: SampleRecord, problem: Any) -> tuple[dict[str, Any], Any]:
    """The row and facts of a stored rollout the filter stage could not read: a `harness_error`
    candidate (charged to the not-produced filter, never kept) with an empty example."""
    from thinc_bench.build_sft.filters import Candidate

    candidate = Candidate(
        problem_id=record.problem_id,
        sample_idx=record.sample_idx,
        grade_status="harness_error",
        exec_statuses=tuple(record.exec_statuses),
        n_code_blocks=0,
        plan_tokens=0,
        model_tokens=0,
        stop_reason=record.finish_reason,
    )
    row = {
        "id": problem.id,
        "sample_idx": record.sample_idx,
        "problem": problem.problem,
        "answer": problem.answer,
        "source": problem.benchmark,
        "messages": [],
        "segments": [],
        "n_code_blocks": 0,
        "plan_tokens": 0,
        "model_tokens": 0,
        "total_tokens": 0,
        "plan_share": 0.0,
        "teacher_tokens": record.gen_tokens,
        "n_tool_calls": record.n_tool_calls,
        "input_ids": [],
        "assistant_masks": [],
    }
    return row, candidate


def _grounded(status: str, traj: Trajectory) -> tuple[str, bool | None]:
    """The grade status and whether the answer is grounded in an interpreter output (`grading`'s rule,
    on the trajectory the dataset holds). A grader that cannot run the check makes the sample
    `grader_error`: ungraded, the infrastructure's, checked again on the next run."""
    from thinc_bench.errors import GraderError
    from thinc_bench.grading import is_grounded

    try:
        return status, is_grounded(traj)
    except GraderError:
        return "grader_error", None


def _grounded_clean(record: SampleRecord, traj: Trajectory) -> bool | None:
    """Whether the answer is printed by an execution that ran clean (None: every execution did).

    Each output block is its execution's; a trajectory whose outputs and executions do not pair up
    (several blocks before one output, or code run inside a dropped native thinking) is not vouched for.
    """
    from thinc_bench.grading import grounded

    statuses = record.exec_statuses
    if all(s == "ok" for s in statuses):
        return None
    outputs = traj.outputs
    if len(outputs) != len(statuses):
        return False
    return grounded(record.answer, [o for o, s in zip(outputs, statuses, strict=True) if s == "ok"]) is True


def _features() -> Any:
    from datasets import Features, List, Value

    text = Value("string")
    return Features(
        {
            "id": text,
            "sample_idx": Value("int64"),
            "problem": text,
            "answer": text,
            "source": text,
            "messages": List({"role": text, "content": text}),
            "segments": List({"kind": text, "text": text}),
            "n_code_blocks": Value("int64"),
            "plan_tokens": Value("int64"),
            "model_tokens": Value("int64"),
            "total_tokens": Value("int64"),
            "plan_share": Value("float64"),
            "teacher_tokens": Value("int64"),
            "n_tool_calls": Value("int64"),
            "input_ids": List(Value("int64")),
            "assistant_masks": List(Value("int8")),
        }
    )


def _write_dataset(rows: list[dict[str, Any]], out: Path) -> None:
    import datasets

    features = _features()
    # from_dict, not from_list: an empty kept set must still carry every column (a build may keep nothing)
    dataset = datasets.Dataset.from_dict({k: [row[k] for row in rows] for k in features}, features=features)
    # an empty dataset saved with the default shard count (0) does not load back (datasets 5.2)
    dataset.save_to_disk(str(out / "dataset"), num_shards=1 if not rows else None)
    dataset.to_parquet(str(out / "thinc_sft.parquet"))


def _histogram(values: Sequence[float], *, integer: bool) -> dict[str, Any]:
    """Counts per integer value (few distinct values), else HISTOGRAM_BINS equal bins; shares in [0, 1].

    Non-integer values (plan share) are binned over [0, 1], so builds compare at a glance.
    """
    if not values:
        return {"n": 0, "mean": None, "median": None, "bins": []}
    low, high = (min(values), max(values)) if integer else (0.0, 1.0)
    bins: list[dict[str, Any]]
    if integer and high - low < HISTOGRAM_BINS * 2:
        counts = Counter(int(v) for v in values)
        bins = [{"label": str(v), "count": counts.get(v, 0)} for v in range(int(low), int(high) + 1)]
    else:
        width = (high - low) / HISTOGRAM_BINS
        index = Counter(min(int((v - low) / width), HISTOGRAM_BINS - 1) for v in values)
        fmt = "{:.0f}" if integer else "{:.1f}"
        bins = [
            {
                "label": f"{fmt.format(low + i * width)}-{fmt.format(low + (i + 1) * width)}",
                "count": index.get(i, 0),
            }
            for i in range(HISTOGRAM_BINS)
        ]
    peak = max(int(b["count"]) for b in bins) or 1
    for b in bins:
        b["share"] = int(b["count"]) / peak
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "bins": bins,
    }


def _distributions(decisions: Sequence[Decision]) -> dict[str, Any]:
    cands = [d.candidate for d in decisions if d.dropped_by not in ("infra_error", "processed")]
    return {
        "n_code_blocks": _histogram([c.n_code_blocks for c in cands], integer=True),
        "n_executed": _histogram([c.n_executed for c in cands], integer=True),
        "plan_share": _histogram([c.plan_share for c in cands], integer=False),
        "plan_share_of_model": _histogram([c.share_of("model") for c in cands], integer=False),
        "prose_chars": _histogram([c.prose_chars for c in cands], integer=True),
        "model_tokens": _histogram([c.model_tokens for c in cands], integer=True),
    }


def build_stats(
    config: BuildSFTConfig,
    run_config: dict[str, Any],
    records: Sequence[SampleRecord],
    decisions: Sequence[Decision],
    matches: dict[str, Any],
    benchmark_names: list[str],
) -> dict[str, Any]:
    """stats.json: the funnel, decontamination per benchmark, distributions and rejected examples."""
    from thinc_bench.build_sft.filters import (
        FILTER_HELP,
        FILTERS,
        INFRASTRUCTURE,
        RECOVERED_EXEC_OK_HELP,
        funnel,
    )
    from thinc_bench.build_sft.masks import NATIVE_THINKING_RULE

    share = config.recovery_share
    help_text = dict(FILTER_HELP)
    if share:
        help_text["exec_ok"] = RECOVERED_EXEC_OK_HELP.format(share=share)

    texts = {(r.problem_id, r.sample_idx): r.text for r in records}
    rejected: dict[str, list[dict[str, Any]]] = {name: [] for name in FILTERS}
    for d in decisions:
        if d.dropped_by is not None and len(rejected[d.dropped_by]) < EXAMPLES_PER_FILTER:
            text = texts[(d.candidate.problem_id, d.candidate.sample_idx)]
            rejected[d.dropped_by].append(
                {
                    "problem_id": d.candidate.problem_id,
                    "sample_idx": d.candidate.sample_idx,
                    "reason": d.reasons[0],
                    "all_failed": list(d.failed),
                    "text": text[:EXAMPLE_CHARS],
                    "truncated": len(text) > EXAMPLE_CHARS,
                }
            )
    traj_by_problem = Counter(d.candidate.problem_id for d in decisions)
    kept = [d for d in decisions if d.kept]
    per_benchmark = {
        name: {
            "problems": sum(m.benchmark == name for m in matches.values()),
            "trajectories": sum(
                n for pid, n in traj_by_problem.items() if pid in matches and matches[pid].benchmark == name
            ),
        }
        for name in benchmark_names
    }
    generator = run_config.get("resolved", {}).get("generator", {})
    return {
        "schema_version": STATS_SCHEMA_VERSION,
        "name": dataset_name(config),
        "teacher": {
            **generator,
            "resolved_model": generator.get("model"),
            "model": config.teacher_description(),
            "backend": config.backend,
            "trajectory_rule": NATIVE_THINKING_RULE if config.teacher_thinks else None,
        },
        "source": config.source,
        "student_tokenizer": config.student_tokenizer,
        "config_hash": run_config.get("config_hash"),
        "settings": {k: v for k, v in asdict(config).items() if k not in ("push_to_hub",)},
        "counts": {
            "problems": len(traj_by_problem),
            "trajectories": len(decisions),
            "kept": len(kept),
            "kept_problems": len({d.candidate.problem_id for d in kept}),
        },
        "funnel": [
            asdict(step) | {"help": help_text[step.name], "infrastructure": step.name in INFRASTRUCTURE}
            for step in funnel(decisions)
        ],
        "excluded": {
            "infrastructure": sum(d.dropped_by in INFRASTRUCTURE for d in decisions),
            "by_stage": {
                name: sum(d.dropped_by == name for d in decisions) for name in sorted(INFRASTRUCTURE)
            },
        },
        "recovery": _recovery_stats(config, decisions),
        "decontamination": {
            "benchmarks": benchmark_names,
            "not_run": decontamination_skipped(config, benchmark_names),
            "ngram": config.decontam_ngram,
            "threshold": config.decontam_threshold,
            "maths_threshold": config.decontam_maths_threshold,
            "methods": dict(Counter(m.method for m in matches.values())),
            "problems_checked": len(traj_by_problem),
            "per_benchmark": per_benchmark,
            "matches": [
                {
                    "problem_id": pid,
                    "benchmark": m.benchmark,
                    "benchmark_problem_id": m.problem_id,
                    "overlap": m.overlap,
                    "method": m.method,
                }
                for pid, m in sorted(matches.items())
            ],
        },
        "generation": {
            "finish_reasons": dict(Counter(r.finish_reason for r in records)),
            "grade_statuses": dict(Counter(r.status for r in records)),
            "exec_statuses": dict(Counter(s for r in records for s in r.exec_statuses)),
            "teacher_tokens": sum(r.gen_tokens for r in records),
        },
        "distributions": {"all": _distributions(decisions), "kept": _distributions(kept)},
        "rejected_examples": rejected,
    }


def _recovery_stats(config: BuildSFTConfig, decisions: Sequence[Decision]) -> dict[str, Any]:
    """--recovery-share and what it let in: recovered trajectories kept, and the failed executions in them."""
    from thinc_bench.build_sft.config import TEMPLATE_TEACHERS

    kept = [d for d in decisions if d.kept]
    recovered = [d for d in kept if d.recovered]
    return {
        "share": config.recovery_share,
        "capped": bool(config.recovery_share) and config.teacher not in TEMPLATE_TEACHERS,
        "recovered": sum(d.recovered for d in decisions),
        "over_cap": sum(d.recovered and d.dropped_by == "exec_ok" for d in decisions),
        "kept": len(recovered),
        "kept_share": len(recovered) / len(kept) if kept else 0.0,
        "failed_executions_kept": dict(
            Counter(s for d in recovered for s in d.candidate.exec_statuses if s != "ok")
        ),
    }


def write_pages(out: Path, stats: dict[str, Any]) -> None:
    """report.html and README.md (the dataset card) from stats.json's data alone."""
    import jinja2

    from thinc_bench.report import environment

    (out / "report.html").write_text(
        environment().get_template("sft.html.jinja").render(stats=stats), encoding="utf-8"
    )
    # The card is Markdown, not HTML: no escaping, and block whitespace kept as the template writes it.
    loader = jinja2.PackageLoader("thinc_bench.report", "templates")
    markdown = jinja2.Environment(loader=loader, autoescape=False, undefined=jinja2.StrictUndefined)
    card = markdown.get_template("thinc-sft.md.jinja").render(stats=stats)
    (out / "README.md").write_text(card, encoding="utf-8")


def format_funnel(stats: dict[str, Any]) -> str:
    """The end-of-build table: each stage, how many it removed and how many remain."""
    counts = stats["counts"]
    lines = [
        f"{'stage':<18}{'removed':>9}{'remaining':>11}",
        f"{'generated':<18}{'':>9}{counts['trajectories']:>11}",
    ]
    lines += [f"{s['name']:<18}{s['removed']:>9}{s['remaining']:>11}" for s in stats["funnel"]]
    lines.append(
        f"kept {counts['kept']} trajectories on {counts['kept_problems']} of {counts['problems']} problems"
    )
    recovery = stats.get("recovery", {})
    if recovery.get("share"):
        lines.append(
            f"of which {recovery['kept']} recovered from a failed block (--recovery-share {recovery['share']})"
        )
    return "\n".join(lines)


def push(out: Path, repo: str) -> None:
    """Upload the dataset and its card to a Hub dataset repo.

    Raises:
        ConfigError: huggingface_hub is missing (any Hub error keeps its own message and traceback).
    """
    import datasets

    from thinc_bench.backends import require

    require("huggingface_hub")
    from huggingface_hub import HfApi

    datasets.load_from_disk(str(out / "dataset")).push_to_hub(repo)
    HfApi().upload_file(
        path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=repo, repo_type="dataset"
    )
    logger.info("pushed %s to the Hub dataset %s", out, repo)
