"""What the harness reads of one session process after each run, from the host, without the server.

Contract: a `SessionWatch` holds an open descriptor of the session's `pids.current` (the tasks of
its pids cgroup: processes, their threads and unreaped zombies), so the common check is one pread
(microseconds): exactly two tasks means nothing runs but the session's parent A and interpreter
B. Otherwise `pids()` reads `cgroup.procs` through a fresh descriptor (cgroup v1 caches a
descriptor's process list for a second, so a kept one could miss a new process). `exec_replaced()`
says whether A or B is no longer the program the server forked: the kernel clears PF_FORKNOEXEC in
a process's flags when it calls execve, and no process can set it again (only a fork does, and a
fork makes a new pid). A cell that made its interpreter exec another program (a fake notebook
loop, say, that answers "ok" with invented output for every later run) keeps the same pid and
the original channels; this flag is what shows it. Nothing here kills or decides: `session` does.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os

from thinc_bench.sandbox import _cgroups

# A session's own processes: its parent A and its interpreter B (PID 1 of its namespace).
SESSION_PROCESSES = 2
# include/linux/sched.h: "forked but didn't exec".
PF_FORKNOEXEC = 0x00000040
STAT_BYTES = 4096
# Field 9 of /proc/PID/stat (flags), counted after the ")" that ends the command name.
FLAGS_AFTER_NAME = 6


class SessionWatch:
    """Open descriptors of one session process's pids cgroup and of A's and B's stat files."""

    def __init__(self, pids_group: str) -> None:
        """Raises:
        OSError: the group's pids.current cannot be opened from here."""
        self.group = pids_group
        self._current = os.open(os.path.join(pids_group, "pids.current"), os.O_RDONLY | os.O_CLOEXEC)
        self._own: list[int] = []  # A's and B's pids, once a read showed only them
        self._stat: list[int] = []

    def only_own(self) -> bool:
        """Whether the group holds A and B and nothing else (not a thread, not a zombie)."""
        try:
            if int(os.pread(self._current, 64, 0)) != SESSION_PROCESSES:
                return False
        except (OSError, ValueError):
            return False
        if not self._own:  # learn A and B (the count says no one else is there to be mistaken)
            pids = self.pids()
            if len(pids) != SESSION_PROCESSES:
                return False
            with contextlib.suppress(OSError):
                self._stat = [os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC) for pid in pids]
            self._own = pids
        return True

    def pids(self) -> list[int]:
        """The group's processes now (thread-group ids, in this process's PID namespace)."""
        return _cgroups.procs(self.group)

    def exec_replaced(self) -> bool:
        """Whether A or B has called execve since it was forked (False until they are known)."""
        for fd in self._stat:
            try:
                stat = os.pread(fd, STAT_BYTES, 0)
                flags = int(stat.rsplit(b")", 1)[1].split()[FLAGS_AFTER_NAME])
            except (OSError, ValueError, IndexError):
                continue
            if not flags & PF_FORKNOEXEC:
                return True
        return False

    def close(self) -> None:
        for fd in (self._current, *self._stat):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stat = []
