"""The curriculum inside one GRPO trainer: per-stage rollout limits, a checkpoint at each boundary, resumable saves.

One trainer runs all stages, so the optimizer state and the learning-rate schedule run on across
stage boundaries (a trainer per stage restarted both: a sawtooth learning rate and a cold Adam).
`CurriculumCallback` sets the rollout's token budget and tool-call limit before every optimizer step
(and its failure injection, `train.injection`) from the stage that step belongs to, and asks the trainer for a full checkpoint (weights, tokenizer,
optimizer, scheduler, RNG states, trainer state) at every stage's last step. The checkpoint the
trainer writes as `checkpoint-N` is renamed `OUTPUT_DIR/<stage>` once every process has finished
writing its part (DeepSpeed shards, per-rank RNG states), and no process goes on before the rename:
the folder is both the stage's evaluable model and the exact resume point of `--start_stage`.

Every checkpoint it sees saved (the stage ends, and every `save_steps` optimizer steps with
`save_strategy: steps`) gets `thinc_state.json` last, once every process has written its part
(`train.resume`): the global step, the stage and the recipe's own state (the dynamic-sampling
problem stream), which marks the checkpoint complete for a rerun to resume from.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from thinc_bench.eval.rollout import RolloutLimits
from thinc_bench.train.curriculum import StagePlan, stage_at
from thinc_bench.train.injection import FailureInjection
from thinc_bench.train.resume import STATE_FILE, write_json

logger = logging.getLogger(__name__)


class CurriculumCallback(TrainerCallback):
    """Switches `rollout.limits` per stage and saves `OUTPUT_DIR/<stage>` at each stage's end.

    Args:
        plans: the stages laid out over global steps (`plan_stages`).
        rollout: the rollout function (anything with a settable `limits`, and `injection` when
            `injection` is given).
        output_dir: the trainer's output folder.
        injection: the recipe's failure injection, which each stage may override; None leaves
            `rollout.injection` alone.
        state: the recipe's own state to record in each checkpoint (JSON-ready), e.g. the problem
            stream's; None records only the step and stage.
    """

    def __init__(
        self,
        plans: Sequence[StagePlan],
        rollout: Any,
        output_dir: str | Path,
        injection: FailureInjection | None = None,
        state: Callable[[], dict[str, object]] | None = None,
    ) -> None:
        self.plans = tuple(plans)
        self.extra_state = state
        self.rollout = rollout
        self.output_dir = Path(output_dir)
        self.injection = injection
        self._ends = {p.end_step: p for p in self.plans}

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self._enter(state.global_step)

    def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self._enter(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if state.global_step in self._ends:
            control.should_save = True

    def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        from accelerate import PartialState

        process = PartialState()
        process.wait_for_everyone()  # every rank has written its part of checkpoint-N
        written = self.output_dir / f"checkpoint-{state.global_step}"
        plan = self._ends.get(state.global_step)
        if args.should_save and written.is_dir():
            record = {
                "global_step": state.global_step,
                "stage": stage_at(self.plans, max(state.global_step - 1, 0)).stage.name,
                **(self.extra_state() if self.extra_state is not None else {}),
            }
            write_json(written / STATE_FILE, record)  # last: the checkpoint is complete
            if plan is not None:
                final = self.output_dir / plan.stage.name
                if final.exists():  # an earlier run's stage: replaced, never mixed
                    shutil.rmtree(final)
                written.rename(final)
                logger.info("stage %s done at step %d: %s", plan.stage.name, state.global_step, final)
        process.wait_for_everyone()  # nobody reads the folder before it is complete

    def _enter(self, step: int) -> None:
        stage = stage_at(self.plans, step).stage
        limits = RolloutLimits(stage.max_tokens, stage.max_tool_calls)
        if self.rollout.limits != limits:
            logger.info("step %d: stage %s (%s)", step, stage.name, limits)
            self.rollout.limits = limits
        if self.injection is not None:
            injection = stage.injection(self.injection)
            if self.rollout.injection != injection:
                logger.info("step %d: stage %s injects failures %s", step, stage.name, injection)
                self.rollout.injection = injection
