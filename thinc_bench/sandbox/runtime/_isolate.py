"""Kernel-level confinement of one session process, applied inside the fork-server's children.

Contract: in the session's parent ("A"), `drop_privileges` makes it an unprivileged host uid and
`enter_namespaces` puts it in new user, mount, PID, network and IPC namespaces (its first child, the
reaper "R", is PID 1 of that PID namespace; without namespaces A itself becomes the subreaper of
the session); in the session process ("B", R's child) the other steps cover the harness's paths
(unjailed), make the root read-only, mount a private tmpfs scratch bounded in bytes and inodes on
/tmp (also /dev/shm) and a private /dev/pts, hide /proc, drop every capability and set the
resource limits. Each step reports failure by raising OSError; the server
probes once which steps this kernel allows. Standard library only (runs in the jail).
It does not choose policy (the limits come from the harness) and does not run user code.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import struct
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SYS_MOUNT_SETATTR = 442  # same number on every architecture since Linux 5.12
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
# Capability numbers run 0..40 on current kernels; dropping a few past the end is harmless (EINVAL).
CAP_LAST_PROBE = 63
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# Inside its namespace the session looks like an ordinary user, not root.
SESSION_UID = 1000
SESSION_GID = 1000
# /dev/shm is this folder of the scratch tmpfs, so both share scratch_mb.
SHM_DIR = "/tmp/.dev_shm"
# /proc, and any harness path a session must not read, is covered by an empty read-only tmpfs (a
# fresh procfs is refused under bwrap's masked /proc); one inode, its root, and no room for more.
HIDDEN_OPTIONS = b"size=4k,nr_inodes=1,mode=0555"


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def drop_privileges(uid: int, gid: int) -> None:
    """Become host `uid`/`gid` with no supplementary groups (every capability goes with root).

    The process stays dumpable so that it still owns its /proc/self files (uid_map, setgroups) and
    can map itself into its own user namespace afterwards. A credential change clears the
    parent-death signal: call `die_with_parent` again after this.

    Raises:
        OSError: the caller lacks CAP_SETUID/CAP_SETGID (not root).
    """
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def set_oom_score_adj(value: int) -> None:
    """Set this process's OOM-killer bias (-1000 never, +1000 first); children inherit it.

    Raises:
        OSError: lowering it needs CAP_SYS_RESOURCE (EACCES without it).
    """
    with open("/proc/self/oom_score_adj", "w") as fh:
        fh.write(str(value))


def enter_namespaces() -> None:
    """Unshare user/mount/PID/net/IPC namespaces and map the caller to SESSION_UID inside.

    Raises:
        OSError: the kernel refused (user namespaces disabled, or nesting not allowed here).
    """
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(NAMESPACE_FLAGS), "unshare(user|mnt|pid|net|ipc)")
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{SESSION_UID} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{SESSION_GID} {gid} 1")


def _mount(source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    _check(_libc.mount(source, target, fstype, flags, data), f"mount {target.decode()}")


def make_root_readonly() -> None:
    """Make every mount the session sees private and read-only (one recursive mount_setattr).

    Raises:
        OSError: the kernel lacks mount_setattr or refused it.
    """
    _mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    res = _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, buf, len(attr))
    _check(0 if res == 0 else -1, "mount_setattr(/, rdonly, recursive)")


def set_child_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (they stay in its subtree)."""
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")


def hide_paths(paths: list[str]) -> list[str]:
    """Cover each existing folder in `paths` with an empty read-only tmpfs; returns those covered.

    A folder this process cannot even reach (EACCES, ENOENT) is left alone: it cannot read it either.

    Raises:
        OSError: a reachable folder could not be covered.
    """
    covered = []
    for path in paths:
        try:
            if not os.path.isdir(path):
                continue
            _mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, HIDDEN_OPTIONS)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.ENOENT, errno.ENOTDIR):
                continue
            raise
        covered.append(path)
    return covered


def mount_scratch(scratch_mb: int, scratch_inodes: int) -> None:
    """Mount the private scratch tmpfs on /tmp (with /dev/shm a folder of it) and cover /proc.

    `scratch_inodes` bounds the files and folders in it: each costs kernel memory that no limit
    charges where the session has no memory cgroup (an unprivileged harness).

    Raises:
        OSError: a mount was refused.
    """
    opts = (
        f"size={scratch_mb}m,nr_inodes={scratch_inodes},mode=0700,uid={SESSION_UID},gid={SESSION_GID}"
    ).encode()
    _mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, opts)
    if os.path.isdir("/dev/shm"):  # a folder of the same tmpfs: one budget for both
        os.mkdir(SHM_DIR, 0o700)
        _mount(SHM_DIR.encode(), b"/dev/shm", None, MS_BIND, None)
    _mount(b"tmpfs", b"/proc", b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, HIDDEN_OPTIONS)


def mount_devpts(max_ptys: int) -> None:
    """Give the session its own /dev/pts instance holding at most `max_ptys` terminals.

    /dev/ptmx (a link to pts/ptmx in the jail, the device node elsewhere) then opens this
    instance, so a session neither sees the terminals of others nor drains the host's pty pool.

    Raises:
        OSError: the mount was refused (no mount namespace of our own, or no /dev/pts).
    """
    opts = f"newinstance,ptmxmode=0666,mode=0620,max={max_ptys}".encode()
    _mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC, opts)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> None:
    """Drop every capability (bounding, effective, permitted, inheritable) and forbid regaining any.

    The bounding set needs CAP_SETPCAP to shrink; a process without it (it already gave up root, or
    the jail never granted it) keeps its bounding set, and no_new_privs keeps exec from using it.

    Raises:
        OSError: capset or prctl failed.
    """
    for cap in range(CAP_LAST_PROBE + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err == errno.EPERM:
                break  # no CAP_SETPCAP: nothing in the bounding set can be used (see above)
            if err != errno.EINVAL:  # EINVAL: no such capability on this kernel
                _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset(0)")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def set_limits(limits: dict[str, Any], overhead: int = 1) -> None:
    """Apply the per-process resource limits (soft = hard, so user code cannot raise them).

    At the CPU limit (soft = hard) the kernel SIGKILLs the process; the harness tells it apart from
    other SIGKILLs by the CPU time the process used. RLIMIT_NPROC counts the session's own
    processes above its interpreter too (it binds once the session's uid is not root): `overhead`
    of them, its parent and, with namespaces, its PID namespace's reaper.

    Raises:
        OSError: a limit could not be set (e.g. it is above an inherited hard limit).
    """
    mib = 1024 * 1024
    pairs = [
        (resource.RLIMIT_CPU, int(limits["cpu_time_s"])),
        (resource.RLIMIT_AS, int(limits["memory_mb"]) * mib),
        (resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * mib),
        (resource.RLIMIT_NOFILE, int(limits["open_files"])),
        (resource.RLIMIT_NPROC, int(limits["max_processes"]) + overhead),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in pairs:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
