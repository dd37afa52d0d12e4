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


# Issue 54: what an interrupted recipe leaves, and the command that goes on


def test_an_interrupted_sft_resumes_from_its_last_trainer_checkpoint(tmp_path: Path) -> None:
    from thinc_bench.train.launch import resume_sft

    out = tmp_path / "sft"
    argv = ["--config", "c.yaml", "--output_dir", str(out)]
    shown = ["--output_dir", str(out)]
    assert resume_sft(argv, shown) == (
        f"{out} is unfinished (marked INCOMPLETE); train it again: python recipes/sft.py --output_dir {out}"
    )
    for step in (5, 40, 10):  # numeric order, not the names'
        (out / f"checkpoint-{step}").mkdir(parents=True)
    assert resume_sft(argv, shown) == (
        f"{out} is unfinished (marked INCOMPLETE); resume from its last checkpoint: python recipes/sft.py "
        f"--output_dir {out} --resume_from_checkpoint {out / 'checkpoint-40'}"
    )


def test_an_interrupted_grpo_goes_on_from_its_newest_complete_checkpoint(tmp_path: Path) -> None:
    from thinc_bench.train.launch import resume_grpo
    from thinc_bench.train.resume import STATE_FILE

    root = tmp_path / "grpo"
    config = tmp_path / "g.yaml"
    config.write_text(yaml.safe_dump({"output_dir": str(root)}))
    argv = ["--config", str(config)]
    assert resume_grpo(argv, ["--start_stage", "stage2"]) == (
        f"{root} is unfinished (marked INCOMPLETE, no checkpoint saved); train it again: "
        "python recipes/grpo.py --start_stage stage2"
    )
    (root / "checkpoint-4").mkdir(parents=True)  # a save the crash interrupted: no state file, not complete
    (root / "checkpoint-2").mkdir()
    (root / "checkpoint-2" / STATE_FILE).write_text('{"global_step": 2, "stage": "stage1"}')
    assert resume_grpo(argv, ["--start_stage", "stage2", "--seed", "1"]) == (
        f"{root} is unfinished; go on from its newest complete checkpoint (checkpoint-2): "
        "python recipes/grpo.py --seed 1"
    )


def test_a_recipe_setting_is_read_from_the_command_line_over_the_yaml(tmp_path: Path) -> None:
    from thinc_bench.train.launch import recipe_setting

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"output_dir": "from-yaml", "max_steps": 3}))
    assert recipe_setting(["--config", str(config)], "output_dir") == "from-yaml"
    assert recipe_setting(["--config", str(config), "--output_dir", "given"], "output_dir") == "given"
    assert recipe_setting(["--config", str(config), "--output_dir=eq"], "output_dir") == "eq"
    assert recipe_setting(["--output_dir", "x"], "max_steps") is None


def test_the_sft_plan_line_counts_the_optimizer_steps() -> None:
    from types import SimpleNamespace

    from thinc_bench.train.launch import sft_plan

    args = SimpleNamespace(
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        world_size=1,
        num_train_epochs=3,
        max_steps=-1,
        output_dir="runs/x",
    )
    # 100 sequences in steps of 8: 13 steps an epoch (the last one short), 3 epochs
    assert sft_plan("bundled-smollm2", "d/dataset", 100, args) == (
        "plan: SFT of bundled-smollm2 on d/dataset: 100 sequences, 39 optimizer steps of 8 sequences; "
        "into runs/x (marked INCOMPLETE until saved)"
    )
    args.max_steps = 5
    assert "5 optimizer steps of 8 sequences" in sft_plan("m", "d", 100, args)
