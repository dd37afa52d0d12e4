"""Pure text side of grading: where the answer is, and the surface form golds and answers share.

Owns everything grading decides about an answer *without* math-verify: the final text of a
response (model text after the last code/output block, or after `</think>` when there is no code),
its answer (the last `\\boxed{}`, or a final run of boxes joined as one list), the source-form
normalisation shared by golds and answers ("025", "33,124,147", `10,\\!080`, `33\\,121\\,635`, `1 000`),
the gold-dependent readings of decimal commas and units, and the exact integer fast path. Every
function is linear in its input and touches no state. It does not parse mathematics (`_worker`) and
does not read interpreter output (`_printed`).
"""

import re
from typing import NamedTuple

from thinc_bench import trajectory as _trajectory

MAX_ANSWER_CHARS = 2_000
"""Longer boxed answers are unparseable without a parse: the longest benchmark gold has ~70 chars and
math-verify's LaTeX parser is superlinear, so a 300k-char box would only burn a worker's timeout."""

_SEP = r"(?:,\\!\s*|\{,\}|,|\\,|\\ |~| |\u2009|\u202f|\u00a0)"
# A whole number with digit groups: first group 1-3 digits not starting with 0, then groups of three.
_GROUPED_NUMBER = re.compile(rf"([+-]?)([1-9]\d{{0,2}}(?:{_SEP}\d{{3}})+)(\.\d+)?")
_GROUP_SEPS = re.compile(_SEP)
# Grouping inside a larger answer (`\$32,\!348`, `33\,121\,635 \text{ ways}`): only the explicit forms.
_GROUP_SEP_THIN = re.compile(r"(?<=\d)(?:,\\!\s*|\\,|\{,\})(?=\d{3}(?!\d))")
_MATHRM_E = re.compile(r"\\mathrm\{\s*e\s*\}")
_CURRENCY = re.compile(r"^[€£¥₹]\s*|(?<!\s)\s*[€£¥₹]$")  # a blank run is tried from its start only
_PLAIN_INT = re.compile(r"([+-]?)(\d+)")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
# A gold that is a number with a LaTeX unit (`15\mbox{ cm}^2`, `5.4 \text{ cents}`): math-verify drops it.
_GOLD_NUMBER_UNIT = re.compile(
    r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z ]+\}(?:\^\{?[23]\}?)?"
)
_TRAILING_STOP = re.compile(r"(?<=\d)\.$")
_DEGREE_SIGN = re.compile(r"(?<!\s)\s*°")
_PM = re.compile(r"\\pm(?![A-Za-z])")
_DECIMAL_COMMA = re.compile(r"([+-]?\d+),(\d+)")
_NUMBER_UNIT = re.compile(r"([+-]?\d[\d,.]*)\s*([A-Za-zµ]{1,12})(?:²|³|\^\{?[23]\}?)?")
_UNIT_WORDS = frozenset(
    {
        *("m", "cm", "mm", "km", "kg", "g", "mg", "l", "ml", "s", "sec", "min", "h", "hr", "ms"),
        *("meters", "metres", "feet", "ft", "inches", "miles", "mph", "kmh", "units", "cents"),
        *("dollars", "euros", "degrees", "seconds", "minutes", "hours", "days", "years", "sq"),
    }
)
_SURFACE_NOISE = re.compile(r"\s+|\\(?:left|right|displaystyle)(?![A-Za-z])|\\[,;:! ]")
_FRAC_VARIANT = re.compile(r"\\[dt]frac(?![A-Za-z])")


class IntegerForm(NamedTuple):
    """A plain integer in canonical form: sign ("" or "-") and digits without leading zeros."""

    sign: str
    digits: str


def as_trajectory(response: "str | _trajectory.Trajectory") -> "_trajectory.Trajectory":
    """A response as a trajectory; a plain string is parsed in the dialect whose last block ends latest.

    A rollout writes one dialect, and the other's delimiters do not occur in it, so the dialect with
    blocks wins; markdown on ties (no blocks at all).
    """
    if isinstance(response, _trajectory.Trajectory):
        return response
    if not isinstance(response, str):
        raise TypeError(
            f"a response must be its text (str) or a thinc_bench.trajectory.Trajectory, not "
            f"{type(response).__name__}; pass the rollout's text"
        )
    parsed = [_trajectory.parse(response, d) for d in ("markdown", "xml")]
    return min(parsed, key=lambda t: len(_final_of(t)))


def final_text(response: "str | _trajectory.Trajectory") -> str:
    """The model's final text: what follows the last code or output block, else what follows `</think>`.

    docs/DESIGN.md: the answer is written after the last interpreter output, so a `\\boxed{}` printed by
    code, written in the plan or in an earlier step is not the answer. A trajectory without code
    answers after its closed plan, or anywhere when it has no `</think>`.

    Args:
        response: the whole response text (dialect as in `as_trajectory`), or its parsed trajectory.

    Raises:
        TypeError: `response` is neither.
    """
    return _final_of(as_trajectory(response))


def _final_of(traj: "_trajectory.Trajectory") -> str:
    segments = traj.segments
    last = max((i for i, s in enumerate(segments) if s.kind in ("code", "output")), default=None)
    if last is None:
        last = next((i for i, s in enumerate(segments) if s.kind == "plan" and s.closed), None)
    tail = segments if last is None else segments[last + 1 :]
    return "".join(s.raw for s in tail)


extract_answer = _trajectory.extract_answer
joined_answer = _trajectory.joined_answer


def final_answer(response: "str | _trajectory.Trajectory") -> str | None:
    """The answer of a response: `joined_answer` of its `final_text`; None when it boxes nothing there."""
    return joined_answer(final_text(response))


def normalize_answer(answer: str) -> str:
    """Normalise the surface form shared by golds and answers, keeping the mathematics intact.

    Strips whitespace and enclosing `$`, reads `\\mathrm{e}` as `e` and `°` as `^\\circ`, drops a
    full stop after a final digit (`7.`) and a leading or trailing Unicode currency sign (`€ £ ¥ ₹`),
    spells out a lone `\\pm` outside a list (`1 \\pm \\sqrt{2}` is `1 + \\sqrt{2}, 1 - \\sqrt{2}`), and reads
    digit grouping: a whole number written `33,124,147`,
    `10{,}080`, `10,\\!080`, `33\\,121\\,635` or `1 000` (a first group of 1-3 digits not starting with
    0, then groups of exactly three) becomes plain digits. `0,111` and `012,345` are not groupings
    (math-verify reads `0,111` as 0.111); comma lists (`1,-2`, `3, 5, 7`, `1,2`) stay lists.
    Decimal commas and unit words depend on the gold: see `align_to_gold`.
    """
    s = _strip_dollars(answer)
    s = _CURRENCY.sub("", _MATHRM_E.sub("e", s))
    s = _DEGREE_SIGN.sub(r"^\\circ", _TRAILING_STOP.sub("", s))
    if "," not in s and len(_PM.findall(s)) == 1:  # `\frac{-1 \pm \sqrt{17}}{2}` names two values
        return ", ".join(normalize_answer(_PM.sub(sign, s)) for sign in ("+", "-"))
    grouped = _GROUPED_NUMBER.fullmatch(s)
    if grouped is not None:
        return grouped.group(1) + _GROUP_SEPS.sub("", grouped.group(2)) + (grouped.group(3) or "")
    return _GROUP_SEP_THIN.sub("", s).replace("\\!", "")


def _strip_dollars(answer: str) -> str:
    """`answer` stripped of whitespace and of enclosing `$` pairs (with the blanks inside them), by
    index: slicing once per pair made `$$$...$$$` quadratic."""
    i, j = 0, len(answer)
    while True:
        while i < j and answer[i].isspace():
            i += 1
        while j > i and answer[j - 1].isspace():
            j -= 1
        if j - i < 2 or answer[i] != "$" or answer[j - 1] != "$":
            return answer[i:j]
        i, j = i + 1, j - 1


def align_to_gold(answer: str, gold: str) -> str:
    """Read a normalised answer the way a plain-number gold implies (both already normalised).

    Only for a gold that is a plain number (or one with a LaTeX unit, `15\\mbox{ cm}^2`): a comma that is not a thousands group (those are gone
    after `normalize_answer`) is a decimal comma when the gold is a decimal (`1000,99` for gold
    1000.99), and a unit word after a number (`m²`, `cm^2`, `kg`, `cents`) is dropped. Other golds
    leave the answer as it is: `1,2` stays a list for gold `1, 2`, and `5x` is never `5`.
    """
    number = _PLAIN_NUMBER.fullmatch(gold) or _GOLD_NUMBER_UNIT.fullmatch(gold)
    if number is None:
        return answer
    comma = _DECIMAL_COMMA.fullmatch(answer)
    if comma is not None and "." in number.group(0).split("\\")[0]:
        return f"{comma.group(1)}.{comma.group(2)}"
    unit = _NUMBER_UNIT.fullmatch(answer)
    if unit is not None and unit.group(2).lower() in _UNIT_WORDS:
        return align_to_gold(normalize_answer(unit.group(1)), gold)
    return answer


def canonical_surface(s: str) -> str:
    """`s` without whitespace, spacing commands and `\\left`/`\\right`, `\\dfrac`/`\\tfrac` as `\\frac`.

    Two answers with the same canonical surface are the same answer whether or not math-verify can
    parse them (a gold like `x = \\frac{1}{2}, x = \\frac{-1 \\pm \\sqrt{13}}{4}` does not parse).
    """
    return _SURFACE_NOISE.sub("", _FRAC_VARIANT.sub(r"\\frac", s))


def as_integer(normalized: str) -> IntegerForm | None:
    """Return the canonical integer for a plain integer string ("025", "-984"), else None."""
    m = _PLAIN_INT.fullmatch(normalized)
    if m is None:
        return None
    digits = m.group(2).lstrip("0") or "0"
    sign = "-" if m.group(1) == "-" and digits != "0" else ""
    return IntegerForm(sign, digits)
