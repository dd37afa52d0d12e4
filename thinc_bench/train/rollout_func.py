"""TRL's `rollout_func` over the thinc_bench rollout engine: the same loop, sandbox and limits as eval.

`ThincRollout(...)(prompts, trainer)` receives the prompt slice TRL already repeated
`num_generations` times (each prompt is a problem text), runs one `thinc_bench.rollout.rollout` per
prompt concurrently with `asyncio.run`, each in its own session of one long-lived `Sandbox`, and
returns `prompt_ids`, `completion_ids`, `logprobs` (None: TRL recomputes them), `env_mask` (0 on every
interpreter-output token, so the loss skips them) and extra columns for rewards and logging.

Generation uses the trainer's live policy (`PolicyGenerator` over the model TRL unwraps for
generation, parameters gathered under ZeRO-3), so every step samples from the current weights, one
request at a time. Known issue: the vLLM path (weights synced to `trl vllm-serve`, batched decoding)
is not wired here yet; the GRPO recipe accepts the hf path only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from thinc_bench import rollout as engine
from thinc_bench.backends._hf_batch import Row, decode_batch
from thinc_bench.backends.base import Generation, Generator, SamplingParams
from thinc_bench.prompts import build_messages

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from thinc_bench.sandbox import Sandbox

logger = logging.getLogger(__name__)


class PolicyGenerator(Generator):
    """A Generator over a live, in-memory model (the policy being trained); one request at a time.

    Args:
        model: the model object; generation reads its current weights on every call.
        tokenizer: its tokenizer (chat template, decoding).
        eos_ids: ids that end a turn.
        seed: seeds the sampling generator.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        eos_ids: frozenset[int],
        seed: int = 0,
    ) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._eos_ids = eos_ids
        pad = tokenizer.pad_token_id
        self._pad_id = int(pad) if pad is not None else min(eos_ids)
        self._rng = torch.Generator(device=model.device)
        self._rng.manual_seed(seed)
        # The training step and TRL's own calls share the model: one decode at a time keeps it simple.
        self._lock = asyncio.Lock()

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._tokenizer

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        """Decode one continuation with the model's current weights.

        Raises:
            torch.OutOfMemoryError: the request does not fit (the trainer's problem, loudly).
        """
        async with self._lock:
            (generation,) = decode_batch(
                self._model,
                self._tokenizer,
                [Row(prompt_ids, params, self._rng)],
                eos_ids=self._eos_ids,
                pad_id=self._pad_id,
            )
        return generation

    async def aclose(self) -> None:
        """Nothing to release: the trainer owns the model."""

    def describe(self) -> dict[str, Any]:
        return {"backend": "policy", "model": str(getattr(self._model, "name_or_path", "?"))}


@dataclass
class ThincRollout:
    """The rollout function handed to `GRPOTrainer(rollout_func=...)`.

    Attributes:
        sandbox: one started Sandbox for the trainer's life (sessions are per trajectory).
        limits: token budget (prompt + completion) and tool-call limit of the current stage.
        system_prompt: the system prompt text (as eval uses it).
        temperature: sampling temperature.
        dialect: trajectory dialect.
        response_prefix: harness-written start of every answer (prefill, env_mask 0), as eval's flag.
        generator: a fixed generator (tests, a served model); None samples from the trainer's live policy.
        problem_ids: problem text -> id, so each trajectory's request id names its problem (logs, and
            the scripted backend picks its script by it); unknown texts are called "problem".
    """

    sandbox: Sandbox
    limits: engine.RolloutLimits
    system_prompt: str
    temperature: float = 1.0
    dialect: str = "markdown"
    response_prefix: str = ""
    generator: Generator | None = None
    problem_ids: dict[str, str] = field(default_factory=dict)
    _calls: int = field(default=0, init=False, repr=False)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Run one trajectory per prompt and return TRL's rollout dict.

        Raises:
            ConfigError: a prompt that does not fit the stage's budget.
        """
        self._calls += 1
        problems = [_problem_text(p) for p in prompts]
        if self.generator is not None:
            results = asyncio.run(self._run_all(problems, self.generator))
        else:
            results = self._run_on_policy(problems, trainer)
        return {
            "prompt_ids": [r.prompt_ids for r in results],
            "completion_ids": [r.completion_ids for r in results],
            "logprobs": None,
            "env_mask": [r.env_mask for r in results],
            "thinc_text": [r.text for r in results],
            "stop_reason": [r.stop_reason for r in results],
            "n_tool_calls": [r.n_tool_calls for r in results],
            "n_exec_errors": [r.n_exec_errors for r in results],
        }

    def _run_on_policy(self, problems: list[str], trainer: Any) -> list[engine.RolloutResult]:
        """Sample from the trainer's current weights (gathered first under DeepSpeed ZeRO-3)."""
        from trl.models.utils import unwrap_model_for_generation

        tokenizer = trainer.processing_class
        eos = frozenset({int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set())
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        ) as policy:
            was_training = bool(policy.training)
            policy.eval()  # sample from the policy as it is, without dropout; restored for the loss
            try:
                # One seed per call: reproducible, and each step draws new samples.
                generator = PolicyGenerator(policy, tokenizer, eos, seed=trainer.args.seed + self._calls - 1)
                return asyncio.run(self._run_all(problems, generator))
            finally:
                policy.train(was_training)

    async def _run_all(self, problems: list[str], generator: Generator) -> list[engine.RolloutResult]:
        return list(await asyncio.gather(*(self._one(p, i, generator) for i, p in enumerate(problems))))

    async def _one(self, problem: str, index: int, generator: Generator) -> engine.RolloutResult:
        prompt_ids = engine.render_prompt(generator, build_messages(problem, self.system_prompt))
        params = SamplingParams(temperature=self.temperature, max_tokens=self.limits.max_tokens)
        session = await asyncio.to_thread(self.sandbox.session)
        try:
            return await engine.rollout(
                generator,
                session,
                prompt_ids,
                params,
                limits=self.limits,
                dialect=self.dialect,
                response_prefix=self.response_prefix,
                request_id=f"{self.problem_ids.get(problem, 'problem')}/{self._calls}-{index}",
            )
        finally:
            await asyncio.to_thread(session.close)


def _problem_text(prompt: Any) -> str:
    """The dataset's prompt column holds the problem text (or a one-turn chat, for TRL's default shape)."""
    if isinstance(prompt, str):
        return prompt
    return str(prompt[-1]["content"])
