"""Every recipe command the project prints or documents parses, as printed, into a config a CPU can run.

TRL's own argument checks run at parse time (bf16 on a machine without it is refused there), so
parsing through each recipe's `parse` is the check a user's first run makes, without training.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

from thinc_bench import precision
from thinc_bench.train.launch import RECIPES, bare_argv

REPO = Path(__file__).resolve().parents[2]


def _recipe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"recipes_{name}_cmd", REPO / "recipes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _cpu_runnable(training_args: object) -> bool:
    native = precision.bf16_support("auto").native
    return bool(training_args.use_cpu) and (not training_args.bf16 or native)  # type: ignore[attr-defined]


def _parse_command(line: str) -> tuple[str, tuple]:
    """Run a printed `python recipes/X.py ...` line through recipe X's own parsing, as main() does."""
    words = shlex.split(line)
    assert words[:1] == ["python"] and words[1].startswith("recipes/"), line
    name = Path(words[1]).stem
    recipe = _recipe(name)
    config = f"{name}_nano.yaml"
    return name, recipe.parse(bare_argv(words[2:], config, f"{name} test"))


@pytest.mark.parametrize(
    "flags",
    [[], ["--max_steps", "1"], ["--learning_rate", "1e-4", "--output_dir", "runs/x"], ["--seed", "3"]],
)
def test_sft_with_any_flag_is_the_nano_cpu_run_with_that_flag(flags, capsys) -> None:
    script, args, model, _ = _parse_command(shlex.join(["python", "recipes/sft.py", *flags]))[1]
    assert _cpu_runnable(args)
    assert model.model_name_or_path == "bundled-smollm2" and script.dataset_name.endswith("sft-data/dataset")
    if "--max_steps" in flags:
        assert args.max_steps == 1
    if "--learning_rate" in flags:
        assert args.learning_rate == 1e-4 and args.output_dir == "runs/x"
    assert "sft_nano.yaml" in capsys.readouterr().out


def test_grpo_with_a_flag_is_the_nano_cpu_curriculum_with_that_flag() -> None:
    _, (script, args, model, curriculum, _) = _parse_command(
        "python recipes/grpo.py --model_name_or_path runs/m"
    )
    assert _cpu_runnable(args) and model.model_name_or_path == "runs/m"
    assert curriculum is not None and [s.name for s in curriculum.stages] == ["stage1", "stage2"]


def test_a_given_config_is_not_overlaid_on_the_nano_one() -> None:
    smoke = str(RECIPES / "configs" / "sft_smoke.yaml")
    assert bare_argv([f"--config={smoke}", "--seed", "1"], "sft_nano.yaml", "") == [
        "--config",
        smoke,
        "--seed",
        "1",
    ]
    _, args, _, _ = _recipe("sft").parse(bare_argv(["--config", smoke], "sft_nano.yaml", ""))
    assert args.max_steps == 3 and args.output_dir == "runs/sft-smoke"


@pytest.mark.parametrize(
    ("config", "output_dir", "expected_config"),
    [
        ("sft_nano.yaml", "runs/nano/sft", None),  # the bare GRPO run reads runs/nano/sft
        ("sft_nano.yaml", "runs/sft one step", None),
        ("sft_smoke.yaml", "runs/sft-smoke", "grpo_smoke.yaml"),
        ("sft_nano_nl.yaml", "runs/nano/sft-nl", None),
    ],
)
def test_the_grpo_command_sft_prints_runs_as_printed_on_cpu(config, output_dir, expected_config) -> None:
    sft = _recipe("sft")
    line = shlex.join(sft.grpo_command(output_dir, str(RECIPES / "configs" / config)))
    assert ("--config" in line) == (expected_config is not None)
    if expected_config:
        assert f"--config recipes/configs/{expected_config}" in line
    name, (_, args, model, _, _) = _parse_command(line)
    assert name == "grpo" and _cpu_runnable(args)
    assert model.model_name_or_path == output_dir
    if config == "sft_nano.yaml" and output_dir == "runs/nano/sft":
        assert line == "python recipes/grpo.py"
