"""The ThinC loop runs real code between scripted turns, in token ids, and stops for stated reasons."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from thinc_bench import trajectory
from thinc_bench.backends import SamplingParams
from thinc_bench.backends.scripted import ScriptedGenerator
from thinc_bench.eval.rollout import NO_CODE_OUTPUT, RolloutLimits, RolloutResult, render_prompt, rollout
from thinc_bench.prompts import build_messages, load_system_prompt
from thinc_bench.sandbox import Sandbox, SandboxConfig

PARAMS = SamplingParams(temperature=0.0, max_tokens=4096)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig()) as sb:
        yield sb


@pytest.fixture(scope="module")
def generator(scripted_turns: Path) -> ScriptedGenerator:
    return ScriptedGenerator(scripted_turns)


def _run(
    generator: ScriptedGenerator,
    sandbox: Sandbox,
    problem_id: str,
    *,
    limits: RolloutLimits,
    inject: int = 0,
    request: str = "r",
    params: SamplingParams = PARAMS,
) -> RolloutResult:
    prompt = render_prompt(generator, build_messages("Compute.", load_system_prompt("thinc")))

    async def go() -> RolloutResult:
        with sandbox.session(inject_failures=inject) as session:
            return await rollout(
                generator, session, prompt, params, limits=limits, request_id=f"{problem_id}/{request}"
            )

    return asyncio.run(go())


def test_full_trajectory_executes_every_block_and_ends_at_the_answer(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="full")
    parsed = trajectory.parse(result.text)
    assert result.stop_reason == "answer"
    assert parsed.outputs == ["5/6", "0.8333333333333334"]
    assert [e.status for e in result.executions] == ["ok", "ok"]
    assert trajectory.classify(parsed) == "thinc"


def test_env_mask_is_zero_exactly_on_interpreter_tokens(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-1", limits=RolloutLimits(), request="mask")
    tokenizer = generator.tokenizer
    assert len(result.env_mask) == len(result.completion_ids)
    harness = [t for t, m in zip(result.completion_ids, result.env_mask, strict=True) if m == 0]
    model = [t for t, m in zip(result.completion_ids, result.env_mask, strict=True) if m == 1]
    assert tokenizer.decode(harness) == "\n5\n```\n"
    assert tokenizer.decode(model, skip_special_tokens=True) == result.text.replace("\n5\n```\n", "", 1)
    assert result.gen_tokens == len(model)
    assert tokenizer.decode(result.completion_ids, skip_special_tokens=True) == result.text


def test_logprobs_follow_the_tokens_with_nan_on_interpreter_tokens(generator, sandbox) -> None:
    asked = replace(PARAMS, logprobs=True)
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="lp", params=asked)
    assert result.logprobs is not None and len(result.logprobs) == len(result.completion_ids)
    assert [math.isnan(x) for x in result.logprobs] == [m == 0 for m in result.env_mask]
    assert {x for x in result.logprobs if not math.isnan(x)} == {0.0}  # the script is certain
    plain = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="plain")
    assert plain.logprobs is None and plain.completion_ids == result.completion_ids


def test_tool_call_limit_stops_before_the_extra_execution(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(max_tool_calls=1), request="limit")
    assert result.stop_reason == "max_tool_calls"
    assert result.n_tool_calls == 1
    assert result.text.endswith("```output")


def test_token_budget_stops_the_trajectory(generator, sandbox) -> None:
    prompt_len = len(render_prompt(generator, build_messages("Compute.", load_system_prompt("thinc"))))
    result = _run(
        generator, sandbox, "tiny-2", limits=RolloutLimits(max_tokens=prompt_len + 20), request="budget"
    )
    assert result.stop_reason == "max_tokens"
    assert result.total_tokens <= prompt_len + 20
    assert result.n_tool_calls == 0


def test_injected_failures_replace_the_first_k_executions(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), inject=1, request="inject")
    assert [(e.status, e.injected) for e in result.executions] == [("error", True), ("error", False)]
    outputs = trajectory.parse(result.text).outputs
    assert "RuntimeError" in outputs[0]
    assert "NameError" in outputs[1]  # the injected block did not run, so x was never defined


def test_output_opened_without_code_is_an_error_the_model_sees(sandbox, tmp_path: Path) -> None:
    script = tmp_path / "turns.jsonl"
    script.write_text(
        '{"problem_id": "p", "turns": ["<think>\\nplan\\n</think>\\n```output", "\\\\boxed{1}"]}\n'
    )
    result = _run(ScriptedGenerator(script), sandbox, "p", limits=RolloutLimits(), request="nocode")
    assert result.executions[0].status == "error"
    assert NO_CODE_OUTPUT in result.text


def test_code_close_trigger_executes_a_closed_block_and_writes_the_output_opener(
    sandbox, tmp_path: Path
) -> None:
    script = tmp_path / "turns.jsonl"
    turns = ["Look:\n```\nnot code\n```\n", "```python\nprint(6 * 7)\n```\n", "\\boxed{42}"]
    script.write_text(json.dumps({"problem_id": "p", "turns": turns}) + "\n")
    generator = ScriptedGenerator(script)

    async def go() -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                [1],
                PARAMS,
                limits=RolloutLimits(),
                exec_on="code_close",
                response_prefix="<think>\nplan\n</think>\n",
                request_id="p/close",
            )

    result = asyncio.run(go())
    assert result.n_tool_calls == 1  # the plain ``` block closed a fence but was no code
    assert trajectory.parse(result.text).outputs == ["42"]
    assert "```\n```output\n42\n```\n" in result.text
    harness = generator.tokenizer.decode(
        [t for t, m in zip(result.completion_ids, result.env_mask, strict=True) if m == 0]
    )
    assert harness == "<think>\nplan\n</think>\n```output\n42\n```\n"
    assert result.stop_reason == "answer"
