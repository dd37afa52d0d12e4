"""One-line errors for every CLI and recipe: a mistyped flag names the closest one, exit 2."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
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
            "error: unknown flag --lerning_rate; did you mean --learning_rate?",
        ),
        (
            ["grpo", "--config", "recipes/configs/grpo_smoke.yaml", "--num_generation_s", "2"],
            "error: unknown flag --num_generation_s; did you mean --num_generations?",
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
    # grouped under examples (issue 54): the recipe's own flags and the common TRL ones, a fifth of --help-all
    assert len(short.splitlines()) < 180 and 5 * len(short.splitlines()) < len(full.splitlines())


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
    assert "bundled-smollm2" in text and len(lines) < 190
    assert thinc_eval.parse_config(["--max_tokens", "64", "--model", "m"]).max_tokens == 64  # still parses


def test_recipe_help_keeps_trls_underscore_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _recipe("sft").main(["--help"])
    text = capsys.readouterr().out
    assert "--max_steps" in text and "--max-steps" not in text and "--learning_rate" in text


# Issue 54: no prefixes, values named with their choices, the flag named, a typo before any other check


def _main_of(name: str):
    return importlib.import_module(f"{name}.__main__").main if "." in name else _recipe(name).main


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # argparse would take a prefix for the flag: a typo that starts a 10-minute run
        (["thinc_bench.eval", "--sample", "2"], "error: unknown flag --sample; did you mean --samples?"),
        (
            ["thinc_bench.build_sft", "--max-plan", "0.3"],
            "error: unknown flag --max-plan; did you mean --max-plan-share?",
        ),
        (["thinc_bench.report", "runs/x", "--tit", "a"], "error: unknown flag --tit; did you mean --title?"),
        (["nano", "--stage", "data"], "error: unknown flag --stage; did you mean --stages?"),
        (["sft", "--max_step", "1"], "error: unknown flag --max_step; did you mean --max_steps?"),
        # a value outside a closed set names the flag and the choices
        (
            ["thinc_bench.eval", "--backend", "hff"],
            "error: --backend hff: unknown backend; choose one of hf, vllm, openai, scripted (did you mean hf?)",
        ),
        (
            ["thinc_bench.build_sft", "--backend", "hff"],
            "error: --backend hff: unknown backend; choose one of hf, vllm, openai, scripted (did you mean hf?)",
        ),
        (
            ["thinc_bench.eval", "--model", "m", "--preset", "retol"],
            "error: --preset retol: unknown preset; choose one of thinc, rstar2-agent, aster, retool, nl (did you mean retool?)",
        ),
        (
            ["thinc_bench.eval", "--dtype", "fp32"],
            "error: --dtype fp32: unknown value; choose one of auto, float32, bfloat16, float16",
        ),
        (
            ["thinc_bench.eval", "--log-level", "loud"],
            "error: --log-level loud: unknown value; choose one of debug, info, warning, error",
        ),
        # a bad sampling value names the flag typed, not the class it lands in
        (
            ["thinc_bench.eval", "--temperature", "-1"],
            "error: --temperature -1.0: use a finite value >= 0 (0 = greedy)",
        ),
        (
            ["thinc_bench.eval", "--top-p", "2"],
            "error: --top-p 2.0: use a value in (0, 1]; 1 disables nucleus sampling",
        ),
    ],
)
def test_a_mistyped_flag_or_value_is_one_line_naming_it(
    command: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    name, *argv = command
    try:
        code = _main_of(name)(argv)
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [expected]


def test_a_misspelt_flag_is_named_before_the_missing_data_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone without ../shared and without the Hub: the demo cannot read its data, but a typo on the
    command line is what the user must hear first (it used to hide behind the data error)."""
    from huggingface_hub import constants

    from thinc_bench.eval import __main__ as thinc_eval

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SystemExit) as stop:
        thinc_eval.main(["--sampels", "2"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["error: unknown flag --sampels; did you mean --samples?"]
    assert thinc_eval.main(["--samples", "2"]) == 2  # without the typo: the data error, one line
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "aime2025" in line and "--data-dir" in line


def test_help_is_grouped_by_purpose_under_examples(capsys: pytest.CaptureFixture[str]) -> None:
    from thinc_bench.build_sft import __main__ as build_sft
    from thinc_bench.eval import __main__ as thinc_eval
    from thinc_bench.report import __main__ as report

    for module in (thinc_eval, build_sft, report):
        with pytest.raises(SystemExit) as stop:
            module.main(["--help"])
        assert stop.value.code == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines.index("examples:") < 5  # the examples come first, after the one-line description
        shown = [
            line.strip() for line in lines[lines.index("examples:") + 1 :] if line.startswith("  python")
        ]
        assert shown and all(e in shown for e in module.EXAMPLES)
        headings = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
        assert headings == ["examples", "options", *module.HELP_GROUPS]
        # each group readable at a glance: no heading holds more than 60 lines
        starts = [lines.index(f"{h}:") for h in module.HELP_GROUPS] + [len(lines)]
        assert max(b - a for a, b in zip(starts, starts[1:], strict=False)) <= 60


def test_every_flag_of_every_cli_has_a_heading_in_its_help() -> None:
    from transformers import HfArgumentParser

    from thinc_bench.build_sft import __main__ as build_sft
    from thinc_bench.build_sft.config import BuildSFTConfig
    from thinc_bench.cli import ungrouped
    from thinc_bench.eval import __main__ as thinc_eval
    from thinc_bench.eval.config import EvalConfig
    from thinc_bench.report import __main__ as report

    for config, module in (
        (EvalConfig, thinc_eval),
        (BuildSFTConfig, build_sft),
        (report.ReportConfig, report),
    ):
        assert ungrouped(HfArgumentParser(config), module.HELP_GROUPS) == ([], []), config.__name__
    assert ungrouped(_parser(), {"budget": ("samples", "max_tokens", "temp")}) == (
        ["learning_rate"],
        ["temp"],
    )


def test_grpo_help_says_what_its_default_dataset_really_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _recipe("grpo").main(["--help"])
    text = capsys.readouterr().out
    assert (
        "DAPO-Math-17k with the thinc_bench" not in text
    )  # the old description: not what a bare run trains on
    description = " ".join(text.split("examples:")[0].split())
    assert "Without --config: ThinC-nano's range problems (nano_rl)" in description
    assert re.search(r"--dataset_name VALUE.*?\(default: nano_rl\)", " ".join(text.split()))
    assert text.splitlines()[0] == "usage: python recipes/grpo.py [--flag VALUE ...]"
