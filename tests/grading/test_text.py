"""Where the answer is (issue 16 "Answer extraction", issue 19 several boxes) and how golds and answers
are read (issue 19 separators and units), on the real grader and the real trajectory parser."""

from typing import Any

import pytest

from thinc_bench import trajectory
from thinc_bench.grading import Grader, GradeRequest, final_answer, final_text, normalize_answer
from thinc_bench.train.rewards import exact_match_reward


def _code(code: str, output: str) -> str:
    """One executed markdown block, as a rollout writes it (the harness appends the output block)."""
    return f"```python\n{code}\n```\n```output\n{output}\n```\n"


PRINTED_BOX = "Let me compute it.\n" + _code("print('\\\\boxed{5}')", "\\boxed{5}") + "So the value is 5."
PERCENT_BOX = "Compute.\n" + _code('print("\\\\boxed{%d}" % 5)', "\\boxed{5}") + "The answer is five."
PLAN_GUESS = "<think>Probably \\boxed{3}, check by hand.</think>\nAfter checking, the answer is 4."


@pytest.fixture(scope="module")
def grader() -> Any:
    with Grader(workers=1, timeout_s=5.0) as g:
        yield g


# --- the final text (issue 16) -------------------------------------------------------------------


def test_box_printed_by_code_is_not_the_answer(grader: Grader) -> None:
    assert final_answer(PRINTED_BOX) is None
    assert grader.grade(gold="5", pred=PRINTED_BOX).status == "no_answer"


def test_percent_format_in_code_is_not_the_answer(grader: Grader) -> None:
    assert final_answer(PERCENT_BOX) is None
    assert grader.grade(gold="5", pred=PERCENT_BOX).status == "no_answer"


def test_box_after_the_last_output_is_the_answer(grader: Grader) -> None:
    text = PERCENT_BOX + " Hence \\boxed{5}."
    assert grader.grade(gold="5", pred=text).correct


def test_guess_boxed_in_the_plan_does_not_beat_an_unboxed_final_statement(grader: Grader) -> None:
    assert final_text(PLAN_GUESS) == "After checking, the answer is 4."
    assert grader.grade(gold="3", pred=PLAN_GUESS).status == "no_answer"


def test_plan_guess_then_code_then_final_box(grader: Grader) -> None:
    text = "<think>guess \\boxed{3}</think>\n" + _code("print(2 + 2)", "4") + "\\boxed{4}"
    assert grader.grade(gold="4", pred=text).correct


def test_without_code_or_plan_the_whole_text_is_final() -> None:
    assert final_answer("We get \\boxed{7}. Done.") == "7"


def test_unclosed_plan_has_no_think_closer_so_the_whole_text_counts() -> None:
    assert final_answer("<think>so it is \\boxed{9}") == "9"


def test_earlier_step_box_is_not_the_answer() -> None:
    text = "First \\boxed{2}.\n" + _code("print(3)", "3") + "So 3."
    assert final_answer(text) is None


def test_truncated_in_a_code_block_has_no_answer() -> None:
    text = "\\boxed{1}\n" + _code("print(1)", "1") + "```python\nprint('\\\\boxed{2}')"
    assert final_answer(text) is None


def test_xml_dialect_final_text_from_text_and_from_trajectory() -> None:
    text = "<code>print('\\\\boxed{1}')</code>\n<interpreter>\n\\boxed{1}\n</interpreter>\nSo \\boxed{2}"
    assert final_answer(text) == "2"
    assert final_answer(trajectory.parse(text, "xml")) == "2"


def test_grade_takes_a_parsed_trajectory(grader: Grader) -> None:
    parsed = trajectory.parse(PRINTED_BOX + " \\boxed{5}")
    assert grader.grade(gold="5", pred=parsed).correct


def test_grade_rejects_other_types_with_a_clear_error(grader: Grader) -> None:
    with pytest.raises(TypeError, match="rollout's text"):
        grader.grade(gold="5", pred=5)  # type: ignore[arg-type]


def test_reward_uses_the_same_answer_as_grade() -> None:
    texts = [PRINTED_BOX, PLAN_GUESS, PRINTED_BOX + " \\boxed{5}"]
    assert exact_match_reward([""] * 3, ["5", "3", "5"], thinc_text=texts) == [0.0, 0.0, 1.0]


# --- bare boxes and separators (issue 16) --------------------------------------------------------


@pytest.mark.parametrize(("text", "answer"), [("so \\boxed 25.", "25"), ("so \\boxed 3.5.", "3.5")])
def test_bare_box_before_a_full_stop(text: str, answer: str) -> None:
    assert final_answer(text) == answer


def test_thin_space_thousands_separator(grader: Grader) -> None:
    assert normalize_answer("33\\,121\\,635") == "33121635"
    assert grader.grade(gold="33121635", pred="\\boxed{33\\,121\\,635}").correct
    assert grader.grade(gold="33,121,635", pred="\\boxed{33121635}").correct


# --- several boxes in the final text (issue 19) --------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "pred"),
    [
        ("\\{1,2,3\\}", "\\boxed{1} and \\boxed{2} and \\boxed{3}"),
        ("(2, 2), (6, 2)", "The pairs are \\boxed{(2, 2)} and \\boxed{(6, 2)}."),
        ("k = 45, n = 2", "$\\boxed{k = 45}$, $\\boxed{n = 2}$"),
        ("-2, 1", "\\boxed{-2} \\quad \\boxed{1}"),
    ],
)
def test_final_run_of_boxes_is_graded_together(grader: Grader, gold: str, pred: str) -> None:
    assert grader.grade(gold=gold, pred=pred).correct


def test_a_revision_after_words_keeps_the_last_box(grader: Grader) -> None:
    pred = "First \\boxed{3}, then on reflection \\boxed{5}."
    assert final_answer(pred) == "5"
    assert grader.grade(gold="5", pred=pred).correct


def test_single_final_box_keeps_the_last_box_rule(grader: Grader) -> None:
    assert not grader.grade(gold="1, 2", pred="\\boxed{2}").correct


def test_boxes_before_the_last_output_do_not_join() -> None:
    text = "\\boxed{1}\n" + _code("print(2)", "2") + "\\boxed{2}"
    assert final_answer(text) == "2"


# --- readings of separators, units, golds math-verify cannot parse (issue 19) --------------------


@pytest.mark.parametrize(
    ("gold", "pred", "correct"),
    [
        ("0,111", "\\boxed{0.111}", True),  # a leading 0 is not a thousands group
        ("0,111", "\\boxed{111}", False),
        ("12345", "\\boxed{012,345}", False),
        ("1000.99", "\\boxed{1000,99}", True),  # decimal comma: not three digits, gold is a decimal
        ("1000.99", "\\boxed{1,000.99}", True),
        ("1.5", "\\boxed{1,5}", True),
        ("1000", "\\boxed{1 000}", True),  # space-grouped thousands
        ("1234567", "\\boxed{1 234 567}", True),
        ("1000", "\\boxed{1,000}", True),  # exactly three digits after the comma: a group
        ("1.000", "\\boxed{1,000}", False),
        ("1000.99", "\\boxed{1,000.99€}", True),
        ("1000.99", "\\boxed{€1,000.99}", True),
        ("1000.99", "\\boxed{1,000.99m²}", True),
        ("12", "\\boxed{12 cm^2}", True),
        ("5", "\\boxed{5x}", False),  # not a unit
        ("1, 2", "\\boxed{1,2}", True),  # a list gold keeps the list reading
        ("1 - \\frac{1}{\\mathrm{e}}", "\\boxed{1 - \\frac{1}{\\mathrm{e}}}", True),
        ("1 - \\frac{1}{\\mathrm{e}}", "\\boxed{1-\\frac{1}{e}}", True),
        (
            "x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}",
            "\\boxed{x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}}",
            True,
        ),
        ("x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}", "\\boxed{x = \\frac{1}{2}}", False),
    ],
)
def test_separator_unit_and_unparseable_gold_readings(
    grader: Grader, gold: str, pred: str, correct: bool
) -> None:
    result = grader.grade(gold=gold, pred=pred)
    assert result.correct is correct, result


def test_identical_unparseable_gold_needs_no_worker() -> None:
    with Grader(workers=1) as g:
        assert g.grade(gold="x = \\frac{1}{2}, x = 3", pred="\\boxed{x=\\frac{1}{2},x=3}").correct
        assert g._pool is None


def test_grade_many_accepts_trajectories_and_texts(grader: Grader) -> None:
    reqs = [GradeRequest("5", trajectory.parse(PRINTED_BOX)), GradeRequest("5", PRINTED_BOX + "\\boxed{5}")]
    assert [g.status for g in grader.grade_many(reqs)] == ["no_answer", "correct"]


def test_equivalent_for_maj_at_k_uses_the_same_readings(grader: Grader) -> None:
    assert grader.equivalent("1,000", "1 000") and grader.equivalent("90°", "90^\\circ")
    assert grader.equivalent("1.5", "1,5") and not grader.equivalent("1,000", "1.000")
    assert grader.equivalent(
        "\\frac{-1 \\pm \\sqrt{17}}{2}", "\\frac{-1-\\sqrt{17}}{2}, \\frac{-1+\\sqrt{17}}{2}"
    )
