"""Segments, dialects and tool calls: a model's text split so that it renders back exactly.

`parse(text, dialect).render() == text` for every string, malformed ones included; each `Segment`
keeps its exact raw slice (fences and tags included), its inner `content`, both character spans and,
once `with_token_spans` has run, its token span. The lexical rules for fences, tags and strings live
in `_scan` (docs/parsing.md lists the variants real models write and how each parses).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

from thinc_bench.errors import ConfigError
from thinc_bench.trajectory import _scan

SegmentKind = Literal["plan", "code", "output", "text", "answer"]
DialectName = Literal["markdown", "xml", "tool_call"]

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


def loads_model_json(text: str) -> object:
    """`json.loads` for model-written JSON: a huge integer does not raise ValueError, and nesting past
    the recursion limit (`[[[[...`) is a JSONDecodeError like any other malformed JSON, so the one
    exception a caller handles is the one malformed JSON raises."""
    try:
        return json.loads(text, parse_int=lambda s: int(s) if len(s) <= MAX_JSON_INT_DIGITS else float(s))
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


_json = loads_model_json


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
