"""HTML report of a run directory, rendered from the directory alone (any old run re-renders).

`write_report(run_dir)` reads config.json, summary.json and samples.jsonl, builds a plain data dict
and renders a jinja2 template into one self-contained `report.html` (no network, no JavaScript needed
to read it). This first version shows the settings, the headline table and every trajectory; figures,
comparisons and the interactive viewer come with the report issue.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

__all__ = ["build_data", "write_report"]

REPORT_FILE = "report.html"


def build_data(run_dir: str | Path) -> dict[str, Any]:
    """The template's data: config, summary and samples, read from the run directory only."""
    from thinc_bench.store import RunDir

    path = Path(run_dir)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    run = RunDir(path, config)
    samples = [dataclasses.asdict(r) for r in run.records()]
    samples.sort(key=lambda s: (s["benchmark"], s["problem_id"], s["k"], s["sample_idx"]))
    return {"run_dir": str(path), "config": config, "summary": run.read_summary() or {}, "samples": samples}


def write_report(run_dir: str | Path) -> Path:
    """Render `report.html` into the run directory and return its path."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("thinc_bench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    html = env.get_template("report.html.jinja").render(**build_data(run_dir))
    out = Path(run_dir) / REPORT_FILE
    out.write_text(html, encoding="utf-8")
    return out
