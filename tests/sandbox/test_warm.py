"""Sessions started ahead of need (`SandboxConfig.warm_sessions`): a session that gets one cannot
tell it from a fresh one, the pool stays within the caps, refills, never hands out a dead process,
and closes with its Sandbox."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from thinc_bench.errors import ConfigError, SandboxUnavailable
from thinc_bench.sandbox import Sandbox, SandboxConfig, pool

WAIT_S = 60.0


def _server(sb: Sandbox) -> psutil.Process:
    """The fork-server process (the jail's bwrap, when there is one, is its parent)."""
    assert sb._server is not None
    launched = psutil.Process(sb._server.proc.pid)
    tree = [launched, *launched.children(recursive=True)]
    return next(p for p in tree if p.name().startswith("python"))


def _session_processes(sb: Sandbox) -> list[psutil.Process]:
    """Every process of every session, warm or taken (the fork-server's descendants)."""
    return [p for p in _server(sb).children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


def _own(sb: Sandbox) -> int:
    """Processes of one session: its parent A, its reaper R (PID 1 of its namespace, when it has
    one) and its interpreter B."""
    return 3 if sb._current_server().hello.get("namespaces") else 2


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def warm() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(warm_sessions=2, timeout_s=5.0)) as sb:
        assert sb._warm.wait_full(WAIT_S)
        yield sb


def test_a_pooled_session_starts_clean_after_a_session_that_left_state_behind(warm: Sandbox) -> None:
    with warm.session() as s:
        first = s.run("import os\nprint(os.getcwd(), sorted(os.listdir('.')))").output
        s.run(
            "import os, sys, threading, time\nsecret = 41\nos.environ['LEFT'] = '1'\n"
            "open('left.txt', 'w').write('x')\nos.mkdir('sub')\nos.chdir('sub')\nsys.path.insert(0, '/x')\n"
            "threading.Thread(target=lambda: (time.sleep(0.2), print('late')), daemon=True).start()"
        )
    for _ in range(3):  # every ready process of the pool, and one started after that session
        taken = warm.stats.warm_taken
        with warm.session() as s:
            r = s.run(
                "import os, sys\nprint(os.getcwd(), sorted(os.listdir('.')))\n"
                "print('secret' in globals(), os.environ.get('LEFT'), '/x' in sys.path)"
            )
            assert r.status == "ok" and r.output == first + "False None False\n"
            assert r.notice == "" and r.between_runs == ""
            assert s.run("import time\ntime.sleep(0.3)").between_runs == ""
        assert warm.stats.warm_taken == taken + 1


def test_the_pool_refills_and_zero_turns_it_off() -> None:
    with Sandbox(SandboxConfig(warm_sessions=3)) as sb:
        assert sb._warm.wait_full(WAIT_S) and sb._warm.ready_count() == 3
        sessions = [sb.session() for _ in range(2)]
        for s in sessions:
            assert s.run("print(1)").output == "1\n"
        assert sb._warm.wait_full(WAIT_S) and sb._warm.ready_count() == 3
        assert sb.stats.warm_started == 5 and sb.stats.warm_taken == 2
        for s in sessions:
            s.close()
    with Sandbox(SandboxConfig(warm_sessions=0)) as sb, sb.session() as s:
        assert s.run("print(2)").output == "2\n"
        assert sb.stats.warm_started == 0 and len(_session_processes(sb)) <= _own(sb)  # s's own


def test_sessions_and_warm_processes_together_stay_within_max_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool, "POOL_WAIT_S", 0.3)
    with Sandbox(SandboxConfig(max_sessions=3, warm_sessions=8)) as sb:
        assert sb._warm.wait_full(WAIT_S)
        assert sb._current_server().request({"op": "ping"})["sessions"] == 3
        held = [sb.session() for _ in range(3)]  # each takes a ready process and its place
        for s in held:
            assert s.run("x = 1").status == "ok"
        assert sb._current_server().request({"op": "ping"})["sessions"] == 3
        with pytest.raises(SandboxUnavailable, match="max_sessions"):
            sb.session()
        held.pop().close()
        assert sb._warm.wait_full(WAIT_S)
        assert sb._current_server().request({"op": "ping"})["sessions"] == 3  # 2 sessions + 1 ready
        for s in held:
            s.close()


def test_a_warm_process_that_died_while_waiting_is_replaced_not_handed_out(warm: Sandbox) -> None:
    victims = _session_processes(warm)
    assert len(victims) == 2 * _own(warm)  # two ready sessions, each with its own processes
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):  # an interpreter may die with its parent first
            proc.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + WAIT_S  # dead = gone or a zombie (the server reaps A on request)
    while any(_alive(p) for p in victims) and time.monotonic() < deadline:
        time.sleep(0.01)
    with warm.session() as s:
        r = s.run("print('fine')")
    assert r.status == "ok" and r.transcript == "fine\n"  # no restart notice: it is a fresh session
    stats = warm.stats
    assert stats.warm_discarded >= 1 and stats.sessions_died == 0


def test_ready_processes_of_a_dead_server_are_never_handed_out(warm: Sandbox) -> None:
    _server(warm).send_signal(signal.SIGKILL)
    warm._server.proc.wait(10)  # type: ignore[union-attr]
    with warm.session() as s:
        r = s.run("print('new server')")
    assert r.status == "ok" and r.transcript == "new server\n"
    assert warm.stats.server_starts == 2 and warm.stats.warm_discarded >= 2


def test_injected_failures_are_the_session_s_own_not_the_process_s(warm: Sandbox) -> None:
    with warm.session(inject_failures=2) as s:
        results = [s.run("print('ran')") for _ in range(3)]
    assert [r.injected for r in results] == [True, True, False]
    assert results[2].output == "ran\n" and results[0].status == "error"
    with warm.session() as s:  # a pooled process after a session with injections: none here
        assert not s.run("print('ran')").injected
    with warm.session(inject_failures=1) as s:
        assert s.run("1").injected and s.run("print(3)").output == "3\n"
    assert warm.stats.injected_failures == 3


def test_closing_the_sandbox_ends_every_warm_process() -> None:
    sb = Sandbox(SandboxConfig(warm_sessions=3)).start()
    assert sb._warm.wait_full(WAIT_S)
    s = sb.session()
    s.run("x = 1")
    assert sb._warm.wait_full(WAIT_S)
    procs = [_server(sb), *_session_processes(sb)]
    assert len(procs) == 1 + _own(sb) * 4  # the server; three ready and one taken
    sb.close()
    _gone, alive = psutil.wait_procs(procs, timeout=0)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []  # gone when close() returns
    assert sb._warm.ready_count() == 0


def test_a_negative_pool_size_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="warm_sessions"):
        SandboxConfig(warm_sessions=-1)


def test_no_process_is_started_ahead_of_need_near_the_memory_cap_of_all_sessions() -> None:
    with Sandbox(SandboxConfig(warm_sessions=2, total_memory_mb=400)) as sb:
        if "memory" not in sb._current_server().launch.groups.paths:
            pytest.skip("no memory cgroup here (needs root)")
        assert sb._warm.wait_full(WAIT_S)
        with sb.session() as hog, sb.session() as other:
            assert hog.run("import numpy as np\nhog = np.ones(45 * 2**20)").status == "ok"  # 360 MiB
            assert sb._warm.wait_full(WAIT_S) and sb._warm.ready_count() == 2
            with sb.session() as late:  # takes a ready process; the refill must wait for room
                assert late.run("print(1)").output == "1\n"
                time.sleep(1.0)
                assert sb._warm.ready_count() == 1
                assert hog.run("del hog").status == "ok"
                assert sb._warm.wait_full(WAIT_S) and sb._warm.ready_count() == 2
            assert other.run("print(2)").output == "2\n"
