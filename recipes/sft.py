# /// script
# dependencies = ["thinc_bench", "trl>=1.16", "datasets>=5.2", "accelerate>=1.15"]
# ///
"""SFT on ThinC-SFT: TRL's SFTTrainer on the builder's pre-tokenized `input_ids` + `assistant_masks`.

The loss covers plan, code and final-answer tokens only: TRL builds the labels from the builder's
`assistant_masks` column (-100 on the prompt and on every interpreter-output token). No example is
trained truncated: TRL would keep the start of a sequence over `max_length` and train it without its
`\boxed{}` answer and end-of-turn token, so such rows are dropped before training, counted in the
log and in the checkpoint's model card (README.md). The full-size configs set `max_length` to the
build's completion budget plus room for the longest prompt, so none is dropped there.

Without `--config` it runs ThinC-nano on CPU (recipes/configs/sft_nano.yaml), any flag given on top:
the bundled SmolLM2-135M on ThinC-SFT-nano (built first when missing) into runs/nano/sft, about ten
minutes on 2 cores:

    python recipes/sft.py
    python recipes/sft.py --max_steps 1 --output_dir runs/sft-one-step   # the same, one step

Smallest CPU run (the bundled SmolLM2 on 4 nano trajectories, 3 steps; no paths needed):

    python recipes/sft.py --config recipes/configs/sft_smoke.yaml

Full-size settings on 8 GPUs (DeepSpeed ZeRO-3 through accelerate; sources: docs/settings.md):

    accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/sft.py \
        --config recipes/configs/sft_qwen3_4b_thinking.yaml

The output folder is a plain HF checkpoint that also records the system prompt it was trained with
and the recipe's eval settings (`thinc_bench.checkpoint`): `python -m thinc_bench.eval --model
OUTPUT_DIR` evaluates it as it was trained.
"""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

logger = logging.getLogger("recipes.sft")


@dataclass
class ScriptArgs:
    """Data settings of the SFT recipe (TRL's SFTConfig and ModelConfig hold the rest)."""

    dataset_name: str | None = field(
        default=None,
        metadata={"help": "build_sft output: its `dataset` folder (load_from_disk) or a Hub dataset id."},
    )
    dataset_split: str = field(default="train", metadata={"help": "Split of a Hub dataset id."})
    build_data: str | None = field(
        default=None,
        metadata={
            "help": "build_sft arguments to build DATASET_NAME (an OUT/dataset folder) when it does not "
            "exist yet, e.g. '--source nano'."
        },
    )
    eval_benchmarks: str | None = field(
        default=None, metadata={"help": "Recorded in the checkpoint: eval's --benchmarks for it."}
    )
    eval_max_tokens: int | None = field(
        default=None, metadata={"help": "Recorded in the checkpoint: eval's --max-tokens for it."}
    )
    eval_max_tool_calls: int | None = field(
        default=None, metadata={"help": "Recorded in the checkpoint: eval's --max-tool-calls for it."}
    )
    eval_samples: int | None = field(
        default=None, metadata={"help": "Recorded in the checkpoint: eval's --samples for it."}
    )
    eval_recovery_k: str | None = field(
        default=None, metadata={"help": "Recorded in the checkpoint: eval's --recovery-k for it."}
    )
    lm_head: str = field(
        default="auto",
        metadata={
            "help": "How the loss scores tokens: 'trl' (TRL's chunked head: no full logits in memory, each "
            "chunk recomputed in the backward pass), 'plain' (one projection of the scored tokens, about 2x "
            "faster on CPU where memory is not short), or 'auto' (plain on CPU, trl elsewhere)."
        },
    )
    eval_limit: int | None = field(
        default=None,
        metadata={"help": "Recorded in the checkpoint: eval's --limit (problems per benchmark)."},
    )


def eval_settings(args: ScriptArgs) -> dict[str, object]:
    """The eval settings a recipe records in its checkpoint (None: eval's default)."""
    return {
        "benchmarks": args.eval_benchmarks,
        "max_tokens": args.eval_max_tokens,
        "max_tool_calls": args.eval_max_tool_calls,
        "samples": args.eval_samples,
        "recovery_k": args.eval_recovery_k,
        "limit": args.eval_limit,
    }


def load_sft_dataset(name: str, split: str, max_length: int | None = None):  # noqa: ANN201 (datasets is lazy)
    """The builder's dataset with only what TRL reads (`input_ids`, `assistant_masks`: TRL makes the
    labels), the system prompt its rows were built with (None when they differ or have none), and
    how many rows were dropped as longer than `max_length` (never trained cut)."""
    import datasets

    from thinc_bench.train.launch import training_system_prompt

    path = Path(name)
    dataset = (
        datasets.load_from_disk(str(path)) if path.exists() else datasets.load_dataset(name, split=split)
    )
    if isinstance(dataset, datasets.DatasetDict):
        dataset = dataset[split]
    missing = {"input_ids", "assistant_masks"} - set(dataset.column_names)
    if missing:
        raise SystemExit(
            f"dataset {name} lacks columns {sorted(missing)}; build it with python -m thinc_bench.build_sft"
        )
    if len(dataset) == 0:
        raise SystemExit(f"dataset {name} is empty: the build kept no trajectory; rebuild with more problems")
    system_prompt = training_system_prompt(dataset)
    dataset = dataset.select_columns(["input_ids", "assistant_masks"])
    before = len(dataset)
    if max_length is not None:
        dataset = dataset.filter(lambda row: len(row["input_ids"]) <= max_length)
    if len(dataset) == 0:
        raise SystemExit(
            f"every one of the {before} examples of {name} is longer than max_length={max_length}; raise "
            "max_length to the build's completion budget plus the longest prompt"
        )
    return dataset, system_prompt, before - len(dataset)


def data_card(trained: int, dropped: int, max_length: int | None) -> str:
    """The model card's section on what the run trained on (appended to TRL's README.md)."""
    lines = ["", "## Training data", "", f"- {trained} sequences trained, none truncated."]
    if dropped:
        lines.append(
            f"- {dropped} longer than max_length={max_length} dropped (TRL would have cut their answers)."
        )
    return "\n".join(lines) + "\n"


EXAMPLES = (
    "python recipes/sft.py                  # ThinC-nano on CPU: SmolLM2-135M -> runs/nano/sft",
    "python recipes/sft.py --config recipes/configs/sft_smoke.yaml    # 3 steps, a minute",
    "accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/sft.py "
    "--config recipes/configs/sft_qwen3_4b_thinking.yaml",
)
"""The first lines of `--help`."""


def parse(argv: Sequence[str]) -> tuple[Any, Any, Any, str]:
    """The recipe's settings from its full argv (`--config` first, as `bare_argv` makes it): script
    args, SFTConfig, ModelConfig and the precision line (`bf16: auto` resolved for this machine).
    Nothing is loaded; TRL's own checks (bf16 on a machine without it) run here."""
    from trl import ModelConfig, SFTConfig, TrlParser

    from thinc_bench.cli import parse_recipe, quiet_libraries
    from thinc_bench.train.launch import resolve_auto_bf16

    quiet_libraries()  # before TRL's own defaults warn while parsing
    args, precision = resolve_auto_bf16(argv)
    parser = TrlParser((ScriptArgs, SFTConfig, ModelConfig))
    own = [f.name for f in fields(ScriptArgs)]
    script_args, training_args, model_args = parse_recipe(
        parser, args, __doc__.split("\n\n")[0], own, EXAMPLES, "python recipes/sft.py"
    )
    if not script_args.dataset_name or not model_args.model_name_or_path:
        raise SystemExit(
            "pass --dataset_name (build_sft output) and --model_name_or_path (a folder or Hub id)"
        )
    return script_args, training_args, model_args, precision


def grpo_command(output_dir: str, config: str) -> list[str]:
    """The GRPO command printed after training: from this checkpoint, with the GRPO config of the
    same kind as the SFT one (`sft_smoke.yaml` -> `grpo_smoke.yaml`) when there is one; the bare
    nano GRPO run reads runs/nano/sft, so the nano chain prints just `python recipes/grpo.py`."""
    import yaml

    from thinc_bench.train.launch import RECIPES

    command = ["python", "recipes/grpo.py"]
    grpo = Path(config).with_name(Path(config).name.replace("sft_", "grpo_", 1))
    if not Path(config).name.startswith("sft_") or not grpo.is_file():
        grpo = RECIPES / "configs" / "grpo_nano.yaml"
    if grpo.resolve() != (RECIPES / "configs" / "grpo_nano.yaml").resolve():
        try:
            shown = str(grpo.resolve().relative_to(RECIPES.parent))
        except ValueError:
            shown = str(grpo)
        command += ["--config", shown]
    base = yaml.safe_load(grpo.read_text(encoding="utf-8")) or {}
    if Path(str(base.get("model_name_or_path", ""))) != Path(output_dir):
        command += ["--model_name_or_path", output_dir]
    return command


def main(argv: list[str] | None = None, callbacks: Sequence[object] = ()) -> int:
    """Train, save the final model (and tokenizer, from the main process), print the eval command.

    `callbacks` go to the trainer beside its own (tests use one to compare ranks' weights). Ctrl-C
    is one line and exit 130, naming the command that resumes (`train.launch.run_recipe`)."""
    from thinc_bench.train.launch import bare_argv, resume_sft, run_recipe

    shown = list(sys.argv[1:] if argv is None else argv)
    full = bare_argv(shown, "sft_nano.yaml", "ThinC-nano SFT on CPU")
    return run_recipe(lambda: _train(full, shown, callbacks), lambda: resume_sft(full, shown))


def _train(argv: list[str], shown: list[str], callbacks: Sequence[object]) -> int:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import SFTTrainer

    from thinc_bench import checkpoint
    from thinc_bench.train.common import attn_implementation, eval_command
    from thinc_bench.train.launch import build_data_if_missing, resolve_model, sft_plan
    from thinc_bench.train.lm_head import install_lm_head

    config = argv[argv.index("--config") + 1]
    script_args, training_args, model_args, precision = parse(argv)
    model_path = resolve_model(model_args.model_name_or_path)  # an unfinished folder: one line, first

    set_seed(training_args.seed)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    logger.info("%s", precision)
    logger.info("script %s", script_args)
    logger.info("model %s", model_args)
    logger.info("training %s", training_args.to_json_string())

    build_data_if_missing(script_args.dataset_name, script_args.build_data)
    dataset, system_prompt, dropped = load_sft_dataset(
        script_args.dataset_name, script_args.dataset_split, training_args.max_length
    )
    logger.info(
        "%d training sequences, longest %d tokens; %d dropped as longer than max_length=%s",
        len(dataset),
        max(len(r) for r in dataset["input_ids"]),
        dropped,
        training_args.max_length,
    )
    if dropped:
        logger.warning(
            "%d examples are longer than max_length=%s and were dropped, not trained cut; raise max_length "
            "to train them",
            dropped,
            training_args.max_length,
        )

    if training_args.process_index == 0:  # once, not per rank
        plan = sft_plan(model_args.model_name_or_path, script_args.dataset_name, len(dataset), training_args)
        print(plan, flush=True)  # noqa: T201 - the recipe's terminal
        checkpoint.begin(training_args.output_dir, shlex.join(["python", "recipes/sft.py", *shown]))
    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(model_path, revision=model_args.model_revision)
    model = AutoModelForCausalLM.from_pretrained(
        model_path,
        revision=model_args.model_revision,
        dtype=dtype,
        attn_implementation=attn_implementation(model_args.attn_implementation),
    )

    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    head = install_lm_head(trainer, script_args.lm_head)
    logger.info("LM head: %s", head)
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()  # trainer_state.json: the per-step log history (loss, grad norm)
    trainer.save_model(training_args.output_dir)  # every rank takes part (ZeRO-3); the main one writes,
    trainer.accelerator.wait_for_everyone()  # tokenizer included, and nobody exits before it is done

    if trainer.accelerator.is_main_process:
        trainer.create_model_card(dataset_name=script_args.dataset_name)
        with (Path(training_args.output_dir) / "README.md").open("a", encoding="utf-8") as card:
            card.write(data_card(len(dataset), dropped, training_args.max_length))
        checkpoint.write(
            training_args.output_dir,
            system_prompt=system_prompt,
            eval_settings=eval_settings(script_args),
            trained_by="recipes/sft.py",
            training={
                "bf16": training_args.bf16,
                "dtype": model_args.dtype,
                "precision": precision,
                "lm_head": head,
            },
        )
        print(f"Checkpoint: {training_args.output_dir}")
        print(f"Evaluate this checkpoint:\n  {eval_command(training_args.output_dir)}")
        print(f"Then reinforce it:\n  {shlex.join(grpo_command(training_args.output_dir, config))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
