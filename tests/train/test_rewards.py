"""The GRPO reward is the eval metric (same judge, same verdicts), and an infrastructure failure is no verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.backends.base import Generator
from thinc_bench.errors import BackendUnavailable
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.train.rewards import (
    UNSCORED_METRIC,
    exact_match_reward,
    is_masked,
    is_unscored,
    rollout_stats,
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
    stats = rollout_stats([r["text"] for r in records], [r["finish_reason"] for r in records], rewards)
    known = [float(r["grounded"]) for r in records if r["grounded"] is not None]
    assert stats["rollout/grounded"] == pytest.approx(sum(known) / len(known))


def test_infrastructure_failure_gets_no_reward_rather_than_zero() -> None:
    rewards = exact_match_reward(
        completions=["", ""],
        answer=["5", "5"],
        thinc_text=["\\boxed{5}", ""],
        stop_reason=["answer", "infra_error"],
    )
    assert rewards == [1.0, None]


def test_grader_errors_and_infra_errors_are_unscored_and_the_answers_own_failures_are_not() -> None:
    assert [is_unscored(s) for s in ("grader_error", "infra_error")] == [True] * 2
    own = ("incorrect", "no_answer", "unparseable_answer", "correct", "grader_timeout", "harness_error")
    assert [is_unscored(s) for s in own] == [False] * 6
    # A verdict the rollout already reached is read, not graded again: a grader error stays unscored.
    rewards = exact_match_reward(
        completions=["", ""],
        answer=["5", "5"],
        thinc_text=["\\boxed{5}", "\\boxed{5}"],
        stop_reason=["answer", "answer"],
        grade_status=["correct", "grader_error"],
    )
    assert rewards == [1.0, None]


def test_an_answer_the_judge_cannot_finish_earns_zero_not_none() -> None:
    # Otherwise a policy escapes every negative reward by writing answers the judge cannot finish.
    rewards = exact_match_reward(
        completions=["", ""],
        answer=["5", "5"],
        thinc_text=["\\boxed{5}", "\\boxed{10^{10^{10}}}"],
        stop_reason=["answer", "answer"],
    )
    assert rewards == [1.0, 0.0]


def test_the_models_own_failures_earn_zero_stay_in_the_loss_and_are_counted() -> None:
    """Issue 49's rule: a text the harness could not process, or an answer too large to judge, is the
    model's failure (0, in the loss, counted); only infrastructure is excluded (None, masked, counted)."""
    logged: dict[str, float] = {}
    rewards = exact_match_reward(
        completions=[""] * 4,
        answer=["5"] * 4,
        thinc_text=["\\boxed{5}", "", "\\boxed{5}", ""],
        stop_reason=["answer", "harness_error", "answer", "infra_error"],
        grade_status=["correct", "harness_error", "grader_timeout", "infra_error"],
        log_metric=logged.__setitem__,
    )
    assert rewards == [1.0, 0.0, 0.0, None]
    assert not is_masked("harness_error") and not is_masked("grader_timeout")
    assert is_masked("infra_error") and is_masked("grader_error")
    assert logged[UNSCORED_METRIC] == 0.25  # the outage: excluded, counted
    assert logged["rollout/harness_error"] == logged["rollout/grader_timeout"] == pytest.approx(1 / 3)


def _columns() -> dict[str, list]:
    # Row 0 right, row 1 wrong after two tool calls (one failed), row 2 cut by the budget after
    # three, row 3 a sandbox outage after one good call.
    return {
        "answer": ["5", "5", "5", "5"],
        "thinc_text": ["\\boxed{5}", "\\boxed{4}", "```python\nprint(5)\n```", "```python\nprint(5)\n```"],
        "stop_reason": ["answer", "answer", "max_tokens", "infra_error"],
        "n_tool_calls": [0, 2, 3, 1],
        "n_exec_errors": [0, 1, 0, 0],
    }


def test_statistics_are_logged_through_log_metric_over_the_scored_rows_only() -> None:
    logged: list[tuple[str, float]] = []
    rewards = exact_match_reward(
        ["", "", "", ""], log_metric=lambda n, v: logged.append((n, v)), **_columns()
    )
    assert rewards == [1.0, 0.0, 0.0, None]
    stats = dict(logged)
    assert len(stats) == len(logged)  # each once per batch
    assert stats[UNSCORED_METRIC] == 0.25
    assert stats["rollout/tool_calls"] == pytest.approx(5 / 3)  # 0, 2, 3: the outage's 1 left out
    assert stats["rollout/exec_error_rate"] == pytest.approx((1 / 2 + 0) / 2)  # rows that ran code
    assert stats["rollout/truncated"] == pytest.approx(1 / 3)
    assert stats["rollout/grounded"] == 0.0  # rows 0 and 1 printed nothing; row 2 has no answer


def test_a_batch_with_no_scored_row_logs_only_its_unscored_share() -> None:
    columns = {k: v[3:] for k, v in _columns().items()}
    logged: dict[str, float] = {}
    assert exact_match_reward([""], log_metric=logged.__setitem__, **columns) == [None]
    assert logged == {UNSCORED_METRIC: 1.0}


def _block(printed: str) -> str:
    return f"```python\nprint({printed})\n```\n```output\n{printed}\n```\n"


FAULT = "```python\nprint(5)\n```\n```output\nTraceback (most recent call last):\nMemoryError\n```\n"

# Every row answers 5, right. Injected rows (k > 0) keep that reward only when they met all k failures
# and then ran a block clean.
INJECTED = {
    "thinc_text": [
        FAULT + _block("5") + "\\boxed{5}",  # met its failure, reran clean: recovered
        "\\boxed{5}",  # wrote no code: never met its failure
        FAULT + "\\boxed{5}",  # k=2 but stopped after one failure
        FAULT + "\\boxed{5}",  # met its failure, never ran clean after
        "\\boxed{5}",  # clean row without code: rewarded as always
        _block("5") + "\\boxed{5}",  # clean row with code
    ],
    "inject_k": [1, 1, 2, 1, 0, 0],
    "n_injected": [1, 0, 1, 1, 0, 0],
    "n_tool_calls": [2, 0, 1, 1, 0, 1],
    "n_exec_errors": [1, 0, 1, 1, 0, 0],
}


def test_an_injected_row_earns_its_answer_only_by_going_through_its_failures_in_code() -> None:
    columns = INJECTED | {"answer": ["5"] * 6, "stop_reason": ["answer"] * 6}
    logged: dict[str, float] = {}
    rewards = exact_match_reward([""] * 6, log_metric=logged.__setitem__, **columns)
    assert rewards == [1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert logged["rollout/injected_frac"] == pytest.approx(4 / 6)
    assert (logged["rollout/reward_injected"], logged["rollout/reward_clean"]) == (0.25, 1.0)
    assert logged["rollout/injected_failures"] == 0.75  # 1 + 0 + 1 + 1 over the four injected rows
    # tool calls and grounding apart: injected rows 2, 0, 1, 1 calls; clean rows 0 and 1
    assert (logged["rollout/tool_calls_injected"], logged["rollout/tool_calls_clean"]) == (1.0, 0.5)
    # grounded: the answer 5 printed by a clean block (row 0, row 5); a fault's output is no print
    assert (logged["rollout/grounded_injected"], logged["rollout/grounded_clean"]) == (0.25, 0.5)
    plain: dict[str, float] = {}
    without = {k: v for k, v in columns.items() if k not in ("inject_k", "n_injected")}
    assert exact_match_reward([""] * 6, log_metric=plain.__setitem__, **without) == [1.0] * 6
    assert not any("inject" in k or "reward_" in k or "_clean" in k for k in plain)  # injection off


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # k injected
            st.lists(st.sampled_from(["5", "4", "fault"]), max_size=4),  # what each execution printed
            st.booleans(),  # the answer is right (5) or not (4)
        ),
        min_size=1,
        max_size=5,
    )
)
def test_an_injected_row_is_paid_only_for_an_answer_printed_after_its_last_failure(rows) -> None:
    """Written from the rule, not the code: the k faults come first; the reward is the answer's only
    when all k were met and a block after the k-th printed the boxed answer."""
    texts, ks, met, calls, errors = [], [], [], [], []
    for k, printed, right in rows:
        blocks = ["fault"] * min(k, len(printed)) + printed[k:]  # injected failures are the first executions
        texts.append(
            "".join(FAULT if b == "fault" else _block(b) for b in blocks) + f"\\boxed{{{5 if right else 4}}}"
        )
        ks.append(k)
        met.append(min(k, len(printed)))
        calls.append(len(blocks))
        errors.append(blocks.count("fault"))
    columns = {
        "answer": ["5"] * len(rows),
        "thinc_text": texts,
        "stop_reason": ["answer"] * len(rows),
        "inject_k": ks,
        "n_injected": met,
        "n_tool_calls": calls,
        "n_exec_errors": errors,
    }
    rewards = exact_match_reward([""] * len(rows), **columns)
    for i, (k, printed, right) in enumerate(rows):
        after = printed[k:] if len(printed) >= k else []
        paid = right and (k == 0 or (len(printed) >= k and "5" in after))
        assert rewards[i] == (1.0 if paid else 0.0), (i, texts[i], k)


def test_an_answer_printed_only_before_the_failure_or_by_another_block_is_not_recovery() -> None:
    # Row 0 printed 5, then met its injected failure, then printed something else: its 5 comes from
    # before the failure (the old gate paid it: it ran a clean block after). Row 1 recomputed 5 after.
    texts = [
        _block("5") + FAULT + _block("12") + "\\boxed{5}",
        FAULT + _block("12") + _block("5") + "\\boxed{5}",
    ]
    rewards = exact_match_reward(
        ["", ""], ["5", "5"], texts, ["answer"] * 2, inject_k=[1, 1], n_injected=[1, 1],
        n_tool_calls=[3, 3], n_exec_errors=[1, 1],
    )  # fmt: skip
    assert rewards == [0.0, 1.0]


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
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        learning_rate=1e-3,
        shuffle_dataset=False,
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
            answers={r["problem"]: r["answer"] for r in rows},
        )
        trainer = GRPOTrainer(
            model=tiny_llama_folder,
            reward_funcs=[exact_match_reward],
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
    (step,) = [h for h in trainer.state.log_history if "loss" in h]
    assert math.isfinite(step["loss"]) and step[UNSCORED_METRIC] == 0.25
    assert step["rollout/tool_calls"] == pytest.approx(
        5 / 3
    )  # tiny-1's 1, tiny-2's 2 and 2: scored rows only
