"""ThinC-nano: ThinC's claim in miniature, on a CPU.

A generated integer task and a template teacher (`thinc_turns`, `nl_turns`, `write_script`;
`recovery_plan` says which scripts fail before they fix, for `build_sft --recovery-share`) whose
trajectories the scripted backend replays through the real sandbox and build_sft's filters. `make
nano` runs the whole chain. The task has a train split (`generate("train")`, the `nano_train`
benchmark and training source) and three test parts, each its own benchmark, because one accuracy
cannot tell a learnt skill from learnt sentences: `generate("test")` (`nano`, the training's
phrasings), `generate_unseen` (`nano_unseen`, the same families in test-only phrasings) and
`generate_families` (`nano_families`, families never trained on, made of trained steps). GRPO has
a part of its own: `generate_rl` (`nano_rl`, range problems no SFT dataset holds) to train on and
`generate_ranges` (`nano_ranges`, where its configuration was chosen) and `generate_ranges_confirm`
(`nano_ranges_confirm`, fixed before the run that scores on it) to score it. `generate_part` reaches
all seven by name. No two share a problem.
"""

from thinc_bench.nano.held_out import FAMILIES_SIZE, HELD_OUT_FAMILIES, HELD_OUT_NAMES, generate_families
from thinc_bench.nano.parts import PART_SIZES, Part, generate_part
from thinc_bench.nano.problems import (
    DEFAULT_SEED,
    FAMILIES,
    FAMILY_NAMES,
    SPLIT_SIZES,
    Family,
    NanoProblem,
    generate,
    split_of,
)
from thinc_bench.nano.ranges import (
    CONFIRM_SIZE,
    RANGE_FAMILIES,
    RANGES_SIZE,
    RL_SIZE,
    generate_ranges,
    generate_ranges_confirm,
    generate_rl,
)
from thinc_bench.nano.teacher import Recovery, Slip, nl_turns, recovery_plan, thinc_turns, write_script
from thinc_bench.nano.unseen import UNSEEN_PHRASINGS, UNSEEN_SIZE, UnseenPhrasing, generate_unseen

__all__ = [
    "DEFAULT_SEED",
    "FAMILIES",
    "FAMILIES_SIZE",
    "FAMILY_NAMES",
    "HELD_OUT_FAMILIES",
    "HELD_OUT_NAMES",
    "PART_SIZES",
    "CONFIRM_SIZE",
    "RANGES_SIZE",
    "RANGE_FAMILIES",
    "RL_SIZE",
    "SPLIT_SIZES",
    "UNSEEN_PHRASINGS",
    "UNSEEN_SIZE",
    "Family",
    "NanoProblem",
    "Part",
    "Recovery",
    "Slip",
    "UnseenPhrasing",
    "generate",
    "generate_families",
    "generate_part",
    "generate_ranges",
    "generate_ranges_confirm",
    "generate_rl",
    "generate_unseen",
    "nl_turns",
    "recovery_plan",
    "split_of",
    "thinc_turns",
    "write_script",
]
