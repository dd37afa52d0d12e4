"""The seccomp filter of a session process: a few system calls and socket families refused.

Contract: `install()` loads, for this process and every thread and child it makes later, a
classic-BPF filter that refuses with EPERM the calls that reach kernel objects the namespaces do
not cover (`keyctl`, `add_key`, `request_key`: keyrings; `ptrace`, `process_vm_readv/writev`;
`bpf`, `perf_event_open`, `userfaultfd`; `io_uring_*`, whose socket operations would pass around
the socket check), and `socket`/`socketpair` of any family but AF_UNIX, AF_INET and AF_INET6 with
EAFNOSUPPORT (what the kernel answers for a family it lacks, so libraries fall back as usual),
`unshare` and `clone` asking for a new user namespace (CLONE_NEWUSER) with EPERM, and `clone3`
with ENOSYS, as Docker's default profile does: its flags sit behind a pointer seccomp cannot read,
and glibc then falls back to `clone`, which the filter can inspect (threads and subprocesses keep
working). Inside a user namespace of its own a session held the capabilities to set socket
buffers past its memory cgroup (283 MiB of TCP buffers in a 128 MiB session, from the host's
pool). And `flock` with ENOLCK: a lock taken on a read-only file outside scratch (the stdlib's os.py)
would block every other session and host process locking it, and seccomp cannot tell files apart
(fcntl record locks stay: a read lock needs only read access but blocks only writers, and no one
writes the bound system files).
AF_VSOCK is the channel to a virtual machine's host; AF_NETLINK reaches kernel subsystems (audit,
uevents, ...) of which only routing is namespaced, and nothing a ThinC block does needs it (glibc's
getaddrinfo falls back when it is refused); raw packet families need capabilities sessions lack.
Calls of another ABI (i386 or x32 on x86_64) are refused whole, so they cannot go around the
table. The program is assembled here (x86_64 and aarch64 numbers) because the only Python binding
on PyPI (pyseccomp 0.1.2) is unmaintained since 2021; `program()` is pure, for tests.
Standard library only (runs in the jail). Needs no_new_privs (set by `_isolate.drop_capabilities`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import struct

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
# Classic BPF opcodes (linux/bpf_common.h).
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16  # both architectures are little-endian
X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
ALLOWED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)
REFUSED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip


class Arch:
    """One architecture's audit number and system call numbers (from its unistd table)."""

    def __init__(self, audit: int, numbers: dict[str, int], x32: bool) -> None:
        self.audit = audit
        self.numbers = numbers
        self.x32 = x32


ARCHES = {
    "x86_64": Arch(
        0xC000003E,
        {
            "socket": 41,
            "socketpair": 53,
            "ptrace": 101,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "flock": 73,
            "clone": 56,
            "unshare": 272,
            "clone3": 435,
        },
        x32=True,
    ),  # fmt: skip
    "aarch64": Arch(
        0xC00000B7,
        {
            "socket": 198,
            "socketpair": 199,
            "ptrace": 117,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "flock": 32,
            "clone": 220,
            "unshare": 97,
            "clone3": 435,
        },
        x32=False,
    ),  # fmt: skip
}
KEYCTL_JOIN_SESSION_KEYRING = 1


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(arch: Arch) -> bytes:
    """The filter for `arch`, as the kernel's array of struct sock_filter (jumps only go forward).

    Layout: 0 load arch; 1 native? skip 2; 2 refuse; 3 load nr; then one check per entry (x32 bit,
    each refused call, flock, clone3, clone and unshare, socket and socketpair); A allow; A+1
    refuse; A+2 refuse flock; A+3 clone3 ENOSYS; A+4 load the flags; A+5 CLONE_NEWUSER set? A+6
    refuse : A+7 allow; A+8 load the family; one jeq per allowed family to the last allow; refuse
    the family; allow.
    """
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    checks: list[tuple[int, int, str]] = [(BPF_JGE_K, X32_SYSCALL_BIT, "deny")] if arch.x32 else []
    checks += [(BPF_JEQ_K, arch.numbers[name], "deny") for name in REFUSED]
    checks += [(BPF_JEQ_K, arch.numbers["flock"], "nolock")]
    checks += [(BPF_JEQ_K, arch.numbers["clone3"], "nosys")]
    checks += [(BPF_JEQ_K, arch.numbers[name], "userns") for name in ("clone", "unshare")]
    checks += [(BPF_JEQ_K, arch.numbers[name], "family") for name in ("socket", "socketpair")]
    allow = 4 + len(checks)
    targets = {"deny": allow + 1, "nolock": allow + 2, "nosys": allow + 3, "userns": allow + 4}
    targets["family"] = allow + 8
    out = [
        _ins(BPF_LD_W_ABS, OFFSET_ARCH),
        _ins(BPF_JEQ_K, arch.audit, jt=1),
        _ins(BPF_RET_K, eperm),
        _ins(BPF_LD_W_ABS, OFFSET_NR),
    ]
    for i, (op, value, kind) in enumerate(checks):
        out.append(_ins(op, value, jt=targets[kind] - (4 + i) - 1))
    out += [
        _ins(BPF_RET_K, SECCOMP_RET_ALLOW),
        _ins(BPF_RET_K, eperm),
        _ins(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOLCK),
        _ins(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS),
        _ins(BPF_LD_W_ABS, OFFSET_ARG0_LOW),  # clone's and unshare's flags
        _ins(BPF_JSET_K, CLONE_NEWUSER, jt=0, jf=1),
        _ins(BPF_RET_K, eperm),
        _ins(BPF_RET_K, SECCOMP_RET_ALLOW),
        _ins(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
    ]
    first_family = targets["family"] + 1
    last_allow = first_family + len(ALLOWED_FAMILIES) + 1
    for i, family in enumerate(ALLOWED_FAMILIES):
        out.append(_ins(BPF_JEQ_K, int(family), jt=last_allow - (first_family + i) - 1))
    out += [_ins(BPF_RET_K, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT), _ins(BPF_RET_K, SECCOMP_RET_ALLOW)]
    assert len(out) == last_allow + 1
    return b"".join(out)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def current_arch() -> Arch | None:
    """This machine's table, or None on an architecture the filter does not know."""
    return ARCHES.get(platform.machine())


def install() -> None:
    """Join a fresh anonymous session keyring, then load the filter for this process.

    Raises:
        OSError: unknown architecture, or the kernel refused the filter (no seccomp, or no
            no_new_privs and no CAP_SYS_ADMIN).
    """
    arch = current_arch()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp table for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    # Best effort: a kernel without keyrings has none to share either; the filter refuses keyctl after.
    libc.syscall(arch.numbers["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None)
    code = program(arch)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
