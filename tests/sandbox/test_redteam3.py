"""The red-team findings of issue 27, one test each (the attack first, then what must hold):
nothing a session starts outlives it, no channel to kernel objects outside it, and no status or
output that one run's code can forge for another run.

Every attack is bounded (short timeouts, small caps) so that it cannot hurt a shared machine even
against a sandbox without the protection.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.sandbox import Sandbox, SandboxConfig, _jail

CLEAR_PDEATHSIG = "import ctypes\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"


@pytest.fixture
def tag() -> str:
    """A 15-character process name (the kernel's limit) that a cell gives its own process."""
    return "t" + uuid.uuid4().hex[:14]


def _rename(tag: str) -> str:
    """Python source naming the calling process `tag` (PR_SET_NAME), so the host can find it."""
    return f"import ctypes\nctypes.CDLL(None).prctl(15, {tag.encode()!r}, 0, 0, 0)\n"


def _named(tag: str) -> list[psutil.Process]:
    """Host processes whose kernel name is `tag` (a zombie already counts as gone)."""
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        if proc.info.get("name") == tag and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _spinner(tag: str) -> str:
    """A child process named `tag` that clears its parent-death signal, leaves the session's process
    group and spins; the cell returns once it runs."""
    child = _rename(tag) + CLEAR_PDEATHSIG + "print('up', flush=True)\nwhile True:\n    pass\n"
    return (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}], start_new_session=True, stdout=subprocess.PIPE)\n"
        "assert p.stdout.readline() == b'up\\n'\n"
    )


@pytest.fixture(params=["namespaces", "no-namespaces"])
def any_sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """A sandbox with per-session namespaces, and one without (the degraded path keeps the rule)."""
    if request.param == "no-namespaces":
        monkeypatch.setenv(_jail.NO_NAMESPACES_ENV, "1")
    with Sandbox(SandboxConfig(timeout_s=5.0)) as sb:
        yield sb


# 1 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("end", ["close", "timeout"])
def test_an_interpreter_that_clears_its_parent_death_signal_dies_with_its_session(
    sandbox: Sandbox, tag: str, end: str
) -> None:
    with sandbox.session() as s:
        if end == "close":
            assert (
                s.run(
                    _rename(tag) + CLEAR_PDEATHSIG + "import os, time\nos._exit = lambda *a: time.sleep(1000)"
                ).status
                == "ok"
            )
            assert len(_named(tag)) == 1
        else:
            r = s.run(_rename(tag) + CLEAR_PDEATHSIG + "while True:\n    pass", timeout=1.0)
            assert r.status == "timeout"
            assert not _named(tag)  # gone when run() returns, not later
    assert not _named(tag)  # gone when close() returns


def test_children_that_leave_the_process_group_die_before_close_returns(
    any_sandbox: Sandbox, tag: str
) -> None:
    with any_sandbox.session() as s:
        assert s.run(_spinner(tag)).status == "ok"
        assert len(_named(tag)) == 1
    assert not _named(tag)
    assert any_sandbox.stats.survivors >= 1  # counted, not silent


def test_a_session_that_died_leaves_no_process_behind(any_sandbox: Sandbox, tag: str) -> None:
    with any_sandbox.session() as s:
        r = s.run(_spinner(tag) + "import os\nos._exit(3)")
        assert r.status == "killed"
        assert not _named(tag)
        # With a PID namespace the kernel killed it with the interpreter; without one, the sweep did.
        pid_namespace = any("PID namespace" in name for name in any_sandbox.protections[0])
        assert s.survivors >= (0 if pid_namespace else 1)


def test_processes_of_a_closed_sandbox_are_gone_when_close_returns(tag: str) -> None:
    with Sandbox(SandboxConfig()) as sb:
        s = sb.session()
        assert s.run(_rename(tag) + CLEAR_PDEATHSIG + "x = 1").status == "ok"
    assert not _named(tag)


def test_a_trajectory_process_is_gone_when_the_next_trajectory_runs(
    two_problem_benchmark: Path, tmp_path: Path, tag: str
) -> None:
    """Through `python -m thinc_bench.eval --backend scripted`: tiny-1's block leaves its interpreter
    and a child spinning (parent-death signal cleared, os._exit blocking); both must be gone once
    tiny-1's record is written, while tiny-2 runs, and config.json counts the child."""
    leave = (
        _spinner(tag)
        + _rename(tag)
        + CLEAR_PDEATHSIG
        + "os._exit = lambda *a: time.sleep(1000)\ntime.sleep(0.5)\nprint(5)"
    )
    leave = "import os, time\n" + leave

    def turn(code: str) -> str:
        return f"<think>\nrun it\n</think>\n```python\n{code}\n```\n```output"

    turns = tmp_path / "turns.jsonl"
    rows = [
        {"problem_id": "tiny-1", "turns": [turn(leave), "\\boxed{5}"]},
        {"problem_id": "tiny-2", "turns": [turn("import time\ntime.sleep(1.0)\nprint(5)"), "\\boxed{5}"]},
    ]
    turns.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "run"
    seen: dict[str, int] = {"alive": 0, "after": 0}
    stop = threading.Event()

    def watch() -> None:
        samples = out / "samples.jsonl"
        while not stop.is_set():
            first_done = samples.exists() and '"tiny-1"' in samples.read_text()
            if _named(tag):
                seen["after" if first_done else "alive"] += 1
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        args = ["--backend", "scripted", "--model", str(turns), "--benchmarks", str(two_problem_benchmark)]
        assert thinc_eval.main([*args, "--out", str(out), "--samples", "1", "--concurrency", "1"]) == 0
    finally:
        stop.set()
        watcher.join()
    assert seen["alive"] > 0 and seen["after"] == 0
    config = json.loads((out / "config.json").read_text())
    assert config["resolved"]["sandbox"]["survivors"] >= 1
