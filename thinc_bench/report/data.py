"""The report's data dict, built from run directories alone, so any old run re-renders.

Runs come from `runs` (one directory, or shards merged); `build_report_data` turns them into the
plain dict the templates read: header facts, the headline table (numbers taken from summary.json, never recomputed for a single
run), Recovery@k, paired differences with their exact tests, matched-pair scores, published reference
numbers, reader warnings and the viewer's compact samples.
Figures are drawn by `figures`; no HTML is written here.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence
from typing import Any

from thinc_bench.outcomes import EXCLUDED_STATUSES
from thinc_bench.report import _warnings
from thinc_bench.report.reference import load_reference
from thinc_bench.report.runs import Run, differences, header, setting_note, utc
from thinc_bench.report.viewer import pack, problem_texts, viewer_samples

logger = logging.getLogger(__name__)


def build_report_data(
    runs: Sequence[Run],
    *,
    title: str | None = None,
    problem_text: bool = True,
    training_logs: Sequence[tuple[str, Sequence[dict[str, Any]]]] = (),
    paired: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Everything the report template shows, as plain JSON-ready values plus the figures' SVG.

    Args:
        runs: the column groups, already merged (see `merge_shards`).
        title: the page title; default from the run labels.
        problem_text: look problem statements up in the local benchmark files named in each run's
            config (never the Hub); False leaves them out, e.g. for reports kept in the repository.
        training_logs: (label, trainer_state.json log history) of GRPO runs, drawn as reward per step.
        paired: `B:A` run-label pairs for the paired-differences table; None compares every later
            run with the first.

    Raises:
        ValueError: no runs.
        ConfigError: a `paired` label no run has.
    """
    from thinc_bench.report import figures
    from thinc_bench.report._heatmap import heatmap_figures
    from thinc_bench.report.matched import matched_pair_rows
    from thinc_bench.report.paired import paired_rows, resolve_pairs
    from thinc_bench.report.tables import denominators, headline, published, recovery

    if not runs:
        raise ValueError("a report needs at least one run directory")
    benchmarks = list(dict.fromkeys(b for run in runs for b in run.summary.get("per_benchmark", {})))
    reference = load_reference()
    texts = problem_texts(runs) if problem_text else {}
    samples = viewer_samples(runs, texts)
    headers = [header(run) for run in runs]
    return {
        "title": title or "thinc_bench · " + " vs ".join(run.label for run in runs),
        "generated": utc(datetime.datetime.now(tz=datetime.timezone.utc).timestamp()),
        "runs": headers,
        "differences": differences(headers),
        "setting_note": setting_note(headers),
        "denominators": denominators(runs),
        "benchmarks": benchmarks,
        "headline": headline(runs, benchmarks),
        "recovery": recovery(runs, benchmarks),
        "paired": paired_rows(runs, benchmarks, resolve_pairs(runs, paired)),
        "matched_pairs": matched_pair_rows(runs, benchmarks),
        "reference": reference,
        "published": published(runs, reference, benchmarks),
        "warnings": _warnings.collect(runs, samples),
        "figures": [
            *figures.all_figures(runs, benchmarks, reference),
            *heatmap_figures(runs, benchmarks),
            {
                "key": "training_reward",
                "title": "GRPO reward per step",
                "caption": "mean exact-match reward of each step's rollouts (training problems); dashed: "
                "least-squares trend",
                "svg": figures.training_reward_figure(training_logs) if training_logs else None,
            },
            {
                "key": "training_clip",
                "title": "GRPO clip fraction per step",
                "caption": "share of loss tokens whose importance ratio the clip caught (TRL's "
                "clip_ratio/region_mean); 0 throughout: the policy never moved far enough to be clipped",
                "svg": figures.training_clip_figure(training_logs) if training_logs else None,
            },
            {
                "key": "training_metrics",
                "title": "GRPO held-out accuracy and ThinC metrics per step",
                "caption": "held-out accuracy (thinc_bench.eval on the run's fixed subset, heldout/accuracy) and "
                "the training rollouts' ThinC measures per optimizer step, as eval measures them (rollout/*)",
                "svg": figures.training_metrics_figure(training_logs) if training_logs else None,
            },
        ],
        "samples": samples,
        "viewer_blob": pack(samples, [run.label for run in runs]),
        "problems": _problem_rows(samples),
        "problem_text": problem_text and bool(texts),
    }


def _problem_rows(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (run, benchmark, problem, k): its samples' verdicts, for the problem-level view."""
    rows: dict[tuple[int, str, str, int], dict[str, Any]] = {}
    for s in samples:
        key = (s["run"], s["benchmark"], s["problem_id"], s["k"])
        row = rows.setdefault(
            key,
            {
                "run": s["run"],
                "benchmark": s["benchmark"],
                "problem_id": s["problem_id"],
                "k": s["k"],
                "verdicts": [],
            },
        )
        row["verdicts"].append(
            "infra" if s["status"] in EXCLUDED_STATUSES else ("ok" if s["correct"] else "bad")
        )
    out = list(rows.values())
    for row in out:
        row["n_correct"] = row["verdicts"].count("ok")
    return out
