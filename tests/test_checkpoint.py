"""A checkpoint's record: eval runs it with the prompt and settings it was trained with, flags win."""

from __future__ import annotations

import json

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
