"""Baselines at one shared setting beside their published ones (`--setting`), and the NL-only preset.

A comparison table needs every model at one budget and sampling; each baseline's published setting
differs (ASTER: 92K tokens, 255 calls, temperature 1.0). `--setting shared` keeps each preset's format
(tool, prompts, execution model) and holds `SHARED_FIELDS` at the defaults with a --model; the report's
banner says which setting the runs used. The `nl` preset is the explainers' NL-only comparison model
(Qwen3-235B-A22B-Thinking): no tool, the model card's sampling.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.eval import EvalConfig
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.eval.config import WITH_MODEL
from thinc_bench.eval.presets import PRESETS, SHARED_FIELDS

SHARED = {"samples": 16, "max_tokens": 32768, "max_tool_calls": 32, "temperature": 0.6, "top_p": 0.95}
"""The shared setting, written out: the defaults with a --model (docs/settings.md)."""


def _config(preset: str, setting: str | None = None, **flags) -> EvalConfig:
    extra = {} if setting is None else {"setting": setting}
    return EvalConfig(model="m", backend="openai", preset=preset, **extra, **flags)


def test_published_is_the_default_and_applies_each_presets_own_budget_and_sampling() -> None:
    aster = _config("aster")
    assert (aster.temperature, aster.top_p, aster.max_tokens, aster.max_tool_calls, aster.samples) == (
        1.0,
        1.0,
        92160,
        255,
        16,
    )
    assert "setting" not in aster.settings()  # the default: earlier runs' hashes stay the same
    assert aster.settings() == _config("aster", "published").settings()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_shared_holds_budget_and_sampling_at_one_value_and_keeps_each_format(name: str) -> None:
    shared = _config(name, "shared")
    values = {k: getattr(shared, k) for k in SHARED}
    no_tool = name == "nl"
    assert values == {**SHARED, "max_tool_calls": 0 if no_tool else 32}
    assert (shared.top_k, shared.min_p) == (None, 0.0)
    for field, value in PRESETS[name].settings.items():  # the format is the preset's own
        assert getattr(shared, field) == value
    assert shared.settings()["setting"] == "shared"
    assert shared.settings() != _config(name).settings() or not PRESETS[name].published
    assert {WITH_MODEL[k] for k in ("samples", "max_tokens", "max_tool_calls")} == {16, 32768, 32}


def test_a_flag_given_still_wins_under_either_setting_and_a_bad_setting_is_refused() -> None:
    assert _config("aster", "shared", max_tokens=999).max_tokens == 999
    assert _config("aster", "published", temperature=0.7).temperature == 0.7
    with pytest.raises(ConfigError, match="--setting 'same'"):
        _config("aster", "same")
    assert set(PRESETS["aster"].published) <= set(SHARED_FIELDS)


def test_the_nl_preset_declares_no_tool_and_the_thinking_models_card_sampling() -> None:
    nl = _config("nl")
    assert (nl.max_tool_calls, nl.dialect, nl.system_prompt, nl.user_template) == (
        0,
        "markdown",
        "none",
        "qwen-math",
    )
    assert (nl.temperature, nl.top_p, nl.top_k, nl.min_p, nl.max_tokens) == (0.6, 0.95, 20, 0.0, 81920)
    assert "Qwen3-235B-A22B-Thinking-2507 model card" in PRESETS["nl"].sources["temperature"]
    with pytest.raises(ConfigError, match="0 \\(no tool\\)"):
        EvalConfig(model="m", backend="openai", max_tool_calls=0, dialect="tool_call")


def test_an_nl_run_executes_nothing_and_grades_the_answer_after_the_thinking(
    tmp_path: Path, qwen3_tokenizer_folders
) -> None:
    """A thinking model (the 2507 template opens <think>) that writes code and even an output block of
    its own: with no tool nothing runs and generation never stops for it; the text is the model's."""
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"id": "p", "problem": "What is 2 + 3?", "answer": "5"}) + "\n")
    turn = (
        "Let me check in code.\n```python\nprint(2 + 3)\n```\n```output\n5\n```\nSo it is 5.\n</think>\n\n"
        "The sum is \\boxed{5}."
    )
    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps({"problem_id": "p", "turns": [turn]}) + "\n")
    out = tmp_path / "run"
    args = ["--preset", "nl", "--backend", "scripted", "--model", str(script), "--benchmarks", str(bench)]
    args += ["--tokenizer", qwen3_tokenizer_folders["thinking"], "--samples", "1", "--out", str(out)]
    assert thinc_eval.main(args) == 0
    (record,) = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert (record["n_tool_calls"], record["status"], record["answer"]) == (0, "correct", "5")
    assert record["text"] == turn and record["exec_statuses"] == []
    (prompt,) = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert "<|im_start|>system" not in prompt["text"]  # the card's examples send the user turn alone
    assert (
        "What is 2 + 3?\nPlease reason step by step, and put your final answer within \\boxed{}."
        in prompt["text"]
    )


def test_the_report_banner_says_which_setting_the_presets_ran_at(tmp_path: Path) -> None:
    from report.synthetic import synthetic_run

    from thinc_bench.report import build_data, render

    def run(name: str, **settings: str) -> Path:
        return synthetic_run(
            tmp_path / name, model=f"org/{name}", sizes={"aime2025": 2}, samples=1, settings=settings
        )

    shared = [run("a", preset="aster", setting="shared"), run("b", preset="rstar2-agent", setting="shared")]
    html = render(build_data(shared))
    assert 'id="setting"' in html and "Setting: shared." in html
    published = [run("c", preset="aster"), run("d", preset="retool")]  # eval leaves the default unrecorded
    html = render(build_data(published))
    assert "Setting: published." in html and "eval --setting shared" in html
    html = render(build_data([shared[0], published[0]]))
    assert 'id="setting"' not in html and "<b>setting</b> (setting)" in html  # they differ: named
    assert 'id="setting"' not in render(build_data([run("e")]))  # no preset: nothing to say
