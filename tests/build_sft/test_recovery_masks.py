"""Recovered SFT trajectories train the recovery, never the slip: a failed block's code and output are
context (mask 0), in the SmolLM2 student's tokens and under both real Qwen3 templates (hybrid, and
Thinking-2507 whose prompt opens the plan)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinc_bench import trajectory
from thinc_bench.backends import smollm2_gguf
from thinc_bench.backends._sources import load_tokenizer
from thinc_bench.build_sft.masks import tokenize_example, without_failed_blocks
from thinc_bench.prompts import build_messages

PLAN = "<think>\nMultiply the two numbers with code.\n</think>\n"


def _block(code: str, output: str) -> str:
    return f"```python\n{code}\n```\n```output\n{output}\n```\n"


def _trajectory(blocks: list[tuple[str, str, str]], answer: str) -> tuple[str, str]:
    """The text of `blocks` ((code, output, status) in order) and, written independently of the
    masks, the text a student must be trained on: the plan, every clean block's code and output
    opener, the answer; no failed block, no interpreter output."""
    text, trained = PLAN, PLAN
    for code, output, status in blocks:
        text += _block(code, output)
        if status == "ok":
            trained += f"```python\n{code}\n```\n```output"
    return text + answer, trained + answer


def _trained_text(tokenizer, ids: list[int], mask: list[int]) -> str:
    return "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if m)


@pytest.fixture(scope="module")
def students(qwen3_tokenizers) -> dict:
    return {"smollm2": load_tokenizer(str(smollm2_gguf())), **qwen3_tokenizers}


SLIP = "ans = math.lcm([6, 8])\nprint(ans)"  # TypeError: lcm takes integers, not a list
FIX = "# fix: math.lcm takes the numbers themselves\nimport math\nans = math.lcm(6, 8)\nprint(ans)"
TRACEBACK = "Traceback (most recent call last):\nTypeError: 'list' object cannot be interpreted as an integer"


@pytest.mark.parametrize("student", ["smollm2", "hybrid", "thinking"])
def test_the_failed_block_is_context_and_the_recovery_is_trained(students, student) -> None:
    tokenizer = students[student]
    blocks = [
        ("import math", "", "ok"),
        (SLIP, TRACEBACK, "error"),
        (FIX, "24", "ok"),
        ("print(ans % 8)", "0", "ok"),
    ]
    text, expected = _trajectory(blocks, "The answer is \\boxed{24}.")
    example = tokenize_example(tokenizer, build_messages("What is lcm(6, 8)?", "sys"), trajectory.parse(text))
    masked = without_failed_blocks(example, [s for _, _, s in blocks])
    n = masked.prompt_tokens
    ids, mask = masked.input_ids[n:-1], masked.assistant_masks[n:-1]
    trained = _trained_text(tokenizer, ids, mask)
    assert trained.removeprefix("<think>\n") == expected.removeprefix("<think>\n")
    assert "lcm([6, 8])" not in trained and "TypeError" not in trained and "# fix:" in trained
    assert masked.assistant_masks[:n] == example.assistant_masks[:n] and masked.assistant_masks[-1] == 1
    cleared = sum(example.assistant_masks) - sum(masked.assistant_masks)
    assert cleared > 0 and masked.model_tokens == example.model_tokens - cleared
    assert masked.input_ids == example.input_ids and masked.plan_tokens == example.plan_tokens


def test_clean_and_unpaired_trajectories_keep_their_masks(students) -> None:
    tokenizer = students["hybrid"]
    text, _ = _trajectory([("print(6 * 8)", "48", "ok")], "\\boxed{48}")
    example = tokenize_example(tokenizer, build_messages("p", ""), trajectory.parse(text))
    assert without_failed_blocks(example, ["ok"]) == example
    assert without_failed_blocks(example, []) == example  # nothing to pair the output block with
    assert without_failed_blocks(example, ["error", "ok"]) == example


CODE_LINES = st.sampled_from(
    ["x = 6 * 7", "print(x)", "import maths", "y = x +", "print(1 / 0)", "z = [1, 2]"]
)
STATUSES = st.sampled_from(["ok", "ok", "error", "timeout", "memory"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    student=st.sampled_from(["smollm2", "hybrid", "thinking"]),
    blocks=st.lists(
        st.tuples(
            st.lists(CODE_LINES, min_size=1, max_size=3).map("\n".join),
            st.text(st.characters(codec="ascii", exclude_characters="`\r"), max_size=30).map(str.strip),
            STATUSES,
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_only_clean_blocks_are_trained_whatever_the_mix(students, student, blocks) -> None:
    tokenizer = students[student]
    text, expected = _trajectory(blocks, "\\boxed{42}")
    example = tokenize_example(tokenizer, build_messages("p", ""), trajectory.parse(text))
    masked = without_failed_blocks(example, [s for _, _, s in blocks])
    n = masked.prompt_tokens
    trained = _trained_text(tokenizer, masked.input_ids[n:-1], masked.assistant_masks[n:-1])
    assert trained.removeprefix("<think>\n") == expected.removeprefix("<think>\n")
