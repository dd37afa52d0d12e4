"""GRPO's own part of the nano task: prime ranges, where reading a bound wrong costs the answer.

SFT on the template teacher's 256 trajectories leaves the student weakest on range problems (6 of 16
on 64 seen-part problems, its other families 34 of 48; 25 of 48 on `nano_ranges`: docs/LOG.md,
session 10): it reads a bound into code about as often wrong as right and miscounts with `primepi`
offsets. The exact-match reward separates a group's samples by exactly that, because both ends of
every range are prime: what a GRPO stage can teach which SFT did not. So nano's GRPO trains on range
problems no SFT dataset holds (`generate_rl`) and is scored on range problems nothing trains on
(`generate_ranges`, the `nano_ranges` benchmark).

`generate_rl` is the train split's stream *past* its registered 2000 problems: every nano SFT
dataset is a prefix of those 2000 (`--limit`), so no SFT example is ever a GRPO problem, whatever
size the SFT data has. `generate_ranges` draws test-split numbers from a stream of its own, skips the
seen part's guard and the unseen part, and alternates inclusive and exclusive wordings (the test
split's hash keeps exclusive ranges rare in the seen stream: 3 of its first 16). Both are worded by
the training grammar: the part measures the reading GRPO was given, not a new wording.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterator

from thinc_bench.nano.grammar import TRAIN_RANGES, Wording, counted, draw_wording
from thinc_bench.nano.problems import (
    DEFAULT_SEED,
    SPLIT_SIZES,
    Family,
    NanoProblem,
    claim_test,
    family,
    key,
    stream,
)
from thinc_bench.nano.unseen import _seen_keys, generate_unseen

RANGE_FAMILIES = ("prime_count", "prime_sum")
"""The families whose problems state a range (and its bounds)."""
RANGES_SIZE = 48
"""Problems in the registered `nano_ranges` part: 24 per family, half of them with both ends excluded."""
CONFIRM_SIZE = 96
"""Problems in the registered `nano_ranges_confirm` part: 24 per family and bound."""
RL_SIZE = 512
"""Problems in the registered `nano_rl` pool: more than a CPU GRPO run draws."""


def _problem(
    ident: str, fam: str, stated: dict[str, int], wording: Wording, meta: dict[str, object]
) -> NanoProblem:
    params = counted(stated, wording.lo_open, wording.hi_open)
    return NanoProblem(
        id=ident,
        family=fam,
        params=params,
        problem=wording.text,
        answer=family(fam).answer(params),
        meta={
            "family": fam,
            "phrasing": wording.template,
            "numbers": wording.numbers,
            "stated": stated,
            "lo_open": wording.lo_open,
            "hi_open": wording.hi_open,
            **meta,
        },
    )


def generate_rl(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` (default `RL_SIZE`) range problems of the train stream after the train split's 2000.

    Train-split problems (their numbers hash to train), worded as training words them, none of them in
    `generate("train")`: GRPO's problems, outside every SFT dataset. Inclusive and exclusive ranges
    alternate (the stream draws them 56:44), so no batch of GRPO teaches one reading by its majority.
    """
    n = RL_SIZE if n is None else n
    later = itertools.islice(stream("train", seed), SPLIT_SIZES["train"], None)
    waiting: dict[bool, list[tuple[Family, dict[str, int], Wording]]] = {False: [], True: []}
    out: list[NanoProblem] = []
    for drawn in later:
        if len(out) >= n:
            break
        if drawn[0].name not in RANGE_FAMILIES:
            continue
        waiting[drawn[2].lo_open].append(drawn)
        want = len(out) % 2 == 1  # inclusive first, then exclusive, in turn
        if waiting[want]:
            fam, stated, wording = waiting[want].pop(0)
            out.append(
                _problem(f"nano-rl-{len(out):04d}", fam.name, stated, wording, {"part": "rl", "seed": seed})
            )
    return out


def generate_ranges(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default `RANGES_SIZE`) of the held-out range part.

    Families in turn and, every second pair, the bounds: inclusive, inclusive, exclusive, exclusive,
    so each family is asked both ways. A problem is kept only if its stated and counted numbers both
    hash to the test split and belong to no earlier problem, to the seen part's guard or to the unseen
    part: `nano_ranges` shares no problem with train, `nano_rl`, `nano` or `nano_unseen` (the families
    part asks other families), and a smaller `n` is a prefix of a larger one.
    """
    n = RANGES_SIZE if n is None else n
    return [_part(p, "ranges", seed) for p in itertools.islice(_range_stream(seed), n)]


def generate_ranges_confirm(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default `CONFIRM_SIZE`) of the confirmatory range part.

    The same stream as `nano_ranges`, continued past its `RANGES_SIZE` problems, so the two parts are
    disjoint by construction and alike in kind. `nano_ranges` is where GRPO's configuration was
    chosen (sessions 10-11 tried seven on it), so its gain is biased upward by that choice; this part
    was fixed before the chain that scores on it ran and no experiment read it: the estimate of what
    the chosen GRPO does.
    """
    n = CONFIRM_SIZE if n is None else n
    later = itertools.islice(_range_stream(seed), RANGES_SIZE, RANGES_SIZE + n)
    return [_part(p, "ranges_confirm", seed) for p in later]


def _part(problem: NanoProblem, part: str, seed: int) -> NanoProblem:
    return dataclasses.replace(problem, meta={**problem.meta, "part": part, "seed": seed})


def _range_stream(seed: int) -> Iterator[NanoProblem]:
    """Held-out range problems without end; both range parts are slices of it."""
    rng = random.Random(f"thinc-nano-ranges/{seed}")
    taken = set(_seen_keys(seed)) | {key(p.family, p.params) for p in generate_unseen(None, seed)}
    by_bounds = {
        exclusive: tuple(r for r in TRAIN_RANGES if r.lo_open == exclusive) for exclusive in (False, True)
    }
    index = 0
    while True:
        fam = family(RANGE_FAMILIES[index % len(RANGE_FAMILIES)])
        exclusive = index // len(RANGE_FAMILIES) % 2 == 1
        stated = fam.draw(rng)
        wording = draw_wording(fam.name, stated, rng, ranges=by_bounds[exclusive])
        if not claim_test(fam.name, (stated, counted(stated, wording.lo_open, wording.hi_open)), taken, seed):
            continue
        yield _problem(f"nano-ranges-{index:04d}", fam.name, stated, wording, {})
        index += 1
