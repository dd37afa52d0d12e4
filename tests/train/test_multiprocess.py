"""Whether GRPO's data parallelism is the same training: 1 process x 2B against 2 processes x B.

The 2-process recipe tests run DDP, where both ranks hold the same weights by construction; they
cannot see whether the loss is scaled right across processes (TRL divides the DAPO denominator by
`num_processes`) or whether a group split over ranks gets its advantages right. Here one script
trains the tiny test model for two steps from a scripted generator (the same completions in either
layout: each group's first copy answers right, its second wrong, so every group has a nonzero
advantage), once as one process with 4 completions per step and once as two processes with 2 each
(`accelerate launch`, gloo on CPU), each process with a sandbox of one session (fewer than the
rollouts it holds: the rollout's gate runs them in turn), and the final weights must agree to float tolerance (1e-5 on
weights that move by up to 0.4; measured differences ~1e-6, summation order); then as two
DeepSpeed ZeRO-3 processes on CPU with the settings of accelerate_zero3.yaml (zero3_init_flag true:
parameters partitioned as they load; parameters and optimizer state sharded), saving a sharded
checkpoint after step 1 and resuming from it in a new launch. Plain SGD:
Adam's first steps are about lr x sign(gradient), so float noise in a near-zero gradient element
(summation order differs between the layouts) would flip whole steps and hide what is compared.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBLEMS = [(f"eq-{i}", f"What is {i} + {i}?", str(2 * i)) for i in range(1, 5)]

SCRIPT = r'''
import json, sys
from pathlib import Path

from datasets import Dataset
from safetensors.torch import save_file
from transformers import AutoTokenizer, set_seed
from trl import GRPOConfig, GRPOTrainer

from thinc_bench.backends import load_generator
from thinc_bench.backends.base import Generator
from thinc_bench.eval.rollout import RolloutLimits
from thinc_bench.sandbox import Sandbox, SandboxConfig
from thinc_bench.train.rewards import exact_match_reward
from thinc_bench.train.rollout_func import ThincRollout


class CopyScript(Generator):
    """The scripted turns of `<problem>-c<copy>`: the copy is the row's place in its group, whatever
    the rank or the row's index in the rank's batch (groups are contiguous and start at a multiple)."""

    def __init__(self, inner, group):
        self._inner, self._group = inner, group

    @property
    def tokenizer(self):
        return self._inner.tokenizer

    async def generate(self, prompt_ids, params, *, request_id=None):
        problem, call_index = request_id.rsplit("/", 1)
        call, index = call_index.split("-")
        rid = f"{problem}-c{int(index) % self._group}/{call}"
        return await self._inner.generate(prompt_ids, params, request_id=rid)

    async def aclose(self):
        await self._inner.aclose()

    def describe(self):
        return self._inner.describe()


model, script, problems, out, per_device, extra, *resume = sys.argv[1:]
rows = [json.loads(line) for line in Path(problems).read_text().splitlines()]
set_seed(0)
settings = dict(
    output_dir=out, use_cpu=True, bf16=False, per_device_train_batch_size=int(per_device),
    num_generations=2, max_steps=2, optim="sgd", learning_rate=1.0, lr_scheduler_type="constant",
    shuffle_dataset=False, loss_type="dapo", beta=0.0, logging_steps=1, save_strategy="no",
    report_to="none", seed=0,
)
extra = json.loads(extra)
sessions = extra.pop("sandbox_sessions", 128)
args = GRPOConfig(**{**settings, **extra})
dataset = Dataset.from_dict({"prompt": [r["problem"] for r in rows], "answer": [r["answer"] for r in rows]})
generator = CopyScript(load_generator("scripted", script, tokenizer=model), group=2)
with Sandbox(SandboxConfig(max_sessions=sessions)) as sandbox:
    rollout = ThincRollout(
        sandbox, RolloutLimits(max_tokens=64, max_tool_calls=1), "Answer in \\boxed{}.", generator=generator,
        problem_ids={r["problem"]: r["id"] for r in rows}, answers={r["problem"]: r["answer"] for r in rows},
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[exact_match_reward], args=args, train_dataset=dataset,
                          processing_class=AutoTokenizer.from_pretrained(model), rollout_func=rollout)
    trainer.train(resume_from_checkpoint=resume[0] if resume else None)
    state = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # gathered from ZeRO-3 shards too
    if trainer.accelerator.is_main_process:
        save_file({k: v.contiguous() for k, v in state.items()}, f"{out}/weights.safetensors")
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        Path(out, "losses.json").write_text(json.dumps(losses))
'''


def _write_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    script, problems = tmp_path / "turns.jsonl", tmp_path / "problems.jsonl"
    lines = []
    for pid, _, answer in PROBLEMS:
        lines.append({"problem_id": f"{pid}-c0", "turns": [f"The sum is \\boxed{{{answer}}}."]})
        lines.append({"problem_id": f"{pid}-c1", "turns": [f"The sum is \\boxed{{{int(answer) + 1}}}."]})
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    problems.write_text(
        "".join(json.dumps({"id": i, "problem": q, "answer": a}) + "\n" for i, q, a in PROBLEMS)
    )
    runner = tmp_path / "train.py"
    runner.write_text(SCRIPT)
    return runner, script, problems


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _launch(processes: int, extra_launch: list[str], argv: list[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes)]
    cmd += [
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(port),
    ]
    _run([*cmd, *extra_launch, *argv])


def _weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "weights.safetensors"))


@pytest.mark.slow
def test_one_process_of_2b_and_two_processes_of_b_train_the_same_weights(tmp_path, tiny_llama_folder) -> None:
    import torch
    from safetensors.torch import load_file

    runner, script, problems = _write_inputs(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    # One sandbox session per process: every process holds more rollouts (4, and 2 per rank) than that.
    one_session = json.dumps({"sandbox_sessions": 1})
    inputs = [str(runner), tiny_llama_folder, str(script), str(problems)]
    _run([sys.executable, *inputs, str(one), "4", one_session])
    _launch(2, ["--multi_gpu"], [*inputs, str(two), "2", one_session])

    start = load_file(str(Path(tiny_llama_folder) / "model.safetensors"))
    a, b = _weights(one), _weights(two)
    assert set(a) == set(b)
    assert any(not torch.equal(a[k], start[k]) for k in a if k in start)  # the two steps moved the weights
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-5, msg=name)
    assert json.loads((one / "losses.json").read_text()) == pytest.approx(
        json.loads((two / "losses.json").read_text()), rel=1e-5, abs=1e-7
    )


ZERO3 = [
    "--use_deepspeed",
    "--zero_stage",
    "3",
    "--zero3_init_flag",
    "true",
    "--zero3_save_16bit_model",
    "true",
]
ZERO3 += [
    "--offload_optimizer_device",
    "none",
    "--offload_param_device",
    "none",
    "--gradient_accumulation_steps",
    "1",
]

"""The DeepSpeed settings of recipes/configs/accelerate_zero3.yaml, as launch flags (what the full-size configs run
use; the process count and precision are the CPU run's own)."""


def test_the_zero3_test_launches_the_recipes_deepspeed_settings() -> None:
    import yaml

    config = yaml.safe_load((REPO / "recipes" / "configs" / "accelerate_zero3.yaml").read_text())
    flags = dict(zip(ZERO3[1::2], ZERO3[2::2], strict=True))
    expected = {f"--{k}": str(v).lower() for k, v in config["deepspeed_config"].items()}
    expected.pop("--deepspeed_multinode_launcher")  # one machine here
    assert {k: v for k, v in flags.items() if k in expected} == expected
    assert ZERO3[0] == "--use_deepspeed" and config["distributed_type"] == "DEEPSPEED"


@pytest.mark.slow
def test_zero3_on_two_processes_trains_the_same_weights_and_resumes_from_its_sharded_checkpoint(
    tmp_path, tiny_llama_folder
) -> None:
    import torch

    pytest.importorskip("deepspeed", reason="pip install deepspeed (docs/LOG.md: its CPU path runs here)")
    runner, script, problems = _write_inputs(tmp_path)
    one, z3, resumed = tmp_path / "one", tmp_path / "z3", tmp_path / "resumed"
    inputs = [str(runner), tiny_llama_folder, str(script), str(problems)]
    _run([sys.executable, *inputs, str(one), "4", "{}"])
    save = json.dumps({"save_strategy": "steps", "save_steps": 1})
    _launch(2, ZERO3, [*inputs, str(z3), "2", save])

    # The sharded checkpoint: each rank's slice of the parameters and optimizer state, no full copy.
    shards = sorted(
        p.name for p in (z3 / "checkpoint-1").rglob("*") if p.is_file() and "global_step" in str(p)
    )
    assert sum("zero_pp_rank_0" in n for n in shards) >= 1 and sum("zero_pp_rank_1" in n for n in shards) >= 1
    reference, sharded = _weights(one), _weights(z3)
    for name in reference:
        torch.testing.assert_close(sharded[name], reference[name], rtol=1e-5, atol=1e-5, msg=name)

    # A new launch resumes from the shards after step 1 and ends on the same weights.
    resumed.mkdir()
    _launch(2, ZERO3, [*inputs, str(resumed), "2", "{}", str(z3 / "checkpoint-1")])
    again = _weights(resumed)
    for name in reference:
        torch.testing.assert_close(again[name], sharded[name], rtol=1e-5, atol=1e-5, msg=name)
