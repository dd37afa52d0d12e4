"""The GRPO curriculum YAML: three stages with their budgets and limits, and loud errors on bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from thinc_bench.errors import ConfigError
from thinc_bench.train import Stage, load_curriculum, split_recipe_config

CONFIGS = Path(__file__).resolve().parents[2] / "recipes" / "configs"


@pytest.mark.parametrize("name", ["grpo_qwen3_4b_thinking.yaml", "grpo_qwen3_1.7b.yaml"])
def test_paper_configs_yield_three_stages_with_rising_context_and_tool_limits(name) -> None:
    curriculum = load_curriculum(CONFIGS / name)
    assert curriculum.stages == (
        Stage("stage1", 280, 16384, 16),
        Stage("stage2", 120, 24576, 24),
        Stage("stage3", None, 32768, 32),
    )
    assert curriculum.index("stage2") == 1


def test_split_leaves_trl_only_its_own_keys(tmp_path) -> None:
    trl_config, curriculum = split_recipe_config(CONFIGS / "grpo_qwen3_4b_thinking.yaml")
    assert "curriculum" not in trl_config
    assert trl_config["loss_type"] == "dapo" and trl_config["epsilon_high"] == 0.28
    assert curriculum is not None and len(curriculum.stages) == 3


def _write(tmp_path: Path, stages: object) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"seed": 0, "curriculum": stages}))
    return path


def test_only_the_last_stage_may_run_on_the_rest_of_the_data(tmp_path) -> None:
    stages = [
        {"name": "a", "max_steps": None, "max_tokens": 10, "max_tool_calls": 1},
        {"name": "b", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1},
    ]
    with pytest.raises(ConfigError, match="only the last stage"):
        load_curriculum(_write(tmp_path, stages))


def test_a_stage_that_lowers_the_context_is_refused(tmp_path) -> None:
    stages = [
        {"name": "a", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1},
        {"name": "b", "max_steps": None, "max_tokens": 10, "max_tool_calls": 1},
    ]
    with pytest.raises(ConfigError, match="lowers max_tokens"):
        load_curriculum(_write(tmp_path, stages))


def test_unknown_stage_key_is_an_error(tmp_path) -> None:
    stages = [{"name": "a", "max_steps": 1, "max_tokens": 20, "max_tool_calls": 1, "lr": 1}]
    with pytest.raises(ConfigError, match="unknown keys"):
        load_curriculum(_write(tmp_path, stages))


def test_resuming_at_a_missing_stage_names_the_stages(tmp_path) -> None:
    with pytest.raises(ConfigError, match="stage1, stage2, stage3"):
        load_curriculum(CONFIGS / "grpo_qwen3_1.7b.yaml").index("stage4")
