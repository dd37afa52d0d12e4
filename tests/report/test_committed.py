"""Committed example reports are rendered by today's renderer, and each has the command that rebuilds it.

A report in reports/ is what a newcomer reads first; one rendered by older code keeps mistakes the
renderer has since fixed. Every page carries the renderer's id (a hash of thinc_bench/report's code
and templates), so a committed page older than the renderer fails here, naming its rebuild command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from thinc_bench.report import render
from thinc_bench.report._stamp import renderer_id, stamp_of

REPORTS = Path(__file__).resolve().parents[2] / "reports"
REBUILD = {
    "tir_baselines.html": "make reports (reports/tir-baselines/run.sh, ~2 min)",
    "smollm2-recovery.html": "make reports (~12 min on 2 cores)",
    "nano.html": "make nano (its runs in runs/nano; the whole chain without them)",
}
"""Each committed report and the one command that rebuilds it (reports/README.md says the same)."""
KNOWN_STALE: dict[str, str] = {}
"""Reports known to be older than the renderer, each with why (a strict xfail: a fresh page fails it)."""


def test_every_committed_report_has_a_rebuild_command() -> None:
    assert sorted(p.name for p in REPORTS.glob("*.html")) == sorted(REBUILD)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_STALE[n], strict=True))
        if n in KNOWN_STALE
        else n
        for n in sorted(REBUILD)
    ],
)
def test_committed_report_is_rendered_by_the_current_renderer(name: str) -> None:
    stamp = stamp_of((REPORTS / name).read_text(encoding="utf-8"))
    assert stamp == renderer_id(), (
        f"reports/{name} was rendered by {'renderer ' + stamp if stamp else 'a renderer before stamps'}, "
        f"not today's ({renderer_id()}); rebuild it: {REBUILD[name]}"
    )


def test_a_rendered_page_carries_the_renderer_id_and_it_follows_the_code(tmp_path, monkeypatch) -> None:
    from thinc_bench.report import _stamp

    page = render_synthetic(tmp_path)
    assert stamp_of(page) == renderer_id() and len(renderer_id()) == 12
    copy = tmp_path / "report"
    (copy / "templates").mkdir(parents=True)
    for file in _stamp.PACKAGE.glob("*.py"):
        (copy / file.name).write_bytes(file.read_bytes())
    monkeypatch.setattr(_stamp, "PACKAGE", copy)
    _stamp.renderer_id.cache_clear()
    try:
        before = _stamp.renderer_id()
        (copy / "tables.py").write_text((copy / "tables.py").read_text() + "\n# changed\n")
        _stamp.renderer_id.cache_clear()
        assert _stamp.renderer_id() != before
    finally:
        _stamp.renderer_id.cache_clear()


def render_synthetic(tmp_path: Path) -> str:
    from report.synthetic import synthetic_run
    from thinc_bench.report import build_data

    return render(build_data(synthetic_run(tmp_path / "run", model="m", sizes={"aime2025": 2}, samples=1)))
