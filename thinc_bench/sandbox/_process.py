"""One session process as the harness holds it: started, checked while it waits, stopped.

Contract: `start_process` asks the server to fork a session (A, which forks R and B, see the
runtime's `_child`) over a fresh socket pair and output pipe, and waits for B's "ready" frame. The
harness's end has SO_PASSCRED set for that frame only, so the kernel states B's pid in the harness's
own PID namespace; the process's `ProcWatch` is built from it (None when this kernel or uid cannot
read the session's /proc entries, which the protection summary says). `stop_process` kills every
process of the session through the server and closes the harness's ends. `idle_and_clean` tells
whether a process started ahead of need can still serve a session. Nothing here runs code.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from thinc_bench.sandbox._server import InfraFailure, Server
from thinc_bench.sandbox._watch import ProcWatch, SessionWatch
from thinc_bench.sandbox.runtime import _wire

# Fork + namespaces + mounts take ~10 ms; 30 s means the server or kernel is wedged.
SESSION_START_TIMEOUT_S = 30.0


@dataclass
class Live:
    """A session process: its id at the server, the harness's ends, and what watches it."""

    sid: int
    server: Server
    sock: socket.socket
    out_r: int
    reader: _wire.FrameReader
    watch: ProcWatch | None = None
    group_watch: SessionWatch | None = field(default=None, repr=False)

    def close(self) -> None:
        """Close the harness's ends and watches (the processes are the server's to kill)."""
        for watch in (self.watch, self.group_watch):
            if watch is not None:
                watch.close()
        self.watch = self.group_watch = None
        self.sock.close()
        os.close(self.out_r)

    def own_processes(self) -> int:
        """How many processes the session has of its own: A, R (with namespaces) and B."""
        return 3 if self.server.hello.get("namespaces") else 2

    def cgroup_watch(self) -> SessionWatch | None:
        """The watch of its pids cgroup (opened once), or None without one (or if it cannot be opened)."""
        if self.group_watch is None:
            parent = self.server.launch.groups.session_parents.get("pids")
            with contextlib.suppress(OSError):
                if parent is not None:
                    self.group_watch = SessionWatch(
                        os.path.join(parent, f"s{self.sid}"), self.own_processes()
                    )
        return self.group_watch


def start_process(server: Server, sid: int, *, background: bool = False) -> Live:
    """Fork one session process from `server` and wait until its notebook loop is ready;
    `background` (a start ahead of need) lets waiting sessions' requests go first.

    Raises:
        InfraFailure: the server refused or the process did not come up (it is killed).
    """
    harness_end, child_end = socket.socketpair()
    harness_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # B's pid rides on "ready"
    out_r, out_w = os.pipe()
    try:
        server.request({"op": "spawn", "sid": sid}, [child_end.fileno(), out_w], background=background)
    except InfraFailure:
        harness_end.close()
        os.close(out_r)
        raise
    finally:
        child_end.close()
        os.close(out_w)
    fcntl.fcntl(out_r, fcntl.F_SETFL, fcntl.fcntl(out_r, fcntl.F_GETFL) | os.O_NONBLOCK)
    reader = _wire.FrameReader(harness_end, max_frame_bytes=_wire.SESSION_FRAME_BYTES, credentials=True)
    live = Live(sid, server, harness_end, out_r, reader)
    harness_end.settimeout(SESSION_START_TIMEOUT_S)
    try:
        frame = live.reader.read_frame()
    except (OSError, _wire.WireError) as exc:
        stop_process(live)
        raise InfraFailure(f"session process did not start: {exc!r}") from exc
    finally:
        harness_end.settimeout(None)
    if frame.get("op") != "ready":
        stop_process(live)
        raise InfraFailure(f"session setup failed: {frame.get('error', frame)}")
    # From here on what arrives is the session's (untrusted) and carries no credentials.
    harness_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
    reader.credentials = False
    if reader.sender_pid is not None and reader.sender_pid > 0:
        with contextlib.suppress(OSError, ValueError, IndexError):
            live.watch = ProcWatch(reader.sender_pid, bool(server.hello.get("namespaces")))
    return live


def stop_process(live: Live) -> dict[str, Any]:
    """Kill a session process (every process of its session) and close our ends; returns how it
    ended, as the server saw it (empty if the server is gone)."""
    info: dict[str, Any] = {}
    try:
        if not live.server.dead:
            info = live.server.request({"op": "kill", "sid": live.sid})
    except InfraFailure:
        info = {}
    finally:
        live.close()
    return info


def idle_and_clean(live: Live, server: Server) -> bool:
    """Whether a process started ahead of need can serve a session: forked by the running server,
    alive (its socket open), and silent (it ran nothing, so it has nothing to say on either end)."""
    if live.server is not server or server.dead:
        return False
    try:
        live.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        return False  # end of stream (it died) or a byte nobody asked for
    except BlockingIOError:
        pass
    except OSError:
        return False
    try:
        os.read(live.out_r, 1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False  # output, or end of stream: it wrote or died
