"""Computation in the plan: what a ThinC plan must not do, found in its text.

The sources describe the plan as one brief block that sets the high-level strategy or an algebraic
reformulation and carries "no step-by-step derivation or numerical computation" (both explainers,
technical summary); all derivation belongs to code. `plan_computation(text)` finds three concrete
forms of it, each a `Finding` with the words that show it:

- `arithmetic`: a relation (`=`, `≈`, `\\approx`, `≡`, `\\equiv`) between numeric expressions where one
  side computes (an operator: `+ - * / ^ ! % × ÷ ·`, `\\frac`, `\\sqrt`, `\\cdot`, `\\times`, `\\div`)
  and neither holds a variable: `500 * 0.12 = 60`, `2^{10} = 1024`, `\\frac{3}{4} \\cdot 8 = 6`,
  `2024 = 2^3 \\cdot 11 \\cdot 23`, `gcd(12, 18) = 6`; and the same in words: `12% of 500 is 60`,
  `7 times 8 is 56`, `multiplying 17 by 23 digit by digit gives 391`;
- `solved`: an equation solved in prose: a derivation word (so, thus, hence, therefore, gives,
  giving, yields, we get, which means, implies, `=>`, `⇒`, `\\Rightarrow`, `\\implies`) followed in
  the same sentence by a variable set to a number the plan has not written before: `2x + 3 = 11, so
  x = 4` (but not `k from 1 to 100, so k = 1 is the first case`);
- `chain`: a chain of two or more `=` in one clause, every member a formula (no words), a middle one
  working something out (an operator), ending in a number: `(a+b)^2 = a^2 + 2ab + b^2 = 49`, a
  derivation written out step by step (`x = y = 3` only states values).

Restating the problem (`Let n = 2024`, `1 <= n <= 1000`), algebra without numbers worked out
(`x^2 + y^2 = 25`, `the sum of squares is the square of the sum minus twice ...`), formulas
(`lcm = a*b // gcd`) and ranges (`1..999`) are not computation; nor, beyond these forms, a result
stated in words alone (`the count is 45`), which no pattern tells from a restatement (the failure
modes' post-hoc measure catches an answer stated before code shows it). Pure and linear in the text: each
relation is read within a bounded window, so a long or hostile plan costs no more than its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FindingKind = Literal["arithmetic", "solved", "chain"]

WINDOW = 80
"""Characters read on each side of a relation: a numeric expression longer than this is cut there."""

_REL = re.compile(r"≈|≡|\\approx\b|\\equiv\b|(?<![=<>!:+\-*/%&|^])=(?![=>])")
_FUNCTION_NAMES = r"sqrt|log|ln|exp|sin|cos|tan|gcd|lcm|binom|floor|ceil"
_FUNCTIONS = rf"(?:{_FUNCTION_NAMES})(?=\s*[({{])"
"""Functions a numeric expression may call (`gcd(12, 18) = 6` computes as much as `12 * 18`)."""
_NUMERIC = re.compile(
    r"(?:\d|[ \t.,{}()\[\]+\-*/^!%×÷·−]|\\(?:frac|dfrac|tfrac|sqrt|cdot|times|div|left|right|,)(?![A-Za-z])"
    rf"|(?<![A-Za-z]){_FUNCTIONS})+"
)
"""Characters, LaTeX commands and function names a purely numeric expression is written with (no
variable)."""
_NUMERIC_TAIL = re.compile(_NUMERIC.pattern + r"$")
_OPERATOR = re.compile(
    r"(?<=[\d)}\s])[-+*/^!%×÷·−]|\*\*|\\(?:frac|dfrac|tfrac|sqrt|cdot|times|div)\b|^\s*\\(?:frac|sqrt)"
    rf"|{_FUNCTIONS}"
)
_NUMBER = r"\d+(?:(?:,|\{,\})\d{3})*(?:\.\d+)?"
_IN_WORDS = re.compile(
    rf"(?<![\w.]){_NUMBER}\s*(?:%|percent)\s+of\s+{_NUMBER}\s+(?:is|equals|gives|makes)\s+-?{_NUMBER}"
    rf"|(?<![\w.]){_NUMBER}\s+(?:times|plus|minus|multiplied by|divided by|to the power of|squared is|cubed is)"
    rf"\s+(?:{_NUMBER}\s+)?(?:is|equals|gives|makes)\s+-?{_NUMBER}"
    rf"|\b(?:multiplying|dividing|adding|subtracting|raising)\s+{_NUMBER}\s+(?:by|and|to|from|into)\s+{_NUMBER}"
    rf"\b[^.;!?\n]{{0,60}}?\b(?:gives|is|equals|yields|makes)\s+-?{_NUMBER}",
    re.IGNORECASE,
)
_SOLVED = re.compile(
    r"(?:\b(?:so|thus|hence|therefore|gives|giving|yields|we get|which means|implies)\b|=>|⇒|→|\\Rightarrow\b|\\implies\b)"
    r"[^.;!?\n]{0,60}?(?<![\w\\])([A-Za-z](?:_\{?\w{1,8}\}?)?)\s*=\s*-?"
    + _NUMBER
    + r"(?!\s*(?:\.\.|\\ldots|\\dots))",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[;:\n]|,\s|[.!?](?:\s|$)")
_RESULT = re.compile(r"^\s*\$?\s*-?" + _NUMBER + r"\s*\$?\s*(?:$|(?=[A-Za-z]{2,}\b))")
"""The last member of a derivation chain: a number, alone or before words (`= 49 gives the square`)."""
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
"""A word of prose (three letters or more, not a LaTeX command): `with`, `and`, `the` end a chain."""


@dataclass(frozen=True)
class Finding:
    """One piece of computation in a plan: its kind and the words that show it."""

    kind: FindingKind
    text: str


def _numeric_side(text: str, *, left: bool) -> str:
    """The numeric expression touching the relation on one side ('' when a variable is there)."""
    if left:
        match = _NUMERIC_TAIL.search(text[-WINDOW:])
        return match.group() if match else ""
    match = _NUMERIC.match(text[:WINDOW])
    side = match.group() if match else ""
    stop = re.search(r"[.,](?:\s|$)", side)  # a sentence or clause ends, not a decimal point
    return side[: stop.start()] if stop else side


def _computes(side: str) -> bool:
    return _OPERATOR.search(side.strip().lstrip("-−(").strip()) is not None


def _arithmetic(text: str) -> list[Finding]:
    found = []
    for rel in _REL.finditer(text):
        lhs = _numeric_side(text[: rel.start()], left=True)
        rhs = _numeric_side(text[rel.end() :], left=False)
        if not (re.search(r"\d", lhs) and re.search(r"\d", rhs)):
            continue  # a variable or words on one side: a formula or a restatement, not arithmetic
        if _computes(lhs) or _computes(rhs):
            found.append(Finding("arithmetic", f"{lhs.strip()} {rel.group()} {rhs.strip()}"))
    found += [Finding("arithmetic", m.group()) for m in _IN_WORDS.finditer(text)]
    return found


def _is_math(member: str) -> bool:
    """Whether a chain member is a formula (no word of prose but the functions a formula calls)."""
    return bool(member.strip()) and all(
        re.fullmatch(_FUNCTION_NAMES, w.group()) for w in _WORD.finditer(member)
    )


def _chains(text: str) -> list[Finding]:
    found = []
    for clause in _CLAUSE.split(text):
        members = _REL.split(clause)
        if len(members) < 3 or not _RESULT.match(members[-1]):
            continue
        words = [w for w in _WORD.finditer(members[0]) if not re.fullmatch(_FUNCTION_NAMES, w.group())]
        head = members[0][words[-1].end() :] if words else members[0]  # the formula after any prose
        middle = members[1:-1]
        if _is_math(head) and all(_is_math(m) for m in middle) and any(_OPERATOR.search(m) for m in middle):
            found.append(Finding("chain", "=".join([head, *members[1:]]).strip()[: WINDOW * 2]))
    return found


def _written_before(before: str, match: str) -> bool:
    """Whether the value a `solved` match sets is a number the plan wrote before it: a restatement
    (`iterate k from 1 to 100, so k = 1 is the first case`), not a value derived in prose."""
    value = re.findall(_NUMBER, match)[-1]
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\d])", before) is not None


def plan_computation(text: str | None) -> list[Finding]:
    """Every computation the plan text holds (see the module docstring), in the order: arithmetic,
    equations solved in prose, derivation chains. Empty for no plan."""
    if not text:
        return []
    solved = [
        Finding("solved", m.group().strip())
        for m in _SOLVED.finditer(text)
        if not _written_before(text[: m.start()], m.group())
    ]
    return [*_arithmetic(text), *solved, *_chains(text)]
