"""How the harness launches the fork-server: bubblewrap jail or plain process, env, pids cgroup.

Contract: `plan_launch(config)` returns the argv/env to start `thinc_bench.sandbox.server` and
whether it is jailed; with `isolation="bwrap"` it raises `SandboxUnavailable` (with the apt command)
when bubblewrap is missing or cannot create namespaces. `describe_protections` turns the server's
probe into the lists of active and missing protections that `Sandbox` logs once. The jail shows
only read-only system paths, the Python installation and this package; never the working tree,
$HOME or the harness's environment. It does not start or talk to the server.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox.config import SandboxConfig

logger = logging.getLogger(__name__)

APT_FIX = "apt-get install -y bubblewrap"
# bwrap's own start-up check runs `true`; a second is plenty even on a loaded 2-core machine.
BWRAP_PROBE_TIMEOUT_S = 10.0
# Where this package appears inside the jail (read-only); PYTHONPATH points at its parent.
JAIL_PKG_PARENT = "/opt/thinc_sandbox"
# Sessions cover /tmp with their private scratch, so a Python prefix (venv) that lives under /tmp -- a CI
# checkout, say -- is bound here instead, where no scratch mount hides it.
JAIL_TMP_PREFIXES = "/opt/thinc_tmp_prefixes"
# Where the harness's pids cgroup for this sandbox appears inside the jail.
JAIL_CGROUP = "/run/thinc_pids"
PIDS_CGROUP_ROOT = Path("/sys/fs/cgroup/pids")
MEMORY_CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
# Processes leave a cgroup a few milliseconds after they are reaped; a second covers a loaded box.
CGROUP_DRAIN_S = 1.0
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
_cgroup_counter = itertools.count()
# Test/debug switch: "1" makes sessions skip their namespaces, to exercise the degraded path.
NO_NAMESPACES_ENV = "THINC_SANDBOX_NO_NAMESPACES"


@dataclass(frozen=True)
class Launch:
    """What to exec for the server, and what the harness must clean up afterwards."""

    argv: list[str]
    env: dict[str, str]
    jailed: bool
    bwrap_problem: str | None
    cgroup_host_path: str | None
    memory_cgroup_host_path: str | None = None

    @property
    def command(self) -> list[str]:
        """What Popen runs: `argv`, entered into the memory cgroup first when there is one.

        The shell joins the group and then execs `argv`, so the server and every session are in it
        from their first instruction, and bwrap's parent is still the harness thread.
        """
        if self.memory_cgroup_host_path is None:
            return self.argv
        procs = os.path.join(self.memory_cgroup_host_path, "cgroup.procs")
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


def own_cgroup(controller: str, root: Path) -> Path:
    """The harness's own cgroup-v1 folder for `controller`: a sandbox's group nests there, so the
    limits of the container (or slice) the harness runs in still bound the sandbox."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return root
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            nested = root / path.lstrip("/")
            return nested if nested.is_dir() else root
    return root


def reap_stale_cgroups(parent: Path) -> None:
    """Remove the empty groups of harnesses that died without closing their Sandbox (kill -9)."""
    for group in parent.glob("thinc-sandbox-*-*"):
        try:
            pid = int(group.name.split("-")[2])
        except ValueError:
            continue
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue  # ours, or alive (or a reused pid: left for its owner)
        _rmdir_group(group)  # fails while populated: a session outlived its harness


def _new_group(controller: str, root: Path) -> Path | None:
    """A new group for one Sandbox under the harness's own `controller` group; None when not root.

    Raises:
        OSError: the group cannot be created.
    """
    parent = own_cgroup(controller, root)
    if not (parent.is_dir() and os.access(parent, os.W_OK)):
        return None
    reap_stale_cgroups(parent)
    path = parent / f"thinc-sandbox-{os.getpid()}-{next(_cgroup_counter)}"
    path.mkdir(exist_ok=True)
    return path


def make_pids_cgroup() -> str | None:
    """Create a cgroup-v1 pids group for one Sandbox when the harness may (root); else None."""
    try:
        path = _new_group("pids", PIDS_CGROUP_ROOT)
    except OSError:
        return None
    return None if path is None else str(path)


def make_memory_cgroup(limit_mb: int) -> str | None:
    """Create a cgroup-v1 memory group capping the whole sandbox when the harness may (root); else None."""
    path = None
    try:
        path = _new_group("memory", MEMORY_CGROUP_ROOT)
        if path is None:
            return None
        (path / "memory.limit_in_bytes").write_text(str(limit_mb * 2**20))
    except OSError as exc:
        logger.warning(
            "no memory cap for the sandbox: cannot set up %s (%s)", path or MEMORY_CGROUP_ROOT, exc
        )
        if path is not None:
            with contextlib.suppress(OSError):
                path.rmdir()
        return None
    return str(path)


def remove_cgroups(launch: Launch) -> None:
    """Remove a sandbox's pids and memory groups and any session groups left behind, retrying while
    they drain."""
    for path in (launch.cgroup_host_path, launch.memory_cgroup_host_path):
        if path is None:
            continue
        deadline = time.monotonic() + CGROUP_DRAIN_S
        while (exc := _rmdir_group(Path(path))) is not None:
            if time.monotonic() > deadline:
                logger.warning("could not remove cgroup %s: %s", path, exc)
                break
            time.sleep(0.01)


def _rmdir_group(group: Path) -> OSError | None:
    """Remove a group after its session subgroups; the error when it (or one) is still populated."""
    for child in group.glob("s*"):
        if child.is_dir():
            with contextlib.suppress(OSError):  # still populated for a moment; the caller retries
                child.rmdir()
    try:
        group.rmdir()
    except OSError as exc:
        return exc
    return None


def jail_path(path: str) -> str:
    """Where a host path of the Python installation appears inside the jail (moved off /tmp)."""
    if path == "/tmp" or path.startswith("/tmp/"):
        return JAIL_TMP_PREFIXES + path[len("/tmp") :]
    return path


def _jail_binds(pkg_dir: Path, cgroup: str | None) -> list[str]:
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
    for p in sorted(prefixes):
        if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS):
            args += ["--ro-bind", p, jail_path(p)]
    args += ["--ro-bind", str(pkg_dir), f"{JAIL_PKG_PARENT}/{pkg_dir.name}"]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if cgroup is not None:
        args += ["--bind", cgroup, JAIL_CGROUP]
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
    cgroup = make_pids_cgroup()
    memory = make_memory_cgroup(config.resolved_total_memory_mb())
    limits = {
        k: getattr(config, k)
        for k in ("cpu_time_s", "memory_mb", "file_size_mb", "scratch_mb", "open_files", "max_processes")
    }
    server_args = [
        "-m",
        "thinc_bench.sandbox.server",
        "--ctrl-fd",
        str(ctrl_fd),
        "--limits",
        json.dumps(limits),
        "--preload",
        ",".join(config.preload),
    ]
    if os.environ.get(NO_NAMESPACES_ENV) == "1":
        server_args.append("--no-namespaces")
    if jailed:
        env = server_env(JAIL_PKG_PARENT)
        argv = [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--clearenv",
        ]
        if os.geteuid() == 0:
            # Mapping the jail's uid 0 into a session's user namespace needs CAP_SETFCAP (Linux >= 5.12).
            argv += ["--cap-add", "CAP_SETFCAP"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += _jail_binds(pkg_dir, cgroup) + [
            "--chdir",
            "/tmp",
            "--",
            jail_path(sys.executable),
            *server_args,
        ]
        if cgroup is not None:
            argv += ["--pids-cgroup", JAIL_CGROUP]
    else:
        env = server_env(str(pkg_dir.parent))
        argv = [sys.executable, *server_args] + (["--pids-cgroup", cgroup] if cgroup else [])
    return Launch(argv, env, jailed, problem, cgroup, memory)


def describe_protections(launch: Launch, hello: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Split the protections into (active, missing) from the launch plan and the server's probe."""
    checks = [
        (launch.jailed, "bubblewrap jail (only read-only system paths visible; harness files hidden)"),
        (True, "clean environment (no harness variables)"),
        (True, "rlimits: cpu, address space, file size, open files"),
        (bool(hello.get("namespaces")), "per-session PID namespace (all session processes die with it)"),
        (bool(hello.get("namespaces")), "no network, loopback included (per-session net namespace)"),
        (bool(hello.get("namespaces")), "private size-limited scratch tmpfs; /proc hidden"),
        (bool(hello.get("ro_root")), "read-only filesystem outside scratch"),
        (
            bool(hello.get("pids_cgroup")) or os.geteuid() != 0,
            "process-count limit (pids cgroup or RLIMIT_NPROC)",
        ),
        (
            launch.memory_cgroup_host_path is not None or os.geteuid() != 0,
            "memory cap for the whole sandbox (memory cgroup, root only)",
        ),
    ]
    active = [name for ok, name in checks if ok]
    missing = [name for ok, name in checks if not ok]
    return active, missing
