"""A process forked from one that holds a Sandbox (multiprocessing's fork start method, a DataLoader
worker, datasets.map) gets working sandboxes, and the parent's sandbox is untouched."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

from thinc_bench.sandbox import Sandbox, Session


def _in_child(inherited: Sandbox, inherited_session: Session, out: Any) -> None:
    try:
        with Sandbox() as own, own.session() as s:
            fresh = s.run("print(6 * 7)").output
        with inherited.session() as s:
            reused = s.run("print(6 * 8)").output
        stale = inherited_session.run("print(x)")
        inherited_session.close()
        inherited.close()
        out.send((fresh, reused, stale.status, stale.transcript))
    except Exception as exc:  # process boundary: report to the parent instead of dying silently
        out.send(repr(exc))


def test_a_forked_child_gets_working_sandboxes_and_leaves_the_parents_alone(sandbox: Sandbox) -> None:
    with sandbox.session() as mine:
        mine.run("x = 41")
        groups = sandbox._current_server().launch.groups.paths.values()
        starts = sandbox.stats.server_starts
        parent_end, child_end = multiprocessing.Pipe()
        child = multiprocessing.get_context("fork").Process(target=_in_child, args=(sandbox, mine, child_end))
        child.start()
        got = parent_end.recv() if parent_end.poll(60) else "no answer in 60 s"
        child.join(10)
        assert got[:2] == ("42\n", "48\n"), got
        # The child's copy of the parent's session starts over instead of driving the parent's process.
        assert got[2] == "error" and "NameError" in got[3] and "forked" in got[3]
        assert mine.run("x + 1").output == "42\n"  # the parent's interpreter kept its state
        assert sandbox.stats.server_starts == starts and child.exitcode == 0
        assert all(Path(g).is_dir() for g in groups)  # the child's close removed none of ours
    with sandbox.session() as again:
        assert again.run("print('parent fine')").output == "parent fine\n"


def test_a_plain_os_fork_child_can_sandbox_too(sandbox: Sandbox) -> None:
    with sandbox.session() as s:
        s.run("1")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            with sandbox.session() as s:
                os.write(write, s.run("print(2 ** 10)").output.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as fh:
        output = fh.read()
    _, status = os.waitpid(pid, 0)
    assert output == "1024\n" and os.waitstatus_to_exitcode(status) == 0
