"""Adversarial limits: each test attacks one bound and checks the harness stays healthy."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session

# A killed run returns at the timeout plus the kill; 1.5 s of slack absorbs a loaded 2-core CI box.
KILL_SLACK_S = 1.5
# A spinning run is charged its time less the host's load (`_clock`): on a busy box its wall-clock
# time may reach the backstop (6x the limit by default), never more.
BACKSTOP_FACTOR = 6.0


def test_infinite_loop_is_killed_within_the_bound(session: Session) -> None:
    r = session.run("while True:\n    pass", timeout=1.0)
    assert r.status == "timeout" and 1.0 <= r.elapsed_s < BACKSTOP_FACTOR * 1.0 + KILL_SLACK_S


def test_sigterm_ignoring_loop_is_still_killed(session: Session) -> None:
    code = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass"
    r = session.run(code, timeout=1.0)
    assert r.status == "timeout" and 1.0 <= r.elapsed_s < BACKSTOP_FACTOR * 1.0 + KILL_SLACK_S


def test_sleeping_code_is_killed_by_wall_clock(session: Session) -> None:
    r = session.run("import time; time.sleep(100)", timeout=0.5)
    assert r.status == "timeout" and r.elapsed_s < 0.5 + KILL_SLACK_S


def test_memory_bomb_is_stopped_with_memory_status(session: Session) -> None:
    r = session.run("x = bytearray(60 * 2**30)")
    assert r.status == "memory" and "MemoryError" in r.output


def test_numpy_memory_bomb_is_stopped(session: Session) -> None:
    r = session.run("import numpy as np\nnp.ones((100000, 100000))")
    assert r.status == "memory"


def test_8gb_file_write_is_refused(session: Session) -> None:
    code = "chunk = b'0' * 2**20\nwith open('big.bin', 'wb') as f:\n    for _ in range(8 * 1024):\n        f.write(chunk)"
    r = session.run(code)
    assert r.status == "error" and "File too large" in r.output


def test_scratch_is_size_limited() -> None:
    with Sandbox(SandboxConfig(scratch_mb=8, file_size_mb=4)) as sb, sb.session() as s:
        code = "chunk = b'0' * 2**20\nfor i in range(16):\n    open(f'f{i}', 'wb').write(chunk * 3)"
        r = s.run(code)
    assert r.status == "error" and "No space left on device" in r.output


def test_deep_recursion_is_contained(session: Session) -> None:
    # Recursion through C (repr of a deeply nested list) with the guard lifted overflows the C stack.
    code = "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6):\n    x = [x]\nrepr(x)"
    r = session.run(code, timeout=5.0)
    assert r.status in ("error", "killed", "memory")
    assert session.run("print('next')").output.endswith("next\n")


def test_plain_recursion_error_is_an_error(session: Session) -> None:
    r = session.run("def f(n):\n    return f(n + 1)\nf(0)")
    assert r.status == "error" and "RecursionError" in r.output


def test_segfault_is_reported_as_killed(session: Session) -> None:
    r = session.run("import ctypes\nctypes.string_at(0)")
    assert r.status == "killed" and "SIGSEGV" in r.transcript


def test_sys_exit_ends_the_cell_but_keeps_state(session: Session) -> None:
    session.run("kept = 5")
    r = session.run("import sys\nsys.exit(2)")
    assert r.status == "error" and "SystemExit: 2" in r.output
    assert session.run("kept").output == "5\n"


def test_os_exit_is_contained(session: Session) -> None:
    r = session.run("import os\nos._exit(0)")
    assert r.status == "killed"


def test_input_gets_eof_instead_of_hanging(session: Session) -> None:
    r = session.run("input('number? ')")
    assert r.status == "error" and "EOFError" in r.output and r.elapsed_s < 1.0


def test_non_daemon_thread_does_not_block_the_run(session: Session) -> None:
    r = session.run(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(1000,)).start()\nprint('back')"
    )
    assert r.status == "ok" and r.output == "back\n" and r.elapsed_s < 1.0


def test_output_flood_is_bounded(session: Session) -> None:
    r = session.run("while True:\n    print('x' * 1000)", timeout=1.0)
    assert r.status == "timeout" and r.truncated and len(r.output) < 20000


def test_process_count_is_limited() -> None:
    code = (
        "import subprocess\nprocs = []\ntry:\n    for _ in range(40):\n"
        "        procs.append(subprocess.Popen(['sleep', '30']))\nexcept OSError as e:\n    print('refused', len(procs))"
    )
    with Sandbox(SandboxConfig(max_processes=10)) as sb, sb.session() as s:
        r = s.run(code)
    assert r.output.startswith("refused") and int(r.output.split()[1]) < 10


def test_fork_and_subprocess_children_die_when_session_closes(
    sandbox: Sandbox, token: str, sleeper: str, host_processes: Callable[[str], list[psutil.Process]]
) -> None:
    code = f"import os, subprocess\nsubprocess.Popen({sleeper})\nif os.fork() == 0:\n    os.execvp('python3', {sleeper})"
    with sandbox.session() as s:
        r = s.run(code)
        # Killed (through the session's pids cgroup) before the run's result came back, and counted.
        assert r.status == "ok" and "left 2 process(es) running" in r.notice_after, r
        assert not host_processes(token)
    assert not host_processes(token)


def test_setsid_double_fork_daemon_dies_when_session_closes(
    sandbox: Sandbox, token: str, sleeper: str, host_processes: Callable[[str], list[psutil.Process]]
) -> None:
    code = (
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execvp('python3', {sleeper})\n    os._exit(0)"
    )
    with sandbox.session() as s:
        r = s.run(code)
        assert r.status == "ok" and "process(es) running" in r.notice_after, r
        assert not host_processes(token)
    assert not host_processes(token)


def test_children_die_when_run_times_out(
    session: Session, token: str, sleeper: str, host_processes: Callable[[str], list[psutil.Process]]
) -> None:
    code = f"import subprocess, time\nsubprocess.Popen({sleeper})\ntime.sleep(100)"
    assert session.run(code, timeout=1.0).status == "timeout"
    assert _wait_for(lambda: not host_processes(token))


def test_killing_parent_and_process_group_leaves_harness_alive(session: Session, sandbox: Sandbox) -> None:
    session.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    session.run("import os, signal\nos.killpg(0, signal.SIGKILL)")
    session.run("import os, signal\nos.kill(-1, signal.SIGKILL)")
    assert os.getpid() > 0 and sandbox.stats.server_starts == 1
    with sandbox.session() as other:
        assert other.run("1 + 1").output == "2\n"


def test_no_host_file_is_written(session: Session, token: str, tmp_path: Path) -> None:
    targets = [Path("/tmp") / token, Path.home() / token, Path.cwd() / token, tmp_path / token]
    code = "\n".join(
        f"try:\n    open({str(t)!r}, 'w').write('x')\nexcept OSError:\n    pass" for t in targets
    )
    assert session.run(code).status == "ok"
    assert [t for t in targets if t.exists()] == []


def _wait_for(condition: object, seconds: float = 5.0) -> bool:
    import time

    assert callable(condition)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def test_sessions_together_cannot_pass_the_sandbox_memory_cap() -> None:
    """Each session stays under its own limits; together they pass the total cap of all sessions."""
    from thinc_bench.sandbox.runtime import _cgroups

    config = SandboxConfig(total_memory_mb=400)
    with Sandbox(config) as sandbox:
        groups = sandbox._current_server().launch.groups
        if "memory" not in groups.paths:
            assert os.geteuid() != 0 or not (_cgroups.ROOT / "memory").is_dir()  # only root gets the cap
            return
        top = Path(groups.paths["memory"])
        assert top.parent == _cgroups.own_group("memory")  # nested: the harness's limits still bind
        assert int((top / "sessions" / "memory.limit_in_bytes").read_text()) == 400 * 2**20
        with sandbox.session() as first, sandbox.session() as second:
            for s, name in ((first, "x"), (second, "y")):
                s.run(f"{name} = b'1' * (250 * 2**20)")  # resident, not just reserved
            kept = [s.run(f"len({name})") for s, name in ((first, "x"), (second, "y"))]
        # The kernel killed one session's process (its state is gone, and it says so); the other kept its data.
        assert sorted(r.transcript.startswith("[sandbox] session restarted") for r in kept) == [False, True]
        assert any(r.output == f"{250 * 2**20}\n" for r in kept)
        with sandbox.session() as after:
            assert after.run("1 + 1").output == "2\n"  # the sandbox itself is unharmed
        assert sandbox.stats.server_starts == 1  # the fork-server sits outside the sessions' cap
    assert not top.exists()  # removed with the sandbox


def test_a_session_cpu_quota_above_the_enclosing_groups_quota_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a container allowed half a core, a one-core session quota is refused by the kernel; the
    container's quota then binds instead, and sessions still start."""
    from thinc_bench.sandbox.runtime import _cgroups

    real = _cgroups._configure

    def half_a_core(controller: str, path: Path, total_memory_mb: int) -> None:
        real(controller, path, total_memory_mb)
        if controller == "cpu":
            _cgroups.write(str(path), "cpu.cfs_quota_us", 50_000)

    monkeypatch.setattr(_cgroups, "_configure", half_a_core)
    with Sandbox(SandboxConfig(cpus_per_session=1.0)) as sb, sb.session() as s:
        if "cpu" not in sb._current_server().launch.groups.paths:
            pytest.skip("no cpu cgroup here (not root, or not cgroup v1)")
        assert s.run("print('runs')").output == "runs\n"
