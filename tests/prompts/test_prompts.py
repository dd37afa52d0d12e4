"""Prompts are real: every few-shot example re-executes to its recorded outputs and passes the ThinC filters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thinc_bench import grading, trajectory
from thinc_bench.errors import ConfigError
from thinc_bench.prompts import build_messages, load_examples, load_system_prompt
from thinc_bench.sandbox import Sandbox

EXAMPLES = load_examples()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_recorded_outputs_are_exactly_what_the_code_prints(example) -> None:
    parsed = trajectory.parse(example.trajectory)
    with Sandbox() as sb, sb.session() as session:
        actual = [session.run(code).output.rstrip("\n") for code in parsed.code_blocks]
    assert actual == parsed.outputs


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_passes_the_thinc_filters(example) -> None:
    parsed = trajectory.parse(example.trajectory)
    conformance = trajectory.check_conformance(parsed, min_code_blocks=3)
    assert conformance.passed, conformance.failed
    assert trajectory.classify(parsed) == "thinc"
    assert grading.grade(gold=example.answer, pred=example.trajectory).correct
    assert grading.is_grounded(parsed)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_problem_is_not_an_evaluation_problem(example, benchmark_dir: Path) -> None:
    from thinc_bench import benchmarks

    mine = _words(example.problem)
    for name in benchmarks.REGISTRY.keys() - {"gpqa_diamond"}:  # gated, no local copy (and not maths)
        for problem in benchmarks.load(name, data_dir=benchmark_dir, check_golds=False):
            overlap = len(mine & _words(problem.problem)) / len(mine)
            assert overlap < 0.8, f"{example.id} resembles {name} {problem.id}"


def test_messages_put_examples_before_the_problem() -> None:
    messages = build_messages("Compute 1+1.", "sys", load_examples(1))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"] == "Compute 1+1."
    assert build_messages("p", "")[0]["role"] == "user"


def test_named_file_and_none_system_prompts(tmp_path: Path) -> None:
    assert "\\boxed" in load_system_prompt("thinc")
    assert load_system_prompt("none") == ""
    path = tmp_path / "mine.txt"
    path.write_text("Be brief.\n")
    assert load_system_prompt(str(path)) == "Be brief."


def test_unknown_prompt_and_too_many_examples_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="neither one of thinc, interleaved, none"):
        load_system_prompt("thinc2")
    with pytest.raises(ConfigError, match=f"only {len(EXAMPLES)} bundled examples"):
        load_examples(len(EXAMPLES) + 1)
