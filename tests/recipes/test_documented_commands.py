"""Every GRPO launch command the docs show passes TRL's batch checks and the recipe's own layout at
the process count it names: TRL divides the generation batch over the ranks and into groups, the
recipe into `updates_per_generation` optimizer steps and the curriculum's stages. Parsed only (no
model, no GPU): the arithmetic a user would otherwise learn at the first step of a paid run."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DAPO_PROBLEMS = 16_674
"""Problems of the local DAPO copy after deduplication (16,690) and the four decontamination passes
against the five evaluation benchmarks (16 dropped; README)."""


def _grpo():
    spec = importlib.util.spec_from_file_location("recipes_grpo_docs", REPO / "recipes" / "grpo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def documented_launches() -> list[tuple[str, list[str]]]:
    """(where, argv) of every `accelerate launch ... recipes/grpo.py ...` in README.md, docs/training.md
    and the recipe."""
    found = []
    for path in (REPO / "README.md", REPO / "docs" / "training.md", REPO / "recipes" / "grpo.py"):
        text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))  # join continued lines
        for line in text.splitlines():
            if "accelerate launch" in line and "recipes/grpo.py" in line:
                command = line[line.index("accelerate launch") :].split("#")[0]
                found.append((f"{path.name}: {command.strip()[:80]}", shlex.split(command)))
    return found


def _processes(launch: list[str]) -> int:
    if "--num_processes" in launch:
        return int(launch[launch.index("--num_processes") + 1])
    config = yaml.safe_load((REPO / launch[launch.index("--config_file") + 1]).read_text())
    return int(config["num_processes"])


def _parse(grpo, recipe_argv: list[str], processes: int, monkeypatch):
    from trl import GRPOConfig, ModelConfig, TrlParser

    monkeypatch.setattr(GRPOConfig, "world_size", property(lambda self: processes))
    argv, curriculum = grpo.split_config([*recipe_argv, "--bf16", "false", "--use_cpu", "true"])
    try:
        script, args, _ = TrlParser((grpo.ScriptArgs, GRPOConfig, ModelConfig)).parse_args_and_config(argv)
    finally:
        Path(argv[argv.index("--config") + 1]).unlink()
    return script, args, curriculum


LAUNCHES = documented_launches()


def test_the_docs_show_the_8_and_6_gpu_launches() -> None:
    assert len(LAUNCHES) >= 4  # docs/training.md, README and the recipe: 8 GPUs colocated, 6 + a server
    assert {_processes(argv[: argv.index("recipes/grpo.py")]) for _, argv in LAUNCHES} == {6, 8}


@pytest.mark.parametrize(("where", "argv"), LAUNCHES, ids=[w for w, _ in LAUNCHES])
def test_every_documented_grpo_launch_splits_its_batches(where, argv, monkeypatch) -> None:
    from thinc_bench.train.curriculum import plan_stages

    grpo = _grpo()
    at = argv.index("recipes/grpo.py")
    processes = _processes(argv[:at])
    script, args, curriculum = _parse(grpo, argv[at + 1 :], processes, monkeypatch)  # TRL's checks run here
    layout = grpo.batch_layout(args, script.updates_per_generation)
    plans = plan_stages(curriculum, DAPO_PROBLEMS * script.epochs, layout.prompts, layout.updates)
    assert [p.stage.name for p in plans] == ["stage1", "stage2", "stage3"]
    # every rank holds the same whole number of rollouts per generation batch: the sandbox pool's size
    per_rank = args.per_device_train_batch_size * args.steps_per_generation
    assert per_rank * processes == args.generation_batch_size and args.generation_batch_size % 8 == 0


def test_the_paper_batch_on_six_ranks_is_refused_by_trl(monkeypatch) -> None:
    config = ["--config", str(REPO / "recipes" / "configs" / "grpo_qwen3_4b_thinking.yaml")]
    with pytest.raises(
        ValueError, match=r"generation_batch_size \(1024\) must be divisible by the global batch"
    ):
        _parse(_grpo(), config, 6, monkeypatch)
    _, args, _ = _parse(_grpo(), config, 4, monkeypatch)  # 4 training GPUs: 256 rollouts each
    assert args.steps_per_generation == 256
