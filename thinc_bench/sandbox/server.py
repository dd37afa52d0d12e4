"""The fork-server: a warm Python (numpy, sympy... imported) that forks one process per session.

Run by the harness as `python -m thinc_bench.sandbox.server --ctrl-fd N ...`, inside the bubblewrap
jail when available. It answers control frames on fd N (spawn / poll / kill / ping); the session
processes talk to the harness directly over the socket and output pipe passed in by `spawn`.
Per session it forks A (new namespaces, pids cgroup, parent-death signal; relays B's fate as its
own exit status) and A forks B (PID 1 of the session's PID namespace: confined, then the notebook
loop). Killing A kills B, and B's death kills every process of the session. It exits when the
control socket closes. It never runs user code itself and never retries: the harness decides.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from thinc_bench.sandbox import _isolate, _repl, _wire

# Distinct exit code of a session whose setup (not user code) failed; also sent as a frame.
SETUP_FAILED_EXIT = 125
# Unjailed sessions without namespaces get SIGTERM first so A can kill B's process group.
PLAIN_KILL_GRACE_S = 1.0


@dataclass
class _Child:
    pid: int
    cgroup: str | None
    scratch: str | None


def _log(message: str) -> None:
    os.write(2, f"thinc-sandbox-server[{os.getpid()}]: {message}\n".encode())


def _relay_status(status: int) -> NoReturn:
    """End this process the way its child ended, so the server's waitpid sees B's fate."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _kill_group_and_exit(pgid: int) -> NoReturn:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)


def _report_setup_failure(sock_fd: int, exc: BaseException) -> NoReturn:
    try:
        sock = socket.socket(fileno=os.dup(sock_fd))
        _wire.send_frame(sock, {"op": "setup_failed", "error": f"{type(exc).__name__}: {exc}"})
    except OSError as send_exc:
        _log(f"session setup failed ({exc!r}) and could not be reported: {send_exc!r}")
    os._exit(SETUP_FAILED_EXIT)


class Server:
    """State of the fork-server: configuration, capabilities found by the probe, live sessions."""

    def __init__(self, ctrl_fd: int, limits: dict[str, Any], cgroup_root: str | None) -> None:
        self.ctrl_fd = ctrl_fd
        self.limits = limits
        self.cgroup_root = cgroup_root
        self.children: dict[int, _Child] = {}
        self.namespaces = False
        self.ro_root = False
        self.pending_rmdirs: list[str] = []

    # ---- probe -------------------------------------------------------------------------------
    def probe(self) -> dict[str, Any]:
        """Fork a throwaway session and find which confinement steps this kernel allows."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            report: dict[str, Any] = {"namespaces": False, "ro_root": False, "error": ""}
            try:
                _isolate.enter_namespaces()
                inner = os.fork()
                if inner == 0:
                    try:
                        _isolate.make_root_readonly()
                        report["ro_root"] = True
                    except OSError as exc:
                        report["error"] = f"read-only root: {exc}"
                    try:
                        _isolate.mount_scratch(1)
                        _isolate.drop_capabilities()
                        report["namespaces"] = True
                    except OSError as exc:
                        report["error"] = f"scratch/capabilities: {exc}"
                    os.write(w, json.dumps(report).encode())
                    os._exit(0)
                os.waitpid(inner, 0)
            except OSError as exc:
                report["error"] = f"namespaces: {exc}"
                os.write(w, json.dumps(report).encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r, "rb") as fh:
            raw = fh.read()
        result: dict[str, Any] = (
            json.loads(raw) if raw else {"namespaces": False, "ro_root": False, "error": "probe died"}
        )
        self.namespaces = bool(result["namespaces"])
        self.ro_root = bool(result["ro_root"]) and self.namespaces
        return result

    # ---- spawn -------------------------------------------------------------------------------
    def spawn(self, sid: int, sock_fd: int, out_fd: int) -> None:
        """Fork session `sid` (A, which forks B); returns once A exists."""
        live: tuple[int, int] | None = None
        try:
            cgroup = self._make_cgroup(sid)
            scratch = None if self.namespaces else tempfile.mkdtemp(prefix=f"thinc-sandbox-{sid}-")
            live = os.pipe()
            pid = os.fork()
            if pid == 0:
                self._session_parent(sock_fd, out_fd, live[0], live[1], cgroup, scratch)
        finally:
            for fd in (sock_fd, out_fd, *(live or ())):
                os.close(fd)
        self.children[sid] = _Child(pid, cgroup, scratch)

    def _make_cgroup(self, sid: int) -> str | None:
        if self.cgroup_root is None:
            return None
        path = os.path.join(self.cgroup_root, f"s{sid}")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "pids.max"), "w") as fh:
            fh.write(str(int(self.limits["max_processes"]) + 1))  # +1: the session's parent A
        return path

    def _session_parent(
        self, sock_fd: int, out_fd: int, live_r: int, live_w: int, cgroup: str | None, scratch: str | None
    ) -> NoReturn:
        server_pid = os.getppid()
        try:
            os.close(self.ctrl_fd)
            _isolate.die_with_parent()
            if os.getppid() != server_pid:
                os._exit(SETUP_FAILED_EXIT)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if cgroup is not None:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
                    fh.write("0")
            if self.namespaces:
                _isolate.enter_namespaces()
            child = os.fork()
            if child == 0:
                self._session_process(sock_fd, out_fd, live_r, live_w, scratch)
            for fd in (sock_fd, out_fd, live_r):
                os.close(fd)
            if not self.namespaces:
                # Without a PID namespace, B's process group is what we can kill.
                signal.signal(signal.SIGTERM, lambda _s, _f: _kill_group_and_exit(child))
            _, status = os.waitpid(child, 0)
            if not self.namespaces:
                with contextlib.suppress(ProcessLookupError):  # B may have left no process in its group
                    os.killpg(child, signal.SIGKILL)
            _relay_status(status)
        except Exception as exc:  # process boundary: report setup failure to the harness
            _report_setup_failure(sock_fd, exc)

    def _session_process(
        self, sock_fd: int, out_fd: int, live_r: int, live_w: int, scratch: str | None
    ) -> NoReturn:
        report_fd = sock_fd
        try:
            os.close(live_w)
            _isolate.die_with_parent()
            if select.select([live_r], [], [], 0)[0]:  # EOF: A already died, nobody would kill us
                os._exit(SETUP_FAILED_EXIT)
            os.close(live_r)
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if self.namespaces:
                if self.ro_root:
                    _isolate.make_root_readonly()
                _isolate.mount_scratch(int(self.limits["scratch_mb"]))
                workdir = "/tmp"
            else:
                assert scratch is not None
                workdir = scratch
            os.chdir(workdir)
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
            tempfile.tempdir = None
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            os.dup2(sock_fd, 3)
            report_fd = 3
            os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0] + 1)
            _isolate.set_limits(self.limits)
            if self.namespaces:
                _isolate.drop_capabilities()
            sock = socket.socket(fileno=3)
        except Exception as exc:  # process boundary: report setup failure to the harness
            _report_setup_failure(report_fd, exc)
        _repl.serve(sock)

    # ---- poll / kill -------------------------------------------------------------------------
    def poll(self, sid: int) -> dict[str, Any]:
        """Report whether session `sid` has ended, and how, without touching it."""
        child = self.children.get(sid)
        if child is None:
            return {"exited": True, "how": "unknown", "code": 0}
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        if pid == 0:
            return {"exited": False}
        self._forget(sid)
        return {"exited": True, **_describe(status)}

    def kill(self, sid: int) -> dict[str, Any]:
        """Kill session `sid` (all its processes) and report how it had ended."""
        child = self.children.get(sid)
        if child is None:
            return {"how": "unknown", "code": 0, "by_harness": False}
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        by_harness = pid == 0
        if by_harness:
            if not self.namespaces:
                os.kill(child.pid, signal.SIGTERM)
                deadline = time.monotonic() + PLAIN_KILL_GRACE_S
                while pid == 0 and time.monotonic() < deadline:
                    time.sleep(0.005)
                    pid, status = os.waitpid(child.pid, os.WNOHANG)
            if pid == 0:
                os.kill(child.pid, signal.SIGKILL)
                _, status = os.waitpid(child.pid, 0)
        self._forget(sid)
        return {"by_harness": by_harness, **_describe(status)}

    def _forget(self, sid: int) -> None:
        child = self.children.pop(sid)
        if child.scratch is not None:
            shutil.rmtree(child.scratch, ignore_errors=True)
        if child.cgroup is not None:
            self.pending_rmdirs.append(child.cgroup)
        self._rmdir_cgroups()

    def _rmdir_cgroups(self) -> None:
        # A session's cgroup empties a moment after its parent is reaped; retry on later requests.
        still: list[str] = []
        for path in self.pending_rmdirs:
            try:
                os.rmdir(path)
            except OSError:
                still.append(path)
        self.pending_rmdirs = still

    def shutdown(self) -> None:
        """Kill every session and remove their cgroups."""
        for sid in list(self.children):
            self.kill(sid)
        deadline = time.monotonic() + 1.0
        while self.pending_rmdirs and time.monotonic() < deadline:
            self._rmdir_cgroups()
            time.sleep(0.01)


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
    return failed


def main(argv: list[str] | None = None) -> int:
    """Entry point: preload, probe, then serve control frames until the harness goes away."""
    parser = argparse.ArgumentParser(prog="thinc_bench.sandbox.server")
    parser.add_argument("--ctrl-fd", type=int, required=True)
    parser.add_argument("--limits", required=True, help="JSON object of the session limits")
    parser.add_argument("--preload", default="")
    parser.add_argument("--pids-cgroup", default="")
    parser.add_argument("--no-namespaces", action="store_true", help="skip per-session namespaces (tests)")
    args = parser.parse_args(argv)
    _isolate.die_with_parent()  # unjailed, nothing else would stop us if the harness died
    start = time.perf_counter()
    failed = _preload([m for m in args.preload.split(",") if m])
    server = Server(args.ctrl_fd, json.loads(args.limits), args.pids_cgroup or None)
    probe = {"error": "disabled by --no-namespaces"} if args.no_namespaces else server.probe()
    ctrl = socket.socket(fileno=args.ctrl_fd)
    hello = {
        "op": "hello",
        "pid": os.getpid(),
        "namespaces": server.namespaces,
        "ro_root": server.ro_root,
        "probe_error": probe.get("error", ""),
        "pids_cgroup": server.cgroup_root is not None,
        "preload_failed": failed,
        "start_s": time.perf_counter() - start,
    }
    _wire.send_frame(ctrl, hello)
    reader = _wire.FrameReader(ctrl)
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
