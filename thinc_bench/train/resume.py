"""Resuming a GRPO run where it stopped: which checkpoint is complete, and whether the settings are the run's.

TRL's trainer writes a checkpoint as `OUTPUT_DIR/checkpoint-N` (weights, optimizer, scheduler, every
process's RNG state, trainer state; DeepSpeed shards per process) and the curriculum callback renames
a stage's last one `OUTPUT_DIR/<stage>`. A process killed while writing leaves a folder that looks
like a checkpoint and is not one, so the callback writes `thinc_state.json` into it last, once every
process has finished its part: a checkpoint is complete exactly when that file is there. It also
records what the trainer does not: the global step and stage, and the dynamic-sampling problem
stream's state (`problem_stream`); the injection choice and the sampling seeds are functions of the
step, so they need nothing.

Rerunning the recipe with the same command resumes from the complete checkpoint with the highest
step (`latest_checkpoint`). The run's settings that decide what it computes are recorded at a fresh
start (`run_settings.json`); a rerun with other ones is refused (`check_settings`), naming what
differs, rather than continuing one run with another's settings. Pure IO on small JSON files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thinc_bench.errors import ConfigError

STATE_FILE = "thinc_state.json"
"""Written last into every checkpoint the recipe saves: its presence marks the checkpoint complete."""
SETTINGS_FILE = "run_settings.json"
"""The settings of the run in an output folder, recorded at its fresh start."""


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as JSON atomically (a crash leaves the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_state(folder: str | Path) -> dict[str, Any] | None:
    """The state a complete checkpoint recorded, or None (no such file: incomplete, or not ours)."""
    path = Path(folder) / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("global_step"), int) else None


def latest_checkpoint(root: str | Path) -> Path | None:
    """The complete checkpoint with the highest global step under `root` (`checkpoint-N` or a stage
    folder); None when there is none."""
    root = Path(root)
    if not root.is_dir():
        return None
    found = [
        (state["global_step"], folder)
        for folder in root.iterdir()
        if folder.is_dir() and (state := read_state(folder)) is not None
    ]
    return (
        max(found, key=lambda item: (item[0], item[1].name.startswith("checkpoint-")))[1] if found else None
    )


TRAINER_KEYS = (
    "seed", "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "weight_decay", "optim",
    "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "num_generations", "generation_batch_size",
    "per_device_train_batch_size", "steps_per_generation", "gradient_accumulation_steps", "num_iterations",
    "loss_type", "beta", "epsilon", "epsilon_high", "temperature", "top_p", "top_k", "max_completion_length",
    "scale_rewards", "mask_truncated_completions", "bf16", "use_vllm", "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode", "max_steps",
)  # fmt: skip
"""GRPOConfig settings that decide what a run computes (logging, saving, memory and engine sizing may change)."""
VOLATILE = frozenset(
    {"start_stage", "data_dir", "decontam_data_dir", "sandbox_sessions", "eval_samples", "eval_recovery_k",
     "eval_benchmarks", "eval_limit", "lm_head"}
)  # fmt: skip
"""Recipe options a resumed run may change: where data is read, sizing, what the checkpoint records for eval."""


def run_settings(script: Any, training: Any, model: str, curriculum: Any, processes: int) -> dict[str, Any]:
    """The settings that decide what a GRPO run computes: the recipe's options (but `VOLATILE` ones and
    the held-out evaluation's), TRL's `TRAINER_KEYS`, the model, the curriculum and the process count
    (a run resumed on another number of processes cannot draw, shard or seed as it did)."""
    from dataclasses import asdict, fields

    options = {
        f.name: getattr(script, f.name)
        for f in fields(script)
        if f.name not in VOLATILE and not f.name.startswith("heldout_")
    }
    trainer = {key: getattr(training, key, None) for key in TRAINER_KEYS}
    stages = [asdict(stage) for stage in curriculum.stages]
    return {**options, **trainer, "model": model, "curriculum": stages, "processes": processes}


def check_settings(
    root: str | Path, settings: Mapping[str, Any], *, resuming: bool, write: bool = True
) -> None:
    """Record the run's settings at a fresh start (`write`: the main process); on a resume, refuse
    settings that differ from the recorded ones.

    Raises:
        ConfigError: `resuming` and the recorded settings differ from `settings` (names the keys).
    """
    path = Path(root) / SETTINGS_FILE
    plain = json.loads(json.dumps(dict(settings), default=str))
    if resuming and path.is_file():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        differ = sorted(k for k in recorded.keys() | plain.keys() if recorded.get(k) != plain.get(k))
        if differ:
            shown = ", ".join(f"{k}: {recorded.get(k)!r} -> {plain.get(k)!r}" for k in differ[:4])
            more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
            raise ConfigError(
                f"{root} holds a checkpoint of a run with other settings ({shown}{more}); rerun with that "
                "run's settings to resume it, or use another --output_dir for a new run"
            )
        return
    if write:
        Path(root).mkdir(parents=True, exist_ok=True)
        write_json(path, plain)


def resume_point(given: str | None, root: str | Path, stage_before: str | None) -> Path | None:
    """Where a run resumes: `given` (TRL's `--resume_from_checkpoint PATH`), else the folder of the
    stage before `--start_stage` (`stage_before`), else the latest complete checkpoint under `root`
    (a rerun of the same command); None: a fresh start.

    Raises:
        ConfigError: `given` or the stage folder is no checkpoint.
    """
    root = Path(root)
    if given:
        path = Path(given)
        if read_state(path) is None and not (path / "trainer_state.json").is_file():
            raise ConfigError(f"--resume_from_checkpoint {given}: not a complete checkpoint of this recipe")
        return path
    if stage_before is not None:
        path = root / stage_before
        if not (path / "trainer_state.json").is_file():
            raise ConfigError(
                f"no checkpoint at {path}; run the earlier stages first (without --start_stage)"
            )
        return path
    return latest_checkpoint(root)


def saves_by_steps(args: Any) -> bool:
    """Whether TRL's `save_strategy` is `steps` (an enum or its string)."""
    return str(getattr(args.save_strategy, "value", args.save_strategy)) == "steps"


def check_saving(args: Any, updates: int) -> None:
    """Periodic checkpoints must land on generation-batch boundaries and hold what a resume needs.

    Raises:
        ConfigError: `save_steps` is not a whole multiple of `updates` (optimizer steps per generation
            batch: TRL keeps a batch's rollouts in memory only), or `save_only_model` is on.
    """
    if not saves_by_steps(args):
        return
    steps = args.save_steps
    if steps < 1 or int(steps) != steps or int(steps) % updates:
        raise ConfigError(
            f"save_steps={steps}: use a whole multiple of the {updates} optimizer steps of a generation batch "
            "(TRL keeps a batch's rollouts in memory only, so a checkpoint inside one cannot resume exactly)"
        )
    if args.save_only_model:
        raise ConfigError("save_only_model: true saves no optimizer or RNG state; a rerun could not resume")
