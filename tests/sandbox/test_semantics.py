"""Notebook semantics: state, printing, tracebacks, restarts, truncation, fault injection, asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session


def test_variables_and_imports_persist_across_runs(session: Session) -> None:
    session.run("import fractions\nx = fractions.Fraction(1, 3)")
    assert session.run("print(x * 3)").output == "1\n"


def test_bare_last_expression_value_is_printed(session: Session) -> None:
    assert session.run("a = 20\na + 22").output == "42\n"


def test_last_expression_none_prints_nothing(session: Session) -> None:
    assert session.run("None").output == ""


def test_stdout_and_stderr_are_captured_in_order(session: Session) -> None:
    code = "import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')"
    assert session.run(code).output == "one\ntwo\nthree\n"


def test_subprocess_output_is_captured(session: Session) -> None:
    assert (
        session.run("import subprocess\n_ = subprocess.run(['echo', 'from-child'])").output == "from-child\n"
    )


def test_exception_gives_traceback_without_harness_frames(session: Session) -> None:
    r = session.run("def f():\n    return 1 / 0\nf()")
    assert r.status == "error"
    assert r.output.startswith('Traceback (most recent call last):\n  File "<cell-')
    assert "ZeroDivisionError: division by zero" in r.output
    assert "_repl.py" not in r.output and "server.py" not in r.output


def test_syntax_error_is_an_error_status(session: Session) -> None:
    r = session.run("x = (")
    assert r.status == "error" and "SyntaxError" in r.output


def test_syntax_error_shows_the_cells_line_and_no_parser_frame(session: Session) -> None:
    # as `python -c` prints it: no frame of the harness's parser (nor its install path) in the output
    r = session.run("ans = 1\nprint(ans x 2)")
    assert r.status == "error"
    assert r.output.startswith('  File "<cell-1>", line 2\n    print(ans x 2)\n'), r.output
    assert r.output.rstrip().endswith("SyntaxError: invalid syntax. Perhaps you forgot a comma?")
    assert "ast.py" not in r.output and "Traceback" not in r.output
    assert "NameError: name 'ans' is not defined" in session.run("ans").output  # none of the cell ran


def test_preloaded_sympy_is_usable(session: Session) -> None:
    assert session.run("import sympy\nsympy.factorint(2**10 - 1)").output == "{3: 1, 11: 1, 31: 1}\n"


def test_sessions_do_not_share_variables(sandbox: Sandbox) -> None:
    with sandbox.session() as a, sandbox.session() as b:
        a.run("secret = 1")
        assert b.run("secret").status == "error"


def test_sessions_do_not_share_scratch_files(sandbox: Sandbox) -> None:
    with sandbox.session() as a, sandbox.session() as b:
        assert a.run("open('note.txt', 'w').write('a')").status == "ok"
        assert b.run("import os; os.path.exists('note.txt')").output == "False\n"


def test_died_session_restarts_fresh_and_says_so(session: Session) -> None:
    session.run("x = 1")
    died = session.run("import os; os._exit(3)")
    assert died.status == "killed" and "exited with code 3" in died.transcript
    after = session.run("print('alive')")
    assert after.transcript.startswith("[sandbox] session restarted") and after.transcript.endswith("alive\n")
    assert session.run("x").status == "error"


def test_fresh_state_mode_forgets_variables() -> None:
    with Sandbox(SandboxConfig(state="fresh")) as sb, sb.session() as s:
        s.run("x = 1")
        r = s.run("x")
    assert r.status == "error" and "NameError" in r.output


def test_config_serialises_into_run_config() -> None:
    record = json.loads(json.dumps(dataclasses.asdict(SandboxConfig(state="fresh"))))
    assert record["state"] == "fresh" and record["timeout_s"] == 10.0


def test_long_output_keeps_head_and_tail_with_cut_marker() -> None:
    with Sandbox(SandboxConfig(max_output_bytes=100)) as sb, sb.session() as s:
        r = s.run("print('HEAD'); print('x' * 100000); print('TAIL')")
    assert r.truncated and r.output.startswith("HEAD") and r.output.rstrip().endswith("TAIL")
    assert "bytes of output cut" in r.output and len(r.output) < 200


def test_injected_failures_replace_first_k_runs_without_executing(sandbox: Sandbox) -> None:
    with sandbox.session(inject_failures=2) as s:
        first, second = s.run("x = 1"), s.run("x = 2")
        third = s.run("'x' in globals()")
        fourth = s.run("1/0")
    assert [first.status, second.status] == ["error", "error"] and first.injected and second.injected
    # Tracebacks of cells 1 and 2, as real ones would read; the next real cell is number 3.
    assert first.output.startswith('Traceback (most recent call last):\n  File "<cell-1>", line 1')
    assert second.output.startswith('Traceback (most recent call last):\n  File "<cell-2>", line 1')
    assert third.output == "False\n" and not third.injected
    assert '"<cell-4>"' in fourth.output and not fourth.injected


def test_arun_serves_concurrent_asyncio_sessions(sandbox: Sandbox) -> None:
    async def one(i: int) -> str:
        with sandbox.session() as s:
            await s.arun(f"v = {i}")
            return (await s.arun("v * 2")).output

    async def main() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(8)))

    assert asyncio.run(main()) == [f"{2 * i}\n" for i in range(8)]
