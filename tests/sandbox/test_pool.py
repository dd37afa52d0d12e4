"""The pool: concurrency from threads, infra errors retried once and counted, closing."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import Sandbox, SandboxConfig, _jail
from thinc_bench.sandbox.runtime import _cgroups


def _kill_server_and_wait(sb: Sandbox) -> None:
    """SIGKILL the fork-server (as a crash would) and wait until every process of the jail is gone.

    The warm pool is full first, so that the crash meets the session's own run, not a refill."""
    assert sb._warm.wait_full(60)
    assert sb._server is not None
    root = psutil.Process(sb._server.proc.pid)
    tree = [root, *root.children(recursive=True)]
    # Session processes are forks of the server (same command line); the server's parent is not one.
    server = [p for p in tree if p.name().startswith("python") and not p.parent().name().startswith("python")]
    assert len(server) == 1
    server[0].send_signal(signal.SIGKILL)
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == []


def test_64_concurrent_sessions_are_all_correct(sandbox: Sandbox) -> None:
    def work(i: int) -> str:
        with sandbox.session() as s:
            s.run(f"import sympy\nn = sympy.Integer({i})")
            return s.run("print(n ** 2)").output

    with ThreadPoolExecutor(64) as pool:
        outputs = list(pool.map(work, range(64)))
    assert outputs == [f"{i * i}\n" for i in range(64)]


def test_server_death_is_retried_once_and_counted() -> None:
    with Sandbox() as sb, sb.session() as s:
        s.run("x = 1")
        _kill_server_and_wait(sb)
        r = s.run("print('after')")
        stats = sb.stats
    assert r.status == "ok" and r.transcript.endswith("after\n") and "session restarted" in r.transcript
    assert stats.server_starts == 2 and stats.infra_errors == 1 and stats.infra_retries == 1


def test_persistent_infra_failure_is_infra_error_not_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with Sandbox() as sb, sb.session() as s:
        s.run("1")
        _kill_server_and_wait(sb)
        real = _jail.plan_launch

        def broken(config: SandboxConfig, ctrl_fd: int) -> _jail.Launch:
            launch = real(config, ctrl_fd)
            return dataclasses.replace(launch, argv=[*launch.argv, "--no-such-flag"], bwrap_problem=None)

        monkeypatch.setattr(_jail, "plan_launch", broken)
        r = s.run("print('never')")
        stats = sb.stats
    assert r.status == "infra_error" and "never" not in r.transcript
    assert stats.infra_errors == 2 and stats.infra_retries == 1


def test_user_code_failure_is_not_retried(sandbox: Sandbox) -> None:
    before = sandbox.stats
    with sandbox.session() as s:
        s.run("import os\nos._exit(1)")
    after = sandbox.stats
    assert after.infra_retries == before.infra_retries and after.sessions_died == before.sessions_died + 1


def test_closed_session_refuses_to_run(sandbox: Sandbox) -> None:
    s = sandbox.session()
    s.close()
    with pytest.raises(SandboxUnavailable):
        s.run("1")


def test_closing_the_sandbox_ends_its_server() -> None:
    sb = Sandbox().start()
    assert sb._server is not None
    proc = sb._server.proc
    sb.close()
    assert proc.poll() is not None


def test_a_new_sandbox_removes_groups_left_by_a_killed_harness() -> None:
    """A harness killed with SIGKILL cannot remove its cgroups; the next Sandbox does."""
    parents = [_cgroups.own_group(c) for c in ("pids", "memory")]
    if not all(os.access(p, os.W_OK) for p in parents):
        pytest.skip("cgroups need root")
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is free now: the groups below belong to nobody
    stale = [parents[0] / f"thinc-sandbox-{dead.pid}-0", parents[1] / f"thinc-sandbox-{dead.pid}-0"]
    (stale[0] / "s1").mkdir(parents=True)
    (stale[1] / "sessions" / "s1").mkdir(parents=True)
    with Sandbox():
        assert not any(p.exists() for p in stale)
