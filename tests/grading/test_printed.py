"""Grounding counts only what the code printed (issue 16 "Grounding"), on the real grader, with real
sandbox output where the form matters (traceback, injected failure, timeout notice)."""

from typing import Any

import pytest

from thinc_bench.grading import Grader, code_printed
from thinc_bench.sandbox import Sandbox, SandboxConfig
from thinc_bench.sandbox.config import DEFAULT_FAULT_OUTPUT

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "<cell-2>", line 5, in <module>\n'
    "    x = f(3)\n"
    '  File "<cell-2>", line 3, in f\n'
    "    return 1 / 0\n"
    "ZeroDivisionError: division by zero"
)


@pytest.fixture(scope="module")
def grader() -> Any:
    with Grader(workers=1, timeout_s=5.0) as g:
        yield g


@pytest.mark.parametrize("answer", ["5", "3", "2"])
def test_traceback_line_numbers_do_not_ground(grader: Grader, answer: str) -> None:
    assert grader.grounded(answer, [TRACEBACK]) is False


def test_injected_failure_text_does_not_ground(grader: Grader) -> None:
    assert grader.grounded("1", [DEFAULT_FAULT_OUTPUT]) is False


def test_harness_timeout_notice_does_not_ground(grader: Grader) -> None:
    out = "working\n[sandbox] timeout: the run exceeded 10 s of wall-clock time; the session was killed."
    assert grader.grounded("10", [out]) is False


def test_output_cut_marker_does_not_ground(grader: Grader) -> None:
    assert grader.grounded("4096", ["1\n[... 4096 bytes of output cut ...]\n2"]) is False


def test_printed_value_before_a_traceback_still_grounds(grader: Grader) -> None:
    assert grader.grounded("42", ["42\n" + TRACEBACK]) is True


def test_value_printed_after_a_caught_traceback_grounds(grader: Grader) -> None:
    assert grader.grounded("7", [TRACEBACK + "\nresult 7"]) is True


def test_warning_line_number_does_not_ground(grader: Grader) -> None:
    out = "<cell-1>:12: RuntimeWarning: overflow encountered in exp\n  y = np.exp(x)\ninf"
    assert grader.grounded("12", [out]) is False


@pytest.mark.parametrize(
    ("answer", "output", "expected"),
    [
        ("20", "1e+20", False),
        ("100000000000000000000", "1e+20", True),
        ("5", "1.5e-05", False),
        ("15000", "1.5e+04", True),
        ("234", "1,234,567", False),
        ("567", "1,234,567", False),
        ("1234567", "1,234,567", True),
        ("0.5", "Fraction(1, 2)", True),
        ("\\frac{1}{2}", "x = Fraction(1, 2)", True),
        ("1", "Fraction(1, 2)", False),
        ("-3", "[Fraction(-3, 1), 2]", True),
    ],
)
def test_exponents_groups_and_fractions(grader: Grader, answer: str, output: str, expected: bool) -> None:
    assert grader.grounded(answer, [output]) is expected


def test_code_printed_keeps_stdout_and_drops_the_rest() -> None:
    out = "[sandbox] session restarted: x; earlier state is gone.\n3\n" + TRACEBACK + "\nSystemExit: 2"
    assert code_printed(out) == "3"


def test_real_sandbox_traceback_and_timeout_do_not_ground(grader: Grader) -> None:
    config = SandboxConfig(timeout_s=2.0)
    with Sandbox(config) as sandbox, sandbox.session() as session:
        err = session.run("def f():\n    return 1 / 0\n\n\n\nf()")
        slow = session.run("print(11)\nimport time\ntime.sleep(30)")
    assert err.status == "error" and "line 6" in err.output
    assert grader.grounded("6", [err.output]) is False
    assert slow.status == "timeout" and grader.grounded("11", [slow.output]) is True
    assert grader.grounded("2", [slow.output]) is False


def test_real_injected_failure_does_not_ground(grader: Grader) -> None:
    with Sandbox(SandboxConfig()) as sandbox, sandbox.session(inject_failures=1) as session:
        injected = session.run("print(1)")
    assert injected.injected and grader.grounded("1", [injected.output]) is False
