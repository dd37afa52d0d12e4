# /// script
# dependencies = ["thinc_bench", "trl>=1.16", "datasets>=5.2", "accelerate>=1.15"]
# ///
"""SFT on ThinC-SFT: TRL's SFTTrainer on the builder's pre-tokenized `input_ids` + `assistant_masks`.

The loss covers plan, code and final-answer tokens only: labels are -100 on the prompt and on every
interpreter-output token (from the builder's masks, `thinc_bench.train.common.labels_from_mask`).
`max_length` is set in every config because TRL's default (1024) would cut long trajectories.

Smallest CPU run (the bundled SmolLM2 on a tiny build_sft output, 3 steps):

    python recipes/sft.py --config recipes/configs/sft_smoke.yaml \
        --model_name_or_path <SmolLM2 folder> --dataset_name <build_sft out>/dataset --output_dir runs/sft-smoke

Paper settings on 8 GPUs (DeepSpeed ZeRO-3 through accelerate):

    accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/sft.py \
        --config recipes/configs/sft_qwen3_4b_thinking.yaml

The output folder is a plain HF checkpoint: `python -m thinc_bench.eval --model OUTPUT_DIR` loads it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
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


def load_sft_dataset(name: str, split: str):  # noqa: ANN201 (datasets is imported lazily)
    """The builder's dataset with `labels` from its masks, keeping only what the collator reads."""
    import datasets

    from thinc_bench.train.common import labels_from_mask

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
    dataset = dataset.map(
        lambda row: {"labels": labels_from_mask(row["input_ids"], row["assistant_masks"])},
        remove_columns=[c for c in dataset.column_names if c != "input_ids"],
    )
    return dataset


def main(argv: list[str] | None = None, callbacks: Sequence[object] = ()) -> int:
    """Train, save the final model (and tokenizer, from the main process), print the eval command.

    `callbacks` go to the trainer beside its own (tests use one to compare ranks' weights)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser

    from thinc_bench.train.common import attn_implementation, eval_command

    parser = TrlParser((ScriptArgs, SFTConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    if not script_args.dataset_name or not model_args.model_name_or_path:
        raise SystemExit(
            "pass --dataset_name (build_sft output) and --model_name_or_path (a folder or Hub id)"
        )

    set_seed(training_args.seed)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    logger.info("script %s", script_args)
    logger.info("model %s", model_args)
    logger.info("training %s", training_args.to_json_string())

    dataset = load_sft_dataset(script_args.dataset_name, script_args.dataset_split)
    logger.info(
        "%d training sequences, longest %d tokens", len(dataset), max(len(r) for r in dataset["input_ids"])
    )

    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path, revision=model_args.model_revision
    )
    model = AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path,
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
        print(f"Evaluate this checkpoint:\n  {eval_command(training_args.output_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
