"""Invariant (Hypothesis): in a tool_call rollout's growing text, whatever the model writes around its
calls (prose, `</think>`, `</reason>`, stray tags and quotes), the calls the rollout takes at each turn
(`TurnTrigger.calls(text, since)`) are exactly that turn's calls, so each runs once, and the parse of
the whole text pairs every call with its own response. Pure: no model, no sandbox."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.trajectory import TurnTrigger, parse, unexecuted_code

AROUND = st.lists(
    st.sampled_from(
        ["</think>", "<think>", "</reason>", "<reason>", "\n", "\n\n", " ", "Let me run it.", "```", "}", '"',
         "'", "#", "<tool_response>", "</tool_response>", "<tool_call> is how I call", "</tool_call>", "é"]
    ),
    max_size=6,
).map("".join)  # fmt: skip
"""Model text around calls, hostile pieces included (tags it may write, a mention of a call)."""
CODE = st.text(st.sampled_from("abc xyz=+1()\n'\"\\#<>/é"), max_size=20)


def call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def tool_turn(outputs: list[str]) -> str:
    responses = "\n".join(f"<tool_response>\n{o}\n</tool_response>" for o in outputs)
    return "<|im_end|>\n<|im_start|>user\n" + responses + "<|im_end|>\n<|im_start|>assistant\n"


TURN = st.tuples(AROUND, st.lists(st.tuples(CODE, AROUND), min_size=1, max_size=3))


@settings(max_examples=150, deadline=None)
@given(turns=st.lists(TURN, min_size=1, max_size=4), answer=AROUND)
def test_each_call_is_taken_once_in_its_own_turn_and_paired_with_its_response(turns, answer) -> None:
    triggers = TurnTrigger("tool_call")
    text, codes, outputs = "", [], []
    for lead, calls in turns:
        since = len(text)
        text += lead + "".join(call(code) + after for code, after in calls)
        taken = triggers.calls(text, since)
        assert [c.code for c in taken] == [code for code, _ in calls]
        results = [f"out{len(outputs) + i}" for i in range(len(calls))]
        text += tool_turn(results)
        codes += [code for code, _ in calls]
        outputs += results
    text += answer
    assert triggers.calls(text, len(text) - len(answer)) == []
    traj = parse(text, "tool_call")
    assert traj.code_blocks == codes and traj.outputs == outputs
    assert unexecuted_code(traj) == [] and traj.render() == text
