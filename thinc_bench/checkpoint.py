"""What a trained checkpoint records about how to run it: the system prompt it was trained with and
the generation settings its recipe chose, so `python -m thinc_bench.eval --model CKPT` needs no flag
to evaluate it as it was trained (a model taught on one prompt and scored on another measures the
mismatch, not the model).

The recipes write `CKPT/thinc_bench.json` and `CKPT/system_prompt.txt` beside the weights; eval
takes them as its defaults, and any flag given on the command line still wins. A checkpoint
without the file (a Hub model, an older run) evaluates with eval's own defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thinc_bench.errors import ConfigError

SETTINGS_FILE = "thinc_bench.json"
PROMPT_FILE = "system_prompt.txt"
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
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


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
