"""Read a rendered report back: headline cells, figures and the embedded viewer data."""

from __future__ import annotations

from html.parser import HTMLParser
from statistics import fmean
from typing import Any

from thinc_bench.report.viewer import unpack

EXPECTED_PATHS = {
    "accuracy": ("accuracy", "value"),
    "tool_calls": ("tool_calls", "mean"),
    "response_tokens": ("lengths", "response_tokens", "mean"),
    "grounding": ("grounding", "answered", "value"),
    "exec_errors": ("execution_errors", "per_execution", "value"),
    "no_answer": ("no_answer", "value"),
    "truncation": ("truncation", "value"),
    "conformance": ("thinc_conformance", "value"),
    "posthoc": ("failure_modes", "posthoc", "value"),
    "nl_literals": ("failure_modes", "nl_literals", "value"),
    "nl_ratio": ("failure_modes", "nl_ratio"),
}
"""Where summary.json keeps each headline metric, written out independently of the report code."""


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.row: str | None = None
        self.in_headline = False
        self.cells: dict[tuple[str, int, str], str] = {}
        self.figures: list[str] = []
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.in_headline = "headline" in (a.get("class") or "")
        elif tag == "tr" and self.in_headline:
            self.row = a.get("data-benchmark")
        elif tag == "td" and self.in_headline and self.row and "data-metric" in a:
            self.cells[(self.row, int(a["data-run"] or 0), a["data-metric"] or "")] = a["data-value"] or ""
        elif tag == "figure":
            self.figures.append(a.get("id") or "")
        elif tag == "svg":
            self.svgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_headline = False


def parse_page(html: str) -> _Cells:
    parser = _Cells()
    parser.feed(html)
    return parser


def viewer_data(html: str) -> dict[str, Any]:
    opener = '<script type="application/gzip+base64" id="thinc-data">'
    start = html.index(opener) + len(opener)
    return unpack(html[start : html.index("</script>", start)])


def _get(block: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        block = block[key]
    return block


def expected_cells(summary: dict[str, Any], run: int = 0) -> dict[tuple[str, int, str], float | None]:
    """Every headline number the page must show for one run, straight from summary.json."""
    out: dict[tuple[str, int, str], float | None] = {}
    per = summary["per_benchmark"]
    for name, block in per.items():
        for metric, path in EXPECTED_PATHS.items():
            out[(name, run, metric)] = _get(block, path)
        out[(name, run, "pass_at_k")] = block["pass_at_k"][max(block["pass_at_k"], key=int)]["value"]
        out[(name, run, "maj_at_k")] = block["maj_at_k"][max(block["maj_at_k"], key=int)]["value"]
        out[(name, run, "infra")] = sum(block["excluded"].values())
    overall = summary["overall"]
    for metric, path in EXPECTED_PATHS.items():
        out[("average", run, metric)] = (
            overall["mean_accuracy"] if metric == "accuracy" else _get(overall, path)
        )
    for metric in ("pass_at_k", "maj_at_k"):
        out[("average", run, metric)] = fmean(out[(name, run, metric)] for name in per)  # type: ignore[misc]
    out[("average", run, "infra")] = sum(overall["excluded"].values())
    return out
