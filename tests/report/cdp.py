"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (stdlib only).

Headless Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4;
this drives it without a websocket library or a driver download, so the browser test needs only
Debian's `chromium`. Events are kept in order so a test can read console messages, exceptions and
network requests after the page settles.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

TIMEOUT_S = 30.0  # one CDP reply on a loaded 2-core machine; page loads are far quicker


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    """One headless Chromium with a single page session."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # runs in the child: the pipe ends become fds 3 and 4
            # Move both ends above 4 first: a pipe end may itself be fd 3 or 4.
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [
                executable,
                "--headless=new",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1280,900",
                "about:blank",
            ],
            # close_fds=False: the dup2'd fds 3 and 4 must survive exec; os.pipe's own fds are
            # non-inheritable, so nothing else leaks into the browser.
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no message from chromium within the timeout")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, *, browser_level: bool = False) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not browser_level:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser_level=True)["targetId"]
        self.session = self.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, browser_level=True
        )["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")

    def navigate(self, url: str, settle_s: float = 1.0) -> None:
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))
        self.evaluate(f"new Promise(r => setTimeout(r, {int(settle_s * 1000)}))")

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        import base64

        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", browser_level=True)
        except (RuntimeError, TimeoutError, OSError):
            pass  # already gone; the kill below still reaps it
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            os.close(self._to_browser)
            os.close(self._from_browser)
