"""Prompts are real: every few-shot example re-executes to its recorded outputs and passes the ThinC filters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from thinc_bench import grading, prompts, trajectory
from thinc_bench.errors import ConfigError
from thinc_bench.prompts import build_messages, check_settings, load_examples, load_system_prompt
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


def test_messages_put_whole_examples_in_the_system_turn_before_the_problem() -> None:
    example = load_examples(1)[0]
    messages = build_messages("Compute 1+1.", "sys", [example])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("sys\n\n")
    assert example.problem in messages[0]["content"] and example.trajectory in messages[0]["content"]
    assert messages[-1]["content"] == "Compute 1+1."
    assert build_messages("p", "")[0]["role"] == "user"
    assert build_messages("p", "", [example])[0]["content"].startswith("Solved examples")


QWEN3_TOKENIZER = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "qwen3-tokenizer"


@pytest.mark.skipif(not QWEN3_TOKENIZER.is_dir(), reason="../shared/models/qwen3-tokenizer is missing")
def test_qwen3_template_shows_few_shot_plans_whole() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(QWEN3_TOKENIZER))
    examples = load_examples()
    plans = [trajectory.parse(e.trajectory).plan for e in examples]
    as_turns = [{"role": "system", "content": "sys"}]
    for e in examples:
        as_turns += [{"role": "user", "content": e.problem}, {"role": "assistant", "content": e.trajectory}]
    as_turns.append({"role": "user", "content": "Compute 1+1."})
    old = tokenizer.apply_chat_template(as_turns, tokenize=False, add_generation_prompt=True)
    # why the examples moved: the template strips <think>...</think> from earlier assistant turns
    assert not any(plan in old for plan in plans)
    rendered = tokenizer.apply_chat_template(
        build_messages("Compute 1+1.", "sys", examples), tokenize=False, add_generation_prompt=True
    )
    assert all(e.trajectory in rendered for e in examples)
    assert rendered.rstrip().endswith("<|im_start|>assistant")


@pytest.mark.parametrize("name", ["thinc", "teacher"])
def test_markdown_prompts_say_what_to_write_and_what_never_to_write(name: str) -> None:
    text = load_system_prompt(
        name if name != "teacher" else str(Path(prompts.__file__).parent / "teacher.txt")
    )
    assert "exactly ```python" in text and "exactly ```" in text
    assert "Stop right after the closing ``` line" in text
    assert "Never write an ```output block" in text
    check_settings(dialect="markdown", system_prompt=text, few_shot=3, exec_on="output_open")


def test_a_prompt_in_the_other_dialect_is_refused() -> None:
    with pytest.raises(
        ConfigError, match="--dialect xml parses <code> / <interpreter> blocks.*--system-prompt interleaved"
    ):
        check_settings(
            dialect="xml", system_prompt=load_system_prompt("thinc"), few_shot=0, exec_on="code_close"
        )
    with pytest.raises(ConfigError, match="--dialect markdown parses .*--system-prompt thinc"):
        check_settings(
            dialect="markdown",
            system_prompt=load_system_prompt("interleaved"),
            few_shot=0,
            exec_on="code_close",
        )
    with pytest.raises(ConfigError, match="--few-shot 1 with --dialect xml"):
        check_settings(
            dialect="xml", system_prompt=load_system_prompt("interleaved"), few_shot=1, exec_on="code_close"
        )
    with pytest.raises(ConfigError, match="--exec-on 'on_close'"):
        check_settings(dialect="markdown", system_prompt="", few_shot=0, exec_on="on_close")
    check_settings(
        dialect="xml", system_prompt=load_system_prompt("interleaved"), few_shot=0, exec_on="code_close"
    )
    check_settings(dialect="xml", system_prompt="", few_shot=0, exec_on="output_open")


def test_eval_config_refuses_the_thinc_prompt_with_the_xml_dialect() -> None:
    from thinc_bench.eval.config import EvalConfig

    with pytest.raises(ConfigError, match="--dialect xml"):
        EvalConfig(model="m", backend="openai", dialect="xml", system_prompt="thinc")
    assert (
        EvalConfig(model="m", backend="openai", dialect="xml", system_prompt="interleaved").dialect == "xml"
    )


def test_tool_call_dialect_takes_its_own_prompt_and_refuses_block_prompts() -> None:
    from thinc_bench.eval.config import EvalConfig

    config = EvalConfig(model="m", backend="openai", dialect="tool_call")
    assert config.system_prompt == "tool_call" and "```" not in load_system_prompt("tool_call")
    for prompt in ("thinc", "interleaved"):
        with pytest.raises(ConfigError, match="--dialect tool_call .* --system-prompt tool_call"):
            EvalConfig(model="m", backend="openai", dialect="tool_call", system_prompt=prompt)
    with pytest.raises(ConfigError, match="--tool-name 'jupyter code'"):
        EvalConfig(model="m", backend="openai", dialect="tool_call", tool_name="jupyter code")
    assert "tool_name" not in EvalConfig(model="m", backend="openai").settings()  # old run hashes stay


def test_named_file_and_none_system_prompts(tmp_path: Path) -> None:
    assert "\\boxed" in load_system_prompt("thinc")
    assert load_system_prompt("none") == ""
    path = tmp_path / "mine.txt"
    path.write_text("Be brief.\n")
    assert load_system_prompt(str(path)) == "Be brief."


def test_unknown_prompt_and_too_many_examples_are_config_errors() -> None:
    with pytest.raises(
        ConfigError, match="neither one of thinc, interleaved, nano, tool_call, rstar2-agent, aster, none"
    ):
        load_system_prompt("thinc2")
    with pytest.raises(ConfigError, match=f"only {len(EXAMPLES)} bundled examples"):
        load_examples(len(EXAMPLES) + 1)


def test_user_templates_put_the_problem_in_their_slot_and_refuse_a_template_without_one(
    tmp_path: Path,
) -> None:
    from thinc_bench.prompts import build_messages, load_user_template

    problem = "What is {x} + 1, i.e. \\boxed{?}"  # braces in the problem stay as written
    assert build_messages(problem, "", None, load_user_template("none")) == [
        {"role": "user", "content": problem}
    ]
    aster = build_messages(problem, "", None, load_user_template("aster"))[0]["content"]
    assert (
        aster
        == "\n" + problem + "\nPlease reason step by step, and put your final answer within \\boxed{}.\n"
    )
    retool = build_messages(problem, "", None, load_user_template("retool"))[0]["content"]
    assert retool.count(problem) == 1 and "{problem}" not in retool and "<code>\n```python" in retool
    mine = tmp_path / "mine.txt"
    mine.write_text("Q: {problem}\nA:")
    assert build_messages("2+2?", "", None, load_user_template(str(mine)))[0]["content"] == "Q: 2+2?\nA:"
    mine.write_text("no slot here")
    with pytest.raises(ConfigError, match="has no \\{problem\\}"):
        load_user_template(str(mine))
    with pytest.raises(ConfigError, match="neither one of rstar2-agent, aster, retool, qwen-math, none"):
        load_user_template("rstar2")
