"""The fork-server: a warm Python (numpy, sympy... imported) that forks one process per session.

Run by the harness as `python -m thinc_sandbox_runtime.server --ctrl-fd N ...` (this folder, and
nothing else of thinc_bench, on its import path), inside the bubblewrap jail when available. It
answers control frames on fd N (spawn / poll / clean / kill / ping); the session processes talk to
the harness directly over the socket and output pipe passed in by `spawn`.
Per session it creates the session's cgroups, picks it a random unprivileged host uid, and forks A
(see `_child`), which forks the session's head (its reaper R, which forks B; or B). Killing A kills
the rest, and B's death kills every process of the session.
A poll or kill reports how the session ended: wait status, B's CPU seconds, and the OOM kills its
memory group counted. It exits when the control socket closes. It never runs user code itself and
never retries: the harness decides.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import random
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from . import _cgroups, _child, _isolate, _procs, _wire

# Unjailed sessions without namespaces get SIGTERM first so A can kill B's process group.
PLAIN_KILL_GRACE_S = 1.0
# Each session runs as its own host uid, drawn from 2^24 uids above this base (0x70000000: unused
# by distributions, systemd and container runtimes), so sessions share no per-user quota.
SESSION_UID_BASE = _child.PROBE_UID
SESSION_UID_SPAN = 1 << 24
FATE_BYTES = 4096


@dataclass
class _Spawned:
    pid: int
    groups: dict[str, str]
    scratch: str | None
    fate_r: int
    uid: int | None
    namespaces: bool
    fate: bytes = b""

    def _lines(self) -> list[bytes]:
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self.fate_r, FATE_BYTES):
                self.fate += chunk
        return self.fate.split(b"\n")[:-1]  # complete lines only (each is one atomic write)

    def head_pid(self) -> int | None:
        """The session's head (R, or B without namespaces): the line of digits A writes on its fate
        pipe (None before A wrote it)."""
        return next((int(line) for line in self._lines() if line.isdigit()), None)

    def fate_record(self) -> dict[str, Any] | None:
        """B's fate (wait status, CPU seconds), the JSON line R or A writes when B ends."""
        for line in self._lines():
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    return record if isinstance(record, dict) else None
        return None

    def own(self) -> set[int]:
        """The session's own processes the server can name: A, the head, and B below R."""
        head = self.head_pid()
        if head is None:
            return {self.pid}
        found = {self.pid, head}
        if self.namespaces:  # B is R's first child: pid 2 of the session's namespace
            found.update(c for c in _procs.children(head) if _procs.ns_pid(c) == _child.INTERPRETER_NS_PID)
        return found


def _log(message: str) -> None:
    os.write(2, f"thinc-sandbox-server[{os.getpid()}]: {message}\n".encode())


class Server:
    """State of the fork-server: configuration, capabilities found by the probe, live sessions."""

    def __init__(
        self, ctrl_fd: int, limits: dict[str, Any], cgroups: dict[str, str], hide: tuple[str, ...] = ()
    ) -> None:
        self.ctrl_fd = ctrl_fd
        self.limits = limits
        self.hide = hide
        self.cgroups = cgroups
        self.children: dict[int, _Spawned] = {}
        self.namespaces = False
        self.ro_root = False
        self.devpts = False
        self.uid_drop = False
        self.seccomp = False
        self.pending_rmdirs: list[str] = []
        self._random = random.Random()

    # ---- probe -------------------------------------------------------------------------------
    def probe(self, namespaces: bool = True) -> dict[str, Any]:
        """Find which confinement steps this kernel allows, preferring sessions with their own uid."""
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        root = os.geteuid() == 0
        result = _child.probe(drop_uid=root, package_dir=package_dir, namespaces=namespaces)
        if not namespaces:
            result["error"] = "disabled by --no-namespaces"
        elif root and result.get("uid_drop") and not result.get("namespaces"):
            as_root = _child.probe(drop_uid=False, package_dir=package_dir)
            if as_root.get("namespaces"):  # namespaces matter more than the uid
                why = f"as an unprivileged uid a session cannot create namespaces ({result.get('error')})"
                result = {**as_root, "uid_error": why}
        elif root and not result.get("uid_drop"):
            as_root = _child.probe(drop_uid=False, package_dir=package_dir)
            result = {**as_root, "uid_error": result.get("uid_error") or result.get("error")}
        if not root:
            result["uid_error"] = "the harness is not root, so sessions run as its uid"
        self.uid_drop = bool(result.get("uid_drop"))
        self.namespaces = bool(result.get("namespaces"))
        self.ro_root = bool(result.get("ro_root")) and self.namespaces
        self.devpts = bool(result.get("devpts")) and self.namespaces
        self.seccomp = bool(result.get("seccomp")) and self.namespaces
        return result

    # ---- spawn -------------------------------------------------------------------------------
    def spawn(self, sid: int, sock_fd: int, out_fd: int) -> None:
        """Fork session `sid` (A, which forks B); returns once A exists."""
        opened: list[int] = [sock_fd, out_fd]  # closed here once A holds its copies
        groups: dict[str, str] = {}
        scratch = None
        fate_r = -1
        overhead = 2 if self.namespaces else 1  # A, and R with namespaces
        try:
            groups = _cgroups.make_session_groups(self.cgroups, sid, {**self.limits, "overhead": overhead})
            uid = self._new_uid() if self.uid_drop else None
            if not self.namespaces:
                scratch = tempfile.mkdtemp(prefix=f"thinc-sandbox-{sid}-")
                if uid is not None:
                    os.chown(scratch, uid, uid)
            live_r, live_w = os.pipe()
            opened += [live_r, live_w]
            fate_r, fate_w = os.pipe()
            os.set_blocking(fate_r, False)
            opened.append(fate_w)
            setup = _child.Setup(
                sock_fd, out_fd, fate_w, list(groups.values()), uid, scratch, self.namespaces,
                self.ro_root, self.devpts, self.limits, self.seccomp, self.hide,
            )  # fmt: skip
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(fate_r)
                    _child.session_parent(setup, self.ctrl_fd, live_r, live_w)
                finally:  # whatever escapes, this fork must never go back to serving the harness
                    os._exit(_child.SETUP_FAILED_EXIT)
        except OSError:
            if fate_r >= 0:
                os.close(fate_r)
            self._remove(list(groups.values()), scratch)
            raise
        finally:
            for fd in opened:
                os.close(fd)
        self.children[sid] = _Spawned(pid, groups, scratch, fate_r, uid, self.namespaces)

    def _new_uid(self) -> int:
        taken = {c.uid for c in self.children.values()}
        while True:
            uid = SESSION_UID_BASE + self._random.randrange(1, SESSION_UID_SPAN)
            if uid not in taken:
                return uid

    # ---- poll / kill -------------------------------------------------------------------------
    def poll(self, sid: int) -> dict[str, Any]:
        """Report whether session `sid` has ended, and how, without touching it."""
        child = self.children.get(sid)
        if child is None:
            return {"exited": True, "how": "unknown", "code": 0}
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        if pid == 0:
            return {"exited": False}
        return {"exited": True, **self._reap(sid, status)}

    def kill(self, sid: int) -> dict[str, Any]:
        """Kill session `sid` (every process of it, whatever it did to its parent-death signal or
        process group) and report how it had ended; the session's groups are empty on return."""
        child = self.children.get(sid)
        if child is None:
            return {"how": "unknown", "code": 0, "by_harness": False}
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        by_harness = pid == 0
        swept = (0, 0)
        if by_harness:
            reaped = None
            if "pids" in child.groups:
                swept = self._sweep(child)
            else:
                reaped = self._kill_without_groups(child)
            status = reaped if reaped is not None else os.waitpid(child.pid, 0)[1]
        return {"by_harness": by_harness, **self._reap(sid, status, swept)}

    def clean(self, sid: int) -> dict[str, Any]:
        """After a run of session `sid`: kill every process of it but its own (A, R, B), so nothing
        the run started acts in a later run. `checked` is False when no pids group lists the
        session's processes (no cgroups here: the harness sweeps its process tree instead)."""
        child = self.children.get(sid)
        if child is None or "pids" not in child.groups:
            return {"checked": False, "killed": 0, "left": 0}
        own = child.own()
        if len(own) != child_processes(child.namespaces):  # B not known yet: nothing may be told apart
            return {"checked": False, "killed": 0, "left": 0}
        killed, left = _cgroups.sweep_others(child.groups["pids"], own)
        return {"checked": True, "killed": killed, "left": left}

    def _sweep(self, child: _Spawned) -> tuple[int, int]:
        return _cgroups.sweep(child.groups["pids"], child.own())

    def _kill_without_groups(self, child: _Spawned) -> int | None:
        """No cgroup lists the session's processes: kill R, PID 1 of its namespace (the kernel then
        kills every process in it), and A; without namespaces A kills everything below it. Returns
        A's wait status when this reaped it already."""
        pid = 0
        if not self.namespaces:
            os.kill(child.pid, signal.SIGTERM)
            deadline = time.monotonic() + PLAIN_KILL_GRACE_S
            while pid == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
                pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid:
                return status
        head = child.head_pid()
        pidfd = -1
        if head is not None and self.namespaces and child.fate_record() is None:
            with contextlib.suppress(OSError):  # B's fate not written: R is alive or A's zombie child
                pidfd = os.pidfd_open(head)
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        if pidfd >= 0:  # readable once R has exited, which waits for the rest of its namespace
            select.select([pidfd], [], [], _cgroups.DRAIN_S)
            os.close(pidfd)
        return None

    def _reap(self, sid: int, status: int, swept: tuple[int, int] = (0, 0)) -> dict[str, Any]:
        """How session `sid` ended (B's own status when A relayed it), then sweep what is left of it
        and forget it. `survivors`: processes besides its own (A, R, B) that were still running."""
        child = self.children[sid]
        if "pids" in child.groups:
            more = self._sweep(child)
            swept = (swept[0] + more[0], more[1])
        del self.children[sid]
        info = _describe(status)
        os.set_blocking(child.fate_r, True)  # A is gone: what it wrote is all there, then EOF
        fate = child.fate_record() or {}
        os.close(child.fate_r)
        if "status" in fate:
            info = {
                **_describe(int(fate["status"])),
                "cpu_s": fate.get("cpu_s"),
                "maxrss_kb": fate.get("maxrss_kb"),
            }
        memory_group = child.groups.get("memory")
        if memory_group is not None:
            events = _cgroups.memory_events(memory_group)
            info["oom_kills"] = events.get("oom_kill", 0)
            info["session_limit_hit"] = events.get("failcnt", 0) > 0
        info["survivors"], info["survivors_left"] = swept
        self._remove(list(child.groups.values()), child.scratch)
        return info

    def _remove(self, groups: list[str], scratch: str | None) -> None:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        self.pending_rmdirs.extend(groups)
        self._rmdir_cgroups()

    def _rmdir_cgroups(self) -> None:
        # A session's cgroup empties a moment after its parent is reaped; retry on later requests.
        still: list[str] = []
        for path in self.pending_rmdirs:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                still.append(path)
        self.pending_rmdirs = still

    def shutdown(self) -> None:
        """Kill every session and remove their cgroups."""
        for sid in list(self.children):
            self.kill(sid)
        deadline = time.monotonic() + _cgroups.DRAIN_S
        while self.pending_rmdirs and time.monotonic() < deadline:
            self._rmdir_cgroups()
            time.sleep(0.01)


def child_processes(namespaces: bool) -> int:
    """How many processes a session has of its own: A, R (with namespaces) and B."""
    return 3 if namespaces else 2


def _describe(status: int) -> dict[str, Any]:
    if os.WIFSIGNALED(status):
        return {"how": "signal", "code": os.WTERMSIG(status)}
    return {"how": "exit", "code": os.waitstatus_to_exitcode(status)}


def _preload(modules: list[str]) -> list[str]:
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            failed.append(f"{name}: {exc}")
    # Objects that exist now are never collected: the collector would otherwise write to every one
    # of them in each session, copying the server's pages into the session's memory group.
    gc.collect()
    gc.freeze()
    return failed


def main(argv: list[str] | None = None) -> int:
    """Entry point: preload, probe, then serve control frames until the harness goes away."""
    parser = argparse.ArgumentParser(prog="thinc_sandbox_runtime.server")
    parser.add_argument("--ctrl-fd", type=int, required=True)
    parser.add_argument("--limits", required=True, help="JSON object of the session limits")
    parser.add_argument("--preload", default="")
    parser.add_argument("--cgroups", default="{}", help="JSON: controller -> parent of session groups")
    parser.add_argument("--no-namespaces", action="store_true", help="skip per-session namespaces (tests)")
    parser.add_argument("--hide", default="[]", help="JSON list: folders each session covers (unjailed)")
    args = parser.parse_args(argv)
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = ""  # a session's own folder (its scratch), never the folder the server started in
    _isolate.die_with_parent()  # unjailed, nothing else would stop us if the harness died
    start = time.perf_counter()
    try:
        _isolate.set_oom_score_adj(-1000)
        oom_protected = True
    except OSError:  # no CAP_SYS_RESOURCE: the memory groups still keep session OOM kills off us
        oom_protected = False
    failed = _preload([m for m in args.preload.split(",") if m])
    server = Server(
        args.ctrl_fd, json.loads(args.limits), json.loads(args.cgroups), tuple(json.loads(args.hide))
    )
    probe = server.probe(namespaces=not args.no_namespaces)
    ctrl = socket.socket(fileno=args.ctrl_fd)
    hello = {
        "op": "hello",
        "pid": os.getpid(),
        "namespaces": server.namespaces,
        "ro_root": server.ro_root,
        "devpts": server.devpts,
        "uid_drop": server.uid_drop,
        "seccomp": server.seccomp,
        "seccomp_error": probe.get("seccomp_error", ""),
        "uid_error": probe.get("uid_error", ""),
        "probe_error": probe.get("error", ""),
        "oom_protected": oom_protected,
        "cgroups": sorted(server.cgroups),
        "preload_failed": failed,
        "start_s": time.perf_counter() - start,
    }
    _wire.send_frame(ctrl, hello)
    reader = _wire.FrameReader(ctrl, accept_fds=True)
    try:
        while True:
            try:
                request = reader.read_frame()
            except _wire.WireError:
                break
            _wire.send_frame(ctrl, _handle(server, request, reader.take_fds()))
    finally:
        server.shutdown()
    return 0


def _handle(server: Server, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    op, sid = request.get("op"), int(request.get("sid", -1))
    try:
        if op == "spawn":
            if len(fds) != 2:
                raise ValueError(f"spawn needs 2 descriptors, got {len(fds)}")
            server.spawn(sid, fds[0], fds[1])
            return {"op": op, "sid": sid, "ok": True}
        for fd in fds:
            os.close(fd)
        if op == "poll":
            return {"op": op, "sid": sid, "ok": True, **server.poll(sid)}
        if op == "clean":
            return {"op": op, "sid": sid, "ok": True, **server.clean(sid)}
        if op == "kill":
            return {"op": op, "sid": sid, "ok": True, **server.kill(sid)}
        if op == "ping":
            return {"op": op, "ok": True, "sessions": len(server.children)}
        return {"op": op, "ok": False, "error": f"unknown op {op!r}"}
    except OSError as exc:  # fork/mkdir failures are infrastructure errors for the harness
        _log(f"{op} {sid} failed: {exc!r}")
        return {"op": op, "sid": sid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    sys.exit(main())
