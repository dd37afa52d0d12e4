"""The three failure modes of interleaved tool-integrated reasoning, measured per trajectory.

ThinC's sources (the AI-generated explainers of the paper) describe three failures interleaving prose and code invites:
(A) post-hoc verification, the answer reached in prose and code run only to confirm it; (B) a number
computed in prose typed as a literal into the next code block, so a prose error stays silent;
(C) role overlap, prose restating what code does. `posthoc`, `nl_literals` and `nl_ratio` measure
them on the parsed trajectory (either dialect); `failure_modes` summarises them over a benchmark's
trajectories. Answer equality is injected (`contains`, the one judge's grounding check in eval), so
this module stays pure: no IO, no grader, no tokenizer.
"""

from __future__ import annotations

import io
import re
import statistics
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from thinc_bench.metrics.estimates import Rate, rate, share
from thinc_bench.trajectory import Trajectory

PROSE_KINDS = frozenset({"plan", "text", "answer"})
"""Segments the model writes in natural language (the plan included)."""

MIN_INTEGER_LITERAL = 10
"""Integer literals below this are structure (exponents, ranges, indices, "step 2"), not a computed
value: they are not counted as NL literals. Non-integer literals always count."""

MAX_EXACT_DIGITS = 1_000
"""Numbers with more significant digits than this, or a decimal exponent beyond it, are compared by
their canonical digit string (`Number`) rather than as exact fractions: Python refuses int/str
conversions past 4,300 digits, and a literal `1e999999` would build a million-digit integer."""

Number = Fraction | str
"""A number's exact value: a Fraction, or past MAX_EXACT_DIGITS its canonical decimal string (no
leading or trailing zeros: `777...7`, `0.000123...`), or `DIGITSeEXP` when the exponent is past the
limit too (`1e999999999`, never written out). A value has one canonical form, so two numbers are
equal exactly when their `Number`s are, on either side of the limit."""

_NUMBER = re.compile(r"(?<![\w.])((?<!,)(?=(\d{1,3}(?:,\d{3})+))\2(?![\d,])|\d+(?:\.\d+)?)(?![\w])")
"""A decimal number in prose or output; "1,234,567" is one number, "1,2,3" three. A grouped number
starts a run of digits and commas (after a comma it is a list item: "1234,567,890" reads as three
numbers), and its groups are taken whole (a lookahead capture, no backtracking into them): retrying
the groups from every comma of a long run that ends badly ("1,234,...,234,5") was quadratic."""
_LITERAL = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
"""A Python decimal or float literal, underscores removed: whole digits, fraction digits, exponent."""
MAX_EXPONENT_CHARS = 9
"""An exponent written with more digits is no value the code can mean (`1e1000000000` is inf)."""

Contains = Callable[[str, str], bool]
"""contains(answer, text): whether `text` shows a value mathematically equal to `answer`."""


def number_value(whole: str, frac: str = "", exp: int = 0) -> Number:
    """The exact value of the decimal `whole.frac * 10**exp` (digit strings), without converting a
    number longer than MAX_EXACT_DIGITS (see `Number`)."""
    digits = (whole + frac).lstrip("0")
    significant = digits.rstrip("0")
    scale = exp - len(frac) + len(digits) - len(significant)  # value = int(significant) * 10**scale
    if not significant:
        return Fraction(0)
    if abs(scale) > MAX_EXACT_DIGITS:
        return f"{significant}e{scale}"
    if len(significant) <= MAX_EXACT_DIGITS:
        return Fraction(int(significant)) * Fraction(10) ** scale
    if scale >= 0:
        return significant + "0" * scale
    point = len(significant) + scale  # digits before the dot
    return f"{significant[:point]}.{significant[point:]}" if point > 0 else f"0.{'0' * -point}{significant}"


def _numbers(text: str) -> set[Number]:
    """The magnitudes of the decimal numbers written in `text` (signs are separate tokens in code)."""
    values: set[Number] = set()
    for m in _NUMBER.finditer(text):
        whole, _, frac = m.group(1).replace(",", "").partition(".")
        values.add(number_value(whole, frac))
    return values


def _literal_value(text: str) -> Number | None:
    """The value of one Python number literal (`0x1F`, `1_000`, `2.5e1`), or None when it has none we
    compare (an exponent too long to mean anything, a binary literal past MAX_EXACT_DIGITS)."""
    text = text.replace("_", "")
    if text[:2].lower() in ("0x", "0o", "0b"):
        try:
            value = int(text, 0)  # power-of-two bases: linear, no digit limit
        except ValueError:
            return None
        return Fraction(value) if value.bit_length() <= 3 * MAX_EXACT_DIGITS else None
    m = _LITERAL.fullmatch(text)
    if m is None or not (m.group(1) or m.group(2)):
        return None
    exp = m.group(3) or "0"
    if len(exp.lstrip("+-")) > MAX_EXPONENT_CHARS:
        return None
    return number_value(m.group(1), m.group(2) or "", int(exp))


def _order(value: Number) -> tuple[int, Fraction, str]:
    return (0, value, "") if isinstance(value, Fraction) else (1, Fraction(0), value)


def code_literals(code: str) -> list[Number]:
    """Magnitudes of the numeric literals of a code block, in order (strings and comments excluded).

    Code that does not tokenize (a block cut by the budget) falls back to the numbers in its text.
    """
    values: list[Number] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type != tokenize.NUMBER or token.string[-1] in "jJ":
                continue
            value = _literal_value(token.string)
            if value is not None:
                values.append(value)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return sorted(_numbers(code), key=_order)
    return values


def _substantive(value: Number) -> bool:
    return isinstance(value, str) or value.denominator != 1 or value >= MIN_INTEGER_LITERAL


def posthoc(traj: Trajectory, answer: str | None, contains: Contains) -> bool | None:
    """Failure mode A: the final answer is stated in model prose before any interpreter output shows it.

    Definition: let O be the first closed output block that `contains` the answer, or the last
    closed output block when none does. The trajectory is post-hoc when a prose segment (plan or
    text) before O contains the answer: the model wrote it down, then ran code that could only
    confirm it. The answer sentence after the last block never counts (it follows every output).

    Args:
        traj: the parsed trajectory.
        answer: its extracted final answer.
        contains: answer equality against a text (eval passes the one judge's grounding check,
            so `\\frac{1}{2}` in prose matches 0.5 printed, and 1 never matches inside 10).

    Returns:
        None without an answer or without any closed output block (nothing was verified), else
        whether the answer came first in prose.
    """
    if answer is None:
        return None
    segments = traj.segments
    outputs = [i for i, s in enumerate(segments) if s.kind == "output" and s.closed]
    if not outputs:
        return None
    first_hit = next((i for i in outputs if contains(answer, segments[i].content)), outputs[-1])
    # One check over all the prose before O (its segments a line apart), not one per segment: a text
    # of thousands of prose stretches would cost thousands of judge calls.
    prose = "\n".join(s.content for s in segments[:first_hit] if s.kind in PROSE_KINDS)
    return bool(prose) and contains(answer, prose)


def nl_literals(traj: Trajectory, problem: str) -> list[str]:
    """Failure mode B: numbers computed in prose and typed into code as literals.

    Definition: a numeric literal of a closed code block (strings and comments excluded; integers
    below `MIN_INTEGER_LITERAL` ignored) whose value appears in model prose (plan or text) before
    that block, and in none of: the problem text, an earlier interpreter output, an earlier code
    block. Each value counts once per trajectory. Magnitudes are compared (a minus sign is its own
    token in code), decimals exactly ("0.5" equals ".5"), grouped numbers whole ("1,234").

    Args:
        traj: the parsed trajectory.
        problem: the problem statement the model was given.

    Returns:
        The literals found, in the order first typed, as plain decimal strings ("21", "7/2").
    """
    known = _numbers(problem)
    prose: set[Number] = set()
    found: list[Number] = []
    for segment in traj.segments:
        if segment.kind in PROSE_KINDS:
            prose |= _numbers(segment.content)
        elif segment.kind == "output":
            known |= _numbers(segment.content)
        elif segment.kind == "code" and segment.closed:
            literals = code_literals(segment.code)  # a tool call: its decoded code, not its JSON
            for value in literals:
                if value in prose and value not in known and _substantive(value) and value not in found:
                    found.append(value)
            known |= set(literals)
    return [str(v) for v in found]


def _sizes(traj: Trajectory, count_tokens: Callable[[str], int] | None) -> list[int]:
    """Per-segment size: token spans when every segment has one, else `count_tokens`, else characters."""
    spans = [s.token_span for s in traj.segments]
    if traj.segments and all(span is not None for span in spans):
        return [span.end - span.start for span in spans if span is not None]
    measure = count_tokens or len
    return [measure(s.raw) for s in traj.segments]


def nl_ratio(traj: Trajectory, count_tokens: Callable[[str], int] | None = None) -> float | None:
    """Failure mode C (role overlap): model tokens of prose outside the plan / all model tokens.

    Prose outside the plan is every text segment (between, before and after blocks, the final
    answer sentence included; whitespace-only gaps excluded). Model tokens are every segment but
    interpreter outputs. A ThinC trajectory keeps this near 0 (prose lives in the plan, computation
    in code); an interleaved one narrates between blocks. Measured in the same unit as
    `trajectory.check_conformance`'s plan share: token spans, else `count_tokens`, else characters.

    Returns:
        The ratio, or None for a trajectory without model-written text.
    """
    sizes = _sizes(traj, count_tokens)
    model = prose = 0
    for segment, size in zip(traj.segments, sizes, strict=True):
        if segment.kind == "output":
            continue
        model += size
        if segment.kind in ("text", "answer") and segment.raw.strip():
            prose += size
    return prose / model if model else None


@dataclass(frozen=True)
class FailureModes:
    """The three TIR failure modes over one benchmark's trajectories.

    Attributes:
        posthoc: post-hoc trajectories / trajectories with an answer and an output block.
        nl_literals: trajectories with at least one NL literal / trajectories measured.
        nl_literals_mean: NL literals per measured trajectory.
        nl_ratio: mean prose-outside-plan share of model tokens (None when none measured).
        plan_share: mean plan share of all completion tokens (`trajectory.check_conformance`'s, the
            sources' denominator), beside it (None when none measured).
    """

    posthoc: Rate
    nl_literals: Rate
    nl_literals_mean: float | None
    nl_ratio: float | None
    plan_share: float | None


def failure_modes(
    posthoc_flags: Sequence[bool | None],
    nl_literal_counts: Sequence[int | None],
    nl_ratios: Sequence[float | None],
    plan_shares: Sequence[float | None],
) -> FailureModes:
    """Summarise per-trajectory measures; None entries (not measured, not applicable) are left out."""
    flags = [f for f in posthoc_flags if f is not None]
    counts = [c for c in nl_literal_counts if c is not None]
    ratios = [r for r in nl_ratios if r is not None]
    plans = [p for p in plan_shares if p is not None]
    return FailureModes(
        posthoc=share(flags),
        nl_literals=rate(sum(c > 0 for c in counts), len(counts)),
        nl_literals_mean=statistics.fmean(counts) if counts else None,
        nl_ratio=statistics.fmean(ratios) if ratios else None,
        plan_share=statistics.fmean(plans) if plans else None,
    )
