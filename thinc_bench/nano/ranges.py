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
size the SFT data has; each range is asked in a matched pair (inclusive and exclusive, one wording
otherwise), so no reading of the bound pays more than the other (session 11's pools, with the two
readings on different numbers, moved the student to whichever reading they paid most). `generate_ranges`
draws test-split numbers from a stream of its own, skips the seen part's guard and the unseen part,
and alternates inclusive and exclusive wordings. Both are worded by the training grammar: the part
measures the reading GRPO was given, not a new wording (`pairs.py` asks in wordings nothing trains on).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterator

from thinc_bench.nano.grammar import TRAIN_RANGES_BY_BOUND, Wording, counted, draw_pair, draw_wording
from thinc_bench.nano.problems import (
    DEFAULT_SEED,
    SPLIT_SIZES,
    NanoProblem,
    claim_test,
    family,
    key,
    split_of,
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
    """The first `n` (default `RL_SIZE`) problems of GRPO's pool: range problems in matched pairs.

    The numbers are the train stream's range problems after the train split's 2000 (train-split
    problems, none of them in `generate("train")`: outside every SFT dataset). Each is asked twice,
    inclusive then exclusive, in one training wording that differs only in the bound
    (`grammar.draw_pair`): the pool has as many of each reading, and on each pair a policy that
    ignores the bound earns the reward once at most, so no convention pays. Both readings' numbers
    hash to the train split and belong to no SFT problem nor an earlier pair. `meta["pair"]` names the
    pair (GRPO keeps its two members in one generation batch) and `meta["bounds"]` the member.
    """
    n = RL_SIZE if n is None else n
    rng = random.Random(f"thinc-nano-rl/{seed}")
    draws = stream("train", seed)
    taken = set()
    for fam, stated, wording in itertools.islice(draws, SPLIT_SIZES["train"]):
        taken |= {key(fam.name, stated), key(fam.name, counted(stated, wording.lo_open, wording.hi_open))}
    out: list[NanoProblem] = []
    for fam, stated, _ in draws:
        if len(out) >= n:
            break
        readings = (stated, counted(stated, True, True))
        keys = {key(fam.name, q) for q in readings}
        if (
            fam.name not in RANGE_FAMILIES
            or keys & taken
            or any(split_of(fam.name, q, seed) != "train" for q in readings)
        ):
            continue
        taken |= keys
        pair = f"nano-rl-pair-{len(out) // 2:04d}"
        for bounds, wording in zip(("inclusive", "exclusive"), draw_pair(fam.name, stated, rng), strict=True):
            if len(out) < n:
                meta = {"part": "rl", "seed": seed, "pair": pair, "bounds": bounds}
                out.append(_problem(f"nano-rl-{len(out):04d}", fam.name, stated, wording, meta))
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
    index = 0
    while True:
        fam = family(RANGE_FAMILIES[index % len(RANGE_FAMILIES)])
        exclusive = index // len(RANGE_FAMILIES) % 2 == 1
        stated = fam.draw(rng)
        wording = draw_wording(fam.name, stated, rng, ranges=TRAIN_RANGES_BY_BOUND[exclusive])
        if not claim_test(fam.name, (stated, counted(stated, wording.lo_open, wording.hi_open)), taken, seed):
            continue
        yield _problem(f"nano-ranges-{index:04d}", fam.name, stated, wording, {})
        index += 1
