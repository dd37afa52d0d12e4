"""What a trained checkpoint records about how to run it: the system prompt it was trained with and
the generation settings its recipe chose, so `python -m thinc_bench.eval --model CKPT` needs no flag
to evaluate it as it was trained (a model taught on one prompt and scored on another measures the
mismatch, not the model).

The recipes write `CKPT/thinc_bench.json` and `CKPT/system_prompt.txt` beside the weights; eval
takes them as its defaults, and any flag given on the command line still wins. A checkpoint
without the file (a Hub model, an older run) evaluates with eval's own defaults.

A folder a recipe is still writing (or was stopped while writing) is marked: `begin` writes
`CKPT/INCOMPLETE`, naming the command that makes the folder, before training starts (and drops an
older record, so a stopped rerun never passes for the run before it); `write`, the recipe's last
step, removes it. `require_complete` is what every reader of a checkpoint asks first (eval's
--model, a recipe's --model_name_or_path), so an interrupted folder is one line ("train it first"),
not a tokenizer's traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thinc_bench.errors import ConfigError

SETTINGS_FILE = "thinc_bench.json"
PROMPT_FILE = "system_prompt.txt"
INCOMPLETE_FILE = "INCOMPLETE"
"""Present while a recipe writes the folder; holds the command that makes it."""
SCHEMA_VERSION = 1
EVAL_FIELDS = frozenset(
    {
        "benchmarks",
        "max_tokens",
        "max_tool_calls",
        "exec_on",
        "dialect",
        "tool_name",
        "response_prefix",
        "few_shot",
        "samples",
        "limit",
        "recovery_k",
        "temperature",
        "top_p",
        "chat_template_kwargs",
    }
)
"""Eval settings a checkpoint may record (eval's flag names, as `EvalConfig` fields)."""


def write(
    folder: str | Path,
    *,
    system_prompt: str | None,
    eval_settings: Mapping[str, Any],
    trained_by: str,
    training: Mapping[str, Any] | None = None,
) -> Path:
    """Record how to run the checkpoint in `folder`; None settings are left to eval's defaults.

    `training` keeps facts of the run a reader needs to compare checkpoints (the precision chosen
    for this machine, `train.launch.resolve_auto_bf16`); eval does not read it.

    Raises:
        ConfigError: a setting eval does not know.
    """
    unknown = set(eval_settings) - EVAL_FIELDS
    if unknown:
        raise ConfigError(
            f"checkpoint settings {sorted(unknown)} are not eval settings; use {sorted(EVAL_FIELDS)}"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trained_by": trained_by,
        "system_prompt": None,
        "eval": {k: v for k, v in sorted(eval_settings.items()) if v is not None},
    }
    if training:
        record["training"] = dict(training)
    if system_prompt is not None:
        (folder / PROMPT_FILE).write_text(system_prompt + "\n", encoding="utf-8")
        record["system_prompt"] = PROMPT_FILE
    path = folder / SETTINGS_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    (folder / INCOMPLETE_FILE).unlink(missing_ok=True)  # the folder is whole: weights, then this record
    return path


def begin(folder: str | Path, command: str) -> None:
    """Mark `folder` as being written by `command` (a recipe's first write, before training): until
    `write` finishes it, readers refuse it with one line naming the command (`require_complete`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / INCOMPLETE_FILE).write_text(
        "A recipe started writing this folder and has not finished: the weights here are missing or "
        f"partial. Make it with:\n{command}\n",
        encoding="utf-8",
    )
    (folder / SETTINGS_FILE).unlink(missing_ok=True)  # an older run's record no longer describes it


def require_complete(model: str | Path | None) -> None:
    """Refuse a local folder a recipe has not finished (or a folder that holds no model at all).

    Raises:
        ConfigError: one line naming the folder and the command that makes it.
    """
    if model is None:
        return
    folder = Path(model)
    marker = folder / INCOMPLETE_FILE
    if marker.is_file():
        lines = marker.read_text(encoding="utf-8").strip().splitlines()
        command = lines[-1] if lines else "the recipe that writes it"
        raise ConfigError(
            f"{folder} is an unfinished training run (it was stopped); train it first: {command}"
        )
    if folder.is_dir() and not (folder / "config.json").is_file():
        trainer_left = any(folder.glob("checkpoint-*")) or (folder / "runs").is_dir()
        hint = (
            "it looks like an unfinished training run: train it first (rerun the recipe that writes it)"
            if trainer_left
            else "pass a model folder, a Hub id or bundled-smollm2"
        )
        raise ConfigError(f"{folder} holds no model (no config.json); {hint}")


def read(model: str | Path | None) -> dict[str, Any] | None:
    """The record of a local checkpoint folder, or None when `model` is not one or records nothing."""
    if model is None:
        return None
    path = Path(model) / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); delete it to evaluate with eval's defaults"
        ) from exc
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(f"{path}: unknown schema; delete it to evaluate with eval's defaults")
    return record


def eval_defaults(model: str | Path | None) -> dict[str, Any]:
    """Eval's defaults for this model: its recorded settings and system prompt file ({} without a record)."""
    record = read(model)
    if record is None:
        return {}
    defaults = {k: v for k, v in record.get("eval", {}).items() if k in EVAL_FIELDS}
    if record.get("system_prompt"):
        defaults["system_prompt"] = str(Path(str(model)) / record["system_prompt"])
    return defaults


def system_prompt(model: str | Path | None) -> str | None:
    """The system prompt text a checkpoint was trained with, or None when it records none."""
    record = read(model)
    if record is None or not record.get("system_prompt"):
        return None
    text: str = (Path(str(model)) / str(record["system_prompt"])).read_text(encoding="utf-8")
    return text.strip()
