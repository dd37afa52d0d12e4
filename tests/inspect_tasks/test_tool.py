"""The python tool: each preset's exact schema, in the sample's thinc_bench session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolCall, ToolDef

from thinc_bench.inspect_tasks import benchmark, python
from thinc_bench.prompts import PUBLISHED_TOOLS, tool_spec


@pytest.mark.parametrize("name", ["python", "solve", *PUBLISHED_TOOLS])
def test_the_tool_declares_the_presets_schema_word_for_word(name: str) -> None:
    declared = ToolDef(python(name))
    expected = tool_spec(name).schema()["function"]
    assert declared.name == expected["name"] and declared.description == expected["description"]
    assert declared.parameters.model_dump(exclude_none=True) == expected["parameters"]
    assert declared.max_output == 0  # the session caps output; Inspect does not cut it again


def turn(name: str, arguments: dict[str, str] | None = None, content: str = "") -> ModelOutput:
    calls = [ToolCall(id="c", function=name, arguments=arguments)] if arguments is not None else None
    output = ModelOutput.from_message(ChatMessageAssistant(content=content, tool_calls=calls))
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def test_rstar2_agents_tool_takes_stdin_runs_fresh_and_answers_in_its_format(
    qwen3_tokenizer_dir: Path, tmp_path: Path
) -> None:
    """rStar2-Agent's preset: `input` is the program's stdin, each call a fresh process (its variables
    gone), results as `Tool call success` / `failure` lines (docs/tool_calls.md)."""
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "p", "problem": "Double 21.", "answer": "42"}) + "\n")
    tool = "python_code_with_standard_io"
    model = get_model(
        "mockllm/model",
        custom_outputs=[
            turn(tool, {"code": "n = int(input())\nprint(2 * n)", "input": "21"}),
            turn(tool, {"code": "print(n)", "input": ""}),
            turn("", None, "<answer>\\boxed{42}</answer>"),
        ],
    )
    task = benchmark(name=str(bench), preset="rstar2-agent", tokenizer=str(qwen3_tokenizer_dir))
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = log.samples or []
    first, second = [m.text for m in sample.messages if m.role == "tool"]
    assert first.startswith("Tool call success\nstdout: 42")
    assert second.startswith("Tool call failure") and "NameError" in second  # a fresh process per call
    record = sample.scores["judge"].metadata["record"]  # type: ignore[index]
    assert record["correct"] and record["n_tool_calls"] == 2 and record["exec_statuses"] == ["ok", "error"]


def test_a_call_with_code_that_is_not_a_string_is_a_failed_call_the_model_reads(
    tmp_path: Path, qwen3_tokenizer_dir: Path
) -> None:
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "p", "problem": "Add 3 and 4.", "answer": "7"}) + "\n")
    model = get_model(
        "mockllm/model",
        custom_outputs=[
            turn("python", {"code": ["print(7)"]}),
            turn("python", {"code": "print(3 + 4)"}),
            turn("", None, "\\boxed{7}"),
        ],  # type: ignore[dict-item]
    )
    task = benchmark(name=str(bench), dialect="tool_call", tokenizer=str(qwen3_tokenizer_dir))
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = log.samples or []
    record = sample.scores["judge"].metadata["record"]  # type: ignore[index]
    assert record["exec_statuses"] == ["error", "ok"] and record["n_exec_errors"] == 1 and record["correct"]


def test_your_own_agent_gets_the_session_and_the_judge(qwen3_tokenizer_dir: Path, tmp_path: Path) -> None:
    """Inspect's standard tool loop (`use_tools` + `generate`) with thinc_bench's tool, sandbox and
    scorer, as docs/inspect.md shows: the notebook keeps state and the judge reads the loop's turns."""
    from inspect_ai import Task
    from inspect_ai.solver import generate, use_tools

    from thinc_bench.inspect_tasks import dataset, judge

    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "p", "problem": "Compute 6 times 7.", "answer": "42"}) + "\n")
    model = get_model(
        "mockllm/model",
        custom_outputs=[
            turn("python", {"code": "y = 6 * 7"}),
            turn("python", {"code": "y"}),
            turn("", None, "\\boxed{42}"),
        ],
    )
    task = Task(
        dataset=dataset(str(bench), None, [0]),
        solver=[use_tools(python()), generate()],
        scorer=judge(dialect="tool_call", tokenizer=str(qwen3_tokenizer_dir)),
        sandbox="thinc_bench",
    )
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = log.samples or []
    assert [m.text for m in sample.messages if m.role == "tool"] == [
        "",
        "42",
    ]  # a bare last expression prints
    record = sample.scores["judge"].metadata["record"]  # type: ignore[index]
    assert record["correct"] and record["grounded"] and record["finish_reason"] == "answer"
