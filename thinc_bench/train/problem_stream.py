"""The training problems as a stream of shuffled epochs, for dynamic sampling that changes what is drawn.

DAPO's dynamic sampling (Yu et al. 2025, sec. 3.2; verl's `recipe/dapo`, `algorithm.filter_groups`)
over-generates: a generation batch whose groups all scored alike (solved by every rollout, or by
none) carries no advantage, so more problems are rolled out until the batch holds its full number
of groups with differing rewards. ASTER (arXiv 2602.01204) instead drops problems the policy has
solved before each epoch. Both change which problems a step draws, so the draw cannot be TRL's fixed
dataloader: `ProblemStream` is the run's data order, consumed as the rollout needs it.

The stream is `shuffled_order`'s epochs, drawn end to end (each epoch the same seeded shuffle as the
recipe's static order, so a stream that never refills and never drops draws exactly the rows TRL's
dataloader would), and continues into further shuffled epochs when a stage needs more rows than the
configured `epochs` hold. With `drop_solved`, an epoch leaves out, when it begins, every problem
whose latest group was solved by all its scored rollouts (`mark`); if that would leave nothing, the
epoch keeps every problem. Its state (`state` / `from_state`: epoch, position, the current epoch's
order, the solved set) is what a checkpoint records for an exact resume.

`informative` and `solved` read a step's rewards per group. Pure: no IO, no TRL, no torch.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinc_bench.errors import ConfigError

logger = logging.getLogger(__name__)

MODES = ("off", "filter", "refill", "drop_solved")
"""`dynamic_sampling` settings: TRL as is; zero-variance groups out of the loss (`dynamic_sampling`);
that and DAPO's over-generation to a full batch; that and ASTER's solved problems dropped per epoch."""
STREAM_MODES = frozenset({"refill", "drop_solved"})
"""The modes whose draws `ProblemStream` makes (the others read TRL's fixed order)."""


def parse_mode(value: Any) -> str:
    """A `dynamic_sampling` setting (booleans from older configs: true is `filter`, false `off`).

    Raises:
        ConfigError: not one of MODES.
    """
    if isinstance(value, bool):
        return "filter" if value else "off"
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return "filter" if text == "true" else "off"
    if text not in MODES:
        raise ConfigError(f"dynamic_sampling={value!r}: use one of {', '.join(MODES)}")
    return text


def _groups(rewards: Sequence[float | None], group: int) -> list[list[float]]:
    if group < 1 or len(rewards) % group:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group}")
    return [[r for r in rewards[i : i + group] if r is not None] for i in range(0, len(rewards), group)]


def informative(rewards: Sequence[float | None], group: int) -> list[bool]:
    """Per group of `group` consecutive rows: whether its scored rewards differ (a nonzero advantage)."""
    return [len(set(g)) > 1 for g in _groups(rewards, group)]


def solved(rewards: Sequence[float | None], group: int) -> list[bool]:
    """Per group: whether every scored rollout earned 1 (at least one scored)."""
    return [bool(g) and all(r == 1.0 for r in g) for g in _groups(rewards, group)]


@dataclass
class ProblemStream:
    """The run's problem ids drawn in seeded shuffled epochs, end to end.

    Attributes:
        ids: the problems (deduplicated, in the data's order).
        seed: the run's seed (the same shuffles as `curriculum.shuffled_order`).
        drop_solved: leave solved problems out of each epoch as it begins (ASTER).
    """

    ids: tuple[str, ...]
    seed: int
    drop_solved: bool = False
    epoch: int = 0
    position: int = 0
    solved: set[str] = field(default_factory=set)
    current: list[str] | None = None
    _shuffles: list[list[str]] = field(default_factory=list, repr=False)
    _rng: random.Random | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.ids = tuple(self.ids)
        if not self.ids:
            raise ConfigError("no training problems to draw from; check dataset_name and limit")
        if len(set(self.ids)) != len(self.ids):
            raise ConfigError("problem ids repeat; the stream needs one id per problem (deduplicate)")

    def shuffled(self, epoch: int) -> list[str]:
        """Epoch `epoch` of the static order: the `epoch`-th shuffle of one Random(seed)."""
        if self._rng is None:
            self._rng = random.Random(self.seed)
        while len(self._shuffles) <= epoch:
            order = list(self.ids)
            self._rng.shuffle(order)
            self._shuffles.append(order)
        return self._shuffles[epoch]

    def _begin(self, epoch: int) -> list[str]:
        order = self.shuffled(epoch)
        if not self.drop_solved:
            return list(order)
        kept = [i for i in order if i not in self.solved]
        if not kept:
            logger.warning("every problem is solved: epoch %d keeps all %d of them", epoch, len(order))
            return list(order)
        if len(kept) < len(order):
            logger.info(
                "epoch %d: %d solved problems dropped, %d left", epoch, len(order) - len(kept), len(kept)
            )
        return kept

    def take(self, n: int) -> list[str]:
        """The next `n` problem ids, across epoch boundaries."""
        out: list[str] = []
        while len(out) < n:
            if self.current is None:
                self.current = self._begin(self.epoch)
            need = n - len(out)
            out += self.current[self.position : self.position + need]
            self.position = min(self.position + need, len(self.current))
            if self.position >= len(self.current):
                self.epoch, self.position, self.current = self.epoch + 1, 0, None
        return out

    def mark(self, outcomes: Iterable[tuple[str, bool]]) -> None:
        """Record each problem's latest group: solved (every scored rollout right) or not."""
        for pid, done in outcomes:
            if done:
                self.solved.add(pid)
            else:
                self.solved.discard(pid)

    def state(self) -> dict[str, Any]:
        """Everything a resumed run needs to draw on exactly as this one would (JSON-ready)."""
        return {
            "epoch": self.epoch,
            "position": self.position,
            "current": self.current,
            "solved": sorted(self.solved),
            "drop_solved": self.drop_solved,
            "seed": self.seed,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a recorded `state` (same ids and seed).

        Raises:
            ConfigError: the state is another run's (seed or mode differ) or names unknown problems.
        """
        if state.get("seed") != self.seed or bool(state.get("drop_solved")) != self.drop_solved:
            raise ConfigError(
                "the checkpoint's problem stream was drawn with another seed or dynamic_sampling mode; "
                "resume with the run's own settings"
            )
        known = set(self.ids)
        current = state.get("current")
        unknown = [i for i in [*(current or []), *state.get("solved", [])] if i not in known]
        if unknown:
            raise ConfigError(
                f"the checkpoint's problem stream names {len(unknown)} problems the data lacks (first "
                f"{unknown[0]!r}); resume with the dataset_name, data_dir and limit of the run that wrote it"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.current = None if current is None else list(current)
        self.solved = set(state.get("solved", []))
