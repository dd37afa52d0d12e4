"""The findings of issue 52, one test each, in every mode an unprivileged harness may get (no
cgroups; with and without per-session namespaces) and as root: kernel memory bounded by files
(the scratch's inode bound), orphans reaped inside sessions, and a protection summary that says
what holds for this user. Issue 52's two containment findings (a child of run 1 writing into run
2, an exec'd fake loop) are test_redteam4's, now run in these modes too.

Every attack is bounded (small caps, short timeouts) so that it cannot hurt a shared machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, _jail

MODES = ["all-it-has", "no-cgroups", "no-cgroups-no-namespaces"]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the harness has: everything it can get here, or no cgroups (an unprivileged harness),
    or neither cgroups nor per-session namespaces (an unprivileged harness on a host that refuses
    user namespaces to it, as Ubuntu's AppArmor default does)."""
    if "no-cgroups" in request.param:
        monkeypatch.setenv(_jail.NO_CGROUPS_ENV, "1")
    if "no-namespaces" in request.param:
        monkeypatch.setenv(_jail.NO_NAMESPACES_ENV, "1")
    return str(request.param)


@pytest.fixture
def small(mode: str) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(timeout_s=20.0, max_processes=16, scratch_inodes=64, warm_sessions=0)) as sb:
        yield sb


ORPHANS = """
import os
made = 0
for _ in range(3 * 16):  # three times the session's process limit
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            os._exit(0)  # the grandchild: an orphan once its parent is gone, then a zombie
        os._exit(0)
    os.waitpid(child, 0)
    made += 1
print(made)
"""


def test_orphans_are_reaped_so_zombies_never_use_up_the_process_limit(small: Sandbox) -> None:
    with small.session() as s:
        r = s.run(ORPHANS)
        assert (r.status, r.output) == ("ok", "48\n"), r.transcript
        again = s.run(ORPHANS)  # nothing of the first run counts against the second
        assert (again.status, again.output) == ("ok", "48\n"), again.transcript


def test_a_zombie_child_the_code_has_not_waited_for_stays_its_own(small: Sandbox) -> None:
    """The reaper takes orphans only: a child the cell forked is the cell's to wait for, with its
    real exit status, in a later run too (as in a notebook). (One still running when its run ends
    is killed: the cell waits for it to exit, without collecting it.)"""
    code = (
        "import os, subprocess\np = subprocess.Popen(['sh', '-c', 'exit 3'])\n"
        "os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)"
    )
    with small.session() as s:
        assert s.run(code).status == "ok"
        assert s.run("p.wait()").output == "3\n"


def test_the_scratch_holds_a_bounded_number_of_files(small: Sandbox, mode: str) -> None:
    """300,000 empty files cost 245 MiB of kernel memory outside every limit for an unprivileged
    user (issue 52); the scratch's inode bound stops that at `scratch_inodes`."""
    code = (
        "import os\nn = 0\ntry:\n    while n < 100_000:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError as e:\n    print(n, e.errno)\n"
    )
    with small.session() as s:
        r = s.run(code)
    if "no-namespaces" in mode:
        assert "private scratch tmpfs bounded" in " ".join(small.protections[1])  # the summary says so
        pytest.skip("without per-session namespaces the scratch is a folder of the jail's /tmp")
    made, errno_ = map(int, r.output.split())
    assert made < 64 and errno_ == 28  # ENOSPC, before the 64th inode (the root folder is one)


def test_the_summary_says_what_holds_for_this_user(small: Sandbox, mode: str) -> None:
    summary = small.protection_summary()
    active, inactive = summary["active"], summary["inactive"]

    def holds(prefix: str) -> bool:
        matches = [n for n in active if n.startswith(prefix)] + [n for n in inactive if n.startswith(prefix)]
        assert len(matches) == 1, (prefix, matches)
        return matches[0] in active

    # What an unprivileged harness has on this kernel holds in every mode...
    assert holds("nothing a run starts outlives the run") and holds("an interpreter that exec'd")
    assert holds("nothing outlives its session") and holds("orphans reaped inside each session")
    assert holds("time limit charged without the host's load")
    # ...and what needs root or namespaces is said to be off, with why, where it is.
    for name in ("per-session memory cgroup", "total memory cap", "per-session CPU share"):
        assert holds(name) == (mode == "all-it-has" and os.geteuid() == 0)
    assert holds("sessions run as their own unprivileged host uid") == (os.geteuid() == 0)
    assert holds("private scratch tmpfs bounded") == ("no-namespaces" not in mode)
    assert all(inactive.values())  # every line that is off says why
    if mode != "all-it-has" and os.geteuid() == 0:
        assert (
            "needs root"
            in inactive["total memory cap of all sessions (total_memory_mb), the fork-server outside it"]
        )


def test_signals_to_the_reaper_from_inside_change_nothing(small: Sandbox, mode: str) -> None:
    """The reaper is PID 1 of the session's namespace: a signal from inside reaches it only through a
    handler, and it has none (SIGINT, the one its Python handles, is ignored). A cell cannot end it
    and so cannot end its own session's containment early."""
    if "no-namespaces" in mode:
        pytest.skip("without namespaces there is no reaper: PID 1 is the jail's, out of reach")
    code = "import os, signal\nfor sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):\n    os.kill(1, sig)\n"
    with small.session() as s:
        assert s.run("kept = 7").status == "ok"
        r = s.run(code)
        assert r.status == "ok" and r.notice == "", r.transcript
        assert s.run("kept").output == "7\n"  # the same interpreter, in the same session
