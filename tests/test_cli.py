"""One-line errors for every CLI and recipe: a mistyped flag names the closest one, exit 2."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from thinc_bench.cli import closest_flag, reject_unknown

REPO = Path(__file__).resolve().parents[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    for name in ("samples", "max_tokens", "learning_rate"):
        parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}")
    return parser


@pytest.mark.parametrize(
    ("typed", "closest"),
    [
        ("--num-samples", "--samples"),
        ("--max-token-budget=5", "--max-tokens"),
        ("--lerning_rate", "--learning_rate"),  # the spelling style the user typed
        ("--lerning-rate", "--learning-rate"),
        ("--zzzzzz", None),
    ],
)
def test_closest_flag(typed: str, closest: str | None) -> None:
    assert closest_flag(typed, _parser()) == closest


def test_a_stray_positional_is_refused_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        reject_unknown(_parser(), ["runs/x"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def _recipe(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"recipes_cli_{name}", REPO / "recipes" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            ["thinc_bench.build_sft", "--teacherr", "x"],
            "error: unknown flag --teacherr; did you mean --teacher?",
        ),
        (
            ["thinc_bench.report", "runs/x", "--tittle", "a"],
            "error: unknown flag --tittle; did you mean --title?",
        ),
        (
            ["sft", "--config", "recipes/configs/sft_smoke.yaml", "--lerning_rate", "1"],
            "error: unknown flag or config key --lerning_rate; did you mean --learning_rate?",
        ),
        (
            ["grpo", "--config", "recipes/configs/grpo_smoke.yaml", "--num_generation_s", "2"],
            "error: unknown flag or config key --num_generation_s; did you mean --num_generations?",
        ),
    ],
)
def test_every_cli_and_recipe_answers_an_unknown_flag_in_one_line(
    command: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    name, *argv = command
    main = importlib.import_module(f"{name}.__main__").main if "." in name else _recipe(name).main
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [expected]


@pytest.mark.parametrize("recipe", ["sft", "grpo"])
def test_recipe_help_is_short_and_help_all_lists_every_trl_flag(
    recipe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    helps = []
    for flag in ("--help", "--help-all"):
        with pytest.raises(SystemExit) as stop:
            _recipe(recipe).main([flag])
        assert stop.value.code == 0
        helps.append(capsys.readouterr().out)
    short, full = helps
    assert "--config" in short and "--dataset_name" in short and "--help-all" in short
    assert "--adam_beta1" not in short and "--adam_beta1" in full
    assert len(short.splitlines()) < 150 and 5 * len(short.splitlines()) < len(full.splitlines())


def test_quiet_libraries_drops_only_the_lines_nobody_can_act_on(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import warnings

    from thinc_bench.cli import quiet_libraries

    quiet_libraries()
    deepspeed = logging.getLogger("DeepSpeed")
    with caplog.at_level(logging.INFO, logger="DeepSpeed"):
        deepspeed.warning(
            "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it."
        )
        deepspeed.warning("ZeRO-3 partition failed")  # a real one stays
    assert [r.getMessage() for r in caplog.records if r.name == "DeepSpeed"] == ["ZeRO-3 partition failed"]
    with warnings.catch_warnings(record=True) as seen:
        quiet_libraries()  # its filters go in front of the "always" below
        warnings.warn(
            "`gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning, stacklevel=1
        )
        warnings.warn("something the user should see", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something the user should see"]
    import datasets
    from transformers.utils import logging as hf_logging

    assert not hf_logging.is_progress_bar_enabled() and not datasets.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    datasets.enable_progress_bars()


def test_eval_help_is_one_usage_line_and_each_flag_once_in_the_docs_spelling(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from thinc_bench.eval import __main__ as thinc_eval

    with pytest.raises(SystemExit) as stop:
        thinc_eval.main(["--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "usage: python -m thinc_bench.eval [--flag VALUE ...]" and lines[1] == ""
    flags = [w for line in lines for w in line.split() if w.startswith("--")]
    assert "--max-tokens" in flags and "--data-dir" in flags and "--max_tokens" not in flags
    assert not [f for f in flags if "_" in f.split("=")[0] and f.replace("_", "-") in flags]
    assert "bundled-smollm2" in text and len(lines) < 160
    assert thinc_eval.parse_config(["--max_tokens", "64", "--model", "m"]).max_tokens == 64  # still parses


def test_recipe_help_keeps_trls_underscore_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _recipe("sft").main(["--help"])
    text = capsys.readouterr().out
    assert "--max_steps" in text and "--max-steps" not in text and "--learning_rate" in text
