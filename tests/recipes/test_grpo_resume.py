"""A GRPO run killed in the middle of a curriculum stage and rerun with the same command ends on the weights
the uninterrupted run reaches, and its logs show held-out accuracy and ThinC metrics per step.

Two processes (`accelerate launch`, gloo on CPU, as the 8-GPU run launches), the tiny test model,
DAPO's refill and injected failures on, a checkpoint every optimizer step (`save_total_limit: 2`),
a held-out evaluation every 2 steps. The killed run loses process 0 to SIGKILL as step 3 (inside
stage 1's 3 steps) begins, so checkpoint-2 is the newest complete one; the rerun must resume from
it (each step's problems drawn once), restore the problem stream, and end where the uninterrupted
run ends: the same weights to the bit, the same per-step problems, rewards and held-out numbers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]

SUMS = [
    (f"What is {a} + {b}?", str(a + b))
    for a, b in [(1, 2), (1, 1), (2, 1), (0, 2), (0, 3), (3, 0), (2, 0), (1, 1)]
]
SUMS[-1] = ("What is 4 - 2?", "2")
HELDOUT = [("What is 5 - 3?", "2"), ("What is 6 - 3?", "3"), ("What is 9 - 6?", "3"), ("What is 8 - 6?", "2")]

LAUNCHER = r"""
import importlib.util, os, signal, sys
from pathlib import Path

from transformers import TrainerCallback


class KillAt(TrainerCallback):
    '''Process 0 dies without warning (SIGKILL, as a node failure) when the given step begins.'''

    def __init__(self, step):
        self.step = step

    def on_step_begin(self, args, state, control, **_):
        if state.global_step == self.step and args.process_index == 0:
            os.kill(os.getpid(), signal.SIGKILL)


recipe, *argv = sys.argv[1:]
spec = importlib.util.spec_from_file_location("recipes_grpo", recipe)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
kill = os.environ.get("KILL_AT_STEP")
sys.exit(module.main(argv, callbacks=[KillAt(int(kill))] if kill else []))
"""


def _write(path: Path, rows: list[tuple[str, str]], prefix: str) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"{prefix}-{i}", "problem": q, "answer": a}) + "\n"
            for i, (q, a) in enumerate(rows)
        )
    )
    return path


def _args(tmp_path: Path, model: str, prefix: str, out: Path) -> list[str]:
    import yaml

    config = yaml.safe_load((REPO / "recipes" / "configs" / "grpo_smoke.yaml").read_text())
    config.update(
        limit=None,
        learning_rate=1e-2,
        lr_scheduler_type="linear",
        per_device_train_batch_size=2,  # 2 processes x 2 = 2 prompts x 2 generations per step
        save_strategy="steps",
        save_steps=1,
        save_total_limit=2,
        dynamic_sampling="refill",
        dynamic_sampling_max_rounds=2,
        inject_failures_share=0.5,
        heldout_limit=4,
        heldout_every=2,
        curriculum=[
            {"name": "stage1", "max_steps": 3, "max_tokens": 40, "max_tool_calls": 1},
            {"name": "stage2", "max_steps": 1, "max_tokens": 48, "max_tool_calls": 2},
        ],
    )
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "system.txt").write_text("Answer in \\boxed{}.")
    return [
        "--config", str(tmp_path / "grpo.yaml"), "--model_name_or_path", model,
        "--dataset_name", str(_write(tmp_path / "sums.jsonl", SUMS, "sum")),
        "--heldout_benchmarks", str(_write(tmp_path / "heldout.jsonl", HELDOUT, "held")),
        "--output_dir", str(out), "--system_prompt", str(tmp_path / "system.txt"), "--response_prefix", prefix,
        "--sandbox_sessions", "1",
    ]  # fmt: skip


def _launch(tmp_path: Path, argv: list[str], kill_at: int | None = None) -> subprocess.CompletedProcess[str]:
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(port), str(launcher), str(REPO / "recipes" / "grpo.py"), *argv]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU even where a GPU is present
    env.pop("KILL_AT_STEP", None)
    if kill_at is not None:
        env["KILL_AT_STEP"] = str(kill_at)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _steps(out: Path) -> dict[int, dict]:
    """Every logged value per step (a step's training log, its held-out numbers, the run's summary)."""
    steps: dict[int, dict] = {}
    for entry in json.loads((out / "trainer_state.json").read_text())["log_history"]:
        steps.setdefault(entry["step"], {}).update(entry)
    return steps


@pytest.mark.slow
def test_a_run_killed_mid_stage_resumes_on_rerun_to_the_uninterrupted_weights(
    tmp_path, tiny_llama_folder, tiny_llama_prefix
) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = _launch(tmp_path, _args(tmp_path, tiny_llama_folder, tiny_llama_prefix, whole))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    argv = _args(tmp_path, tiny_llama_folder, tiny_llama_prefix, killed)
    crashed = _launch(tmp_path, argv, kill_at=2)
    assert crashed.returncode != 0
    # Mid-stage 1 (steps 1-3): no stage folder yet, checkpoints 1 and 2 complete, nothing of step 3.
    assert not (killed / "stage1").exists()
    complete = sorted(p.parent.name for p in killed.glob("checkpoint-*/thinc_state.json"))
    assert complete == ["checkpoint-1", "checkpoint-2"]
    assert max(line["step"] for line in _lines(killed / "drawn-rank0.jsonl")) == 1

    again = _launch(tmp_path, argv)  # the same command
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming from" in again.stdout + again.stderr and "checkpoint-2" in again.stdout + again.stderr

    # The same weights to the bit, in the final model and in each stage's checkpoint.
    for folder in ("", "stage1", "stage2"):
        a, b = (
            load_file(str(whole / folder / "model.safetensors")),
            load_file(str(killed / folder / "model.safetensors")),
        )
        assert set(a) == set(b) and all(a[k].equal(b[k]) for k in a), folder
    start = load_file(str(Path(tiny_llama_folder) / "model.safetensors"))
    assert any(not start[k].equal(a[k]) for k in a if k in start)  # training moved them
    # Each generation batch drawn once in the resumed run (steps 0-1 before the kill, 2-3 after), on
    # each process the same problems as the uninterrupted run, refill rounds included.
    for rank in (0, 1):
        first = _lines(whole / f"drawn-rank{rank}.jsonl")
        resumed = _lines(killed / f"drawn-rank{rank}.jsonl")
        assert [line["step"] for line in resumed] == [0, 1, 2, 3] and resumed == first
    # Per-step logs: rewards, ThinC metrics and held-out accuracy as in the uninterrupted run.
    a, b = _steps(whole), _steps(killed)
    for step in (1, 2, 3, 4):
        for key in ("rewards/exact_match_reward/mean", "rollout/conformance", "rollout/tool_calls",
                    "rollout/grounded", "rollout/truncated", "rollout/injected_frac", "dynamic_sampling/effective_prompts",
                    "dynamic_sampling/generated_prompts"):  # fmt: skip
            assert key in a[step] and a[step][key] == pytest.approx(b[step][key]), (step, key)
    held = {s: h["heldout/accuracy"] for s, h in b.items() if "heldout/accuracy" in h}
    assert sorted(held) == [0, 2, 4] and all(0 <= v <= 1 for v in held.values())
    assert held == {s: h["heldout/accuracy"] for s, h in a.items() if "heldout/accuracy" in h}
    assert [line["step"] for line in _lines(killed / "heldout.jsonl")] == [0, 2, 4]
    summary = json.loads((killed / "heldout" / "step-000004" / "summary.json").read_text())
    assert summary["overall"]["n_records"] == 4  # 2 problems on each process's shard
