"""A session's processes read through /proc, and killed without a cgroup: what an unprivileged
harness has.

Why: without root there is no pids cgroup listing a session's processes. The session's process tree
lists them instead: every process a session starts stays below its reaper (PID 1 of the session's
PID namespace, or its parent A made a child subreaper when there is none), because an orphan is
handed to the nearest reaper above it, never out of the tree. `descendants` walks that tree through
`/proc/PID/task/TID/children`; `kill_tree` kills all of it but the processes it is told to spare,
in rounds, each kill through a pidfd checked to be the process the walk found (a pid read from
/proc may be reused by then), until nothing is left or `DRAIN_S` passed. Zombies are skipped (they
run nothing; their reaper collects them). Reads of another process's /proc files need the same
uid or CAP_SYS_PTRACE: the harness and server always have one or the other over their sessions.
Standard library only (runs in the jail, and the harness imports it).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

# A kill round's processes take this long to die and be handed to the reaper before the next walk.
SWEEP_POLL_S = 0.001
DRAIN_S = 1.0
STAT_BYTES = 4096
# Fields of /proc/PID/stat after the ")" that ends the command name: state, ppid, ..., flags.
STATE_AFTER_NAME = 0
PPID_AFTER_NAME = 1
FLAGS_AFTER_NAME = 6
# include/linux/sched.h: "forked but didn't exec"; execve clears it and only a fork sets it.
PF_FORKNOEXEC = 0x00000040


def parse_stat(raw: bytes) -> tuple[str, int, int]:
    """(state, ppid, flags) from the bytes of a /proc/PID/stat file."""
    fields = raw.rsplit(b")", 1)[1].split()
    return (
        fields[STATE_AFTER_NAME].decode(),
        int(fields[PPID_AFTER_NAME]),
        int(fields[FLAGS_AFTER_NAME]),
    )


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, flags) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return parse_stat(fh.read(STAT_BYTES))
    except (OSError, ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """The children of every thread of `pid` (empty when it is gone)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def descendants(root: int) -> list[int]:
    """Every process below `root` (not `root` itself), parents before their children."""
    found: list[int] = []
    queue = children(root)
    seen: set[int] = set()
    while queue:
        pid = queue.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        queue += children(pid)
    return found


def ns_pid(pid: int) -> int | None:
    """`pid`'s number in its own (innermost) PID namespace, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def kill_checked(pid: int, tree: set[int]) -> bool:
    """SIGKILL `pid` if it is still a live process whose parent is in `tree` (the walk's view);
    True when a signal was sent. The pidfd pins the process: the /proc read after it is of that very
    process as long as the pidfd does not say it has exited."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        facts = stat(pid)
        if facts is None or facts[0] in ("Z", "X") or facts[1] not in tree:
            return False
        if select.select([pidfd], [], [], 0)[0]:  # exited since: the read may be of another process
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def kill_tree(root: int, spare: set[int], deadline_s: float = DRAIN_S) -> tuple[int, int]:
    """Kill every live process below `root` but those in `spare`, in rounds until none is left.

    Returns (processes killed, live processes not spared still there after `deadline_s`).
    """
    killed: set[int] = set()
    deadline = time.monotonic() + deadline_s
    while True:
        below = descendants(root)
        tree = {root, *below}
        targets = [p for p in below if p not in spare and _alive(p)]
        if not targets:
            return len(killed), 0
        for pid in targets:
            if kill_checked(pid, tree):
                killed.add(pid)
        if time.monotonic() > deadline:
            left = [p for p in descendants(root) if p not in spare and _alive(p)]
            return len(killed), len(left)
        time.sleep(SWEEP_POLL_S)


def _alive(pid: int) -> bool:
    facts = stat(pid)
    return facts is not None and facts[0] not in ("Z", "X")


CPU_FIELDS_AFTER_NAME = slice(11, 15)
"""utime, stime, cutime, cstime in /proc/PID/stat, counted from the state field (fields 14-17)."""


def cpu_ticks(pid: int) -> int:
    """CPU time `pid` used (every thread of it, live or ended) plus what it collected from the
    children it reaped, in clock ticks (`os.sysconf("SC_CLK_TCK")` per second); 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read(STAT_BYTES).rsplit(b")", 1)[1].split()
        return sum(int(f) for f in fields[CPU_FIELDS_AFTER_NAME])
    except (OSError, ValueError, IndexError):
        return 0


def run_delay_ns(pid: int, *, skip_main: bool = False) -> int:
    """The largest run-queue delay among the threads of `pid` (all, or all but its main thread), in
    nanoseconds since each thread started: time it was runnable but waiting for a CPU, field 2 of
    `/proc/PID/task/TID/schedstat`. 0 when gone, when no thread is chosen, or when the kernel keeps
    no scheduler statistics."""
    tids: list[str] = []
    with contextlib.suppress(OSError):
        tids = [t for t in os.listdir(f"/proc/{pid}/task") if not (skip_main and t == str(pid))]
    largest = 0
    for tid in tids:
        with (
            contextlib.suppress(OSError, ValueError, IndexError),
            open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh,
        ):
            largest = max(largest, int(fh.read().split()[1]))
    return largest
