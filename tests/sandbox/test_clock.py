"""Time limits a busy node cannot turn into model errors (issue 53): on a saturated CPU a block of
known CPU cost is not charged a timeout, a real infinite loop still is, a sleeping block is charged
like before, and a run the host starves past the wall-clock backstop is the infrastructure's
failure, not the code's.

The saturation is real: busy host processes and busy sibling sessions, two per core, for at most
fifteen seconds per test (slow tier). Every number asserted is a status or the premise (the block's wall time
exceeds its limit, so a wall-clock limit would have killed it), never a speed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig
from thinc_bench.sandbox._clock import RunClock

LIMIT_S = 1.0
# A block that uses 0.8 s of CPU whatever the load (time.process_time is this process's CPU time).
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.8:\n    pass\nprint('done')"
SPIN = "import time\nt = time.time() + {seconds}\nwhile time.time() < t:\n    pass\n"
SPIN_S = 15


@contextlib.contextmanager
def _saturated(config: SandboxConfig) -> Iterator[Sandbox]:
    """A sandbox of `config` on a CPU kept busy by one host process per core and two sibling
    sessions per core of the same sandbox (sessions spinning, as GRPO's thousand sessions on a node
    do), all at normal priority. The siblings share the tested session's sandbox, so a CPU group
    per session (root) cannot hand the tested one a core of its own."""
    cores = os.cpu_count() or 1
    code = SPIN.format(seconds=SPIN_S)
    busy = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(cores)]
    try:
        with Sandbox(config) as sb:
            siblings = [sb.session() for _ in range(2 * cores)]
            threads = [
                threading.Thread(target=s.run, args=(code, SPIN_S + 30), daemon=True) for s in siblings
            ]
            for t in threads:
                t.start()
            try:
                yield sb
            finally:
                for s in siblings:
                    s.close()  # kills the spinners
    finally:
        for p in busy:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_a_busy_cpu_is_not_charged_to_the_model() -> None:
    config = SandboxConfig(timeout_s=LIMIT_S, timeout_backstop_s=60.0, warm_sessions=0)
    with _saturated(config) as sb, sb.session() as s:
        block = s.run(BURN)
        assert (block.status, block.output) == ("ok", "done\n"), block.transcript
        assert block.elapsed_s > LIMIT_S  # the premise: a wall-clock limit would have killed it
        loop = s.run("while True:\n    pass")
        assert loop.status == "timeout" and "waiting for a busy CPU not counted" in loop.notice_after
        assert loop.elapsed_s > LIMIT_S  # starved too, it ran until it had used its second
        sleeper = s.run("import time\ntime.sleep(30)")
        assert sleeper.status == "timeout" and sleeper.elapsed_s < 10 * LIMIT_S  # waiting is charged


@pytest.mark.slow
def test_a_run_the_host_starves_past_the_backstop_is_infrastructure() -> None:
    config = SandboxConfig(timeout_s=LIMIT_S, timeout_backstop_s=1.2 * LIMIT_S, warm_sessions=0)
    with _saturated(config) as sb, sb.session() as s:
        r = s.run(BURN)
        assert r.status == "infra_error" and "too busy" in r.notice_after, r.transcript
        assert sb.stats.host_saturated == 1 and sb.stats.timeouts == 0
        assert s.run("print(1)").output == "1\n"  # the session goes on (a fresh interpreter)


class _Delays:
    """Stands in for a session's /proc (`ProcWatch.run_delay_ns`, `cpu_s`) with given run-queue
    delays and CPU seconds used (the arithmetic alone; the real /proc is read by the slow tests)."""

    def __init__(self, *readings: tuple[int, int], cpu: float = 0.0) -> None:
        self.readings = list(readings)
        self.cpu = cpu

    def cpu_s(self) -> float:
        return self.cpu

    def run_delay_ns(self) -> tuple[int, int]:
        return self.readings.pop(0)

    def main_delay_ns(self) -> int:
        return self.readings[0][0]


def test_the_clock_charges_wall_time_less_the_largest_wait() -> None:
    # base 1 s of delay before the run; then the main thread waited 2 s more, a child 3 s
    clock = RunClock(1.0, 6.0, None, start=100.0)
    clock._watch, clock._base = _Delays((int(3e9), int(3e9))), int(1e9)  # type: ignore[assignment]
    assert clock.check(103.5) == "running"  # 3.5 s of wall, 3 s waited: 0.5 s charged
    assert clock.deadline() == pytest.approx(104.0)  # the soonest 1 s can be charged
    clock._watch = _Delays((int(3e9), int(3e9)))  # type: ignore[assignment]
    assert clock.check(104.0) == "timeout"
    starved = RunClock(1.0, 2.0, None, start=0.0)
    starved._watch, starved._base = _Delays((int(1.9e9), 0)), 0  # type: ignore[assignment]
    assert starved.check(2.0) == "saturated"  # 0.1 s charged at the backstop
    plain = RunClock(1.0, 6.0, None, start=0.0)  # no statistics: wall-clock time
    assert plain.check(0.5) == "running" and plain.check(1.0) == "timeout"


def test_the_clock_charges_the_sessions_own_cpu_over_its_cores_when_that_is_more() -> None:
    # 3.5 s of wall, 3 s of it waiting (0.5 s by wait) but the session used 2.4 CPU seconds on 2 cores
    clock = RunClock(1.0, 6.0, None, start=100.0, cpus=2.0)
    clock._watch, clock._base = _Delays((int(3e9), int(3e9)), cpu=2.4), 0  # type: ignore[assignment]
    assert clock.check(103.5) == "timeout" and clock.charged_s(103.5) == pytest.approx(1.2)
    # never faster than the wall clock, whatever the CPU reading
    fast = RunClock(1.0, 6.0, None, start=0.0, cpus=1.0)
    fast._watch, fast._base = _Delays((0, 0), cpu=50.0), 0  # type: ignore[assignment]
    assert fast.check(0.5) == "running" and fast.charged_s(0.5) == pytest.approx(0.5)


# A cell that would time out, and keeps its own interpreter off the CPU with busy processes of its own
# so that its run-queue wait looks like host load: without the session's own CPU use charged, it would
# reach the backstop and become the infrastructure's failure (excluded: a way out of the denominator).
SELF_STARVE = (
    "import os, time\n"
    "for _ in range({n}):\n"
    "    if os.fork() == 0:\n"
    "        while True:\n"
    "            pass\n"
    "while True:\n"
    "    pass\n"
)


@pytest.mark.slow
def test_a_run_that_starves_itself_is_charged_its_own_cpu_and_times_out() -> None:
    cores = os.cpu_count() or 1
    config = SandboxConfig(timeout_s=LIMIT_S, timeout_backstop_s=6 * LIMIT_S, warm_sessions=0)
    with Sandbox(config) as sb, sb.session() as s:
        r = s.run(SELF_STARVE.format(n=8 * cores))
        assert r.status == "timeout", r.transcript
        assert sb.stats.host_saturated == 0
        assert s.run("print(1)").output == "1\n"
