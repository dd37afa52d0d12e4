"""The rollout's incremental trigger (`TurnTrigger`, `_scan.Resumable`) against the full rescan.

The full rescan (`parse`, `exec_trigger`, `pending_calls`) is the oracle: it is what the corpora in
tests/data/parse and the rest of tests/test_trajectory.py pin down. Here every text is fed as a rollout
feeds it, growing turn by turn (or character by character), to one incremental instance, and at every
step its pieces, its decision and the code it hands to the sandbox must equal a fresh full rescan's.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from thinc_bench.trajectory import (
    DIALECTS,
    TurnTrigger,
    _scan,
    exec_stops,
    exec_trigger,
    harness_block,
    parse,
    pending_calls,
)

CORPUS = Path(__file__).parent / "data" / "parse"
CASES = [
    json.loads(line)
    for path in sorted(CORPUS.glob("*.jsonl"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]
IM_END, USER, ASSISTANT = "<|im_end|>", "<|im_start|>user\n", "<|im_start|>assistant\n"


def call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def tool_turn(output: str, think: bool = True) -> str:
    tail = "<think>\n\n</think>\n\n" if think else ""
    return f"{IM_END}\n{USER}<tool_response>\n{output}\n</tool_response>{IM_END}\n{ASSISTANT}{tail}"


HOSTILE = {
    "markdown": [
        # a fence split across turns, and an opener whose language arrives later
        "```python\nprint(1)\n``" + "`\n```output\n1\n```\n```py" + "thon\nx = 2\n```\n```output\n```\n",
        # a string holding a fence and an output opener: code, not a terminator
        'Let me:\n```python\ns = """\n```\n```output\n"""\nprint(len(s))\n```\n```output\n20\n```\n\\boxed{20}',
        "```python\nprint('```output')\n# ```\n```\n```output\n```output\n```\n",
        # CRLF everywhere, and a lone CR
        "<think>\r\nplan\r\n</think>\r\n```python\r\nx = 1\r\nprint(x)\r\n```\r\n```output\r\n1\r\n```\r\nok\r\\boxed{1}",
        # open blocks: abandoned for a new opener, cut by an output opener, never closed
        "```python\nx = 1\n```python\nprint(2)\n```\n```output\n2\n```\n```python\nprint(3)```output\n3\n```\n```python\nopen",
        # a plan the template opened, closed after code drafts; tildes, indented fences, info strings
        "Draft:\n```python\nprint(17 * 20)\n```\nno.\n</think>\n  ~~~Python # note\n  print(1)\n  ~~~\n```output\n1\n```\n",
        "   \n\t<think>\nplan ```output\n```python\nx\n```\n```output\nx\n```\n</think>\n```py\ny\n```\n```output\n",
        # blank runs and markup that reach across lines
        "```python\nx\n```\n\n\n   \n```output\n\n\n\n```\n     \n\n",
        "text ``` stray\n```\n~~~\n``````output\n```\n",
    ],
    "xml": [
        "<code>\n```python\nprint(1)\n```\n</code>\n<interpreter>\n1\n</interpreter>\n<code>   \nx = '</code>'\n</code><interpreter>",
        "the <code> tag, and `<code>`\n<code>print(2)</code>\r\n<interpreter>\r\n2\r\n</interpreter>\r\n\\boxed{2}",
        "<think>plan</think><code>a = 1</code>\n<code>b = 2\n<code>\nc = 3</code><interpreter>\n3\n</interpreter>\n<code>",
    ],
    "tool_call": [
        "<think>\nplan\n</think>\n\n"
        + call("x = 2**10\nprint(x)")
        + tool_turn("1024")
        + call("print(x + 1)")
        + tool_turn("1025", think=False)
        + "The answer is \\boxed{1025}.",
        # a closer inside the JSON string, a malformed call, two calls in one turn
        "<tool_call>\n"
        + json.dumps({"name": "python", "arguments": {"code": "print('</tool_call>')"}})
        + '\n</tool_call>\n<tool_call>\n{"name": "python"\n</tool_call>'
        + tool_turn("</tool_call>")
        + tool_turn("Error: no code")[len(IM_END) + 1 :]
        + call("print(3)")
        + "\n"
        + call("print(4)"),
        "plan without opener </think>\n"
        + call("print(1)")
        + tool_turn("1")
        + "later </think> is prose "
        + "<tool_call>   \n   ",
        # text after a turn's last call: prose, a </think> closing a plan the calls were made in
        "<think>\nplan "
        + call("print(1)")
        + "\n</think>\n\n"
        + tool_turn("1")
        + call("print(2)")
        + "\nRan it."
        + tool_turn("2", think=False)
        + "<reason>"
        + call("print(3)")
        + "</reason>"
        + tool_turn("3")
        + "\\boxed{3}",
    ],
}
FRAGMENTS = [
    "```python\n", "```py", "```python", "```output", "```output\n", "```\n", "```", "``", "~~~\n",
    "~~~python\n", "  ```Python # note\n", "<think>", "</think>", "<think>\n\n</think>\n\n", "<code>",
    "</code>", "<interpreter>", "</interpreter>", "<tool_call>", "</tool_call>", '{"name": "python", ',
    '"arguments": {"code": "x"}}', IM_END, USER, ASSISTANT, "<tool_response>", "</tool_response>",
    "\n", "\r\n", "\r", " ", "\t", "    ", "x = 1", "print(2)", "# note", "'", '"""', "42", "\\boxed{3}",
    "so ", "é",
]  # fmt: skip


def _fragments(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(1, 24)))


def _texts(dialect: str) -> list[str]:
    corpus = [c["text"] for c in CASES if c["dialect"] == dialect]
    return corpus + HOSTILE[dialect]


def _assert_grows_like_full_scans(text: str, dialect: str, cuts: list[int]) -> None:
    """One `GrowingScan` fed text[:c] for each cut in order equals a fresh full scan at each."""
    d = DIALECTS[dialect]
    growing = _scan.GrowingScan(d)
    for cut in cuts:
        prefix = text[:cut]
        pieces, plan_closed = growing.scan(prefix)
        assert _scan.finish(list(pieces), plan_closed) == _scan.scan(prefix, d), (dialect, prefix)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_prefix_of_corpus_and_hostile_texts_scans_as_a_full_rescan(dialect: str) -> None:
    for text in _texts(dialect):
        _assert_grows_like_full_scans(text, dialect, list(range(len(text) + 1)))


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_random_texts_grown_in_random_steps_scan_as_a_full_rescan(dialect: str) -> None:
    rng = random.Random(29)
    for _ in range(600):
        text = _fragments(rng)
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 12)))
        _assert_grows_like_full_scans(text, dialect, cuts)


def test_a_text_that_does_not_extend_the_last_one_is_scanned_afresh() -> None:
    d = DIALECTS["markdown"]
    growing = _scan.GrowingScan(d)
    first = "```python\nx = 1\n```\n```output\n1\n```\nmore\n"
    growing.scan(first)
    other = "<think>\n```python\ny\n```\n"
    assert _scan.finish(*growing.scan(other)) == _scan.scan(other, d)


def _replay(turns: list[str], dialect: str, exec_on: str, plan_open: bool, overlap: int | None = None) -> int:
    """Replay turns as the rollout does, both triggers side by side; returns the code runs. With
    `overlap`, the text the next turn reads again stays under it at every turn."""
    d = DIALECTS[dialect]
    stops = exec_stops(d, exec_on)  # type: ignore[arg-type]
    incremental = TurnTrigger(d, plan_open=plan_open)
    text, runs = "", 0
    for i, turn in enumerate(turns):
        text += turn
        stop = next((s for s in stops if turn.endswith(s)), None)
        expected = exec_trigger(text, stop, d, plan_open=plan_open)
        assert incremental(text, stop) == expected, (i, text)
        if expected.run and i < len(turns) - 1:
            runs += 1
            text += harness_block(text, expected, f"out {i}\n  second line", d)
        if overlap is not None:
            assert incremental.backlog(text) < overlap, (i, incremental.backlog(text))
    assert incremental.parse(text) == parse(text, dialect)
    return runs


@pytest.mark.parametrize("plan_open", [False, True])
def test_corpus_turns_trigger_as_the_full_rescan_at_every_turn(plan_open: bool) -> None:
    for case in CASES:
        _replay(case["turns"], case["dialect"], case["exec_on"], plan_open)


@pytest.mark.parametrize("exec_on", ["output_open", "code_close"])
@pytest.mark.parametrize("dialect", ["markdown", "xml"])
def test_hostile_texts_cut_into_random_turns_trigger_as_the_full_rescan(dialect: str, exec_on: str) -> None:
    rng = random.Random(2029)
    texts = _texts(dialect) + [_fragments(rng) for _ in range(300)]
    for text in texts:
        for plan_open in (False, True):
            bounds = sorted({0, len(text), *rng.sample(range(1, len(text) + 1), min(len(text), 6))})
            turns = [text[a:b] for a, b in itertools.pairwise(bounds)]
            _replay(turns, dialect, exec_on, plan_open)


def test_a_long_trajectory_triggers_every_block_as_the_full_rescan() -> None:
    """Each turn reads again only about one block (under 200 characters), not the whole text."""
    turns = [f"```python\n# step {i}\nx{i} = '''\n```\n'''\nprint({i})\n```\n```output" for i in range(100)]
    crlf = [f"<code>\r\nprint({i})\r\n</code>\r\n<interpreter>" for i in range(100)]
    assert _replay([*turns, "\\boxed{1}"], "markdown", "output_open", False, overlap=200) == 100
    plan = ["<think>\nplan\n", *turns, "\\boxed{1}"]
    assert _replay(plan, "markdown", "code_close", True, overlap=200) == 100
    assert _replay([*crlf, "\\boxed{1}"], "xml", "output_open", False, overlap=200) == 100


def test_tool_calls_of_every_turn_prefix_equal_the_full_rescan() -> None:
    rng = random.Random(7)
    texts = _texts("tool_call") + [_fragments(rng) for _ in range(300)]
    long = "".join(call(f"print({i})") + tool_turn(str(i)) for i in range(100))
    for text in [*texts, long]:
        incremental = TurnTrigger("tool_call")
        ends = [i for i in range(len(text)) if text.startswith(IM_END, i)] + [len(text)]
        extra = rng.sample(range(len(text) + 1), min(5, len(text) + 1))
        for cut in ends if text is long else sorted({*ends, *extra}):
            assert incremental.calls(text[:cut]) == pending_calls(text[:cut]), text[:cut]
            if text is long:  # what the next turn reads again: about the last call and its response
                assert incremental.backlog(text[:cut]) < 250
        assert incremental.parse(text) == parse(text, "tool_call")
