"""A budget that follows the model's context when none was given (issue 54: the README's own
bundled-model example stopped at start, its default 32K budget beyond SmolLM2's 8,192-token context).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.eval.api import plan_line, prepare
from thinc_bench.eval.config import EvalConfig


def _script(tmp_path: Path) -> Path:
    """A scripted model's turns: prepare never reads them, the run would."""
    path = tmp_path / "turns.jsonl"
    path.write_text(json.dumps({"problem_id": "nano-test-0000", "turns": ["\\boxed{1}"]}) + "\n")
    return path


def _longest_prompt(config: EvalConfig, tokenizer) -> int:  # noqa: ANN001
    """The longest rendered prompt of the run's problems, from the one renderer eval uses."""
    from thinc_bench import benchmarks
    from thinc_bench.prompts import build_messages, load_examples, load_system_prompt, render_prompt_ids

    system, examples = load_system_prompt(str(config.system_prompt)), load_examples(config.few_shot)
    problems = benchmarks.load("nano")[: config.limit]
    return max(
        len(render_prompt_ids(tokenizer, build_messages(p.problem, system, examples))) for p in problems
    )


def test_without_a_budget_the_preset_follows_a_context_it_does_not_fit(
    tmp_path: Path, smollm2_tokenizer
) -> None:
    config = EvalConfig(
        model=str(_script(tmp_path)),
        backend="scripted",
        benchmarks="nano",
        limit=3,
        context_length=900,
        out=str(tmp_path / "run"),
    )
    assert config.max_tokens == 32768 and not config.budget_given  # the --model preset
    prepared = prepare(config)
    longest = _longest_prompt(config, smollm2_tokenizer)
    assert 0 < longest < 900 and config.max_tokens == 900 - longest
    assert (
        f"budget {900 - longest} tokens (the model's 900-token context less the longest prompt, {longest} "
        "tokens; the preset 32768 does not fit, --max-tokens sets it)"
    ) in plan_line(prepared)
    assert prepared.run.config["settings"]["max_tokens"] == 900 - longest  # the run's hash holds the budget


def test_a_budget_given_or_recorded_is_never_changed(tmp_path: Path) -> None:
    given = EvalConfig(
        model=str(_script(tmp_path)),
        backend="scripted",
        benchmarks="nano",
        limit=2,
        context_length=900,
        max_tokens=5000,
    )
    prepared = prepare(given)
    assert given.max_tokens == 5000 and prepared.budget_note is None  # refused at start as before (too long)
    assert "budget 5000 tokens," in plan_line(prepared)
    roomy = EvalConfig(
        model=str(_script(tmp_path)), backend="scripted", benchmarks="nano", limit=2, context_length=10**6
    )
    assert prepare(roomy).budget_note is None and roomy.max_tokens == 32768  # a context that holds it


def test_a_prompt_that_fills_the_context_is_refused_at_start(tmp_path: Path) -> None:
    config = EvalConfig(
        model=str(_script(tmp_path)), backend="scripted", benchmarks="nano", limit=2, context_length=40
    )
    with pytest.raises(
        ConfigError, match=r"the longest prompt of this run \(\d+ tokens\) fills the model's context of 40"
    ):
        prepare(config)


@pytest.mark.slow
def test_the_bundled_model_example_fits_its_context_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command docs/evaluate.md shows: `--model bundled-smollm2 --benchmarks nano --limit 4 --samples 1
    --recovery-k 0`, planned (not run): its budget is SmolLM2's 8,192 tokens less the longest prompt."""
    from thinc_bench.backends import _sources
    from thinc_bench.eval.__main__ import parse_config

    monkeypatch.chdir(tmp_path)
    config = parse_config(
        [
            "--model",
            "bundled-smollm2",
            "--benchmarks",
            "nano",
            "--limit",
            "4",
            "--samples",
            "1",
            "--recovery-k",
            "0",
        ]
    )
    prepared = prepare(config)
    longest = _longest_prompt(config, _sources.load_tokenizer("bundled-smollm2"))
    assert config.max_tokens == 8192 - longest
    assert f"(the model's 8192-token context less the longest prompt, {longest} tokens;" in plan_line(
        prepared
    )


def test_a_budget_the_checkpoint_recorded_counts_as_given(tmp_path: Path) -> None:
    from thinc_bench import checkpoint
    from thinc_bench.eval.__main__ import parse_config

    checkpoint.write(tmp_path / "ckpt", system_prompt=None, eval_settings={"max_tokens": 512}, trained_by="t")
    config = parse_config(["--model", str(tmp_path / "ckpt"), "--benchmarks", "nano"])
    assert config.max_tokens == 512 and config.budget_given
