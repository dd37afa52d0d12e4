"""The trajectory IR: a model's text as plan | code | output | text | answer segments.

Contract: `parse(text, dialect).render() == text` for every string, malformed ones included; each
`Segment` keeps its exact raw slice (fences and tags included), its inner `content`, both character
spans and, once `with_token_spans` has run, its token span. A `Dialect` tells the rollout engine where
generation stops, what it appends after the stop string and which code block to execute. `exec_trigger`
decides, when generation stops, whether the model asked for code to run and which (`TurnTrigger`
decides the same for a rollout's growing text, scanning only what each turn added). The ThinC
conformance checks and `classify` read only this IR. The lexical rules for fences, tags and strings
live in `_scan` (docs/parsing.md lists the variants real models write and how each parses).
Pure: no IO, no logging, no tokenizer, and no answer grading (that is `grading`; `\\boxed` is found
here by a local regex only to place the answer).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, get_args

from thinc_bench import _scan
from thinc_bench.errors import ConfigError

SegmentKind = Literal["plan", "code", "output", "text", "answer"]
DialectName = Literal["markdown", "xml", "tool_call"]
Style = Literal["thinc", "interleaved", "no_code"]
CheckName = Literal[
    "has_plan",
    "no_text_between_code",
    "n_code_blocks",
    "plan_share",
    "answer_after_last_output",
    "code_followed_by_output",
    "short_prose_outside_plan",
    "no_code_in_plan",
]
ExecOn = Literal["output_open", "code_close"]
"""When code runs: when the model opens an output block, or as soon as a code block closes."""
ShareUnit = Literal["tokens", "count_tokens", "chars"]

DEFAULT_MIN_CODE_BLOCKS = 1  # a trajectory needs one executed block to be "thinking in code" at all
DEFAULT_MAX_PLAN_SHARE = 0.5  # the plan is meant to be short: under half of what the model writes
DEFAULT_MAX_PROSE_CHARS = 120
"""Most prose characters before the first block and after the last, each (box excluded, whitespace
runs as one): a short sentence around the box ("The count is \\boxed{90}." measures 14), never a
paragraph of reasoning outside code."""

_ANSWER_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])(?:\s*\{|\s+[+-]?\d)")
"""A box the grader reads: `\\boxed{...}`, `\\fbox{...}` or a bare `\\boxed 42` (grading's forms)."""
# An output block (harness-written) closes only on an unindented fence line of its own, as in CommonMark;
# "```output" therefore never closes one. Code fences have more forms: `_scan`.
_FENCE_CLOSE = re.compile(r"(?m)^```[ \t]*(?:\r?\n|\Z)")
_FENCE_LINE = re.compile(r"(?m)^(```[ \t]*)(?=\r?$)")


class Span(NamedTuple):
    """A half-open range [start, end) of characters or of tokens."""

    start: int
    end: int


@dataclass(frozen=True)
class Segment:
    """One contiguous slice of a trajectory.

    Attributes:
        kind: `plan` (the `<think>` block, or a stretch of it between code drafts), `code`, `output` (interpreter output block), `answer` (the
            non-blank text after the last block, or all text when there is none) or `text` (anything
            else, whitespace-only gaps included).
        span: characters of `raw` in the rendered text.
        content_span: characters of `content` (fences, tags and their line breaks excluded).
        raw: the exact slice, fences and tags included.
        content: the inner text: code without fences, output without fences, plan without tags.
        closed: False for a block or plan whose closer never came (truncated generation), or a code
            block abandoned for a new opener. A code block that an output opener cut is closed: it ran.
        token_span: tokens whose first character lies in `span` (see `Trajectory.with_token_spans`).
        in_plan: the segment lies inside `<think>...</think>`. A plan with code drafts in it is several
            `plan` segments with the drafts (and any outputs they asked for) between them.
    """

    kind: SegmentKind
    span: Span
    content_span: Span
    raw: str
    content: str
    closed: bool = True
    token_span: Span | None = None
    in_plan: bool = False

    @property
    def code(self) -> str:
        """The code this block runs: `content` less the opening fence's indentation (CommonMark); for
        a tool call, its `code` argument ('' when the call is malformed, see `parse_call`)."""
        if self.raw.startswith("<tool_call>"):
            return parse_call(self.content).code or ""
        indent = self.raw[: len(self.raw) - len(self.raw.lstrip(" \t"))]
        return _scan.dedent(self.content, indent)


def _segment(text: str, piece: _scan.Piece) -> Segment:
    span, content = Span(*piece.span), Span(*piece.content)
    raw, inner = text[span.start : span.end], text[content.start : content.end]
    return Segment(piece.kind, span, content, raw, inner, piece.closed, None, piece.in_plan)


ContentRule = _scan.ContentRule


@dataclass(frozen=True)
class Dialect:
    """How code and interpreter output are delimited, and what the rollout engine needs to know.

    Attributes:
        name: the key in `DIALECTS`.
        stop: the string that opens an output block. Generation stops there and keeps it; the
            harness then appends `format_output(output)` and the model continues. So in an output
            segment of a rollout the first `len(stop)` characters are the model's, the rest the harness's.
        code_open, code_close, output_open, output_close: the delimiters, as regexes.
        code_content, output_content: where the inner text lies between the delimiters.
        output_tail: what `format_output` appends after the output to close the block.
        output_guard: a closer that may occur inside interpreter output, and its neutralised form.
        code_end: the literal that closes a code block; a rollout that executes on a closed code
            block (for models that never open the output block themselves) stops there.
        code_ends: every stop string that can close a code block (`code_end` first): CRLF and tilde
            fences close markdown blocks too.

    The regexes name the canonical forms; `parse` also reads the variants real models write (see
    `_scan` and docs/parsing.md).
    """

    name: DialectName
    stop: str
    code_open: re.Pattern[str]
    code_close: re.Pattern[str]
    output_open: re.Pattern[str]
    output_close: re.Pattern[str]
    code_content: ContentRule
    output_content: ContentRule
    output_tail: str
    output_guard: tuple[re.Pattern[str], str]
    code_end: str
    code_ends: tuple[str, ...] = ()

    def format_output(self, output: str) -> str:
        """Return exactly the text to append right after `stop` so the output block is closed.

        Trailing line breaks of `output` are dropped, and a line that would close the block early
        (a bare ```` ``` ```` line, or `</interpreter>`) is neutralised, so the parsed content is
        `output.rstrip("\\r\\n")` for any interpreter output without such a line.

        Args:
            output: the interpreter's (already truncated) stdout or error text.

        Returns:
            The text that follows the stop string, ending with a line break after the closer.
        """
        return "\n" + self.guard(output) + self.output_tail

    def guard(self, output: str) -> str:
        """`output` without trailing line breaks and with any line that would close its block early
        neutralised (the body `format_output` writes; the tool_call dialect's template writes the rest)."""
        pattern, replacement = self.output_guard
        return pattern.sub(replacement, output.rstrip("\r\n"))

    def last_code(self, text: str) -> str | None:
        """Return the code of the last closed code block not yet followed by a closed output block.

        Args:
            text: the generated text so far, usually ending with `stop`.

        Returns:
            The code to execute, or None when the last code block is unclosed or already answered.
        """
        segments = parse(text, self.name).segments
        for i in range(len(segments) - 1, -1, -1):
            segment = segments[i]
            if segment.kind == "code":
                answered = any(s.kind == "output" and s.closed for s in segments[i + 1 :])
                return segment.code if segment.closed and not answered else None
        return None


MARKDOWN = Dialect(
    name="markdown",
    stop="```output",
    code_open=_scan.MD_OPEN_LINE,
    code_close=_FENCE_CLOSE,
    output_open=re.compile(r"```output[ \t]*(?:\r?\n|\Z)"),
    output_close=_FENCE_CLOSE,
    code_content=_scan.fenced_content,
    output_content=_scan.fenced_content,
    output_tail="\n```\n",
    output_guard=(_FENCE_LINE, r" \1"),
    code_end="```\n",
    code_ends=("```\n", "```\r\n", "~~~\n", "~~~\r\n"),
)
XML = Dialect(
    name="xml",
    stop="<interpreter>",
    code_open=_scan.XML_OPEN,
    code_close=_scan.XML_CODE_CLOSE,
    output_open=re.compile(r"<interpreter>"),
    output_close=re.compile(r"</interpreter>(?:\r?\n)?"),
    code_content=_scan.xml_code_content,
    output_content=_scan.xml_output_content,
    output_tail="\n</interpreter>\n",
    output_guard=(re.compile(r"</interpreter>"), "</ interpreter>"),
    code_end="</code>",
    code_ends=("</code>",),
)
TOOL_CALL = Dialect(
    name="tool_call",
    stop="</tool_call>",
    code_open=_scan.TOOL_CALL_OPEN,
    code_close=_scan.TOOL_CALL_CLOSE,
    output_open=_scan.TOOL_TURN_OPEN,
    output_close=_scan.TOOL_RESPONSE_CLOSE,
    code_content=_scan.xml_output_content,
    output_content=_scan.tool_response_content,
    output_tail="",
    output_guard=(re.compile(r"</tool_response>"), "</ tool_response>"),
    code_end="</tool_call>",
    code_ends=("</tool_call>",),
)
"""Native tool calls in the Hermes/Qwen format (docs/tool_calls.md): a call is
`<tool_call>{"name": ..., "arguments": {"code": ...}}</tool_call>` in the assistant turn, and its
result comes back as the chat template renders a `tool` message (`<tool_response>` in a user turn).
Generation is not stopped at a call: the model ends its turn, then every call of the turn runs. The
output segment of a tool turn spans the model's end-of-turn text and the template's markup (which
only the rollout, through the template, writes), so `stop` here is only the call's closer."""
DIALECTS: dict[str, Dialect] = {d.name: d for d in (MARKDOWN, XML, TOOL_CALL)}


class ToolCall(NamedTuple):
    """A tool call as the model wrote it: the function name and its `code` argument, or why not.

    `error` is None for a well-formed call; else it says what is wrong (the JSON does not parse, no
    function name, no string `code` argument). Whether the name is the declared tool is the
    rollout's to decide (`problem`).
    """

    name: str | None
    code: str | None
    error: str | None
    arguments: Mapping[str, Any] | None = None
    """Every argument of a well-formed call, decoded (`code` included): a tool may take more (stdin)."""

    def problem(self, tool_name: str | Sequence[str]) -> str | None:
        """Why this call cannot run as a call of `tool_name` (the declared name, or every name the
        tool answers to, declared one first), or None when it can."""
        if self.error is not None:
            return self.error
        names = (tool_name,) if isinstance(tool_name, str) else tuple(tool_name)
        if self.name not in names:
            return f"unknown tool {self.name!r}: the only tool is {names[0]!r}"
        return None


MAX_JSON_INT_DIGITS = 4_000
"""Longer integers in a call's JSON are read as floats (inf): int() refuses more than 4,300 digits, and
only the call's `name` and `code` are used."""


def _json(text: str) -> object:
    """`json.loads` for model-written JSON: a huge integer does not raise ValueError, and nesting past
    the recursion limit (`[[[[...`) is a JSONDecodeError like any other malformed JSON."""
    try:
        return json.loads(text, parse_int=lambda s: int(s) if len(s) <= MAX_JSON_INT_DIGITS else float(s))
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def parse_call(body: str) -> ToolCall:
    """Read the JSON body of a `<tool_call>`: `{"name": ..., "arguments": {"code": ...}}`.

    `arguments` given as a JSON string (as the OpenAI API writes it) is decoded too.
    """
    try:
        call = _json(body)
    except json.JSONDecodeError as exc:
        return ToolCall(None, None, f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(call, dict):
        return ToolCall(None, None, "the tool call is not a JSON object with 'name' and 'arguments'")
    name = call.get("name")
    if not isinstance(name, str) or not name:
        return ToolCall(None, None, "the tool call has no function 'name'")
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = _json(arguments)
        except json.JSONDecodeError:
            return ToolCall(name, None, "the tool call's 'arguments' string is not a JSON object")
    if not isinstance(arguments, dict) or not isinstance(code := arguments.get("code"), str):
        return ToolCall(name, None, "the tool call has no string argument 'code'")
    return ToolCall(name, code, None, arguments)


def pending_calls(text: str) -> list[ToolCall]:
    """The calls of the model's last turn in a tool_call trajectory: every closed `<tool_call>` after
    the last tool response, in order (malformed ones included, with their `error`)."""
    return _calls(text, _scan.scan(text, TOOL_CALL))


def _calls(text: str, pieces: list[_scan.Piece], since: int | None = None) -> list[ToolCall]:
    """Closed calls after the last output piece, or, given `since` (a turn the model ended), every
    call that starts at or after it, output pieces or not, and an unclosed call the text ends in
    (vLLM's hermes parser reads `<tool_call>(.*)` at the end of a turn too)."""
    calls: list[ToolCall] = []
    for p in reversed(pieces):
        if (p.kind == "output" and since is None) or (since is not None and p.span[1] <= since):
            break
        last_open = since is not None and p is pieces[-1] and p.span[1] == len(text)
        if p.kind == "code" and (p.closed or last_open) and (since is None or p.span[0] >= since):
            calls.append(parse_call(text[p.content[0] : p.content[1]]))
    return calls[::-1]


def get_dialect(name: str) -> Dialect:
    """Return the dialect called `name`.

    Raises:
        ConfigError: `name` is not a key of `DIALECTS`.
    """
    try:
        return DIALECTS[name]
    except KeyError:
        raise ConfigError(f"unknown trajectory dialect {name!r}; choose one of {sorted(DIALECTS)}") from None


@dataclass(frozen=True)
class Trajectory:
    """A parsed model trajectory: segments that concatenate to the original text."""

    segments: tuple[Segment, ...]
    dialect: DialectName = "markdown"

    def render(self) -> str:
        """Return the exact text this trajectory was parsed from."""
        return "".join(s.raw for s in self.segments)

    @property
    def code_blocks(self) -> list[str]:
        """Code of every closed code block (fences and fence indentation excluded), in order."""
        return [s.code for s in self.segments if s.kind == "code" and s.closed]

    @property
    def outputs(self) -> list[str]:
        """Content of every closed output block, fences excluded, in order."""
        return [s.content for s in self.segments if s.kind == "output" and s.closed]

    @property
    def n_code_blocks(self) -> int:
        """Number of closed code blocks."""
        return len(self.code_blocks)

    @property
    def plan(self) -> str | None:
        """The text between `<think>` and `</think>` (code drafts included, surrounding blanks
        excluded), or None without a plan."""
        pieces = [s for s in self.segments if s.kind == "plan"]
        if not pieces:
            return None
        first = self.segments[0]
        start = first.content_span.start if first.kind == "plan" else first.span.start
        end = pieces[-1].content_span.end
        return self.render()[start:end].strip() if end > start else ""

    @property
    def final_text(self) -> str:
        """What the model wrote after its last code or output block and after its plan: the text
        after `</think>` when there is no code, the whole text when there is neither."""
        last = max((i for i, s in enumerate(self.segments) if s.kind in ("code", "output")), default=-1)
        return "".join(s.raw for s in self.segments[last + 1 :] if s.kind != "plan")

    def with_token_spans(self, offsets: Sequence[tuple[int, int]]) -> Trajectory:
        """Return a copy whose segments carry token spans.

        A token belongs to the segment holding its first character, so a token straddling a boundary
        goes to the earlier segment; the spans partition all tokens. A zero-width token (a special
        token with no text) must be given as (p, p) at its position and belongs to the segment that
        holds p; p == len(text) goes to the last segment.

        Args:
            offsets: per token, its (start, end) characters in `render()`, starts non-decreasing (the
                `offset_mapping` of a fast tokenizer run on the rendered text).

        Returns:
            A new Trajectory; this one is unchanged.

        Raises:
            ValueError: an offset lies outside the text or the starts decrease.
        """
        n_chars = sum(len(s.raw) for s in self.segments)
        starts = [start for start, _ in offsets]
        for i, (start, end) in enumerate(offsets):
            if not 0 <= start <= end <= n_chars or (i and start < starts[i - 1]):
                raise ValueError(
                    f"token {i} has offsets ({start}, {end}) for a text of {n_chars} characters (previous "
                    f"start {starts[i - 1] if i else None}); pass the offset_mapping of the rendered text "
                    "with special tokens as zero-width (p, p)"
                )
        bounds = [bisect_left(starts, s.span.start) for s in self.segments[1:]]
        firsts, lasts = [0, *bounds], [*bounds, len(offsets)]
        segments = tuple(
            replace(s, token_span=Span(a, b)) for s, a, b in zip(self.segments, firsts, lasts, strict=True)
        )
        return replace(self, segments=segments)


def parse(text: str, dialect: str = "markdown") -> Trajectory:
    """Split `text` into segments; `parse(text, d).render() == text` for every string.

    The plan is `<think>...</think>` at the start, or everything up to the first `</think>` outside
    a block when the chat template sent `<think>`; without a `</think>` a leading `<think>` makes the
    whole text an unclosed plan. Code may open inside the plan (a draft, `in_plan`). A code block opens at a fence
    on its own line (any case, optional space, info string, indentation, backticks or tildes) or at a
    bare ```` ```python ```` after text; in xml at `<code>` that is not a mention. It ends at its
    closer, at an output opener (it then runs up to it), or, unclosed, at a new opener on its own
    line; a terminator inside a Python string or comment of the block is code. An output block opens
    right after a closed code block, or, outside the plan, at the start of a line. An unclosed block
    runs to the end of the text. docs/parsing.md has the cases.

    Args:
        text: the model's generated text (after the chat prompt), harness outputs included.
        dialect: a key of `DIALECTS`.

    Returns:
        The trajectory.

    Raises:
        ConfigError: `dialect` is unknown.
    """
    d = get_dialect(dialect)
    return Trajectory(tuple(_segment(text, p) for p in _scan.scan(text, d)), d.name)


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


def has_final_answer(traj: Trajectory) -> bool:
    """True when the final text holds a box the grader reads (`\\boxed{}`, `\\fbox{}`, `\\boxed 42`)."""
    return _ANSWER_BOX.search(traj.final_text) is not None


@dataclass(frozen=True)
class Check:
    """One named conformance check and why it passed or failed."""

    name: CheckName
    passed: bool
    detail: str


@dataclass(frozen=True)
class Conformance:
    """The ThinC conformance checks of one trajectory."""

    checks: tuple[Check, ...]
    plan_share: float
    plan_share_unit: ShareUnit

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[CheckName]:
        """Names of the checks that failed, in check order."""
        return [c.name for c in self.checks if not c.passed]

    def get(self, name: CheckName) -> Check:
        """Return the check called `name`."""
        return next(c for c in self.checks if c.name == name)


def _text_between_code(traj: Trajectory) -> list[Segment]:
    """Non-blank text (prose, or plan text around code drafts) after the first code block and before
    the last code or output block."""
    blocks = [i for i, s in enumerate(traj.segments) if s.kind in ("code", "output")]
    codes = [i for i in blocks if traj.segments[i].kind == "code"]
    if not codes:
        return []
    inside = traj.segments[codes[0] + 1 : blocks[-1]]
    return [s for s in inside if (s.kind == "text" and s.raw.strip()) or (s.kind == "plan" and s.content)]


def classify(traj: Trajectory) -> Style:
    """Return `no_code` without code blocks, `interleaved` with prose between them, else `thinc`.

    Code drafted in the plan counts as code, and plan text between drafts as prose; the
    `no_code_in_plan` conformance check names such trajectories.
    """
    if not any(s.kind == "code" for s in traj.segments):
        return "no_code"
    return "interleaved" if _text_between_code(traj) else "thinc"


def _plan_share(traj: Trajectory, count_tokens: Callable[[str], int] | None) -> tuple[float, ShareUnit]:
    token_spans = [s.token_span for s in traj.segments if s.token_span is not None]
    unit: ShareUnit
    if traj.segments and len(token_spans) == len(traj.segments):
        unit, sizes = "tokens", [end - start for start, end in token_spans]
    elif count_tokens is not None:
        unit, sizes = "count_tokens", [count_tokens(s.raw) for s in traj.segments]
    else:
        unit, sizes = "chars", [len(s.raw) for s in traj.segments]
    plan = sum(
        n
        for s, n in zip(traj.segments, sizes, strict=True)
        if s.kind == "plan" or (s.in_plan and s.kind == "code")
    )
    model = sum(n for s, n in zip(traj.segments, sizes, strict=True) if s.kind != "output")
    return (plan / model if model else 0.0), unit


def check_conformance(
    traj: Trajectory,
    *,
    min_code_blocks: int = DEFAULT_MIN_CODE_BLOCKS,
    max_plan_share: float = DEFAULT_MAX_PLAN_SHARE,
    count_tokens: Callable[[str], int] | None = None,
    max_prose_chars: int = DEFAULT_MAX_PROSE_CHARS,
) -> Conformance:
    """Run the ThinC conformance checks.

    `plan_share` is plan / model-written size, where output blocks are not model-written and code
    drafted in the plan is plan. It is
    counted in tokens when every segment has a token span, else with `count_tokens`, else in
    characters; `Conformance.plan_share_unit` says which.

    Args:
        traj: the trajectory.
        min_code_blocks: closed code blocks required (the SFT filter uses 3).
        max_plan_share: the plan share must be strictly below this.
        count_tokens: a tokenizer length function, used when token spans are unknown.
        max_prose_chars: most prose characters before the first block and after the last, each
            (see `prose_outside_plan`).

    Returns:
        The checks in the order has_plan, no_text_between_code, n_code_blocks, plan_share,
        answer_after_last_output, code_followed_by_output, short_prose_outside_plan, no_code_in_plan.
    """
    plan = next((s for s in traj.segments if s.kind == "plan"), None)
    plan_text = traj.plan or ""
    has_plan = plan is not None and plan.closed and bool(plan_text)
    plan_detail = "no plan" if plan is None else f"{len(plan_text)} chars, closed={plan.closed}"
    prose = _text_between_code(traj)
    share, unit = _plan_share(traj, count_tokens)
    kinds = [s.kind for s in traj.segments]
    last_output = max((i for i, k in enumerate(kinds) if k == "output"), default=-1)
    code_after = "code" in kinds[last_output + 1 :]
    boxed = has_final_answer(traj)
    drafts = [s for s in traj.segments if s.kind == "code" and s.in_plan]
    checks = (
        Check("has_plan", has_plan, plan_detail),
        Check(
            "no_text_between_code",
            not prose,
            "none" if not prose else f"{len(prose)} prose segment(s), first: {prose[0].raw.strip()[:60]!r}",
        ),
        Check(
            "n_code_blocks",
            traj.n_code_blocks >= min_code_blocks,
            f"{traj.n_code_blocks} closed code block(s), minimum {min_code_blocks}",
        ),
        Check("plan_share", share < max_plan_share, f"{share:.3f} of model {unit}, maximum {max_plan_share}"),
        Check(
            "answer_after_last_output",
            boxed and not code_after,
            "code after the last output"
            if code_after
            else ("\\boxed found" if boxed else "no \\boxed in final text"),
        ),
        _check_code_followed_by_output(traj),
        _check_prose_outside_plan(traj, max_prose_chars),
        Check(
            "no_code_in_plan",
            not drafts,
            "none" if not drafts else f"{len(drafts)} code block(s) inside <think>...</think>",
        ),
    )
    return Conformance(checks, share, unit)


def unexecuted_code(traj: Trajectory) -> list[Segment]:
    """Closed code blocks not directly followed (blank text aside) by an output block of their own.

    Such a block never shows its own output: after the last output it never ran, and in `code, code,
    code, output` the harness runs the three together and answers them with one output block. In the
    tool_call dialect the calls of one turn are answered by the responses that follow, one each.
    """
    segments = [s for s in traj.segments if s.kind != "text" or s.raw.strip()]
    if traj.dialect == "tool_call":
        missing: list[Segment] = []
        calls: list[Segment] = []
        answered = False
        for s in segments:
            if s.kind == "code" and s.closed:
                if answered:  # a new turn's call: the last turn's unanswered calls never ran
                    missing, calls, answered = missing + calls, [], False
                calls.append(s)
            elif s.kind == "output":
                answered = True
                if calls:
                    calls.pop(0)
        return missing + calls
    return [
        s
        for s, after in zip(segments, [*segments[1:], None][: len(segments)], strict=True)
        if s.kind == "code" and s.closed and (after is None or after.kind != "output")
    ]


def _check_code_followed_by_output(traj: Trajectory) -> Check:
    missing = unexecuted_code(traj)
    if not missing:
        return Check("code_followed_by_output", True, "every code block has its output")
    first = missing[0].content.strip().splitlines()
    return Check(
        "code_followed_by_output",
        False,
        f"{len(missing)} code block(s) without output, first: {(first[0] if first else '')[:60]!r}",
    )


class OutsideProse(NamedTuple):
    """Prose outside the plan, `\\boxed{...}` removed and whitespace runs collapsed to one space."""

    lead: str
    """Before the first code or output block (after the plan)."""
    final: str
    """After the last code or output block; all non-plan text when there is no block."""


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_SPACE_RUN = re.compile(r"\s+")


def _without_boxes(text: str) -> str:
    """`text` with every `\\boxed{...}` (balanced braces; to the end if unclosed) removed."""
    out, pos = [], 0
    while (opener := _BOX_OPEN.search(text, pos)) is not None:
        out.append(text[pos : opener.start()])
        depth, i = 1, opener.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def prose_outside_plan(traj: Trajectory) -> OutsideProse:
    """The prose a ThinC trajectory writes outside its plan and blocks, measured without the box."""
    blocks = [i for i, s in enumerate(traj.segments) if s.kind in ("code", "output")]
    first, last = (blocks[0], blocks[-1]) if blocks else (0, -1)

    def prose(segments: Sequence[Segment]) -> str:
        text = "".join(s.raw for s in segments if s.kind in ("text", "answer"))
        return _SPACE_RUN.sub(" ", _without_boxes(text)).strip()

    return OutsideProse(prose(traj.segments[:first]), prose(traj.segments[last + 1 :]))


def _check_prose_outside_plan(traj: Trajectory, max_chars: int) -> Check:
    lead, final = prose_outside_plan(traj)
    return Check(
        "short_prose_outside_plan",
        len(lead) <= max_chars and len(final) <= max_chars,
        f"{len(lead)} chars before the first block, {len(final)} after the last (box excluded), "
        f"maximum {max_chars} each",
    )
