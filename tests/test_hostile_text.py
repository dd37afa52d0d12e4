"""Hostile model text gets the answer a careful human would give, through every stage eval runs on one
trajectory: the scanner (`trajectory.parse`), answer extraction and grading, grounding, the
failure-mode metrics and the GRPO reward. Each case here once raised or took seconds (issue 37);
speed itself is measured by perf/hostile_text.py, not asserted here."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinc_bench import metrics, trajectory
from thinc_bench.grading import Grader, final_answer
from thinc_bench.train import rewards

# A 6,000-digit integer (past Python's 4,300-digit int/str limit), written as digits.
BIG = "9" + "".join(str(i % 10) for i in range(5_999))
BIG_OTHER = BIG[:-1] + ("8" if BIG[-1] != "8" else "7")


@pytest.fixture(scope="module")
def grader() -> Iterator[Grader]:
    with Grader(workers=1) as g:
        yield g


def printed(output: str, answer: str, plan: str = "plan") -> str:
    """A markdown trajectory whose one block printed `output` and whose final text is `answer`."""
    return f"<think>\n{plan}\n</think>\n```python\nprint(x)\n```\n```output\n{output}\n```\n{answer}"


# --- the scanner -------------------------------------------------------------------------------


def test_a_run_of_backticks_is_prose_and_a_backtick_line_closes_an_open_fence() -> None:
    run = "`" * 12_000
    assert [s.kind for s in trajectory.parse(run).segments] == ["answer"]
    block = trajectory.parse("```python\n" + run).segments[0]
    # A line of 12,000 backticks is a closing fence (at least as long as the opener): an empty block.
    assert (block.kind, block.closed, block.content) == ("code", True, "")


def test_fences_inside_a_long_string_stay_code() -> None:
    code = "s = '''\n" + "```\n" * 3_000 + "'''\nprint(len(s))"
    text = f"```python\n{code}\n```\n```output\n12000\n```\n\\boxed{{12000}}"
    parsed = trajectory.parse(text)
    assert parsed.code_blocks == [code] and parsed.outputs == ["12000"]
    assert final_answer(parsed) == "12000"


def test_output_openers_in_comments_stay_code() -> None:
    code = "#```output\n" * 3_000 + "print(1)"
    parsed = trajectory.parse(f"```python\n{code}\n```\n```output\n1\n```\n\\boxed{{1}}")
    assert parsed.code_blocks == [code] and parsed.outputs == ["1"]


@pytest.mark.parametrize(("dialect", "opener"), [("markdown", "```python\n"), ("xml", "<code>\n")])
def test_thousands_of_openers_are_as_many_abandoned_blocks(dialect: str, opener: str) -> None:
    parsed = trajectory.parse(opener * 5_000, dialect)
    codes = [s for s in parsed.segments if s.kind == "code"]
    assert len(codes) == 5_000 and not any(s.closed for s in codes)  # each abandoned for the next
    assert parsed.render() == opener * 5_000


def test_a_blank_run_after_xml_code_opener_is_not_a_fence() -> None:
    text = "<code>" + " " * 20_000 + "\nprint(1)\n</code>\n<interpreter>\n1\n</interpreter>\n\\boxed{1}"
    parsed = trajectory.parse(text, "xml")
    # The blanks are the block's first (blank) line of code, not the start of an inner fence.
    assert parsed.code_blocks == [" " * 20_000 + "\nprint(1)"] and parsed.outputs == ["1"]


def test_an_output_block_right_after_code_mentions_and_all() -> None:
    mentions = "see ```output here\n" * 2_000
    text = f"{mentions}```python\nprint(2)\n```\n```output\n2\n```\n\\boxed{{2}}"
    parsed = trajectory.parse(text)
    assert parsed.outputs == ["2"] and parsed.code_blocks == ["print(2)"]


def test_a_tool_call_with_a_huge_integer_or_deep_nesting_is_read_or_refused() -> None:
    call = '{"name": "python", "arguments": {"code": "print(1)", "n": ' + BIG + "}}"
    text = f"<tool_call>\n{call}\n</tool_call>"
    assert trajectory.pending_calls(text) == [trajectory.ToolCall("python", "print(1)", None)]
    nested = trajectory.parse_call("[" * 100_000)
    assert nested.code is None and nested.error is not None and "not valid JSON" in nested.error


def test_a_whitespace_only_trajectory_is_checked_not_raised() -> None:
    conformance = trajectory.check_conformance(trajectory.parse(" \n\t\n"))
    assert conformance.get("code_followed_by_output").passed  # no block, so none lacks output
    assert not conformance.get("n_code_blocks").passed


# --- answer extraction and grading ----------------------------------------------------------------


def test_an_unclosed_text_between_boxes_is_a_revision_not_a_joiner() -> None:
    assert final_answer("\\boxed{1} \\text{" + " " * 20_000 + "\\boxed{2}") == "2"
    assert final_answer("\\boxed{1} \\text{" + " " * 20_000 + "and } \\boxed{2}") == "1, 2"
    assert final_answer("\\boxed{\\text{" + " " * 20_000) is None  # a box never closed answers nothing


def test_dollars_around_an_answer_are_stripped(grader: Grader) -> None:
    answer = "$" * 20_000 + " 5 " + "$" * 20_000
    assert grader.grade(gold="5", pred=f"\\boxed{{{answer}}}").status == "correct"


def test_a_huge_integer_answer_is_graded_exactly_by_its_digits(grader: Grader) -> None:
    assert grader.grade(gold=BIG, pred=f"\\boxed{{{BIG}}}").status == "correct"
    assert grader.grade(gold=BIG, pred=f"\\boxed{{{BIG_OTHER}}}").status == "incorrect"
    assert grader.grade(gold="12", pred=f"\\boxed{{{BIG}}}").status == "incorrect"


def test_a_huge_non_integer_answer_is_unparseable_without_a_parse(grader: Grader) -> None:
    grade = grader.grade(gold="1/2", pred=f"\\boxed{{{BIG}.5}}")
    assert grade.status == "unparseable_answer" and grade.answer == f"{BIG}.5"
    assert not grader.equivalent(f"{BIG}.5", f"{BIG}.50")  # too long to parse: only the same text is equal
    assert grader.equivalent(BIG, f"{BIG}")


# --- grounding ------------------------------------------------------------------------------------


def test_a_huge_printed_integer_grounds_the_same_digits_only(grader: Grader) -> None:
    assert grader.grounded(BIG, [BIG])
    assert grader.grounded(BIG, [f"result = {BIG}.0"])
    assert not grader.grounded(BIG, [BIG_OTHER])
    assert not grader.grounded(BIG, [BIG + "0"])  # ten times as much
    assert grader.is_grounded(printed(BIG, f"\\boxed{{{BIG}}}"))


def test_printed_exponents_past_the_limit_ground_nothing(grader: Grader) -> None:
    assert not grader.grounded("12", ["1e" + "7" * 5_000])
    assert not grader.grounded("1" + "0" * 500, ["1e500"])  # past MAX_EXPONENT: not expanded
    assert grader.grounded("100", ["1e2"]) and grader.grounded("15", ["1.5e+1"])
    assert not grader.grounded("0", ["1e-5"])  # 0.00001 is no integer


# --- failure-mode metrics and the reward ----------------------------------------------------------


def test_huge_numbers_in_prose_and_code_are_compared_by_value() -> None:
    text = (
        f"<think>\nThe value is {BIG}.\n</think>\n```python\nx = {BIG}\nprint(x % 7)\n```\n"
        f"```output\n3\n```\n\\boxed{{3}}"
    )
    assert metrics.nl_literals(trajectory.parse(text), "Find x mod 7.") == [BIG]
    other = text.replace(f"x = {BIG}", f"x = {BIG_OTHER}")
    assert metrics.nl_literals(trajectory.parse(other), "Find x mod 7.") == []


def test_a_long_badly_grouped_printed_run_is_read_as_its_items() -> None:
    run = "1" + ",234" * 20_000 + ",5"  # not a grouped number (the last group is short): a list
    first = f"```python\nprint(x)\n```\n```output\n{run}\n```\n"
    second = (
        "Now add 234 and 99999.\n```python\nprint(234 + 99999)\n```\n```output\n100233\n```\n\\boxed{100233}"
    )
    assert metrics.nl_literals(trajectory.parse(first + second), "Add.") == ["99999"]  # 234 was printed


def test_code_literals_skip_nothing_they_can_read() -> None:
    assert metrics.code_literals(f"x = {BIG} + 1e999999999 + 2") == [BIG, "1e999999999", Fraction(2)]
    assert metrics.code_literals("x = 1e99999999999") == []  # an exponent of 11 digits means nothing


def test_posthoc_sees_a_huge_answer_written_before_it_was_printed(grader: Grader) -> None:
    parsed = trajectory.parse(printed(BIG, f"\\boxed{{{BIG}}}", plan=f"It is {BIG}."))
    assert metrics.posthoc(parsed, BIG, lambda a, t: bool(grader.grounded(a, [t])))
    clean = trajectory.parse(printed(BIG, f"\\boxed{{{BIG}}}"))
    assert not metrics.posthoc(clean, BIG, lambda a, t: bool(grader.grounded(a, [t])))


def test_the_reward_scores_a_huge_printed_answer() -> None:
    text = printed(BIG, f"\\boxed{{{BIG}}}")
    logged: dict[str, float] = {}
    reward = rewards.exact_match_reward(
        [text], [BIG], thinc_text=[text], stop_reason=["answer"], log_metric=logged.__setitem__
    )
    assert reward == [1.0] and logged["rollout/grounded"] == 1.0
    assert rewards.exact_match_reward([text], ["12"], thinc_text=[text], stop_reason=["answer"]) == [0.0]


# --- generated hostile text ----------------------------------------------------------------------

FRAGMENTS = [
    "`", "```", "```python\n", "```output\n", "~~~", "$", "{", "}", "\\boxed{", "\\boxed ", "\\text{",
    " ", "\n", "\t", "<code>", "</code>", "<interpreter>", "</interpreter>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<tool_response>", "<|im_end|>", "'''", "'", '"', "#", "\\", "7",
    "1e", "e+", ",000", ".", "-", "(", "[", "\\frac{", "Fraction(1, 2)", "Traceback (most recent call last):",
    "\ud800", "\x00", "é", "12", BIG[:50],
]  # fmt: skip
hostile = st.lists(
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(min_value=1, max_value=300)), min_size=1, max_size=10
).map(lambda parts: "".join(fragment * count for fragment, count in parts))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=hostile, dialect=st.sampled_from(["markdown", "xml", "tool_call"]))
def test_generated_hostile_text_goes_through_every_stage(grader: Grader, text: str, dialect: str) -> None:
    parsed = trajectory.parse(text, dialect)
    assert parsed.render() == text
    trajectory.classify(parsed)
    grade = grader.grade(gold="12", pred=parsed)
    assert grade.status in ("correct", "incorrect", "no_answer", "unparseable_answer", "grader_timeout")
    assert grader.is_grounded(parsed) in (True, False, None)
    trajectory.check_conformance(parsed)
    assert metrics.posthoc(parsed, grade.answer, lambda a, t: bool(grader.grounded(a, [t]))) in (
        True,
        False,
        None,
    )
    assert all(isinstance(v, str) for v in metrics.nl_literals(parsed, "Compute 3 times 4."))
    ratio = metrics.nl_ratio(parsed)
    assert ratio is None or 0.0 <= ratio <= 1.0
    assert rewards.exact_match_reward([text], ["12"], thinc_text=[text], stop_reason=["answer"])[0] in (
        0.0,
        1.0,
        None,
    )
