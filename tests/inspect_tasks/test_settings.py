"""A task's `-T` arguments resolve as the CLI's flags do, and reach the Inspect task they build."""

from __future__ import annotations

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.inspect_tasks import TaskArgs, benchmark_task
from thinc_bench.inspect_tasks.settings import ModelSpec
from thinc_bench.inspect_tasks.tasks import reducers


def test_a_preset_sets_the_format_the_sandbox_and_the_sampling_of_the_task() -> None:
    aster = benchmark_task("nano", preset="aster")
    assert aster.metadata["dialect"] == "tool_call" and aster.metadata["thinc_bench_path"].startswith(
        "native"
    )
    assert aster.config.temperature == 1.0 and aster.config.top_p == 1.0  # ASTER's published sampling
    assert aster.sandbox is not None and aster.sandbox.config.timeout_s == 30.0  # type: ignore[union-attr]
    retool = benchmark_task("nano", preset="retool")
    assert retool.metadata["dialect"] == "xml" and retool.metadata["thinc_bench_path"].startswith("token")
    assert retool.sandbox.config.state == "fresh"  # type: ignore[union-attr]  # complete scripts
    thinc = benchmark_task("nano")
    assert (thinc.config.temperature, thinc.config.top_p) == (0.6, 0.95)  # the paper's
    assert thinc.metadata["dialect"] == "markdown" and thinc.sandbox.config.state == "persistent"  # type: ignore[union-attr]


def test_a_flag_given_wins_over_the_preset_as_on_the_command_line() -> None:
    config = TaskArgs.of(preset="aster", temperature=0.3, budget=2048, exec_timeout=5).config()
    assert (config.temperature, config.max_tokens, config.exec_timeout_s) == (0.3, 2048, 5)
    assert config.tool_name == "code_interpreter"


def test_inspects_generate_options_win_over_both() -> None:
    config = TaskArgs.of(preset="aster").config(None, {"temperature": 0.1, "top_p": 0.5, "seed": 7})
    assert (config.temperature, config.top_p, config.seed) == (0.1, 0.5, 7)


def test_no_model_is_the_bundled_demo_and_a_model_the_papers_budget() -> None:
    demo = TaskArgs().config(ModelSpec(None, "hf"))
    paper = TaskArgs().config(ModelSpec("Qwen/Qwen3-4B", "vllm"))
    assert (demo.max_tokens, demo.few_shot, demo.response_prefix) == (1024, 1, "```python\n")
    assert (paper.max_tokens, paper.max_tool_calls, paper.few_shot) == (32768, 32, 0)


@pytest.mark.parametrize(
    ("k", "ks"), [(0, [0]), (1, [0, 1]), ("1,3", [0, 1, 3]), ([2, 4], [0, 2, 4]), (None, [0])]
)
def test_k_takes_the_forms_yaml_gives_and_always_adds_the_clean_run(k: object, ks: list[int]) -> None:
    assert TaskArgs.of(k=k).config().recovery_ks == ks


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"dialect": "yaml"}, "yaml"),
        ({"k": "one"}, "one"),
        ({"k": True}, "k=True"),
        ({"preset": "nope"}, "nope"),
        ({"budget": 0}, "-T budget 0"),
        ({"tempreature": 0.5}, "tempreature"),
        ({"samples": 0}, "samples=0"),
        ({"preset": "retool", "few_shot": 1}, "-T few_shot 1"),
    ],
)
def test_a_bad_argument_is_refused_in_one_line_naming_it(given: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        benchmark_task("nano", **given)  # type: ignore[arg-type]
    assert named in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        (1, ["mean"]),
        (2, ["mean", "pass_at_2"]),
        (6, ["mean", "pass_at_2", "pass_at_4", "pass_at_6"]),
        (16, ["mean", "pass_at_2", "pass_at_4", "pass_at_8", "pass_at_16"]),
    ],
)
def test_epochs_are_reduced_to_avg_at_n_and_the_pass_at_k_curve(samples: int, expected: list[str]) -> None:
    assert reducers(samples) == expected
    assert benchmark_task("nano", samples=samples).epochs == samples
