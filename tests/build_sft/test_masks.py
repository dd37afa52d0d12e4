"""SFT masks: 1 on every model-written token, 0 on the prompt and every interpreter-output token."""

from __future__ import annotations

import pytest

from thinc_bench import trajectory
from thinc_bench.backends import smollm2_gguf
from thinc_bench.backends._sources import load_tokenizer
from thinc_bench.build_sft.masks import completion_mask, render_prompt_ids, tokenize_example
from thinc_bench.prompts import build_messages, load_examples

STOP = "```output"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(smollm2_gguf()))


def split_by_writer(parsed: trajectory.Trajectory) -> tuple[str, str]:
    """The model's text and the interpreter's text of a trajectory, each concatenated in order."""
    model, harness = [], []
    for segment in parsed.segments:
        if segment.kind == "output":
            model.append(segment.raw[: len(STOP)])
            harness.append(segment.raw[len(STOP) :])
        else:
            model.append(segment.raw)
    return "".join(model), "".join(harness)


def assert_masks_follow_segments(tokenizer, messages, text: str) -> None:
    parsed = trajectory.parse(text)
    example = tokenize_example(tokenizer, messages, parsed)
    prompt = render_prompt_ids(tokenizer, messages)
    n = example.prompt_tokens
    assert example.input_ids[:n] == prompt and set(example.assistant_masks[:n]) == {0}
    assert example.input_ids[-1] == tokenizer.eos_token_id and example.assistant_masks[-1] == 1
    ids, mask = example.input_ids[n:-1], example.assistant_masks[n:-1]
    assert len(ids) == len(mask)
    written_by_model = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if m)
    written_by_harness = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if not m)
    assert (written_by_model, written_by_harness) == split_by_writer(parsed)
    assert example.model_tokens == sum(mask)


def test_fewshot_example_masks_follow_segments_token_by_token(tokenizer) -> None:
    example = load_examples(1)[0]
    assert_masks_follow_segments(tokenizer, build_messages(example.problem, "sys"), example.trajectory)


def test_truncated_output_and_prose_still_mask_only_interpreter_tokens(tokenizer) -> None:
    text = "<think>\nplan\n</think>\n```python\nprint(1)\n```\n```output\n1\n```\nSome prose.\n```python\nx\n```\n```output\nNameError"
    assert_masks_follow_segments(tokenizer, build_messages("p", ""), text)


def test_plan_tokens_count_the_plan_segment_in_student_tokens(tokenizer) -> None:
    text = load_examples(1)[0].trajectory
    example = tokenize_example(tokenizer, build_messages("p", ""), trajectory.parse(text))
    plan = example.trajectory.segments[0]
    assert plan.kind == "plan"
    assert example.plan_tokens == plan.token_span.end - plan.token_span.start > 0
    assert 0 < example.plan_share < 0.5


def test_completion_mask_needs_token_spans() -> None:
    with pytest.raises(ValueError, match="with_token_spans"):
        completion_mask(trajectory.parse("<think>\na\n</think>\n"), [])
