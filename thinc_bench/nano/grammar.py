"""The nano training phrasings as a grammar: sentence templates, range wordings, number formats, frames.

A student trained on a handful of sentences learns the sentences (round two measured 15/16 on them
and 2/16 on the same families phrased apart). So a training problem's wording is drawn, with the
problem's seed, from parts that compose: per family many templates (questions, commands, LaTeX
forms, short stories with units, question-first and question-last orders), for the prime-range
families a separate range wording with its own bounds (inclusive or exclusive; the answer
counts what the wording states, and both ends are primes, so a misread bound costs the answer), a
number format for the whole problem (plain, `,` separators, `$22{,}275$` in LaTeX, words for small
numbers) and an optional lead-in and closing line.

The unseen-phrasings test part (`unseen.py`) must stay unseen: it draws only from its own templates,
each carrying a `TEST_MARKERS` string, and from two number formats training never writes (LaTeX thin
space `22\\,275`, a plain space `22 275`). Training and test share *kinds* of variation (separators,
LaTeX, stories, exclusive bounds), never instances; `tests/nano/test_grammar.py` checks that no
training problem of any seed contains a marker and that every unseen problem does.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Numbers = Literal["plain", "comma", "latex", "words", "thin", "space"]
TRAIN_NUMBERS: tuple[Numbers, ...] = ("plain", "plain", "comma", "comma", "latex", "words")
"""The number formats training draws (plain twice as often: most users write plain numbers)."""
TEST_NUMBERS: tuple[Numbers, ...] = ("thin", "space")
"""Number formats only the unseen part writes: `22\\,275` (LaTeX thin space) and `22 275`."""

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """English words for 0-99 ("forty-two"); the only numbers a user spells out in a math question."""
    if not 0 <= n < 100:
        raise ValueError(f"number_words({n}): only 0-99 are written in words")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def render_number(n: int, numbers: Numbers, math: bool) -> str:
    """`n` as the problem writes it: `math` when the number stands inside `$...$`.

    Separators go only on numbers of 4+ digits (as style guides do), words only on 0-99 outside math
    (other numbers of a `words` problem are plain), and a LaTeX-format number outside math is wrapped
    in its own `$...$`.
    """
    digits = str(n)
    grouped = f"{n:,}"
    if numbers == "words":
        return digits if math or n >= 100 else number_words(n)
    if numbers == "comma":
        return grouped
    if numbers == "space":
        return grouped.replace(",", " ")
    if numbers in ("latex", "thin"):
        body = grouped.replace(",", "{,}" if numbers == "latex" else "\\,")
        return body if math else f"${body}$"
    return digits


_SLOT = re.compile(r"\{(a|b|e|m|n|lo|hi)\}")


def fill(template: str, stated: Mapping[str, int], numbers: Numbers) -> str:
    """The template with each `{name}` slot written in the format, inside math or not by its position.

    Not `str.format`, so LaTeX braces stay literal: `${a}^{{e}}$` reads `$7^{300}$`.
    """
    out, last = [], 0
    for match in _SLOT.finditer(template):
        out.append(template[last : match.start()])
        in_math = template.count("$", 0, match.start()) % 2 == 1
        out.append(render_number(stated[match.group(1)], numbers, in_math))
        last = match.end()
    return "".join(out) + template[last:]


@dataclass(frozen=True)
class RangeWording:
    """How a range is stated, and which of its ends the wording leaves out of what is counted."""

    text: str
    lo_open: bool
    hi_open: bool


TRAIN_RANGES: tuple[RangeWording, ...] = (
    RangeWording("between {lo} and {hi}, inclusive", False, False),
    RangeWording("from {lo} to {hi}, both ends included", False, False),
    RangeWording("from {lo} through {hi}", False, False),
    RangeWording("in the interval $[{lo}, {hi}]$", False, False),
    RangeWording("in the range ${lo} \\le p \\le {hi}$", False, False),
    RangeWording("strictly between {lo} and {hi}", True, True),
    RangeWording("between {lo} and {hi}, neither end included", True, True),
    RangeWording("in the open interval $({lo}, {hi})$", True, True),
    RangeWording("in the range ${lo} < p < {hi}$", True, True),
    RangeWording("between {lo} and {hi}, not counting either end", True, True),
)
"""Range wordings of training: inclusive and exclusive, each in words and in LaTeX.

Half-open ranges were tried too (four kinds of bound): on 256 examples the 135M student then read
nearly every range as inclusive, the commonest kind; two kinds, in turn (`problems.stream`), are
what the issue asks."""
TRAIN_RANGES_BY_BOUND: Mapping[bool, tuple[RangeWording, ...]] = {
    exclusive: tuple(r for r in TRAIN_RANGES if r.lo_open == exclusive) for exclusive in (False, True)
}
"""The training range wordings by kind: False the inclusive ones, True the exclusive ones."""
TRAIN_RANGE_PAIRS: tuple[tuple[RangeWording, RangeWording], ...] = (
    (TRAIN_RANGES[0], TRAIN_RANGES[6]),
    (TRAIN_RANGES[1], TRAIN_RANGES[9]),
    (TRAIN_RANGES[2], TRAIN_RANGES[5]),
    (TRAIN_RANGES[3], TRAIN_RANGES[7]),
    (TRAIN_RANGES[4], TRAIN_RANGES[8]),
)
"""Each inclusive training wording with an exclusive one of the same form (words with words, an
interval with an interval, an inequality with an inequality): the two members of a matched pair of
GRPO's pool differ in the bound and in nothing a convention could key on."""


TRAIN_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "product": (
        "What is ${a} \\times {b}$?",
        "Compute the product of {a} and {b}.",
        "Multiply {a} by {b}. What do you get?",
        "What is {a} times {b}?",
        "Evaluate {a} * {b} exactly.",
        "What does {a} multiplied by {b} equal?",
        "The two factors are {a} and {b}. What is their product?",
        "A crate holds {a} boxes of {b} screws each. How many screws are in the crate?",
        "A farm has {a} rows with {b} plants in each row. How many plants does the farm have?",
        "Each of {a} tickets costs {b} cents. How many cents do all the tickets cost?",
        "A printer prints {b} pages per minute for {a} minutes. How many pages does it print?",
    ),
    "modpow": (
        "What is the remainder when ${a}^{{b}}$ is divided by {m}?",
        "Compute ${a}^{{b}} \\bmod {m}$.",
        "Find {a} to the power {b}, modulo {m}.",
        "What is ${a}^{{b}} \\pmod{{m}}$?",
        "Modulo {m}, what is {a} raised to the power {b}?",
        "What is {a}**{b} modulo {m}?",
        "Start with 1 and multiply by {a}, {b} times in all, reducing modulo {m} after every step. "
        "What number do you end with?",
    ),
    "digit_sum_power": (
        "What is the sum of the digits of ${a}^{{e}}$?",
        "Find the digit sum of {a} raised to the power {e}.",
        "Write ${a}^{{e}}$ in decimal and add up its digits. What is the total?",
        "{a}**{e} is written out in decimal. Add up its digits.",
        "Take {e} copies of {a} and multiply them all together. What is the sum of the digits of the result?",
        "The number {a} to the power {e} is written out in full. What do its digits add up to?",
    ),
    "prime_count": (
        "How many primes are there {range}?",
        "Count the prime numbers {range}.",
        "What is the number of primes {range}?",
        "Consider the integers {range}. How many of them are prime?",
        "Lockers carry the numbers {range}. How many of those locker numbers are prime?",
        "Among the whole numbers {range}, how many are prime?",
    ),
    "prime_sum": (
        "What is the sum of all primes {range}?",
        "Add up every prime {range}.",
        "Find the sum of the prime numbers {range}.",
        "Consider the integers {range}. What is the sum of those that are prime?",
        "Houses are numbered with every whole number {range}. Each house with a prime number pays that "
        "many coins. How many coins are paid in total?",
    ),
    "gcd": (
        "What is the greatest common divisor of {a} and {b}?",
        "Compute $\\gcd({a}, {b})$.",
        "Find the largest integer that divides both {a} and {b}.",
        "{a} and {b}: what is their greatest common divisor?",
        "Find the GCD of {a} and {b}.",
        "A baker has {a} muffins and {b} cookies and packs them into identical boxes, with nothing left "
        "over. What is the largest number of boxes she can fill?",
        "Tiles of {a} mm and {b} mm are both to be measured with one stick of a whole number of mm that "
        "fits each exactly. What is the longest such stick, in mm?",
    ),
    "lcm": (
        "What is the least common multiple of {a} and {b}?",
        "Compute $\\mathrm{lcm}({a}, {b})$.",
        "Find the smallest positive integer divisible by both {a} and {b}.",
        "What is the LCM of {a} and {b}?",
        "Find $\\text{lcm}({a}, {b})$.",
        "Two buses leave the depot at noon; one leaves again every {a} minutes, the other every {b} "
        "minutes. How many minutes pass before they next leave together?",
    ),
    "divisor_count": (
        "How many positive divisors does {n} have?",
        "Find the number of positive integers that divide {n}.",
        "Count the divisors of {n}, including 1 and {n} itself.",
        "Compute $\\sigma_0({n})$, the number of positive divisors of ${n}$.",
        "How many whole numbers divide {n} exactly?",
        "A gardener plants {n} trees in equal rows (a single row allowed). How many different numbers of "
        "rows are possible?",
    ),
}
"""Per family, the training's sentence templates; `{range}` takes a `RangeWording`."""

LEAD_INS: tuple[str, ...] = ("", "", "", "Exercise. ", "Quick question: ", "Solve exactly. ")
CLOSINGS: tuple[str, ...] = ("", "", "", " Give the exact integer.", " Answer with a single number.")
"""Optional frames around a training problem (empty most of the time)."""

TEST_MARKERS: tuple[str, ...] = (
    "\\,",
    "\\cdot",
    "\\equiv",
    "\\operatorname",
    "\\tau",
    "\\#",
    "$xy$",
    "lots of",
    "pallets",
    "upon division",
    "counter",
    "printer writes",
    "to the exponent",
    "S(N)",
    "both endpoints",
    "A list holds",
    "Tell me",
    "Raffle",
    "primes above",
    "\\sum p",
    "d = \\gcd",
    "common factors of",
    "ropes",
    "beacon",
    "go into",
    "stickers",
)
"""Strings only the unseen part writes (each of its problems holds at least one): the `\\,` format,
LaTeX the training never uses, and a phrase of each test-only template. Plain-space numbers
(`22 275`) are test-only too, found by `SPACED_NUMBER`."""
SPACED_NUMBER = re.compile(r"\d \d{3}(?!\d)")


def test_marked(text: str) -> bool:
    """Whether a problem text holds a test-only component (a marker or a space-grouped number)."""
    return any(m in text for m in TEST_MARKERS) or SPACED_NUMBER.search(text) is not None


@dataclass(frozen=True)
class Wording:
    """One drawn training wording: the text and what the reader must take from it."""

    text: str
    template: int
    numbers: Numbers
    lo_open: bool = False
    hi_open: bool = False


def counted(stated: Mapping[str, int], lo_open: bool, hi_open: bool) -> dict[str, int]:
    """The numbers a family's answer takes (inclusive ends) from a range's stated ends and bounds."""
    if "lo" not in stated:
        return dict(stated)
    return {**stated, "lo": stated["lo"] + lo_open, "hi": stated["hi"] - hi_open}


def _worded(
    template: str,
    k: int,
    numbers: Numbers,
    stated: Mapping[str, int],
    bound: RangeWording | None,
    frame: tuple[str, str],
) -> Wording:
    if bound is not None:
        template = template.replace("{range}", bound.text)
    text = frame[0] + fill(template, stated, numbers) + frame[1]
    return Wording(text, k, numbers, bound is not None and bound.lo_open, bound is not None and bound.hi_open)


def draw_wording(
    family: str,
    stated: Mapping[str, int],
    rng: random.Random,
    ranges: tuple[RangeWording, ...] = TRAIN_RANGES,
) -> Wording:
    """A training wording of a problem, every part drawn from `rng` (a range's bounds from `ranges`)."""
    templates = TRAIN_TEMPLATES[family]
    k = rng.randrange(len(templates))
    numbers = rng.choice(TRAIN_NUMBERS)
    bound = rng.choice(ranges) if "{range}" in templates[k] else None
    frame = (rng.choice(LEAD_INS), rng.choice(CLOSINGS))
    return _worded(templates[k], k, numbers, stated, bound, frame)


def draw_pair(family: str, stated: Mapping[str, int], rng: random.Random) -> tuple[Wording, Wording]:
    """A range problem worded twice by the training grammar, alike but for the bound: (inclusive, exclusive).

    One template, one number format and one frame drawn from `rng` for both members; the bound from one
    matched pair of `TRAIN_RANGE_PAIRS`. A reader that ignores the bound gives both members one
    answer, and with both ends prime it can be right on one only.

    Raises:
        ValueError: a family whose templates state no range.
    """
    templates = TRAIN_TEMPLATES[family]
    k = rng.randrange(len(templates))
    if "{range}" not in templates[k]:
        raise ValueError(f"nano family {family!r} states no range; a matched pair needs one")
    numbers = rng.choice(TRAIN_NUMBERS)
    inclusive, exclusive = rng.choice(TRAIN_RANGE_PAIRS)
    frame = (rng.choice(LEAD_INS), rng.choice(CLOSINGS))
    return (
        _worded(templates[k], k, numbers, stated, inclusive, frame),
        _worded(templates[k], k, numbers, stated, exclusive, frame),
    )
