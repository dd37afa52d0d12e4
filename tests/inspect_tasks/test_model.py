"""thinc_bench's backends as Inspect models: names, the backend behind other providers, and how a
turn's text becomes Inspect's reasoning, content and tool calls (the Hermes reading vLLM serves)."""

from __future__ import annotations

import json

import pytest
from inspect_ai.model import get_model

from thinc_bench.errors import ConfigError
from thinc_bench.inspect_tasks.model import parse_name, read_turn, spec_of
from thinc_bench.inspect_tasks.settings import ModelSpec


def call(code: str, name: str = "python") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"code": code}}) + "\n</tool_call>"


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("bundled-smollm2", ModelSpec("bundled-smollm2", "hf")),
        ("Qwen/Qwen3-1.7B", ModelSpec("Qwen/Qwen3-1.7B", "hf")),
        ("vllm/Qwen/Qwen3-4B", ModelSpec("Qwen/Qwen3-4B", "vllm")),
        ("scripted//tmp/turns.jsonl", ModelSpec("/tmp/turns.jsonl", "scripted")),
        ("openai/served-name", ModelSpec("served-name", "openai")),
    ],
)
def test_a_thinc_bench_model_name_is_a_backend_and_a_model(name: str, spec: ModelSpec) -> None:
    assert parse_name(name, {}) == spec


def test_a_backend_without_a_model_is_refused_naming_an_example() -> None:
    with pytest.raises(ConfigError, match="thinc_bench/hf/bundled-smollm2"):
        parse_name("scripted/", {})


def test_the_backend_behind_inspects_own_providers() -> None:
    assert spec_of(get_model("none")) == ModelSpec(None, "hf")  # no --model: the bundled demo
    assert spec_of(get_model("vllm/Qwen/Qwen3-4B")) == ModelSpec("Qwen/Qwen3-4B", "vllm")  # lazy: no server
    served = spec_of(get_model("vllm/Qwen/Qwen3-4B", base_url="http://127.0.0.1:9/v1"))
    assert served == ModelSpec(
        "Qwen/Qwen3-4B", "openai", {"base_url": "http://127.0.0.1:9/v1", "tokenizer": "Qwen/Qwen3-4B"}
    )
    with pytest.raises(ConfigError, match="-T dialect=tool_call"):
        spec_of(get_model("mockllm/model"))  # a hosted-style provider: its tokens are out of reach


def test_a_turn_splits_into_reasoning_content_and_calls() -> None:
    text = "<think>\nAdd in code.\n</think>\n\nLet me compute.\n" + call("print(3 + 4)")
    reasoning, content, calls = read_turn(text, plan_open=False, tools=["python"])
    assert (reasoning, content) == ("Add in code.", "Let me compute.")
    assert [(c.function, c.arguments, c.parse_error) for c in calls] == [
        ("python", {"code": "print(3 + 4)"}, None)
    ]


def test_a_plan_the_prompt_opened_is_reasoning_without_its_opening_tag() -> None:
    reasoning, content, calls = read_turn(
        "Plan it.\n</think>\n\n\\boxed{7}", plan_open=True, tools=["python"]
    )
    assert (reasoning, content, calls) == ("Plan it.", "\\boxed{7}", [])


def test_calls_that_cannot_run_carry_the_token_paths_reason() -> None:
    text = (
        '<tool_call>\n{"name": "python", "arguments": {"code": "1"}\n</tool_call>\n'
        + call("1", "calculator")
        + '\n<tool_call>\n{"name": "python", "arguments": {"script": "1"}}\n</tool_call>'
    )
    _, _, calls = read_turn(text, plan_open=False, tools=["python"])
    errors = [c.parse_error for c in calls]
    assert errors[0] is not None and errors[0].startswith("the tool call is not valid JSON")
    assert errors[1:] == [
        "unknown tool 'calculator': the only tool is 'python'.",
        "the tool call has no string argument 'code'.",
    ]


def test_without_tools_declared_nothing_is_a_call_and_a_mention_never_is() -> None:
    assert read_turn(call("1"), plan_open=False, tools=[])[2] == []
    mention = "I could write <tool_call> here but the answer is \\boxed{1}."
    assert read_turn(mention, plan_open=False, tools=["python"])[2] == []
