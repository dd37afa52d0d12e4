"""The GRPO reward is the eval metric (same judge, same verdicts), and an infrastructure failure is no verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench.backends.base import Generator
from thinc_bench.errors import BackendUnavailable
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.train.common import IGNORE_INDEX, labels_from_mask
from thinc_bench.train.rewards import (
    LOGGED_STATS,
    UNSCORED_METRIC,
    exact_match_reward,
    grounded,
    grpo_reward_funcs,
    truncated,
)

SFT_DATA = Path(__file__).resolve().parents[1] / "data" / "sft"


def test_reward_and_eval_metric_agree_on_the_same_trajectories(tmp_path) -> None:
    # The SFT teacher script mixes right and wrong answers: a real eval run grades them first.
    # Only the problems the teacher script answers (the builder's dedup fixtures have no script).
    scripted = {json.loads(line)["problem_id"] for line in (SFT_DATA / "teacher_turns.jsonl").open()}
    problems = tmp_path / "problems.jsonl"
    problems.write_text(
        "".join(line for line in (SFT_DATA / "problems.jsonl").open() if json.loads(line)["id"] in scripted)
    )
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(SFT_DATA / "teacher_turns.jsonl")]
    args += ["--benchmarks", str(problems), "--out", str(out), "--samples", "1"]
    assert thinc_eval.main(args) == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {r["correct"] for r in records} == {True, False}
    rewards = exact_match_reward(
        completions=[""] * len(records),
        answer=[r["gold"] for r in records],
        thinc_text=[r["text"] for r in records],
        stop_reason=[r["finish_reason"] for r in records],
    )
    assert rewards == [1.0 if r["correct"] else 0.0 for r in records]
    assert grounded([""] * len(records), [r["text"] for r in records]) == [
        None if r["grounded"] is None else float(r["grounded"]) for r in records
    ]


def test_infrastructure_failure_gets_no_reward_rather_than_zero() -> None:
    rewards = exact_match_reward(
        completions=["", ""],
        answer=["5", "5"],
        thinc_text=["\\boxed{5}", ""],
        stop_reason=["answer", "infra_error"],
    )
    assert rewards == [1.0, None]


def test_truncation_counts_both_budgets() -> None:
    assert truncated(["", "", ""], ["max_tokens", "max_tool_calls", "answer"]) == [1.0, 1.0, 0.0]


def test_labels_ignore_every_masked_token() -> None:
    assert labels_from_mask([7, 8, 9], [0, 1, 0]) == [IGNORE_INDEX, 8, IGNORE_INDEX]


def _columns() -> dict[str, list]:
    # Row 0 right, row 1 wrong after two tool calls, row 2 a sandbox outage after one good call.
    return {
        "answer": ["5", "5", "5"],
        "thinc_text": ["\\boxed{5}", "\\boxed{4}", "```python\nprint(5)\n```"],
        "stop_reason": ["answer", "answer", "infra_error"],
        "n_tool_calls": [0, 2, 1],
        "n_exec_errors": [0, 1, 0],
    }


def test_grpo_reward_funcs_leave_an_infra_row_unscored_in_every_function() -> None:
    funcs = grpo_reward_funcs()
    assert [f.__name__ for f in funcs] == ["exact_match_reward", *(s.__name__ for s in LOGGED_STATS)]
    completions = ["", "", ""]
    logged: list[tuple[str, float]] = []
    columns = _columns()
    table = [f(completions, log_metric=lambda n, v: logged.append((n, v)), **columns) for f in funcs]
    assert table[0] == [1.0, 0.0, None]
    assert all(column[2] is None for column in table)  # TRL skips a row only if every function says None
    by_name = dict(zip([f.__name__ for f in funcs], table, strict=True))
    assert by_name["tool_calls"] == [0.0, 2.0, None] and by_name["exec_error_rate"] == [None, 0.5, None]
    assert logged == [(UNSCORED_METRIC, 1 / 3)]


def test_a_statistic_called_before_the_reward_on_a_batch_is_an_error() -> None:
    scored, *stats = grpo_reward_funcs()
    columns = _columns()
    scored(["", "", ""], **columns)
    with pytest.raises(RuntimeError, match="tool_calls ran on a batch exact_match_reward has not scored"):
        stats[0](["", "", ""], **columns)  # a new batch object: not the one just scored


class _DownFor(Generator):
    """Fault injection around a real generator: the backend is down for one trajectory's requests."""

    def __init__(self, inner: Generator, request_id: str) -> None:
        self._inner, self._down, self._tokenizer = inner, request_id, inner.tokenizer

    async def generate(self, prompt_ids, params, *, request_id=None):  # noqa: ANN001, ANN201
        if request_id == self._down:
            raise BackendUnavailable(f"connection refused for {request_id}")
        return await self._inner.generate(prompt_ids, params, request_id=request_id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def describe(self) -> dict:
        return self._inner.describe()


@pytest.mark.slow
def test_an_infra_failure_in_a_group_is_left_out_not_punished_and_the_step_completes(
    tmp_path, two_problem_benchmark, scripted_turns, tiny_llama_folder
) -> None:
    import math

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from thinc_bench.backends import load_generator
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.prompts import load_system_prompt
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.train.rollout_func import ThincRollout

    rows = [json.loads(line) for line in two_problem_benchmark.read_text().splitlines()]
    scripted = load_generator("scripted", str(scripted_turns), tokenizer=tiny_llama_folder)
    # The second copy of tiny-1 in the first call: the backend fails before its first token.
    generator = _DownFor(scripted, f"{rows[0]['id']}/1-1")
    funcs = grpo_reward_funcs()
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        learning_rate=1e-3,
        shuffle_dataset=False,
        reward_weights=[1.0] + [0.0] * (len(funcs) - 1),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )
    dataset = Dataset.from_dict(
        {"prompt": [r["problem"] for r in rows], "answer": [r["answer"] for r in rows]}
    )
    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox,
            RolloutLimits(max_tokens=2048, max_tool_calls=4),
            load_system_prompt("thinc"),
            generator=generator,
            problem_ids={r["problem"]: r["id"] for r in rows},
        )
        trainer = GRPOTrainer(
            model=tiny_llama_folder,
            reward_funcs=funcs,
            args=args,
            train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(tiny_llama_folder),
            rollout_func=rollout,
        )
        trainer.train()
    rewards = list(trainer._logs["rewards"]["exact_match_reward"])
    advantages = list(trainer._logs["advantages"])
    assert [math.isnan(r) for r in rewards] == [False, True, False, False]  # the row that got no trajectory
    assert rewards[0] == 1.0 and advantages[1] == 0.0  # was 0 reward and -0.71 advantage beside a correct 1.0
    for name in ("tool_calls", "truncated"):  # the logged statistics leave it out too
        assert math.isnan(list(trainer._logs["rewards"][name])[1])
    (step,) = [h for h in trainer.state.log_history if "loss" in h]
    assert math.isfinite(step["loss"]) and step[UNSCORED_METRIC] == 0.25
