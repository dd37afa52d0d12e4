"""How the harness launches the fork-server: bubblewrap jail or plain process, what it shows, env.

Contract: `plan_launch(config)` returns the argv/env to start the sandbox's runtime
(`thinc_sandbox_runtime.server`) and whether it is jailed; with `isolation="bwrap"` it raises
`SandboxUnavailable` (with the apt command) when bubblewrap is missing or cannot create namespaces.
It does not start or talk to the server.

What a session can see (docs/sandbox.md, the trust boundary) is built here from an allowlist, never
by hiding things from a full view: the jail's root is an empty tmpfs holding the read-only system
folders (/usr, /bin, /lib...), a few /etc files, the base interpreter's installation (stdlib,
lib-dynload) with every site-packages and dist-packages folder in them covered by an empty
read-only mount, the runtime package alone (`JAIL_RUNTIME`, never the thinc_bench package around
it) and the allowed distributions' entries (`_packages.resolve`) in `JAIL_SITE`. The venv, the
working tree, $HOME, the Hub cache, run directories and data are never bound; a path of the harness
(thinc_bench itself, the Hub cache, the working directory, $HOME) that lies inside a bound folder
gets an empty mount over it all the same. Unjailed (`isolation="none"`, or no bubblewrap), the
import path is the same shape, built of symlinks in a private folder (`_Farm`); files the session's
uid can read stay readable, and with per-session namespaces the harness's own paths are covered in
each session (`hidden` below).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.sandbox import _packages
from thinc_bench.sandbox.config import SandboxConfig
from thinc_bench.sandbox.runtime import PACKAGE_NAME, _cgroups

APT_FIX = "apt-get install -y bubblewrap"
# bwrap's own start-up check runs `true`; a second is plenty even on a loaded 2-core machine.
BWRAP_PROBE_TIMEOUT_S = 10.0
# Where the runtime package and the allowed packages appear inside the jail (read-only); both
# folders are on PYTHONPATH, and nothing else of the harness is.
JAIL_ROOT = "/opt/thinc_sandbox"
JAIL_RUNTIME = f"{JAIL_ROOT}/{PACKAGE_NAME}"
JAIL_SITE = f"{JAIL_ROOT}/site"
# Sessions cover /tmp with their private scratch, so a Python prefix that lives under /tmp -- a CI
# checkout's interpreter, say -- is bound here instead, where no scratch mount hides it.
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
# Where installers put packages under a Python prefix (Debian's dist-packages included): each such
# folder found under a bound path is covered, so only the allowlist's entries are importable.
SITE_PATTERNS = (
    "lib/python3*/site-packages",
    "lib/python3*/dist-packages",
    "lib/python3/dist-packages",
    "lib64/python3*/site-packages",
    "local/lib/python3*/dist-packages",
    "local/lib/python3*/site-packages",
)
# Test/debug switches: "1" makes sessions skip their namespaces, or the Sandbox its cgroups, to
# exercise the degraded paths (the second is what an unprivileged harness has) as root.
NO_NAMESPACES_ENV = "THINC_SANDBOX_NO_NAMESPACES"
NO_CGROUPS_ENV = "THINC_SANDBOX_NO_CGROUPS"
# Unjailed, the private folder of symlinks (the runtime, the allowed packages) lives here, not in
# /tmp, which sessions with namespaces cover with their scratch.
FARM_PARENTS = ("/var/tmp",)
FARM_PREFIX = "thinc-sandbox-"


@dataclass(frozen=True)
class Launch:
    """What to exec for the server, what model code can see, and what to clean up afterwards."""

    argv: list[str]
    env: dict[str, str]
    jailed: bool
    bwrap_problem: str | None
    groups: _cgroups.SandboxGroups = field(default_factory=_cgroups.SandboxGroups)
    visible: _packages.Visible = field(default_factory=_packages.Visible)
    # Unjailed: the private folder of symlinks on the server's import path (removed at close).
    farm: str | None = None

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

    def cleanup(self) -> None:
        """Remove what the launch made on the host (the unjailed symlink folder)."""
        if self.farm is not None:
            _remove_farm(self.farm)


def server_env(pythonpath: str) -> dict[str, str]:
    """The whole environment of the server and its sessions: nothing inherited from the harness."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
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


@functools.lru_cache(maxsize=1)
def bwrap_sizes_tmpfs() -> bool:
    """Whether this bubblewrap bounds a tmpfs it mounts (`--size`, bubblewrap 0.7 and later)."""
    try:
        proc = subprocess.run(
            ["bwrap", "--help"], capture_output=True, text=True, timeout=BWRAP_PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in proc.stdout + proc.stderr


def _size(nbytes: int) -> list[str]:
    return ["--size", str(nbytes)] if bwrap_sizes_tmpfs() else []


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
    """Where a host path of the base Python installation appears inside the jail (moved off /tmp)."""
    if path == "/tmp" or path.startswith("/tmp/"):
        return JAIL_TMP_PREFIXES + path[len("/tmp") :]
    return path


def interpreter() -> str:
    """The base interpreter (a venv's `python` is a link to it, and the venv is never shown)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def python_prefixes() -> list[str]:
    """The base installation's folders (stdlib, lib-dynload, libpython), resolved."""
    exe = interpreter()
    found = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    found.add(os.path.dirname(os.path.dirname(exe)))
    return sorted(found)


def runtime_dir() -> str:
    """The runtime package's folder on the host."""
    return str(Path(__file__).resolve().parent / "runtime")


def _within(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _site_folders(roots: list[str]) -> list[str]:
    """Every package folder of a Python installation under `roots` (and /usr, /usr/local)."""
    found: set[str] = set()
    for root in {*roots, "/usr", "/usr/local"}:
        for pattern in SITE_PATTERNS:
            found.update(
                os.path.realpath(p) for p in glob.glob(os.path.join(root, pattern)) if os.path.isdir(p)
            )
    return sorted(found)


def harness_paths() -> list[str]:
    """Folders of the harness a session must never read, resolved: every copy of thinc_bench on
    the import path, the Hugging Face caches (models, datasets, the Hub), $HOME and the working
    directory (run directories and data live there by default)."""
    home = os.path.expanduser("~")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    hf_home = os.environ.get("HF_HOME") or os.path.join(cache, "huggingface")
    paths = [*_packages.harness_dirs(), hf_home, home, os.getcwd()]
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE"):
        if os.environ.get(var):
            paths.append(os.environ[var])
    return sorted({os.path.realpath(p) for p in paths if p and os.path.realpath(p) != "/"})


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


def _mask(path: str) -> list[str]:
    """bwrap arguments covering `path` with an empty read-only tmpfs (no file can be created in it)."""
    return ["--perms", "0555", *_size(4096), "--tmpfs", path, "--remount-ro", path]


def jail_binds(
    visible: _packages.Visible, groups: _cgroups.SandboxGroups, tmp_bytes: int
) -> tuple[list[str], list[str]]:
    """The bwrap arguments that build the jail's filesystem, and the host paths it covers with an
    empty mount (a package folder, or a harness path inside a bound folder)."""
    args: list[str] = []
    sources: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            sources.append(os.path.realpath(d))
    for f in ETC_FILES:
        args += ["--ro-bind-try", f, f]
    made: set[str] = set()
    prefixes = python_prefixes()
    for p in prefixes:
        if not any(p == d or _within(p, d) for d in SYSTEM_DIRS):
            args += _parent_dirs(jail_path(p), made) + ["--ro-bind", p, jail_path(p)]
            sources.append(p)
    covered = [
        p
        for p in sorted({*_site_folders(prefixes), *harness_paths()})
        if os.path.isdir(p) and any(_within(p, s) for s in sources)
    ]
    for path in covered:
        args += _mask(jail_path(path))
    args += _parent_dirs(JAIL_RUNTIME, made) + ["--ro-bind", runtime_dir(), JAIL_RUNTIME]
    args += ["--perms", "0755", "--dir", JAIL_SITE]
    for entry in visible.entries:
        args += ["--ro-bind", entry.source, f"{JAIL_SITE}/{entry.name}"]
    args += ["--dev", "/dev", "--proc", "/proc", *_size(tmp_bytes), "--tmpfs", "/tmp"]
    for controller, path in groups.session_parents.items():
        args += ["--bind", path, f"{JAIL_CGROUPS}/{controller}"]
    # The jail's root (bwrap's tmpfs holding the folders made above) read-only: without namespaces
    # a session runs as the server's uid, which owns it, and could otherwise add to it.
    args += ["--remount-ro", "/"]
    return args, covered


class _Farm:
    """Unjailed, the session's import path: a private folder holding symlinks to the runtime package
    and to the allowed entries, and nothing else (so `import thinc_bench` finds nothing)."""

    @staticmethod
    def make(visible: _packages.Visible) -> str:
        parent = next((p for p in FARM_PARENTS if os.access(p, os.W_OK | os.X_OK)), tempfile.gettempdir())
        _reap_stale_farms(parent)
        farm = tempfile.mkdtemp(prefix=f"{FARM_PREFIX}{os.getpid()}-", dir=parent)
        try:
            os.symlink(runtime_dir(), os.path.join(farm, PACKAGE_NAME))
            site = os.path.join(farm, "site")
            os.mkdir(site)
            for entry in visible.entries:
                os.symlink(entry.source, os.path.join(site, entry.name))
            for path in (site, farm):
                os.chmod(path, 0o555)  # sessions of other uids walk it; nobody adds to it
        except OSError:
            _remove_farm(farm)
            raise
        return farm


def _reap_stale_farms(parent: str) -> None:
    """Remove the symlink folders of harnesses that died without closing their Sandbox."""
    for path in glob.glob(os.path.join(parent, f"{FARM_PREFIX}*-*")):
        pid = os.path.basename(path)[len(FARM_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            _remove_farm(path)


def _remove_farm(farm: str) -> None:
    """Remove a symlink folder, made read-only for sessions: writable again first (an unprivileged
    owner cannot unlink in a 0555 folder)."""
    for folder in (farm, os.path.join(farm, "site")):
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o755)
    shutil.rmtree(farm, ignore_errors=True)


def plan_launch(config: SandboxConfig, ctrl_fd: int) -> Launch:
    """Decide jail or not and build the server command line.

    Raises:
        SandboxUnavailable: `isolation="bwrap"` was demanded and bubblewrap cannot jail us.
    """
    problem = None if config.isolation == "none" else bwrap_problem()
    if config.isolation == "bwrap" and problem is not None:
        raise SandboxUnavailable(f"SandboxConfig(isolation='bwrap') but {problem}")
    jailed = config.isolation != "none" and problem is None
    visible = _packages.resolve(tuple(config.packages), tuple(config.preload))
    if os.environ.get(NO_CGROUPS_ENV) == "1":
        groups = _cgroups.SandboxGroups({}, {c: f"{NO_CGROUPS_ENV}=1" for c in _cgroups.CONTROLLERS})
    else:
        groups = _cgroups.make_sandbox_groups(config.resolved_total_memory_mb())
    oom_protected = has_capability(CAP_SYS_RESOURCE)
    cgroups = {c: f"{JAIL_CGROUPS}/{c}" if jailed else p for c, p in groups.session_parents.items()}
    server_args = [
        "-m",
        f"{PACKAGE_NAME}.server",
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
        env = server_env(f"{JAIL_ROOT}:{JAIL_SITE}")
        argv = ["bwrap", *_bwrap_namespaces_and_caps(oom_protected), "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        # The jail's /tmp holds the scratch folders of sessions without namespaces: bound in bytes.
        binds, _covered = jail_binds(visible, groups, config.scratch_mb * 2**20 * config.max_sessions)
        argv += binds + ["--chdir", "/tmp", "--", jail_path(interpreter()), *server_args]
        return Launch(argv, env, jailed, problem, groups, visible)
    try:
        farm = _Farm.make(visible)
    except OSError:
        _cgroups.remove_sandbox_groups(groups)
        raise
    env = server_env(f"{farm}:{farm}/site")
    argv = [interpreter(), *server_args, "--hide", json.dumps(unjailed_hidden(visible, farm))]
    return Launch(argv, env, jailed, problem, groups, visible, farm)


def unjailed_hidden(visible: _packages.Visible, farm: str) -> list[str]:
    """Unjailed, the harness paths each session (with namespaces) covers with an empty mount: all
    of `harness_paths()` but a folder holding something the session needs (the interpreter's
    installation, an allowed entry, the symlink folder); thinc_bench itself always (its runtime is
    imported by the server before any session forks)."""
    needed = [*python_prefixes(), farm, *(os.path.realpath(e.source) for e in visible.entries)]
    harness = _packages.harness_dirs()
    return [p for p in harness_paths() if p in harness or not any(n == p or _within(n, p) for n in needed)]


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
