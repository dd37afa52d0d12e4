"""What a long job shows while it runs: trajectories finished, and the tokens generated in between.

A trajectory can take minutes on a CPU (SmolLM2 at 1-2 tokens/s under load), and every trajectory of
a small run is in flight at once, so a bar that counts only finished trajectories sits at 0 until the
first one ends: a hang and a slow machine look the same. `Progress` is the pure half: the counts,
the token rate and an estimate of the time left, from numbers it is given (a clock can be passed
in). `ProgressBar` is the terminal half: a tqdm bar that reads the generator's token counter
(`Generator.generated_tokens`, which backends advance as they decode) once a second, so the bar moves
with tokens, shows tokens/s and an ETA once tokens flow, and writes one line when nothing has moved
for a while. The engines (backends, the rollout loop) only count; nothing below the entry points
writes to the terminal but this bar.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["STALL_S", "Progress", "ProgressBar", "format_duration"]

STALL_S = 60.0
"""Seconds without a generated token or a finished trajectory before the bar says so (and again
after each further period): longer than a code block's default time limit (10 s) and a grading
timeout, shorter than anyone waits before wondering."""
TICK_S = 1.0
"""How often the bar reads the token counter on a terminal."""
LOG_TICK_S = 30.0
"""How often it does when stderr is a file (a log of `make nano`'s stages): a line a second would
make the log the size of the run."""


def format_duration(seconds: float) -> str:
    """`42s`, `3m05s`, `1h02m`: short enough for a bar."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Progress:
    """A job's trajectories and tokens so far, and what they say about the rest.

    `tokens` is every token generated since the start (in flight included, as the generator counts
    them); `finished_tokens` those of the finished trajectories. The time left is the tokens still to
    generate (`remaining_tokens`) at the rate since the first token; an ETA from the budget rather than
    from finished trajectories is an upper bound, shown as `<=`.
    """

    total: int
    max_tokens: int | None = None
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    tokens: int = 0
    finished_tokens: int = 0
    correct: int = 0
    scored: int = 0
    started: float = field(default=0.0)
    first_token_at: float | None = None
    last_change: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.started = self.last_change = self.clock()

    def saw_tokens(self, tokens: int) -> None:
        """The generator's count now (since the job started); a count that moved is a sign of life."""
        if tokens > self.tokens:
            now = self.clock()
            if self.first_token_at is None:
                self.first_token_at = now
            self.tokens, self.last_change = tokens, now

    def finished(self, tokens: int, correct: bool | None = None) -> None:
        """One trajectory finished with `tokens` generated tokens (`correct` None: not scored)."""
        self.done += 1
        self.finished_tokens += tokens
        self.tokens = max(self.tokens, self.finished_tokens)
        self.last_change = self.clock()
        if correct is not None:
            self.scored += 1
            self.correct += bool(correct)

    def rate(self) -> float | None:
        """Tokens per second since the first token (None before one, or within its first second)."""
        if self.first_token_at is None:
            return None
        elapsed = self.clock() - self.first_token_at
        return self.tokens / elapsed if elapsed >= 1.0 else None

    def remaining_tokens(self) -> tuple[float, bool] | None:
        """(tokens still to generate, whether that is an upper bound), or None without a basis.

        Each trajectory left is expected to generate the finished ones' mean, less what those in
        flight have generated already; when there is no mean yet, or the ones in flight have passed
        it, the budget bounds it instead (`max_tokens` each), an upper bound."""
        left = self.total - self.done
        if left <= 0:
            return 0.0, False
        in_flight = max(0, self.tokens - self.finished_tokens)
        if self.done:
            expected = left * self.finished_tokens / self.done - in_flight
            if expected > 0:
                return expected, False
        if self.max_tokens:
            return max(0.0, float(left * self.max_tokens - in_flight)), True
        return None

    def eta(self) -> tuple[float, bool] | None:
        """(seconds left, whether an upper bound), or None while there is no rate or no estimate."""
        rate, remaining = self.rate(), self.remaining_tokens()
        if not rate or remaining is None or self.done >= self.total:
            return None
        return remaining[0] / rate, remaining[1]

    def fraction(self) -> float:
        """Share of the job done: trajectories finished, or tokens over tokens expected, the larger."""
        if not self.total:
            return 1.0
        by_count = self.done / self.total
        remaining = self.remaining_tokens()
        if remaining is None or not self.tokens:
            return by_count
        return max(by_count, self.tokens / (self.tokens + remaining[0]))

    def stalled_for(self) -> float:
        """Seconds since a token was generated or a trajectory finished."""
        return self.clock() - self.last_change

    def summary(self) -> str:
        """The bar's text: `1/4 traj, 1,234 tok, 12.3 tok/s, ETA <=5m00s, acc 0.500`."""
        parts = [f"{self.done}/{self.total} traj", f"{self.tokens:,} tok"]
        rate = self.rate()
        if rate is not None:
            parts.append(f"{rate:.1f} tok/s")
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {'<=' if eta[1] else '~'}{format_duration(eta[0])}")
        if self.scored:
            parts.append(f"acc {self.correct / self.scored:.3f}")
        return ", ".join(parts)


class ProgressBar:
    """A tqdm bar over `progress`, refreshed from `tokens()` (a counter read) every `TICK_S`.

    Use `async with bar.ticking():` around the work (an asyncio task reads the counter), or call
    `tick()` yourself (every `LOG_TICK_S` when stderr is not a terminal). `leave=False` clears it at the end (GRPO's per-step rollouts)."""

    def __init__(
        self,
        progress: Progress,
        label: str,
        tokens: Callable[[], int] | None = None,
        *,
        leave: bool = True,
        disable: bool = False,
        stall_s: float = STALL_S,
    ) -> None:
        from tqdm import tqdm

        self.progress = progress
        self.tokens = tokens
        self.stall_s = stall_s
        self.disable = disable
        self.interval = TICK_S if sys.stderr.isatty() else LOG_TICK_S
        self._warned = 0
        self._bar: Any = tqdm(
            total=progress.total,
            desc=label,
            leave=leave,
            disable=disable,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]",
        )
        self.tick()

    def tick(self) -> None:
        """Read the token counter, move the bar, and say so once per `stall_s` that nothing moved."""
        if self.tokens is not None:
            self.progress.saw_tokens(self.tokens())
        bar = self._bar
        bar.n = max(bar.n, round(self.progress.fraction() * self.progress.total, 3))  # never backwards
        bar.set_postfix_str(self.progress.summary(), refresh=False)
        bar.refresh()
        stalled = self.progress.stalled_for()
        periods = int(stalled // self.stall_s) if self.progress.done < self.progress.total else 0
        if periods > self._warned and not self.disable:
            self._warned = periods
            in_flight = self.progress.total - self.progress.done
            bar.write(
                f"{bar.desc}: no token generated and no trajectory finished for {format_duration(stalled)} "
                f"({in_flight} left: generating, running code or grading); still waiting",
                file=sys.stderr,
            )
        elif periods < self._warned:
            self._warned = periods

    def finished(self, tokens: int, correct: bool | None = None) -> None:
        self.progress.finished(tokens, correct)
        self.tick()

    @contextlib.asynccontextmanager
    async def ticking(self) -> AsyncIterator[ProgressBar]:
        """Tick every `TICK_S` on the running loop while the body runs; close the bar after it."""

        async def tick_forever() -> None:
            while True:
                await asyncio.sleep(self.interval)
                self.tick()

        task = asyncio.ensure_future(tick_forever())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.close()

    def close(self) -> None:
        self.tick()
        self._bar.close()
