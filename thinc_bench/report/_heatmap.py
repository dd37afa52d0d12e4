"""The correctness heat map of the report: problems x samples of one benchmark, one panel per run.

Problems with few samples wrap, several to a row, so 100 problems x 1 sample is three rows of 40,
not a strip taller than the screen; panels wrap as `figures.panels` does. Apart from `figures`
only for length: it draws with that module's style, palette and SVG conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from thinc_bench.outcomes import EXCLUDED_STATUSES
from thinc_bench.report.figures import (
    BAD,
    INK,
    MAX_HEIGHT_IN,
    MISSING,
    OK,
    _short,
    _style,
    panels,
    svg_figure,
)

if TYPE_CHECKING:
    from thinc_bench.report.runs import Run

HEATMAP_COLUMNS = 40
"""Cells per heat-map row: problems with few samples wrap, several problems to a row, instead of one
problem per row down the page (100 problems x 1 sample was taller than the screen)."""


def _heat_grid(mine: Sequence[dict[str, Any]]) -> tuple[list[list[int]], list[str], int, int]:
    """(grid, problem ids, samples per problem, problems per row) of one run's clean samples: each
    problem is `n` adjacent cells, problems wrap several to a row when n is small."""
    problems = sorted({s["problem_id"] for s in mine})
    n = max((s["sample_idx"] for s in mine), default=0) + 1
    per_row = max(1, HEATMAP_COLUMNS // n)
    per_row = min(per_row, max(len(problems), 1))
    index = {p: i for i, p in enumerate(problems)}
    rows = max(1, -(-len(problems) // per_row))
    grid = [[-1] * (per_row * n) for _ in range(rows)]  # -1: no problem in this cell
    for p in problems:
        i = index[p]
        for col in range(n):
            grid[i // per_row][(i % per_row) * n + col] = 0
    for s in mine:
        i = index[s["problem_id"]]
        grid[i // per_row][(i % per_row) * n + s["sample_idx"]] = (
            0 if s["status"] in EXCLUDED_STATUSES else (2 if s["correct"] else 1)
        )
    return grid, problems, n, per_row


def heatmap_figure(runs: Sequence[Run], benchmark: str) -> Markup:
    """Problem x sample correctness of one benchmark (clean samples), one panel per run; problems
    with few samples wrap several to a row, so the figure stays within `MAX_HEIGHT_IN`."""
    from matplotlib.colors import ListedColormap

    with _style():
        clean = [[s for s in run.samples if s["benchmark"] == benchmark and s["k"] == 0] for run in runs]
        # a run without a clean sample of this benchmark gets no panel (an empty frame says nothing)
        grids = [(run, *_heat_grid(mine)) for run, mine in zip(runs, clean, strict=True) if mine]
        rows = max((len(g[1]) for g in grids), default=1)
        per_panel = min(0.8 + 0.12 * rows, MAX_HEIGHT_IN)
        fig, axes = panels(len(grids), per_panel, max_cols=2 if len(grids) > 1 else 1)
        for ax, (run, grid, problems, n, per_row) in zip(axes, grids, strict=True):
            ax.imshow(
                grid,
                cmap=ListedColormap(["none", MISSING, BAD, OK]),
                vmin=-1,
                vmax=2,
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_title(_short(run.label), fontsize=8)
            if per_row == 1:
                ax.set_xticks(range(n))
                ax.set_xlabel("sample", fontsize=8)
                labels = problems if len(problems) <= 40 else [""] * len(problems)
                ax.set_yticks(range(len(problems)), labels, fontsize=6)
            else:  # several problems per row: one column per sample, problems in reading order
                for x in range(1, per_row):
                    ax.axvline(x * n - 0.5, color=INK, linewidth=0.3)
                ax.set_xticks([])
                ax.set_xlabel(f"{per_row} problems per row x {n} sample{'s' if n > 1 else ''}", fontsize=8)
                ax.set_yticks(range(len(grid)), [f"{i * per_row + 1}–" for i in range(len(grid))], fontsize=6)
    return svg_figure(fig)


def heatmap_figures(runs: Sequence[Run], benchmarks: Sequence[str]) -> list[dict[str, Any]]:
    """One correctness figure per benchmark that some run has clean samples of, as
    `figures.all_figures` gives its figures."""
    return [
        {
            "key": f"heatmap-{name}",
            "title": f"Correctness: {name}",
            "caption": "problems x samples (problems with few samples wrap, several to a row, in id order): "
            "green correct, red incorrect, grey not scored",
            "svg": heatmap_figure(runs, name),
        }
        for name in benchmarks
        if any(s["benchmark"] == name and s["k"] == 0 for run in runs for s in run.samples)
    ]
