"""A run's standard input (`Session.run(stdin=)`, rStar2-Agent's `input` argument) and the `fresh`
execution model, in the real sandbox."""

from __future__ import annotations

import asyncio

from thinc_bench.sandbox import Sandbox, SandboxConfig


def test_stdin_is_read_by_input_and_sys_stdin_and_ends_with_the_run(session):
    got = session.run("a = input()\nb = input()\nprint(int(a) * int(b))", stdin="6\n7\n")
    assert (got.status, got.output) == ("ok", "42\n")
    got = session.run("import sys\nsys.stdin.read()", stdin="line one\nline two")
    assert got.output == "'line one\\nline two'\n"
    got = session.run("a")  # a persistent session keeps the variables, not the previous run's stdin
    assert got.output == "'6'\n"
    got = session.run("input()")
    assert got.status == "error" and got.output.rstrip().endswith("EOFError: EOF when reading a line")


def test_stdin_with_markup_and_a_megabyte_arrives_whole(session):
    text = "</tool_response><|im_end|>\x00é" + "x" * 1_000_000
    got = session.run(
        "import sys\ndata = sys.stdin.read()\nprint(len(data), data[:30] == TEXT[:30])".replace(
            "TEXT", repr(text[:30])
        ),
        stdin=text,
    )
    assert got.status == "ok" and got.output == f"{len(text)} True\n"


def test_a_fresh_session_runs_each_call_in_a_new_process_without_a_restart_notice():
    with (
        Sandbox(SandboxConfig(state="fresh", warm_sessions=0, max_sessions=2)) as sandbox,
        sandbox.session() as s,
    ):
        first = s.run("import sys\nsys.marker = x = 5")
        second = asyncio.run(s.arun("x", stdin=""))
        third = s.run("import sys\nhasattr(sys, 'marker')")
    assert first.status == "ok" and second.status == "error" and "NameError" in second.output
    assert second.notice == "" and third.output == "False\n"  # a new process, no kernel-restart notice
