"""A checkpoint's record: eval runs it with the prompt and settings it was trained with, flags win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench import checkpoint
from thinc_bench.errors import ConfigError
from thinc_bench.eval.__main__ import parse_config
from thinc_bench.prompts import load_system_prompt

PROMPT = "Answer in code.\nBox the printed value."


@pytest.fixture
def trained(tmp_path):
    folder = tmp_path / "ckpt"
    checkpoint.write(
        folder,
        system_prompt=PROMPT,
        eval_settings={
            "max_tokens": 384,
            "max_tool_calls": 6,
            "samples": 1,
            "recovery_k": "0,1",
            "few_shot": None,
        },
        trained_by="test",
    )
    return folder


def test_eval_takes_the_recorded_prompt_and_settings(trained) -> None:
    config = parse_config(["--model", str(trained), "--benchmarks", "nano"])
    assert load_system_prompt(config.system_prompt) == PROMPT
    assert (config.max_tokens, config.max_tool_calls, config.samples, config.recovery_k) == (384, 6, 1, "0,1")
    assert config.few_shot == 0  # not recorded: eval's own default for a --model
    assert config.settings()["system_prompt_text"] == PROMPT  # the text is what the run hashes


def test_a_flag_given_wins_over_the_record_in_either_spelling(trained) -> None:
    config = parse_config(
        [f"--model={trained}", "--max-tokens", "100", "--system-prompt", "thinc", "--samples=3"]
    )
    assert (config.max_tokens, config.samples) == (100, 3)
    assert load_system_prompt(config.system_prompt) == load_system_prompt("thinc")
    assert config.max_tool_calls == 6


def test_a_model_without_a_record_keeps_evals_defaults(tmp_path) -> None:
    config = parse_config(["--model", str(tmp_path), "--benchmarks", "nano"])
    assert (config.max_tokens, config.samples, config.system_prompt) == (32768, 16, "thinc")
    assert checkpoint.read("Qwen/Qwen3-1.7B") is None


def test_a_broken_record_is_a_one_line_error_naming_the_file(trained) -> None:
    (trained / checkpoint.SETTINGS_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match="thinc_bench.json"):
        parse_config(["--model", str(trained)])
    (trained / checkpoint.SETTINGS_FILE).write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ConfigError, match="unknown schema"):
        checkpoint.read(trained)


def test_only_eval_settings_can_be_recorded(tmp_path) -> None:
    with pytest.raises(ConfigError, match="learning_rate"):
        checkpoint.write(tmp_path, system_prompt=None, eval_settings={"learning_rate": 1.0}, trained_by="t")


def test_the_training_precision_is_recorded_and_eval_ignores_it(tmp_path) -> None:
    said = "bf16: auto -> false on cpu (CPU (AVX2) lacks AVX512-BF16 and AMX)"
    folder = tmp_path / "ckpt"
    checkpoint.write(
        folder,
        system_prompt=None,
        eval_settings={"samples": 2},
        trained_by="test",
        training={"bf16": False, "dtype": "float32", "precision": said},
    )
    record = checkpoint.read(folder)
    assert record is not None
    assert record["training"] == {"bf16": False, "dtype": "float32", "precision": said}
    assert checkpoint.eval_defaults(folder) == {"samples": 2}


def test_a_checkpoint_trained_on_tool_calls_is_evaluated_in_that_dialect(tmp_path) -> None:
    folder = tmp_path / "ckpt"
    checkpoint.write(
        folder,
        system_prompt=None,
        eval_settings={"dialect": "tool_call", "tool_name": "jupyter_code", "exec_on": "output_open"},
        trained_by="test",
    )
    config = parse_config(["--model", str(folder), "--benchmarks", "nano"])
    assert (config.dialect, config.tool_name) == ("tool_call", "jupyter_code")


# Issue 54: a folder a recipe was stopped while writing says so in one line


def test_a_folder_being_written_is_refused_until_its_record_is_written(tmp_path: Path) -> None:
    from thinc_bench import checkpoint
    from thinc_bench.errors import ConfigError

    folder = tmp_path / "sft"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    checkpoint.write(folder, system_prompt=None, eval_settings={}, trained_by="old run")
    checkpoint.begin(folder, "python recipes/sft.py --output_dir x")
    assert not (folder / checkpoint.SETTINGS_FILE).exists()  # the old record no longer describes it
    with pytest.raises(ConfigError) as refused:
        checkpoint.require_complete(folder)
    assert str(refused.value) == (
        f"{folder} is an unfinished training run (it was stopped); train it first: "
        "python recipes/sft.py --output_dir x"
    )
    checkpoint.write(folder, system_prompt="p", eval_settings={"samples": 1}, trained_by="recipes/sft.py")
    checkpoint.require_complete(folder)  # whole again
    assert not (folder / checkpoint.INCOMPLETE_FILE).exists()


def test_a_folder_without_a_model_names_what_it_holds(tmp_path: Path) -> None:
    from thinc_bench import checkpoint
    from thinc_bench.errors import ConfigError

    left = tmp_path / "left"
    (left / "checkpoint-40").mkdir(parents=True)  # what a trainer stopped before its save leaves
    with pytest.raises(ConfigError, match=r"holds no model \(no config.json\); it looks like an unfinished"):
        checkpoint.require_complete(left)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="pass a model folder, a Hub id or bundled-smollm2"):
        checkpoint.require_complete(empty)
    checkpoint.require_complete(tmp_path / "absent")  # not a folder: the loaders say so themselves


def test_every_reader_of_a_checkpoint_refuses_an_unfinished_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """eval's --model, the recipes' --model_name_or_path: one line, where a half-written folder ended
    in a 34-line tokenizer traceback (issue 54)."""
    from thinc_bench import checkpoint
    from thinc_bench.backends import _sources
    from thinc_bench.errors import ConfigError
    from thinc_bench.eval import __main__ as thinc_eval
    from thinc_bench.train.launch import resolve_model

    folder = tmp_path / "sft"
    checkpoint.begin(folder, "python recipes/sft.py")
    expected = (
        f"{folder} is an unfinished training run (it was stopped); train it first: python recipes/sft.py"
    )
    for load in (resolve_model, _sources.resolve):
        with pytest.raises(ConfigError) as refused:
            load(str(folder))
        assert str(refused.value) == expected
    assert (
        thinc_eval.main(["--model", str(folder), "--benchmarks", "nano", "--out", str(tmp_path / "r")]) == 2
    )
    assert capsys.readouterr().err.splitlines() == [f"error: {expected}"]
    assert not (tmp_path / "r").exists()
    tokenizer_only = tmp_path / "tok"  # a tokenizer folder has no config.json and is not refused
    tokenizer_only.mkdir()
    assert _sources.resolve(str(tokenizer_only), with_weights=False).load_path == str(tokenizer_only)
