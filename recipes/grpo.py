# /// script
# dependencies = ["thinc_bench[vllm]", "trl>=1.16", "datasets>=5.2", "accelerate>=1.15"]
# ///
"""GRPO with the thinc_bench rollout engine, the one grader and a staged curriculum. Without --config:
ThinC-nano's range problems (nano_rl) from runs/nano/sft on CPU; the paper configs: DAPO-Math-17k.

Each completion is a full ThinC trajectory from `thinc_bench.eval.rollout` (real sandbox execution),
returned to TRL through `rollout_func` with `env_mask` 0 on every interpreter-output token. The
reward is the grader's exact match (1/0, `thinc_bench.train.rewards`); per step, the scored rows'
tool calls, failed calls, grounding, truncation, ThinC conformance and the three failure modes are
logged (`rollout/*`, through TRL's `log_metric`). The model's own failures (a text the harness
cannot process, an answer too large to judge) earn 0 and are counted; only an infrastructure
failure leaves the advantages and the loss (`env_mask` 0; counted as `unscored_frac`).

The YAML's `curriculum:` runs in one trainer (one optimizer state, one learning-rate schedule): a
callback switches the rollout's completion budget and tool-call limit at each stage boundary and
saves a full checkpoint there as `OUTPUT_DIR/<stage>`. A stage's `max_steps` counts generation
batches (curriculum steps): TRL's `generation_batch_size` completions (prompts x `num_generations`)
sampled from one policy, on which the trainer takes `updates_per_generation` optimizer steps, each
on a slice of it (so the importance ratio moves off 1 and the 0.20 / 0.28 clip acts; logged as
`clip_ratio/*` and `importance_ratio/*`). The problems are shuffled (seeded, `epochs` passes, each
shuffled anew; the two members of a matched pair, `meta["pair"]` as nano's pool has, side by side)
into `OUTPUT_DIR/curriculum_order.json`; each stage takes the next `max_steps` x prompts of that order
(the last stage, without `max_steps`, every whole generation batch left), or with `dynamic_sampling:
refill | drop_solved` draws on from it as DAPO's over-generation or ASTER's dropping of solved
problems needs (`thinc_bench.train.stream_rollout`).

A crash costs at most `save_steps` optimizer steps: with `save_strategy: steps` a complete
checkpoint (weights, optimizer, scheduler, every process's RNG, trainer state, problem stream) is
written every `save_steps`, and rerunning the same command resumes from the newest one, exactly
(`thinc_bench.train.resume`; `--start_stage NAME` resumes at a stage's start). With
`heldout_benchmarks` the policy is evaluated by `thinc_bench.eval` on a fixed subset every
`heldout_every` steps (`heldout/*` in the logs; `thinc_bench.train.heldout`). Recovery training
(`inject_failures_share`, `inject_failures_k`) fails the first k executions of a seeded share of
groups with tracebacks of kinds eval never injects, and pays an injected rollout only for an answer
an output after its last failure grounds (`thinc_bench.train.injection`). docs/training.md: the
8-GPU launch and resume, what a step costs, and each of these in full.

Generation follows GRPOConfig: `use_vllm: false` decodes on the policy itself (hf backend, batched);
`use_vllm: true` with `vllm_mode: colocate` steps TRL's in-process vLLM engine, and with
`vllm_mode: server` sends requests to `trl vllm-serve`, which TRL keeps in sync with the weights.

Without `--config` it runs ThinC-nano on CPU (recipes/configs/grpo_nano.yaml), any flag given on
top: a short curriculum on nano train problems from the SFT checkpoint runs/nano/sft (python
recipes/sft.py first) into runs/nano/grpo, with the system prompt that checkpoint was trained on:

    python recipes/grpo.py

Smallest CPU run (the bundled SmolLM2 on 4 nano problems, 2 prompts x 2 generations, 2 stages of 1
step; no paths needed):

    python recipes/grpo.py --config recipes/configs/grpo_smoke.yaml

Full-size settings on 8 GPUs, vLLM colocated with training (sources: docs/settings.md; the same command
resumes after a crash):

    accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/grpo.py \
        --config recipes/configs/grpo_qwen3_4b_thinking.yaml
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from thinc_bench.train.curriculum import BatchLayout

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
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "System prompt name or file, as in eval; default: the one the model was trained with "
            "(recorded by recipes/sft.py), else thinc."
        },
    )
    response_prefix: str = field(
        default="",
        metadata={"help": "Harness-written start of every answer (prefill, env_mask 0), as in eval."},
    )
    decontam_benchmarks: str = field(
        default="aime2024,aime2025,aime2026,hmmt_feb2025,beyondaime",
        metadata={
            "help": "Evaluation benchmarks whose copies are dropped from the training problems (build_sft's "
            "four passes, near duplicates included; report and review list in OUTPUT_DIR/decontamination.json); "
            "empty: none."
        },
    )
    decontam_data_dir: str | None = field(
        default=None,
        metadata={"help": "Folder with <benchmark>.jsonl copies for decontamination; None reads the Hub."},
    )
    start_stage: str | None = field(
        default=None, metadata={"help": "Resume at this curriculum stage from OUTPUT_DIR/<previous stage>."}
    )
    eval_samples: int | None = field(
        default=None,
        metadata={"help": "Recorded in the checkpoint: eval's --samples; default the input model's record."},
    )
    eval_recovery_k: str | None = field(
        default=None,
        metadata={
            "help": "Recorded in the checkpoint: eval's --recovery-k; default the input model's record."
        },
    )
    eval_benchmarks: str | None = field(
        default=None,
        metadata={
            "help": "Recorded in the checkpoint: eval's --benchmarks; default the input model's record."
        },
    )
    eval_limit: int | None = field(
        default=None,
        metadata={"help": "Recorded in the checkpoint: eval's --limit; default the input model's record."},
    )
    updates_per_generation: int | None = field(
        default=None,
        metadata={
            "help": "Optimizer steps per generation batch (TRL's generation_batch_size completions, all "
            "sampled from one policy: a curriculum step), each on 1/N of it, num_iterations passes "
            "included: from the second on the policy has moved, so the ratio and clip act. Sets "
            "gradient_accumulation_steps. None: TRL's num_iterations x steps_per_generation / "
            "gradient_accumulation_steps."
        },
    )
    epochs: int = field(
        default=1,
        metadata={
            "help": "Passes over the problems, each shuffled anew; the stages draw on across them (the "
            "last stage without max_steps takes what is left)."
        },
    )
    dialect: Literal["markdown", "xml", "tool_call"] = field(
        default="markdown",
        metadata={
            "help": "Trajectory dialect, as eval's --dialect (tool_call: native tool calls declared through "
            "the chat template; its default system prompt is `tool_call`)."
        },
    )
    tool_name: str = field(
        default="python",
        metadata={"help": "tool_call dialect: the declared tool's name, as eval's --tool-name."},
    )
    exec_on: Literal["output_open", "code_close"] = field(
        default="output_open",
        metadata={
            "help": "When code runs, as eval's --exec-on (code_close: models that never open output blocks)."
        },
    )
    inject_failures_share: float = field(
        default=0.0,
        metadata={
            "help": "Recovery training: share of GRPO groups (every copy of a prompt at a step) whose first k "
            "code executions fail as in eval's Recovery@k (not run; a realistic traceback of an exception kind "
            "eval never injects); rewarded only when an output after the last failure grounds the answer. A "
            "curriculum stage may set its own. 0: none (clean rollouts)."
        },
    )
    inject_failures_k: str = field(
        default="1",
        metadata={
            "help": "Failures k injected into each rollout of such a group: a comma list drawn from per group, "
            "as eval's --recovery-k (1, or 1,2,3). A curriculum stage may set its own."
        },
    )
    dynamic_sampling: str = field(
        default="filter",
        metadata={
            "help": "off | filter | refill | drop_solved. filter: groups whose rewards are all equal (advantage "
            "0) leave the loss and its token denominator, so the batch shrinks as problems get solved; refill: "
            "DAPO's over-generation, more problems rolled out until every group of the batch has differing "
            "rewards; drop_solved: ASTER's, problems every rollout solved are dropped before each epoch. Logged "
            "per step (dynamic_sampling/effective_prompts, ...). off: TRL's DAPO loss as is."
        },
    )
    dynamic_sampling_max_rounds: int = field(
        default=4,
        metadata={
            "help": "refill: generation rounds per batch at most, the first included (verl's max_num_gen_batches); "
            "a batch still short then trains on what it holds (logged as dynamic_sampling/shortfall)."
        },
    )
    heldout_benchmarks: str | None = field(
        default=None,
        metadata={
            "help": "Held-out evaluation during training through thinc_bench.eval (benchmark names or files, as "
            "eval's --benchmarks), logged as heldout/* with the training metrics; None: off."
        },
    )
    heldout_limit: int | None = field(
        default=16, metadata={"help": "Held-out evaluation: the first N problems of each benchmark."}
    )
    heldout_samples: int = field(default=1, metadata={"help": "Held-out evaluation: samples per problem."})
    heldout_every: int | None = field(
        default=None,
        metadata={
            "help": "Held-out evaluation every N optimizer steps, and before the first; None: at every checkpoint "
            "(save_steps), 0: before and after training only."
        },
    )
    heldout_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Held-out evaluation: folder with local benchmark copies, as eval's; default decontam_data_dir."
        },
    )
    sandbox_sessions: int | None = field(
        default=None,
        metadata={
            "help": "Sandbox sessions per process, the trajectories it runs at once (each holds one); None: "
            "the process's rollouts of a generation batch (per_device_train_batch_size x steps_per_generation), "
            "all at once. Fewer bounds the sandbox's processes; the rest wait their turn."
        },
    )
    lm_head: str = field(
        default="auto",
        metadata={
            "help": "How the policy's log-probabilities are scored: 'trl' (TRL's chunked head: no full logits "
            "in memory, each chunk recomputed in the backward pass), 'plain' (one projection of the completion "
            "tokens, faster on CPU where memory is not short), or 'auto' (plain on CPU, trl elsewhere)."
        },
    )


EXAMPLES = (
    "python recipes/grpo.py                 # ThinC-nano on CPU: runs/nano/sft -> runs/nano/grpo",
    "python recipes/grpo.py --config recipes/configs/grpo_smoke.yaml   # 2 steps, a few minutes",
    "accelerate launch --config_file recipes/configs/accelerate_zero3.yaml recipes/grpo.py "
    "--config recipes/configs/grpo_qwen3_4b_thinking.yaml",
)
"""The first lines of `--help`."""


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


def batch_layout(args: Any, updates: int | None = None) -> BatchLayout:
    """`thinc_bench.train.curriculum.batch_layout`, its refusal as the recipe's one-line exit."""
    from thinc_bench.errors import ConfigError
    from thinc_bench.train.curriculum import batch_layout as layout

    try:
        return layout(args, updates)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def parse(argv: Sequence[str]) -> tuple[Any, Any, Any, object, str]:
    """The recipe's settings from its full argv (`--config` first, as `bare_argv` makes it): script
    args, GRPOConfig, ModelConfig, the curriculum (None without one) and the precision line. Nothing
    is loaded; TRL's own checks (bf16 on a machine without it) run here."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    from thinc_bench.cli import parse_recipe, quiet_libraries
    from thinc_bench.train.launch import resolve_auto_bf16

    quiet_libraries()  # before TRL's own defaults warn while parsing
    args, precision = resolve_auto_bf16(argv)
    args, curriculum = split_config(args)
    parser = TrlParser((ScriptArgs, GRPOConfig, ModelConfig))
    own = [f.name for f in fields(ScriptArgs)]
    try:
        script_args, training_args, model_args = parse_recipe(
            parser, args, __doc__.split("\n\n")[0], own, EXAMPLES, "python recipes/grpo.py"
        )
    finally:
        if curriculum is not None:
            Path(args[args.index("--config") + 1]).unlink()  # the temporary TrlParser copy of the YAML
    return script_args, training_args, model_args, curriculum, precision


def main(argv: list[str] | None = None, callbacks: Sequence[object] = ()) -> int:
    """Run the curriculum (or resume it at `--start_stage`); `callbacks` go to the trainer as well.
    Ctrl-C is one line and exit 130, naming the command that goes on (`train.launch.run_recipe`)."""
    from thinc_bench.train.launch import bare_argv, resume_grpo, run_recipe

    shown = list(sys.argv[1:] if argv is None else argv)
    full = bare_argv(shown, "grpo_nano.yaml", "ThinC-nano GRPO on CPU")
    return run_recipe(lambda: _train(full, shown, callbacks), lambda: resume_grpo(full, shown))


def _train(argv: list[str], shown: list[str], callbacks: Sequence[object]) -> int:
    import datasets
    import torch
    import transformers
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import GRPOTrainer

    from thinc_bench import benchmarks, checkpoint
    from thinc_bench.build_sft.sources import load_source
    from thinc_bench.errors import ConfigError
    from thinc_bench.eval.rollout import RolloutLimits
    from thinc_bench.prompts import load_system_prompt, python_tool
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.train import Curriculum, Stage
    from thinc_bench.train.common import attn_implementation, eval_command
    from thinc_bench.train.curriculum import ORDER_FILE, plan_stages, read_order, shuffled_order, write_order
    from thinc_bench.train.dynamic_sampling import with_zero_variance_filter
    from thinc_bench.train.heldout import heldout_callback
    from thinc_bench.train.injection import (
        FailureInjection,
        parse_failure_counts,
        parse_share,
        training_sandbox_config,
    )
    from thinc_bench.train.launch import grpo_plan, resolve_model
    from thinc_bench.train.lm_head import install_lm_head
    from thinc_bench.train.micro_batch import with_trimmed_padding
    from thinc_bench.train.policy_ratio import with_ratio_logging
    from thinc_bench.train.problem_stream import STREAM_MODES, parse_mode
    from thinc_bench.train.resume import check_saving, check_settings, read_state, resume_point, run_settings
    from thinc_bench.train.rewards import exact_match_reward
    from thinc_bench.train.rollout_func import max_prompt_tokens
    from thinc_bench.train.source import REPORT_FILE, decontaminate
    from thinc_bench.train.stage_callback import CurriculumCallback
    from thinc_bench.train.stream_rollout import build_rollout, problem_stream
    from thinc_bench.train.vllm_sync import use_layerwise_reload

    script_args, training_args, model_args, curriculum, precision = parse(argv)
    if not model_args.model_name_or_path:
        raise SystemExit("pass --model_name_or_path (the SFT output folder, a Hub id, or bundled-smollm2)")
    model_path = resolve_model(model_args.model_name_or_path)
    if not Path(model_path).exists() and (
        model_path.startswith((".", "/", "runs/")) or model_path.count("/") > 1
    ):
        raise SystemExit(  # a local path (a Hub id is org/name): say what makes it
            f"no model at {model_path}; train it first (python recipes/sft.py writes runs/nano/sft)"
        )
    if curriculum is None:  # no curriculum: one stage at the config's completion budget
        curriculum = Curriculum((Stage("stage1", None, training_args.max_completion_length, 32),))
    assert isinstance(curriculum, Curriculum)
    try:
        injection = FailureInjection(
            parse_share(script_args.inject_failures_share),
            parse_failure_counts(script_args.inject_failures_k),
            training_args.seed,
        )
        mode = script_args.dynamic_sampling = parse_mode(script_args.dynamic_sampling)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    if script_args.dynamic_sampling_max_rounds < 1:
        raise SystemExit(
            f"--dynamic_sampling_max_rounds {script_args.dynamic_sampling_max_rounds}: use 1 or more"
        )

    if script_args.sandbox_sessions is not None and script_args.sandbox_sessions < 1:
        raise SystemExit(
            f"--sandbox_sessions {script_args.sandbox_sessions}: use a positive number, or leave it unset"
        )

    set_seed(training_args.seed)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    logger.info("%s", precision)
    logger.info("script %s", script_args)
    logger.info("model %s", model_args)
    logger.info("curriculum %s", curriculum)

    # One shuffled order for the whole run, recorded at a fresh start and read back on resume; the
    # stages take consecutive, disjoint slices of it and the trainer reads it in order.
    process = PartialState()
    root = Path(training_args.output_dir)
    order_file = root / ORDER_FILE
    start = curriculum.index(script_args.start_stage) if script_args.start_stage else 0
    previous = curriculum.stages[start - 1].name if start else None
    try:
        resume_from = resume_point(training_args.resume_from_checkpoint, root, previous)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    problems = load_source(script_args.dataset_name, script_args.data_dir, limit=script_args.limit)
    names = [b.strip() for b in script_args.decontam_benchmarks.split(",") if b.strip()]
    clean = decontaminate(
        problems,
        {
            n: benchmarks.load(
                n, script_args.decontam_data_dir, check_golds=False, local_flag="--decontam_data_dir"
            )
            for n in names
        },
    )
    logger.info(
        "decontamination against %s: %d of %d problems removed %s",
        ", ".join(names) or "no benchmark",
        clean.report["removed"],
        clean.report["checked"],
        clean.report["by_benchmark"],
    )
    problems = clean.problems
    order = (
        read_order(order_file)
        if resume_from is not None
        else shuffled_order(
            [p.id for p in problems],
            training_args.seed,
            script_args.epochs,
            together={p.id: str(p.meta["pair"]) for p in problems if p.meta.get("pair") is not None},
        )
    )
    by_id = {p.id: p for p in problems}
    missing = [i for i in order if i not in by_id]
    if missing:
        raise SystemExit(
            f"{order_file} names {len(missing)} problems the data lacks (first {missing[0]!r}); resume with the "
            "dataset_name, data_dir and limit of the run that wrote it"
        )
    layout = batch_layout(training_args, script_args.updates_per_generation)
    plans = plan_stages(curriculum, len(order), layout.prompts, layout.updates)
    try:
        check_saving(training_args, layout.updates)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    logger.info(
        "generation batch: %d prompts x %d generations, %d optimizer steps on it (%d micro-batches of %d per "
        "device, %d per step); %d epochs, %d rows",
        layout.prompts,
        training_args.num_generations,
        layout.updates,
        training_args.steps_per_generation,
        training_args.per_device_train_batch_size,
        training_args.gradient_accumulation_steps,
        script_args.epochs,
        len(order),
    )
    training_args.max_steps = plans[
        -1
    ].end_step  # exactly the stages' steps; the default -1 would run 3 epochs
    training_args.max_completion_length = max(s.max_tokens for s in curriculum.stages)
    settings = run_settings(
        script_args, training_args, model_args.model_name_or_path, curriculum, process.num_processes
    )
    try:
        check_settings(root, settings, resuming=resume_from is not None, write=process.is_main_process)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    if process.is_main_process:
        plan_text = grpo_plan(
            model_args.model_name_or_path,
            script_args.dataset_name,
            len(problems),
            plans,
            layout,
            training_args,
        )
        print(plan_text, flush=True)  # noqa: T201 - once, not per rank
        checkpoint.begin(root, shlex.join(["python", "recipes/grpo.py", *shown]))
        (root / REPORT_FILE).write_text(json.dumps(clean.report, indent=1) + "\n", encoding="utf-8")
        if resume_from is None:
            write_order(order_file, order, plans, training_args.seed)
    process.wait_for_everyone()
    ordered = [by_id[i] for i in order[: plans[-1].first_row + plans[-1].rows]]
    dataset = datasets.Dataset.from_dict(
        {"prompt": [p.problem for p in ordered], "answer": [p.answer for p in ordered]}
    )
    for plan in plans:
        logger.info(
            "%s: %d generation batches, optimizer steps %d-%d, rows %d-%d of the order, %s",
            plan.stage.name,
            plan.batches,
            plan.first_step + 1,
            plan.end_step,
            plan.first_row,
            plan.first_row + plan.rows - 1,
            plan.stage,
        )
    injections = {p.stage.name: p.stage.injection(injection) for p in plans}
    if any(i.active for i in injections.values()):
        logger.info(
            "injected execution failures per stage: %s", {n: i.record() for n, i in injections.items()}
        )
    args = training_args
    args.shuffle_dataset = False  # the order above is the shuffle

    dtype = model_args.dtype if model_args.dtype in ("auto", None) else getattr(torch, model_args.dtype)
    load = {"revision": model_args.model_revision}
    tokenizer = AutoTokenizer.from_pretrained(model_path, **load)
    model = AutoModelForCausalLM.from_pretrained(
        model_path,
        dtype=dtype,
        attn_implementation=attn_implementation(model_args.attn_implementation),
        **load,
    )
    recorded = checkpoint.read(model_path) or {}
    if script_args.system_prompt is None:
        trained_on = checkpoint.system_prompt(model_path)
        default = "tool_call" if script_args.dialect == "tool_call" else "thinc"
        system_prompt = trained_on if trained_on is not None else load_system_prompt(default)
        logger.info("system prompt: %s", "the model's recorded one" if trained_on is not None else default)
    else:
        system_prompt = load_system_prompt(script_args.system_prompt)
    if args.use_vllm and args.vllm_max_model_length is None:
        # The rollout budget counts completion tokens only: the engine must hold the longest prompt too.
        tools = [python_tool(script_args.tool_name)] if script_args.dialect == "tool_call" else None
        longest = max_prompt_tokens(tokenizer, [p.problem for p in ordered], system_prompt, tools)
        args.vllm_max_model_length = args.max_completion_length + longest
        logger.info(
            "vLLM max model length %d (longest prompt %d tokens)", args.vllm_max_model_length, longest
        )

    # One session per trajectory a process rolls out at once: the pool and the rollout's gate are sized
    # from the batch layout, so no rank ever waits on a slot (the default 128 hung larger ranks).
    per_rank = args.per_device_train_batch_size * args.steps_per_generation
    sessions = per_rank if script_args.sandbox_sessions is None else script_args.sandbox_sessions
    logger.info(
        "sandbox: %d sessions for the %d rollouts of each process per generation batch", sessions, per_rank
    )
    if mode in STREAM_MODES and per_rank % args.num_generations:
        raise SystemExit(
            f"dynamic_sampling {mode} needs whole groups per process: per_device_train_batch_size x "
            f"steps_per_generation = {per_rank} is not a multiple of num_generations={args.num_generations}"
        )
    try:
        stream = problem_stream(mode, [p.id for p in problems], args.seed, resume_from)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    if resume_from is not None:
        logger.info(
            "resuming from %s (step %s)", resume_from, (read_state(resume_from) or {}).get("global_step")
        )
    with Sandbox(training_sandbox_config(sessions)) as sandbox:
        first = plans[0].stage  # the callback sets the stage of the step the run starts at
        rollout = build_rollout(
            sandbox,
            RolloutLimits(first.max_tokens, first.max_tool_calls),
            system_prompt,
            problems,
            stream=stream,
            refill=mode == "refill",
            max_rounds=script_args.dynamic_sampling_max_rounds,
            temperature=args.temperature,
            response_prefix=script_args.response_prefix,
            exec_on=script_args.exec_on,
            dialect=script_args.dialect,
            tool_name=script_args.tool_name,
            drawn_log=root / f"drawn-rank{process.process_index}.jsonl",
            injection=first.injection(injection),
        )
        trainer_cls = with_trimmed_padding(
            with_ratio_logging(GRPOTrainer)
        )  # each micro-batch at its own width
        if mode != "off":
            trainer_cls = with_zero_variance_filter(trainer_cls)
        extra_state = None if stream is None else lambda: {"problem_stream": stream.state()}
        own: list[Any] = [CurriculumCallback(plans, rollout, root, injection, extra_state)]
        if script_args.heldout_benchmarks:
            try:
                own.append(
                    heldout_callback(script_args, args, model_path, system_prompt, rollout, plans, sessions)
                )
            except ConfigError as exc:
                raise SystemExit(f"held-out evaluation: {exc}") from None
        trainer = trainer_cls(
            model=model,
            reward_funcs=[exact_match_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout,
            callbacks=[*own, *callbacks],
        )
        for callback in own[1:]:
            callback.trainer = trainer
        head = install_lm_head(trainer, script_args.lm_head)
        logger.info("LM head: %s", head)
        if args.use_vllm:
            use_layerwise_reload(trainer.vllm_generation)
        trainer.train(resume_from_checkpoint=None if resume_from is None else str(resume_from))
        trainer.save_state()  # OUTPUT_DIR/trainer_state.json: every step's reward, tool calls, lengths

        trainer.save_model(str(root))  # the final policy at OUTPUT_DIR too: `eval --model OUTPUT_DIR`
        trainer.accelerator.wait_for_everyone()

    if process.is_main_process:
        last = plans[-1].stage
        settings = dict(recorded.get("eval", {}))
        settings |= {"max_tokens": last.max_tokens, "max_tool_calls": last.max_tool_calls}
        settings |= {
            k: v
            for k, v in (
                ("samples", script_args.eval_samples),
                ("recovery_k", script_args.eval_recovery_k),
                ("benchmarks", script_args.eval_benchmarks),
                ("limit", script_args.eval_limit),
            )
            if v is not None
        }
        if script_args.dialect != "markdown":  # eval must run the checkpoint in the format it learned
            settings |= {"dialect": script_args.dialect, "exec_on": script_args.exec_on}
            if script_args.dialect == "tool_call":
                settings["tool_name"] = script_args.tool_name
        training = {
            "bf16": training_args.bf16,
            "dtype": model_args.dtype,
            "precision": precision,
            "lm_head": head,
        }
        if any(i.active for i in injections.values()):  # recovery training: which stages, what share and k
            training["inject_failures"] = {n: i.record() for n, i in injections.items()}
        for folder in (root, *(root / p.stage.name for p in plans if (root / p.stage.name).is_dir())):
            checkpoint.write(
                folder,
                system_prompt=system_prompt,
                eval_settings=settings,
                trained_by="recipes/grpo.py",
                training=training,
            )
        print(f"Checkpoint: {root} (stages: {', '.join(p.stage.name for p in plans)})")
        print(f"Evaluate this checkpoint:\n  {eval_command(str(root))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
