"""Settings and results of the sandbox: `SandboxConfig` (goes into the run config) and `ExecResult`.

Contract: `SandboxConfig` is a plain dataclass; `dataclasses.asdict(config)` is JSON-serialisable and
is what callers record in `config.json`. Every limit has a documented default that needs no
arguments. `ExecResult.status` is a closed set (STYLE rule 6). This module runs nothing.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Literal

from thinc_bench.errors import ConfigError

# thinc_bench under any spelling a distribution or module name may take (thinc-bench, Thinc_Bench...).
_HARNESS = re.compile(r"thinc[-_.]+bench", re.IGNORECASE)
Status = Literal["ok", "error", "timeout", "memory", "killed", "infra_error"]
Isolation = Literal["auto", "bwrap", "none"]
StateMode = Literal["persistent", "fresh"]

# Modules the fork-server imports once so that no session pays for them (ThinC blocks use these).
DEFAULT_PRELOAD = ("math", "itertools", "fractions", "functools", "collections", "numpy", "sympy")
# Distributions model code may import besides the standard library (with what they require): the
# math stack other TIR sandboxes offer (rStar2-Agent's, Qwen's TIR evaluation). Those not installed
# are left out; `Sandbox.protection_summary()["packages"]` records what was visible, with versions.
DEFAULT_PACKAGES = ("numpy", "sympy", "mpmath", "scipy", "networkx", "gmpy2")
# The fixed fault text of rounds one to three, kept for callers that ask for one text on purpose
# (`fault_output=DEFAULT_FAULT_OUTPUT`); by default each fault is rendered by `faults.render_fault`.
DEFAULT_FAULT_OUTPUT = (
    "Traceback (most recent call last):\n"
    '  File "<cell-1>", line 1, in <module>\n'
    "RuntimeError: execution failed: the interpreter raised an internal error"
)


@dataclass
class SandboxConfig:
    """How sandbox sessions run and what they may use. Defaults need no arguments.

    Every limit applies per session unless stated; a session is one trajectory's interpreter.
    """

    isolation: Isolation = field(
        default="auto",
        metadata={
            "help": "auto: bubblewrap jail when it works, else the same server unjailed with one warning; "
            "bwrap: demand the jail (SandboxUnavailable if missing); none: never jail."
        },
    )
    state: StateMode = field(
        default="persistent",
        metadata={
            "help": "persistent: variables/imports persist across runs (notebook); fresh: new process per run."
        },
    )
    timeout_s: float = field(
        default=10.0,
        metadata={
            "help": "Seconds per run; the session is killed past it. ThinC blocks take <1 s. Charged as "
            "wall-clock time less the time the host's load kept the session waiting for a CPU."
        },
    )
    timeout_backstop_s: float | None = field(
        default=None,
        metadata={
            "help": "Wall-clock seconds after which a run the host's load kept from its timeout_s is "
            "stopped as infra_error (not a timeout: the code did not use its time). None: 6x the limit."
        },
    )
    cpu_time_s: int = field(
        default=300,
        metadata={
            "help": "CPU seconds per session process over its life (RLIMIT_CPU); backstop to timeout_s."
        },
    )
    memory_mb: int = field(
        default=2048,
        metadata={
            "help": "Address space per process in MiB (RLIMIT_AS); the warm server itself uses ~140 MiB."
        },
    )
    session_memory_mb: int | None = field(
        default=None,
        metadata={
            "help": "Memory of one session, MiB: every process, memfd, scratch file and kernel buffer it "
            "holds, through its own memory cgroup (root); past it the kernel kills inside that session "
            "only and the run reports `memory`. None: memory_mb."
        },
    )
    total_memory_mb: int | None = field(
        default=None,
        metadata={
            "help": "Memory of all sessions together, MiB, through a memory cgroup that leaves the "
            "fork-server out (root); past it the kernel kills the largest session process. "
            "None: half of this machine's RAM, so runaway model code cannot take the trainer down."
        },
    )
    cpus_per_session: float = field(
        default=1.0,
        metadata={
            "help": "CPU cores one session's processes may use together (cpu cgroup quota, root); each "
            "session also gets one equal CPU share, so processes it leaves spinning cannot starve others."
        },
    )
    file_size_mb: int = field(
        default=64,
        metadata={"help": "Largest file a session may write, MiB (RLIMIT_FSIZE)."},
    )
    scratch_mb: int = field(
        default=256,
        metadata={"help": "Size of the private scratch tmpfs (the session's /tmp and cwd), MiB."},
    )
    scratch_inodes: int = field(
        default=4096,
        metadata={
            "help": "Files and folders the scratch tmpfs may hold: each costs ~1 KiB of kernel memory that "
            "no limit charges without a memory cgroup (an unprivileged harness)."
        },
    )
    open_files: int = field(
        default=256,
        metadata={"help": "Open file descriptors per process (RLIMIT_NOFILE)."},
    )
    max_processes: int = field(
        default=64,
        metadata={"help": "Processes+threads per session (pids cgroup when root, else RLIMIT_NPROC)."},
    )
    max_ptys: int = field(
        default=4,
        metadata={
            "help": "Pseudo-terminals per session (its own /dev/pts instance); pty, script, pexpect need one."
        },
    )
    max_output_bytes: int = field(
        default=8192,
        metadata={"help": "Output kept per run: head and tail halves with a marker saying how much was cut."},
    )
    max_sessions: int = field(
        default=128,
        metadata={"help": "Live sessions at once (the bounded pool); session() waits for a free slot."},
    )
    warm_sessions: int = field(
        default=4,
        metadata={
            "help": "Session processes kept started ahead of need, so a trajectory never waits for a "
            "fork; refilled in the background, counted against max_sessions. 0: start each on demand."
        },
    )
    max_concurrent_runs: int = field(
        default=16,
        metadata={
            "help": "Worker threads behind arun(); runs beyond this queue without their clock running."
        },
    )
    preload: tuple[str, ...] = field(
        default=DEFAULT_PRELOAD,
        metadata={"help": "Modules imported once by the fork-server before any session forks."},
    )
    packages: tuple[str, ...] = field(
        default=DEFAULT_PACKAGES,
        metadata={
            "help": "Distributions model code may import besides the standard library, with their "
            "requirements (and those of the preloaded modules); the rest of site-packages, thinc_bench "
            "included, is not visible. Names not installed are left out."
        },
    )
    fault_output: str = field(
        default="",
        metadata={
            "help": "Output of an injected execution failure (Recovery@k; the code is not executed). "
            "Empty: a traceback of that cell as CPython prints it (its cell number, one of its "
            "lines, a seeded realistic exception), so a model cannot tell it from a real failure."
        },
    )
    fault_seed: str = field(
        default="",
        metadata={
            "help": "Salt of the rendered injected failures' draws (with the cell number and code). "
            "GRPO's training sandbox sets its own, so training never fits the exact texts that "
            "eval's Recovery@k injects for the same code."
        },
    )

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", "bwrap", "none"):
            raise ConfigError(f"SandboxConfig.isolation={self.isolation!r}; use 'auto', 'bwrap' or 'none'")
        if self.state not in ("persistent", "fresh"):
            raise ConfigError(f"SandboxConfig.state={self.state!r}; use 'persistent' or 'fresh'")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(
                f"SandboxConfig.timeout_s={self.timeout_s!r} must be a positive number of seconds"
            )
        if self.timeout_backstop_s is not None and not (
            math.isfinite(self.timeout_backstop_s) and self.timeout_backstop_s > 0
        ):
            raise ConfigError(
                f"SandboxConfig.timeout_backstop_s={self.timeout_backstop_s!r} must be a positive number "
                "of seconds or None (6x the limit)"
            )
        for name in (
            "cpu_time_s",
            "memory_mb",
            "file_size_mb",
            "scratch_mb",
            "scratch_inodes",
            "open_files",
            "max_processes",
            "max_ptys",
            "max_output_bytes",
            "max_sessions",
            "max_concurrent_runs",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"SandboxConfig.{name}={value!r} must be a positive integer")
        if not isinstance(self.warm_sessions, int) or self.warm_sessions < 0:
            raise ConfigError(
                f"SandboxConfig.warm_sessions={self.warm_sessions!r} must be 0 (off) or a positive integer"
            )
        for name in ("session_memory_mb", "total_memory_mb"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"SandboxConfig.{name}={value!r} must be a positive integer or None")
        if not (isinstance(self.cpus_per_session, (int, float)) and 0 < self.cpus_per_session < 1e4):
            raise ConfigError(
                f"SandboxConfig.cpus_per_session={self.cpus_per_session!r} must be a positive number of cores"
            )
        self.preload = tuple(self.preload)
        self.packages = tuple(self.packages)
        harness = [p for p in (*self.packages, *self.preload) if _HARNESS.fullmatch(p.partition(".")[0])]
        if harness:
            raise ConfigError(
                f"SandboxConfig lists {harness[0]!r}: model code must never reach thinc_bench (its "
                "benchmark registry and generators hold the golds); remove it from packages/preload"
            )

    def session_limits(self) -> dict[str, float]:
        """What the fork-server enforces on each session, resolved (it crosses into the jail as JSON)."""
        names = (
            "cpu_time_s",
            "memory_mb",
            "file_size_mb",
            "scratch_mb",
            "scratch_inodes",
            "open_files",
            "max_processes",
        )
        limits: dict[str, float] = {name: getattr(self, name) for name in names}
        limits.update(
            max_ptys=self.max_ptys,
            cpus_per_session=self.cpus_per_session,
            session_memory_mb=self.resolved_session_memory_mb(),
        )
        return limits

    def resolved_session_memory_mb(self) -> int:
        """`session_memory_mb`, or `memory_mb` when it is None."""
        return self.memory_mb if self.session_memory_mb is None else self.session_memory_mb

    def resolved_total_memory_mb(self) -> int:
        """`total_memory_mb`, or half of this machine's physical memory when it is None."""
        if self.total_memory_mb is not None:
            return self.total_memory_mb
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**21)


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one code run.

    Attributes:
        status: ok | error (exception in user code) | timeout (wall or CPU-time limit) | memory
            (MemoryError, the address-space limit, or the kernel's OOM killer in a memory cgroup) |
            killed (the process died otherwise: signal, os._exit, segfault, or it wrote on the sandbox's
            control channel) | infra_error (the sandbox itself failed twice; not the code's fault).
        output: the run's own interleaved stdout+stderr and traceback, possibly truncated; never a
            harness notice (those are in `notice_before`/`notice_after`, which a cell cannot write).
        elapsed_s: wall-clock seconds of the run as seen by the harness.
        truncated: True when the middle of the output was cut (see `max_output_bytes`).
        injected: True when this was an injected failure (the code was not executed).
        between_runs: output that arrived after the previous run's result and before this run
            began (a thread or process an earlier run left); never mixed into `output`.
        notice_before: the harness's notice that the session restarted before this run, and why.
        notice_after: the harness's notice of how the run ended when the harness ended it or the
            process died (timeout, control channel, death, infrastructure error).

    Control characters other than newline and tab are escaped (\\xNN) in `output` and
    `between_runs`, so stored records and reports show them as text.
    """

    status: Status
    output: str
    elapsed_s: float
    truncated: bool = False
    injected: bool = False
    between_runs: str = ""
    notice_before: str = ""
    notice_after: str = ""

    @property
    def notice(self) -> str:
        """Every harness notice of this run (restart before it, how it ended), or ''."""
        return self.notice_before + self.notice_after

    @property
    def transcript(self) -> str:
        """What an interpreter would show for the run: restart notice, output, how it ended.

        This is the text a model reads; records keep the three parts apart.
        """
        after = "\n" + self.notice_after if self.notice_after and self.output else self.notice_after
        return self.notice_before + self.output + after
