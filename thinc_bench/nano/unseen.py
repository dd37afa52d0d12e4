"""The nano test part in unseen phrasings: the trained families, worded as a user would and training never does.

The seen test part (`generate("test")`) uses the training's own templates, so its accuracy cannot
tell a learnt skill from a learnt sentence: a review found a checkpoint at 95% there and 79% on the
same families phrased apart, its misses all surface forms (thousands separators copied into Python
as tuples, "strictly between" read as inclusive, a LaTeX power). These phrasings exist for the test
only (never in `Family.phrasings`, which is all the training generator draws from) and cover those
forms: separators (`22,275`, `22{,}275`, `22\\,275`, `22 275`), operations in words, LaTeX (`\\gcd`,
`\\operatorname{lcm}`, `\\equiv \\pmod{}`), stories, and exclusive bounds, whose answer follows the
wording (`UnseenPhrasing.substance`) and, with both ends prime, changes if read the other way.
Numbers come from the test hash space, from a stream of their own that skips the seen part's
problems, so the part shares no problem with train or with `nano`.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from thinc_bench.nano.problems import DEFAULT_SEED, FAMILIES, NanoProblem, family, key, split_of, stream

UNSEEN_SIZE = 64
"""Problems in the registered `nano_unseen` part: 8 per family, each phrasing used in turn."""
SEEN_GUARD = 5_000
"""The unseen part skips every problem of the seen test stream's first SEEN_GUARD (50x `nano`)."""

Numbers = Literal["plain", "comma", "latex", "thin", "space"]
Bounds = Literal["inclusive", "exclusive"]
_SEPARATOR: Mapping[str, str] = {"comma": ",", "latex": "{,}", "thin": "\\,", "space": " "}


@dataclass(frozen=True)
class UnseenPhrasing:
    """A test-only wording of a trained family.

    `numbers` is how every number in it is written (`comma`: 22,275; `latex`: 22{,}275 and `thin`:
    22\\,275, both inside math; `space`: 22 275). `bounds="exclusive"` means the wording states a
    range's ends one outside what it counts ("strictly between lo and hi"), so the answer is the
    family's for lo+1..hi-1: the wording, not the template's family, decides the answer.
    """

    family: str
    template: str
    numbers: Numbers = "plain"
    bounds: Bounds = "inclusive"

    def text(self, stated: Mapping[str, int]) -> str:
        """The problem as a user reads it, numbers written the phrasing's way."""
        sep = _SEPARATOR.get(self.numbers)
        shown = {k: f"{v:,}".replace(",", sep) if sep else str(v) for k, v in stated.items()}
        return self.template.format(**shown)

    def substance(self, stated: Mapping[str, int]) -> dict[str, int]:
        """The numbers the family's answer function takes, from the numbers the wording states."""
        if self.bounds == "exclusive":
            return {**stated, "lo": stated["lo"] + 1, "hi": stated["hi"] - 1}
        return dict(stated)

    def answer(self, stated: Mapping[str, int]) -> int:
        """The right answer to `text(stated)`."""
        return family(self.family).answer(self.substance(stated))


def _p(fam: str, *rows: tuple[str, Numbers] | tuple[str, Numbers, Bounds]) -> tuple[UnseenPhrasing, ...]:
    return tuple(UnseenPhrasing(fam, *row) for row in rows)


UNSEEN_PHRASINGS: Mapping[str, tuple[UnseenPhrasing, ...]] = {
    "product": _p(
        "product",
        ("Using exact integer arithmetic, what does {a} * {b} come to?", "comma"),
        (
            "A warehouse ships {a} pallets and every pallet carries {b} cans. How many cans leave the "
            "warehouse in all?",
            "comma",
        ),
        ("If $x = {a}$ and $y = {b}$, what is $xy$?", "latex"),
        ("Work out {b} lots of {a}.", "space"),
    ),
    "modpow": _p(
        "modpow",
        ("Determine the remainder of {a} raised to the exponent {b} upon division by {m}.", "comma"),
        ("Solve ${a}^{{{b}}} \\equiv x \\pmod{{{m}}}$ for the integer $x$ with $0 \\le x < {m}$.", "latex"),
        (
            "A counter starts at 1. It is multiplied by {a} a total of {b} times, and after every step "
            "only its remainder on division by {m} is kept. What does the counter show at the end?",
            "comma",
        ),
    ),
    "digit_sum_power": _p(
        "digit_sum_power",
        ("Raise {a} to the exponent {e}. What do the decimal digits of the result add up to?", "plain"),
        ("Let $N = {a}^{{{e}}}$. Compute $S(N)$, the sum of the base-10 digits of $N$.", "latex"),
        (
            "A printer writes out {a}^{e} ({e} factors of {a} multiplied together) in full. Adding up "
            "every digit it printed, what total do you get?",
            "plain",
        ),
    ),
    "prime_count": _p(
        "prime_count",
        ("Find the count of primes strictly between {lo} and {hi}.", "comma", "exclusive"),
        ("Determine $\\#\\{{p \\text{{ prime}} : {lo} < p < {hi}\\}}$.", "latex", "exclusive"),
        (
            "A list holds every whole number from {lo} up to and including {hi}. How many entries of the "
            "list are prime?",
            "comma",
        ),
        ("Tell me how many prime numbers are greater than {lo} but less than {hi}.", "space", "exclusive"),
    ),
    "prime_sum": _p(
        "prime_sum",
        ("What do the primes strictly between {lo} and {hi} add up to?", "comma", "exclusive"),
        ("Evaluate $\\sum p$ taken over all primes $p$ with ${lo} < p < {hi}$.", "latex", "exclusive"),
        (
            "Raffle tickets are numbered {lo} through {hi}. Each prime-numbered ticket wins as many points "
            "as its number. How many points are won altogether?",
            "comma",
        ),
    ),
    "gcd": _p(
        "gcd",
        ("If $d = \\gcd(x, y)$ where $x = {a}$ and $y = {b}$, what is $d$?", "latex"),
        ("Of all the common factors of {a} and {b}, which is the highest?", "comma"),
        (
            "Two ropes of {a} cm and {b} cm are cut into pieces that all have the same whole-number "
            "length, with nothing left over. What is the longest such piece, in cm?",
            "comma",
        ),
    ),
    "lcm": _p(
        "lcm",
        ("With $x = {a}$ and $y = {b}$, evaluate $\\operatorname{{lcm}}(x, y)$.", "latex"),
        ("Name the smallest number that both {a} and {b} go into evenly.", "comma"),
        (
            "One beacon flashes every {a} seconds and another every {b} seconds. They flash together at "
            "time zero. After how many seconds do they next flash together?",
            "comma",
        ),
    ),
    "divisor_count": _p(
        "divisor_count",
        ("Compute $\\tau({n})$, where $\\tau$ counts the positive divisors of its argument.", "thin"),
        ("How many positive whole numbers go into {n} with no remainder?", "comma"),
        (
            "A teacher shares {n} stickers equally among a group of children, with none left over; a "
            "group may be a single child, or so large that each child gets one sticker. How many group "
            "sizes are possible?",
            "comma",
        ),
    ),
}
"""Per trained family, its test-only wordings (3-4 each; none is in the family's `phrasings`)."""


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _prime_ends(stated: dict[str, int]) -> dict[str, int]:
    """A range's ends moved up to primes, so reading its bounds the other way changes the answer.

    With ends drawn at random both are composite nine times in ten, and a model that reads "strictly
    between" as inclusive (or "up to and including" as exclusive) would still score.
    """
    if "lo" not in stated:
        return stated
    lo, hi = stated["lo"], stated["hi"]
    lo = next(n for n in itertools.count(lo) if _is_prime(n))
    hi = next(n for n in itertools.count(max(hi, lo + 1)) if _is_prime(n))
    return {**stated, "lo": lo, "hi": hi}


@functools.lru_cache(maxsize=4)
def _seen_keys(seed: int) -> frozenset[tuple[str, tuple[tuple[str, int], ...]]]:
    return frozenset(key(f.name, q) for f, q, _ in itertools.islice(stream("test", seed), SEEN_GUARD))


def generate_unseen(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default `UNSEEN_SIZE`) of the unseen-phrasing test part.

    Families in turn and, within a family, its phrasings in turn, so each wording is measured. A
    problem is kept only if both its stated and its counted numbers hash to the test split and
    belong to no earlier problem nor to the seen part's first `SEEN_GUARD`: `nano_unseen` shares no
    problem with `nano_train` or `nano`, and a smaller `n` is a prefix of a larger one. A problem's
    `params` are the numbers its answer counts (comparable with train's); `meta["stated"]` are the
    numbers its sentence writes (for a prime range, both ends prime).
    """
    n = UNSEEN_SIZE if n is None else n
    rng = random.Random(f"thinc-nano-unseen/{seed}")
    taken = set(_seen_keys(seed))
    out: list[NanoProblem] = []
    while len(out) < n:
        fam = FAMILIES[len(out) % len(FAMILIES)]
        phrasings = UNSEEN_PHRASINGS[fam.name]
        k = len(out) // len(FAMILIES) % len(phrasings)
        phrasing = phrasings[k]
        stated = _prime_ends(fam.draw(rng))
        substance = phrasing.substance(stated)
        keys = {key(fam.name, stated), key(fam.name, substance)}
        if keys & taken or any(split_of(fam.name, q, seed) != "test" for q in (stated, substance)):
            continue
        taken |= keys
        out.append(
            NanoProblem(
                id=f"nano-unseen-{len(out):04d}",
                family=fam.name,
                params=substance,
                problem=phrasing.text(stated),
                answer=fam.answer(substance),
                meta={"family": fam.name, "part": "unseen", "phrasing": k, "stated": stated, "seed": seed},
            )
        )
    return out
