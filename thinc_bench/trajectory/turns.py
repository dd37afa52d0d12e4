"""What runs when: the stop strings generation uses, and whether a stop asked for code to run.

`exec_trigger` decides it for one stop; `TurnTrigger` decides the same for a rollout's growing text,
scanning only what each turn added, so a long rollout stays linear in its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

from thinc_bench.errors import ConfigError
from thinc_bench.trajectory import _scan
from thinc_bench.trajectory.segments import (
    Dialect,
    Segment,
    ToolCall,
    Trajectory,
    _calls,
    _segment,
    get_dialect,
)

ExecOn = Literal["output_open", "code_close"]
"""When code runs: when the model opens an output block, or as soon as a code block closes."""


class Trigger(NamedTuple):
    """What the rollout does when generation stops at one of `exec_stops`.

    Attributes:
        run: the model asked for its code to run; write an output block now. False: the stop string
            was a mention (in prose, the plan, a string) or closed a draft in the plan; keep generating.
        codes: the code to run, in order: every closed code block since the last output block, in
            the same part (plan or not) as the opener. Empty with `run`: an output block opened with
            no code before it (the harness answers with an error the model sees).
        write_opener: the harness writes the output opener itself (a code block closed).
    """

    run: bool
    codes: tuple[str, ...]
    write_opener: bool


_NO_RUN = Trigger(False, (), False)


def exec_stops(dialect: str | Dialect, exec_on: ExecOn) -> tuple[str, ...]:
    """The stop strings generation uses: the output opener, plus every code closer with `code_close`.

    Raises:
        ConfigError: unknown dialect or trigger.
    """
    d = get_dialect(dialect) if isinstance(dialect, str) else dialect
    if exec_on not in get_args(ExecOn):
        raise ConfigError(f"exec trigger {exec_on!r}: use one of {', '.join(get_args(ExecOn))}")
    return (d.stop,) if exec_on == "output_open" else (d.stop, *d.code_ends)


def exec_trigger(
    text: str, stop: str | None, dialect: str | Dialect = "markdown", *, plan_open: bool = False
) -> Trigger:
    """Decide whether generation that stopped at `stop` asked for code to run, and which code.

    An output opener runs code when it opens an output block in `parse`'s sense (right after a code
    block, a cut-off open block included; or outside the plan at the start of a line). A code closer
    (`code_close`) runs the block it closed, unless that block is a draft inside the plan: a draft
    runs only when the model itself opens an output block after it. A turn that ended (EOS, `stop`
    None) right after a closed code block outside the plan runs it too: the model stopped so that
    its code would run, as the prompts tell an untrained model to do.

    Args:
        text: the generated text so far; it may run a few characters past `stop` (a token's tail).
        stop: the stop string that fired, or None when the model ended its turn.
        dialect: the trajectory dialect.
        plan_open: the chat prompt ends inside `<think>` (R1 distills, Qwen3 thinking 2507): the
            text starts in the plan, as if it began with `<think>`.

    Returns:
        The decision; `codes` are ready to run (indentation of indented fences removed).
    """
    d = get_dialect(dialect) if isinstance(dialect, str) else dialect
    return _decide(text, stop, d, plan_open, lambda full: _scan.scan(full, d))


def _decide(
    text: str, stop: str | None, d: Dialect, plan_open: bool, pieces_of: Callable[[str], list[_scan.Piece]]
) -> Trigger:
    """`exec_trigger`'s rules over the pieces `pieces_of` gives for the text it parses (a full scan,
    or `TurnTrigger`'s resumed one: the same pieces, plan stretches possibly left unfinished)."""
    opener = "" if not plan_open or _scan.THINK_OPEN.match(text) else "<think>"
    if stop is None:
        full = opener + text
        pieces = pieces_of(full)
        last = next(
            (p for p in reversed(pieces) if p.kind != "text" or full[p.span[0] : p.span[1]].strip()), None
        )
        if last is None or last.kind != "code" or not last.closed or last.in_plan:
            return _NO_RUN
        return Trigger(True, _pending_codes(full, pieces, len(pieces), False), True)
    at = text.rfind(stop)
    if at < 0:
        return _NO_RUN
    full = opener + text[: at + len(stop)]
    at += len(opener)
    pieces = pieces_of(full)
    last = pieces[-1]
    if stop == d.stop:
        if last.kind != "output" or last.span[0] != at:
            return _NO_RUN
        return Trigger(True, _pending_codes(full, pieces, len(pieces) - 1, last.in_plan), False)
    if last.kind == "code" and last.closed and not last.in_plan:
        return Trigger(True, _pending_codes(full, pieces, len(pieces), False), True)
    return _NO_RUN


class TurnTrigger:
    """`exec_trigger` and `pending_calls` for one rollout, whose text only grows: each turn scans what
    it added plus a bounded overlap (`_scan.Resumable`), not the whole text again, so a trajectory of
    n blocks costs O(n), not O(n^2). Decides exactly as they do (tests compare every turn).

    Args:
        dialect: the trajectory dialect.
        plan_open: as for `exec_trigger`.
    """

    def __init__(self, dialect: str | Dialect = "markdown", *, plan_open: bool = False) -> None:
        self.d = get_dialect(dialect) if isinstance(dialect, str) else dialect
        self.plan_open = plan_open
        self._scan = _scan.GrowingScan(self.d)

    def _pieces(self, text: str) -> list[_scan.Piece]:
        return self._scan.scan(text)[0]

    def __call__(self, text: str, stop: str | None) -> Trigger:
        """`exec_trigger(text, stop, dialect, plan_open=plan_open)`."""
        return _decide(text, stop, self.d, self.plan_open, self._pieces)

    def calls(self, text: str, since: int | None = None) -> list[ToolCall]:
        """`pending_calls(text)` (tool_call dialect); given `since`, the closed calls that start at or
        after it instead: the rollout passes where the model's current turn began, so a call is one
        turn's and runs once, whatever the scan makes of the text around the tool turns."""
        return _calls(text, self._pieces(text), since)

    def parse(self, text: str) -> Trajectory:
        """`parse(text, dialect)`, resumed like the triggers when `text` extends what they saw."""
        pieces, plan_closed = self._scan.scan(text)
        return Trajectory(tuple(_segment(text, p) for p in _scan.finish(pieces, plan_closed)), self.d.name)

    def backlog(self, text: str) -> int:
        """About how many characters the next call on `text` reads (the rollout moves big scans off
        its event loop)."""
        return self._scan.backlog(len(text) + (len("<think>") if self.plan_open else 0))


def harness_block(text: str, trigger: Trigger, output: str, dialect: str | Dialect = "markdown") -> str:
    """The exact text the harness appends for `trigger`: the output opener when the model did not
    write it (on its own line), then `format_output(output)`."""
    d = get_dialect(dialect) if isinstance(dialect, str) else dialect
    if not trigger.write_opener:
        return d.format_output(output)
    newline = "" if text.endswith("\n") or d.name == "xml" else "\n"
    return newline + d.stop + d.format_output(output)


def _pending_codes(text: str, pieces: list[_scan.Piece], end: int, in_plan: bool) -> tuple[str, ...]:
    """Closed code blocks of `pieces[:end]` after the last output block, in the plan or out of it as
    asked."""
    codes: list[str] = []
    for i in range(end - 1, -1, -1):
        p = pieces[i]
        if p.kind == "output" or p.in_plan != in_plan:
            break
        if p.kind == "code" and p.closed:
            codes.append(_segment(text, p).code)
    return tuple(reversed(codes))


_TURN_END = re.compile(rf"\s*{_scan.SPECIAL_TOKEN}")


def model_prefix(output: Segment, dialect: str) -> int:
    """Characters at the start of an output segment that the model wrote: the output opener (the
    dialect's stop string), or in the tool_call dialect the end-of-turn token that asked for the tool
    turn (the template's markup and the responses after it are the harness's)."""
    if dialect == "tool_call":
        turn_end = _TURN_END.match(output.raw)
        return 0 if turn_end is None else turn_end.end()
    stop = get_dialect(dialect).stop
    return len(stop) if output.raw.startswith(stop) else 0
