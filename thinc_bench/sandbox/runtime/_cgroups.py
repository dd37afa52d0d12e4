"""cgroup-v1 groups of one Sandbox (made by the harness) and of each session (made by the server).

Layout, each nested in the harness's own group of that controller so a container's limits still
bind: `pids/thinc-sandbox-PID-N/sSID` (process count; also how every process of a session is found),
`cpu/thinc-sandbox-PID-N/sSID` (an equal share and a quota per session) and `memory/thinc-sandbox-PID-N/{server, sessions/sSID}`: the
total cap sits on `sessions`, the fork-server lives in `server`, so an OOM kill at either level
only ever picks a session process. Creating groups needs root; without it (or on a cgroup-v2
host) each controller is None with the reason. Standard library only: the server imports it.
It does not decide limits (the config does); it kills only in `sweep` (every process of one
session's group, when the server ends that session), `sweep_others` (all but its own processes,
after each run) and `remove_sandbox_groups` (what is left when
a Sandbox closes).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory", "cpu")
GROUP_PREFIX = "thinc-sandbox-"
SERVER_GROUP = "server"
SESSIONS_GROUP = "sessions"
# One session weighs as much as one busy process; the whole sandbox as one busy process per core.
SHARES_PER_CPU = 1024
CFS_PERIOD_US = 100_000
# Processes leave a cgroup a few milliseconds after they are reaped; a second covers a loaded box.
DRAIN_S = 1.0
# Between rounds of a sweep, killed processes finish exiting.
SWEEP_POLL_S = 0.001
_counter = itertools.count()


@dataclass(frozen=True)
class SandboxGroups:
    """Host folders of one Sandbox's groups per controller; `problems` says why one is missing."""

    paths: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def session_parents(self) -> dict[str, str]:
        """Where the server creates each session's group, per controller."""
        return {c: os.path.join(p, SESSIONS_GROUP) if c == "memory" else p for c, p in self.paths.items()}

    @property
    def server_memory(self) -> str | None:
        """The memory group the fork-server runs in (outside the sessions' caps), if any."""
        top = self.paths.get("memory")
        return None if top is None else os.path.join(top, SERVER_GROUP)


def own_group(controller: str, root: Path = ROOT) -> Path:
    """The harness's own cgroup-v1 folder for `controller` (the controller's root if unknown)."""
    base = root / controller
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return base
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            nested = base / path.lstrip("/")
            return nested if nested.is_dir() else base
    return base


def make_sandbox_groups(total_memory_mb: int) -> SandboxGroups:
    """Create the groups of one Sandbox where the harness may; the rest go to `problems`."""
    paths: dict[str, str] = {}
    problems: dict[str, str] = {}
    for controller in CONTROLLERS:
        parent = own_group(controller)
        if not parent.is_dir():
            problems[controller] = f"no cgroup-v1 {controller} controller at {ROOT / controller}"
            continue
        if not os.access(parent, os.W_OK):
            problems[controller] = f"{parent} is not writable (cgroups need root)"
            continue
        reap_stale(parent)
        path = parent / f"{GROUP_PREFIX}{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir(exist_ok=True)
            _configure(controller, path, total_memory_mb)
        except OSError as exc:
            problems[controller] = f"cannot set up {path}: {exc}"
            remove_tree(path)
            continue
        paths[controller] = str(path)
    return SandboxGroups(paths, problems)


def _configure(controller: str, path: Path, total_memory_mb: int) -> None:
    if controller == "memory":
        (path / SERVER_GROUP).mkdir(exist_ok=True)
        (path / SESSIONS_GROUP).mkdir(exist_ok=True)
        write(str(path / SESSIONS_GROUP), "memory.limit_in_bytes", total_memory_mb * 2**20)
    elif controller == "cpu":
        write(str(path), "cpu.shares", SHARES_PER_CPU * (os.cpu_count() or 1))


def make_session_groups(parents: dict[str, str], sid: int, limits: dict[str, float]) -> dict[str, str]:
    """Create session `sid`'s group under each controller's parent and set its limits.

    Raises:
        OSError: a group could not be created or configured (none is left behind).
    """
    made: dict[str, str] = {}
    try:
        for controller, parent in parents.items():
            path = os.path.join(parent, f"s{sid}")
            os.makedirs(path, exist_ok=True)
            made[controller] = path
            _limit_session(controller, path, limits)
    except OSError:
        for path in made.values():
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    return made


def _limit_session(controller: str, path: str, limits: dict[str, float]) -> None:
    if controller == "pids":
        # The session's own processes above its interpreter (A, and R with namespaces) come on top.
        write(path, "pids.max", int(limits["max_processes"]) + int(limits.get("overhead", 1)))
    elif controller == "memory":
        write(path, "memory.limit_in_bytes", int(limits["session_memory_mb"]) * 2**20)
    elif controller == "cpu":
        write(path, "cpu.cfs_period_us", CFS_PERIOD_US)
        try:
            write(path, "cpu.cfs_quota_us", max(1000, int(float(limits["cpus_per_session"]) * CFS_PERIOD_US)))
        except OSError as exc:  # EINVAL: above the quota of a group we sit in, which then binds instead
            if exc.errno != errno.EINVAL:
                raise


def join(paths: list[str]) -> None:
    """Move the calling process into every group in `paths`.

    Raises:
        OSError: a group refused it (gone, or its pids.max already reached).
    """
    for path in paths:
        write(path, "cgroup.procs", 0)


def write(path: str, name: str, value: object) -> None:
    """Write one cgroup control file.

    Raises:
        OSError: the kernel refused the value or the file is missing.
    """
    with open(os.path.join(path, name), "w") as fh:
        fh.write(str(value))


def memory_headroom(path: str) -> int | None:
    """Bytes a memory group may still charge before its limit (None when it cannot be read)."""
    try:
        with open(os.path.join(path, "memory.limit_in_bytes")) as fh:
            limit = int(fh.read())
        with open(os.path.join(path, "memory.usage_in_bytes")) as fh:
            usage = int(fh.read())
    except (OSError, ValueError):
        return None
    return limit - usage


def memory_events(path: str) -> dict[str, int]:
    """OOM kills in this memory group (`oom_kill`, counted on the victim's own group) and how often
    its limit was hit (`failcnt`); empty when the group cannot be read."""
    try:
        with open(os.path.join(path, "memory.oom_control")) as fh:
            fields = dict(line.split() for line in fh if line.strip())
        with open(os.path.join(path, "memory.failcnt")) as fh:
            failcnt = int(fh.read())
    except (OSError, ValueError):
        return {}
    return {"oom_kill": int(fields.get("oom_kill", 0)), "failcnt": failcnt}


def procs(path: str) -> list[int]:
    """Processes (thread-group ids) in a group, as this process's PID namespace numbers them."""
    try:
        with open(os.path.join(path, "cgroup.procs")) as fh:
            return [int(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return []


def sweep(pids_group: str, known: set[int]) -> tuple[int, int]:
    """Kill every process of one session's pids group and wait until the group is empty.

    Rounds of SIGKILL to every member until none is left: a killed process cannot fork any more,
    and pids.max bounds how many can appear between two rounds, so it converges (one round with a
    PID namespace, whose PID 1 takes the rest with it). A freezer group would make it one round
    always, but joining a fourth cgroup-v1 group cost session start ~15 ms under load (measured:
    perf/sandbox.py 1.31x with it, 0.98x without). Returns (processes killed that are not in
    `known`, processes still in the group after DRAIN_S); `known` holds the session's own processes
    (parent, reaper, interpreter), so the first number counts what the session's code left running.
    """
    return _kill_rounds(pids_group, spare=set(), known=known)


def sweep_others(pids_group: str, keep: set[int]) -> tuple[int, int]:
    """Kill every process of one session's pids group except `keep` (its parent, reaper and interpreter),
    after a run: what the run's code started must not act in a later run. Returns (processes
    killed, processes other than `keep` still in the group after DRAIN_S)."""
    return _kill_rounds(pids_group, spare=keep, known=keep)


def _kill_rounds(pids_group: str, *, spare: set[int], known: set[int]) -> tuple[int, int]:
    """Rounds of SIGKILL to every member of the group not in `spare` until none is left or DRAIN_S
    passed. Returns (members killed that are not in `known`, members not in `spare` still there)."""
    seen: set[int] = set()
    deadline = time.monotonic() + DRAIN_S
    while targets := [pid for pid in procs(pids_group) if pid not in spare]:
        for pid in targets:
            if pid not in known:
                seen.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            break
        time.sleep(SWEEP_POLL_S)
    return len(seen), len([pid for pid in procs(pids_group) if pid not in spare])


def kill_tree(path: Path) -> None:
    """SIGKILL every process in a group and its subgroups (what a dead server left behind)."""
    if not path.is_dir():
        return
    for group in [path, *(p for p in path.rglob("*") if p.is_dir())]:
        for pid in procs(str(group)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def remove_tree(path: Path) -> OSError | None:
    """Remove a group after its subgroups, deepest first; the error if one is still populated."""
    error = None
    if path.is_dir():
        for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                child.rmdir()
            except OSError as exc:
                error = exc
    try:
        path.rmdir()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return error or exc
    return None


def remove_sandbox_groups(groups: SandboxGroups) -> str | None:
    """Remove a Sandbox's groups, retrying while its processes drain; the last problem, if any."""
    problem = None
    if "pids" in groups.paths:  # what a dead server's sessions left (unjailed: no PID namespace)
        kill_tree(Path(groups.paths["pids"]))
    for path in groups.paths.values():
        deadline = time.monotonic() + DRAIN_S
        while (exc := remove_tree(Path(path))) is not None:
            if time.monotonic() > deadline:
                problem = f"could not remove cgroup {path}: {exc}"
                break
            time.sleep(0.01)
    return problem


def reap_stale(parent: Path) -> None:
    """Remove the groups of harnesses that died without closing their Sandbox (kill -9)."""
    for group in parent.glob(f"{GROUP_PREFIX}*-*"):
        try:
            pid = int(group.name[len(GROUP_PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue  # ours, or alive (or a reused pid: left for its owner)
        with contextlib.suppress(OSError):
            remove_tree(group)  # fails while populated: a session outlived its harness
