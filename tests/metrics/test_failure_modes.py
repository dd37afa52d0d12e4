"""The three TIR failure modes on hand-written trajectories of both dialects, with the real judge."""

from __future__ import annotations

from fractions import Fraction

import pytest

from thinc_bench import grading
from thinc_bench.metrics import code_literals, failure_modes, nl_literals, nl_ratio, posthoc, rate
from thinc_bench.trajectory import parse

PROBLEM = "How many integers from 1 to 100 are divisible by 3 or by 5?"

THINC = """<think>
Count directly: loop over the integers up to the bound and test each divisibility condition.
</think>
```python
print(sum(1 for n in range(1, 101) if n % 3 == 0 or n % 5 == 0))
```
```output
47
```
The count is \\boxed{47}.
"""

INTERLEAVED_POSTHOC = """There are 33 multiples of 3 and 20 multiples of 5, and 6 multiples of 15, so the count is 47.
Let me verify with code.
<code>
print(33 + 20 - 6)
</code>
<interpreter>
47
</interpreter>
The code confirms it. So the answer is \\boxed{47}.
"""

INTERLEAVED_FROM_OUTPUTS = """First the multiples of 3.
<code>
print(100 // 3)
</code>
<interpreter>
33
</interpreter>
There are 33 multiples of 3 up to 100. Now add those of 5 and remove the ones counted twice.
<code>
print(33 + 100 // 5 - 100 // 15)
</code>
<interpreter>
47
</interpreter>
So the answer is \\boxed{47}.
"""


def _contains(answer: str, text: str) -> bool:
    """The judge eval uses: grounding on one text."""
    return bool(grading.grounded(answer, [text]))


def test_thinc_trajectory_is_neither_posthoc_nor_has_nl_literals() -> None:
    traj = parse(THINC, "markdown")
    assert posthoc(traj, "47", _contains) is False
    assert nl_literals(traj, PROBLEM) == []


def test_interleaved_answer_stated_in_prose_then_verified_is_posthoc() -> None:
    assert posthoc(parse(INTERLEAVED_POSTHOC, "xml"), "47", _contains) is True


def test_answer_first_seen_in_an_output_is_not_posthoc_even_when_prose_repeats_it() -> None:
    assert posthoc(parse(INTERLEAVED_FROM_OUTPUTS, "xml"), "47", _contains) is False


def test_posthoc_compares_values_through_the_judge_not_strings() -> None:
    # Prose says 1/2 as a fraction; the code prints 0.5; the boxed answer is \frac{1}{2}.
    text = (
        "Each coin is fair, so the probability is 1/2.\n```python\nprint(1 / 2)\n```\n"
        "```output\n0.5\n```\nSo the answer is \\boxed{\\frac{1}{2}}."
    )
    assert posthoc(parse(text), "\\frac{1}{2}", _contains) is True


def test_posthoc_is_not_applicable_without_an_answer_or_an_output() -> None:
    assert posthoc(parse(THINC), None, _contains) is None
    assert posthoc(parse("The answer is 47, so \\boxed{47}."), "47", _contains) is None


def test_prose_numbers_typed_into_code_are_nl_literals() -> None:
    # 33 and 20 are computed in prose and typed into code; 6 is below the literal threshold.
    assert nl_literals(parse(INTERLEAVED_POSTHOC, "xml"), PROBLEM) == ["33", "20"]


def test_numbers_from_the_problem_or_an_earlier_output_are_not_nl_literals() -> None:
    # 100 is in the problem; 33 was printed by the first block before the prose repeated it.
    assert nl_literals(parse(INTERLEAVED_FROM_OUTPUTS, "xml"), PROBLEM) == []


def test_nl_literals_ignore_strings_and_comments_and_count_each_value_once() -> None:
    text = (
        "<think>\nThe product 12 * 7 = 84.\n</think>\n```python\nx = 84  # 12 * 7\nprint('84', x)\n```\n"
        "```output\n84 84\n```\n```python\nprint(84 + 1)\n```\n```output\n85\n```\n\\boxed{85}"
    )
    assert nl_literals(parse(text), "Compute 12 times 7 plus 1.") == ["84"]


def test_code_literals_read_python_numbers_and_survive_cut_code() -> None:
    assert code_literals("x = 0x1F + 1_000 + 2.5e1 + 3j  # 99\ns = '77'") == [
        Fraction(31),
        Fraction(1000),
        Fraction(25),
    ]
    assert code_literals("print((1234 + ") == [Fraction(1234)]  # a block cut by the budget


def test_nl_ratio_is_small_for_thinc_and_large_for_interleaved() -> None:
    thinc = nl_ratio(parse(THINC))
    interleaved = nl_ratio(parse(INTERLEAVED_POSTHOC, "xml"))
    assert thinc is not None and interleaved is not None
    assert thinc == pytest.approx(
        len("The count is \\boxed{47}.\n") / (len(THINC) - len("```output\n47\n```\n"))
    )
    assert interleaved > 0.5 > thinc


def test_nl_ratio_counts_with_the_given_token_counter() -> None:
    words = nl_ratio(parse("Some words here.\n```python\nprint(1)\n```\n"), lambda s: len(s.split()))
    assert words == pytest.approx(3 / 6)  # 3 prose words of 3 + 3 ("```python", "print(1)", "```")


def test_failure_modes_summary_leaves_unmeasured_trajectories_out() -> None:
    modes = failure_modes([True, False, None], [2, 0, None], [0.5, None, 0.1], [0.2, 0.4, None])
    assert modes.posthoc == rate(1, 2)
    assert modes.nl_literals == rate(1, 2)
    assert modes.nl_literals_mean == 1.0
    assert modes.nl_ratio == pytest.approx(0.3)
    assert modes.plan_share == pytest.approx(0.3)


def test_nl_literals_read_the_code_of_a_tool_call_not_its_json():
    from thinc_bench import trajectory as tr
    from thinc_bench.metrics import nl_literals

    call = '<tool_call>\n{"name": "python", "arguments": {"code": "print(sum(map(int, str(1267650600228229401496703205376))))"}}\n</tool_call>'
    text = "First, 2^100 = 1267650600228229401496703205376. Now sum its digits.\n" + call
    assert nl_literals(tr.parse(text, "tool_call"), "Find the digit sum of 2^100.") == [
        "1267650600228229401496703205376"
    ]
