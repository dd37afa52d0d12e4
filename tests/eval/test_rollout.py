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
from thinc_bench.backends.base import MAX_SEED
from thinc_bench.backends.scripted import ScriptedGenerator
from thinc_bench.eval.rollout import (
    NO_CODE_OUTPUT,
    OFF_LOOP_CHARS,
    OUTPUT_CUT_NOTE,
    RolloutLimits,
    RolloutResult,
    render_prompt,
    rollout,
    turn_seed,
)
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


def test_token_budget_counts_the_completion_not_the_prompt(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(max_tokens=20), request="budget")
    assert result.prompt_tokens > 20  # the prompt alone is over the budget, and does not count
    assert (result.stop_reason, result.completion_tokens, result.n_tool_calls) == ("max_tokens", 20, 0)
    assert result.total_tokens == result.prompt_tokens + 20 and not result.context_exceeded


LONG_OUTPUT_CODE = "for i in range(3000):\n    print(i)"


def _long_output_script(tmp_path: Path, dialect: str) -> ScriptedGenerator:
    open_code, close_code = ("```python\n", "\n```\n") if dialect == "markdown" else ("<code>\n", "\n</code>")
    stop = trajectory.DIALECTS[dialect].stop
    turns = [f"<think>\nprint many\n</think>\n{open_code}{LONG_OUTPUT_CODE}{close_code}{stop}", "\\boxed{1}"]
    script = tmp_path / f"long-{dialect}.jsonl"
    script.write_text(json.dumps({"problem_id": "long", "turns": turns}) + "\n")
    return ScriptedGenerator(script)


@pytest.mark.parametrize("dialect", ["markdown", "xml"])
@pytest.mark.parametrize("budget", [120, 400, 1500])
def test_long_output_is_cut_to_the_budget_and_its_block_stays_closed(
    sandbox, tmp_path, dialect, budget
) -> None:
    generator = _long_output_script(tmp_path, dialect)

    async def go() -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                [1, 2, 3],
                PARAMS,
                limits=RolloutLimits(max_tokens=budget),
                dialect=dialect,
                request_id=f"long/{dialect}-{budget}",
            )

    result = asyncio.run(go())
    assert result.completion_tokens <= budget  # the output (about 10,000 tokens) never overruns it
    assert result.completion_tokens >= budget - 12  # and the cut keeps what fits, not far less
    assert (result.stop_reason, result.output_cut, result.n_tool_calls) == ("max_tokens", True, 1)
    assert not result.context_exceeded
    parsed = trajectory.parse(result.text, dialect)
    output = [s for s in parsed.segments if s.kind == "output"][-1]
    assert output.closed and output.content.startswith("0\n1\n2\n")
    assert output.content.endswith(OUTPUT_CUT_NOTE.strip())
    assert "\\boxed" not in result.text  # the trajectory ended at the cut: no further model turn
    tokenizer = generator.tokenizer
    assert tokenizer.decode(result.completion_ids, skip_special_tokens=True) == result.text


def test_output_that_fits_exactly_is_not_cut(sandbox, tmp_path) -> None:
    generator = _long_output_script(tmp_path, "markdown")
    full = _run(generator, sandbox, "long", limits=RolloutLimits(max_tokens=100_000), request="full")
    first_turn = full.env_mask.index(0, full.env_mask.index(0))  # where the interpreter's tokens start
    through_output = first_turn + full.env_mask[first_turn:].index(1)
    exact = _run(generator, sandbox, "long", limits=RolloutLimits(max_tokens=through_output), request="exact")
    assert not exact.output_cut and OUTPUT_CUT_NOTE.strip() not in exact.text
    assert (exact.stop_reason, exact.completion_tokens) == ("max_tokens", through_output)


def test_prefix_counts_against_the_budget_and_is_cut_when_longer(sandbox, tmp_path) -> None:
    script = tmp_path / "close.jsonl"
    turns = [f"```python\n{LONG_OUTPUT_CODE}\n```\n", "\\boxed{1}"]
    script.write_text(json.dumps({"problem_id": "p", "turns": turns}) + "\n")
    generator = ScriptedGenerator(script)

    async def go(prefix: str, budget: int, request: str) -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                [1],
                PARAMS,
                limits=RolloutLimits(max_tokens=budget),
                exec_on="code_close",
                response_prefix=prefix,
                request_id=f"p/{request}",
            )

    long_prefix = "<think>\n" + "plan " * 200 + "\n</think>\n"
    cut = asyncio.run(go(long_prefix, 50, "prefix-cut"))
    assert (cut.stop_reason, cut.completion_tokens, sum(cut.env_mask)) == ("max_tokens", 50, 0)
    assert long_prefix.startswith(cut.text) and cut.n_tool_calls == 0
    kept = asyncio.run(go("<think>\nplan\n</think>\n", 300, "prefix-kept"))
    assert kept.completion_tokens <= 300 and kept.output_cut and kept.n_tool_calls == 1
    assert kept.text.startswith("<think>\nplan\n</think>\n```python\n")
    output = trajectory.parse(kept.text).outputs[-1]
    assert output.startswith("0\n1\n") and output.endswith(OUTPUT_CUT_NOTE.strip())


def test_model_context_ends_the_trajectory_like_the_budget(sandbox, scripted_turns) -> None:
    prompt = [1] * 40
    generator = ScriptedGenerator(scripted_turns, context_length=40 + 30)

    async def go(request: str, prompt_ids: list[int]) -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                prompt_ids,
                PARAMS,
                limits=RolloutLimits(max_tokens=1000),
                request_id=f"tiny-2/{request}",
            )

    result = asyncio.run(go("ctx", prompt))
    assert (result.stop_reason, result.context_exceeded, result.total_tokens) == ("max_tokens", True, 70)
    full = asyncio.run(go("ctx-full", [1] * 70))  # the prompt alone fills the context: no error either
    assert (full.stop_reason, full.context_exceeded, full.completion_tokens) == ("max_tokens", True, 0)
    assert full.error is None


class _Recording(ScriptedGenerator):
    """The real scripted backend, keeping each call's sampling parameters (the seed it was sent)."""

    def __init__(self, script: Path) -> None:
        super().__init__(script)
        self.seeds: list[int | None] = []

    async def generate(self, prompt_ids, params, *, request_id=None):  # type: ignore[no-untyped-def]
        self.seeds.append(params.seed)
        return await super().generate(prompt_ids, params, request_id=request_id)


def test_each_turn_draws_its_own_seed_and_a_replay_draws_the_same(sandbox, scripted_turns) -> None:
    generator = _Recording(scripted_turns)
    seeded = replace(PARAMS, seed=1234)
    first = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="s1", params=seeded)
    turns = list(generator.seeds)
    again = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="s2", params=seeded)
    assert len(turns) == 3 and len(set(turns)) == 3 and 1234 not in turns
    assert generator.seeds[3:] == turns and again.completion_ids == first.completion_ids
    other = _run(
        generator, sandbox, "tiny-2", limits=RolloutLimits(), request="s3", params=replace(seeded, seed=1235)
    )
    assert not set(generator.seeds[6:]) & set(turns)
    assert other.completion_ids == first.completion_ids  # the script itself does not sample
    unseeded = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), request="s4")
    assert generator.seeds[9:] == [None, None, None] and unseeded.stop_reason == "answer"


def test_turn_seed_is_a_valid_seed_that_depends_on_both_inputs() -> None:
    seeds = {turn_seed(s, n) for s in (0, 1, MAX_SEED) for n in (0, 1, 500)}
    assert len(seeds) == 9 and all(0 <= x <= MAX_SEED for x in seeds)
    assert turn_seed(7, 3) == turn_seed(7, 3) and turn_seed(None, 3) is None


def test_injected_failures_replace_the_first_k_executions(generator, sandbox) -> None:
    result = _run(generator, sandbox, "tiny-2", limits=RolloutLimits(), inject=1, request="inject")
    assert [(e.status, e.injected) for e in result.executions] == [("error", True), ("error", False)]
    outputs = trajectory.parse(result.text).outputs
    # a traceback of that cell as CPython prints one (the sandbox's renderer), then the next cell's
    assert outputs[0].startswith("Traceback (most recent call last):") and '"<cell-1>"' in outputs[0]
    # the injected block did not run, so x was never defined
    assert "NameError" in outputs[1] and '"<cell-2>"' in outputs[1]


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


@pytest.mark.slow
def test_a_seeded_smollm2_sample_replays_exactly_within_its_budget(sandbox, smollm2_path: str) -> None:
    """The real model through the demo's path (prefill, code_close): same seed, same trajectory."""
    from thinc_bench.backends import load_generator

    generator = load_generator("hf", smollm2_path, seed=0)
    prompt = render_prompt(
        generator, build_messages("What is 17 * 23? Use Python.", load_system_prompt("none"))
    )
    params = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=80, seed=42)

    async def go(seed: int) -> RolloutResult:
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                prompt,
                replace(params, seed=seed),
                limits=RolloutLimits(max_tokens=80, max_tool_calls=2),
                exec_on="code_close",
                response_prefix="```python\n",
                request_id=f"smollm2/{seed}",
            )

    async def all_three() -> list[RolloutResult]:
        try:  # concurrently: one batch per turn, and a replay must not depend on its batch-mates' draws
            return list(await asyncio.gather(go(42), go(42), go(43)))
        finally:
            await generator.aclose()

    first, again, other = asyncio.run(all_three())
    assert first.completion_ids == again.completion_ids and first.text == again.text
    assert first.completion_ids != other.completion_ids
    for result in (first, other):
        assert result.completion_tokens <= 80 and result.prompt_tokens == len(prompt)


def test_a_long_trajectory_runs_each_block_once_even_after_a_turn_scanned_off_the_loop(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """40 blocks, one per turn, the first turn past `OFF_LOOP_CHARS` (scanned in a worker thread): each
    block's own code reaches the sandbox once, in order, with its own output after it."""
    long_comment = "# " + "x" * (OFF_LOOP_CHARS + 1000) + "\n"
    turns = [
        f"```python\n{long_comment if i == 0 else ''}v = {i} * 3\nprint(v)\n```\n```output" for i in range(40)
    ]
    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": [*turns, "\\boxed{117}"]}) + "\n")
    limits = RolloutLimits(max_tokens=60_000, max_tool_calls=41)
    params = replace(PARAMS, max_tokens=50_000)
    result = _run(ScriptedGenerator(script), sandbox, "p", limits=limits, request="long", params=params)
    assert [e.code.splitlines()[-2:] for e in result.executions] == [
        [f"v = {i} * 3", "print(v)"] for i in range(40)
    ]
    assert trajectory.parse(result.text).outputs == [str(3 * i) for i in range(40)]
    assert result.stop_reason == "answer"


@pytest.mark.parametrize(
    ("final", "stop_reason"),
    [
        ("The answer is \\boxed{42}.", "answer"),
        ("So \\boxed 42.", "answer"),
        ("The answer is \\boxed{4", "eos"),  # cut mid-box: the grader reads no answer
        ("The answer is \\boxed{ }.", "eos"),
        ("\\boxed{1} and then \\boxed{", "eos"),  # the last opener decides, as in grading
        ("No box here.", "eos"),
    ],
)
def test_the_stop_reason_says_answer_only_when_the_grader_reads_one(
    sandbox, tmp_path: Path, final: str, stop_reason: str
) -> None:
    script = tmp_path / "box.jsonl"
    turns = ["<think>\nplan\n</think>\n```python\nprint(6 * 7)\n```\n```output", final]
    script.write_text(json.dumps({"problem_id": "p", "turns": turns}) + "\n")
    result = _run(ScriptedGenerator(script), sandbox, "p", limits=RolloutLimits(), request="box")
    assert result.n_tool_calls == 1
    assert result.stop_reason == stop_reason
