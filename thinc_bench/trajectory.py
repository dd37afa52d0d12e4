"""The trajectory IR: a model's text as plan | code | output | text | answer segments.

Contract: `parse(text, dialect).render() == text` for every string, malformed ones included; each
`Segment` keeps its exact raw slice (fences and tags included), its inner `content`, both character
spans and, once `with_token_spans` has run, its token span. A `Dialect` tells the rollout engine where
generation stops, what it appends after the stop string and which code block to execute. The ThinC
conformance checks and `classify` read only this IR.
Pure: no IO, no logging, no tokenizer, and no answer grading (that is `grading`; `\\boxed` is found
here by a local regex only to place the answer).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from thinc_bench.errors import ConfigError

SegmentKind = Literal["plan", "code", "output", "text", "answer"]
DialectName = Literal["markdown", "xml"]
Style = Literal["thinc", "interleaved", "no_code"]
CheckName = Literal[
    "has_plan",
    "no_text_between_code",
    "n_code_blocks",
    "plan_share",
    "answer_after_last_output",
    "code_followed_by_output",
    "short_prose_outside_plan",
]
ShareUnit = Literal["tokens", "count_tokens", "chars"]

DEFAULT_MIN_CODE_BLOCKS = 1  # a trajectory needs one executed block to be "thinking in code" at all
DEFAULT_MAX_PLAN_SHARE = 0.5  # the plan is meant to be short: under half of what the model writes
DEFAULT_MAX_PROSE_CHARS = 120
"""Most prose characters before the first block and after the last, each (box excluded, whitespace
runs as one): a short sentence around the box ("The count is \\boxed{90}." measures 14), never a
paragraph of reasoning outside code."""

_THINK_OPEN = re.compile(r"\A\s*<think>")
_THINK_CLOSE = re.compile(r"</think>(?:\r?\n)?")  # the closer owns its line break, like the fences
_BOXED = re.compile(r"\\boxed\s*\{")
# A markdown fence closes only on a line of its own, as in CommonMark; "```output" therefore never closes.
_FENCE_CLOSE = re.compile(r"(?m)^```[ \t]*(?:\r?\n|\Z)")
_FENCE_LINE = re.compile(r"(?m)^(```[ \t]*)(?=\r?$)")
_XML_FENCED_CODE = re.compile(r"\A\s*```(?:python3?|py)?[ \t]*\r?\n(.*?)(?:\r?\n)?```\s*\Z", re.S)


class Span(NamedTuple):
    """A half-open range [start, end) of characters or of tokens."""

    start: int
    end: int


@dataclass(frozen=True)
class Segment:
    """One contiguous slice of a trajectory.

    Attributes:
        kind: `plan` (the `<think>` block), `code`, `output` (interpreter output block), `answer` (the
            non-blank text after the last block, or all text when there is none) or `text` (anything
            else, whitespace-only gaps included).
        span: characters of `raw` in the rendered text.
        content_span: characters of `content` (fences, tags and their line breaks excluded).
        raw: the exact slice, fences and tags included.
        content: the inner text: code without fences, output without fences, plan without tags.
        closed: False for a block or plan whose closer never came (truncated generation).
        token_span: tokens whose first character lies in `span` (see `Trajectory.with_token_spans`).
    """

    kind: SegmentKind
    span: Span
    content_span: Span
    raw: str
    content: str
    closed: bool = True
    token_span: Span | None = None


def _segment(text: str, kind: SegmentKind, span: Span, content_span: Span, closed: bool = True) -> Segment:
    raw = text[span.start : span.end]
    content = text[content_span.start : content_span.end]
    return Segment(kind, span, content_span, raw, content, closed)


def _strip_fence_newline(text: str, start: int, fence: int) -> int:
    """End of a fenced block's content: the line break before the closing fence is the fence's."""
    end = fence
    if end > start and text[end - 1] == "\n":
        end -= 1
        if end > start and text[end - 1] == "\r":
            end -= 1
    return end


def _fenced_content(text: str, start: int, close: re.Match[str]) -> Span:
    return Span(start, _strip_fence_newline(text, start, close.start()))


def _xml_code_content(text: str, start: int, close: re.Match[str]) -> Span:
    end = close.start()
    fenced = _XML_FENCED_CODE.match(text[start:end])
    if fenced is not None:
        return Span(start + fenced.start(1), start + fenced.end(1))
    while start < end and text[start] in "\r\n":
        start += 1
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    return Span(start, end)


def _xml_output_content(text: str, start: int, close: re.Match[str]) -> Span:
    end = close.start()
    # format_output wraps the output in one line break on each side; those belong to the tags.
    for newline in ("\r\n", "\n"):
        if text.startswith(newline, start, end):
            start += len(newline)
            break
    for newline in ("\r\n", "\n"):
        if end - len(newline) >= start and text.startswith(newline, end - len(newline)):
            end -= len(newline)
            break
    return Span(start, end)


ContentRule = Callable[[str, int, re.Match[str]], Span]


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
        pattern, replacement = self.output_guard
        body = pattern.sub(replacement, output.rstrip("\r\n"))
        return "\n" + body + self.output_tail

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
                return segment.content if segment.closed and not answered else None
        return None


MARKDOWN = Dialect(
    name="markdown",
    stop="```output",
    code_open=re.compile(r"```(?:python3?|py)[ \t]*(?:\r?\n|\Z)"),
    code_close=_FENCE_CLOSE,
    output_open=re.compile(r"```output[ \t]*(?:\r?\n|\Z)"),
    output_close=_FENCE_CLOSE,
    code_content=_fenced_content,
    output_content=_fenced_content,
    output_tail="\n```\n",
    output_guard=(_FENCE_LINE, r" \1"),
    code_end="```\n",
)
XML = Dialect(
    name="xml",
    stop="<interpreter>",
    code_open=re.compile(r"<code>"),
    code_close=re.compile(r"</code>(?:\r?\n)?"),
    output_open=re.compile(r"<interpreter>"),
    output_close=re.compile(r"</interpreter>(?:\r?\n)?"),
    code_content=_xml_code_content,
    output_content=_xml_output_content,
    output_tail="\n</interpreter>\n",
    output_guard=(re.compile(r"</interpreter>"), "</ interpreter>"),
    code_end="</code>",
)
DIALECTS: dict[str, Dialect] = {d.name: d for d in (MARKDOWN, XML)}


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
        """Code of every closed code block, fences excluded, in order."""
        return [s.content for s in self.segments if s.kind == "code" and s.closed]

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
        """The plan's content (tags and surrounding blanks excluded), or None without a plan."""
        return next((s.content for s in self.segments if s.kind == "plan"), None)

    @property
    def final_text(self) -> str:
        """Text after the last code or output block; the whole text when there is none."""
        last = max((i for i, s in enumerate(self.segments) if s.kind in ("code", "output")), default=None)
        tail = self.segments if last is None else self.segments[last + 1 :]
        return "".join(s.raw for s in tail)

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


def _plan(text: str, dialect: Dialect) -> Segment | None:
    """The leading plan: `<think>...</think>`, or `...</think>` when the chat template sent `<think>`."""
    first_block = min(
        (m.start() for p in (dialect.code_open, dialect.output_open) if (m := p.search(text))),
        default=len(text),
    )
    opener = _THINK_OPEN.match(text)
    content_start = opener.end() if opener else 0
    closer = _THINK_CLOSE.search(text, content_start)
    if closer is not None and closer.start() <= first_block:
        inner, end, closed = Span(content_start, closer.start()), closer.end(), True
    elif opener is not None and closer is None and first_block == len(text):
        inner, end, closed = Span(content_start, len(text)), len(text), False
    else:
        return None
    raw_inner = text[inner.start : inner.end]
    lead = len(raw_inner) - len(raw_inner.lstrip())
    stripped = raw_inner.strip()
    content = Span(inner.start + lead, inner.start + lead + len(stripped))
    return _segment(text, "plan", Span(0, end), content, closed)


def _block(text: str, dialect: Dialect, opener: re.Match[str], kind: Literal["code", "output"]) -> Segment:
    close_re, content_rule = (
        (dialect.code_close, dialect.code_content)
        if kind == "code"
        else (dialect.output_close, dialect.output_content)
    )
    closer = close_re.search(text, opener.end())
    if closer is None:
        span = Span(opener.start(), len(text))
        return _segment(text, kind, span, Span(opener.end(), len(text)), closed=False)
    span = Span(opener.start(), closer.end())
    return _segment(text, kind, span, content_rule(text, opener.end(), closer))


def _next_opener(text: str, pos: int, d: Dialect) -> tuple[re.Match[str], Literal["code", "output"]] | None:
    code, output = d.code_open.search(text, pos), d.output_open.search(text, pos)
    if code is not None and (output is None or code.start() < output.start()):
        return code, "code"
    return None if output is None else (output, "output")


def _gap(text: str, start: int, end: int, last: bool) -> Segment:
    kind: SegmentKind = "answer" if last and text[start:end].strip() else "text"
    return _segment(text, kind, Span(start, end), Span(start, end))


def parse(text: str, dialect: str = "markdown") -> Trajectory:
    """Split `text` into segments; `parse(text, d).render() == text` for every string.

    Blocks open anywhere (as stop strings fire anywhere); a markdown fence closes only on its own line.
    An unclosed block runs to the end of the text. A plan is recognised only before the first block.

    Args:
        text: the model's generated text (after the chat prompt), harness outputs included.
        dialect: a key of `DIALECTS`.

    Returns:
        The trajectory.

    Raises:
        ConfigError: `dialect` is unknown.
    """
    d = get_dialect(dialect)
    segments: list[Segment] = []
    plan = _plan(text, d)
    pos = 0
    if plan is not None:
        segments.append(plan)
        pos = plan.span.end
    while (found := _next_opener(text, pos, d)) is not None:
        opener, kind = found
        if opener.start() > pos:
            segments.append(_gap(text, pos, opener.start(), last=False))
        block = _block(text, d, opener, kind)
        segments.append(block)
        pos = block.span.end
    if pos < len(text):
        segments.append(_gap(text, pos, len(text), last=True))
    return Trajectory(tuple(segments), d.name)


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
    """Non-blank text after the first code block and before the last code or output block."""
    blocks = [i for i, s in enumerate(traj.segments) if s.kind in ("code", "output")]
    codes = [i for i in blocks if traj.segments[i].kind == "code"]
    if not codes:
        return []
    inside = traj.segments[codes[0] + 1 : blocks[-1]]
    return [s for s in inside if s.kind == "text" and s.raw.strip()]


def classify(traj: Trajectory) -> Style:
    """Return `no_code` without code blocks, `interleaved` with prose between them, else `thinc`."""
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
    plan = sum(n for s, n in zip(traj.segments, sizes, strict=True) if s.kind == "plan")
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

    `plan_share` is plan / model-written size, where output blocks are not model-written. It is
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
        answer_after_last_output, code_followed_by_output, short_prose_outside_plan.
    """
    plan = next((s for s in traj.segments if s.kind == "plan"), None)
    has_plan = plan is not None and plan.closed and bool(plan.content)
    plan_detail = "no plan" if plan is None else f"{len(plan.content)} chars, closed={plan.closed}"
    prose = _text_between_code(traj)
    share, unit = _plan_share(traj, count_tokens)
    kinds = [s.kind for s in traj.segments]
    last_output = max((i for i, k in enumerate(kinds) if k == "output"), default=-1)
    code_after = "code" in kinds[last_output + 1 :]
    boxed = _BOXED.search(traj.final_text) is not None
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
    )
    return Conformance(checks, share, unit)


def unexecuted_code(traj: Trajectory) -> list[Segment]:
    """Closed code blocks not directly followed (blank text aside) by an output block.

    The harness runs only the last code block before an output block, so such a block was written
    but never run: `code, code, code, output` executes one block, not three.
    """
    segments = [s for s in traj.segments if s.kind != "text" or s.raw.strip()]
    return [
        s
        for s, after in zip(segments, [*segments[1:], None], strict=True)
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
