"""Which checkpoint a rerun resumes from, and that it refuses to continue a run with other settings."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.train.resume import (
    SETTINGS_FILE,
    STATE_FILE,
    check_saving,
    check_settings,
    latest_checkpoint,
    resume_point,
)


def _checkpoint(root: Path, name: str, step: int | None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    if step is not None:  # the state file is written last: without it the save did not finish
        (folder / STATE_FILE).write_text(json.dumps({"global_step": step, "stage": "stage1"}))
    return folder


def test_the_newest_complete_checkpoint_is_the_resume_point(tmp_path) -> None:
    assert latest_checkpoint(tmp_path) is None and latest_checkpoint(tmp_path / "absent") is None
    _checkpoint(tmp_path, "checkpoint-20", 20)
    _checkpoint(tmp_path, "stage1", 40)  # a stage's last checkpoint, renamed
    _checkpoint(tmp_path, "checkpoint-60", None)  # killed while saving: no state file
    (tmp_path / "checkpoint-80").mkdir()  # killed before anything was written
    assert latest_checkpoint(tmp_path) == tmp_path / "stage1"
    _checkpoint(tmp_path, "checkpoint-40", 40)  # the same step twice: either is the same state
    assert latest_checkpoint(tmp_path) in (tmp_path / "stage1", tmp_path / "checkpoint-40")
    (tmp_path / "checkpoint-20" / STATE_FILE).write_text("{not json")  # a torn file is not complete
    assert resume_point(None, tmp_path, None) in (tmp_path / "stage1", tmp_path / "checkpoint-40")


def test_an_explicit_or_stage_resume_point_must_be_a_checkpoint(tmp_path) -> None:
    stage = _checkpoint(tmp_path, "stage1", 40)
    assert resume_point(None, tmp_path, "stage1") == stage
    assert resume_point(str(stage), tmp_path, None) == stage
    with pytest.raises(ConfigError, match="no checkpoint at .*stage2; run the earlier stages first"):
        resume_point(None, tmp_path, "stage2")
    with pytest.raises(ConfigError, match="--resume_from_checkpoint .*nowhere: not a complete checkpoint"):
        resume_point(str(tmp_path / "nowhere"), tmp_path, None)


def test_a_rerun_with_other_settings_is_refused_naming_what_differs(tmp_path) -> None:
    settings = {"learning_rate": 1e-6, "seed": 42, "curriculum": [{"name": "stage1", "max_steps": 280}]}
    check_settings(tmp_path, settings, resuming=False)
    assert json.loads((tmp_path / SETTINGS_FILE).read_text())["seed"] == 42
    check_settings(tmp_path, dict(settings), resuming=True)  # the same command resumes
    with pytest.raises(ConfigError, match=r"learning_rate: 1e-06 -> 2e-06.*another --output_dir"):
        check_settings(tmp_path, {**settings, "learning_rate": 2e-6}, resuming=True)
    with pytest.raises(ConfigError, match="curriculum"):
        check_settings(
            tmp_path, {**settings, "curriculum": [{"name": "stage1", "max_steps": 300}]}, resuming=True
        )
    check_settings(tmp_path, {**settings, "seed": 1}, resuming=False)  # a fresh start records anew
    assert json.loads((tmp_path / SETTINGS_FILE).read_text())["seed"] == 1


def test_periodic_checkpoints_must_fall_between_generation_batches(tmp_path) -> None:
    def args(**over: object) -> SimpleNamespace:
        return SimpleNamespace(
            **({"save_strategy": "steps", "save_steps": 20, "save_only_model": False} | over)
        )

    check_saving(args(), 2)
    check_saving(args(save_strategy="no", save_steps=3), 2)  # no periodic saves: nothing to check
    with pytest.raises(ConfigError, match=r"save_steps=3: use a whole multiple of the 2 optimizer steps"):
        check_saving(args(save_steps=3), 2)
    with pytest.raises(ConfigError, match="save_steps=0.5"):
        check_saving(args(save_steps=0.5), 1)  # TRL's ratio form: a step count is needed here
    with pytest.raises(ConfigError, match="save_only_model: true saves no optimizer"):
        check_saving(args(save_only_model=True), 2)
