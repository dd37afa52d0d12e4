"""`Server`: the harness's handle on one running fork-server (its process, control socket, launch).

Contract: `Server(config, generation)` launches the runtime's server (jailed or not, `_jail`) from a
thread that lives as long as it, reads its hello (what its probe found), and serialises control
requests under one lock, a background request (a warm-pool start) yielding to every waiting one.
Any failure of the machinery is an `InfraFailure`, which sessions retry once and then report as
`infra_error`; a failure to start at all is `SandboxUnavailable`. It runs no code and decides nothing
about sessions (`session`, `_process` do).
"""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
from typing import Any

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import _jail
from thinc_bench.sandbox.config import SandboxConfig
from thinc_bench.sandbox.runtime import _cgroups, _wire

logger = logging.getLogger(__name__)

# Importing numpy+sympy takes 1-2 s here; 60 s covers a cold disk cache on a loaded machine.
SERVER_START_TIMEOUT_S = 60.0
# A spawn is one fork (~5 ms); 30 s means the server is wedged, not busy.
CONTROL_TIMEOUT_S = 30.0


class InfraFailure(Exception):
    """The sandbox machinery (not the user's code) failed; retried once, then `infra_error`."""


class Server:
    """One running fork-server and its control socket."""

    proc: subprocess.Popen[bytes]

    def __init__(self, config: SandboxConfig, generation: int) -> None:
        self.generation = generation
        harness_end, server_end = socket.socketpair()
        self.launch = _jail.plan_launch(config, server_end.fileno())
        # bwrap --die-with-parent (and the server's own parent-death signal) fire when the *thread*
        # that forked them exits, so a dedicated thread launches the server and lives as long as it.
        started = threading.Event()
        failure: list[OSError] = []
        self.forked_away = False
        threading.Thread(
            target=self._launch_and_wait,
            args=(server_end, started, failure),
            name="sandbox-server",
            daemon=True,
        ).start()
        started.wait()
        server_end.close()
        if failure:
            harness_end.close()
            _cgroups.remove_sandbox_groups(self.launch.groups)
            self.launch.cleanup()
            raise SandboxUnavailable(
                f"could not start the sandbox server {self.launch.argv[0]!r}: {failure[0]}"
            )
        self.sock = harness_end
        self.sock.settimeout(SERVER_START_TIMEOUT_S)
        self.reader = _wire.FrameReader(self.sock)  # no descriptors accepted (the server sends none)
        try:
            self.hello = self.reader.read_frame()
        except (OSError, _wire.WireError) as exc:
            self.close()
            raise SandboxUnavailable(
                f"the sandbox server did not start (exit code {self.proc.poll()}): {exc}; "
                "its stderr is logged above by thinc_bench.sandbox"
            ) from exc
        self.sock.settimeout(CONTROL_TIMEOUT_S)
        self.lock = threading.Lock()
        # Requests of sessions waiting for the lock; a background one (a warm-pool start) lets
        # them go first, so that a session's start or close never queues behind a refill.
        self._urgent = 0
        self._urgent_lock = threading.Condition()
        self.dead = False

    def _launch_and_wait(
        self, server_end: socket.socket, started: threading.Event, failure: list[OSError]
    ) -> None:
        try:
            self.proc = subprocess.Popen(
                self.launch.command,
                env=self.launch.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=[server_end.fileno()],
                cwd="/",
                start_new_session=True,  # a Ctrl-C at the terminal is the harness's to handle, in order
            )
        except OSError as exc:
            failure.append(exc)
            return
        finally:
            started.set()
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            logger.warning("sandbox server: %s", line.decode(errors="replace").rstrip())
        self.proc.wait()

    def request(
        self, message: dict[str, Any], fds: list[int] | None = None, *, background: bool = False
    ) -> dict[str, Any]:
        """Send one control frame and wait for its answer; a `background` request waits until no
        other request is waiting.

        Raises:
            InfraFailure: the server is dead or answered nonsense.
        """
        with self._urgent_lock:
            if background:
                while self._urgent:
                    self._urgent_lock.wait(CONTROL_TIMEOUT_S)
            else:
                self._urgent += 1
        try:
            self.lock.acquire()
        finally:
            if not background:
                with self._urgent_lock:
                    self._urgent -= 1
                    if not self._urgent:
                        self._urgent_lock.notify_all()
        try:
            if self.dead:
                raise InfraFailure("the sandbox server is gone")
            try:
                _wire.send_frame(self.sock, message, fds)
                reply = self.reader.read_frame()
            except (OSError, _wire.WireError) as exc:
                self.dead = True
                raise InfraFailure(f"sandbox server failed during {message.get('op')!r}: {exc!r}") from exc
        finally:
            self.lock.release()
        if not reply.get("ok"):
            raise InfraFailure(f"sandbox server refused {message.get('op')!r}: {reply.get('error')}")
        return reply

    def close(self) -> None:
        self.dead = True
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if problem := _cgroups.remove_sandbox_groups(self.launch.groups):
            logger.warning("%s", problem)
        self.launch.cleanup()

    def forget_in_child(self) -> None:
        """In a forked child: drop our copies of the parent's descriptors and never use this server
        (it, its process and its cgroups belong to the parent)."""
        self.dead = True
        self.forked_away = True
        self.lock = threading.Lock()
        self._urgent, self._urgent_lock = 0, threading.Condition()
        self.sock.close()  # else the parent's server would not see end of stream when it closes
        # The copy of the server's stderr pipe stays open: the parent's reader thread held its
        # lock at the fork, so closing it here would wait forever; a read end that nobody reads
        # changes nothing for the parent.
