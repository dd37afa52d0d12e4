"""The nano test part in unseen phrasings: the trained families, worded as a user would and training never does.

The seen test part (`generate("test")`) uses the training's own grammar, so its accuracy cannot tell
a learnt skill from learnt sentences. These phrasings exist for the test only: training draws from
`grammar.TRAIN_TEMPLATES` and these are not among them, and each holds a `grammar.TEST_MARKERS`
string (LaTeX the training never writes such as `\\cdot`, `\\equiv`, `\\operatorname{lcm}`, `\\tau`;
stories and wordings of their own) that no training problem of any seed contains. Training sees the
same *kinds* of variation (separators, LaTeX, stories, inclusive and exclusive bounds), so this part
measures transfer to new instances: new sentences, new stories, and two number formats training never
writes (`22\\,275` and `22 275`) beside trained ones (`22,275`, `22{,}275`). Exclusive bounds are
worded apart from training's ("leaving out both endpoints", "greater than ... but less than", "above ... and
below"); their answer follows the wording (`UnseenPhrasing.substance`) and, with both ends prime,
changes if read the other way. Numbers come from the test hash space, from a stream of their own
that skips the seen part's problems, so the part shares no problem with train or with `nano`.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from thinc_bench.nano.grammar import Numbers, counted, fill
from thinc_bench.nano.problems import DEFAULT_SEED, FAMILIES, NanoProblem, claim_test, family, key, stream

UNSEEN_SIZE = 64
"""Problems in the registered `nano_unseen` part: 8 per family, each phrasing used in turn."""
SEEN_GUARD = 5_000
"""The unseen part skips every problem of the seen test stream's first SEEN_GUARD (50x `nano`)."""

Bounds = Literal["inclusive", "exclusive"]


@dataclass(frozen=True)
class UnseenPhrasing:
    """A test-only wording of a trained family.

    `numbers` is how every number in it is written (`grammar.render_number`: `comma` 22,275; `latex`
    22{,}275 and `thin` 22\\,275, inside math; `space` 22 275). `bounds="exclusive"` means the wording
    states a range's ends one outside what it counts ("greater than lo but less than hi"), so the
    answer is the family's for lo+1..hi-1: the wording, not the template's family, decides the answer.
    """

    family: str
    template: str
    numbers: Numbers = "plain"
    bounds: Bounds = "inclusive"

    def text(self, stated: Mapping[str, int]) -> str:
        """The problem as a user reads it, numbers written the phrasing's way."""
        return fill(self.template, stated, self.numbers)

    def substance(self, stated: Mapping[str, int]) -> dict[str, int]:
        """The numbers the family's answer function takes, from the numbers the wording states."""
        exclusive = self.bounds == "exclusive"
        return counted(stated, exclusive, exclusive)

    def answer(self, stated: Mapping[str, int]) -> int:
        """The right answer to `text(stated)`."""
        return family(self.family).answer(self.substance(stated))


def _p(fam: str, *rows: tuple[str, Numbers] | tuple[str, Numbers, Bounds]) -> tuple[UnseenPhrasing, ...]:
    return tuple(UnseenPhrasing(fam, *row) for row in rows)


UNSEEN_PHRASINGS: Mapping[str, tuple[UnseenPhrasing, ...]] = {
    "product": _p(
        "product",
        ("Using exact integer arithmetic, what does ${a} \\cdot {b}$ come to?", "latex"),
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
        ("Solve ${a}^{{b}} \\equiv x \\pmod{{m}}$ for the integer $x$ with $0 \\le x < {m}$.", "latex"),
        (
            "A counter starts at 1. It is multiplied by {a} a total of {b} times, and after every step "
            "only its remainder on division by {m} is kept. What does the counter show at the end?",
            "comma",
        ),
    ),
    "digit_sum_power": _p(
        "digit_sum_power",
        ("Raise {a} to the exponent {e}. What do the decimal digits of the result add up to?", "plain"),
        ("Let $N = {a}^{{e}}$. Compute $S(N)$, the sum of the base-10 digits of $N$.", "latex"),
        (
            "A printer writes out {a}^{e} ({e} factors of {a} multiplied together) in full. Adding up "
            "every digit it printed, what total do you get?",
            "plain",
        ),
    ),
    "prime_count": _p(
        "prime_count",
        (
            "Leaving out both endpoints, find the count of prime numbers that lie between {lo} and {hi}.",
            "comma",
            "exclusive",
        ),
        ("Determine $\\#\\{p \\text{ prime} : {lo} < p < {hi}\\}$.", "latex", "exclusive"),
        (
            "A list holds every whole number from {lo} up to and including {hi}. How many entries of the "
            "list are prime?",
            "comma",
        ),
        ("Tell me how many prime numbers are greater than {lo} but less than {hi}.", "space", "exclusive"),
    ),
    "prime_sum": _p(
        "prime_sum",
        ("What do the primes above {lo} and below {hi} add up to?", "comma", "exclusive"),
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
        ("With $x = {a}$ and $y = {b}$, evaluate $\\operatorname{lcm}(x, y)$.", "latex"),
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
"""Per trained family, its test-only wordings (3-4 each): none is a training template, and each holds
a `grammar.TEST_MARKERS` string the training grammar never writes."""


@functools.lru_cache(maxsize=4)
def _seen_keys(seed: int) -> frozenset[tuple[str, tuple[tuple[str, int], ...]]]:
    keys = set()
    for f, stated, wording in itertools.islice(stream("test", seed), SEEN_GUARD):
        keys |= {key(f.name, stated), key(f.name, counted(stated, wording.lo_open, wording.hi_open))}
    return frozenset(keys)


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
        stated = fam.draw(rng)
        substance = phrasing.substance(stated)
        if not claim_test(fam.name, (stated, substance), taken, seed):
            continue
        out.append(
            NanoProblem(
                id=f"nano-unseen-{len(out):04d}",
                family=fam.name,
                params=substance,
                problem=phrasing.text(stated),
                answer=fam.answer(substance),
                meta={
                    "family": fam.name,
                    "part": "unseen",
                    "phrasing": k,
                    "numbers": phrasing.numbers,
                    "stated": stated,
                    "seed": seed,
                },
            )
        )
    return out
