"""CPU smoke runs of recipes/sft.py and recipes/grpo.py on the bundled SmolLM2, then eval on the output.

SFT: 3 steps on a scripted build_sft output (one kept trajectory); GRPO: 2 curriculum stages of one
step, 2 prompts x 2 generations, real sandbox and grader. Each checks a finite loss, changed weights,
a saved checkpoint that `python -m thinc_bench.eval --model` runs on one problem, and the SFT labels
are -100 on every interpreter-output token, checked token by token against an independent oracle.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from safetensors.torch import load_file
from shared_inputs import need_shared

from thinc_bench.backends import smollm2_gguf
from thinc_bench.build_sft import __main__ as build_sft
from thinc_bench.train.common import IGNORE_INDEX

REPO = Path(__file__).resolve().parents[2]
SFT_DATA = REPO / "tests" / "data" / "sft"
# Easy sums whose answers SmolLM2 often writes after a "\boxed{" prefill.
EASY = [("What is 1 + 2?", "3"), ("What is 1 + 1?", "2"), ("What is 2 + 1?", "3"), ("What is 4 - 2?", "2")]


def _recipe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"recipes_{name}", REPO / "recipes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("size", ["qwen3_4b_thinking", "qwen3_1.7b"])
def test_paper_configs_parse_into_the_paper_settings(size) -> None:
    from trl import GRPOConfig, ModelConfig, SFTConfig, TrlParser

    cpu = ["--bf16", "false", "--use_cpu", "true"]  # the configs say bf16 for GPUs; parsing here is on CPU
    sft = _recipe("sft")
    config = str(REPO / "recipes" / "configs" / f"sft_{size}.yaml")
    _, args, _ = TrlParser((sft.ScriptArgs, SFTConfig, ModelConfig)).parse_args_and_config(
        ["--config", config, *cpu]
    )
    assert (args.learning_rate, args.lr_scheduler_type.value, args.num_train_epochs) == (7e-6, "cosine", 3)
    # The build's 32,768 completion tokens plus the longest prompt (1,671 for DAPO with the ThinC prompt).
    assert (
        args.max_length == 34816
        and args.per_device_train_batch_size * args.gradient_accumulation_steps * 8 == 16
    )
    grpo = _recipe("grpo")
    argv, curriculum = grpo.split_config(
        ["--config", str(REPO / "recipes" / "configs" / f"grpo_{size}.yaml"), *cpu]
    )
    script, args, _ = TrlParser((grpo.ScriptArgs, GRPOConfig, ModelConfig)).parse_args_and_config(argv)
    Path(argv[1]).unlink()  # split_config's temporary copy (main() removes its own)
    assert (args.loss_type, args.beta, args.epsilon, args.epsilon_high, args.num_generations) == (
        "dapo",
        0.0,
        0.2,
        0.28,
        8,
    )
    assert len(curriculum.stages) == 3
    # One 32K trajectory per device at a time; on 8 GPUs a generation batch of 128 prompts x 8 rollouts
    # is 128 micro-batches per GPU, 64 per optimizer step: 2 updates per generation batch.
    assert args.per_device_train_batch_size == 1
    assert (script.updates_per_generation, script.epochs) == (2, 4)
    assert grpo.batch_layout(args, script.updates_per_generation) == grpo.BatchLayout(128, 2)
    assert (args.steps_per_generation, args.gradient_accumulation_steps) == (1024, 512)  # 1 process here
    # one schedule across stages, no decay to restart; DAPO's 10 warm-up steps (of generation batches, as
    # verl steps its scheduler: 2 optimizer steps each here) and weight decay 0.1
    assert args.lr_scheduler_type.value == "constant_with_warmup"
    assert (args.warmup_steps, args.weight_decay) == (20, 0.1)
    assert args.vllm_importance_sampling_mode == "token_truncate" and not args.mask_truncated_completions
    assert args.vllm_gpu_memory_utilization == 0.3
    # A week-long run: a complete checkpoint every 10 generation batches (on a batch boundary), two kept;
    # solved problems dropped per epoch; held-out AIME 2024 accuracy at every checkpoint.
    from thinc_bench.train.resume import check_saving

    assert (args.save_strategy.value, args.save_steps, args.save_total_limit) == ("steps", 20, 2)
    check_saving(args, grpo.batch_layout(args, script.updates_per_generation).updates)
    assert script.dynamic_sampling == "drop_solved"
    assert (script.heldout_benchmarks, script.heldout_limit, script.heldout_every) == ("aime2024", 30, None)


@pytest.mark.parametrize("size", ["qwen3_4b_thinking", "qwen3_1.7b"])
def test_h200_configs_differ_from_the_80gb_ones_only_in_the_vllm_share_and_output(size) -> None:
    import yaml

    base = yaml.safe_load((REPO / "recipes" / "configs" / f"grpo_{size}.yaml").read_text())
    h200 = yaml.safe_load((REPO / "recipes" / "configs" / f"grpo_{size}_h200.yaml").read_text())
    changed = {k for k in base.keys() | h200.keys() if base.get(k) != h200.get(k)}
    assert changed == {"vllm_gpu_memory_utilization", "output_dir"}
    assert h200["vllm_gpu_memory_utilization"] == 0.4 and h200["output_dir"].endswith("-h200")


def _changed(before: str, after: Path) -> bool:
    old, new = load_file(str(Path(before) / "model.safetensors")), load_file(str(after / "model.safetensors"))
    return any(not old[k].equal(new[k]) for k in new if k in old)


def _eval_one(checkpoint: Path, benchmark: Path, out: Path, max_tokens: int = 300) -> dict[str, object]:
    cmd = [
        sys.executable,
        "-m",
        "thinc_bench.eval",
        "--model",
        str(checkpoint),
        "--benchmarks",
        str(benchmark),
    ]
    cmd += [
        "--limit",
        "1",
        "--samples",
        "1",
        "--recovery-k",
        "0",
        "--max-tokens",
        str(max_tokens),
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return record


def _losses(output_dir: Path) -> list[float]:
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    return [h["loss"] for h in history if "loss" in h]


class _FirstTrainingRow:
    """A trainer callback that keeps the first row of the dataset the trainer really trains on."""

    def __getattr__(self, name: str) -> object:  # every other TrainerCallback event: nothing to do
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_train_begin(self, args, state, control, train_dataloader=None, **_) -> None:  # noqa: ANN001
        self.row = train_dataloader.dataset[0]


def test_sft_drops_examples_longer_than_max_length_instead_of_training_them_cut(tmp_path) -> None:
    import datasets

    rows = {
        "input_ids": [[5, 6, 7], [5, 6, 7, 8, 9], [1] * 8],
        "assistant_masks": [[0, 1, 1], [0, 0, 1, 0, 1], [1] * 8],
    }
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "dataset"))
    sft = _recipe("sft")
    dataset, system_prompt, dropped = sft.load_sft_dataset(str(tmp_path / "dataset"), "train", max_length=5)
    assert dataset["input_ids"] == rows["input_ids"][:2] and dropped == 1 and system_prompt is None
    assert set(dataset.column_names) == {"input_ids", "assistant_masks"}  # TRL makes the labels from them
    assert "1 longer than max_length=5 dropped" in sft.data_card(2, dropped, 5)
    assert sft.load_sft_dataset(str(tmp_path / "dataset"), "train", max_length=None)[2] == 0
    with pytest.raises(SystemExit, match="every one of the 3 examples .* longer than max_length=2"):
        sft.load_sft_dataset(str(tmp_path / "dataset"), "train", max_length=2)


@pytest.mark.slow
def test_sft_smoke_trains_masks_interpreter_tokens_and_evaluates(
    tmp_path, smollm2_folder, two_problem_benchmark
) -> None:
    from train.test_rollout_func import interpreter_token_flags
    from transformers import AutoTokenizer
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    source = tmp_path / "problems.jsonl"
    source.write_text((SFT_DATA / "problems.jsonl").read_text().splitlines()[0] + "\n")
    build = tmp_path / "build"
    args = [
        "--teacher",
        str(SFT_DATA / "teacher_turns.jsonl"),
        "--backend",
        "scripted",
        "--source",
        str(source),
    ]
    args += [
        "--student-tokenizer",
        str(smollm2_gguf()),
        "--decontam-data-dir",
        str(need_shared(REPO.parent / "shared" / "data" / "benchmarks", "benchmark copies")),
    ]
    assert build_sft.main([*args, "--out", str(build)]) == 0

    sft = _recipe("sft")
    out = tmp_path / "sft"
    config = str(REPO / "recipes" / "configs" / "sft_smoke.yaml")
    sft_args = ["--config", config, "--model_name_or_path", smollm2_folder]
    seen = _FirstTrainingRow()
    argv = [*sft_args, "--dataset_name", str(build / "dataset"), "--output_dir", str(out)]
    assert sft.main(argv, callbacks=[seen]) == 0

    # The labels TRL built from the builder's assistant_masks, as the trainer's dataloader holds them.
    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder)
    batch = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id)([seen.row])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    flags = interpreter_token_flags(tokenizer, ids)
    assert sum(flags) > 0
    for token, label, interpreter in zip(ids, labels, flags, strict=True):
        assert label == IGNORE_INDEX if interpreter else label in (token, IGNORE_INDEX)
    assert labels[-1] == ids[-1]  # the EOS that ends the answer is trained
    assert "## Training data" in (out / "README.md").read_text()
    losses = _losses(out)
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    # On CPU the plain LM head scored the loss, and TRL's metrics are still logged from it.
    head = json.loads((out / "thinc_bench.json").read_text())["training"]["lm_head"]
    assert head.startswith("plain (auto: on CPU")
    logged = [e for e in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in e]
    assert all(0 <= e["mean_token_accuracy"] <= 1 and 0 < e["entropy"] < math.log(49152) for e in logged)
    assert _changed(smollm2_folder, out)
    assert list(out.rglob("events.out.tfevents.*")), "report_to: tensorboard writes the training log"
    record = _eval_one(out, two_problem_benchmark, tmp_path / "eval")
    assert record["problem_id"] == "tiny-1" and record["status"] != "infra_error"


@pytest.mark.slow
def test_grpo_smoke_runs_two_stages_and_evaluates(tmp_path, smollm2_folder, two_problem_benchmark) -> None:
    import torch

    problems = tmp_path / "easy.jsonl"
    problems.write_text(
        "".join(
            json.dumps({"id": f"easy-{i}", "problem": q, "answer": a}) + "\n" for i, (q, a) in enumerate(EASY)
        )
    )
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    out = tmp_path / "grpo"
    args = [
        "--config",
        str(REPO / "recipes" / "configs" / "grpo_smoke.yaml"),
        "--model_name_or_path",
        smollm2_folder,
    ]
    args += [
        "--dataset_name",
        str(problems),
        "--output_dir",
        str(out),
        "--response_prefix",
        "The answer is \\boxed{",
    ]
    assert _recipe("grpo").main(args) == 0

    history = json.loads((out / "stage2" / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]  # one trainer: stage 2's checkpoint holds both steps
    assert [h["step"] for h in steps] == [1, 2] and all(math.isfinite(h["loss"]) for h in steps)
    assert all(0 <= h["rewards/exact_match_reward/mean"] <= 1 for h in steps)
    assert all("rollout/tool_calls" in h and "rollout/truncated" in h for h in steps)
    # Whether SmolLM2's few samples disagree (a nonzero advantage, so moved weights) is sampling luck;
    # the tiny-model runs below test learning with rewards that differ by construction.
    optimizer = torch.load(out / "stage1" / "optimizer.pt", weights_only=False)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {1}
    training = json.loads((out / "stage2" / "thinc_bench.json").read_text())["training"]
    assert training["lm_head"].startswith("plain (auto: on CPU")  # and scored as TRL's head (test_lm_head)
    record = _eval_one(out / "stage2", two_problem_benchmark, tmp_path / "eval")
    assert record["problem_id"] == "tiny-1" and record["status"] != "infra_error"
    # Progress you can see: held-out accuracy (thinc_bench.eval on 2 nano problems) before the first
    # step and after the last, ThinC measures every step, in the logs and in the report's figure.
    held = [h for h in history if "heldout/accuracy" in h]
    assert [h["step"] for h in held] == [0, 2] and all(0 <= h["heldout/accuracy"] <= 1 for h in held)
    assert [json.loads(line)["step"] for line in (out / "heldout.jsonl").read_text().splitlines()] == [0, 2]
    assert all(0 <= h["rollout/conformance"] <= 1 and h["rollout/failed_calls"] >= 0 for h in steps)
    from thinc_bench.report import write_comparison

    write_comparison([str(tmp_path / "eval")], tmp_path / "report.html", training_logs=[out / "stage2"])
    assert 'id="fig-training_metrics"' in (tmp_path / "report.html").read_text()


# --- the curriculum as one run: one schedule and optimizer, disjoint stages, exact resume -------------

SUMS = [
    (f"What is {a} + {b}?", str(a + b))
    for a, b in [(1, 2), (1, 1), (2, 1), (0, 2), (0, 3), (3, 0), (2, 0), (1, 1)]
]
"""Sums whose answers are 2 or 3: the tiny test model gets each right about half the time."""
SUMS[-1] = ("What is 4 - 2?", "2")  # ids must differ by text too (deduplicated on load)


def _tiny_grpo_args(tmp_path: Path, model: str, prefix: str, out: Path, stages: list[dict]) -> list[str]:
    """Recipe arguments for the tiny test model: 8 sums, a short system prompt, 2 prompts x 2 per step."""
    import yaml

    config = yaml.safe_load((REPO / "recipes" / "configs" / "grpo_smoke.yaml").read_text())
    config.update(curriculum=stages, limit=None, learning_rate=1e-2, lr_scheduler_type="linear")
    config.update(heldout_benchmarks=None)  # the smoke config's held-out eval: tested in test_grpo_resume
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(config))
    problems = tmp_path / "sums.jsonl"
    problems.write_text(
        "".join(
            json.dumps({"id": f"sum-{i}", "problem": q, "answer": a}) + "\n" for i, (q, a) in enumerate(SUMS)
        )
    )
    system = tmp_path / "system.txt"
    system.write_text("Answer in \\boxed{}.")
    return [
        "--config",
        str(tmp_path / "grpo.yaml"),
        "--model_name_or_path",
        model,
        "--dataset_name",
        str(problems),
        "--output_dir",
        str(out),
        "--system_prompt",
        str(system),
        "--response_prefix",
        prefix,
    ]


def _drawn(out: Path) -> dict[int, list[str]]:
    """Problems rolled out per global step, over every rank's log; a re-run step keeps its last lines."""
    per_rank: dict[tuple[str, int], list[str]] = {}
    for log in sorted(out.glob("drawn-rank*.jsonl")):
        for line in log.read_text().splitlines():
            row = json.loads(line)
            per_rank[(log.name, row["step"])] = row["problems"]
    steps: dict[int, list[str]] = {}
    for (_, step), ids in sorted(per_rank.items()):
        steps.setdefault(step, []).extend(ids)
    return steps


def _injected(out: Path) -> dict[int, list[int] | None]:
    """Injected failures k per row and global step (rank 0's log; None: injection off); a re-run
    step keeps its last line."""
    return {
        row["step"]: row.get("injected")
        for row in map(json.loads, (out / "drawn-rank0.jsonl").read_text().splitlines())
    }


TINY_STAGES = [
    {"name": "stage1", "max_steps": 1, "max_tokens": 40, "max_tool_calls": 1},
    {"name": "stage2", "max_steps": 1, "max_tokens": 48, "max_tool_calls": 2},
    {"name": "stage3", "max_steps": None, "max_tokens": 56, "max_tool_calls": 3},
]


@pytest.mark.slow
def test_grpo_curriculum_is_one_run_with_disjoint_stages_and_resumes_exactly(
    tmp_path, tiny_llama_folder, tiny_llama_prefix
) -> None:
    import torch

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    grpo = _recipe("grpo")
    out = tmp_path / "grpo"
    # Recovery training on from stage 2 (stage 1 overrides the recipe's share with 0); the tiny model
    # writes no code, so it changes no trajectory: this checks the settings' path and the resume.
    stages = [{**TINY_STAGES[0], "inject_failures_share": 0.0}, *TINY_STAGES[1:]]
    args = _tiny_grpo_args(tmp_path, tiny_llama_folder, tiny_llama_prefix, out, stages)
    args += ["--inject_failures_share", "0.5", "--inject_failures_k", "1,2"]
    assert grpo.main(args) == 0

    # Stage lengths as written: 1 + 1 steps, then the 4 problems left at 2 per step.
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2, 3, 4]
    # Whole groups injected (both copies of a problem alike), logged from stage 2 on, recorded.
    injected = _injected(out)
    assert sorted(injected) == [0, 1, 2, 3] and injected[0] is None  # stage 1 (step 0): off
    for step in (1, 2, 3):
        ks = injected[step]
        assert ks is not None and ks[0::2] == ks[1::2] and set(ks) <= {0, 1, 2}
        assert steps[step]["rollout/injected_frac"] == sum(k > 0 for k in ks) / len(ks)
    assert "rollout/injected_frac" not in steps[0]
    assert any(any(injected[step] or []) for step in (1, 2, 3))  # seed 0 faults some group
    record = json.loads((out / "stage3" / "thinc_bench.json").read_text())["training"]["inject_failures"]
    assert record == {
        "stage1": {"share": 0.0, "k": [1, 2]},
        "stage2": {"share": 0.5, "k": [1, 2]},
        "stage3": {"share": 0.5, "k": [1, 2]},
    }
    # One linear schedule over the whole run: no restart at a stage boundary.
    assert [h["learning_rate"] for h in steps] == pytest.approx([1e-2, 7.5e-3, 5e-3, 2.5e-3])
    # Adam's state runs on: at the end of stage 2 every parameter has taken 2 steps, not 1.
    optimizer = torch.load(out / "stage2" / "optimizer.pt", weights_only=False)
    assert {int(s["step"]) for s in optimizer["state"].values()} == {2}
    assert any(h["rewards/exact_match_reward/std"] > 0 for h in steps)

    # Each stage drew exactly its slice of the recorded order: disjoint, together all 8 problems.
    recorded = json.loads((out / "curriculum_order.json").read_text())
    order = recorded["order"]
    drawn = _drawn(out)
    for stage in recorded["stages"]:
        first, end = stage["first_step"], stage["first_step"] + stage["steps"]
        got = [i for step in range(first, end) for i in drawn[step]]
        assert sorted(set(got)) == sorted(order[stage["rows"][0] : stage["rows"][1]])
        assert len(got) == 2 * len(set(got))  # each problem twice (num_generations), no other
    assert sorted(order) == sorted(f"sum-{i}" for i in range(8))

    # --start_stage stage2 resumes from stage1's checkpoint and ends on the very same weights.
    first_run = load_file(str(out / "stage3" / "model.safetensors"))
    first_drawn = _drawn(out)
    assert _changed(tiny_llama_folder, out / "stage3")
    assert grpo.main([*args, "--start_stage", "stage2"]) == 0
    resumed = load_file(str(out / "stage3" / "model.safetensors"))
    assert all(torch.equal(first_run[k], resumed[k]) for k in first_run)
    assert _drawn(out) == first_drawn
    assert _injected(out) == injected  # the resumed stages inject exactly where the first run did


@pytest.mark.slow
def test_grpo_two_updates_per_generation_batch_move_the_ratio_and_the_clip_acts(
    tmp_path, tiny_llama_folder, tiny_llama_prefix
) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    grpo = _recipe("grpo")
    out = tmp_path / "grpo"
    args = _tiny_grpo_args(tmp_path, tiny_llama_folder, tiny_llama_prefix, out, TINY_STAGES)
    # 4 of the 8 sums x 2 generations per generation batch, 2 optimizer steps of 4 completions on each;
    # 2 epochs = 16 rows = 4 generation batches: stage1 1, stage2 1, stage3 the 2 left.
    layout = ["--generation_batch_size", "8", "--updates_per_generation", "2", "--epochs", "2"]
    assert grpo.main([*args, *layout, "--learning_rate", "0.05"]) == 0

    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == list(range(1, 9))
    recorded = json.loads((out / "curriculum_order.json").read_text())
    assert [(s["generation_batches"], s["first_step"], s["steps"]) for s in recorded["stages"]] == [
        (1, 0, 2),
        (1, 2, 2),
        (2, 4, 4),
    ]
    order = recorded["order"]
    assert len(order) == 16 and sorted(order) == sorted(2 * [f"sum-{i}" for i in range(8)])
    # One rollout call per generation batch, at its first optimizer step, on its 4 rows of the order.
    drawn = _drawn(out)
    assert sorted(drawn) == [0, 2, 4, 6]
    for batch, step in enumerate(sorted(drawn)):
        assert sorted(drawn[step]) == sorted(2 * order[4 * batch : 4 * batch + 4])
    # The first update of a batch samples and trains on the same weights (ratio 1, nothing clipped);
    # the second trains on completions of the weights before the first.
    # (A step whose groups all had equal rewards trains on no token, dynamic sampling: no ratio logged.)
    first, second = [h for h in steps[0::2] if "importance_ratio/min" in h], steps[1::2]
    assert first
    for h in first:
        assert h["importance_ratio/min"] == pytest.approx(1, abs=1e-4)
        assert h["importance_ratio/max"] == pytest.approx(1, abs=1e-4)
    assert any(
        max(h["importance_ratio/max"] - 1, 1 - h["importance_ratio/min"]) > 0.05
        for h in second
        if "importance_ratio/min" in h
    )
    assert any(h["clip_ratio/high_mean"] + h["clip_ratio/low_mean"] > 0 for h in second)

    # --start_stage stage3 resumes at a generation-batch boundary (step 4) and ends on the same weights.
    import torch

    first_run = load_file(str(out / "stage3" / "model.safetensors"))
    assert grpo.main([*args, *layout, "--learning_rate", "0.05", "--start_stage", "stage3"]) == 0
    resumed = load_file(str(out / "stage3" / "model.safetensors"))
    assert all(torch.equal(first_run[k], resumed[k]) for k in first_run)
    assert _drawn(out) == drawn


# --- two processes on CPU (gloo), as `accelerate launch` runs them on GPUs ----------------------------

LAUNCHER = r'''
import hashlib, importlib.util, sys
from pathlib import Path

from transformers import TrainerCallback


class WeightDigest(TrainerCallback):
    """Each rank writes a hash of its own copy of the weights at every save and at the end."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def _write(self, args, state, model, tag):
        digest = hashlib.sha256()
        for name, tensor in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().float().contiguous().numpy().tobytes())
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{tag}-step{state.global_step}-rank{args.process_index}").write_text(digest.hexdigest())

    def on_save(self, args, state, control, model=None, **_):
        self._write(args, state, model, "save")

    def on_train_end(self, args, state, control, model=None, **_):
        self._write(args, state, model, "end")


recipe, digests, *argv = sys.argv[1:]
spec = importlib.util.spec_from_file_location(f"recipes_{Path(recipe).stem}", recipe)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
sys.exit(module.main(argv, callbacks=[WeightDigest(digests)]))
'''


def _launch_two(tmp_path: Path, recipe: str, argv: list[str]) -> dict[str, dict[int, str]]:
    """Run a recipe as two CPU processes through `accelerate launch`; return {tag-step: {rank: digest}}."""
    import socket

    launcher, digests = tmp_path / "launch.py", tmp_path / "digests"
    launcher.write_text(LAUNCHER)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += [
        "--main_process_port",
        str(port),
        str(launcher),
        str(REPO / "recipes" / f"{recipe}.py"),
        str(digests),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU even where a GPU is present
    done = subprocess.run([*cmd, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found: dict[str, dict[int, str]] = {}
    for path in digests.iterdir():
        tag, rank = path.name.rsplit("-rank", 1)
        found.setdefault(tag, {})[int(rank)] = path.read_text()
    return found


@pytest.mark.slow
def test_grpo_two_processes_keep_ranks_identical_and_stages_disjoint(
    tmp_path, tiny_llama_folder, tiny_llama_prefix, two_problem_benchmark
) -> None:
    out = tmp_path / "grpo"
    stages = TINY_STAGES[:2]
    # 2 processes x 2 completions = 2 prompts x 2 generations per step, as the one-process smoke run;
    # one sandbox session per process, fewer than the rollouts it holds (they take turns, no deadlock).
    args = [
        *_tiny_grpo_args(tmp_path, tiny_llama_folder, tiny_llama_prefix, out, stages),
        "--per_device_train_batch_size",
        "2",
        "--sandbox_sessions",
        "1",
    ]
    digests = _launch_two(tmp_path, "grpo", args)

    assert set(digests) == {"save-step1", "save-step2", "end-step2"}
    for tag, ranks in digests.items():
        assert set(ranks) == {0, 1} and ranks[0] == ranks[1], tag  # both ranks hold the same weights
    assert digests["save-step1"][0] != digests["save-step2"][0]
    assert _changed(tiny_llama_folder, out / "stage1") and _changed(str(out / "stage1"), out / "stage2")
    assert sorted(p.name for p in (out / "stage2").glob("rng_state_*.pth")) == [
        "rng_state_0.pth",
        "rng_state_1.pth",
    ]

    history = json.loads((out / "stage2" / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2] and all(math.isfinite(h["loss"]) for h in steps)
    assert any(h["rewards/exact_match_reward/std"] > 0 for h in steps)
    assert all("rollout/tool_calls" in h and "rollout/truncated" in h for h in steps)

    # Each rank rolled out its own prompt of the step; together, exactly the stage's slice of the order.
    recorded = json.loads((out / "curriculum_order.json").read_text())
    ranks = [
        {
            json.loads(line)["step"]: json.loads(line)["problems"]
            for line in (out / f"drawn-rank{r}.jsonl").open()
        }
        for r in (0, 1)
    ]
    for stage in recorded["stages"]:
        step = stage["first_step"]
        assert len(set(ranks[0][step])) == len(set(ranks[1][step])) == 1 and ranks[0][step] != ranks[1][step]
        assert sorted(ranks[0][step] + ranks[1][step]) == sorted(2 * recorded["order"][slice(*stage["rows"])])
    record = _eval_one(out / "stage2", two_problem_benchmark, tmp_path / "eval", max_tokens=16)
    assert record["problem_id"] == "tiny-1" and record["status"] != "infra_error"


@pytest.mark.slow
def test_sft_two_processes_train_identical_ranks_and_evaluate(
    tmp_path, tiny_llama_folder, two_problem_benchmark
) -> None:
    source = tmp_path / "problems.jsonl"
    source.write_text((SFT_DATA / "problems.jsonl").read_text().splitlines()[0] + "\n")
    build = tmp_path / "build"
    args = [
        "--teacher",
        str(SFT_DATA / "teacher_turns.jsonl"),
        "--backend",
        "scripted",
        "--source",
        str(source),
    ]
    args += ["--student-tokenizer", tiny_llama_folder, "--out", str(build)]
    args += [
        "--decontam-data-dir",
        str(need_shared(REPO.parent / "shared" / "data" / "benchmarks", "benchmark copies")),
    ]
    assert build_sft.main(args) == 0

    out = tmp_path / "sft"
    config = str(REPO / "recipes" / "configs" / "sft_smoke.yaml")
    argv = ["--config", config, "--model_name_or_path", tiny_llama_folder, "--max_steps", "2"]
    digests = _launch_two(
        tmp_path, "sft", [*argv, "--dataset_name", str(build / "dataset"), "--output_dir", str(out)]
    )

    assert set(digests) == {"end-step2"} and digests["end-step2"][0] == digests["end-step2"][1]
    losses = _losses(out)
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert _changed(tiny_llama_folder, out)
    record = _eval_one(out, two_problem_benchmark, tmp_path / "eval", max_tokens=16)
    assert record["problem_id"] == "tiny-1" and record["status"] != "infra_error"


def test_batch_layout_sets_trl_steps_from_prompts_and_updates_and_refuses_what_cannot_split() -> None:
    from trl import GRPOConfig, ModelConfig, TrlParser

    grpo = _recipe("grpo")

    def parsed(*extra: str) -> object:
        from thinc_bench.train.launch import resolve_auto_bf16

        argv, _ = resolve_auto_bf16(
            ["--config", str(REPO / "recipes" / "configs" / "grpo_smoke.yaml"), *extra]
        )
        argv, _ = grpo.split_config(argv)
        try:
            return TrlParser((grpo.ScriptArgs, GRPOConfig, ModelConfig)).parse_args_and_config(argv)[1]
        finally:
            Path(argv[1]).unlink()

    assert grpo.batch_layout(parsed()) == grpo.BatchLayout(2, 1)  # TRL's own: 4 completions / 2 generations
    assert grpo.batch_layout(parsed("--gradient_accumulation_steps", "3")) == grpo.BatchLayout(6, 1)
    assert grpo.batch_layout(parsed("--num_iterations", "2")) == grpo.BatchLayout(2, 2)
    args = parsed("--steps_per_generation", "4", "--gradient_accumulation_steps", "2")
    assert grpo.batch_layout(args) == grpo.BatchLayout(8, 2)
    args = parsed("--generation_batch_size", "8")  # 2 micro-batches of 4
    assert grpo.batch_layout(args, 2) == grpo.BatchLayout(4, 2) and args.gradient_accumulation_steps == 1
    args = parsed("--generation_batch_size", "16", "--num_iterations", "2")  # 4 micro-batches, 2 passes
    assert grpo.batch_layout(args, 4) == grpo.BatchLayout(8, 4) and args.gradient_accumulation_steps == 2
    with pytest.raises(SystemExit, match="updates_per_generation=3 does not split"):
        grpo.batch_layout(parsed("--generation_batch_size", "8"), 3)
    with pytest.raises(SystemExit, match="gradient_accumulation_steps=2 conflicts"):
        grpo.batch_layout(parsed("--steps_per_generation", "4", "--gradient_accumulation_steps", "2"), 4)
    with pytest.raises(SystemExit, match="not a multiple of gradient_accumulation_steps=2"):
        grpo.batch_layout(parsed("--steps_per_generation", "3", "--gradient_accumulation_steps", "2"))
