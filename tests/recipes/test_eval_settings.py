"""What a recipe records for eval fits what it trained: the printed `eval --model OUT` command of a
smoke config is a smoke eval, and a nano config's is the nano test split (never the full 5 x 16 x 6)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from thinc_bench import benchmarks, checkpoint
from thinc_bench.eval import EvalConfig, plan

REPO = Path(__file__).resolve().parents[2]


def _recipe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"recipes_settings_{name}", REPO / "recipes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _recorded(tmp_path: Path, config: str) -> EvalConfig:
    """The EvalConfig `eval --model CKPT` gets from what sft.py would record for `config`."""
    from trl import ModelConfig, SFTConfig, TrlParser

    sft = _recipe("sft")
    path = str(REPO / "recipes" / "configs" / config)
    script, _, _ = TrlParser((sft.ScriptArgs, SFTConfig, ModelConfig)).parse_args_and_config(
        ["--config", path, "--bf16", "false", "--use_cpu", "true"]
    )
    checkpoint.write(tmp_path, system_prompt=None, eval_settings=sft.eval_settings(script), trained_by="test")
    return EvalConfig(model=str(tmp_path), **checkpoint.eval_defaults(tmp_path))


@pytest.mark.parametrize(("config", "most"), [("sft_smoke.yaml", 4), ("sft_nano.yaml", 200)])
def test_the_recorded_eval_is_sized_for_the_checkpoint(tmp_path: Path, config: str, most: int) -> None:
    recorded = _recorded(tmp_path, config)
    assert recorded.benchmark_names == ["nano"]
    problems = [p for name in recorded.benchmark_names for p in benchmarks.load(name)][: recorded.limit]
    assert 0 < len(plan(recorded, problems)) <= most
    assert int(recorded.max_tokens or 0) <= 512


def test_grpo_smoke_records_a_smoke_eval() -> None:
    import yaml

    config = yaml.safe_load((REPO / "recipes" / "configs" / "grpo_smoke.yaml").read_text())
    assert (
        config["eval_benchmarks"],
        config["eval_limit"],
        config["eval_samples"],
        config["eval_recovery_k"],
    ) == (
        "nano",
        2,
        1,
        "0",
    )
    grpo = _recipe("grpo")
    names = {f for f in grpo.ScriptArgs.__dataclass_fields__}
    assert {"eval_benchmarks", "eval_limit", "eval_samples", "eval_recovery_k"} <= names
