"""The GRPO curriculum: stages that raise the context and the tool-call limit as training goes on.

A recipe YAML holds TRL's settings plus one `curriculum:` key, a list of stages, each with a name,
`max_steps` (generation batches: a curriculum step; None on the last stage: train on what is left of
the data), `max_tokens` (the completion budget of one rollout, model and interpreter tokens alike;
the prompt is not counted) and `max_tool_calls`; optionally `inject_failures_share` and
`inject_failures_k`, the stage's own recovery-training settings (`train.injection`; absent: the
recipe's). `split_recipe_config` separates the two so
`TrlParser` sees only its own keys (an unknown key stays an error there).

One trainer runs every stage (one optimizer, one learning-rate schedule). A stage step is one
generation batch (rollout batch: every completion sampled from one policy), on which the trainer
takes `updates` optimizer steps, each on a slice of it; `plan_stages` turns the stages into global
optimizer-step ranges and consecutive slices of one shuffled problem order (`shuffled_order`) that
runs over the data `epochs` times, each epoch shuffled anew, so the stages draw on across epochs.
`write_order` records it in the output folder so `--start_stage` resumes on exactly the problems the
run would have drawn (`read_order`). Pure functions plus the one JSON file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from thinc_bench.errors import ConfigError
from thinc_bench.train.injection import FailureInjection, parse_failure_counts, parse_share

CURRICULUM_KEY = "curriculum"
"""The YAML key that holds the stage list; everything else in the file belongs to TrlParser."""

_STAGE_KEYS = frozenset(
    {"name", "max_steps", "max_tokens", "max_tool_calls", "inject_failures_share", "inject_failures_k"}
)


@dataclass(frozen=True)
class Stage:
    """One curriculum stage.

    Attributes:
        name: label used for the stage's output folder (`OUTPUT_DIR/<name>`).
        max_steps: generation batches of this stage (curriculum steps; each is `updates` optimizer
            steps); None trains on the rest of the data (last stage only).
        max_tokens: completion tokens of one rollout (model and interpreter tokens alike; the prompt
            is not counted).
        max_tool_calls: code executions allowed per rollout.
        inject_failures_share: share of this stage's GRPO groups whose first k executions fail
            (`train.injection`); None: the recipe's setting.
        inject_failures_k: the failure counts k those groups draw from; None: the recipe's setting.
    """

    name: str
    max_steps: int | None
    max_tokens: int
    max_tool_calls: int
    inject_failures_share: float | None = None
    inject_failures_k: tuple[int, ...] | None = None

    def injection(self, default: FailureInjection) -> FailureInjection:
        """The stage's failure injection: its own share and counts where set, else the recipe's."""
        return FailureInjection(
            default.share if self.inject_failures_share is None else self.inject_failures_share,
            default.ks if self.inject_failures_k is None else self.inject_failures_k,
            default.seed,
        )


@dataclass(frozen=True)
class Curriculum:
    """The ordered stages of one GRPO run."""

    stages: tuple[Stage, ...]

    def index(self, name: str) -> int:
        """Position of the stage called `name`.

        Raises:
            ConfigError: no stage has that name.
        """
        names = [s.name for s in self.stages]
        if name not in names:
            raise ConfigError(f"curriculum has no stage {name!r}; its stages: {', '.join(names)}")
        return names.index(name)


def _stage(raw: Any, position: int, origin: str, last: bool) -> Stage:
    where = f"{origin}: curriculum stage {position + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is {raw!r}; write a mapping with keys {', '.join(sorted(_STAGE_KEYS))}")
    unknown = sorted(set(raw) - _STAGE_KEYS)
    missing = sorted({"name", "max_tokens", "max_tool_calls"} - set(raw))
    if unknown or missing:
        raise ConfigError(f"{where}: unknown keys {unknown}, missing keys {missing}; fix the YAML")
    steps = raw.get("max_steps")
    if steps is None and not last:
        raise ConfigError(f"{where}: only the last stage may omit max_steps (it trains on the rest)")
    for key, value in (
        ("max_steps", steps),
        ("max_tokens", raw["max_tokens"]),
        ("max_tool_calls", raw["max_tool_calls"]),
    ):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{where}: {key}={value!r}; use a positive integer")
    share, ks = raw.get("inject_failures_share"), raw.get("inject_failures_k")
    return Stage(
        str(raw["name"]),
        steps,
        int(raw["max_tokens"]),
        int(raw["max_tool_calls"]),
        None if share is None else parse_share(share, f"{where}: inject_failures_share"),
        None if ks is None else parse_failure_counts(ks, f"{where}: inject_failures_k"),
    )


def parse_curriculum(raw: Any, origin: str = "<config>") -> Curriculum:
    """Validate a `curriculum:` value (a list of stage mappings).

    Raises:
        ConfigError: not a non-empty list, a malformed stage, duplicate names, or a shrinking budget.
    """
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{origin}: `{CURRICULUM_KEY}` must be a non-empty list of stages")
    stages = tuple(_stage(s, i, origin, i == len(raw) - 1) for i, s in enumerate(raw))
    if len({s.name for s in stages}) != len(stages):
        raise ConfigError(f"{origin}: curriculum stage names repeat; give each stage its own name")
    for before, after in zip(stages, stages[1:], strict=False):
        if after.max_tokens < before.max_tokens:
            raise ConfigError(
                f"{origin}: stage {after.name!r} lowers max_tokens ({before.max_tokens} -> "
                f"{after.max_tokens}); a curriculum only raises the context"
            )
    return Curriculum(stages)


def split_recipe_config(path: str | Path) -> tuple[dict[str, Any], Curriculum | None]:
    """Read a recipe YAML and split it into TrlParser's mapping and the curriculum (None if absent).

    Raises:
        ConfigError: the file is missing, not a YAML mapping, or its curriculum is malformed.
    """
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"recipe config {path}: cannot read it ({exc}); pass an existing YAML file"
        ) from exc
    if not isinstance(config, dict):
        raise ConfigError(f"recipe config {path} is not a YAML mapping of settings")
    raw = config.pop(CURRICULUM_KEY, None)
    return config, (None if raw is None else parse_curriculum(raw, str(path)))


def load_curriculum(path: str | Path) -> Curriculum:
    """The curriculum of a recipe YAML.

    Raises:
        ConfigError: the file has no valid `curriculum:` key.
    """
    _, curriculum = split_recipe_config(path)
    if curriculum is None:
        raise ConfigError(f"recipe config {path} has no `{CURRICULUM_KEY}:` key; add the stage list")
    return curriculum


ORDER_FILE = "curriculum_order.json"
"""The run's shuffled problem order and stage slices, written in the output folder at a fresh start."""


@dataclass(frozen=True)
class StagePlan:
    """Where one stage sits in the run: its global optimizer steps and its slice of the problem order.

    Attributes:
        stage: the stage's settings.
        first_step: optimizer steps taken before this stage (global step at its start).
        steps: optimizer steps of this stage (`batches` x updates per generation batch).
        first_row: position in the shuffled order of the stage's first problem.
        rows: problems the stage consumes (`batches` x prompts per generation batch).
        batches: generation batches of this stage, its curriculum steps (resolved for the last stage).
    """

    stage: Stage
    first_step: int
    steps: int
    first_row: int
    rows: int
    batches: int

    @property
    def end_step(self) -> int:
        """The global step at which this stage is done (its checkpoint is saved there)."""
        return self.first_step + self.steps


def plan_stages(
    curriculum: Curriculum, n_rows: int, prompts_per_batch: int, updates_per_batch: int = 1
) -> tuple[StagePlan, ...]:
    """Lay the stages end to end over the shuffled order (`n_rows` problems, every epoch of it).

    A stage's `max_steps` counts generation batches; each takes the next `prompts_per_batch` problems
    of the order and `updates_per_batch` optimizer steps. The last stage without `max_steps` takes
    every whole generation batch that is left (fewer than `prompts_per_batch` rows stay unused). No
    row is drawn twice, so within one epoch no stage repeats another's problems.

    Raises:
        ConfigError: a bad batch layout, a stage that needs more rows than are left, or a last stage
            left with no whole generation batch.
    """
    if prompts_per_batch < 1 or updates_per_batch < 1:
        raise ConfigError(
            f"{prompts_per_batch} prompts and {updates_per_batch} updates per generation batch; the generation "
            "batch must hold at least num_generations completions and one optimizer step"
        )
    plans: list[StagePlan] = []
    step = row = 0
    for stage in curriculum.stages:
        left = n_rows - row
        batches = stage.max_steps if stage.max_steps is not None else left // prompts_per_batch
        if batches < 1 or batches * prompts_per_batch > left:
            raise ConfigError(
                f"stage {stage.name!r} needs {max(batches, 1)} steps x {prompts_per_batch} prompts but only {left} "
                f"of {n_rows} rows are left; raise epochs, use more data, fewer steps or a smaller batch"
            )
        steps = batches * updates_per_batch
        plans.append(StagePlan(stage, step, steps, row, batches * prompts_per_batch, batches))
        step, row = step + steps, row + batches * prompts_per_batch
    return tuple(plans)


def shuffled_order(ids: Sequence[str], seed: int, epochs: int = 1) -> list[str]:
    """The problem ids in the run's seeded order, `epochs` passes over them, each shuffled anew.

    The same seed and ids always give the same order; the first epoch is the same for every `epochs`.

    Raises:
        ConfigError: an id repeats (deduplicate the source first), or `epochs` is below 1.
    """
    if len(set(ids)) != len(ids):
        raise ConfigError("problem ids repeat; the curriculum order needs one id per problem (deduplicate)")
    if epochs < 1:
        raise ConfigError(f"epochs={epochs}; pass at least one pass over the data")
    rng, order = random.Random(seed), []
    for _ in range(epochs):
        epoch = list(ids)
        rng.shuffle(epoch)
        order += epoch
    return order


def write_order(path: str | Path, order: Sequence[str], plans: Sequence[StagePlan], seed: int) -> None:
    """Record the order and each stage's slice of it (JSON, readable by people and `read_order`)."""
    stages = [
        {
            "name": p.stage.name,
            "generation_batches": p.batches,
            "first_step": p.first_step,
            "steps": p.steps,
            "rows": [p.first_row, p.first_row + p.rows],
        }
        for p in plans
    ]
    Path(path).write_text(json.dumps({"seed": seed, "stages": stages, "order": list(order)}, indent=1) + "\n")


def read_order(path: str | Path) -> list[str]:
    """The problem order a run recorded.

    Raises:
        ConfigError: no such file (resume only in the output folder of the run that wrote it) or a bad one.
    """
    path = Path(path)
    try:
        order = json.loads(path.read_text(encoding="utf-8"))["order"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"cannot read the curriculum order {path} ({exc}); --start_stage resumes only in the "
            "output_dir of the run that wrote it"
        ) from exc
    if not isinstance(order, list) or not all(isinstance(i, str) for i in order):
        raise ConfigError(f"{path}: `order` is not a list of problem ids; restore the file the run wrote")
    return order


@dataclass(frozen=True)
class BatchLayout:
    """A generation batch: `prompts` problems x num_generations completions, `updates` optimizer steps."""

    prompts: int
    updates: int


def batch_layout(args: Any, updates: int | None = None) -> BatchLayout:
    """Split TRL's generation batch into `updates` optimizer steps; return its prompts and updates.

    The generation batch is TRL's (`generation_batch_size` completions, or `steps_per_generation`
    micro-batches per process); `gradient_accumulation_steps` is set on `args` so that one generation
    batch feeds exactly `updates` optimizer steps (over `num_iterations` passes). With `updates`
    None, TRL's own layout is read back and must end each generation batch on a step boundary.
    """
    spg, accum, passes = args.steps_per_generation, args.gradient_accumulation_steps, args.num_iterations
    prompts = args.generation_batch_size // args.num_generations
    if updates is None:
        if (spg * passes) % accum:
            raise ConfigError(
                f"steps_per_generation={spg} x num_iterations={passes} is not a multiple of "
                f"gradient_accumulation_steps={accum}: a generation batch would end inside an optimizer step"
            )
        return BatchLayout(prompts, spg * passes // accum)
    if updates < 1 or updates % passes or spg % (updates // passes):
        raise ConfigError(
            f"updates_per_generation={updates} does not split a generation batch of {spg} micro-batches per "
            f"process x num_iterations={passes} into equal optimizer steps; use a divisor of {spg * passes}"
        )
    derived = spg // (updates // passes)
    if accum not in (1, derived):
        raise ConfigError(
            f"gradient_accumulation_steps={accum} conflicts with updates_per_generation={updates} on a generation "
            f"batch of {spg} micro-batches per process ({derived}); remove it, the recipe sets it"
        )
    args.gradient_accumulation_steps = derived
    return BatchLayout(prompts, updates)


def stage_at(plans: Sequence[StagePlan], step: int) -> StagePlan:
    """The stage that runs global optimizer step `step` (0-based); the last stage past the end."""
    for plan in plans:
        if step < plan.end_step:
            return plan
    return plans[-1]
