"""Held-out accuracy during GRPO: the project's own eval on a small fixed benchmark subset, every N steps.

A week-long run should not learn at its end that it went wrong. `HeldOutEval` runs
`thinc_bench.eval` (the same `run_eval`: the same rollout loop, sandbox, judge, records and
summary as `python -m thinc_bench.eval`) on a fixed subset of a benchmark, with the policy being
trained as the generator (the rollout's engine: the hf decoder over the live weights, the colocated
vLLM engine after a weight sync, or the server TRL keeps in sync), at the curriculum stage's token
and tool-call budget, before the first step (the starting point) and every `every` optimizer steps.
Each process evaluates its shard of the problems (`--shard rank/processes`) into
`OUTPUT_DIR/heldout/step-NNNNNN/shard-R` (an eval run directory: config, prompts, every sample's
record; `python -m thinc_bench.report` on the shards merges them into one report); the records of
every shard are pooled and summarized as eval does, written to
`OUTPUT_DIR/heldout/step-NNNNNN/summary.json` and one line of `OUTPUT_DIR/heldout.jsonl`, and
logged with that step's training metrics as `heldout/*` (TensorBoard, trainer_state.json's log
history, the report's per-step figure): accuracy (avg@n) per benchmark and overall, tool calls,
grounding, execution errors, truncation, ThinC conformance and the failure modes.

A rerun resumes: the step's directory already holds the records of an evaluation done before a
crash (eval's own resume), so only what is missing runs. The problems never change during a run
(the same ids, seeds and sampling settings at every step), so the curve compares like with like.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from thinc_bench.train.curriculum import StagePlan, stage_at

logger = logging.getLogger(__name__)

HELDOUT_DIR = "heldout"
HELDOUT_LOG = "heldout.jsonl"
PREFIX = "heldout/"


def heldout_config(
    model: str,
    benchmarks: str,
    *,
    system_prompt_file: str,
    limit: int | None,
    samples: int,
    data_dir: str | None,
    seed: int,
    concurrency: int,
    **settings: Any,
) -> Any:
    """The held-out evaluation's EvalConfig: the input model's recorded eval settings (its sampling),
    the run's prompt, dialect and prefix (`settings`), the subset, no Recovery@k; the budget is each
    stage's (set per evaluation).

    Raises:
        ConfigError: a setting eval refuses (a bad benchmark name, limit or sampling value).
    """
    from thinc_bench import checkpoint
    from thinc_bench.eval.config import EvalConfig

    recorded = checkpoint.eval_defaults(model)
    recorded.pop("system_prompt", None)
    given = {
        "model": model,
        "benchmarks": benchmarks,
        "limit": limit,
        "samples": samples,
        "data_dir": data_dir,
        "recovery_k": "0",
        "system_prompt": system_prompt_file,
        "seed": seed,
        "concurrency": concurrency,
        **settings,
    }
    return EvalConfig(**(recorded | {k: v for k, v in given.items() if v is not None}))


def _get(value: Any, *path: str) -> float | None:
    """A number inside a summary block (`{"value": x}` rates, `{"mean": x}` distributions), or None."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, dict):
        value = value.get("value", value.get("mean"))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def heldout_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The logged numbers of a pooled eval summary (`heldout/<name>`); absent ones are left out."""
    overall = summary.get("overall", {})
    found: dict[str, float | None] = {
        "accuracy": _get(overall, "mean_accuracy"),
        "tool_calls": _get(overall, "tool_calls"),
        "grounded": _get(overall, "grounding", "answered"),
        "exec_error_rate": _get(overall, "execution_errors", "per_execution"),
        "truncated": _get(overall, "truncation"),
        "no_answer": _get(overall, "no_answer"),
        "conformance": _get(overall, "thinc_conformance"),
        "posthoc": _get(overall, "failure_modes", "posthoc"),
        "nl_literals": _get(overall, "failure_modes", "nl_literals"),
        "nl_ratio": _get(overall, "failure_modes", "nl_ratio"),
        "harness_errors": _get(overall, "harness_errors"),
        "grader_timeouts": _get(overall, "grader_timeouts"),
    }
    for name, block in summary.get("per_benchmark", {}).items():
        found[f"{name}/accuracy"] = _get(block, "accuracy")
    return {PREFIX + k: v for k, v in found.items() if v is not None}


@dataclass
class HeldOutEval(TrainerCallback):
    """Evaluates the policy on a fixed benchmark subset before training and every `every` optimizer steps.

    Attributes:
        config: the eval settings (`thinc_bench.eval.EvalConfig`: benchmarks, limit, samples, sampling,
            prompt, dialect); its token and tool-call budget are replaced by each stage's.
        rollout: the GRPO rollout (its sandbox, and the engine it samples the policy with).
        plans: the curriculum's stages (the budget of the stage a step belongs to).
        root: the run's output folder.
        every: optimizer steps between evaluations (0: only before training and at the end).
        trainer: set by the recipe once the trainer exists.
    """

    config: Any
    rollout: Any
    plans: tuple[StagePlan, ...]
    root: Path
    every: int
    trainer: Any = None
    _grader: Any = field(default=None, repr=False)
    _done: set[int] = field(default_factory=set, repr=False)

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if state.global_step == 0:
            self.evaluate(0)

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        step = state.global_step
        if (self.every and step % self.every == 0) or step == state.max_steps:
            self.evaluate(step)

    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self._grader is not None:
            self._grader.close()
            self._grader = None

    def evaluate(self, step: int) -> dict[str, float]:
        """Run (or resume) the evaluation of the weights after `step` optimizer steps on every process;
        return the pooled metrics and add them to the step's training metrics."""
        from accelerate.utils import gather_object

        from thinc_bench.eval.api import prepare
        from thinc_bench.eval.run import benchmark_order, run_eval
        from thinc_bench.eval.summary import summarize
        from thinc_bench.grading import Grader, equivalent

        if step in self._done or self.trainer is None:
            return {}
        self._done.add(step)
        trainer = self.trainer
        rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
        stage = stage_at(self.plans, max(step - 1, 0)).stage
        folder = self.root / HELDOUT_DIR / f"step-{step:06d}"
        config = replace(
            self.config,
            max_tokens=stage.max_tokens,
            max_tool_calls=stage.max_tool_calls,
            shard=f"{rank}/{world}",
            out=str(folder / f"shard-{rank}"),
        )
        prepared = prepare(config)
        if self._grader is None:
            self._grader = Grader()
        if trainer.args.use_vllm and getattr(trainer, "_last_loaded_step", None) != trainer.state.global_step:
            trainer.vllm_generation.sync_weights()  # the engine holds the weights of the last rollout
            trainer._last_loaded_step = trainer.state.global_step

        async def run(generator: Any) -> None:
            try:
                if prepared.problems:
                    await run_eval(
                        config,
                        prepared.run,
                        prepared.problems,
                        label=f"held-out step {step}",
                        sandbox=self.rollout.sandbox,
                        grader=self._grader,
                        generator=generator,
                    )
            finally:  # in the loop that used it (a colocated engine's driver task lives there)
                await generator.aclose()

        with self.rollout._policy_generator(trainer, int(config.seed)) as generator:
            asyncio.run(run(generator))
        order, samples = benchmark_order(config.benchmark_names), int(config.samples or 1)
        mine = prepared.run.records()
        if mine:  # the shard's own summary (no report: the shards merge into one, see the docstring)
            prepared.run.write_summary(summarize(mine, same=equivalent, benchmarks=order, samples=samples))
        records = [r for part in gather_object([mine]) for r in part]
        summary = summarize(records, same=equivalent, benchmarks=order, samples=samples)
        found = heldout_metrics(summary)
        if trainer.accelerator.is_main_process:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            with (self.root / HELDOUT_LOG).open("a", encoding="utf-8") as log:
                log.write(json.dumps({"step": step, "stage": stage.name, **found}) + "\n")
        logger.info("held-out evaluation after step %d (%s): %s", step, stage.name, found)
        if step == 0 and trainer.state.global_step == 0:  # before training: its own log entry, at step 0
            trainer.log(dict(found))
        else:  # with the step's training metrics, in its log entry
            for name, value in found.items():
                trainer._metrics["train"][name].append(value)
        return found


def heldout_callback(
    script: Any, args: Any, model: str, system_prompt: str, rollout: Any, plans: Any, sessions: int
) -> HeldOutEval:
    """The GRPO recipe's held-out evaluation (its `heldout_*` options), its prompt written beside its runs.

    Raises:
        ConfigError: a held-out setting eval refuses.
    """
    from accelerate import PartialState

    from thinc_bench.train.resume import saves_by_steps

    root = Path(args.output_dir)
    prompt_file = root / HELDOUT_DIR / "system_prompt.txt"
    process = PartialState()
    if process.is_main_process:
        prompt_file.parent.mkdir(parents=True, exist_ok=True)
        prompt_file.write_text(system_prompt + "\n", encoding="utf-8")
    process.wait_for_everyone()
    config = heldout_config(
        model,
        script.heldout_benchmarks,
        system_prompt_file=str(prompt_file),
        limit=script.heldout_limit,
        samples=script.heldout_samples,
        data_dir=script.heldout_data_dir or script.decontam_data_dir,  # both hold benchmark copies
        seed=args.seed,
        concurrency=sessions,
        response_prefix=script.response_prefix or None,
        dialect=script.dialect,
        exec_on=script.exec_on,
        tool_name=script.tool_name,
    )
    every = script.heldout_every
    if every is None:
        every = int(args.save_steps) if saves_by_steps(args) else 0
    return HeldOutEval(config, rollout, tuple(plans), root, every)
