"""ThinC-nano: the paper's claim in miniature, on a CPU.

A generated integer task (`generate`, registered as the `nano` benchmark and training source) and a
template teacher (`thinc_turns`, `nl_turns`, `write_script`; `recovery_plan` says which scripts fail
before they fix, for `build_sft --recovery-share`) whose trajectories the scripted backend
replays through the real sandbox and build_sft's filters. `make nano` runs the whole chain.
"""

from thinc_bench.nano.problems import (
    DEFAULT_SEED,
    FAMILIES,
    FAMILY_NAMES,
    SPLIT_SIZES,
    NanoProblem,
    generate,
    split_of,
)
from thinc_bench.nano.teacher import Recovery, Slip, nl_turns, recovery_plan, thinc_turns, write_script

__all__ = [
    "DEFAULT_SEED",
    "FAMILIES",
    "FAMILY_NAMES",
    "SPLIT_SIZES",
    "NanoProblem",
    "Recovery",
    "Slip",
    "generate",
    "nl_turns",
    "recovery_plan",
    "split_of",
    "thinc_turns",
    "write_script",
]
