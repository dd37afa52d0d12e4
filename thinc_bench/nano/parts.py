"""The nano task's parts by name, so callers (the benchmark registry) need not know which module draws which.

`train` is what the recipes train on (the train split); `seen` (the `nano` benchmark, the test split)
asks the same families in the training's phrasings; `unseen` asks them in phrasings training never
uses; `families` asks families training never draws, made of trained steps. `rl` is GRPO's pool of
range problems past the train split, `ranges` the held-out range problems its configuration was
chosen on, `ranges_confirm` more of them, fixed before the run that scores on them. The test
parts share no problem with train, `rl` nor each other, so each measures one kind of generalisation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from thinc_bench.nano.held_out import FAMILIES_SIZE, generate_families
from thinc_bench.nano.pairs import PAIRS_SIZE, generate_pairs
from thinc_bench.nano.problems import DEFAULT_SEED, SPLIT_SIZES, NanoProblem, generate
from thinc_bench.nano.ranges import (
    CONFIRM_SIZE,
    RANGES_SIZE,
    RL_SIZE,
    generate_ranges,
    generate_ranges_confirm,
    generate_rl,
)
from thinc_bench.nano.unseen import UNSEEN_SIZE, generate_unseen

Part = Literal["train", "seen", "unseen", "families", "rl", "ranges", "ranges_confirm", "pairs"]
PART_SIZES: Mapping[str, int] = {
    "train": SPLIT_SIZES["train"],
    "seen": SPLIT_SIZES["test"],
    "unseen": UNSEEN_SIZE,
    "families": FAMILIES_SIZE,
    "rl": RL_SIZE,
    "ranges": RANGES_SIZE,
    "ranges_confirm": CONFIRM_SIZE,
    "pairs": PAIRS_SIZE,
}
"""Problems per part as registered: train 2000, seen 100, unseen 64, families 48, rl 512, ranges 48,
ranges_confirm 96, pairs 96 (48 pairs)."""


def generate_part(part: Part, n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default: the registered size) of one part, its name in each `meta`.

    Raises:
        ValueError: an unknown part.
    """
    if part == "unseen":
        return generate_unseen(n, seed)
    if part == "families":
        return generate_families(n, seed)
    if part == "rl":
        return generate_rl(n, seed)
    if part == "ranges":
        return generate_ranges(n, seed)
    if part == "ranges_confirm":
        return generate_ranges_confirm(n, seed)
    if part == "pairs":
        return generate_pairs(n, seed)
    if part not in ("train", "seen"):
        raise ValueError(f"nano part {part!r}; use one of {', '.join(PART_SIZES)}")
    problems = generate("test" if part == "seen" else "train", n, seed)
    return [dataclasses.replace(p, meta={**p.meta, "part": part}) for p in problems]
