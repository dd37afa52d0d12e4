"""Pure text side of grading: answer extraction, surface normalisation, integer and grounding scans.

Owns everything grading decides *without* math-verify: the last `\\boxed{}` of a response, the
source-form normalisation shared by golds and answers ("025", "33,124,147", `10,\\!080`), the exact
integer fast path, integer grounding by token match, and the bounded list of printed candidate values
that grounding hands to the workers. Every function is linear in its input and touches no state.
It does not parse mathematics: anything beyond plain integers goes to `_worker`.
"""

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

MAX_ANSWER_CHARS = 2_000
"""Longer boxed answers are unparseable without a parse: the longest benchmark gold has ~70 chars and
math-verify's LaTeX parser is superlinear, so a 300k-char box would only burn a worker's timeout."""

MAX_GROUNDING_CANDIDATES = 48
"""Printed values sent to math-verify per trajectory: ~5-20 ms each keeps grounding under a second,
and the final value is almost always among the last lines printed (scanned first)."""

MAX_CANDIDATE_CHARS = 200
"""A printed value longer than this is a dump, not a result; it would only cost parse time."""

MAX_LINE_CHARS = 4_000
"""Lines longer than this (huge array prints) are skipped for candidates; integers still token-match."""

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# `\boxed 42`: LaTeX would box only "4", but models mean the whole number.
_BARE_BOX_NUMBER = re.compile(r"\s+([+-]?\d+(?:\.\d+)?)(?![\w.])")
_WS = re.compile(r"\s*")
_GROUP_SEP_THIN = re.compile(r"(?<=\d),\\!\s*(?=\d{3}(?!\d))")
_GROUPED_INT = re.compile(r"([+-]?)(\d{1,3}(?:,\d{3})+)")
_PLAIN_INT = re.compile(r"([+-]?)(\d+)")
# A standalone number: not part of a word, a product, a power or a fraction (1 inside 10, 2 in 2**10).
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.*/^])([+-]?)(\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?:\.(\d+))?(?![\w*/^]|\.\d)"
)
_MATHY = re.compile(r"[0-9A-Za-z_\s.+\-*/^(),\[\]{}\\]+")
_HAS_VALUE = re.compile(r"\d|\bpi\b|\bsqrt\b|\bE\b|\bI\b|\\pi|\\sqrt|\\frac")
_MATH_WORDS = frozenset({"sqrt", "pi", "E", "I", "oo", "exp", "log", "sin", "cos", "tan"})
_BRACKETS = {"(": ")", "[": "]", "{": "}"}


class IntegerForm(NamedTuple):
    """A plain integer in canonical form: sign ("" or "-") and digits without leading zeros."""

    sign: str
    digits: str


def extract_answer(text: str) -> str | None:
    """Return the content of the last `\\boxed{...}` / `\\fbox{...}` in `text`, or None.

    The last box opener decides: `\\boxed{\\boxed{x}}` gives `x`, and an empty or unclosed last box
    (a response cut off mid-answer) is no answer rather than a fallback to an earlier box. Braces
    nest; `\\{` and `\\}` are literal. `\\boxed 42` (no braces) gives `42`. Linear time.

    Args:
        text: the whole response.

    Returns:
        The stripped box content, or None when there is no usable box.
    """
    last = None
    for last in _BOX_OPEN.finditer(text):  # noqa: B007 - only the last match matters
        pass
    if last is None:
        return None
    start = _WS.match(text, last.end())
    pos = start.end() if start is not None else last.end()
    if pos >= len(text) or text[pos] != "{":
        bare = _BARE_BOX_NUMBER.match(text, last.end())
        return bare.group(1) if bare is not None else None
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                content = text[pos + 1 : i].strip()
                return content or None
        i += 1
    return None


def normalize_answer(answer: str) -> str:
    """Normalise the surface form shared by golds and answers, keeping the mathematics intact.

    Strips whitespace and enclosing `$`, turns `,\\!` thousands separators and a whole-string
    `33,124,147` (digit groups of three only) into plain digits, and drops `\\!` thin spaces.
    Comma lists that are not groups of three (`1,-2`, `3, 5, 7`, two-answer sets) stay lists.
    """
    s = answer.strip()
    while len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    s = _GROUP_SEP_THIN.sub("", s).replace("\\!", "")
    grouped = _GROUPED_INT.fullmatch(s)
    if grouped is not None:
        s = grouped.group(1) + grouped.group(2).replace(",", "")
    return s


def as_integer(normalized: str) -> IntegerForm | None:
    """Return the canonical integer for a plain integer string ("025", "-984"), else None."""
    m = _PLAIN_INT.fullmatch(normalized)
    if m is None:
        return None
    digits = m.group(2).lstrip("0") or "0"
    sign = "-" if m.group(1) == "-" and digits != "0" else ""
    return IntegerForm(sign, digits)


def _integer_tokens(output: str) -> Iterator[IntegerForm]:
    """Yield every standalone integer-valued number printed in `output` (25, -3, 25.0, 1,234)."""
    for m in _NUMBER_TOKEN.finditer(output):
        sign, whole, frac = m.group(1), m.group(2), m.group(3)
        if frac is not None and frac.strip("0"):
            continue
        if "," in whole:
            # `1,234` is a formatted 1234; the pieces may also be a list printed without spaces.
            yield from (IntegerForm("", p.lstrip("0") or "0") for p in whole.split(","))
            whole = whole.replace(",", "")
        digits = whole.lstrip("0") or "0"
        yield IntegerForm("-" if sign == "-" and digits != "0" else "", digits)


def integer_grounded(answer: IntegerForm, outputs: Sequence[str]) -> bool:
    """Whether the integer `answer` is printed as a standalone number in some output (exact)."""
    return any(tok == answer for out in outputs for tok in _integer_tokens(out))


def _split_top_level(inner: str) -> list[str]:
    """Split on commas at bracket depth zero (`1, (2, 3)` -> `1`, `(2, 3)`)."""
    parts: list[str] = []
    depth = 0
    last = 0
    for i, ch in enumerate(inner):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[last:i])
            last = i + 1
    parts.append(inner[last:])
    return [p.strip() for p in parts]


def _line_candidates(line: str) -> Iterator[str]:
    """Yield the values a printed line may show: right of `=`/`:`, the line, elements, words."""
    line = line.strip()
    if not line or len(line) > MAX_LINE_CHARS:
        return
    heads = [line]
    words = line.split()
    lead = 0
    while lead < len(words) and words[lead].isalpha() and words[lead] not in _MATH_WORDS:
        lead += 1
    if 0 < lead < len(words):  # "The answer is 14 + 4*sqrt(37)" -> "14 + 4*sqrt(37)"
        heads.append(" ".join(words[lead:]))
    for sep in ("=", ":"):
        if sep in line:
            heads.insert(0, line.rsplit(sep, 1)[1].strip())
    for head in heads:
        yield head
        if len(head) >= 2 and _BRACKETS.get(head[0]) == head[-1]:
            yield from _split_top_level(head[1:-1])
    yield from (w.rstrip(".,;") for w in line.split())


def grounding_candidates(outputs: Sequence[str]) -> list[str]:
    """Return up to MAX_GROUNDING_CANDIDATES distinct math-looking values, latest output lines first."""
    seen: set[str] = set()
    found: list[str] = []
    for out in reversed(outputs):
        for line in reversed(out.splitlines()):
            for cand in _line_candidates(line):
                if (
                    cand in seen
                    or not cand
                    or len(cand) > MAX_CANDIDATE_CHARS
                    or _MATHY.fullmatch(cand) is None
                    or _HAS_VALUE.search(cand) is None
                ):
                    continue
                seen.add(cand)
                found.append(cand)
                if len(found) >= MAX_GROUNDING_CANDIDATES:
                    return found
    return found
