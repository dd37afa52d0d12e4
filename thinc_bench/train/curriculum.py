"""The GRPO curriculum: stages that raise the context and the tool-call limit as training goes on.

A recipe YAML holds TRL's settings plus one `curriculum:` key, a list of stages, each with a name,
`max_steps` (None on the last stage: train on what is left of the data), `max_tokens` (prompt plus
completion, the rollout budget) and `max_tool_calls`. `split_recipe_config` separates the two so
`TrlParser` sees only its own keys (an unknown key stays an error there). Pure parsing: no training,
no IO beyond reading the YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from thinc_bench.errors import ConfigError

CURRICULUM_KEY = "curriculum"
"""The YAML key that holds the stage list; everything else in the file belongs to TrlParser."""

_STAGE_KEYS = frozenset({"name", "max_steps", "max_tokens", "max_tool_calls"})


@dataclass(frozen=True)
class Stage:
    """One curriculum stage.

    Attributes:
        name: label used for the stage's output folder (`OUTPUT_DIR/<name>`).
        max_steps: optimizer steps of this stage; None trains on the rest of the data (last stage only).
        max_tokens: prompt plus completion tokens of one rollout (model and interpreter tokens alike).
        max_tool_calls: code executions allowed per rollout.
    """

    name: str
    max_steps: int | None
    max_tokens: int
    max_tool_calls: int


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
    return Stage(str(raw["name"]), steps, int(raw["max_tokens"]), int(raw["max_tool_calls"]))


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
