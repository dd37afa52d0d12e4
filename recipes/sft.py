# /// script
# dependencies = ["thinc_bench", "trl>=1.16", "datasets>=5.2", "accelerate>=1.15"]
# ///
"""SFT on ThinC-SFT: TRL's SFTTrainer on the builder's pre-tokenized `input_ids` + `assistant_masks`.

The loss covers plan, code and final-answer tokens only: labels are -100 on the prompt and on every
interpreter-output token (from the builder's masks, `thinc_bench.train.common.labels_from_mask`).
`max_length` is set in every config because TRL's default (1024) would cut long trajectories.

With no arguments it runs ThinC-nano on CPU (recipes/configs/sft_nano.yaml): the bundled SmolLM2-135M
on ThinC-SFT-nano (built first when missing) into runs/nano/sft, about ten minutes on 2 cores:

    python recipes/sft.py

Smallest CPU run (the bundled SmolLM2 on 4 nano trajectories, 3 steps; no paths needed):

    python recipes/sft.py --config recipes/configs/sft_smoke.yaml

Paper settings on 8 GPUs (DeepSpeed ZeRO-3 through accelerate):

    accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/sft.py \
        --config recipes/configs/sft_qwen3_4b_thinking.yaml

The output folder is a plain HF checkpoint that also records the system prompt it was trained with
and the recipe's eval settings (`thinc_bench.checkpoint`): `python -m thinc_bench.eval --model
OUTPUT_DIR` evaluates it as it was trained.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

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


def load_sft_dataset(name: str, split: str):  # noqa: ANN201 (datasets is imported lazily)
    """The builder's dataset with `labels` from its masks, keeping only what the collator reads, and
    the system prompt its rows were built with (None when they differ or have none)."""
    import datasets

    from thinc_bench.train.common import labels_from_mask
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
    dataset = dataset.map(
        lambda row: {"labels": labels_from_mask(row["input_ids"], row["assistant_masks"])},
        remove_columns=[c for c in dataset.column_names if c != "input_ids"],
    )
    return dataset, system_prompt


def main(argv: list[str] | None = None, callbacks: Sequence[object] = ()) -> int:
    """Train, save the final model (and tokenizer, from the main process), print the eval command.

    `callbacks` go to the trainer beside its own (tests use one to compare ranks' weights)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser

    from thinc_bench import checkpoint
    from thinc_bench.cli import parse_recipe
    from thinc_bench.train.common import attn_implementation, eval_command
    from thinc_bench.train.launch import bare_argv, build_data_if_missing, resolve_auto_bf16, resolve_model

    argv = bare_argv(sys.argv[1:] if argv is None else argv, "sft_nano.yaml", "ThinC-nano SFT on CPU")
    argv, precision = resolve_auto_bf16(argv)
    parser = TrlParser((ScriptArgs, SFTConfig, ModelConfig))
    own = [f.name for f in fields(ScriptArgs)]
    script_args, training_args, model_args = parse_recipe(parser, argv, __doc__.split("\n\n")[0], own)
    if not script_args.dataset_name or not model_args.model_name_or_path:
        raise SystemExit(
            "pass --dataset_name (build_sft output) and --model_name_or_path (a folder or Hub id)"
        )

    set_seed(training_args.seed)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    logger.info("%s", precision)
    logger.info("script %s", script_args)
    logger.info("model %s", model_args)
    logger.info("training %s", training_args.to_json_string())

    build_data_if_missing(script_args.dataset_name, script_args.build_data)
    dataset, system_prompt = load_sft_dataset(script_args.dataset_name, script_args.dataset_split)
    logger.info(
        "%d training sequences, longest %d tokens", len(dataset), max(len(r) for r in dataset["input_ids"])
    )

    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    model_path = resolve_model(model_args.model_name_or_path)
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
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()  # trainer_state.json: the per-step log history (loss, grad norm)
    trainer.save_model(training_args.output_dir)  # every rank takes part (ZeRO-3); the main one writes,
    trainer.accelerator.wait_for_everyone()  # tokenizer included, and nobody exits before it is done

    if trainer.accelerator.is_main_process:
        checkpoint.write(
            training_args.output_dir,
            system_prompt=system_prompt,
            eval_settings=eval_settings(script_args),
            trained_by="recipes/sft.py",
            training={"bf16": training_args.bf16, "dtype": model_args.dtype, "precision": precision},
        )
        print(f"Checkpoint: {training_args.output_dir}")
        print(f"Evaluate this checkpoint:\n  {eval_command(training_args.output_dir)}")
        grpo = ["python", "recipes/grpo.py"]
        if Path(training_args.output_dir) != Path("runs/nano/sft"):  # the bare GRPO run's default input
            grpo += ["--model_name_or_path", training_args.output_dir]
        print(f"Then reinforce it:\n  {' '.join(grpo)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
