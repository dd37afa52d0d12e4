"""Report figures: matplotlib drawings embedded as inline SVG (no files, no network, printable).

`svg_figure(fig)` is the one conversion, public for other pages (the SFT report): text stays text,
ink drawn in the `INK` sentinel colour becomes `currentColor`, so axes and labels follow the page's
light or dark theme, and every figure gets its own id salt so several SVGs share one page safely.
`all_figures` draws the evaluation report's set from runs: accuracy per benchmark with error bars
and published markers, Recovery@k, tool calls, response length by verdict, correctness heat maps
and grounding by benchmark. Figures read summaries and sample records; they compute no metric that
summary.json holds.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from thinc_bench.report.runs import Run

INK = "#010203"
"""Sentinel colour for axes, ticks and text; replaced by currentColor so the page theme decides."""

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D", "#BAB0AC")
"""Run colours: Vega's category10 variant, readable on light and dark backgrounds."""

OK, BAD, MISSING = "#54A24B", "#E45756", "#BAB0AC"
"""Heat-map cells: correct, incorrect, not scored (infra error or missing sample)."""

WIDTH_IN = 7.0
"""Figure width in inches: the report column at 96 dpi, and one printed page width."""

NA_NOTE = "; n/a: no value (the table's – says why)"
"""Caption tail of the bar figures, which mark a missing value instead of drawing a zero bar."""

_salt = itertools.count()
_figure_ids = itertools.count()
_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib as mpl

    rc: dict[str, Any] = {
        "svg.fonttype": "none",  # real <text>: smaller, searchable, themable
        "svg.hashsalt": f"thinc-{next(_salt)}",
        "text.color": INK,
        "axes.labelcolor": INK,
        "axes.edgecolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "axes.facecolor": "none",
        "figure.facecolor": "none",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 9,
        "legend.frameon": False,
    }
    with mpl.rc_context(rc):  # type: ignore[arg-type]  # keys are valid rcParams; the stub wants Literals
        yield


def new_figure(height_in: float = 3.0, ncols: int = 1) -> tuple[Figure, Any]:
    """A figure in the report's style (call inside no context: the style is applied on conversion)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes if ncols > 1 else axes[0]


MAX_PANELS_PER_ROW = 3
"""Per-run panels wrap after this many, so 8 runs never squeeze labels into each other."""

MAX_HEIGHT_IN = 4.5
"""No panel is taller than this (about half a laptop screen at 96 dpi)."""

MAX_FIGURE_HEIGHT_IN = 6.0
"""No figure is taller than this, however many runs wrap into rows of panels."""


def panels(n: int, row_height_in: float, max_cols: int = MAX_PANELS_PER_ROW) -> tuple[Figure, list[Any]]:
    """A figure with `n` panels wrapped into rows of at most `max_cols`, its height bounded."""
    import math

    from matplotlib.figure import Figure

    cols = max(1, min(n, 2 if n == 4 else max_cols))
    rows = max(1, math.ceil(n / cols))
    fig = Figure(figsize=(WIDTH_IN, min(row_height_in * rows, MAX_FIGURE_HEIGHT_IN)), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _short(label: str, limit: int = 36) -> str:
    """The label, or its start and end around "…": runs' labels often differ only at the end
    ("ThinC SFT + GRPO" and "ThinC SFT + GRPO, injected failures")."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return label[:head] + "…" + label[-(limit - 1 - head) :]


def svg_figure(fig: Figure) -> Markup:
    """Inline SVG markup of a matplotlib figure, themed by the page (see module docstring).

    Example:
        fig, ax = new_figure(); ax.plot([1, 2]); html_fragment = svg_figure(fig)
    """
    buffer = io.StringIO()
    with _style():
        fig.savefig(buffer, format="svg", transparent=True)
    text = buffer.getvalue()
    text = text[text.index("<svg") :].replace(INK, "currentColor").replace(INK.upper(), "currentColor")
    # Inline SVG in HTML needs no namespace declarations or RDF metadata; dropping them leaves the page
    # free of any URL, so "no external URL" stays a simple check.
    text = _METADATA.sub("", _XMLNS.sub("", text))
    return Markup(_unique_ids(text))  # noqa: S704 - matplotlib's own SVG, with no user text unescaped


def _unique_ids(svg: str) -> str:
    """Ids unique in a page of several SVGs: matplotlib numbers `figure_1`, `axes_1`... afresh in each
    figure. Ids nothing refers to are dropped; referenced ones (clip paths, markers) get a prefix."""
    prefix = f"f{next(_figure_ids)}-"
    referenced = {m[2] for m in _REF.finditer(svg)}
    svg = _ID.sub(lambda m: f' id="{prefix}{m[1]}"' if m[1] in referenced else "", svg)
    return _REF.sub(lambda m: f"{m[1]}{prefix}{m[2]}", svg)


def _grouped_bars(
    ax: Any,
    runs: Sequence[Run],
    names: Sequence[str],
    values: list[list[float | None]],
    errors: list[list[float | None]] | None = None,
) -> list[float]:
    width = 0.8 / max(len(runs), 1)
    centres = list(range(len(names)))
    for r, run in enumerate(runs):
        xs = [c - 0.4 + width * (r + 0.5) for c in centres]
        ys = [100 * v if v is not None else 0.0 for v in values[r]]  # n/a: no bar (NaN upsets the layout)
        err = [100 * e if e is not None else 0.0 for e in errors[r]] if errors else None
        for x, v in zip(xs, values[r], strict=True):
            if v is None:  # no value is not zero: a mark where the bar would stand, explained in the caption
                ax.text(x, 1, "n/a", rotation=90, ha="center", va="bottom", fontsize=6, color=INK)
        ax.bar(
            xs,
            ys,
            width * 0.9,
            yerr=err,
            capsize=2,
            color=PALETTE[r % len(PALETTE)],
            label=run.label,
            error_kw={"ecolor": INK, "elinewidth": 0.8},
        )
    ax.set_xticks(centres, list(names))
    ax.tick_params(axis="x", labelrotation=20 if len(names) > 3 else 0)
    return [float(c) for c in centres]


def published_markers(
    reference: dict[str, Any], metric: str, benchmarks: Sequence[str]
) -> list[dict[str, Any]]:
    """The published numbers of `metric` that may be drawn on a report of `benchmarks` (see
    `reference.applies`): the published five-benchmark averages never stand on a nano axis."""
    from thinc_bench.report.reference import applies

    return [
        e
        for e in reference.get("numbers", [])
        if e["metric"] == metric and e["value"] is not None and applies(e, benchmarks, reference)
    ]


def _marker_label(entry: dict[str, Any], reference: dict[str, Any]) -> str:
    from thinc_bench.report.reference import source_of

    return f"{entry['model']} {entry['value']} (published; {source_of(entry).short})"


def accuracy_figure(runs: Sequence[Run], benchmarks: Sequence[str], reference: dict[str, Any]) -> Markup:
    """avg@n per benchmark ± standard error, runs side by side; published averages as markers."""
    with _style():
        fig, ax = new_figure(3.2)
        names = [*benchmarks, "average"]
        values, errors = [], []
        for run in runs:
            per = run.summary.get("per_benchmark", {})
            values.append(
                [(per.get(b, {}).get("accuracy") or {}).get("value") for b in benchmarks]
                + [run.summary.get("overall", {}).get("mean_accuracy")]
            )
            errors.append([(per.get(b, {}).get("accuracy") or {}).get("stderr") for b in benchmarks] + [None])
        centres = _grouped_bars(ax, runs, names, values, errors)
        markers = itertools.cycle("D^sv<>pho")
        for entry in published_markers(reference, "avg_accuracy", benchmarks):
            ax.plot(
                [centres[-1] + 0.45],
                [entry["value"]],
                next(markers),
                color=INK,
                markersize=4,
                label=_marker_label(entry, reference),
            )
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return svg_figure(fig)


def recovery_figure(runs: Sequence[Run], ks: Sequence[int]) -> Markup | None:
    """Recovery@k (mean over benchmarks) against k, with each run's clean accuracy dashed."""
    from thinc_bench.report.tables import mean_recovery

    curves = [(run, {k: mean_recovery(run, k) for k in ks if k > 0}) for run in runs]
    if not any(any(v is not None for v in c.values()) for _, c in curves):
        return None
    with _style():
        fig, ax = new_figure(2.8)
        for r, (run, curve) in enumerate(curves):
            points = [(k, v) for k, v in sorted(curve.items()) if v is not None]
            if not points:
                continue
            colour = PALETTE[r % len(PALETTE)]
            clean = points[0][1]["clean"]
            xs = [0] + [k for k, _ in points]
            ys = [100 * clean] + [100 * v["accuracy"] for _, v in points]
            ax.plot(xs, ys, "o-", color=colour, label=f"{run.label} Recovery@k")
            ax.axhline(100 * clean, color=colour, linestyle="--", linewidth=0.8, label=f"{run.label} clean")
        ax.set_xlabel("k (injected execution failures)")
        ax.set_ylabel("accuracy (%)")
        ax.set_xticks(sorted({0, *ks}))
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7)
    return svg_figure(fig)


def _clean_scored(run: Run) -> list[dict[str, Any]]:
    """Clean samples with a processed trajectory: the ones summary.json's trajectory measures read."""
    from thinc_bench.outcomes import EXCLUDED_STATUSES, HARNESS_STATUS

    return [s for s in run.samples if s["k"] == 0 and s["status"] not in (*EXCLUDED_STATUSES, HARNESS_STATUS)]


def tool_call_figure(runs: Sequence[Run]) -> Markup:
    """Histogram of code executions per trajectory (clean samples), one bar group per run."""
    with _style():
        fig, ax = new_figure(2.6)
        top = max((s["n_tool_calls"] for run in runs for s in _clean_scored(run)), default=0)
        bins = [b - 0.5 for b in range(top + 2)]
        data = [[s["n_tool_calls"] for s in _clean_scored(run)] for run in runs]
        ax.hist(
            data,
            bins=bins,
            label=[run.label for run in runs],
            color=[PALETTE[r % len(PALETTE)] for r in range(len(runs))],
        )
        ax.set_xticks(range(top + 1))
        ax.set_xlabel("tool calls per trajectory")
        ax.set_ylabel("trajectories")
        ax.legend(fontsize=7)
    return svg_figure(fig)


def length_figure(runs: Sequence[Run]) -> Markup:
    """Model tokens per response, correct vs incorrect, one panel per run (wrapped in rows)."""
    with _style():
        fig, axes = panels(len(runs), 2.4)
        for ax, run in zip(axes, runs, strict=True):
            scored = _clean_scored(run)
            right = [s["gen_tokens"] for s in scored if s["correct"]]
            wrong = [s["gen_tokens"] for s in scored if not s["correct"]]
            top = max([*right, *wrong, 1])
            bins = [top * i / 20 for i in range(21)]
            ax.hist([right, wrong], bins=bins, color=[OK, BAD], label=["correct", "incorrect"], stacked=True)
            ax.set_title(_short(run.label), fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
        fig.supxlabel("model tokens per response", fontsize=9)
        fig.supylabel("trajectories", fontsize=9)
        axes[0].legend(fontsize=7)
    return svg_figure(fig)


def grounding_figure(runs: Sequence[Run], benchmarks: Sequence[str]) -> Markup:
    """Grounding rate (answered samples) per benchmark, runs side by side."""
    with _style():
        fig, ax = new_figure(2.6)
        values = []
        for run in runs:
            per = run.summary.get("per_benchmark", {})
            values.append(
                [
                    ((per.get(b, {}).get("grounding") or {}).get("answered") or {}).get("value")
                    for b in benchmarks
                ]
            )
        _grouped_bars(ax, runs, benchmarks, values)
        ax.set_ylabel("grounded answers (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7)
    return svg_figure(fig)


FAILURE_MODE_GROUPS = (
    ("grounded", ("grounding", "answered", "value"), "grounding"),
    ("(A) post-hoc", ("failure_modes", "posthoc", "value"), "posthoc"),
    ("(B) NL literals", ("failure_modes", "nl_literals", "value"), "nl_literals"),
    ("(C) NL ratio", ("failure_modes", "nl_ratio"), "nl_ratio"),
)
"""Bar groups of the failure-mode figure: label, path in a summary block, reference.yaml metric."""


def _dig(block: dict[str, Any], path: Sequence[str]) -> float | None:
    value: Any = block
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return None if value is None else float(value)


def failure_mode_figure(runs: Sequence[Run], reference: dict[str, Any], benchmarks: Sequence[str]) -> Markup:
    """Grounding and the three TIR failure modes, runs side by side (pooled clean samples).

    Published numbers are drawn as markers where a source gives one (grounding); groups it does
    not report are labelled so on the axis.
    """
    with _style():
        fig, ax = new_figure(3.0)
        published = {
            metric: [
                e for e in reference.get("numbers", []) if e["metric"] == metric and e["value"] is not None
            ]
            for _, _, metric in FAILURE_MODE_GROUPS
        }
        drawn = {metric: published_markers(reference, metric, benchmarks) for metric in published}
        names = [
            label if published[metric] else f"{label}\n(not reported)"
            for label, _, metric in FAILURE_MODE_GROUPS
        ]
        values = [
            [_dig(run.summary.get("overall", {}), path) for _, path, _ in FAILURE_MODE_GROUPS] for run in runs
        ]
        centres = _grouped_bars(ax, runs, names, values)
        markers = itertools.cycle("D^sv<>pho")
        for centre, (_, _, metric) in zip(centres, FAILURE_MODE_GROUPS, strict=True):
            for entry in drawn[metric]:
                ax.plot(
                    [centre + 0.45],
                    [entry["value"]],
                    next(markers),
                    color=INK,
                    markersize=4,
                    label=_marker_label(entry, reference),
                )
        ax.tick_params(axis="x", labelrotation=0, labelsize=7)
        ax.set_ylabel("%")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return svg_figure(fig)


def all_figures(
    runs: Sequence[Run], benchmarks: Sequence[str], reference: dict[str, Any]
) -> list[dict[str, Any]]:
    """The report's run-level figures in page order: dicts with key, title, caption and svg (None when
    no data); the per-benchmark heat maps follow them (`_heatmap.heatmap_figures`)."""
    ks = sorted({int(s["k"]) for run in runs for s in run.samples})
    where = ", ".join(reference.get("source", {}).get("benchmarks", []))
    none_here = f"no published markers: they were measured on {where}, not on this report's benchmarks"
    averages = (
        "markers: published 5-benchmark averages (not measured here; the legend gives each one's source class)"
        if published_markers(reference, "avg_accuracy", benchmarks)
        else none_here
    )
    grounding = (
        "Markers: published grounding rates (not measured here)"
        if published_markers(reference, "grounding", benchmarks)
        else none_here.capitalize()
    )
    figures: list[dict[str, Any]] = [
        {
            "key": "accuracy",
            "title": "Accuracy per benchmark",
            "caption": f"avg@n ± standard error over problems; {averages}{NA_NOTE}",
            "svg": accuracy_figure(runs, benchmarks, reference),
        },
        {
            "key": "recovery",
            "title": "Recovery@k",
            "caption": "accuracy with the first k executions failed (mean over benchmarks); dashed: clean "
            "accuracy on the same problems",
            "svg": recovery_figure(runs, ks),
        },
        {
            "key": "failure_modes",
            "title": "TIR failure modes",
            "caption": "grounded answers, then (A) post-hoc verification, (B) trajectories typing prose numbers "
            "into code (% of trajectories), (C) prose outside the plan (% of model tokens); lower is better "
            "for A-C. "
            f"{grounding}; no source gives a number for A-C{NA_NOTE}",
            "svg": failure_mode_figure(runs, reference, benchmarks),
        },
        {
            "key": "tool_calls",
            "title": "Tool calls",
            "caption": "code executions per trajectory, clean runs",
            "svg": tool_call_figure(runs),
        },
        {
            "key": "lengths",
            "title": "Model tokens per response",
            "caption": "model-written tokens of the completion, by verdict (the headline's tokens column counts "
            "interpreter tokens too)",
            "svg": length_figure(runs),
        },
        {
            "key": "grounding",
            "title": "Grounding by benchmark",
            "caption": "answers equal to a value the interpreter printed" + NA_NOTE,
            "svg": grounding_figure(runs, benchmarks),
        },
    ]
    return figures


REWARD_KEY = "rewards/exact_match_reward/mean"
"""The GRPO recipe's reward column in trainer_state.json's log history (TRL's rewards/<func>/mean)."""


def _per_step(
    logs: Sequence[tuple[str, Sequence[dict[str, Any]]]], key: str
) -> list[tuple[str, list[tuple[int, float]]]]:
    """(label, [(step, value)]) of every run that logged `key`; runs that never did are left out."""
    series = [
        (label, [(int(h["step"]), float(h[key])) for h in history if key in h and "step" in h])
        for label, history in logs
    ]
    return [(label, points) for label, points in series if points]


def training_reward_figure(logs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Markup | None:
    """Mean exact-match reward per GRPO step (one line per run), with a least-squares trend line.

    Args:
        logs: (label, trainer_state.json `log_history`) pairs; entries without the reward are skipped.
    """
    series = _per_step(logs, REWARD_KEY)
    if not series:
        return None
    fig, ax = new_figure(2.6)
    for r, (label, points) in enumerate(series):
        steps, rewards = zip(*points, strict=True)
        colour = PALETTE[r % len(PALETTE)]
        ax.plot(steps, [100 * v for v in rewards], marker="o", color=colour, label=label)
        if len(points) > 1:
            mx, my = sum(steps) / len(steps), sum(rewards) / len(rewards)
            sxx = sum((x - mx) ** 2 for x in steps)
            slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
            ends = (steps[0], steps[-1])
            ax.plot(ends, [100 * (my + slope * (x - mx)) for x in ends], linestyle="--", color=colour, lw=0.8)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward (%)")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower right")
    return svg_figure(fig)


CLIP_KEY = "clip_ratio/region_mean"
"""TRL's share of loss tokens whose importance ratio the clip caught (either side), per optimizer step."""


def training_clip_figure(logs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Markup | None:
    """Share of loss tokens the GRPO clip caught per optimizer step (one line per run): 0 throughout
    means the policy never moved far enough within a generation batch for the clip to act.

    Args:
        logs: (label, trainer_state.json `log_history`) pairs; entries without the clip share are skipped.
    """
    series = _per_step(logs, CLIP_KEY)
    if not series:
        return None
    fig, ax = new_figure(2.6)
    for r, (label, points) in enumerate(series):
        steps, shares = zip(*points, strict=True)
        ax.plot(steps, [100 * v for v in shares], marker="o", color=PALETTE[r % len(PALETTE)], label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("tokens clipped (%)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    return svg_figure(fig)


TRAINING_METRICS = (
    ("heldout/accuracy", "held-out accuracy (%)", 100),
    ("rollout/conformance", "ThinC conformance (%)", 100),
    ("rollout/tool_calls", "tool calls", 1),
    ("rollout/failed_calls", "failed calls", 1),
    ("rollout/grounded", "grounded answers (%)", 100),
    ("rollout/truncated", "truncated (%)", 100),
    ("rollout/posthoc", "A: post-hoc verification (%)", 100),
    ("rollout/nl_literals", "B: prose numbers in code (%)", 100),
    ("rollout/nl_ratio", "C: prose share (%)", 100),
    ("rollout/injected_frac", "injected (%)", 100),
    ("rollout/recovered", "recovered (% of injected)", 100),
    ("dynamic_sampling/effective_prompts", "effective prompts", 1),
)
"""GRPO's per-step ThinC metrics and held-out accuracy: log key, panel title, scale."""


def training_metrics_figure(logs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Markup | None:
    """One panel per ThinC metric a GRPO run logged per optimizer step (`TRAINING_METRICS`), one line per run.

    Args:
        logs: (label, trainer_state.json `log_history`) pairs; metrics no run logged get no panel.
    """
    shown = [(key, title, scale, _per_step(logs, key)) for key, title, scale in TRAINING_METRICS]
    shown = [item for item in shown if item[3]]
    if not shown:
        return None
    fig, axes = panels(len(shown), 1.8)
    labels = [label for label, _ in logs]
    for ax, (_, title, scale, series) in zip(axes, shown, strict=True):
        for label, points in series:
            steps, values = zip(*points, strict=True)
            colour = PALETTE[labels.index(label) % len(PALETTE)]
            ax.plot(steps, [scale * v for v in values], marker="o", markersize=2, color=colour, label=label)
        ax.set_title(title, fontsize="small")
        ax.set_ylim(bottom=0)
    axes[0].set_xlabel("optimizer step")
    if len(logs) > 1:
        axes[0].legend(fontsize="x-small")
    return svg_figure(fig)
