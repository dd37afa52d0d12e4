"""The matched-pair part of the nano task: a part only reading the bound can pass.

Every other part asks each problem once, so a student that reads every range one way (a convention)
scores on the problems of that kind and the part cannot tell it from one that reads: session 11's
GRPO raised range accuracy by moving the student to the reading its pool paid most. Here each range
is asked twice, with the same numbers, once with an inclusive bound and once with an exclusive one,
in one wording that differs only in the bound; both ends are prime, so the two answers differ. Scored
as pairs (`thinc_bench.metrics.matched_pairs`: a pair counts only when both members are right), a
student whose answer ignores the wording solves no pair, and one that picks a reading at random at
most a quarter of them.

The wordings are held out from everything trained: sentence templates and bound phrases of their
own (`PAIR_TEMPLATES`, `PAIR_BOUNDS`), none a training or GRPO wording nor an unseen-part one, and
each problem holds a `PAIR_MARKERS` string no other part writes (tests/nano/test_pairs.py checks the
whole training grammar and every other part). Numbers come from the test hash space (both readings
of a range hash there), from a stream of their own that skips the seen part's guard, the unseen part
and both range parts, so the part shares no problem with train, GRPO's pool or another test part.
Numbers are written plain or with `,` separators (trained formats: the part asks about the bound,
not the digits). Ids are `nano-pair-NNNN-in` / `-ex` (`pair_member` reads them back from a record).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping

from thinc_bench.nano.grammar import Numbers, RangeWording, counted, fill
from thinc_bench.nano.problems import DEFAULT_SEED, NanoProblem, claim_test, family, key
from thinc_bench.nano.ranges import CONFIRM_SIZE, RANGE_FAMILIES, RANGES_SIZE, _range_stream
from thinc_bench.nano.unseen import _seen_keys, generate_unseen

PAIRS_SIZE = 96
"""Problems in the registered `nano_pairs` part: 48 pairs, 24 per family, each bound wording 12 times."""

PAIR_TEMPLATES: Mapping[str, tuple[str, ...]] = {
    "prime_count": (
        "State how many primes are found {range}.",
        "A sieve marks every prime {range}. How many numbers does it mark?",
    ),
    "prime_sum": (
        "State the total of all primes found {range}.",
        "A sieve adds up every prime {range}. What total does it reach?",
    ),
}
"""Per range family, the part's sentences: none is a training, GRPO or unseen-part template."""

PAIR_BOUNDS: tuple[tuple[RangeWording, RangeWording], ...] = (
    (
        RangeWording("no smaller than {lo} and no larger than {hi}", False, False),
        RangeWording("larger than {lo} and smaller than {hi}", True, True),
    ),
    (
        RangeWording("from {lo} up to {hi}, with {lo} and {hi} themselves counted", False, False),
        RangeWording("from {lo} up to {hi}, with {lo} and {hi} themselves left out", True, True),
    ),
    (
        RangeWording("in $[{lo}; {hi}]$", False, False),
        RangeWording("in $]{lo}; {hi}[$", True, True),
    ),
    (
        RangeWording("from {lo} to {hi} with the two ends kept", False, False),
        RangeWording("from {lo} to {hi} with the two ends dropped", True, True),
    ),
)
"""Matched bound phrases, (inclusive, exclusive), of the same form: words with words, the ISO
interval notation (`]a; b[` open, `[a; b]` closed) with itself. None is a training range wording."""

PAIR_NUMBERS: tuple[Numbers, ...] = ("plain", "comma")
"""The number formats of the part (both trained), in turn every 16 pairs."""

PAIR_MARKERS: tuple[str, ...] = ("State how many", "State the total", "A sieve marks", "A sieve adds up")
"""Strings only this part writes (one in each of its sentences); no training, GRPO, seen, unseen or
other range problem holds any. The bound phrases are checked apart, phrase by phrase."""

MEMBERS = ("inclusive", "exclusive")
_ID = re.compile(r"^(nano-pair-\d{4,})-(in|ex)$")


def pair_member(problem_id: str) -> tuple[str, str] | None:
    """(pair id, "inclusive" | "exclusive") of a `nano_pairs` problem id; None for any other id."""
    match = _ID.match(problem_id)
    if match is None:
        return None
    return match.group(1), "inclusive" if match.group(2) == "in" else "exclusive"


def generate_pairs(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default `PAIRS_SIZE`) of the matched-pair part, each pair's inclusive
    member first (an even `n` is whole pairs; a smaller `n` is a prefix of a larger one).

    Pair i asks family `RANGE_FAMILIES[i % 2]`, bound pair `PAIR_BOUNDS[i // 2 % 4]`, template
    `i // 8 % 2` of its family and number format `PAIR_NUMBERS[i // 16 % 2]`: every combination
    equally often over 32 pairs, and the kinds balanced in any whole number of 16 pairs.
    """
    n = PAIRS_SIZE if n is None else n
    rng = random.Random(f"thinc-nano-pairs/{seed}")
    taken = set(_seen_keys(seed)) | {key(p.family, p.params) for p in generate_unseen(None, seed)}
    for p in itertools.islice(_range_stream(seed), RANGES_SIZE + CONFIRM_SIZE):
        taken |= {key(p.family, p.params), key(p.family, p.meta["stated"])}
    out: list[NanoProblem] = []
    i = 0
    while len(out) < n:
        fam = family(RANGE_FAMILIES[i % len(RANGE_FAMILIES)])
        stated = fam.draw(rng)
        if not claim_test(fam.name, (stated, counted(stated, True, True)), taken, seed):
            continue
        bounds = i // 2 % len(PAIR_BOUNDS)
        template = i // 8 % len(PAIR_TEMPLATES[fam.name])
        numbers = PAIR_NUMBERS[i // 16 % len(PAIR_NUMBERS)]
        pair = f"nano-pair-{i:04d}"
        for member, wording in zip(MEMBERS, PAIR_BOUNDS[bounds], strict=True):
            if len(out) == n:
                break
            params = counted(stated, wording.lo_open, wording.hi_open)
            out.append(
                NanoProblem(
                    id=f"{pair}-{member[:2]}",
                    family=fam.name,
                    params=params,
                    problem=fill(
                        PAIR_TEMPLATES[fam.name][template].replace("{range}", wording.text), stated, numbers
                    ),
                    answer=fam.answer(params),
                    meta={
                        "family": fam.name,
                        "part": "pairs",
                        "pair": pair,
                        "bounds": member,
                        "phrasing": template,
                        "bound_wording": bounds,
                        "numbers": numbers,
                        "stated": stated,
                        "lo_open": wording.lo_open,
                        "hi_open": wording.hi_open,
                        "seed": seed,
                    },
                )
            )
        i += 1
    return out
