"""The report in real headless Chromium: loads from file:// with no console error and no network
request, the viewer's filters change what is visible, and a screenshot is kept as a test artifact.

Needs Debian's `chromium` (.ci/run installs it); without it the test fails and says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from report.cdp import Browser, chromium_path
from report.pages import viewer_data
from report.synthetic import synthetic_run
from thinc_bench.report import write_comparison

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
"""Where the screenshot goes (git-ignored); CI can upload the folder."""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("browser")
    runs = [
        synthetic_run(
            root / "a",
            model="org/ThinC-4B",
            p_correct=0.7,
            ks=(0, 1),
            samples=8,
            sizes={"aime2025": 12, "hmmt_feb2025": 8},
        ),
        synthetic_run(
            root / "b",
            model="org/Qwen3-4B",
            p_correct=0.4,
            ks=(0, 1),
            samples=8,
            sizes={"aime2025": 12, "hmmt_feb2025": 8},
        ),
    ]
    out = write_comparison(runs, root / "report.html")
    return out, viewer_data(out.read_text())


@pytest.fixture(scope="module")
def browser(page, tmp_path_factory):
    executable = chromium_path()
    if executable is None:
        pytest.fail("chromium not found: install it with `apt-get install -y chromium` (.ci/run does)")
    b = Browser(executable, tmp_path_factory.mktemp("profile"))
    try:
        b.open_page()
        b.navigate(page[0].resolve().as_uri())
        yield b
    finally:
        b.close()


def _visible(b: Browser) -> int:
    return b.evaluate("document.querySelectorAll('#trajectories details.traj').length")


def _shown(b: Browser) -> int:
    return int(b.evaluate("document.getElementById('viewer-count').dataset.count"))


def test_page_loads_from_file_without_console_errors_or_network_requests(browser, page) -> None:
    url = page[0].resolve().as_uri()
    errors = [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"]
    errors += [
        e
        for e in browser.events
        if e.get("method") == "Runtime.consoleAPICalled"
        and e["params"]["type"] in ("error", "warning", "assert")
    ]
    errors += [
        e
        for e in browser.events
        if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
    ]
    assert errors == []
    requested = [
        e["params"]["request"]["url"]
        for e in browser.events
        if e.get("method") == "Network.requestWillBeSent"
    ]
    assert requested and all(u == url or u.startswith("data:") for u in requested), requested
    assert browser.evaluate("document.querySelectorAll('figure svg').length") == 7


def test_viewer_filters_change_the_visible_trajectories(browser, page) -> None:
    samples = page[1]["samples"]
    assert _shown(browser) == len(samples) == 2 * 20 * 8 * 2
    assert _visible(browser) == 100  # the list renders a page at a time
    browser.evaluate("document.getElementById('f-exec_error').click()")
    with_error = [s for s in samples if s["flags"]["exec_error"]]
    assert _shown(browser) == len(with_error) and _visible(browser) == min(100, len(with_error))
    browser.evaluate(
        "const s = document.getElementById('f-benchmark'); s.value = 'hmmt_feb2025';"
        "s.dispatchEvent(new Event('change'))"
    )
    both = [s for s in with_error if s["benchmark"] == "hmmt_feb2025"]
    assert _shown(browser) == len(both) and _visible(browser) == min(100, len(both))
    browser.evaluate("document.getElementById('f-nonconforming').click()")
    odd = [s for s in both if s["flags"]["nonconforming"]]
    assert 0 < _shown(browser) == len(odd) == _visible(browser) < 100
    browser.evaluate("document.getElementById('f-reset').click()")
    assert _shown(browser) == len(samples)


def test_problem_link_shows_all_samples_of_that_problem(browser, page) -> None:
    browser.evaluate("document.querySelector('a.open-problem').click()")
    first = page[1]["samples"][0]
    mine = [
        s
        for s in page[1]["samples"]
        if (s["run"], s["benchmark"], s["problem_id"])
        == (first["run"], first["benchmark"], first["problem_id"])
    ]
    assert _visible(browser) == len(mine) == 16  # 8 samples x k in {0, 1}
    browser.evaluate("document.getElementById('f-reset').click()")


def test_opening_a_trajectory_renders_highlighted_code_and_a_screenshot_is_saved(browser) -> None:
    browser.evaluate("document.getElementById('f-exec_error').click()")
    browser.evaluate("document.querySelector('#trajectories details.traj').open = true")
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    assert browser.evaluate("document.querySelectorAll('details.traj[open] pre.code span.hl-kw').length") > 0
    assert browser.evaluate("document.querySelectorAll('details.traj[open] pre.code span.hl-com').length") > 0
    assert browser.evaluate("document.querySelectorAll('details.traj[open] pre.output').length") > 0
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 2600, "deviceScaleFactor": 1, "mobile": False},
    )
    browser.evaluate("document.getElementById('viewer').scrollIntoView()")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-viewer.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000
