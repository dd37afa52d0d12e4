"""How the harness launches the fork-server: bubblewrap jail or plain process, env, cgroups.

Contract: `plan_launch(config)` returns the argv/env to start `thinc_bench.sandbox.server` and
whether it is jailed; with `isolation="bwrap"` it raises `SandboxUnavailable` (with the apt command)
when bubblewrap is missing or cannot create namespaces. `describe_protections` turns the launch plan
and the server's probe into the protection summary (each line active, or missing with its reason)
that `Sandbox` logs once. The jail shows only read-only system paths, the Python installation and
this package; never the working tree, $HOME or the harness's environment. It does not start or
talk to the server.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import _cgroups
from thinc_bench.sandbox.config import SandboxConfig

APT_FIX = "apt-get install -y bubblewrap"
# bwrap's own start-up check runs `true`; a second is plenty even on a loaded 2-core machine.
BWRAP_PROBE_TIMEOUT_S = 10.0
# Where this package appears inside the jail (read-only); PYTHONPATH points at its parent.
JAIL_PKG_PARENT = "/opt/thinc_sandbox"
# Sessions cover /tmp with their private scratch, so a Python prefix (venv) that lives under /tmp -- a CI
# checkout, say -- is bound here instead, where no scratch mount hides it.
JAIL_TMP_PREFIXES = "/opt/thinc_tmp_prefixes"
# Where the sandbox's cgroups (the parents of the session groups) appear inside the jail.
JAIL_CGROUPS = "/run/thinc_cgroups"
# Capabilities the server keeps in the jail (when root): make a session its own uid (SETUID, SETGID)
# and kill it afterwards (KILL), map uid 0 into a user namespace if that uid drop fails (SETFCAP),
# and create and remove the host scratch folder of a session without namespaces (CHOWN,
# DAC_OVERRIDE). Sessions drop all of them.
JAIL_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETFCAP", "CAP_CHOWN", "CAP_DAC_OVERRIDE")
CAP_SYS_RESOURCE = 24
# System files the interpreter may read; the rest of /etc (shadow, keys, configs) stays hidden.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# Test/debug switch: "1" makes sessions skip their namespaces, to exercise the degraded path.
NO_NAMESPACES_ENV = "THINC_SANDBOX_NO_NAMESPACES"


@dataclass(frozen=True)
class Launch:
    """What to exec for the server, and what the harness must clean up afterwards."""

    argv: list[str]
    env: dict[str, str]
    jailed: bool
    bwrap_problem: str | None
    groups: _cgroups.SandboxGroups = field(default_factory=_cgroups.SandboxGroups)

    @property
    def command(self) -> list[str]:
        """What Popen runs: `argv`, entered into the server's memory group first when there is one.

        The shell joins the group and then execs `argv`, so the server is in it from its first
        instruction, and bwrap's parent is still the harness thread.
        """
        group = self.groups.server_memory
        if group is None:
            return self.argv
        procs = os.path.join(group, "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "thinc-sandbox", procs, *self.argv]


def server_env(pythonpath: str) -> dict[str, str]:
    """The whole environment of the server and its sessions: nothing inherited from the harness."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # One BLAS/OpenMP thread: forking a multi-threaded process is unsafe, and cores are shared.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot jail us here, or None when it can (checked once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed; fix: {APT_FIX}"
    try:
        proc = subprocess.run(
            [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
            capture_output=True,
            text=True,
            timeout=BWRAP_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run ({exc}); fix: {APT_FIX}, and allow user namespaces"
    if proc.returncode != 0:
        return (
            f"bwrap cannot create namespaces here: {proc.stderr.strip()!r}; fix: {APT_FIX}, and allow user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, or run the container with them enabled)"
        )
    return None


def has_capability(cap: int) -> bool:
    """Whether this process holds capability number `cap` (bwrap cannot grant one it lacks)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def jail_path(path: str) -> str:
    """Where a host path of the Python installation appears inside the jail (moved off /tmp)."""
    if path == "/tmp" or path.startswith("/tmp/"):
        return JAIL_TMP_PREFIXES + path[len("/tmp") :]
    return path


def _parent_dirs(dest: str, made: set[str]) -> list[str]:
    """bwrap arguments creating `dest`'s missing ancestors as 0755, so that an unprivileged session
    can walk to a bound path even when the host parent is private (a Python under /root, say)."""
    args: list[str] = []
    parts = Path(dest).parts
    for i in range(2, len(parts)):
        ancestor = str(Path(*parts[:i]))
        if ancestor not in made and not any(
            ancestor == d or ancestor.startswith(d + "/") for d in SYSTEM_DIRS
        ):
            made.add(ancestor)
            args += ["--perms", "0755", "--dir", ancestor]
    return args


def _jail_binds(pkg_dir: Path, groups: _cgroups.SandboxGroups) -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in ETC_FILES:
        args += ["--ro-bind-try", f, f]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes |= {os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    prefixes |= {
        p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()
    }
    made: set[str] = set()
    for p in sorted(prefixes):
        if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS):
            args += _parent_dirs(jail_path(p), made) + ["--ro-bind", p, jail_path(p)]
    pkg_dest = f"{JAIL_PKG_PARENT}/{pkg_dir.name}"
    args += _parent_dirs(pkg_dest, made) + ["--ro-bind", str(pkg_dir), pkg_dest]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for controller, path in groups.session_parents.items():
        args += ["--bind", path, f"{JAIL_CGROUPS}/{controller}"]
    return args


def plan_launch(config: SandboxConfig, ctrl_fd: int) -> Launch:
    """Decide jail or not and build the server command line.

    Raises:
        SandboxUnavailable: `isolation="bwrap"` was demanded and bubblewrap cannot jail us.
    """
    pkg_dir = Path(__file__).resolve().parents[1]  # .../thinc_bench
    problem = None if config.isolation == "none" else bwrap_problem()
    if config.isolation == "bwrap" and problem is not None:
        raise SandboxUnavailable(f"SandboxConfig(isolation='bwrap') but {problem}")
    jailed = config.isolation != "none" and problem is None
    groups = _cgroups.make_sandbox_groups(config.resolved_total_memory_mb())
    oom_protected = has_capability(CAP_SYS_RESOURCE)
    cgroups = {c: f"{JAIL_CGROUPS}/{c}" if jailed else p for c, p in groups.session_parents.items()}
    server_args = [
        "-m",
        "thinc_bench.sandbox.server",
        "--ctrl-fd",
        str(ctrl_fd),
        "--limits",
        json.dumps(config.session_limits()),
        "--preload",
        ",".join(config.preload),
        "--cgroups",
        json.dumps(cgroups),
    ]
    if os.environ.get(NO_NAMESPACES_ENV) == "1":
        server_args.append("--no-namespaces")
    if jailed:
        env = server_env(JAIL_PKG_PARENT)
        argv = ["bwrap", *_bwrap_namespaces_and_caps(oom_protected), "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += _jail_binds(pkg_dir, groups) + ["--chdir", "/tmp", "--", jail_path(sys.executable)]
        argv += server_args
    else:
        env = server_env(str(pkg_dir.parent))
        argv = [sys.executable, *server_args]
    return Launch(argv, env, jailed, problem, groups)


def _bwrap_namespaces_and_caps(oom_protected: bool) -> list[str]:
    common = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.geteuid() != 0:
        return ["--unshare-all", *common]
    # As root, no user namespace for the jail: it would map only uid 0, and the server must be able
    # to hand each session its own unprivileged host uid. The server keeps only JAIL_CAPS (and
    # CAP_SYS_RESOURCE to exempt itself from the OOM killer, when this process holds it: bwrap
    # 0.8 asked for a capability outside its bounding set grants all the others instead).
    caps = [*JAIL_CAPS, "CAP_SYS_RESOURCE"] if oom_protected else list(JAIL_CAPS)
    unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    return [*unshare, *common, *(arg for cap in caps for arg in ("--cap-add", cap))]


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


def describe_protections(launch: Launch, hello: dict[str, Any]) -> list[Protection]:
    """The protections in force and the missing ones with their reason, from the launch plan and
    the server's probe."""
    probe = str(hello.get("probe_error") or "the server's probe failed")
    ns = bool(hello.get("namespaces"))
    groups = launch.groups.problems
    root = os.geteuid() == 0

    def line(name: str, ok: bool, why: str) -> Protection:
        return Protection(name, ok, "" if ok else why)

    return [
        line(
            "bubblewrap jail (only read-only system paths visible; harness files hidden)",
            launch.jailed,
            launch.bwrap_problem or "isolation='none'",
        ),
        Protection("clean environment (no harness variables)", True),
        Protection("rlimits: cpu, address space, file size, open files", True),
        Protection("untrusted control channel: no descriptors accepted, bounded frames, per-run nonce", True),
        line("per-session PID namespace (all session processes die with it)", ns, probe),
        line(
            "nothing outlives its session: every process of it is killed before its slot is reused "
            "(swept through its pids cgroup, else its PID namespace's PID 1 is killed)",
            "pids" in launch.groups.paths or ns,
            groups.get("pids", probe),
        ),
        line("no network, loopback included (per-session net namespace)", ns, probe),
        line(
            "seccomp filter: only AF_UNIX/AF_INET/AF_INET6 sockets (no AF_VSOCK, AF_NETLINK); keyrings, "
            "ptrace, process_vm_*, bpf, perf_event_open, userfaultfd, io_uring, nested user namespaces refused; "
            "own session keyring",
            bool(hello.get("seccomp")),
            str(hello.get("seccomp_error") or probe),
        ),
        line("private size-limited scratch tmpfs; /proc hidden", ns, probe),
        line("read-only filesystem outside scratch", bool(hello.get("ro_root")), probe),
        line("private /dev/pts per session (max_ptys)", bool(hello.get("devpts")), probe),
        line(
            "sessions run as their own unprivileged host uid (host quotas and file modes apply)",
            bool(hello.get("uid_drop")),
            str(hello.get("uid_error") or "the harness is not root"),
        ),
        line(
            "process-count limit (pids cgroup, else RLIMIT_NPROC of the session's own uid)",
            "pids" in launch.groups.paths or bool(hello.get("uid_drop")) or not root,
            groups.get("pids", ""),
        ),
        line(
            "per-session memory cgroup (session_memory_mb): OOM kills stay inside the session",
            "memory" in launch.groups.paths,
            groups.get("memory", ""),
        ),
        line(
            "total memory cap of all sessions (total_memory_mb), the fork-server outside it",
            "memory" in launch.groups.paths,
            groups.get("memory", ""),
        ),
        Protection(
            "fork-server exempt from the host's OOM killer (oom_score_adj -1000)",
            bool(hello.get("oom_protected")),
            ""
            if hello.get("oom_protected")
            else "needs CAP_SYS_RESOURCE, which this host does not grant (sessions still get +500)",
            minor=True,
        ),
        line(
            "per-session CPU share and quota (cpu cgroup, cpus_per_session)",
            "cpu" in launch.groups.paths,
            groups.get("cpu", ""),
        ),
    ]
