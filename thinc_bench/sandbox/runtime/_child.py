"""What runs in the fork-server's children: a session's parent A, its reaper R, the session
process B, the probe.

Contract: A joins the session's cgroups, raises its OOM bias, becomes the session's own host uid,
enters new namespaces and forks the session's head: with namespaces the reaper R, PID 1 of the
session's PID namespace, which forks B; without, B itself, and A becomes the session's child
subreaper. A writes the head's pid on its fate pipe at once (one line of digits); when B ends, B's
fate (wait status, CPU seconds) follows as one JSON line, written by whichever of R or A waited
for it; A then ends the way B did, so the server's waitpid and the fate tell how the session died.
The reaper reaps every orphan of the session as it exits (zombies never pile up against the
session's process limit) and ends when B ends, which ends the namespace and every process in it.
Without namespaces the orphans come back to A, which reaps them and, when B ends or the server
asks (SIGTERM), kills everything still below it. B confines itself and runs the notebook loop.
Any setup failure is reported on the session socket and ends the process with SETUP_FAILED_EXIT.
`probe` runs the same steps once, in a throwaway child, to learn what this kernel and jail allow.
Standard library only (runs in the jail); never imported by the harness.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, NoReturn

from . import _cgroups, _isolate, _procs, _repl, _seccomp, _wire

# Distinct exit code of a session whose setup (not user code) failed; also sent as a frame.
SETUP_FAILED_EXIT = 125
# Session processes go first when the whole host runs out of memory (the trainer and server last).
SESSION_OOM_SCORE_ADJ = 500
# A uid the probe tries; sessions get random ones from the same range (see server.py).
PROBE_UID = 0x70000000
# B's number in its own PID namespace: R is 1 and forks B first.
INTERPRETER_NS_PID = 2
# The probe's scratch: a handful of files is enough to show that the mount works.
PROBE_INODES = 16


@dataclass
class Setup:
    """What one session's A, R and B need to know, decided by the server before forking."""

    sock_fd: int
    out_fd: int
    fate_fd: int
    cgroups: list[str]
    uid: int | None
    scratch: str | None
    namespaces: bool
    ro_root: bool
    devpts: bool
    limits: dict[str, Any]
    seccomp: bool = False
    hide: tuple[str, ...] = ()  # unjailed: harness paths covered in the session's mount namespace

    @property
    def overhead(self) -> int:
        """The session's own processes above its interpreter: A, and R with namespaces."""
        return 2 if self.namespaces else 1


def _log(message: str) -> None:
    os.write(2, f"thinc-sandbox-server[{os.getpid()}]: {message}\n".encode())


def relay_status(status: int) -> NoReturn:
    """End this process the way its child ended, so the server's waitpid sees B's fate."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot (and need not) be reset
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _kill_session_and_exit(head: int) -> NoReturn:
    """Without namespaces, on the server's SIGTERM: kill B's process group and everything else
    below A (a process that left the group is still A's descendant), then end as killed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head, signal.SIGKILL)
    _procs.kill_tree(os.getpid(), spare=set())
    os._exit(128 + signal.SIGKILL)


def _wait_reaping(head: int) -> tuple[int, Any]:
    """Wait for `head`, reaping every other child (orphans handed to this reaper) on the way;
    returns `head`'s wait status and resource usage."""
    while True:
        pid, status, usage = os.wait4(-1, 0)
        if pid == head:
            return status, usage


def _fate_line(status: int, usage: Any) -> bytes:
    fate = {"status": status, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}
    return json.dumps(fate).encode() + b"\n"


def _report_setup_failure(sock_fd: int, exc: BaseException) -> NoReturn:
    try:
        sock = socket.socket(fileno=os.dup(sock_fd))
        _wire.send_frame(sock, {"op": "setup_failed", "error": f"{type(exc).__name__}: {exc}"})
    except OSError as send_exc:
        _log(f"session setup failed ({exc!r}) and could not be reported: {send_exc!r}")
    os._exit(SETUP_FAILED_EXIT)


def session_parent(setup: Setup, ctrl_fd: int, live_r: int, live_w: int) -> NoReturn:
    """Process A: enter the session's cgroups, uid and namespaces, fork the head (R or B), then
    relay B's fate."""
    server_pid = os.getppid()
    try:
        os.close(ctrl_fd)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _cgroups.join(setup.cgroups)
        with contextlib.suppress(OSError):  # raising needs no privilege; it fails only without /proc
            _isolate.set_oom_score_adj(SESSION_OOM_SCORE_ADJ)
        if setup.uid is not None:
            _isolate.drop_privileges(setup.uid, setup.uid)
        _isolate.die_with_parent()  # after the uid change, which clears it
        if os.getppid() != server_pid:
            os._exit(SETUP_FAILED_EXIT)
        if setup.namespaces:
            _isolate.enter_namespaces()
        else:
            _isolate.set_child_subreaper()  # B's orphans come back here, never out of the session
        head = os.fork()
        if head == 0:
            if setup.namespaces:
                reaper(setup, live_r, live_w)
            os.close(setup.fate_fd)
            session_process(setup, live_r, live_w)
        os.write(setup.fate_fd, f"{head}\n".encode())  # the server kills the session by this pid
        for fd in (setup.sock_fd, setup.out_fd, live_r):
            os.close(fd)
        if setup.namespaces:  # R reaps, writes B's fate and ends as B did
            _, status = os.waitpid(head, 0)
            relay_status(status)
        signal.signal(signal.SIGTERM, lambda _s, _f: _kill_session_and_exit(head))
        status, usage = _wait_reaping(head)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with contextlib.suppress(ProcessLookupError):  # B may have left no process in its group
            os.killpg(head, signal.SIGKILL)
        _procs.kill_tree(os.getpid(), spare=set())  # what B left, wherever it went below us
        with contextlib.suppress(OSError):
            os.write(setup.fate_fd, _fate_line(status, usage))
        relay_status(status)
    except Exception as exc:  # process boundary: report setup failure to the harness
        _report_setup_failure(setup.sock_fd, exc)


def reaper(setup: Setup, live_r: int, live_w: int) -> NoReturn:
    """Process R, PID 1 of the session's PID namespace: fork B, reap every orphan as it exits, and
    when B ends write its fate and end too (which kills every process left in the namespace).

    A signal from inside the namespace reaches R only through a handler, and R has none: SIGINT,
    the one the server's Python handles, is ignored here (B restores it)."""
    try:
        os.close(live_w)  # only A holds it now, so its end of file tells B that A is gone
        _isolate.die_with_parent()
        if select.select([live_r], [], [], 0)[0]:  # A already died, nobody would kill us
            os._exit(SETUP_FAILED_EXIT)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        child = os.fork()
        if child == 0:
            os.close(setup.fate_fd)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            session_process(setup, live_r, -1)
        for fd in (setup.sock_fd, setup.out_fd, live_r):
            os.close(fd)
        status, usage = _wait_reaping(child)
        with contextlib.suppress(OSError):
            os.write(setup.fate_fd, _fate_line(status, usage))
        # PID 1 cannot end itself by a signal: a signalled B is told by the fate line (exit 128+N).
        os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status))
    except Exception as exc:  # process boundary: report setup failure to the harness
        _report_setup_failure(setup.sock_fd, exc)


def session_process(setup: Setup, live_r: int, live_w: int) -> NoReturn:
    """Process B: confine itself, then serve the notebook loop on fd 3 (output on fds 1 and 2)."""
    report_fd = setup.sock_fd
    try:
        if live_w >= 0:
            os.close(live_w)
        _isolate.die_with_parent()
        if select.select([live_r], [], [], 0)[0]:  # EOF: A already died, nobody would kill us
            os._exit(SETUP_FAILED_EXIT)
        os.close(live_r)
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if setup.namespaces:
            _isolate.hide_paths(list(setup.hide))
            if setup.ro_root:
                _isolate.make_root_readonly()
            _isolate.mount_scratch(int(setup.limits["scratch_mb"]), int(setup.limits["scratch_inodes"]))
            if setup.devpts:
                _isolate.mount_devpts(int(setup.limits["max_ptys"]))
            workdir = "/tmp"
        else:
            assert setup.scratch is not None
            workdir = setup.scratch
        os.chdir(workdir)
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        tempfile.tempdir = None
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(setup.out_fd, 1)
        os.dup2(setup.out_fd, 2)
        os.dup2(setup.sock_fd, 3)
        report_fd = 3
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0] + 1)
        _isolate.set_limits(setup.limits, setup.overhead)
        _isolate.drop_capabilities()
        if setup.seccomp:
            _seccomp.install()
        sock = socket.socket(fileno=3)
    except Exception as exc:  # process boundary: report setup failure to the harness
        _report_setup_failure(report_fd, exc)
    _repl.serve(sock)


def _readable_as_session(paths: list[str]) -> str:
    """The first path an unprivileged session could not read or walk into, or ''."""
    for path in paths:
        if os.path.exists(path) and not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
            return path
    return ""


def probe(drop_uid: bool, package_dir: str, namespaces: bool = True) -> dict[str, Any]:
    """Fork a throwaway session and find which confinement steps this kernel and jail allow."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        report: dict[str, Any] = {"namespaces": False, "ro_root": False, "devpts": False, "error": ""}
        report.update(uid_drop=False, uid_error="")
        try:
            if drop_uid:
                try:
                    _isolate.drop_privileges(PROBE_UID, PROBE_UID)
                except OSError as exc:
                    report["uid_error"] = f"cannot change uid: {exc}"
                    raise
                unreadable = _readable_as_session([sys.executable, package_dir, *sys.path])
                if unreadable:
                    report["uid_error"] = f"{unreadable} is not readable by an unprivileged uid"
                    raise PermissionError(report["uid_error"])
                report["uid_drop"] = True
            if not namespaces:
                raise OSError("not asked for")
            _isolate.enter_namespaces()
            inner = os.fork()
            if inner == 0:
                _probe_mounts(report)
                os.write(w, json.dumps(report).encode())
                os._exit(0)
            os.waitpid(inner, 0)
        except OSError as exc:
            report["error"] = report["error"] or f"namespaces: {exc}"
            os.write(w, json.dumps(report).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as fh:
        raw = fh.read()
    empty = {"namespaces": False, "ro_root": False, "devpts": False, "uid_drop": False}
    return json.loads(raw) if raw else {**empty, "error": "probe died", "uid_error": "probe died"}


def _probe_mounts(report: dict[str, Any]) -> None:
    try:
        _isolate.make_root_readonly()
        report["ro_root"] = True
    except OSError as exc:
        report["error"] = f"read-only root: {exc}"
    try:
        _isolate.mount_scratch(1, PROBE_INODES)
    except OSError as exc:
        report["error"] = f"scratch: {exc}"
        return
    try:  # a kernel may allow the others without this one
        _isolate.mount_devpts(1)
        report["devpts"] = True
    except OSError as exc:
        report["error"] = f"private /dev/pts: {exc}"
    try:
        _isolate.drop_capabilities()
        report["namespaces"] = True
    except OSError as exc:
        report["error"] = f"capabilities: {exc}"
        return
    try:
        _seccomp.install()
        report["seccomp"] = True
    except OSError as exc:
        report["seccomp_error"] = f"seccomp: {exc}"
