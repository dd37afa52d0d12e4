"""build_sft's tool_call examples are what each student's own rollout would be: a teacher's trajectory
(Qwen3 hybrid, thinking or not) turned into examples for the hybrid Qwen3, Qwen3-4B-Thinking-2507 (its
template derived from the real one, tests/conftest.py) and SmolLM2 (ChatML) students equals, id for id
and mask for mask, the student's scripted rollout of the same turns written as that student writes
them. The rollout's env_mask (1 where the generator wrote) is the oracle for "model-written"."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from thinc_bench import trajectory

COUNT = "n = globals().get('n', 0) + 1\nprint(n)"
QUESTION = "Count once, then multiply by ten."
EMPTY = "<think>\n\n</think>\n\n"


def call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


FIRST, SECOND = call(COUNT), call("print(n * 10)")
ANSWER = "The answer is \\boxed{10}."


def teacher_turns(later: str) -> list[str]:
    """A hybrid Qwen3 teacher's turns: its plan, then later turns with thinking or an empty plan."""
    second = {"thinking": "<think>\nNow scale.\n</think>\n\n", "empty": EMPTY}[later] + SECOND
    return ["<think>\nCount in code.\n</think>\n\n" + FIRST, second, ANSWER]


def student_turns(student: str, later: str) -> list[str]:
    """The same trajectory as each student writes it after its own generation prompts."""
    if student != "thinking":  # the model opens its plan itself: the teacher's text as is
        return teacher_turns(later)
    second = {"thinking": "Now scale.\n</think>\n\n", "empty": "</think>\n\n"}[later] + SECOND
    return ["Count in code.\n</think>\n\n" + FIRST, second, "</think>\n\n" + ANSWER]


@pytest.fixture(scope="module")
def sandbox():
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig()) as box:  # one for the module: each rollout gets its own session
        yield box


def rollout(sandbox, tmp_path: Path, tokenizer: str | None, turns: list[str], kwargs: dict | None = None):
    from thinc_bench.backends import SamplingParams
    from thinc_bench.backends.scripted import ScriptedGenerator
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.eval.rollout import rollout as run
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool, render_prompt_ids

    script = tmp_path / f"turns-{len(list(tmp_path.iterdir()))}.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": turns}) + "\n")
    generator = ScriptedGenerator(script, tokenizer=tokenizer)
    messages = build_messages(QUESTION, load_system_prompt("tool_call"))
    prompt = render_prompt_ids(generator.tokenizer, messages, kwargs, [python_tool()])

    async def go():
        with sandbox.session() as session:
            return await run(
                generator,
                session,
                prompt,
                SamplingParams(max_tokens=1024),
                limits=RolloutLimits(4096, 4),
                dialect="tool_call",
                request_id="p/0",
                template_kwargs=kwargs,
            )

    result = asyncio.run(go())
    assert result.stop_reason == "answer" and [e.status for e in result.executions] == ["ok", "ok"]
    return generator.tokenizer, messages, result


@pytest.fixture(scope="module")
def students(qwen3_tokenizer_folders) -> dict[str, str | None]:
    return {**qwen3_tokenizer_folders, "smollm2": None}  # None: the bundled SmolLM2 (ChatML) tokenizer


@pytest.mark.parametrize("later", ["thinking", "empty"])
@pytest.mark.parametrize("student", ["hybrid", "thinking", "smollm2"])
def test_the_example_is_the_students_own_rollout(
    sandbox, tmp_path, students, qwen3_tokenizer_dir, student, later
):
    from thinc_bench.build_sft.masks import tokenize_example
    from thinc_bench.prompts import python_tool

    _, _, taught = rollout(sandbox, tmp_path, str(qwen3_tokenizer_dir), teacher_turns(later))
    tokenizer, messages, own = rollout(sandbox, tmp_path, students[student], student_turns(student, later))
    teacher = trajectory.parse(taught.text, "tool_call")
    example = tokenize_example(tokenizer, messages, teacher, tools=[python_tool()])
    assert example.input_ids == own.prompt_ids + own.completion_ids
    assert example.assistant_masks == [0] * len(own.prompt_ids) + own.env_mask
    if student == "thinking":  # the template's <think>\n of each tool turn is 0; the model's </think> 1
        opener = tokenizer.encode("<|im_start|>assistant\n<think>\n", add_special_tokens=False)
        ids, mask = example.input_ids, example.assistant_masks
        starts = [i for i in range(len(ids)) if ids[i : i + len(opener)] == opener]
        assert len(starts) == 3  # the prompt's and both tool turns'
        assert all(mask[i + len(opener) - 1] == 0 and mask[i + len(opener)] == 1 for i in starts)


def test_a_teachers_empty_plan_prompts_are_not_the_students(sandbox, tmp_path, students, qwen3_tokenizer_dir):
    """A teacher run with enable_thinking=False: its generation prompts wrote an empty plan before
    each turn; the student's example has the student's own prompts and tool turns."""
    from thinc_bench.build_sft.masks import tokenize_example
    from thinc_bench.prompts import python_tool

    kwargs = {"enable_thinking": False}
    _, _, taught = rollout(sandbox, tmp_path, str(qwen3_tokenizer_dir), [FIRST, SECOND, ANSWER], kwargs)
    assert taught.text.count(EMPTY) == 2  # the tool turns' generation prompts (the prompt's is apart)
    for student, turns in (
        ("hybrid", [FIRST, EMPTY + SECOND, EMPTY + ANSWER]),
        ("thinking", ["</think>\n\n" + FIRST, "</think>\n\n" + SECOND, "</think>\n\n" + ANSWER]),
    ):
        tokenizer, messages, own = rollout(sandbox, tmp_path, students[student], turns)
        example = tokenize_example(
            tokenizer, messages, trajectory.parse(taught.text, "tool_call"), tools=[python_tool()]
        )
        assert example.input_ids == own.prompt_ids + own.completion_ids, student
        assert example.assistant_masks == [0] * len(own.prompt_ids) + own.env_mask, student
