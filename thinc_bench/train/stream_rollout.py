"""Dynamic sampling as published: DAPO's over-generation to a full batch, or ASTER's solved problems dropped.

`StreamRollout` is `ThincRollout` drawing its problems from the run's `ProblemStream` instead of the
prompts TRL hands it (TRL's slice only says how many rows this process returns: `quota` groups of
`num_generations`). Each process holds whole groups (the recipe checks it), so a group's rewards,
and whether they differ, are known on the process that rolled it out.

- `refill` (DAPO, verl's `filter_groups`): round 0 rolls out the generation batch's problems (the
  next `processes x quota` of the stream, each process its contiguous share); a group whose scored
  rewards all agree carries no advantage. While any process holds fewer than `quota` groups with
  differing rewards, each such process rolls out `quota` more problems, the next of the stream in
  process order (one collective per round tells every process who is short, so all draw the same
  stream). A process keeps its first `quota` informative groups (extra ones are dropped, as verl
  truncates its batch); after `max_rounds` rounds a process still short fills its batch with the
  uninformative groups it drew first, which the zero-variance filter then leaves out of the loss,
  so a step never stalls (the shortfall is logged).
- `drop_solved` (ASTER): one round, the next batch of the stream; each group's outcome (every
  scored rollout right, or not) is shared with every process and marks the problem, and the stream
  leaves solved problems out of each later epoch as it begins.

Logged per generation batch (all processes): `dynamic_sampling/generated_prompts` (groups rolled
out), `dynamic_sampling/rounds`, `dynamic_sampling/shortfall` (groups a process had to fill with
uninformative ones); the effective prompts of the update, `dynamic_sampling/effective_prompts`, come
from the zero-variance filter (`dynamic_sampling`), the same count in every mode. Sampling seeds
follow `sampling_seed` with the round as the call index, so a resumed run redraws exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinc_bench.backends.base import Generator
from thinc_bench.errors import ConfigError
from thinc_bench.train.problem_stream import STREAM_MODES, ProblemStream, informative, solved
from thinc_bench.train.rewards import row_rewards
from thinc_bench.train.rollout_func import ThincRollout, global_step, sampling_seed

GENERATED_METRIC = "dynamic_sampling/generated_prompts"
ROUNDS_METRIC = "dynamic_sampling/rounds"
SHORTFALL_METRIC = "dynamic_sampling/shortfall"


@dataclass
class _Group:
    """One problem's `num_generations` rows: their rollout columns and whether their rewards differ."""

    problem_id: str
    columns: dict[str, Any]
    informative: bool
    solved: bool


def _gather(trainer: Any, value: Any) -> list[Any]:
    """`value` of every process, in process order (just `[value]` in one process)."""
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None or accelerator.num_processes == 1:
        return [value]
    from accelerate.utils import gather_object

    return list(gather_object([value]))


def _concat(groups: list[_Group]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in groups[0].columns:
        values = [g.columns[key] for g in groups]
        out[key] = None if any(v is None for v in values) else [x for v in values for x in v]
    return out


@dataclass
class StreamRollout(ThincRollout):
    """`ThincRollout` over the run's problem stream, with DAPO's refill or ASTER's drop (module docstring).

    Attributes:
        stream: the run's problem stream (its state goes into every checkpoint).
        texts: problem id -> problem text (every id of the stream).
        refill: over-generate until each process holds `quota` informative groups (else: drop_solved).
        max_rounds: generation rounds per batch at most, the first included (verl's max_num_gen_batches).
        num_generations: rows per group; None: the trainer's.
    """

    stream: ProblemStream | None = None
    texts: dict[str, str] = field(default_factory=dict)
    refill: bool = True
    max_rounds: int = 4
    num_generations: int | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Roll out this process's share of the next problems of the stream (see the module docstring).

        Raises:
            ConfigError: the process's rows are not whole groups, or a stream id has no text or answer.
        """
        if self.stream is None:
            raise ConfigError("StreamRollout needs the run's problem stream")
        group = int(self.num_generations or trainer.num_generations)
        if len(prompts) % group:
            raise ConfigError(
                f"{len(prompts)} rows per process do not hold whole groups of {group}; dynamic_sampling "
                "refill and drop_solved need per_device_train_batch_size x steps_per_generation to be a "
                "multiple of num_generations"
            )
        want_logprobs = bool(getattr(trainer, "use_vllm", False))
        with self._engine(trainer) as (generator, owned):
            groups, stats = asyncio.run(
                self._rounds(trainer, generator, owned, len(prompts) // group, group, want_logprobs)
            )
        metrics = getattr(trainer, "_metrics", None)
        if metrics is not None:
            for name, value in stats.items():
                metrics["train"][name].append(float(value))
        return _concat(groups)

    @contextlib.contextmanager
    def _engine(self, trainer: Any) -> Iterator[tuple[Generator, bool]]:
        """The generator and whether this call owns it (closes it when its rounds are done)."""
        if self.generator is not None:
            yield self.generator, False
            return
        seed = None if getattr(trainer, "state", None) is None else sampling_seed(trainer, 0)
        with self._policy_generator(trainer, seed) as generator:
            yield generator, True

    async def _rounds(
        self, trainer: Any, generator: Generator, owned: bool, quota: int, group: int, want_logprobs: bool
    ) -> tuple[list[_Group], dict[str, int]]:
        try:
            return await self._draw(trainer, generator, quota, group, want_logprobs)
        finally:
            if owned:
                await generator.aclose()

    async def _draw(
        self, trainer: Any, generator: Generator, quota: int, group: int, want_logprobs: bool
    ) -> tuple[list[_Group], dict[str, int]]:
        assert self.stream is not None
        rank = int(getattr(getattr(trainer, "accelerator", None), "process_index", 0) or 0)
        world = len(_gather(trainer, rank))
        step = global_step(trainer)
        drawn = self.stream.take(world * quota)
        mine_ids = drawn[rank * quota : (rank + 1) * quota]
        mine: list[_Group] = []
        generated, rounds = 0, 0
        while True:
            if mine_ids:
                mine += await self._roll(mine_ids, group, generator, trainer, step, rounds, want_logprobs)
            rounds += 1
            counts = _gather(trainer, (sum(g.informative for g in mine), len(mine_ids)))
            generated += sum(c[1] for c in counts)
            short = [r for r, (kept, _) in enumerate(counts) if kept < quota]
            if not self.refill or not short or rounds >= self.max_rounds:
                break
            drawn = self.stream.take(len(short) * quota)
            at = short.index(rank) if rank in short else None
            mine_ids = [] if at is None else drawn[at * quota : (at + 1) * quota]
        if not self.refill:  # drop_solved: every process learns every group's outcome
            outcomes = [(g.problem_id, g.solved) for g in mine]
            self.stream.mark(o for part in _gather(trainer, outcomes) for o in part)
        keep = [g for g in mine if g.informative][:quota]
        shortfall = quota - len(keep)
        keep += [g for g in mine if not g.informative][:shortfall]
        chosen = [g for g in mine if any(g is k for k in keep)]  # in the order drawn
        self.log_drawn(
            {
                "step": step,
                "problems": [g.problem_id for g in chosen for _ in range(group)],
                "generated": [g.problem_id for g in mine],
            },
            [k for g in chosen for k in g.columns.get("inject_k") or [0] * group],
        )
        shortfalls = sum(_gather(trainer, shortfall)) if self.refill else 0
        return chosen, {GENERATED_METRIC: generated, ROUNDS_METRIC: rounds, SHORTFALL_METRIC: shortfalls}

    async def _roll(
        self,
        ids: list[str],
        group: int,
        generator: Generator,
        trainer: Any,
        step: int,
        round_index: int,
        want_logprobs: bool,
    ) -> list[_Group]:
        """Roll out `group` copies of each problem; grade them; split the columns per group."""
        missing = [i for i in ids if i not in self.texts or self.texts[i] not in self.answers]
        if missing:
            raise ConfigError(f"the problem stream drew {missing[0]!r}, which has no text or gold answer")
        problems = [self.texts[i] for i in ids for _ in range(group)]
        self._calls += 1  # request ids name the round: a problem drawn again later is a new request
        faults = self.faults(step, problems)
        seed = None if getattr(trainer, "state", None) is None else sampling_seed(trainer, round_index)
        main = bool(getattr(getattr(trainer, "accelerator", None), "is_local_main_process", True))
        label = f"rollouts, step {step + 1}, round {round_index + 1}" if self.progress and main else None
        results = await self._run_all(
            problems, faults, generator, want_logprobs, seed, close=False, label=label
        )
        columns = self.columns(problems, faults, results, want_logprobs)
        columns["answer"] = [self.answers[p] for p in problems]  # TRL's dataset row is not this problem
        rewards = row_rewards(columns["grade_status"], columns["thinc_text"], **columns)
        flags, done = informative(rewards, group), solved(rewards, group)
        out = []
        for g, pid in enumerate(ids):
            part = {k: None if v is None else v[g * group : (g + 1) * group] for k, v in columns.items()}
            out.append(_Group(pid, part, flags[g], done[g]))
        return out


def problem_stream(
    mode: str, ids: Sequence[str], seed: int, resume_from: str | Path | None
) -> ProblemStream | None:
    """The run's problem stream for a stream mode (None for `off` and `filter`), restored from the
    checkpoint a run resumes from.

    Raises:
        ConfigError: the checkpoint records no stream (another mode wrote it), or another run's.
    """
    from thinc_bench.train.resume import read_state

    if mode not in STREAM_MODES:
        return None
    stream = ProblemStream(tuple(ids), seed, drop_solved=mode == "drop_solved")
    if resume_from is not None:
        recorded = (read_state(resume_from) or {}).get("problem_stream")
        if recorded is None:
            raise ConfigError(
                f"{resume_from} records no problem stream (written with dynamic_sampling off or filter); "
                "resume with that run's dynamic_sampling, or use another --output_dir"
            )
        stream.restore(recorded)
    return stream


def build_rollout(
    sandbox: Any,
    limits: Any,
    system_prompt: str,
    problems: Sequence[Any],
    *,
    stream: ProblemStream | None,
    refill: bool,
    max_rounds: int,
    **options: Any,
) -> ThincRollout:
    """The recipe's rollout over `problems` (each with `id`, `problem`, `answer`): `ThincRollout` on
    TRL's order, or `StreamRollout` on `stream` (refill or drop_solved); `options` as ThincRollout's."""
    common = {
        "problem_ids": {p.problem: p.id for p in problems},
        "answers": {p.problem: p.answer for p in problems},
        **options,
    }
    if stream is None:
        return ThincRollout(sandbox, limits, system_prompt, **common)
    texts = {p.id: p.problem for p in problems}
    return StreamRollout(
        sandbox,
        limits,
        system_prompt,
        **common,
        stream=stream,
        texts=texts,
        refill=refill,
        max_rounds=max_rounds,
    )
