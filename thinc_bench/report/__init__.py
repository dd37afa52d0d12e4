"""HTML reports of evaluation runs, rendered from run directories alone (any old run re-renders).

`write_report(run_dir)` writes one self-contained `report.html` into a run directory (eval calls it
after every run); `write_comparison(run_dirs, out)` renders several runs, or the shards of one run
merged, into one page (`python -m thinc_bench.report`). Both build a plain data dict (`data`,
`tables`, `viewer`, `figures`) and render jinja2 templates from `templates/`: no network requests,
tables and figures readable without JavaScript, the trajectory viewer rendered lazily in the browser.
`environment()` and `figures.svg_figure` are public for other pages (the SFT report).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.report.figures import svg_figure

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "REPORT_FILE",
    "build_data",
    "environment",
    "render",
    "svg_figure",
    "write_comparison",
    "write_report",
]

REPORT_FILE = "report.html"
"""The report's name inside a run directory (docs/DESIGN.md, Run directory)."""


def environment() -> jinja2.Environment:
    """The jinja2 environment of every thinc_bench page: package templates, autoescape, strict names.

    Example:
        html = environment().get_template("sft.html.jinja").render(**data)
    """
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("thinc_bench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def build_data(
    run_dirs: str | Path | Sequence[str | Path],
    *,
    title: str | None = None,
    problem_text: bool = True,
    training_logs: Sequence[str | Path] = (),
    paired: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The report template's data for one run directory or several (shards of one run are merged).

    Args:
        run_dirs: a run directory, or several to compare; `LABEL=DIR` names a column.
        title: page title; default from the run labels.
        problem_text: include problem statements found in local benchmark files (see
            `viewer.problem_texts`); False for reports kept in the repository.
        training_logs: GRPO runs' `trainer_state.json` files (or their output folders): reward per step.
        paired: `B:A` label pairs for the paired differences; default every later run against the first.

    Raises:
        FileNotFoundError: a directory is not a run directory, or a training log is missing.
        ValueError: no run directories.
        ConfigError: a `paired` label that names no run.
    """
    from thinc_bench.report.data import build_report_data
    from thinc_bench.report.runs import merge_shards

    dirs = [run_dirs] if isinstance(run_dirs, str | Path) else list(run_dirs)
    runs = merge_shards([_labelled_run(d) for d in dirs])
    logs = [_training_log(path) for path in training_logs]
    return build_report_data(runs, title=title, problem_text=problem_text, training_logs=logs, paired=paired)


def _labelled_run(entry: str | Path) -> Any:
    """A run directory, or `LABEL=DIR` to name its column (default: the model's name)."""
    from thinc_bench.report.runs import load_run

    label, sep, path = str(entry).partition("=")
    if not sep or Path(entry).exists():
        return load_run(entry)
    run = load_run(path)
    run.label = label
    return run


def _training_log(path: str | Path) -> tuple[str, list[dict[str, Any]]]:
    """(label, log history) of a trainer_state.json, or of the one in a training output folder."""
    import json

    file = Path(path)
    if file.is_dir():
        file = file / "trainer_state.json"
    if not file.is_file():
        raise FileNotFoundError(
            f"training log {file} does not exist; pass a GRPO output folder or its trainer_state.json"
        )
    history = json.loads(file.read_text(encoding="utf-8")).get("log_history", [])
    return file.parent.name, history


def render(data: dict[str, Any]) -> str:
    """The report page for a data dict from `build_data`, stamped with the renderer's id.

    The page's one script, the viewer, is allowed by its hash in the Content-Security-Policy (no
    'unsafe-inline'): a script that an escaping slip let into any field would not run."""
    import base64
    import hashlib

    import markupsafe

    from thinc_bench.report._stamp import renderer_id

    env = environment()
    viewer_js = env.get_template("_viewer.js.jinja").render()
    script_hash = base64.b64encode(hashlib.sha256(viewer_js.encode()).digest()).decode()
    return env.get_template("report.html.jinja").render(
        **data, renderer=renderer_id(), viewer_js=markupsafe.Markup(viewer_js), script_hash=script_hash
    )


def write_report(run_dir: str | Path) -> Path:
    """Render `report.html` into the run directory and return its path.

    Raises:
        FileNotFoundError: the directory is not a run directory.
    """
    out = Path(run_dir) / REPORT_FILE
    out.write_text(render(build_data(run_dir)), encoding="utf-8")
    return out


def write_comparison(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    title: str | None = None,
    problem_text: bool = True,
    training_logs: Sequence[str | Path] = (),
    paired: Sequence[str] | None = None,
) -> Path:
    """Render several runs (or shards of one run, merged) into one page at `out`.

    Raises:
        FileNotFoundError: a directory is not a run directory.
        ValueError: no run directories.
    """
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = build_data(
        run_dirs, title=title, problem_text=problem_text, training_logs=training_logs, paired=paired
    )
    path.write_text(render(data), encoding="utf-8")
    return path
