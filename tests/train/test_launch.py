"""Bare recipe runs: their configs, the training prompt a dataset records, and clear stops."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import yaml

from thinc_bench.train.launch import RECIPES, bare_argv, build_data_if_missing, training_system_prompt

REPO = Path(__file__).resolve().parents[2]


def test_no_arguments_means_the_nano_config_and_given_arguments_stay(capsys) -> None:
    argv = bare_argv([], "sft_nano.yaml", "ThinC-nano SFT")
    assert argv == ["--config", str(RECIPES / "configs" / "sft_nano.yaml")] and Path(argv[1]).is_file()
    assert "sft_nano.yaml" in capsys.readouterr().out
    assert bare_argv(["--config", "x.yaml"], "sft_nano.yaml", "") == ["--config", "x.yaml"]


@pytest.mark.parametrize(
    "name", ["sft_nano.yaml", "sft_nano_nl.yaml", "grpo_nano.yaml", "sft_smoke.yaml", "grpo_smoke.yaml"]
)
def test_cpu_configs_need_no_paths_and_run_on_cpu(name) -> None:
    config = yaml.safe_load((RECIPES / "configs" / name).read_text())
    assert config["model_name_or_path"] in ("bundled-smollm2", "runs/nano/sft")
    assert config["use_cpu"] is True and config.get("dataset_name")
    if name.startswith("sft"):
        assert config["build_data"].startswith("--source nano")


def test_the_training_prompt_is_the_rows_one_system_turn() -> None:
    def rows(*systems: str | None) -> datasets.Dataset:
        messages = [
            ([{"role": "system", "content": s}] if s is not None else []) + [{"role": "user", "content": "q"}]
            for s in systems
        ]
        return datasets.Dataset.from_dict({"messages": messages})

    assert training_system_prompt(rows("Think in code.", "Think in code.")) == "Think in code."
    assert training_system_prompt(rows("a", "b")) is None  # mixed prompts: nothing to record
    assert training_system_prompt(rows(None, None)) == ""  # trained without a system turn
    assert training_system_prompt(datasets.Dataset.from_dict({"input_ids": [[1]]})) is None


def test_build_data_refuses_a_folder_it_cannot_fill(tmp_path) -> None:
    build_data_if_missing(str(tmp_path), "--source nano")  # exists: nothing to do
    with pytest.raises(SystemExit, match="OUT/dataset"):
        build_data_if_missing(str(tmp_path / "missing" / "data"), "--source nano")


def test_bare_grpo_without_the_sft_checkpoint_says_what_to_run_first(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "recipes" / "grpo.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "python recipes/sft.py" in result.stderr.splitlines()[-1]


def test_a_missing_dataset_is_built_with_the_given_arguments(tmp_path) -> None:
    target = tmp_path / "data" / "dataset"
    build_data_if_missing(str(target), "--source nano --limit 4")
    rows = datasets.load_from_disk(str(target))
    assert len(rows) == 4 and rows[0]["id"] == "nano-train-0000" and rows[0]["n_code_blocks"] == 3
    assert training_system_prompt(rows) == (REPO / "thinc_bench" / "prompts" / "nano.txt").read_text().strip()
