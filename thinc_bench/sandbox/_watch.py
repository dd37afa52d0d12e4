"""What the harness reads of one session process after each run, from the host, without the server.

Contract: two watches, one question: does anything of the session run besides its own processes (A,
R with namespaces, and the interpreter B), and has one of those exec'd another program?

`SessionWatch` (root, a pids cgroup per session) holds an open descriptor of the session's
`pids.current` (its processes, their threads and unreaped zombies), so the common check is one pread
(microseconds). Otherwise `pids()` reads `cgroup.procs` through a fresh descriptor (cgroup v1 caches
a descriptor's process list for a second, so a kept one could miss a new process).

`ProcWatch` (every harness: what an unprivileged one has) starts from B's pid in the harness's PID
namespace, which the kernel states on B's first frame (SO_PASSCRED), and reads the session's process
tree: every process a session starts stays below its reaper (R, PID 1 of its PID namespace; or A,
its child subreaper, without namespaces), so "B's threads have no live child and the reaper's only
child is B" means nothing else runs; `sweep()` kills the rest of the tree (`_procs.kill_tree`, each
kill through a checked pidfd). It also gives the run clock the session's run-queue delay (time the
host's load kept its runnable tasks off a CPU).

`exec_replaced()` (both) says whether one of the session's own processes is no longer the program
the server forked: the kernel clears PF_FORKNOEXEC in a process's flags when it calls execve, and no
process can set it again (only a fork does, and a fork makes a new pid). A cell that made its
interpreter exec another program (a fake notebook loop, say, that answers "ok" with invented output
for every later run) keeps the same pid and the original channels; this flag is what shows it.
Nothing here decides: `session` does. Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import os

from thinc_bench.sandbox.runtime import _cgroups, _procs


class SessionWatch:
    """Open descriptors of one session process's pids cgroup and of its own processes' stat files."""

    def __init__(self, pids_group: str, own: int) -> None:
        """`own`: how many processes the session has of its own (A, R, B).

        Raises:
            OSError: the group's pids.current cannot be opened from here."""
        self.group = pids_group
        self.own_count = own
        self._current = os.open(os.path.join(pids_group, "pids.current"), os.O_RDONLY | os.O_CLOEXEC)
        self._own: list[int] = []  # the session's own pids, once a read showed only them
        self._stat: list[int] = []

    def only_own(self) -> bool:
        """Whether the group holds the session's own processes and nothing else (not a thread, not
        a zombie)."""
        try:
            if int(os.pread(self._current, 64, 0)) != self.own_count:
                return False
        except (OSError, ValueError):
            return False
        if not self._own:  # learn them (the count says no one else is there to be mistaken)
            pids = self.pids()
            if len(pids) != self.own_count:
                return False
            with contextlib.suppress(OSError):
                self._stat = [os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC) for pid in pids]
            self._own = pids
        return True

    def pids(self) -> list[int]:
        """The group's processes now (thread-group ids, in this process's PID namespace)."""
        return _cgroups.procs(self.group)

    def exec_replaced(self) -> bool:
        """Whether one of the session's own processes has called execve since it was forked (False
        until they are known)."""
        return _exec_replaced(self._stat)

    def close(self) -> None:
        for fd in (self._current, *self._stat):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._stat = []


class ProcWatch:
    """A session's process tree read through /proc, from its interpreter's pid (host numbering)."""

    def __init__(self, interpreter: int, namespaces: bool) -> None:
        """Raises:
        OSError: B's /proc entry cannot be read from here (gone, or another uid without CAP_SYS_PTRACE)."""
        self.interpreter = interpreter
        self._stat: list[int] = []
        try:
            self._stat.append(_open_stat(interpreter))
            _state, parent, _flags = _procs.parse_stat(os.pread(self._stat[0], _procs.STAT_BYTES, 0))
            # With namespaces B's parent is R, the namespace's reaper, and R's is A; without, A.
            self.reaper = parent
            self._stat.append(_open_stat(parent))
            if namespaces:
                _s, grandparent, _f = _procs.parse_stat(os.pread(self._stat[1], _procs.STAT_BYTES, 0))
                self._stat.append(_open_stat(grandparent))
            self._children = _open_children(interpreter)
            self._schedstat = os.open(
                f"/proc/{interpreter}/task/{interpreter}/schedstat", os.O_RDONLY | os.O_CLOEXEC
            )
        except (OSError, ValueError, IndexError):
            self.close()
            raise

    def only_own(self) -> bool:
        """Whether nothing runs in the session but its own processes: B has one thread and no child,
        the reaper's only child is B (a few preads; a zombie of B's counts as something)."""
        try:
            if os.pread(self._children, 4096, 0).strip():
                return False
            if len(os.listdir(f"/proc/{self.interpreter}/task")) != 1:
                return False
        except OSError:
            return False
        return _procs.children(self.reaper) == [self.interpreter]

    def sweep(self) -> tuple[int, int]:
        """Kill every live process of the session but its own. Returns (killed, still there)."""
        return _procs.kill_tree(self.reaper, spare={self.interpreter})

    def exec_replaced(self) -> bool:
        """Whether B, its reaper or A has called execve since it was forked."""
        return _exec_replaced(self._stat)

    def main_delay_ns(self) -> int:
        """B's main thread's run-queue delay since it started, in nanoseconds (one pread): what
        the run clock reads when a run begins."""
        try:
            return int(os.pread(self._schedstat, 256, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return 0

    def cpu_s(self) -> float:
        """CPU seconds the whole session has used: every live process below its reaper (the reaper
        and the interpreter included) with its threads, and what each collected from the children it
        reaped, so a process that ended still counts once its parent (or the reaper) reaped it."""
        tree = [self.reaper, *_procs.descendants(self.reaper)]
        return sum(_procs.cpu_ticks(pid) for pid in tree) / _CLOCK_TICKS

    def run_delay_ns(self) -> tuple[int, int]:
        """(B's main thread's run-queue delay, the largest of every other live task of the session's),
        in nanoseconds since each task started: the run clock subtracts the first at a run's start
        and charges the run with none of it (host load, not the code's doing)."""
        main = self.main_delay_ns()
        others = [
            _procs.run_delay_ns(pid)
            for pid in _procs.descendants(self.interpreter)
            if pid != self.interpreter
        ]
        others.append(_procs.run_delay_ns(self.interpreter, skip_main=True))
        return main, max(others)

    def close(self) -> None:
        for fd in (*self._stat, getattr(self, "_children", -1), getattr(self, "_schedstat", -1)):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._stat = []
        self._children = self._schedstat = -1


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _open_stat(pid: int) -> int:
    return os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)


def _open_children(pid: int) -> int:
    return os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY | os.O_CLOEXEC)


def _exec_replaced(stat_fds: list[int]) -> bool:
    for fd in stat_fds:
        try:
            _state, _parent, flags = _procs.parse_stat(os.pread(fd, _procs.STAT_BYTES, 0))
        except (OSError, ValueError, IndexError):
            continue
        if not flags & _procs.PF_FORKNOEXEC:
            return True
    return False


@functools.lru_cache(maxsize=1)
def proc_tree_problem() -> str | None:
    """Why this kernel cannot show a session's process tree (no /proc/PID/task/TID/children, or no
    pidfds), or None when it can."""
    pid = os.getpid()
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return "this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)"
    try:
        os.close(os.pidfd_open(pid))
    except (AttributeError, OSError) as exc:
        return f"no pidfds here ({exc}; Linux 5.3 and Python 3.9 have them)"
    return None


@functools.lru_cache(maxsize=1)
def schedstat_problem() -> str | None:
    """Why this kernel keeps no run-queue delay per task (/proc/PID/schedstat), or None."""
    try:
        with open(f"/proc/{os.getpid()}/schedstat", "rb") as fh:
            int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return "this kernel keeps no scheduler statistics (/proc/PID/schedstat, CONFIG_SCHED_INFO)"
    return None
