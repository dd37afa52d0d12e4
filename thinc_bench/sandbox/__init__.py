"""Stateful, isolated, fast execution of model-written Python (one session per trajectory).

Usage: `with Sandbox(SandboxConfig()) as sb, sb.session() as s: r = s.run(code)` (or
`await s.arun(code)`); `r.status` is ok | error | timeout | memory | killed | infra_error.
Design: one warm fork-server (numpy, sympy... preloaded) runs in a bubblewrap jail (read-only
system paths, no harness files, clean env, no network) and forks each session into its own user,
PID, mount, network and IPC namespaces with a private tmpfs scratch, read-only root, hidden /proc,
no capabilities and rlimits; a per-sandbox pids cgroup bounds processes when running as root.
NOT protected against: kernel exploits (sessions share the host kernel; no seccomp filter), CPU
and memory-bandwidth contention between sessions, total RAM across many sessions (the address
space limit is per process), reading world-readable files under the bound Python installation
and system paths, and, when the jail is unavailable, reads of any file the harness user can read.
"""

from thinc_bench.sandbox.config import ExecResult, Isolation, SandboxConfig, StateMode, Status
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
]
