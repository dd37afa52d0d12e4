"""The scanner behind `trajectory.parse`: where plans, code blocks and output blocks open and end in
what real models write.

Owns the fence and tag variants a code block may open with (```` ```Python ````, ```` ``` python ````,
```` ```python # note ````, `~~~python`, indented fences; `<code>` that is not a mention), the
terminators that may end an open block (its closer, an output opener, a new opener on a line of its
own), the one rule that keeps a block whole (a terminator inside a Python string or comment of the
block is code), the left-to-right scan that turns a text into `Piece`s, and that scan resumed on a
text that only grows (a rollout's: `Resumable`, `GrowingScan`), which must give the same pieces and so
lives with the rules it depends on (`BARRIER_LINE` says why a checkpoint is safe), and what keeps
every scan linear in the text whatever the model writes (memoised searches, one lexing pass per
block, no pattern whose quantifiers can read the same characters two ways); hence past 600 lines.
It stays apart from `trajectory` (which turns pieces into `Segment`s) because it is a hardened lexer
with many small rules. Works on character positions only. Pure: no IO. docs/parsing.md lists the
cases behind each rule.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from thinc_bench.trajectory import Dialect

PieceKind = Literal["plan", "code", "output", "text", "answer"]
Range = tuple[int, int]

TerminatorKind = Literal["close", "output", "reopen"]

_LANG = r"(?:i?python3?|py3?)"
"""Language tags that mean Python (any case): python, python3, py, py3, ipython, ipython3."""

MD_OPEN_LINE = re.compile(
    rf"(?im)^(?P<indent>[ \t]*)(?P<fence>`{{3,}}|~{{3,}})[ \t]*{_LANG}(?![\w.+-])[^`\r\n]*(?:\r?\n|\Z)"
)
"""A fence opening a Python block on a line of its own: indentation, 3+ backticks or tildes, optional
spaces, the language, then an optional info string (```` ```python # note ````, `{.python}` is not)."""
MD_OPEN_INLINE = re.compile(rf"(?i)(?<!`)(?P<fence>`{{3,}})[ \t]*{_LANG}[ \t]*(?:\r?\n|\Z)")
"""A fence opening a Python block after text on the same line: only the bare tag, then the line ends
(so "write a ```python block" in prose opens nothing). It starts where a run of backticks starts: a
match inside the run would be the same fence, and trying every position of a 10k-backtick run made
the search quadratic."""
XML_OPEN = re.compile(r"<code>(?=[ \t]*(?:\r?\n|\Z)|[ \t]*(?:`{3}|~{3})|[^\s,.;:!?)\]'\"`])")
"""`<code>` opening a block: followed by a line break, a fence or code; "<code> and </code> tags" and
"`<code>`" are mentions."""
XML_OPEN_LINE = re.compile(r"(?m)^[ \t]*<code>")
_TRAILING_FENCE = re.compile(r"(?:(?<!`)`{3,}|(?<!~)~{3,})[ \t]*\Z")
"""A fence at the very end of a text; each alternative starts where its run starts (linear search)."""
XML_INNER_FENCE = re.compile(r"[ \t]*(?:(?:\r?\n)+[ \t]*)?(?P<fence>`{3,}|~{3,})[^`\r\n]*(?:\r?\n|\Z)")
"""A fence line at the start of an xml code block (ReTool writes `<code>\\n```python`); any tag. No two
adjacent quantifiers read the same characters, so a failed match costs one pass."""


class Terminator(NamedTuple):
    """Where an open code block ends: `close` (its closer), `output` (an output opener the block runs
    up to) or `reopen` (a new code opener on its own line: the block was abandoned, unclosed)."""

    kind: TerminatorKind
    start: int
    end: int


_OUTSIDE = re.compile(r"[^'\"#]*")
"""Code outside strings and comments: everything up to the next quote or `#`."""
_STRING_BODY = {
    q: re.compile(rf"(?:[^{q}\\\n]|\\.)*", re.S) if len(q) == 1 else re.compile(rf"(?:[^\\]|\\.)*?{q}", re.S)
    for q in ("'", '"', "'''", '"""')
}
"""A string's body after its opening quote: to the closing quote (or, single-quoted, the line end)."""


def in_string_or_comment(code: str) -> bool:
    """True when the end of `code` lies inside a Python string literal or comment.

    A lexical scan, not a parse: quotes, triple quotes, backslash escapes and `#` comments. A
    single-quoted string ends at its line (Python would raise there), so one stray quote never hides
    the rest of the block.
    """
    i, n = 0, len(code)
    while True:
        i = _OUTSIDE.match(code, i).end()  # type: ignore[union-attr]  # matches the empty string at worst
        if i >= n:
            return False
        if code[i] == "#":
            newline = code.find("\n", i)
            if newline < 0:
                return True
            i = newline + 1
            continue
        quote = code[i] * 3 if code.startswith(code[i] * 3, i) else code[i]
        body = _STRING_BODY[quote].match(code, i + len(quote))
        if body is None:  # a triple-quoted string still open
            return True
        i = body.end()
        if len(quote) == 1:
            if i >= n or code[i] == "\\":  # the code ends inside the string (or on its escape)
                return True
            i += 1  # the closing quote, or the line break that ends the string


class _Lexer:
    """`in_string_or_comment(text[body:p])` for any number of cut points `p`, in one pass over the
    text: the strings and comments of the code from `body` are found once, left to right, as far as
    the cuts asked reach (asking again for every candidate terminator made a block full of quoted
    fences quadratic). A cut lies inside a string or comment when it falls after the construct's
    first character and before its end (a construct never closed runs past the text's end)."""

    def __init__(self, text: str, body: int) -> None:
        self.text = text
        self.spans: list[Range] = []
        self.pos = body  # lexed up to here: outside every string and comment

    def inside(self, p: int) -> bool:
        """True when the code from `body` cut at `p` ends inside a string or comment."""
        text, n = self.text, len(self.text)
        while self.pos < p:
            j = _OUTSIDE.match(text, self.pos, p).end()  # type: ignore[union-attr]  # matches the empty string at worst
            if j >= p:
                self.pos = p
                break
            end = self._construct_end(j)
            self.spans.append((j, end))
            self.pos = min(end, n)
        i = bisect_right(self.spans, (p, -1)) - 1  # the last construct starting before p
        return i >= 0 and p < self.spans[i][1]

    def _construct_end(self, j: int) -> int:
        """Where the comment or string starting at `j` ends (past the text's end: never closed)."""
        text, n = self.text, len(self.text)
        if text[j] == "#":
            newline = text.find("\n", j)
            return n + 1 if newline < 0 else newline + 1
        quote = text[j] * 3 if text.startswith(text[j] * 3, j) else text[j]
        body = _STRING_BODY[quote].match(text, j + len(quote))
        if body is None:  # a triple-quoted string never closed
            return n + 1
        if len(quote) == 3:
            return body.end()
        e = body.end()  # the closing quote or the line break that ends it, else the text ends inside it
        return n + 1 if e >= n or text[e] == "\\" else e + 1


Search = Callable[["re.Pattern[str] | LeadingBlank", int], "re.Match[str] | None"]
"""`pattern.search(text, pos)` over one text, possibly memoised (`Scanner._search`)."""


def code_terminator(
    text: str,
    body: int,
    closer: re.Pattern[str] | LeadingBlank,
    output: re.Pattern[str] | LeadingBlank,
    reopen: re.Pattern[str] | LeadingBlank,
    search: Search | None = None,
) -> Terminator | None:
    """The first terminator of the code block whose content starts at `body`, or None (still open).

    The earliest candidate of the three kinds that does not lie inside a string or comment of the
    block wins, `close` before `output` before `reopen` at the same position. Candidates are taken in
    order of position and the block's code is lexed only up to the winner, so the cost is the
    block's length, not the text's.

    Args:
        text: the whole text.
        body: where the block's content starts (after the opener and its line break).
        closer: the block's closer (its fence at least as long, or `</code>`).
        output: the dialect's output opener; it ends an open block anywhere outside a string.
        reopen: a code opener on a line of its own.
        search: how to search `text` (a scanner passes its memoised search); plain `search` by default.
    """
    find: Search = search if search is not None else (lambda pattern, pos: pattern.search(text, pos))
    lexer = _Lexer(text, body)
    kinds: tuple[TerminatorKind, ...] = ("close", "output", "reopen")
    patterns = (closer, output, reopen)
    nexts = [find(pattern, body) for pattern in patterns]
    while True:
        live = [(m.start(), rank) for rank, m in enumerate(nexts) if m is not None]
        if not live:
            return None
        start, rank = min(live)
        if not lexer.inside(start):
            m = nexts[rank]
            assert m is not None
            return Terminator(kinds[rank], m.start(), m.end())
        # Every candidate at this position lies in the same string or comment.
        nexts = [
            m if m is None or m.start() != start else find(patterns[r], start + 1)
            for r, m in enumerate(nexts)
        ]


class LeadingBlank:
    """`pattern.search` for a pattern that starts with `\\s*` (`TOOL_TURN_OPEN`), in linear time.

    Searching such a pattern tries every position of a whitespace run and reads the run to its end
    from each: quadratic on a long run. The leftmost match starts where the run before the first
    match of the rest (`core`) starts (or at `pos`), so that is found instead, then matched once.
    """

    def __init__(self, pattern: re.Pattern[str], core: re.Pattern[str]) -> None:
        self.pattern, self.core = pattern, core

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """The leftmost match of `pattern` in `text` at or after `pos`, or None."""
        while (m := self.core.search(text, pos)) is not None:
            start = m.start()
            while start > pos and text[start - 1].isspace():
                start -= 1
            full = self.pattern.match(text, start)
            if full is not None:
                return full
            pos = m.start() + 1
        return None


@lru_cache(maxsize=64)
def md_closer(fence: str) -> re.Pattern[str]:
    """The closing fence of a block opened with `fence`: the same character, at least as many, alone
    on its line (indentation allowed, as in lists)."""
    return re.compile(rf"(?m)^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*(?:\r?\n|\Z)")


def content_end_before_output(text: str, body: int, end: int) -> int:
    """End of the code a block runs when an output opener cut it: trailing blanks and a closing fence
    the model glued to the opener (```` print(1)``````output ````) are dropped."""
    code = text[body:end].rstrip()
    code = _TRAILING_FENCE.sub("", code).rstrip()
    return body + len(code)


def dedent(code: str, indent: str) -> str:
    """Strip up to the opening fence's indentation from every line (CommonMark's rule for fences
    indented inside a list item)."""
    if not indent:
        return code
    width = len(indent)
    lines = code.split("\n")
    out = []
    for line in lines:
        lead = len(line) - len(line.lstrip(" \t"))
        out.append(line[min(lead, width) :])
    return "\n".join(out)


def strip_fence_newline(text: str, start: int, fence: int) -> int:
    """End of a fenced block's content: the line break before the closing fence is the fence's."""
    end = fence
    if end > start and text[end - 1] == "\n":
        end -= 1
        if end > start and text[end - 1] == "\r":
            end -= 1
    return end


def fenced_content(text: str, start: int, close: re.Match[str]) -> Range:
    return (start, strip_fence_newline(text, start, close.start()))


def xml_code_span(text: str, start: int, end: int) -> Range:
    """The code between `<code>` and where the block ends: an inner fence of any variant (ReTool writes
    ```` <code>\\n```python ````) and the blank lines around the code belong to the tags."""
    fence = XML_INNER_FENCE.match(text, start, end)
    if fence is not None:
        start = fence.end()
        end = content_end_before_output(text, start, end)
    while start < end and text[start] in "\r\n":
        start += 1
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    return (start, end)


def xml_code_content(text: str, start: int, close: re.Match[str]) -> Range:
    return xml_code_span(text, start, close.start())


def xml_output_content(text: str, start: int, close: re.Match[str]) -> Range:
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
    return (start, end)


TOOL_CALL_OPEN = re.compile(r"<tool_call>(?=\s*(?:\{|\Z))")
"""`<tool_call>` opening a call: followed (after blanks) by its JSON object; a mention in prose is not."""
TOOL_CALL_OPEN_LINE = re.compile(r"(?m)^[ \t]*<tool_call>")
TOOL_CALL_CLOSE = re.compile(r"</tool_call>")
SPECIAL_TOKEN = r"<\|[^<>|\s]{1,40}\|>"
"""Chat markup as a tokenizer decodes a special token (`<|im_end|>`, `<|start_header_id|>`)."""
_TOOL_TURN_CORE = rf"(?:{SPECIAL_TOKEN}[a-z_]{{0,20}}\s*)+<tool_response>"
TOOL_TURN_OPEN = re.compile(rf"\s*{_TOOL_TURN_CORE}")
"""Where the harness's tool turn starts after a call: the model's end of turn, the template's markup
(one special token at least: a model cannot write one without ending its turn), then a response."""
TOOL_TURN_SEARCH = LeadingBlank(TOOL_TURN_OPEN, re.compile(_TOOL_TURN_CORE))
"""`TOOL_TURN_OPEN.search` in linear time (a call's terminator search reads whole whitespace runs)."""
TOOL_RESPONSE_OPEN = re.compile(r"\s*<tool_response>")
_TURN_MARKUP = re.compile(rf"(?:{SPECIAL_TOKEN}[a-z_]{{0,20}}\s*)+")
_GENERATION_PROMPT = re.compile(r"assistant\s*\Z")
"""Markup that ends in an assistant header opens the model's turn: a `<tool_response>` after it is the
model's text, never a tool turn."""
TURN_MARKUP_WINDOW = 200
"""Most characters of chat markup between a turn's end and its first `<tool_response>` (Qwen3 writes
`<|im_end|>\n<|im_start|>user\n`: 27); a longer run of special tokens there is not a tool turn."""


_TOOL_RESPONSE_TAG = re.compile(re.escape("<tool_response>"))


def next_tool_turn(text: str, pos: int, search: Search | None = None) -> int | None:
    """Start of the first tool turn at or after `pos`: a `<tool_response>` right after chat markup (one
    special token at least, which a model cannot write without ending its turn), the blanks before the
    markup included; `TOOL_TURN_OPEN` matches there. Found wherever the turn lies (after the call,
    after prose or a `</think>` the model wrote after it), never only next to a call, so text after a
    turn's last call cannot hide the turn and leave the call pending. Linear: each `<tool_response>`
    is checked once, against a bounded window before it; `search` (a scanner's remembered search)
    keeps repeated calls over one text from finding the same far tag again and again."""
    find = search or (lambda pattern, start: pattern.search(text, start))
    hit = find(_TOOL_RESPONSE_TAG, pos)
    at = -1 if hit is None else hit.start()
    while at >= 0:
        low = max(pos, at - TURN_MARKUP_WINDOW)
        start = None
        candidate = text.rfind("<|", low, at)
        while candidate >= low and _TURN_MARKUP.fullmatch(text, candidate, at) is not None:
            start = candidate
            candidate = text.rfind("<|", low, candidate)
        if start is not None and _GENERATION_PROMPT.search(text, start, at) is None:
            while start > pos and text[start - 1].isspace():
                start -= 1
            return start
        hit = find(_TOOL_RESPONSE_TAG, at + 1)
        at = -1 if hit is None else hit.start()
    return None


TOOL_RESPONSE_CLOSE = re.compile(r"</tool_response>")
TOOL_TURN_TAIL = re.compile(
    rf"(?:{SPECIAL_TOKEN}[a-z_]{{0,20}}|\r?\n)*(?:(?<=\n)<think>\s*</think>(?:\r?\n)*)?"
)
"""What the template writes after the last response of a tool turn: the markup up to the next
assistant turn, and an empty plan that a generation prompt opens and closes (`enable_thinking=False`)."""


def tool_response_content(text: str, start: int, close: re.Match[str]) -> Range:
    return xml_output_content(text, start, close)


THINK_OPEN = re.compile(r"\A\s*<think>")
THINK_CLOSE = re.compile(r"</think>(?:\r?\n)?")  # the closer owns its line break, like the fences
XML_CODE_CLOSE = re.compile(r"</code>(?:\r?\n)?")
ContentRule = Callable[[str, int, re.Match[str]], Range]
"""Where a block's inner text lies, given the text, where the content starts and the closer."""


class Piece(NamedTuple):
    """One segment as the scanner finds it (`trajectory.Segment` without the text)."""

    kind: PieceKind
    span: Range
    content: Range
    closed: bool
    in_plan: bool


class Checkpoint(NamedTuple):
    """The scanner between two pieces: where it stands, in the plan or not, whether the plan closed,
    and how many pieces lie before."""

    pos: int
    in_plan: bool
    plan_closed: bool
    n_pieces: int


_NONBLANK = re.compile(r"\S")


@lru_cache(maxsize=8)
def _line_opener(output_open: re.Pattern[str]) -> re.Pattern[str]:
    """The blanks that start a line on which `output_open` follows (the match ends at the opener)."""
    return re.compile(rf"(?m)^[ \t]*(?={output_open.pattern})")


def finish(pieces: list[Piece], plan_closed: bool) -> list[Piece]:
    """The pieces as `parse` gives them: a plan that never closed is unclosed in every stretch."""
    return pieces if plan_closed else [p._replace(closed=False) if p.kind == "plan" else p for p in pieces]


class Scanner:
    """One left-to-right pass over a text, in or out of the plan; `trajectory.parse` has the rules.

    Args:
        text: the text.
        dialect: the trajectory dialect.
        in_plan: start inside the plan (`<think>` at the start, or sent by the chat template).
        tag_end: end of a leading `<think>` tag (0 without one).
        close_from: the plan's `</think>` lies at or after this position (the one a scan outside the
            plan found outside every block, so harness output never closes a plan).
    """

    def __init__(
        self, text: str, dialect: Dialect, *, in_plan: bool, tag_end: int = 0, close_from: int = 0
    ) -> None:
        self.text, self.d = text, dialect
        self.in_plan = in_plan
        self.tag_end = tag_end
        self.close_from = close_from
        self.plan_closed = False
        self.pieces: list[Piece] = []
        self._memo: dict[object, tuple[int, re.Match[str] | None]] = {}
        self._memo_text = text
        self._line_start: dict[int, bool] = {}

    def _search(self, pattern: re.Pattern[str] | LeadingBlank, pos: int) -> re.Match[str] | None:
        """`pattern.search(self.text, pos)`, remembered: a search from an earlier position whose match
        starts at or after `pos` (or that found none) is the answer, so a pattern that does not occur
        again is searched to the end once per text, not once per piece (that was quadratic)."""
        hit = self._memo.get(pattern)
        if hit is not None:
            start, m = hit
            if start <= pos and (m is None or m.start() >= pos):
                return m
        m = pattern.search(self.text, pos)
        self._memo[pattern] = (pos, m)
        return m

    def run(self) -> list[Piece]:
        """Scan the whole text; the pieces partition it in order."""
        self.resume(Checkpoint(0, self.in_plan, False, 0))
        return finish(self.pieces, self.plan_closed)

    def resume(self, at: Checkpoint, safe_before: int = -1) -> Checkpoint:
        """Scan from `at` to the end, `self.pieces` holding exactly the pieces before `at`; the pieces
        stay raw (see `finish`). Returns the last checkpoint passed at or before `safe_before` (`at`
        when none is later): where a later scan of a longer text may start (`Resumable`)."""
        text, pos = self.text, at.pos
        if self._memo_text is not text:  # `Resumable` gives the scanner a longer text
            self._memo, self._line_start, self._memo_text = {}, {}, text
        self.in_plan, self.plan_closed = at.in_plan, at.plan_closed
        safe = at
        while True:
            if safe.pos < pos <= safe_before:
                safe = Checkpoint(pos, self.in_plan, self.plan_closed, len(self.pieces))
            if (event := self._next_event(pos)) is None:
                break
            kind, opener = event
            if kind == "think":
                self._plan_piece(pos, opener.end(), close_start=opener.start())
                self.in_plan, self.plan_closed = False, True
                pos = opener.end()
                continue
            if opener.start() > pos:
                self._gap(pos, opener.start(), last=False)
            block = self._code(opener) if kind == "code" else self._output(opener)
            self.pieces.append(block)
            pos = block.span[1]
        if pos < len(text):
            self._gap(pos, len(text), last=True)
        return safe

    def _next_event(self, pos: int) -> tuple[Literal["think", "code", "output"], re.Match[str]] | None:
        found: list[tuple[int, int, Literal["think", "code", "output"], re.Match[str]]] = []
        if self.in_plan and (closer := self._search(THINK_CLOSE, max(pos, self.close_from))) is not None:
            found.append((closer.start(), 0, "think", closer))
        if (code := self._code_open(pos)) is not None:
            found.append((code.start(), 1, "code", code))
        if (output := self._output_open(pos)) is not None:
            found.append((output.start(), 2, "output", output))
        if not found:
            return None
        _, _, kind, match = min(found, key=lambda f: (f[0], f[1]))
        return kind, match

    def _code_open(self, pos: int) -> re.Match[str] | None:
        if self.d.name == "xml":
            return self._search(XML_OPEN, pos)
        if self.d.name == "tool_call":
            return self._search(TOOL_CALL_OPEN, pos)
        line = self._search(MD_OPEN_LINE, pos)
        inline = self._search(MD_OPEN_INLINE, pos)
        if line is None or (inline is not None and inline.start() < line.start()):
            return inline
        return line

    def _output_open(self, pos: int) -> re.Match[str] | None:
        """The next output opener that opens a block: right after a closed code block (blanks
        between), or, outside the plan, at the start of a line. A mention in prose or in the plan
        opens nothing."""
        text = self.text
        previous = self.pieces[-1] if self.pieces else None
        after_code = previous is not None and previous.kind == "code" and previous.closed
        if self.d.name == "tool_call":
            after_output = previous is not None and previous.kind == "output" and previous.closed
            same_turn = after_output and text.endswith("</tool_response>", 0, pos)  # no tail taken yet
            if same_turn and (response := TOOL_RESPONSE_OPEN.match(text, pos)) is not None:
                return response  # the next response of the same tool turn
            start = next_tool_turn(text, pos, self._search)
            return None if start is None else TOOL_TURN_OPEN.match(text, start)
        first = self._search(self.d.output_open, pos)
        if first is None:
            return None
        if after_code:
            blank = self._search(_NONBLANK, pos)
            if blank is None or blank.start() >= first.start():
                return first
        if self.in_plan:
            return None
        if self._at_line_start(first.start()):
            return first
        # Any later opener at the start of a line lies on a line that starts after `first`.
        line = self._search(_line_opener(self.d.output_open), pos)
        return None if line is None else self.d.output_open.match(text, line.end())

    def _at_line_start(self, at: int) -> bool:
        """Only spaces and tabs stand between the start of the line and `at`."""
        known = self._line_start.get(at)
        if known is None:
            i = at
            while i > 0 and self.text[i - 1] in " \t":
                i -= 1
            known = self._line_start[at] = i == 0 or self.text[i - 1] == "\n"
        return known

    def _code(self, opener: re.Match[str]) -> Piece:
        text, body = self.text, opener.end()
        if self.d.name == "tool_call":
            return self._call(opener)
        if self.d.name == "xml":
            closer, reopen = XML_CODE_CLOSE, XML_OPEN_LINE
        else:
            closer, reopen = md_closer(opener.group("fence")), MD_OPEN_LINE
        end = code_terminator(text, body, closer, self.d.output_open, reopen, self._search)
        if end is None:
            return self._block("code", (opener.start(), len(text)), (body, len(text)), closed=False)
        if end.kind == "close":
            stop, span_end, closed = strip_fence_newline(text, body, end.start), end.end, True
        elif end.kind == "output":
            stop, span_end, closed = content_end_before_output(text, body, end.start), end.start, True
        else:
            stop, span_end, closed = strip_fence_newline(text, body, end.start), end.start, False
        content = xml_code_span(text, body, stop) if self.d.name == "xml" else (body, stop)
        return self._block("code", (opener.start(), span_end), content, closed=closed)

    def _call(self, opener: re.Match[str]) -> Piece:
        """A tool call: its JSON between `<tool_call>` and `</tool_call>` (a closer inside a JSON string
        is part of the string); a new call opened on its own line abandons an unclosed one. A call the
        turn ended in without its closer is closed by the tool turn after it (the rollout ran it, as
        vLLM's parser reads one)."""
        text, body = self.text, opener.end()
        end = code_terminator(
            text, body, TOOL_CALL_CLOSE, TOOL_TURN_SEARCH, TOOL_CALL_OPEN_LINE, self._search
        )
        stop = len(text) if end is None else end.start
        inner = text[body:stop]
        start = body + len(inner) - len(inner.lstrip())
        content = (start, start + len(inner.strip()))
        closed = end is not None and end.kind in ("close", "output")  # a tool turn after it: it ran
        span_end = len(text) if end is None else end.end if end.kind == "close" else end.start
        return self._block("code", (opener.start(), span_end), content, closed=closed)

    def _output(self, opener: re.Match[str]) -> Piece:
        closer = self._search(self.d.output_close, opener.end())
        if closer is None:
            span = (opener.start(), len(self.text))
            return self._block("output", span, (opener.end(), len(self.text)), closed=False)
        content = self.d.output_content(self.text, opener.end(), closer)
        end = closer.end()
        if self.d.name == "tool_call" and TOOL_RESPONSE_OPEN.match(self.text, end) is None:
            end = TOOL_TURN_TAIL.match(self.text, end).end()  # type: ignore[union-attr]  # may match empty
        return self._block("output", (opener.start(), end), content, closed=True)

    def _block(self, kind: PieceKind, span: Range, content: Range, *, closed: bool) -> Piece:
        return Piece(kind, span, (content[0], content[1]), closed, self.in_plan)

    def _gap(self, start: int, end: int, *, last: bool) -> None:
        if self.in_plan:
            self._plan_piece(start, end, close_start=None)
            return
        kind: PieceKind = "answer" if last and self.text[start:end].strip() else "text"
        self.pieces.append(Piece(kind, (start, end), (start, end), True, False))

    def _plan_piece(self, start: int, end: int, *, close_start: int | None) -> None:
        """A stretch of the plan; its content excludes the tags and the blanks around the text."""
        inner_start = max(start, self.tag_end)
        inner_end = end if close_start is None else close_start
        inner = self.text[inner_start:inner_end]
        lead = len(inner) - len(inner.lstrip())
        content = (inner_start + lead, inner_start + lead + len(inner.strip()))
        self.pieces.append(Piece("plan", (start, end), content, True, True))


def scan(text: str, dialect: Dialect) -> list[Piece]:
    """The pieces of `trajectory.parse`: a plan from a leading `<think>`, else a scan outside the plan,
    done again inside it when that scan finds a `</think>` outside every block (`plan_close`)."""
    opener = THINK_OPEN.match(text)
    if opener is not None:
        return Scanner(text, dialect, in_plan=True, tag_end=opener.end()).run()
    pieces = Scanner(text, dialect, in_plan=False).run()
    closer, _ = plan_close(text, pieces, dialect)
    if closer is not None:
        pieces = Scanner(text, dialect, in_plan=True, close_from=closer).run()
    return pieces


def plan_close(text: str, pieces: list[Piece], dialect: Dialect, first: int = 0) -> tuple[int | None, int]:
    """Where a plan the chat template opened ends: the first `</think>` in prose of a scan outside the
    plan (tool_call: only in the first turn, before the first output). Looks from piece `first` on;
    also returns the index of the piece that decided (len(pieces) when none did)."""
    for i in range(first, len(pieces)):
        p = pieces[i]
        if p.kind == "output" and dialect.name == "tool_call":
            return None, i
        if p.kind in ("text", "answer") and (m := THINK_CLOSE.search(text, *p.span)) is not None:
            return m.start(), i
    return None, len(pieces)


BARRIER_LINE = re.compile(r"[ \t]*[^\s<`~]")
"""A line that starts (after spaces or tabs) with a character that begins no opener, closer or tag and
that no pattern reaching across lines (blank runs, chat markup, `<tool_response>`) reads past. Every
match and miss that ended a piece before such a line was decided by the text up to its first
character, so text appended later cannot change those pieces: a scan of the longer text may start
at the last piece boundary before the line (`Resumable`)."""


def last_barrier(text: str, start: int) -> int:
    """Start of the last barrier line (`BARRIER_LINE`) at or after `start`, or -1."""
    end = len(text)
    while end > start:
        newline = text.rfind("\n", start, end)
        line = newline + 1 if newline >= 0 else start
        if newline < 0 and start and text[start - 1] != "\n":
            return -1  # the line began before `start`
        if BARRIER_LINE.match(text, line) is not None:
            return line
        end = newline
    return -1


class Resumable:
    """A `Scanner` over a text that only grows (a rollout's): each `scan` starts again at the last
    checkpoint whose pieces no appended text can change (before the last `BARRIER_LINE`), so a turn
    costs what it added plus that overlap, not the whole text. Same pieces as a full scan (tests feed
    every prefix); a text that does not extend the last one is scanned from the start."""

    def __init__(self, dialect: Dialect, *, in_plan: bool, tag_end: int = 0, close_from: int = 0) -> None:
        self.scanner = Scanner("", dialect, in_plan=in_plan, tag_end=tag_end, close_from=close_from)
        self.start = self.safe = Checkpoint(0, in_plan, False, 0)

    @property
    def pieces(self) -> list[Piece]:
        """The raw pieces of the last scan (before `finish`)."""
        return self.scanner.pieces

    def backlog(self, length: int) -> int:
        """About how many characters the next `scan` of a text of `length` characters reads."""
        return length - self.safe.pos if length >= len(self.scanner.text) else length

    def scan(self, text: str) -> list[Piece]:
        """The raw pieces of `text`; `finish(pieces, self.scanner.plan_closed)` gives parse's."""
        s = self.scanner
        if not text.startswith(s.text):
            self.safe = self.start
        s.text = text
        del s.pieces[self.safe.n_pieces :]
        self.safe = s.resume(self.safe, last_barrier(text, self.safe.pos))
        return s.pieces


class GrowingScan:
    """`scan(text, dialect)` for a text that only grows, resumed turn by turn (see `Resumable`); the
    plan rules of `scan` are followed as the text reveals them (a leading `<think>`, a later
    `</think>` in prose), a rule that changes its mind restarting the scan it governs."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect
        self._reset()

    def _reset(self) -> None:
        self.text = ""
        self._outside: Resumable | None = None
        self._plan: Resumable | None = None
        self._key: tuple[int, int] | None = None  # (tag_end, close_from) of the plan scan
        self._checked = 0  # pieces of the outside scan known to hold no closer (tool_call: nor output)
        self._decided: int | None = None  # the plan's close, once no appended text can move it

    def _current(self, text: str) -> tuple[Resumable, bool]:
        """The scan whose pieces `scan(text)` are, and whether it has scanned `text` already."""
        if not text.startswith(self.text):
            self._reset()  # not an extension: start afresh
        self.text = text
        opener = THINK_OPEN.match(text)
        if opener is not None:
            return self._plan_scan(opener.end(), 0), False
        if self._decided is not None:
            return self._plan_scan(0, self._decided), False
        outside = self._outside = self._outside or Resumable(self.d, in_plan=False)
        pieces = outside.scan(text)
        final = outside.safe.n_pieces  # pieces before the checkpoint never change
        closer, at = plan_close(text, pieces, self.d, self._checked)
        if at < final:
            self._checked = at
            if closer is not None:
                self._decided, self._outside = closer, None
        else:
            self._checked = final
        if closer is None:
            return outside, True
        return self._plan_scan(0, closer), False

    def _plan_scan(self, tag_end: int, close_from: int) -> Resumable:
        if self._plan is None or self._key != (tag_end, close_from):
            self._plan = Resumable(self.d, in_plan=True, tag_end=tag_end, close_from=close_from)
            self._key = (tag_end, close_from)
        return self._plan

    def backlog(self, length: int) -> int:
        """About how many characters the next `scan` of a text of `length` characters reads."""
        current = self._plan if self._plan is not None else self._outside
        return length if current is None else current.backlog(length)

    def scan(self, text: str) -> tuple[list[Piece], bool]:
        """The raw pieces of `text` and whether the plan closed: `finish` of them is `scan(text)`."""
        current, scanned = self._current(text)
        pieces = current.pieces if scanned else current.scan(text)
        return pieces, current.scanner.plan_closed
