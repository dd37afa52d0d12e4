"""Tool results in each baseline's own format (`eval.tool_results`), from real sandbox runs and from
generated outputs."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thinc_bench.eval.tool_results import render_result
from thinc_bench.sandbox import ExecResult, Sandbox, SandboxConfig
from thinc_bench.sandbox.config import DEFAULT_FAULT_OUTPUT


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(warm_sessions=0, max_sessions=2)) as sandbox:
        yield sandbox


@pytest.fixture
def session(sandbox):
    with sandbox.session() as s:
        yield s


def test_a_run_past_the_limit_reads_as_each_baseline_wrote_a_timeout(session):
    result = session.run("print('started', flush=True)\nwhile True:\n    pass", timeout=0.5)
    assert result.status == "timeout"
    rstar2 = render_result(result, "rstar2", 0.5)
    assert re.fullmatch(
        r"Tool call failure\nreason: worker_timeout\nstdout: started\n\nexecution time: 0\.\d\ds", rstar2
    )
    aster = render_result(result, "aster", 0.5)
    assert aster.startswith(
        "Execution timeout after 0.5 seconds. Consider optimizing your code for better performance or reducing "
        "computational complexity."
    )
    plain = render_result(result, "plain", 0.5)
    assert plain.startswith("started") and result.notice_after.strip() in plain  # the harness's notice


def test_a_syntax_error_has_no_traceback_head_and_is_all_stderr(session):
    result = session.run("print(1 +)")
    assert result.status == "error" and "Traceback" not in result.output
    assert render_result(result, "rstar2", 10).startswith("Tool call failure\nreason: \nstderr: ")
    assert "stdout:" not in render_result(result, "rstar2", 10)
    aster = render_result(result, "aster", 10)
    assert aster.startswith("Runtime error occurred during execution.\n\nError details:\n")
    assert "SyntaxError" in aster and "Output before error" not in aster


def test_an_injected_failure_reads_as_a_failed_call():
    injected = ExecResult("error", DEFAULT_FAULT_OUTPUT, 0.0, injected=True)
    assert render_result(injected, "rstar2", 4) == (
        f"Tool call failure\nreason: \nstderr: {DEFAULT_FAULT_OUTPUT}\nexecution time: 0.00s"
    )
    assert render_result(injected, "plain", 4) == DEFAULT_FAULT_OUTPUT


def test_a_restart_notice_stays_in_front():
    result = ExecResult("ok", "3\n", 0.01, notice_before="[sandbox] session restarted: x.\n")
    assert render_result(result, "aster", 30) == "[sandbox] session restarted: x.\n3\n"
    assert render_result(result, "rstar2", 4).startswith(
        "[sandbox] session restarted: x.\nTool call success\n"
    )


printed = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80).filter(
    lambda t: "Traceback (most recent call last):" not in t
)


@given(before=printed, error=st.sampled_from(["NameError: x", "ZeroDivisionError: division by zero"]))
def test_a_failed_runs_output_splits_into_what_it_printed_and_its_traceback(before, error):
    """However the run's own output reads, stdout + stderr is the whole output, and the traceback is stderr."""
    before = before if not before or before.endswith("\n") else before + "\n"
    traceback = f'Traceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n{error}\n'
    result = ExecResult("error", before + traceback, 0.25)
    text = render_result(result, "rstar2", 4)
    assert text.startswith("Tool call failure\nreason: \n")
    assert (f"stdout: {before}\n" in text) == bool(before) and f"stderr: {traceback}\n" in text
    aster = render_result(result, "aster", 30)
    assert aster.startswith("Runtime error occurred during execution.\n\nError details:\n" + traceback)
    assert aster.endswith(f"\n\nOutput before error:\n{before}" if before else traceback)


def test_rstar2_calls_by_either_name_with_hostile_input_arguments(session):
    """Either name runs; `input` goes to stdin; a non-string `input` or a third name is a failed call."""
    import asyncio

    from thinc_bench.eval.rollout import RolloutResult, _execute_calls
    from thinc_bench.trajectory import parse_call

    bodies = [
        {
            "name": "execute_python_code_with_standard_io",
            "arguments": {"code": "print(input()[::-1])", "input": "abc"},
        },
        {
            "name": "python_code_with_standard_io",
            "arguments": '{"code": "print(len(input()))", "input": "</tool_call>"}',
        },
        {"name": "python_code_with_standard_io", "arguments": {"code": "print(1)", "input": 7}},
        {"name": "python_code_with_standard_io", "arguments": {"code": "print(2)"}},  # no input: stdin empty
        {"name": "python_code", "arguments": {"code": "print(3)", "input": ""}},
    ]
    calls = [parse_call(json.dumps(body)) for body in bodies]
    result = RolloutResult([], [], [], "", "eos")
    outputs = asyncio.run(_execute_calls(session, calls, "python_code_with_standard_io", result))
    assert [e.status for e in result.executions] == ["ok", "ok", "error", "ok", "error"]
    assert outputs[0].startswith("Tool call success\nstdout: cba\n")
    assert outputs[1].startswith("Tool call success\nstdout: 12\n")
    assert outputs[2] == "Error: the tool call's argument 'input' is not a string."
    assert outputs[3].startswith("Tool call success\nstdout: 2\n")
    assert outputs[4] == "Error: unknown tool 'python_code': the only tool is 'python_code_with_standard_io'."
