"""TRL's rollout function over the real rollout engine and sandbox: token ids, env_mask, reward columns."""

from __future__ import annotations

import json
import re

import pytest

from thinc_bench.backends import load_generator
from thinc_bench.prompts import load_system_prompt
from thinc_bench.rollout import RolloutLimits
from thinc_bench.sandbox import Sandbox
from thinc_bench.train.rewards import exact_match_reward
from thinc_bench.train.rollout_func import ThincRollout

# An interpreter block as the harness appends it after the model's "```output" (trajectory.Dialect).
INTERPRETER = re.compile(r"```output(\n.*?\n```\n)", re.DOTALL)


def interpreter_token_flags(tokenizer, ids: list[int]) -> list[bool]:
    """Independent oracle: a token is the interpreter's when its first character lies in an output body."""
    text = tokenizer.decode(ids)
    spans = [m.span(1) for m in INTERPRETER.finditer(text)]
    starts = [len(tokenizer.decode(ids[:i])) for i in range(len(ids))]
    return [any(a <= s < b for a, b in spans) for s in starts]


@pytest.fixture
def rows(two_problem_benchmark) -> list[dict[str, str]]:
    return [json.loads(line) for line in two_problem_benchmark.read_text().splitlines()]


def test_rollout_func_returns_one_masked_trajectory_per_prompt(rows, scripted_turns) -> None:
    generator = load_generator("scripted", str(scripted_turns))
    prompts = [r["problem"] for r in rows for _ in range(2)]  # TRL repeats each prompt num_generations times
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={r["problem"]: r["id"] for r in rows},
        )
        out = rollout(prompts, None)
    assert len(out["completion_ids"]) == 4 and out["logprobs"] is None
    assert out["n_tool_calls"] == [1, 1, 2, 2]
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        oracle = interpreter_token_flags(generator.tokenizer, ids)
        assert sum(oracle) > 0
        assert mask == [0 if flag else 1 for flag in oracle]
    answers = [r["answer"] for r in rows for _ in range(2)]
    assert (
        exact_match_reward(out["completion_ids"], answers, out["thinc_text"], out["stop_reason"]) == [1.0] * 4
    )


def test_tool_call_limit_of_the_stage_ends_the_trajectory(rows, scripted_turns) -> None:
    generator = load_generator("scripted", str(scripted_turns))
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=1),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={rows[1]["problem"]: rows[1]["id"]},
        )
        out = rollout([rows[1]["problem"]], None)
    assert out["stop_reason"] == ["max_tool_calls"] and out["n_tool_calls"] == [1]
