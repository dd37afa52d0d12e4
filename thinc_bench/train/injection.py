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

A whole faulted group could still reward avoiding code: a rollout that writes no code never meets
its failure, so while the model cannot yet recover, the copies that skip code would be the ones that
score. So an injected rollout earns its answer's reward only when it recovered
(`rewards.recovered`): it met all k failures and its boxed answer is grounded (the one judge's
grounding rule) in an output printed after the last of them, so the answer comes from code that
ran after the failure, not from prose or a block run before it; otherwise 0. A group that cannot
recover then scores 0 throughout (no advantage, and dynamic sampling drops it) instead of teaching
"don't call code". A sample that ran fewer than k executions is never counted as recovered, as in
eval's Recovery@k.

The failure a training rollout meets is a realistic traceback of that cell, as eval's, but of other
exception kinds (`train.faults`: training's kinds are disjoint from the ones Recovery@k injects), so
Recovery@k after recovery training measures failures the model was never paid to recover from.

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
from thinc_bench.sandbox.config import SandboxConfig
from thinc_bench.train.faults import TRAINING_FAULT_SEED


def training_sandbox_config(sessions: int) -> SandboxConfig:
    """The GRPO rollout's sandbox: `sessions` slots (one per rollout a process runs at once). Its
    injected failures are redrawn from training's kinds by the rollout (`faults.with_training_faults`);
    the sandbox's own draw uses training's salt, so even unwrapped it is never eval's exact text."""
    return SandboxConfig(max_sessions=sessions, fault_seed=TRAINING_FAULT_SEED)


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
