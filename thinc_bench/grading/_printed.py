"""What the code printed: the values in interpreter output that may ground an answer.

Owns the reading of interpreter-output blocks for grounding (docs/DESIGN.md "Grounding"): only what the
code printed counts, so tracebacks (the injected Recovery@k failure is one), warnings, `SystemExit`
lines and the harness's own notices (`[sandbox] ...`, `[... N bytes of output cut ...]`, the
no-code error) are removed first; `Fraction(1, 2)` reads as `1/2` and `Fraction(3, 1)` as `3`. Then integers are matched as
standalone tokens (not the 1 in 10, the 20 in `1e+20`, the 234 in `1,234,567`), and other values
are listed as candidates for math-verify. Pure and linear; it does not compare values (`_worker`).
"""

import re
from collections.abc import Iterator, Sequence

from thinc_bench.grading._text import IntegerForm

MAX_GROUNDING_CANDIDATES = 48
"""Printed values sent to math-verify per trajectory: ~5-20 ms each keeps grounding under a second,
and the final value is almost always among the last lines printed (scanned first)."""

MAX_CANDIDATE_CHARS = 200
"""A printed value longer than this is a dump, not a result; it would only cost parse time."""

MAX_LINE_CHARS = 4_000
"""Lines longer than this (huge array prints) are skipped for candidates; integers still token-match."""

MAX_EXPONENT = 400
"""A printed float's exponent beyond this is not expanded into an integer (1e+400 is inf anyway)."""

_TRACEBACK_HEAD = re.compile(r"Traceback \(most recent call last\):\s*$|  File \"[^\"]*\", line \d+")
_CHAINED = re.compile(
    r"(?:During handling of the above exception, another exception occurred"
    r"|The above exception was the direct cause of the following exception):\s*$"
)
_WARNING = re.compile(r"\S.*:\d+: [A-Z]\w*(?:Warning|Error)\b.*$")
_HARNESS_LINE = re.compile(
    r"\[sandbox\] |\[\.\.\. \d+ bytes of output cut \.\.\.\]|Error: no code block to run before|SystemExit: "
)
_FRACTION_REPR = re.compile(r"Fraction\(\s*(-?\d+)\s*,\s*(\d+)\s*\)")
# A standalone number: not part of a word, a product, a power, a fraction or an exponent.
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.*/^])(?<![eE][+-])([+-]?)([1-9]\d{0,2}(?:,\d{3})+(?!\d)|\d+)(?:\.(\d+))?"
    r"(?:[eE]([+-]?\d+))?(?![\w*/^]|\.\d)"
)
_MATHY = re.compile(r"[0-9A-Za-z_\s.+\-*/^(),\[\]{}\\]+")
_HAS_VALUE = re.compile(r"\d|\bpi\b|\bsqrt\b|\bE\b|\bI\b|\\pi|\\sqrt|\\frac")
_MATH_WORDS = frozenset({"sqrt", "pi", "E", "I", "oo", "exp", "log", "sin", "cos", "tan"})
_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def code_printed(output: str) -> str:
    """The part of one interpreter-output block that the code printed (see the module docstring).

    A traceback runs from its header (or its first `File "...", line N` frame) through the indented
    lines to the exception line; chained tracebacks and their joining sentences go too. A warning is
    its `file:line: XWarning: ...` line and the indented source line under it.
    """
    kept: list[str] = []
    lines = output.splitlines()
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if _TRACEBACK_HEAD.match(line) or _WARNING.match(line):
            i += 1
            while i < n and (lines[i][:1] in (" ", "\t") or not lines[i].strip()):
                i += 1
            if _TRACEBACK_HEAD.match(line) or line.startswith("  File"):
                i += 1  # the exception line itself
            continue
        if not (_CHAINED.match(line) or _HARNESS_LINE.match(line)):
            kept.append(line)
        i += 1
    return _FRACTION_REPR.sub(_fraction_value, "\n".join(kept))


def _fraction_value(m: re.Match[str]) -> str:
    """`Fraction(1, 2)` as `1/2`, `Fraction(-3, 1)` as `-3`."""
    return m.group(1) if m.group(2) == "1" else f"{m.group(1)}/{m.group(2)}"


def _token_value(sign: str, whole: str, frac: str | None, exp: str | None) -> IntegerForm | None:
    """The integer a printed number token shows (25, -3, 25.0, 1,234, 1e+20), else None.

    Worked on the digit strings, never through int/Decimal: a printed `2**20000` has 6,021 digits
    (past Python's 4,300-digit int/str limit) and still grounds an answer with the same digits. An
    exponent beyond MAX_EXPONENT (or of more than a few digits) is no integer the code meant.
    """
    whole, frac = whole.replace(",", ""), frac or ""
    shift = 0
    if exp is not None:
        magnitude = exp.lstrip("+-").lstrip("0") or "0"
        if len(magnitude) > len(str(MAX_EXPONENT)) or int(magnitude) > MAX_EXPONENT:
            return None
        shift = -int(magnitude) if exp.startswith("-") else int(magnitude)
    mantissa = whole + frac
    point = len(whole) + shift  # the dot stands after `point` digits of the mantissa
    if point < 0:
        point, mantissa = 0, "0" * -point + mantissa
    if mantissa[point:].strip("0"):
        return None  # a fraction is left after the dot
    digits = (mantissa[:point] + "0" * (point - len(mantissa))).lstrip("0") or "0"
    return IntegerForm("-" if sign == "-" and digits != "0" else "", digits)


def _integer_tokens(output: str) -> Iterator[IntegerForm]:
    for m in _NUMBER_TOKEN.finditer(output):
        value = _token_value(*m.groups())
        if value is not None:
            yield value


def integer_grounded(answer: IntegerForm, outputs: Sequence[str]) -> bool:
    """Whether the integer `answer` is a standalone number the code printed in some output (exact)."""
    return any(tok == answer for out in outputs for tok in _integer_tokens(code_printed(out)))


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
    """Up to MAX_GROUNDING_CANDIDATES distinct math-looking printed values, latest output lines first."""
    seen: set[str] = set()
    found: list[str] = []
    for out in reversed(outputs):
        for line in reversed(code_printed(out).splitlines()):
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
