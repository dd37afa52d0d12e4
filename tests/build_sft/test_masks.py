"""SFT masks: 1 on every model-written token, 0 on the prompt and every interpreter-output token.

With the real Qwen3 tokenizer and both of its students' templates (the tiny Qwen3 fixtures): exactly
one `<think>` and one `</think>` per example, the plan trained and the template's prefix not, the
same plan tokens under both templates, and masks exact at every model/harness seam.
"""

from __future__ import annotations

import pytest

from thinc_bench import trajectory
from thinc_bench.backends import smollm2_gguf
from thinc_bench.backends._sources import load_tokenizer
from thinc_bench.build_sft.masks import completion_mask, tokenize_example
from thinc_bench.prompts import build_messages, load_examples, render_prompt_ids

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
    assert (written_by_model, written_by_harness) == split_by_writer(example.trajectory)
    opener = (
        len(tokenizer.encode("<think>\n", add_special_tokens=False)) if text.startswith("<think>\n") else 0
    )
    assert example.model_tokens == sum(mask) - opener


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
    opener = len(tokenizer.encode("<think>\n", add_special_tokens=False))
    assert example.plan_tokens == plan.token_span.end - plan.token_span.start - opener > 0
    assert 0 < example.plan_share < 0.5


def test_completion_mask_needs_token_spans() -> None:
    with pytest.raises(ValueError, match="with_token_spans"):
        completion_mask(trajectory.parse("<think>\na\n</think>\n"), [])


THINK, END_THINK = 151667, 151668
"""Qwen3's `<think>` and `</think>` token ids (../shared/models/qwen3-tokenizer/PROVENANCE.md)."""
QWEN3_TRAJECTORY = (
    "<think>\nCount the pairs with code, then add.\n</think>\n"
    "```python\nn = sum(1 for a in range(10) for b in range(10) if a < b)\nprint(n)\n```\n"
    "```output\n45\n```\n\n"  # a blank line the model writes after an output block (issue 20, item 7)
    "```python\nprint(n + 1)\n```\n```output\n46\n```\n"
    "The answer is \\boxed{46}."
)


def without_opener(text: str) -> str:
    return text.removeprefix("<think>\n")


@pytest.mark.parametrize(
    "teacher_text", [QWEN3_TRAJECTORY, without_opener(QWEN3_TRAJECTORY)], ids=["opened", "bare"]
)
def test_qwen3_example_holds_one_think_and_one_end_think_whoever_opens_the_plan(
    qwen3_tokenizers, qwen3_template, teacher_text
) -> None:
    tokenizer = qwen3_tokenizers[qwen3_template]
    example = tokenize_example(tokenizer, build_messages("Count.", "sys"), trajectory.parse(teacher_text))
    ids, mask, n = example.input_ids, example.assistant_masks, example.prompt_tokens
    assert ids.count(THINK) == 1 and ids.count(END_THINK) == 1
    think = ids.index(THINK)
    if qwen3_template == "thinking":  # the generation prompt opened the plan: the template's, not trained
        assert think == n - 2 and ids[n - 1] == tokenizer.encode("\n")[0] and mask[think] == 0
        assert not example.trajectory.render().startswith("<think>")
    else:  # the model writes <think> itself: trained
        assert think == n and mask[think] == 1
    plan_text = tokenizer.decode(ids[n : ids.index(END_THINK) + 1])
    assert plan_text.endswith("Count the pairs with code, then add.\n</think>")
    assert set(mask[think + 2 : ids.index(END_THINK) + 1]) == {1}  # plan and its closer are trained
    assert tokenizer.convert_ids_to_tokens(ids[-1]) == "<|im_end|>" and mask[-1] == 1
    assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 3  # system, user, end


def test_qwen3_plan_share_counts_the_same_plan_tokens_under_both_templates(qwen3_tokenizers) -> None:
    parsed = trajectory.parse(QWEN3_TRAJECTORY)
    messages = build_messages("Count.", "sys")
    hybrid = tokenize_example(qwen3_tokenizers["hybrid"], messages, parsed)
    thinking = tokenize_example(qwen3_tokenizers["thinking"], messages, parsed)
    expected_plan = len(qwen3_tokenizers["hybrid"].encode("Count the pairs with code, then add.\n</think>\n"))
    assert hybrid.plan_tokens == thinking.plan_tokens == expected_plan
    assert hybrid.model_tokens == thinking.model_tokens and hybrid.plan_share == thinking.plan_share
    # after the plan opener both students are trained on the very same ids and mask
    assert hybrid.input_ids[hybrid.prompt_tokens + 2 :] == thinking.input_ids[thinking.prompt_tokens :]
    assert (
        hybrid.assistant_masks[hybrid.prompt_tokens + 2 :]
        == thinking.assistant_masks[thinking.prompt_tokens :]
    )


def test_qwen3_masks_follow_the_writer_at_every_seam(qwen3_tokenizers) -> None:
    """Whole-text tokenization merges the harness's closing "`\\n" with the model's blank line into one
    token; tokenized as inference wrote it, every model character is under mask 1."""
    tokenizer = qwen3_tokenizers["hybrid"]
    whole = tokenizer(QWEN3_TRAJECTORY, add_special_tokens=False)["input_ids"]
    assert "`\n\n" in [tokenizer.decode([t]) for t in whole]  # the seam the old tokenization got wrong
    assert_masks_follow_segments(tokenizer, build_messages("Count.", "sys"), QWEN3_TRAJECTORY)
    example = tokenize_example(tokenizer, build_messages("Count.", "sys"), trajectory.parse(QWEN3_TRAJECTORY))
    n = example.prompt_tokens
    blank = [
        i
        for i, t in enumerate(example.input_ids[n:], n)
        if tokenizer.decode([t]) == "\n" and example.input_ids[i - 1] == tokenizer.encode("`\n")[0]
    ]
    assert blank and all(example.assistant_masks[i] == 1 for i in blank)


def test_qwen3_truncated_and_odd_trajectories_keep_exact_masks(qwen3_tokenizers, qwen3_template) -> None:
    tokenizer = qwen3_tokenizers[qwen3_template]
    for text in (
        "  <think>plan</think>```python\nprint(1)\n```\n```output\n1\n```\n\n\n\\boxed{1}",
        "plan\n</think>\n```python\nx\n```\n```output\nNameError: name 'x' is not defined",
        "```python\nprint(2)\n```\n```output\n2\n```\n\\boxed{2}",  # no plan at all
    ):
        example = tokenize_example(tokenizer, build_messages("p", ""), trajectory.parse(text))
        n = example.prompt_tokens
        ids, mask = example.input_ids[n:-1], example.assistant_masks[n:-1]
        model = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if m)
        harness = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if not m)
        assert (model, harness) == split_by_writer(example.trajectory)
        assert example.input_ids.count(THINK) <= 1 and example.input_ids.count(END_THINK) <= 1
