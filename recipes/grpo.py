# /// script
# dependencies = ["thinc_bench[vllm]", "trl>=1.16", "datasets>=5.2", "accelerate>=1.15"]
# ///
"""GRPO on DAPO-Math-17k with the thinc_bench rollout engine, the one grader and a staged curriculum.

Each completion is a full ThinC trajectory from `thinc_bench.eval.rollout` (real sandbox execution),
returned to TRL through `rollout_func` with `env_mask` 0 on every interpreter-output token. The
reward is the grader's exact match (1/0, `thinc_bench.train.rewards`); tool calls, execution-error
rate, grounding and truncation are logged per step as zero-weight rewards. The YAML's `curriculum:`
runs stage by stage (`OUTPUT_DIR/<stage>`, each stage starting from the previous stage's model);
`--start_stage NAME` resumes at a stage boundary.

Generation follows GRPOConfig: `use_vllm: false` decodes on the policy itself (hf backend, batched);
`use_vllm: true` with `vllm_mode: colocate` steps TRL's in-process vLLM engine, and with
`vllm_mode: server` sends requests to `trl vllm-serve`, which TRL keeps in sync with the weights.

Smallest CPU run (the bundled SmolLM2, 2 prompts x 2 generations, 2 stages of 1 step):

    python recipes/grpo.py --config recipes/configs/grpo_smoke.yaml \
        --model_name_or_path <SmolLM2 folder> --data_dir ../shared/data/train --output_dir runs/grpo-smoke

Paper settings on 8 GPUs, vLLM colocated with training:

    accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/grpo.py \
        --config recipes/configs/grpo_qwen3_4b_thinking.yaml

or with a generation server on 2 of them and training on the other 6:

    CUDA_VISIBLE_DEVICES=6,7 trl vllm-serve --model runs/sft-thinc-4b --data_parallel_size 2 &
    CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 accelerate launch --num_processes 6 \
        --config_file recipes/configs/accelerate_zero3.yaml recipes/grpo.py \
        --config recipes/configs/grpo_qwen3_4b_thinking.yaml --vllm_mode server
"""

from __future__ import annotations

import copy
import logging
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

logger = logging.getLogger("recipes.grpo")


@dataclass
class ScriptArgs:
    """Data, rollout and curriculum settings of the GRPO recipe (TRL's GRPOConfig holds the rest)."""

    dataset_name: str = field(
        default="dapo_math_17k",
        metadata={"help": "Registered source, local .jsonl/.parquet, or Hub id (deduplicated on load)."},
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "Folder with the registered source's local copy; None reads the Hub."}
    )
    limit: int | None = field(
        default=None, metadata={"help": "Keep the first N distinct problems (smoke runs)."}
    )
    system_prompt: str = field(default="thinc", metadata={"help": "System prompt name or file, as in eval."})
    response_prefix: str = field(
        default="",
        metadata={"help": "Harness-written start of every answer (prefill, env_mask 0), as in eval."},
    )
    start_stage: str | None = field(
        default=None, metadata={"help": "Resume at this curriculum stage from OUTPUT_DIR/<previous stage>."}
    )
    exec_on: Literal["output_open", "code_close"] = field(
        default="output_open",
        metadata={
            "help": "When code runs, as eval's --exec-on (code_close: models that never open output blocks)."
        },
    )


def split_config(argv: list[str]) -> tuple[list[str], object]:
    """Take the `curriculum:` key out of `--config` (TrlParser rejects unknown keys); return new argv."""
    from thinc_bench.train import split_recipe_config

    if "--config" not in argv:
        return argv, None
    at = argv.index("--config") + 1
    trl_config, curriculum = split_recipe_config(argv[at])
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(trl_config, handle)
    return [*argv[:at], handle.name, *argv[at + 1 :]], curriculum


def release(trainer: object) -> None:
    """Free a finished stage's colocated vLLM engine, so the next stage can build its own in this process."""
    import gc

    import torch

    engine = getattr(trainer, "vllm_generation", None)
    if engine is not None and engine.mode == "colocate":
        from vllm.distributed.parallel_state import destroy_model_parallel

        del engine.llm
        gc.collect()
        destroy_model_parallel()  # vLLM's own process groups; accelerate's default group stays
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    import datasets
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser

    from thinc_bench.build_sft.sources import load_source
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.prompts import load_system_prompt
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.train import Curriculum, Stage
    from thinc_bench.train.common import eval_command
    from thinc_bench.train.rewards import LOGGED_STATS, exact_match_reward
    from thinc_bench.train.rollout_func import ThincRollout
    from thinc_bench.train.vllm_sync import use_layerwise_reload

    argv, curriculum = split_config(list(sys.argv[1:] if argv is None else argv))
    parser = TrlParser((ScriptArgs, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    if curriculum is not None:
        Path(argv[argv.index("--config") + 1]).unlink()  # the temporary TrlParser copy of the YAML
    if not model_args.model_name_or_path:
        raise SystemExit("pass --model_name_or_path (the SFT output folder, a Hub id, or the SmolLM2 folder)")
    if curriculum is None:  # no curriculum: one stage at the config's completion budget
        curriculum = Curriculum((Stage("stage1", None, training_args.max_completion_length, 32),))
    assert isinstance(curriculum, Curriculum)

    set_seed(training_args.seed)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    logger.info("script %s", script_args)
    logger.info("model %s", model_args)
    logger.info("curriculum %s", curriculum)

    problems = load_source(script_args.dataset_name, script_args.data_dir, limit=script_args.limit)
    dataset = datasets.Dataset.from_dict(
        {"prompt": [p.problem for p in problems], "answer": [p.answer for p in problems]}
    ).shuffle(seed=training_args.seed)
    world = max(1, training_args.world_size)
    prompts_per_step = (
        training_args.per_device_train_batch_size
        * training_args.gradient_accumulation_steps
        * world
        // training_args.num_generations
    )

    start = curriculum.index(script_args.start_stage) if script_args.start_stage else 0
    root = Path(training_args.output_dir)
    model_path = (
        model_args.model_name_or_path if start == 0 else str(root / curriculum.stages[start - 1].name)
    )
    consumed = sum((s.max_steps or 0) for s in curriculum.stages[:start]) * prompts_per_step
    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    system_prompt = load_system_prompt(script_args.system_prompt)

    with Sandbox() as sandbox:
        for stage in curriculum.stages[start:]:
            args = copy.deepcopy(training_args)
            args.output_dir = str(root / stage.name)
            args.max_steps = stage.max_steps if stage.max_steps is not None else -1
            args.max_completion_length = stage.max_tokens
            args.reward_weights = [1.0] + [0.0] * len(LOGGED_STATS)
            if args.use_vllm and args.vllm_max_model_length is None:
                args.vllm_max_model_length = (
                    stage.max_tokens
                )  # the rollout keeps prompt + completion within it
            stage_data = dataset.select(range(min(consumed, len(dataset)), len(dataset)))
            if len(stage_data) == 0:
                raise SystemExit(f"stage {stage.name}: no problems left after {consumed}; use more data")
            logger.info(
                "stage %s from %s: %s, %d problems left", stage.name, model_path, stage, len(stage_data)
            )

            tokenizer = AutoTokenizer.from_pretrained(model_path)
            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
            rollout = ThincRollout(
                sandbox,
                RolloutLimits(stage.max_tokens, stage.max_tool_calls),
                system_prompt,
                temperature=args.temperature,
                response_prefix=script_args.response_prefix,
                exec_on=script_args.exec_on,
                problem_ids={p.problem: p.id for p in problems},
            )
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[exact_match_reward, *LOGGED_STATS],
                args=args,
                train_dataset=stage_data,
                processing_class=tokenizer,
                rollout_func=rollout,
            )
            if args.use_vllm:
                use_layerwise_reload(trainer.vllm_generation)
            trainer.train()
            trainer.save_state()  # trainer_state.json: per-step reward, tool calls, errors, lengths
            trainer.save_model(args.output_dir)
            tokenizer.save_pretrained(args.output_dir)
            consumed += (stage.max_steps or 0) * prompts_per_step
            model_path = args.output_dir
            release(trainer)
            del trainer, model

    if training_args.process_index == 0:
        print(f"Evaluate this checkpoint:\n  {eval_command(model_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
