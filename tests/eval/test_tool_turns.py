"""Tool turns are the rollout's own turn boundaries: text the model writes after a turn's last
`</tool_call>` (prose, a `</think>` after calls made while thinking, rStar2's `</reason>`) never hides
the tool turn, so each call runs exactly once and its response follows it. Scripted turns with the real
Qwen3 tokenizer and template, the real sandbox and grader, through eval, build_sft's masks and GRPO."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from thinc_bench import trajectory
from thinc_bench.eval import __main__ as thinc_eval

COUNT = "n = globals().get('n', 0) + 1\nprint(n)"
"""Code that prints how many times it has run in the session: a re-run call prints 2, 3, ..."""


def call(code: str, name: str = "python") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"code": code}}) + "\n</tool_call>"


TRAILING = {
    # prose after the call, in the first turn and in a later one
    "prose": [
        "<think>\nCount in code.\n</think>\n\n" + call(COUNT) + "\nLet me run that.",
        call("print(n * 10)") + "\n\nThat gives the answer.",
        "The count times ten is \\boxed{10}.",
    ],
    # calls made while thinking: the model closes its plan after the call, then ends the turn
    "think": [
        "<think>\nCount in code first.\n" + call(COUNT) + "\n</think>\n\n",
        "<think>\nNow scale it.\n" + call("print(n * 10)") + "\n</think>",
        "\\boxed{10}",
    ],
    # rStar2-Agent's format: calls inside <reason>...</reason>
    "reason": [
        "<reason>\nCount in code.\n" + call(COUNT) + "\n</reason>",
        "<reason>\n" + call("print(n * 10)") + "\n</reason>\n",
        "<answer>\n\\boxed{10}\n</answer>",
    ],
}
QUESTION = "Count once, then multiply by ten."


def _eval(tmp_path: Path, tokenizer: Path) -> dict[str, dict]:
    bench = tmp_path / "tt.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": i, "problem": QUESTION, "answer": "10"}) + "\n" for i in TRAILING)
    )
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps({"problem_id": i, "turns": t}) + "\n" for i, t in TRAILING.items()))
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(turns), "--tokenizer", str(tokenizer)]
    args += ["--benchmarks", str(bench), "--dialect", "tool_call", "--out", str(out), "--samples", "1"]
    assert thinc_eval.main([*args, "--max-tool-calls", "5"]) == 0
    return {r["problem_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def records(tmp_path_factory, qwen3_tokenizer_dir):
    return _eval(tmp_path_factory.mktemp("tool-turns"), qwen3_tokenizer_dir)


def _responses(text: str) -> list[str]:
    return [part.split("\n</tool_response>")[0] for part in text.split("<tool_response>\n")[1:]]


@pytest.mark.parametrize("problem", sorted(TRAILING))
def test_each_call_runs_once_and_the_trajectory_ends_at_its_answer(records, problem):
    record = records[problem]
    assert record["n_tool_calls"] == 2 and record["exec_statuses"] == ["ok", "ok"]
    assert _responses(record["text"]) == ["1", "10"]  # one response per call, in order; COUNT ran once
    assert record["finish_reason"] == "answer" and record["answer"] == "10"
    assert record["correct"] and record["grounded"]


@pytest.mark.parametrize("problem", sorted(TRAILING))
def test_the_parse_pairs_each_call_with_its_own_response(records, problem):
    traj = trajectory.parse(records[problem]["text"], "tool_call")
    assert traj.code_blocks == [COUNT, "print(n * 10)"] and traj.outputs == ["1", "10"]
    assert trajectory.unexecuted_code(traj) == [] and trajectory.pending_calls(traj.render()) == []


@pytest.fixture(scope="module")
def sandbox():
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig()) as box:  # one for the module: each rollout gets its own session
        yield box


def _rollout(sandbox, tokenizer_dir: Path, tmp_path: Path, problem: str, template_kwargs: dict | None = None):
    from thinc_bench.backends import SamplingParams
    from thinc_bench.backends.scripted import ScriptedGenerator
    from thinc_bench.eval.rollout import RolloutLimits, rollout
    from thinc_bench.prompts import build_messages, load_system_prompt, python_tool, render_prompt_ids

    script = tmp_path / f"{problem}.jsonl"
    script.write_text(json.dumps({"problem_id": problem, "turns": TRAILING[problem]}) + "\n")
    generator = ScriptedGenerator(script, tokenizer=str(tokenizer_dir))
    messages = build_messages(QUESTION, load_system_prompt("tool_call"))
    prompt = render_prompt_ids(generator.tokenizer, messages, template_kwargs, [python_tool()])

    async def go():
        with sandbox.session() as session:
            return await rollout(
                generator,
                session,
                prompt,
                SamplingParams(max_tokens=1024),
                limits=RolloutLimits(4096, 5),
                dialect="tool_call",
                request_id=f"{problem}/0",
                template_kwargs=template_kwargs,
            )

    return generator.tokenizer, messages, asyncio.run(go())


@pytest.mark.parametrize("problem", sorted(TRAILING))
def test_sft_examples_of_such_trajectories_are_the_rollouts_ids_and_masks(
    sandbox, tmp_path, qwen3_tokenizer_dir, problem
):
    from thinc_bench.build_sft.masks import tokenize_example
    from thinc_bench.prompts import python_tool

    tokenizer, messages, result = _rollout(sandbox, qwen3_tokenizer_dir, tmp_path, problem)
    assert [e.code for e in result.executions] == [COUNT, "print(n * 10)"]
    assert result.stop_reason == "answer"
    example = tokenize_example(
        tokenizer, messages, trajectory.parse(result.text, "tool_call"), tools=[python_tool()]
    )
    assert example.input_ids == result.prompt_ids + result.completion_ids  # the final EOS included
    assert example.assistant_masks == [0] * len(result.prompt_ids) + result.env_mask
    model = tokenizer.decode([t for t, m in zip(result.completion_ids, result.env_mask, strict=True) if m])
    closer = {"prose": "\n\nThat gives the answer.", "think": "\n</think>", "reason": "\n</reason>\n"}[
        problem
    ]
    assert closer + "<|im_end|>" in model  # the text after the last call is the model's (mask 1)


def test_grpo_rollouts_run_each_call_once(tmp_path, qwen3_tokenizer_dir):
    from thinc_bench.backends import load_generator
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.prompts import load_system_prompt
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.train.rollout_func import ThincRollout

    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": TRAILING["think"]}) + "\n")
    generator = load_generator("scripted", str(script), tokenizer=str(qwen3_tokenizer_dir))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=1024, max_tool_calls=5),
            load_system_prompt("tool_call"),
            dialect="tool_call",
            generator=generator,
            problem_ids={QUESTION: "p"},
        )
        out = rollout([QUESTION], None)
    assert out["n_tool_calls"] == [2] and out["stop_reason"] == ["answer"]
    assert _responses(out["thinc_text"][0]) == ["1", "10"]


def test_the_rollout_takes_calls_from_its_own_turn_not_from_what_the_text_looks_like():
    """A turn that spells chat markup and a `<tool_response>` itself (plain tokens, not special ones)
    after its call: a scan would read the fake response as the call's; the rollout's boundary runs it."""
    from thinc_bench.trajectory import TurnTrigger

    turn_end = "<|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    first = call("print(1)") + turn_end
    second = call("print(2)") + "\n" + turn_end.replace("\n1\n", "\n99\n") + "So \\boxed{99}"
    triggers = TurnTrigger("tool_call")
    assert [c.code for c in triggers.calls(first + second, len(first))] == ["print(2)"]
    assert triggers.calls(first + second) == []  # what adjacency to a response would conclude
    text = first + call("print(2)") + "\n</think>\n\nDone."
    assert [c.code for c in triggers.calls(text, len(first))] == ["print(2)"]
    assert trajectory.pending_calls(text) == [c for c in triggers.calls(text)] and triggers.calls(text)


def test_a_turn_that_ends_in_an_unclosed_call_runs_it_as_vllms_parser_reads_it():
    """docs/tool_calls.md: `<tool_call>{...}` then the end of the turn is a call (vLLM's hermes parser
    reads `<tool_call>(.*)`); once the tool turn follows, the parse shows it closed, with its response."""
    from thinc_bench.trajectory import TurnTrigger

    unclosed = '<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}'
    assert [c.code for c in TurnTrigger("tool_call").calls(unclosed, 0)] == ["print(6 * 7)"]
    assert trajectory.pending_calls(unclosed) == []  # not a finished turn: nothing to run yet
    bad = TurnTrigger("tool_call").calls('<tool_call>\n{"name": ', 0)
    assert len(bad) == 1 and "not valid JSON" in str(bad[0].error)  # a failed call, as on the chat path
    turn = "<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    traj = trajectory.parse(unclosed + turn + "\\boxed{42}", "tool_call")
    assert [s.kind for s in traj.segments] == ["code", "output", "answer"]
    assert traj.code_blocks == ["print(6 * 7)"] and traj.outputs == ["42"]
