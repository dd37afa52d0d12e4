"""The red-team findings of issue 18, one test each: session code attacks the control channel or a
kernel quota shared with the harness or other sessions, and the harness must stay whole.

Every attack is bounded (small caps, short timeouts) so that it cannot hurt a shared machine even
against a sandbox without the protection. Parts that need root (cgroups, uids) skip when not root.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session, _jail

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups and per-session uids need root")


def _harness_fds() -> list[str]:
    """What this (the harness) process holds open, as /proc shows each descriptor."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the descriptor listdir itself used
            continue
    return links


def _frame(obj: object) -> str:
    """Python source writing one well-formed control frame carrying `obj` on fd 3."""
    return (
        f"import os\nbody = {json.dumps(obj).encode()!r}\nos.write(3, len(body).to_bytes(4, 'big') + body)\n"
    )


def _group_or_skip(sandbox: Sandbox, controller: str) -> None:
    groups = sandbox._current_server().launch.groups
    if controller not in groups.paths:
        pytest.skip(f"no {controller} cgroup here: {groups.problems.get(controller)}")


# 1 ---------------------------------------------------------------------------------------------
def test_descriptors_sent_on_the_control_socket_are_not_kept(session: Session) -> None:
    code = (
        "import os, socket\ns = socket.socket(fileno=os.dup(3))\nr, w = os.pipe()\n"
        "pins = [os.memfd_create('pin') for _ in range(4)]\n"
        "for m in pins:\n    os.write(m, b'x' * (8 * 2**20))\n"
        "try:\n    for _ in range(400):\n        socket.send_fds(s, [b'\\0'], [r, w, *pins])\n"
        "except OSError:\n    pass"
    )
    warm = session._sandbox._warm  # its processes' descriptors are the harness's: count a full pool
    session.run("1")
    assert warm.wait_full(60)
    before = len(_harness_fds())
    r = session.run(code, timeout=5.0)
    after = session.run("print('still works')")
    assert r.status == "killed" and "control channel" in r.transcript
    assert after.status == "ok" and after.output.endswith("still works\n")
    assert warm.wait_full(60)
    links = _harness_fds()
    assert len(links) <= before and not [link for link in links if "memfd:pin" in link]


# 2 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "garbage",
    [b"\x00\x00\x00\x02{x", b"\xff\xff\xff\xff", b"\x00\x00\x0f\xa0" + b"[" * 4000],
    ids=["bad-json", "huge-length", "nested-json"],
)
def test_garbage_on_the_control_channel_kills_only_the_session(
    sandbox: Sandbox, session: Session, garbage: bytes
) -> None:
    starts = sandbox.stats.server_starts
    session.run("kept = 1")
    r = session.run(f"import os\nos.write(3, {garbage!r})\nimport time\ntime.sleep(5)", timeout=10.0)
    assert r.status == "killed" and "control channel" in r.transcript and r.elapsed_s < 5.0
    after = session.run("print(kept)")
    assert after.status == "error" and "NameError" in after.output  # a fresh interpreter, said so
    assert "control channel" in after.transcript
    assert session.run("print('ok')").output == "ok\n"
    assert sandbox.stats.server_starts == starts


# 3 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("then", ["raise ValueError('boom')", "import time\ntime.sleep(30)"])
def test_a_forged_done_frame_cannot_shift_results(session: Session, then: str) -> None:
    r1 = session.run(_frame({"op": "done", "status": "ok"}) + then, timeout=5.0)
    r2 = session.run("print('two')")
    r3 = session.run("print('three')")
    assert r1.status == "killed" and "control channel" in r1.transcript and r1.elapsed_s < 5.0
    assert r2.status == "ok" and r2.output.endswith("two\n") and "boom" not in r2.output
    assert r3.status == "ok" and r3.output == "three\n"


def test_a_done_frame_with_the_stolen_nonce_cannot_shift_later_results(session: Session) -> None:
    """A cell can read the run's nonce out of the loop's frame and lie about its own run; the loop's
    real "done" then arrives as a surplus frame, and the session is killed rather than believed."""
    dig = (
        "import sys\nf = sys._getframe()\nwhile 'nonce' not in f.f_locals:\n    f = f.f_back\n"
        "import json, os\nbody = json.dumps({'op': 'done', 'status': 'ok', 'nonce': f.f_locals['nonce']})"
        ".encode()\nos.write(3, len(body).to_bytes(4, 'big') + body)\nraise ValueError('boom')"
    )
    r1 = session.run(dig)
    r2 = session.run("print('two')")
    r3 = session.run("print('three')")
    assert r1.status in ("ok", "killed")  # its own result only: the lie, or caught in the act
    # The surplus frame is found before the next run (a fresh session runs it) or during it (it is
    # killed, with the liar's late output): never is the next run handed the previous one's result.
    assert r2.status == "killed" or (r2.status == "ok" and r2.output.endswith("two\n"))
    assert r3.status == "ok" and r3.output.endswith("three\n")


# 4 ---------------------------------------------------------------------------------------------
def test_a_frame_flood_is_cut_off_at_the_first_frame(session: Session) -> None:
    flood = "import os\nchunk = ((2).to_bytes(4, 'big') + b'{}') * 8192\nfor _ in range(1500):\n    os.write(3, chunk)"
    session.run("1")
    me = psutil.Process()
    base, peak, done = me.memory_info().rss, [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], me.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        r = session.run(flood, timeout=5.0)  # 72 MiB of two-byte frames
    finally:
        done.set()
        sampler.join()
    assert r.status == "killed" and "control channel" in r.transcript and r.elapsed_s < 5.0
    assert peak[0] - base < 16 * 2**20


# 5 ---------------------------------------------------------------------------------------------
@needs_root
def test_hidden_memory_is_charged_to_the_session_that_holds_it() -> None:
    """memfd pages show in no process's RSS; they fill the attacker's own memory group, so the
    kernel kills inside that session, not the fork-server or a bystander."""
    config = SandboxConfig(session_memory_mb=160, total_memory_mb=1024)
    fill = (  # 384 MiB in eight memfds (each under the 64 MiB file-size limit)
        "import os\nchunk = b'x' * 2**20\nfds = [os.memfd_create('hidden') for _ in range(8)]\n"
        "for fd in fds:\n    for _ in range(48):\n        os.write(fd, chunk)\nprint('never')"
    )
    with Sandbox(config) as sb, sb.session() as bystander, sb.session() as attacker:
        _group_or_skip(sb, "memory")
        bystander.run("kept = 41")
        r = attacker.run(fill, timeout=20.0)
        assert r.status == "memory" and "out-of-memory killer" in r.transcript and "never" not in r.transcript
        assert "session_memory_mb=160" in r.transcript
        assert bystander.run("kept + 1").output == "42\n"
        assert attacker.run("print('fresh')").output.endswith("fresh\n")
        stats = sb.stats
    assert stats.server_starts == 1 and stats.infra_errors == 0


# 6 ---------------------------------------------------------------------------------------------
@needs_root
def test_sessions_run_as_their_own_unprivileged_host_uid(
    sandbox: Sandbox, token: str, sleeper: str, host_processes: Callable[[str], list[psutil.Process]]
) -> None:
    # Each cell waits for its child, which the test kills once it has read the uids from the host.
    wait = "import subprocess\nsubprocess.Popen({argv}).wait()"
    with sandbox.session() as a, sandbox.session() as b, ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(s.run, wait.format(argv=f"{sleeper[:-1]}, '{tag}']"))
            for s, tag in ((a, "a"), (b, "b"))
        ]
        assert _wait_for(lambda: len(host_processes(token)) == 2)
        uids = {p.cmdline()[-1]: p.uids().real for p in host_processes(token)}
        for p in host_processes(token):
            p.kill()
        assert [r.result().status for r in runs] == ["ok", "ok"]
    assert uids["a"] != uids["b"] and min(uids.values()) >= 1000 and os.getuid() not in uids.values()


@needs_root
def test_a_session_cannot_take_the_harness_users_inotify_quota(session: Session) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nheld = []\n"
        "while len(held) < 250:\n    fd = libc.inotify_init1(0)\n    if fd < 0:\n        break\n    held.append(fd)\n"
        "print(len(held))"
    )
    r = session.run(code)
    fd = libc.inotify_init1(0)  # while the session holds every instance its uid may have
    try:
        assert fd >= 0, f"the harness lost its inotify quota: {os.strerror(ctypes.get_errno())}"
    finally:
        if fd >= 0:
            os.close(fd)
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    assert r.status == "ok" and int(r.output) <= limit


@needs_root
def test_root_only_files_in_bound_paths_are_unreadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_distribution: Callable[[Path, dict[str, str]], str]
) -> None:
    if _jail.bwrap_problem() is not None:
        pytest.skip(f"bubblewrap unavailable here: {_jail.bwrap_problem()}")
    name = fake_distribution(tmp_path, {"public.txt": "public", "secret.txt": "root only"})
    (tmp_path / name / "secret.txt").chmod(0o600)
    code = (
        f"import os, {name}\nhere = os.path.dirname({name}.__file__)\n"
        "print(open(os.path.join(here, 'public.txt')).read())\n"
        "try:\n    print(open(os.path.join(here, 'secret.txt')).read())\nexcept OSError as e:\n"
        "    print(type(e).__name__)"
    )
    with Sandbox(SandboxConfig(packages=(name,))) as sb, sb.session() as s:
        r = s.run(code)
    assert r.output == "public\nPermissionError\n"


# 7 ---------------------------------------------------------------------------------------------
def test_terminals_are_private_to_their_session(sandbox: Sandbox) -> None:
    with sandbox.session() as a, sandbox.session() as b:
        name = a.run("import os\nm, s = os.openpty()\nprint(os.ttyname(s))").output.strip()
        assert name.startswith("/dev/pts/")
        r = b.run(
            "import os\nprint(sorted(os.listdir('/dev/pts')))\n"
            f"try:\n    open({name!r}, 'rb')\n    print('opened')\nexcept OSError as e:\n    print(type(e).__name__)"
        )
    assert r.output.startswith("['ptmx']\n") and "opened" not in r.output


def test_one_session_cannot_drain_the_pty_pool(session: Session) -> None:
    code = "import os\nptys = []\ntry:\n    for _ in range(64):\n        ptys.append(os.openpty())\nexcept OSError as e:\n    print('refused after', len(ptys))"
    r = session.run(code)
    assert r.output == f"refused after {SandboxConfig().max_ptys}\n"


# 8 ---------------------------------------------------------------------------------------------
@needs_root
def test_spinners_left_behind_cannot_starve_another_session(
    sandbox: Sandbox, token: str, host_processes: Callable[[str], list[psutil.Process]]
) -> None:
    """Six setsid spinners of a cell that is still running (a run's end now kills them); a
    bystander's busy loop must still get at least half the CPU they get together (one in seven,
    without per-session CPU groups)."""
    _group_or_skip(sandbox, "cpu")
    spin = "import time\nend = time.time() + 8\nwhile time.time() < end:\n    pass"
    leave = (  # the cell waits for its spinners, which the test kills once it has measured
        f"import subprocess\nps = [subprocess.Popen(['python3', '-c', {spin!r}, {token!r}], "
        "start_new_session=True) for _ in range(6)]\n[p.wait() for p in ps]"
    )
    busy = "import time\nt0, w0 = time.process_time(), time.time()\nwhile time.time() - w0 < 1.5:\n    pass\nprint(time.process_time() - t0)"
    with sandbox.session() as attacker, sandbox.session() as bystander:
        bystander.run("1")
        with ThreadPoolExecutor(1) as pool:
            attack = pool.submit(attacker.run, leave, 20.0)
            assert _wait_for(lambda: len(host_processes(token)) == 6)
            spinners = host_processes(token)
            before = sum(sum(p.cpu_times()[:2]) for p in spinners)
            r = bystander.run(busy)
            after = sum(sum(p.cpu_times()[:2]) for p in spinners)
            for p in spinners:
                p.kill()
            assert attack.result().status == "ok"
    assert r.status == "ok" and float(r.output) >= 0.5 * (after - before)


# 9 ---------------------------------------------------------------------------------------------
def test_sigkill_death_is_named_not_mistaken_for_a_setup_failure(caplog: pytest.LogCaptureFixture) -> None:
    """The kernel SIGKILLs a session at its CPU-time limit (as its OOM killer does); the session's
    parent must relay that SIGKILL (signal.signal(SIGKILL) raises), not exit with code 125."""
    spin = "while True:\n    pass"
    with (
        caplog.at_level(logging.WARNING, logger="thinc_bench.sandbox"),
        Sandbox(SandboxConfig(cpu_time_s=1)) as sb,
        sb.session() as s,
    ):
        r = s.run(spin, timeout=30.0)
        s.run("1")
        time.sleep(0.2)  # the server's stderr reaches the log through a thread
    assert r.status == "timeout" and "SIGKILL" in r.transcript and "code 125" not in r.transcript
    assert not [m for m in caplog.messages if "setup failed" in m]


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
