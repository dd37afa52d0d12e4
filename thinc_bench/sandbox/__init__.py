"""Stateful, isolated, fast execution of model-written Python (one session per trajectory).

Usage: `with Sandbox(SandboxConfig()) as sb, sb.session() as s: r = s.run(code)` (or
`await s.arun(code)`); `r.status` is ok | error | timeout | memory | killed | infra_error.
Design: one warm fork-server (numpy, sympy... preloaded) runs in a bubblewrap jail built from an
allowlist (read-only system folders, the base interpreter, the runtime package `runtime/` and the
allowed distributions; never thinc_bench, benchmark files, caches or run directories: the answer
key is out of reach, docs/sandbox.md) with a clean env, and forks each session into its own user,
PID, mount, network and IPC namespaces with a private scratch bounded in bytes and files, its own
/dev/pts, read-only root, hidden /proc, no capabilities and rlimits; a reaper (PID 1 of the
session's namespace) collects its orphans. As root, each session also runs as its own unprivileged
host uid and in its own pids, cpu and memory cgroups (a total cap over all sessions leaves the
fork-server out). The session's control socket is untrusted: no descriptors are accepted and any
frame but its run's one "done" kills the session. A seccomp filter limits sockets to
AF_UNIX/AF_INET/AF_INET6 and refuses keyrings, ptrace, bpf, nested user namespaces and the like;
every process of a session is killed before its slot is reused, and every one but its own before a
run's result is reported (through its pids cgroup, else through its process tree in /proc, which
an unprivileged harness can read); the loop ends itself if fds 1-3 are no longer its own pipe and
socket, and one that exec'd another program is killed; a run's time limit leaves the host's load
out (`_clock`); injected failures read as real tracebacks (`render_fault`); statuses never come
from output text, and harness notices never ride in it. `Sandbox.protection_summary()` says which
protections are active for this user and why any is not. A cell may lie about its own result; it
cannot forge another run's.
NOT protected against: kernel exploits through the system calls the filter allows (sessions
share the host kernel), memory-bandwidth and cache contention, kernel memory that no cgroup is
charged for (unix socket buffers), reading world-readable files under the bound system folders,
fcntl read locks on them as a low-bandwidth channel between sessions (kept: sqlite in scratch needs
fcntl locks), and, when the jail is unavailable, reads of any file the session's uid can read.
"""

from thinc_bench.sandbox.config import ExecResult, Isolation, SandboxConfig, StateMode, Status
from thinc_bench.sandbox.faults import render_fault
from thinc_bench.sandbox.pool import Sandbox, SandboxStats
from thinc_bench.sandbox.session import Session

__all__ = [
    "ExecResult",
    "Isolation",
    "Sandbox",
    "SandboxConfig",
    "SandboxStats",
    "Session",
    "StateMode",
    "Status",
    "render_fault",
]
