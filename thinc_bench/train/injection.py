"""Injected execution failures in GRPO rollouts: which groups get them and how many (recovery training).

Eval's Recovery@k fails the first k code executions of a trajectory (`Sandbox.session(inject_failures=k)`:
the code is not run and the output is `SandboxConfig.fault_output`); training uses that same session
mechanism, on a share of the rollouts. This module only decides which rollouts and how many failures.

Whole GRPO groups are faulted, never some copies of a prompt: an injected failure is the
environment's doing, not the model's, and the tokens before it are drawn exactly as in a clean copy.
In a mixed group the faulted copies fail more often, so their shared prefix (the plan, the first
block) would get negative advantages for bad luck and the clean copies positive ones; with the whole
group faulted, the group's baseline is the faulted success rate and the advantage ranks only what
the model did after the failure (rewrote the block or not).

The choice is a pure function of the run's seed, the global step and the problem text: the same on
every rank (a group may be spread over processes), the same on a resumed run, independent of the
engine's batching. Each group is faulted with probability `share` (so the injected share of one
step varies around it; the logs show the realised one), and k is drawn uniformly from `ks`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thinc_bench.errors import ConfigError


def parse_share(value: Any, where: str = "inject_failures_share") -> float:
    """A share of rollouts in [0, 1].

    Raises:
        ConfigError: not a number in [0, 1].
    """
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        share = float(value)
    except (TypeError, ValueError):
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"{where}={value!r}: use a share of rollouts between 0 and 1, e.g. 0.5")
    return share


def parse_failure_counts(value: Any, where: str = "inject_failures_k") -> tuple[int, ...]:
    """Failure counts k to draw from: an int, a comma list ("1,2,3", as eval's --recovery-k) or a list.

    Raises:
        ConfigError: empty, or a count that is not an integer >= 1.
    """
    items: Sequence[Any] = (
        value if isinstance(value, list | tuple) else str(value).split(",") if value is not None else []
    )
    try:
        counts = tuple(int(str(i).strip()) for i in items if not isinstance(i, bool))
    except ValueError:
        counts = ()
    if not counts or len(counts) != len(items) or min(counts) < 1:
        raise ConfigError(f"{where}={value!r}: use a comma list of integers >= 1, e.g. 1 or 1,2,3")
    return counts


@dataclass(frozen=True)
class FailureInjection:
    """Which GRPO groups get injected failures, and how many.

    Attributes:
        share: probability that a group (all copies of one prompt at one step) is faulted; 0 is off.
        ks: failure counts a faulted group draws from (uniformly); every copy gets the same k.
        seed: the run's seed (GRPOConfig's), so another seed faults other groups.
    """

    share: float = 0.0
    ks: tuple[int, ...] = (1,)
    seed: int = 0

    def __post_init__(self) -> None:
        parse_share(self.share)
        parse_failure_counts(list(self.ks))

    @property
    def active(self) -> bool:
        """Whether any rollout can be faulted."""
        return self.share > 0

    def failures(self, step: int, problem: str) -> int:
        """Failures injected into every copy of `problem` rolled out at global step `step` (0: clean)."""
        if not self.active:
            return 0
        digest = hashlib.sha256(f"{self.seed}\0{step}\0{problem}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        if draw >= self.share:
            return 0
        return self.ks[int.from_bytes(digest[8:16], "big") % len(self.ks)]

    def record(self) -> dict[str, Any]:
        """The settings as the checkpoint records them."""
        return {"share": self.share, "k": list(self.ks)}
