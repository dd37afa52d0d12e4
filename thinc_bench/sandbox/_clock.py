"""A run's time limit that the host's load cannot turn into the model's error.

Why: a block's wall-clock time on a saturated node (up to 1,024 GRPO sessions on a few cores) is
mostly time spent waiting for a CPU, which says nothing about the code; charging it made timeouts
noise in the reward. The kernel counts that wait per task: the run-queue delay (field 2 of
`/proc/PID/task/TID/schedstat`), the time a task was runnable and no CPU ran it. So a run is charged
its wall-clock time minus that wait: an infinite loop reaches its limit after `limit` seconds of
(CPU) time however busy the host is, and a block that sleeps or waits is charged like before, since
a sleeping task waits for nothing on a run queue.

Which wait: the largest among the session's tasks (the interpreter's main thread since the run
began; every other live thread and descendant process since it started): when the interpreter
waits for a worker that waits for a CPU, the worker's delay is what held the run up. A task that
ended before the check takes its delay with it (only live tasks are read), so a run of many short
subprocesses on a busy host may be charged some of the host's load: the clock errs towards the
old limit, never past it.

A wait the session causes itself is not host load: a cell that forks busy processes keeps its own
interpreter off the CPU, and without more its run would reach the backstop and pass as the
infrastructure's failure (excluded from every rate: a way out of the denominator). So the run is also
charged the CPU time its whole session used, divided by the cores it may use (`cpus`: its cpu
cgroup's quota, else the cores this process may run on), and the larger charge counts: code that
keeps the cores busy is charged at least as fast as the cores turn, whoever it keeps waiting. Neither
charge runs faster than the wall clock.

A wall-clock backstop (`SandboxConfig.timeout_backstop_s`, default 6x the limit) ends a run that the
host kept from getting its time: that run is the infrastructure's failure (`infra_error`), never a
timeout of the code. Without scheduler statistics, or without the session's /proc entries, the
limit is wall-clock time, as the protection summary says. Nothing here kills: `session` does.
"""

from __future__ import annotations

from typing import Literal

from thinc_bench.sandbox._watch import ProcWatch, schedstat_problem

Verdict = Literal["running", "timeout", "saturated"]
# The default backstop, in multiples of the run's limit (60 s for the default 10 s).
BACKSTOP_FACTOR = 6.0
# A run charged within this much of its limit has reached it (the check runs on a timer).
SLACK_S = 0.001


class RunClock:
    """The clock of one run: when to look next, and whether the run has used its time."""

    def __init__(
        self, limit: float, backstop: float, watch: ProcWatch | None, start: float, cpus: float = 1.0
    ) -> None:
        self.limit = limit
        self.backstop = max(backstop, limit)
        self.start = start
        self.waited_s = 0.0  # host load not charged, as of the last check
        self.cpu_charged_s = 0.0  # the session's own CPU use / cpus, as of the last check
        self.cpus = max(cpus, 1e-3)
        self._watch = watch if schedstat_problem() is None else None
        self._base = self._watch.main_delay_ns() if self._watch is not None else 0
        self._cpu_base = self._watch.cpu_s() if self._watch is not None else 0.0
        self._next = start + limit

    @property
    def load_aware(self) -> bool:
        """Whether the host's load is left out of this run's charge (else it is wall-clock time)."""
        return self._watch is not None

    def deadline(self) -> float:
        """The next moment (perf_counter) the run may have used its time."""
        return self._next

    def charged_s(self, now: float) -> float:
        """Seconds charged to the run at `now`: wall-clock time less the wait last measured, or the
        session's own CPU use over its cores if that is more."""
        return max(now - self.start - self.waited_s, self.cpu_charged_s)

    def check(self, now: float) -> Verdict:
        """At or past `deadline()`: measure, and say whether the run goes on (its next deadline
        set), used its time (`timeout`), or met the backstop without having (`saturated`)."""
        wall = now - self.start
        if self._watch is not None:
            main, others = self._watch.run_delay_ns()
            self.waited_s = min(wall, max(main - self._base, others) / 1e9)
            self.cpu_charged_s = min(wall, (self._watch.cpu_s() - self._cpu_base) / self.cpus)
        charged = max(wall - self.waited_s, self.cpu_charged_s)
        if charged >= self.limit - SLACK_S:
            return "timeout"
        if wall >= self.backstop - SLACK_S:
            return "saturated"
        # The soonest the charge can reach the limit: if from now on nothing waits.
        self._next = min(self.start + self.backstop, now + (self.limit - charged))
        return "running"
