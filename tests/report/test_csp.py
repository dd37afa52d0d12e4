"""The report's Content-Security-Policy forbids inline script (issue 52): the viewer, the page's one
script, runs because the policy names its hash; anything an escaping slip might let into the page
(a `<script>`, an `onerror=` handler) is refused by the browser.

The first test reads the policy and the page; the second loads a page with injected script into
real headless Chromium (Debian's, as test_browser.py; skipped without it, failed in CI).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from report.synthetic import synthetic_run
from thinc_bench.report import write_comparison

CSP = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)  # an executable script: no type


def _page(tmp_path: Path) -> Path:
    run = synthetic_run(tmp_path / "run", model="org/m", samples=2, sizes={"aime2025": 3})
    return write_comparison([run], tmp_path / "report.html")


def _directives(html: str) -> dict[str, list[str]]:
    match = CSP.search(html)
    assert match, "the page has no Content-Security-Policy"
    out = {}
    for part in match.group(1).split(";"):
        name, *sources = part.split()
        out[name] = sources
    return out


def test_the_policy_allows_the_viewer_by_hash_and_no_other_inline_script(tmp_path: Path) -> None:
    html = _page(tmp_path).read_text()
    policy = _directives(html)
    scripts = INLINE_SCRIPT.findall(html)
    assert len(scripts) == 1  # the viewer; the data block is application/gzip+base64, never run
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert policy["script-src"] == [f"'sha256-{digest}'"]
    assert "'unsafe-inline'" not in policy["script-src"] and policy["default-src"] == ["'none'"]
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handler: a hash cannot allow one
    assert "javascript:" not in html.lower()


@pytest.fixture(scope="module")
def chromium():
    executable = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if executable is None:
        message = "chromium not found: install it with `apt-get install -y chromium` (Debian; .ci/run does)"
        if os.environ.get("THINC_CI"):
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def test_script_injected_into_the_page_does_not_run_and_the_viewer_does(chromium, tmp_path: Path) -> None:
    page_file = _page(tmp_path)
    injected = (
        "<script>window.pwnedScript = 1</script>"
        '<img src="data:," onerror="window.pwnedHandler = 1">'
        '<a id="pwn" href="javascript:window.pwnedLink = 1">x</a>'
    )
    html = page_file.read_text().replace("<h2>Trajectories</h2>", "<h2>Trajectories</h2>" + injected, 1)
    page_file.write_text(html)
    page = chromium.new_page()
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(page_file.resolve().as_uri(), wait_until="load")
    page.wait_for_function("document.querySelectorAll('#trajectories details.traj').length > 0")
    page.click("#pwn")
    assert page.evaluate("[window.pwnedScript, window.pwnedHandler, window.pwnedLink]") == [None, None, None]
    assert violations  # the browser says it refused them
    page.close()
