"""How a session's run is told: its output read (bounded) and kept as head + tail with control
characters escaped, and the status and cause of a session process's death from evidence its code
cannot write.

Contract: `drain` reads an output pipe within a time and byte bound; the rest are pure functions of
what the harness collected (output bytes, the server's report of how a process ended). Nothing here
talks to the server (that is `session`'s job).
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

from thinc_bench.sandbox.config import SandboxConfig, Status
from thinc_bench.sandbox.runtime import _wire

READ_CHUNK_BYTES = 65536
# One drain reads at most this many chunks (4 MiB) whatever the writer does: a writer that never
# stops (a splice flood) cannot hold the harness past the run's deadline; what it still writes is
# either cut from this run (counted in the marker) or seen as the next run's `between_runs`.
DRAIN_MAX_CHUNKS = 64
DRAIN_POLL_S = 0.002

# A SIGKILLed session that used this share of cpu_time_s met RLIMIT_CPU: the kernel checks the limit
# against tick-sampled time, which runs ahead of the precise time wait4 reports (0.95 s measured for
# a 1 s limit on a busy 2-core VM).
CPU_LIMIT_SHARE = 0.9


# Control characters but newline and tab (C0, DEL, C1): ESC sequences, CR overwrites and NUL would
# act on whatever later shows the text (a terminal, the report); they are stored escaped.
CONTROL_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """`text` with every control character except newline and tab written as a \\xNN escape."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Output:
    """Keeps the first and last bytes of a stream and counts what was cut between them."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not per chunk
            del self.tail[: len(self.tail) - self.tail_limit]

    def render(self) -> tuple[str, bool]:
        tail = self.tail[-self.tail_limit :] if self.tail_limit else b""
        cut = self.total - len(self.head) - len(tail)
        if cut <= 0:
            return escape_controls(
                (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
            ), False
        marker = f"\n[... {cut} bytes of output cut ...]\n"
        text = (
            escape_controls(bytes(self.head).decode("utf-8", errors="replace"))
            + marker
            + escape_controls(bytes(tail).decode("utf-8", errors="replace"))
        )
        return text, True


def _signal_name(sig: int) -> str:
    return signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)


def _death_message(info: dict[str, Any], config: SandboxConfig) -> tuple[Status, str]:
    """Status and explanation of a session process that died, from the server's report of its end
    (signal or exit code, B's CPU seconds, OOM kills its memory group counted): evidence the
    session's code cannot write. Its output is never read for this (a cell can print anything)."""
    how, code = info.get("how"), int(info.get("code", 0))
    if how == "exit" and code == _wire.CHANNEL_LOST_EXIT:
        return "killed", (
            "its code closed or replaced fd 1, 2 or 3 (the sandbox's output pipe and control "
            "socket), so the interpreter ended itself: what it reported after that could come from "
            "another process"
        )
    if how == "signal":
        name = _signal_name(code)
        if code == signal.SIGKILL and int(info.get("oom_kills", 0)) > 0:
            where = (
                f"the session's memory limit (session_memory_mb={config.resolved_session_memory_mb()})"
                if info.get("session_limit_hit")
                else f"the memory cap of all sessions together (total_memory_mb={config.resolved_total_memory_mb()})"
            )
            return "memory", f"the kernel's out-of-memory killer killed it (SIGKILL): {where} was reached"
        cpu_s = float(info.get("cpu_s") or 0.0)
        if code == signal.SIGXCPU or (
            code == signal.SIGKILL and cpu_s >= CPU_LIMIT_SHARE * config.cpu_time_s
        ):
            return "timeout", f"its CPU-time limit (cpu_time_s={config.cpu_time_s}) was reached ({name})"
        cause = f"it was killed by signal {name}"
    else:
        cause = (
            f"it exited with code {code} (os._exit or a fatal error, such as an allocation refused by "
            f"the address-space limit memory_mb={config.memory_mb})"
        )
    return "killed", cause


def drain(out_r: int, output: _Output, seconds: float) -> None:
    """Read what the non-blocking pipe `out_r` holds into `output`, waiting up to `seconds` for
    more; bounded in time and bytes (DRAIN_MAX_CHUNKS) whatever the writer does."""
    deadline = time.monotonic() + seconds
    chunks = 0
    while chunks < DRAIN_MAX_CHUNKS:
        try:
            data = os.read(out_r, READ_CHUNK_BYTES)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return
            time.sleep(DRAIN_POLL_S)
            continue
        if not data:
            return
        output.add(data)
        chunks += 1
        if seconds and time.monotonic() >= deadline:
            return
