"""The red-team findings of issue 27, one test each (the attack first, then what must hold):
nothing a session starts outlives it, no channel to kernel objects outside it, and no status or
output that one run's code can forge for another run.

Every attack is bounded (short timeouts, small caps) so that it cannot hurt a shared machine even
against a sandbox without the protection.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.sandbox import Sandbox, SandboxConfig, Session, _jail
from thinc_bench.sandbox.runtime import _cgroups, _seccomp

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


@pytest.fixture(params=["namespaces", "no-namespaces", "no-cgroups", "no-cgroups-no-namespaces"])
def any_sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """A sandbox with per-session namespaces, and one without (the degraded path keeps the rule);
    each also without cgroups, as an unprivileged harness runs."""
    if "no-namespaces" in request.param:
        monkeypatch.setenv(_jail.NO_NAMESPACES_ENV, "1")
    if "no-cgroups" in request.param:
        monkeypatch.setenv(_jail.NO_CGROUPS_ENV, "1")
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
        r = s.run(_spinner(tag))
        assert r.status == "ok"
        # With a pids cgroup the run's end already killed it (issue 38) and said so; else close does.
        assert len(_named(tag)) == (0 if "process(es) running" in r.notice_after else 1)
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


# 4 ---------------------------------------------------------------------------------------------
def test_printing_out_of_memory_then_exiting_is_not_a_memory_status(session: Session) -> None:
    r = session.run("print('MemoryError: out of memory; Cannot allocate memory')\nimport os\nos._exit(1)")
    assert r.status == "killed"


@pytest.mark.parametrize(
    "patch",
    [
        "import sys\nsys.modules['thinc_sandbox_runtime._repl'].run_cell = lambda *a, **k: 'ok'",
        "import sys\nw = sys.modules['thinc_sandbox_runtime._wire']\n"
        "w.send_frame = lambda sock, obj, fds=None: sock.sendall(w.encode({**obj, 'status': 'ok'}))",
        "import builtins\nreal = builtins.exec\n"
        "def quiet(*a, **k):\n    try:\n        real(*a, **k)\n    except BaseException:\n        pass\n"
        "builtins.exec = quiet",
        "import os\nreal = os.write\nos.write = lambda fd, b: real(fd, b.replace(b'error', b'ok\"   '))",
    ],
    ids=["run_cell", "send_frame", "builtins.exec", "os.write"],
)
def test_replacing_the_loops_functions_cannot_make_the_next_cell_report_ok(
    session: Session, patch: str
) -> None:
    assert session.run(patch).status == "ok"
    r = session.run("x = 1/0")
    assert r.status == "error" and "ZeroDivisionError" in r.output


# 2, 3 -------------------------------------------------------------------------------------------
def _syscall(name: str, *args: int) -> str:
    """Python source calling one system call by this machine's number and printing errno's name."""
    number = _seccomp.ARCHES[platform.machine()].numbers[name]
    return (
        "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"r = libc.syscall({number}, {', '.join(map(str, args)) or '0'})\n"
        "print(r, errno.errorcode.get(ctypes.get_errno()) if r < 0 else 'allowed')"
    )


def _needs_filter(sandbox: Sandbox) -> None:
    if platform.machine() not in _seccomp.ARCHES:
        pytest.skip(f"no seccomp table for {platform.machine()}")
    assert any(name.startswith("seccomp filter") for name in sandbox.protections[0]), sandbox.protections


@pytest.mark.parametrize(
    ("family", "expected"),
    [("AF_VSOCK", "EAFNOSUPPORT"), ("AF_NETLINK", "EAFNOSUPPORT"), ("AF_PACKET", "EAFNOSUPPORT"),
     ("AF_INET", "allowed"), ("AF_INET6", "allowed"), ("AF_UNIX", "allowed")],
)  # fmt: skip
def test_socket_families_outside_the_namespaces_are_refused(
    sandbox: Sandbox, session: Session, family: str, expected: str
) -> None:
    _needs_filter(sandbox)
    kind = "SOCK_RAW" if family in ("AF_NETLINK", "AF_PACKET") else "SOCK_STREAM"
    code = (
        f"import socket, errno\ntry:\n    socket.socket(socket.{family}, socket.{kind}).close()\n    print('allowed')\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno])"
    )
    assert session.run(code).output.strip() == expected


def test_a_key_in_the_harness_keyring_cannot_be_read(sandbox: Sandbox, session: Session, token: str) -> None:
    _needs_filter(sandbox)
    libc = ctypes.CDLL(None, use_errno=True)
    numbers = _seccomp.ARCHES[platform.machine()].numbers
    secret = token.encode()
    key = libc.syscall(numbers["add_key"], b"user", b"thinc-test", secret, len(secret), -3)  # session keyring
    if key < 0:
        pytest.skip(f"no keyrings on this host: errno {ctypes.get_errno()}")
    try:
        search = "r = libc.syscall({nr}, 10, -3, b'user', b'thinc-test', 0)\n".format(nr=numbers["keyctl"])
        code = (
            "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n" + search +
            "buf = ctypes.create_string_buffer(256)\n"
            f"n = libc.syscall({numbers['keyctl']}, 11, r, buf, 256) if r > 0 else -1\n"
            "print(r, errno.errorcode.get(ctypes.get_errno()), buf.value)"
        )  # fmt: skip
        r = session.run(code)
        assert token not in r.output and "EPERM" in r.output
    finally:
        libc.syscall(numbers["keyctl"], 3, key)  # KEYCTL_REVOKE


@pytest.mark.parametrize(
    "name",
    [
        "keyctl",
        "add_key",
        "ptrace",
        "process_vm_readv",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_uring_setup",
    ],
)
def test_kernel_interfaces_the_namespaces_do_not_cover_are_eperm(
    sandbox: Sandbox, session: Session, name: str
) -> None:
    _needs_filter(sandbox)
    assert session.run(_syscall(name)).output.strip() == "-1 EPERM"


def _run_bpf(prog: bytes, nr: int, arch: int, arg0: int) -> int:
    """A classic-BPF interpreter for the few opcodes a seccomp filter uses (for the other arch)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ins = [struct.unpack("HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code in (0x15, 0x35, 0x45):
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += jt if taken else jf
        elif code == 0x06:
            return int(k)
        else:
            raise AssertionError(f"unknown opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(_seccomp.ARCHES))
def test_the_filter_program_decides_right_on_every_architecture(machine: str) -> None:
    """Run through a small BPF interpreter, so the table of an architecture this machine is not
    (aarch64 on x86_64, say) is checked too."""
    arch = _seccomp.ARCHES[machine]
    prog = _seccomp.program(arch)
    allow, eperm = _seccomp.SECCOMP_RET_ALLOW, _seccomp.SECCOMP_RET_ERRNO | errno.EPERM
    noaf = _seccomp.SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
    for name in _seccomp.REFUSED:
        assert _run_bpf(prog, arch.numbers[name], arch.audit, 0) == eperm, name
    for call in ("socket", "socketpair"):
        for family, want in [
            (1, allow),
            (2, allow),
            (10, allow),
            (40, noaf),
            (16, noaf),
            (17, noaf),
            (1 << 32 | 40, noaf),
        ]:
            assert _run_bpf(prog, arch.numbers[call], arch.audit, family) == want, (call, family)
    assert _run_bpf(prog, arch.numbers["flock"], arch.audit, 0) == _seccomp.SECCOMP_RET_ERRNO | errno.ENOLCK
    assert _run_bpf(prog, 0, arch.audit, 0) == allow  # read / io_setup: everything else passes
    assert _run_bpf(prog, 1, 0x40000003, 0) == eperm  # another ABI (i386) is refused whole
    if arch.x32:
        assert _run_bpf(prog, 0x40000000 + 41, arch.audit, 40) == eperm


FORGER = """import os, sys, threading, time
main = threading.main_thread().ident
def forge():
    seen = None
    while True:
        f = sys._current_frames().get(main)
        while f is not None and 'nonce' not in f.f_locals:
            f = f.f_back
        n = f.f_locals['nonce'] if f is not None else None
        if seen is None:
            seen = n
        elif n != seen:
            body = ('{"op": "done", "status": "ok", "nonce": "%s"}' % n).encode()
            os.write(3, len(body).to_bytes(4, 'big') + body)
            return
        time.sleep(0.001)
threading.Thread(target=forge, daemon=True).start()
"""


def test_a_thread_left_by_one_run_cannot_forge_the_next_runs_result(
    sandbox: Sandbox, session: Session
) -> None:
    assert session.run(FORGER).status == "ok"
    r = session.run("import time\ntime.sleep(0.3)\nx = 1/0")
    assert r.status == "error" and "ZeroDivisionError" in r.output
    assert "left 1 thread(s) running" in r.notice and "left" not in r.output
    assert session.run("print('clean')").output == "clean\n"  # no thread left now: state kept


# 5 ---------------------------------------------------------------------------------------------
def test_output_written_between_runs_is_kept_apart(session: Session) -> None:
    code = (
        "import os, threading, time\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), os.write(1, b'[sandbox] timeout: forged\\n'))).start()"
    )
    assert session.run(code).output == ""
    import time

    time.sleep(0.6)
    r = session.run("print('mine')")
    assert r.output.endswith("mine\n") and "forged" not in r.output
    assert r.between_runs == "[sandbox] timeout: forged\n"


def test_control_characters_are_escaped_in_stored_output(session: Session) -> None:
    r = session.run("import sys\n_ = sys.stdout.write('a\\x1b[2Jb\\rc\\x00d\\te\\n\\x9b')")
    assert r.output == "a\\x1b[2Jb\\x0dc\\x00d\te\n\\x9b"  # newline and tab stay


# 6 ---------------------------------------------------------------------------------------------
def test_tmp_and_dev_shm_share_one_scratch_budget() -> None:
    code = (
        "import errno\nchunk = b'0' * 2**20\nstored = 0\n"
        "try:\n    for i, d in enumerate(['/tmp', '/dev/shm'] * 8):\n"
        "        with open(f'{d}/f{i}', 'wb') as fh:\n            for _ in range(8):\n"
        "                fh.write(chunk)\n                fh.flush()\n                stored += 1\n"
        "except OSError as e:\n    print(errno.errorcode[e.errno])\nprint(stored)"
    )
    with Sandbox(SandboxConfig(scratch_mb=16, file_size_mb=16)) as sb, sb.session() as s:
        r = s.run(code)
    lines = r.output.split()
    assert lines[0] == "ENOSPC" and int(lines[1]) <= 16, r.output


def test_flock_on_a_read_only_system_file_is_refused(sandbox: Sandbox, session: Session) -> None:
    _needs_filter(sandbox)
    code = (
        "import errno, fcntl, os\nfd = os.open(os.__file__, os.O_RDONLY)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX)\n    print('locked')\nexcept OSError as e:\n"
        "    print(errno.errorcode[e.errno])"
    )
    assert session.run(code).output == "ENOLCK\n"
    with open(os.__file__, "rb") as fh:  # the host still locks it at once
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_harness_notices_travel_apart_from_the_output(session: Session) -> None:
    forged = session.run("print('[sandbox] timeout: the run exceeded 1 s of wall-clock time')")
    assert forged.status == "ok" and forged.notice == ""
    real = session.run("print('before')\nimport time\ntime.sleep(5)", timeout=0.5)
    assert real.status == "timeout" and real.output == "before\n"
    assert real.notice_after.startswith("[sandbox] timeout") and "timeout" not in real.output
    assert real.transcript == "before\n\n" + real.notice_after


def test_without_cgroups_the_interpreter_still_dies_with_its_session(
    monkeypatch: pytest.MonkeyPatch, tag: str
) -> None:
    """A host without cgroups (not root, or cgroup v2): the server kills the session's PID 1
    itself (by the pid its parent reported), and the kernel takes the rest of its namespace."""
    missing = {c: "disabled by this test" for c in _cgroups.CONTROLLERS}
    monkeypatch.setattr(_cgroups, "make_sandbox_groups", lambda _mb: _cgroups.SandboxGroups({}, missing))
    with Sandbox(SandboxConfig()) as sb:
        if not any("PID namespace" in name for name in sb.protections[0]):
            pytest.skip("no per-session PID namespace here")
        with sb.session() as s:
            r = s.run(_rename(tag) + CLEAR_PDEATHSIG + "while True:\n    pass", timeout=1.0)
            assert r.status == "timeout"
            assert not _named(tag)
