"""The protection summary: each guarantee of the sandbox, whether it holds for this user on this
host, and, when it does not, why and what it would take.

Contract: `describe(launch, hello)` turns the launch plan and the server's probe into `Protection`
lines, one per guarantee, in the words docs/sandbox.md uses; `Sandbox` logs them once (INFO when all
that contain a session hold, a WARNING naming only what is missing) and records them in config.json
(the report's header shows them). A line is active only when the mechanism behind it is in force
for the current user: nothing is claimed for root that an unprivileged harness does not have.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from thinc_bench.sandbox._jail import Launch
from thinc_bench.sandbox._watch import proc_tree_problem, schedstat_problem

NEEDS_ROOT = "needs root (cgroup v1 controllers the harness can write)"


@dataclass(frozen=True)
class Protection:
    """One line of the protection summary: what it is, whether it is active, and why not.

    `minor`: its absence leaves every session contained and the user has nothing to do about it
    (a host that withholds a capability), so it is logged at INFO, not as a warning; config.json
    records it like every other line."""

    name: str
    active: bool
    why: str = ""
    minor: bool = False


def _line(name: str, ok: bool, why: str) -> Protection:
    return Protection(name, ok, "" if ok else why)


def describe(launch: Launch, hello: dict[str, Any]) -> list[Protection]:
    """The protections in force and the missing ones with their reason."""
    probe = str(hello.get("probe_error") or "the server's probe failed")
    ns = bool(hello.get("namespaces"))
    groups = launch.groups.problems
    pids_group = "pids" in launch.groups.paths
    tree = proc_tree_problem()
    root = os.geteuid() == 0
    unjailed_why = (
        f"{launch.bwrap_problem or 'isolation=none'}: model code can read every file the session's "
        "uid can read, benchmark files and the Hub cache included"
    )
    return [
        _line(
            "bubblewrap jail: only the system folders, the base interpreter, the sandbox runtime and "
            "the allowed packages are visible (no harness, benchmarks, data, caches or run directories)",
            launch.jailed,
            unjailed_why,
        ),
        Protection(
            "import path: the sandbox runtime and the allowed packages only (thinc_bench is not importable)",
            True,
        ),
        _line(
            "harness folders out of sight (thinc_bench, the Hub cache, $HOME, the working directory): "
            "never bound in the jail; unjailed, covered in each session where they hold nothing it needs",
            launch.jailed or ns,
            probe,
        ),
        Protection("clean environment (no harness variables)", True),
        Protection("rlimits: cpu, address space, file size, open files", True),
        Protection("untrusted control channel: no descriptors accepted, bounded frames, per-run nonce", True),
        _line("per-session PID namespace (all session processes die with it)", ns, probe),
        _line(
            "nothing outlives its session: every process of it is killed before its slot is reused "
            "(swept through its pids cgroup, else its PID namespace's reaper is killed, else its "
            "parent kills every process below it)",
            pids_group or ns or tree is None,
            tree or probe,
        ),
        _line(
            "nothing a run starts outlives the run: every process of the session but its own is killed "
            "before the run's result (through its pids cgroup, else through its process tree in /proc)",
            pids_group or tree is None,
            tree or "",
        ),
        _line(
            "an interpreter that exec'd another program is caught before it can answer for a later run "
            "(PF_FORKNOEXEC in /proc/PID/stat)",
            pids_group or tree is None,
            tree or "",
        ),
        Protection(
            "orphans reaped inside each session (its PID namespace's reaper, else its parent as child "
            "subreaper): zombies never count against its process limit",
            True,
        ),
        _line(
            "time limit charged without the host's load (run-queue delay from /proc/PID/schedstat "
            "left out; a run the host starves until the wall-clock backstop is infra_error)",
            schedstat_problem() is None and tree is None,
            schedstat_problem() or tree or "",
        ),
        _line("no network, loopback included (per-session net namespace)", ns, probe),
        _line(
            "seccomp filter: only AF_UNIX/AF_INET/AF_INET6 sockets (no AF_VSOCK, AF_NETLINK); keyrings, "
            "ptrace, process_vm_*, bpf, perf_event_open, userfaultfd, io_uring, nested user namespaces refused; "
            "own session keyring",
            bool(hello.get("seccomp")),
            str(hello.get("seccomp_error") or probe),
        ),
        _line(
            "private scratch tmpfs bounded in bytes (scratch_mb) and files (scratch_inodes); /proc hidden",
            ns,
            f"{probe}: without per-session namespaces the scratch folders share the jail's /tmp, "
            "which bubblewrap 0.8 cannot bound in files",
        ),
        _line("read-only filesystem outside scratch", bool(hello.get("ro_root")), probe),
        _line("private /dev/pts per session (max_ptys)", bool(hello.get("devpts")), probe),
        _line(
            "sessions run as their own unprivileged host uid (host quotas and file modes apply)",
            bool(hello.get("uid_drop")),
            str(hello.get("uid_error") or "the harness is not root, so sessions run as its uid"),
        ),
        _line(
            "process-count limit (pids cgroup, else RLIMIT_NPROC of the session's own uid or user namespace)",
            pids_group or bool(hello.get("uid_drop")) or not root or ns,
            groups.get("pids", ""),
        ),
        _line(
            "per-session memory cgroup (session_memory_mb): OOM kills stay inside the session",
            "memory" in launch.groups.paths,
            f"{groups.get('memory', '')}; {NEEDS_ROOT}: each process keeps its address-space limit "
            "(memory_mb), but kernel memory and the total of a session's processes are not bounded",
        ),
        _line(
            "total memory cap of all sessions (total_memory_mb), the fork-server outside it",
            "memory" in launch.groups.paths,
            f"{groups.get('memory', '')}; {NEEDS_ROOT}",
        ),
        Protection(
            "fork-server exempt from the host's OOM killer (oom_score_adj -1000)",
            bool(hello.get("oom_protected")),
            ""
            if hello.get("oom_protected")
            else "needs CAP_SYS_RESOURCE, which this host does not grant (sessions still get +500)",
            minor=True,
        ),
        _line(
            "per-session CPU share and quota (cpu cgroup, cpus_per_session)",
            "cpu" in launch.groups.paths,
            f"{groups.get('cpu', '')}; {NEEDS_ROOT}: processes a session leaves spinning are still killed "
            "after each run, but while it runs it may use every core",
        ),
    ]
