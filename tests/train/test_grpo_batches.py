"""What a GRPO step trains on: a group whose rewards are all equal leaves the loss and its denominator
(dynamic sampling), so the step is the one the batch without that group takes; and a micro-batch is
trained at its own width, not the generation batch's, with the same result."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from thinc_bench.train.dynamic_sampling import zero_variance_rows  # noqa: E402

REWARDS = st.sampled_from([0.0, 1.0, None])  # None: unscored (TRL: NaN, advantage 0)


def _advantages(groups: list[list[float | None]]) -> list[float]:
    """Group-relative advantages as GRPO defines them: (r - group mean) / (group std + 1e-4); 0 unscored."""
    out = []
    for rewards in groups:
        scored = [r for r in rewards if r is not None]
        mean = sum(scored) / len(scored) if scored else 0.0
        std = math.sqrt(sum((r - mean) ** 2 for r in scored) / (len(scored) - 1)) if len(scored) > 1 else 0.0
        out += [0.0 if r is None else (r - mean) / (std + 1e-4) for r in rewards]
    return out


@settings(max_examples=100, deadline=None)
@given(
    st.integers(2, 8).flatmap(
        lambda g: st.lists(st.lists(REWARDS, min_size=g, max_size=g), min_size=1, max_size=6)
    )
)
def test_a_row_is_dropped_exactly_when_its_groups_scored_rewards_are_all_equal(groups) -> None:
    size = len(groups[0])
    rows = zero_variance_rows(torch.tensor(_advantages(groups)), size).tolist()
    expected = [len({r for r in g if r is not None}) <= 1 for g in groups for _ in g]
    assert rows == expected


def test_rows_that_do_not_split_into_groups_are_refused() -> None:
    with pytest.raises(ValueError, match="5 advantages do not split into groups of 2"):
        zero_variance_rows(torch.zeros(5), 2)


# Problem A's group: one right, one wrong (advantages +-1). Problem B's: both right (all equal), with
# long completions that would otherwise dominate the DAPO denominator.
TURNS = {
    "a-c0": "The sum is \\boxed{4}.",
    "a-c1": "The sum is \\boxed{5}.",
    "b-c0": "Adding the numbers one by one and checking twice, the sum is \\boxed{6}.",
    "b-c1": "Adding them in the other order and checking once more, the sum is \\boxed{6}.",
}
PROBLEMS = {"a": ("What is 2 + 2?", "4"), "b": ("What is 3 + 3?", "6")}


def _train(tmp_path, model: str, problems: list[str], wrap, tag: str, per_device: int | None = None) -> dict:
    """One optimizer step of TRL's GRPOTrainer (wrapped by `wrap`) on the scripted groups of `problems`;
    the final weights, the step's log and the completion width of every loss pass."""
    from datasets import Dataset
    from transformers import AutoTokenizer, set_seed
    from trl import GRPOConfig, GRPOTrainer

    from thinc_bench.backends.scripted import ScriptedGenerator
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.train.rewards import exact_match_reward
    from thinc_bench.train.rollout_func import ThincRollout

    script = tmp_path / "turns.jsonl"
    script.write_text("".join(json.dumps({"problem_id": k, "turns": [v]}) + "\n" for k, v in TURNS.items()))

    class CopyScript(ScriptedGenerator):
        """Script `<problem>-c<copy>`: a row's copy is its place in its group (groups are contiguous)."""

        async def generate(self, prompt_ids, params, *, request_id=None):  # noqa: ANN001, ANN201
            problem, call_index = request_id.rsplit("/", 1)
            call, index = call_index.split("-")
            return await super().generate(
                prompt_ids, params, request_id=f"{problem}-c{int(index) % 2}/{call}"
            )

    generator = CopyScript(str(script), tokenizer=model)
    set_seed(0)
    rows = 2 * len(problems)
    args = GRPOConfig(
        output_dir=str(tmp_path / tag), use_cpu=True, bf16=False, per_device_train_batch_size=per_device or rows,
        generation_batch_size=rows, gradient_accumulation_steps=rows // (per_device or rows),
        num_generations=2, max_steps=1, optim="sgd", learning_rate=1.0, lr_scheduler_type="constant",
        shuffle_dataset=False, loss_type="dapo", beta=0.0, logging_steps=1, save_strategy="no",
        report_to="none", seed=0,
    )  # fmt: skip
    rows = [PROBLEMS[p] for p in problems]
    dataset = Dataset.from_dict({"prompt": [q for q, _ in rows], "answer": [a for _, a in rows]})
    widths: list[int] = []

    class Spy(wrap(GRPOTrainer)):
        def _compute_loss(self, model, inputs):  # noqa: ANN001, ANN202
            widths.append(int(inputs["completion_ids"].shape[1]))
            return super()._compute_loss(model, inputs)

    with Sandbox() as sandbox:
        rollout = ThincRollout(
            sandbox, RolloutLimits(max_tokens=64, max_tool_calls=1), "Answer in \\boxed{}.", generator=generator,
            problem_ids={q: p for p, (q, _) in PROBLEMS.items()}, answers={q: a for q, a in PROBLEMS.values()},
        )  # fmt: skip
        trainer = Spy(
            model=model, reward_funcs=[exact_match_reward], args=args, train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(model), rollout_func=rollout,
        )  # fmt: skip
        trainer.train()
    logged = next(h for h in trainer.state.log_history if "loss" in h)
    weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return {"weights": weights, "log": logged, "widths": widths}


@pytest.mark.slow
def test_a_batch_with_a_zero_variance_group_steps_as_the_batch_without_it(
    tmp_path, tiny_llama_folder
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    from thinc_bench.train.dynamic_sampling import with_zero_variance_filter

    alone = _train(tmp_path, tiny_llama_folder, ["a"], with_zero_variance_filter, tag="alone")
    dropped = _train(tmp_path, tiny_llama_folder, ["a", "b"], with_zero_variance_filter, tag="dropped")
    kept = _train(tmp_path, tiny_llama_folder, ["a", "b"], lambda cls: cls, tag="kept")
    assert dropped["log"]["frac_reward_zero_std"] == 0.5 and kept["log"]["frac_reward_zero_std"] == 0.5
    assert dropped["log"]["dynamic_sampling/zero_variance_groups"] == 0.5
    assert dropped["log"]["dynamic_sampling/effective_prompts"] == 1  # A only
    assert alone["log"]["dynamic_sampling/effective_prompts"] == 1
    assert 0.5 < dropped["log"]["dynamic_sampling/dropped_tokens"] < 1  # B's completions are the longer
    assert alone["log"]["dynamic_sampling/zero_variance_groups"] == 0
    moved = [k for k in alone["weights"] if not torch.equal(alone["weights"][k], kept["weights"][k])]
    assert moved  # B's tokens in the denominator shrink A's step
    for name, weight in alone["weights"].items():
        torch.testing.assert_close(dropped["weights"][name], weight, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.slow
def test_one_row_micro_batches_train_at_their_own_width_to_the_same_weights(
    tmp_path, tiny_llama_folder
) -> None:
    from transformers import AutoTokenizer

    from thinc_bench.train.micro_batch import with_trimmed_padding

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    padded = _train(tmp_path, tiny_llama_folder, ["a", "b"], lambda cls: cls, tag="padded", per_device=1)
    trimmed = _train(
        tmp_path, tiny_llama_folder, ["a", "b"], with_trimmed_padding, tag="trimmed", per_device=1
    )
    # each completion's own tokens (the scripted answer and EOS), against the batch's longest for all
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_folder)
    lengths = sorted(len(tokenizer(t, add_special_tokens=False)["input_ids"]) + 1 for t in TURNS.values())
    assert sorted(trimmed["widths"]) == lengths and padded["widths"] == [lengths[-1]] * 4
    assert trimmed["log"]["loss"] == pytest.approx(padded["log"]["loss"], rel=1e-5, abs=1e-7)
    from safetensors.torch import load_file

    start = load_file(f"{tiny_llama_folder}/model.safetensors")
    assert any(not torch.equal(padded["weights"][k], start[k]) for k in start)  # the step moved the weights
    for name, weight in padded["weights"].items():
        torch.testing.assert_close(trimmed["weights"][name], weight, rtol=1e-5, atol=1e-6, msg=name)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=4), st.integers(0, 5), st.booleans())
def test_a_micro_batch_is_cut_after_its_last_real_token_and_nothing_else_moves(
    lengths, pad, per_token
) -> None:
    from thinc_bench.train.micro_batch import trim_completion_padding

    width = max(lengths) + pad
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    ids = torch.arange(len(lengths) * width).view(len(lengths), width) if width else mask.clone()
    batch = {
        "prompt_ids": torch.ones(len(lengths), 7, dtype=torch.long),
        "prompt_mask": torch.ones(len(lengths), 7, dtype=torch.long),
        "completion_ids": ids,
        "completion_mask": mask,
        "tool_mask": mask.clone(),
        "old_per_token_logps": ids.float() / 10,
        "importance_sampling_ratio": ids.float() if per_token else torch.ones(len(lengths), 1),
        "advantages": torch.ones(len(lengths)),
        "num_items_in_batch": torch.tensor(sum(lengths)),
    }
    cut = trim_completion_padding(batch)
    keep = max(1, max(lengths)) if width else width
    for key in ("completion_ids", "completion_mask", "tool_mask", "old_per_token_logps"):
        assert torch.equal(cut[key], batch[key][:, :keep]), key
    assert cut["importance_sampling_ratio"].shape[1] == (
        keep if per_token and width != 1 else batch["importance_sampling_ratio"].shape[1]
    )
    for key in ("prompt_ids", "prompt_mask", "advantages", "num_items_in_batch"):
        assert cut[key] is batch[key]
    assert batch["completion_ids"].shape[1] == width  # the buffered batch is reused: never changed
    assert (
        trim_completion_padding({**batch, "token_type_ids": ids})["completion_ids"] is ids
    )  # unknown: whole
