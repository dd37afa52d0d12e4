"""TRL's `rollout_func` over the thinc_bench rollout engine: the same loop, sandbox and limits as eval.

`ThincRollout(...)(prompts, trainer)` receives the prompt slice TRL already repeated
`num_generations` times (each prompt is a problem text), runs one `thinc_bench.eval.rollout.rollout` per
prompt concurrently with `asyncio.run`, each in its own session of one long-lived `Sandbox`, and
returns `prompt_ids`, `completion_ids`, `logprobs`, `env_mask` (0 on every interpreter-output token,
so the loss skips them) and extra columns for rewards and logging.

Every step samples from the current weights, through whichever engine the trainer was given:

- `use_vllm=False`: the hf backend's dynamic-batching decoder over the live policy
  (`HFGenerator.from_model`, parameters gathered under ZeRO-3); no logprobs needed.
- `vllm_mode="colocate"`: TRL's in-process `vllm.LLM`, stepped request by request
  (`ColocatedVLLMGenerator`), so trajectories join the running batch between tool calls.
- `vllm_mode="server"`: the `trl vllm-serve` / `vllm serve` server TRL pushes weights to, through
  the openai backend; every rank waits for the push to finish before its first request.

TRL syncs the engine's weights before calling this function. With vLLM, the sampled tokens'
logprobs come back (NaN on interpreter tokens, which TRL then leaves uncorrected) for TRL's
importance-sampling correction of the engine-vs-trainer mismatch.

Given the gold answers (`answers`), it grades its trajectories with the reward's judge
(`rewards.grade_rollouts`) and returns the verdicts as `grade_status`: a row left without a verdict
(an infrastructure failure, a grader crash) or failed in the harness gets `env_mask` 0 on every token, so TRL's
DAPO loss denominator counts the tokens of scored rows only, and the reward reads the same verdict.

With `injection` on (`train.injection.FailureInjection`), the whole group of a chosen prompt gets
its first k executions failed through the session exactly as eval's Recovery@k does
(`Sandbox.session(inject_failures=k)`: the code is not run; the output is a realistic traceback of
that cell from the sandbox's renderer, drawn from training's own seed stream, an interpreter block
with `env_mask` 0 like every other); the reward follows `injection.earns_reward`. The columns `inject_k` (k given) and `n_injected` (failures the trajectory met) come back
for the per-step logs, only while injection is on.

Trajectories in flight are bounded by `concurrency` (default: the sandbox's `max_sessions`), as
eval's `--concurrency` bounds its tasks: a rank may hold more rollouts than the pool has sessions,
and opening them all at once would leave every open waiting (up to the pool's 600 s) for a slot
that only a close could free. A trajectory takes the gate before its session and gives it back
after the close, so an open never waits for a slot this call holds; opens run in their own worker
threads, so the closes (and the engine's off-loop work) never queue behind them in the loop's
default executor. The recipe sizes the pool from the rollouts of a rank (all in flight at once).

A trajectory whose rollout raises (a harness bug on one hostile text, issue 37) does not end the
step: it comes back as the placeholder below with stop reason `harness_error` and the exception in
`error`; the reward gives it 0 (no escape from a negative reward) and its token leaves the loss.

A trajectory that never produced a token (the backend failed on the first turn) cannot go to TRL
as it is: TRL reads every completion's last token, and one rank raising there leaves the others
waiting in a collective. It comes back as one placeholder token (EOS) with `env_mask` 0 (no loss)
and stop reason `infra_error`, which the reward leaves unscored (advantage 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.backends.base import Generator, SamplingParams
from thinc_bench.errors import BackendUnavailable, ConfigError
from thinc_bench.eval import rollout as engine
from thinc_bench.prompts import build_messages, python_tool, render_prompt_ids
from thinc_bench.train.faults import with_training_faults
from thinc_bench.train.injection import FailureInjection

if TYPE_CHECKING:
    from thinc_bench.sandbox import Sandbox

logger = logging.getLogger(__name__)

CALLS_PER_STEP = 64
"""Rollout calls per optimizer step that get distinct seeds (TRL makes one per generation batch)."""

SERVER_PROBE_TIMEOUT_S = 10.0
"""How long to wait for the vLLM server's model list: it is up (TRL connected to it at start)."""


@dataclass
class ThincRollout:
    """The rollout function handed to `GRPOTrainer(rollout_func=...)`.

    Attributes:
        sandbox: one started Sandbox for the trainer's life (sessions are per trajectory).
        limits: completion token budget (prompt excluded) and tool-call limit of the current stage;
            the recipe's curriculum callback replaces it at each stage boundary.
        system_prompt: the system prompt text (as eval uses it).
        temperature: sampling temperature.
        dialect: trajectory dialect (`tool_call`: the prompt declares `tool_name` through the chat
            template, as eval does).
        tool_name: the tool_call dialect's declared tool.
        response_prefix: harness-written start of every answer (prefill, env_mask 0), as eval's flag.
        exec_on: when code runs, as eval's `--exec-on` (`code_close` for models that never open an
            output block themselves).
        generator: a fixed generator (tests, a frozen served model); None samples from the trainer's
            current weights through the engine it was configured with (see the module docstring).
        problem_ids: problem text -> id, so each trajectory's request id names its problem (logs, and
            the scripted backend picks its script by it); unknown texts are called "problem".
        drawn_log: a JSONL file this process appends one line to per call, `{"step", "problems"}`
            (the ids it rolled out at that global step): which problems each stage really drew;
            with injection on, also `"injected"` (each row's k).
        answers: problem text -> gold answer; when a text is known, its trajectories are graded here
            and an unscored one leaves the loss (`env_mask` 0); empty: the reward grades alone.
        injection: which groups get injected execution failures (recovery training; the
            recipe's curriculum callback sets each stage's); the default injects none.
        concurrency: trajectories in flight at once, each holding one sandbox session; None (and
            anything above it): the sandbox's `max_sessions`.
    """

    sandbox: Sandbox
    limits: engine.RolloutLimits
    system_prompt: str
    temperature: float = 1.0
    dialect: str = "markdown"
    tool_name: str = "python"
    response_prefix: str = ""
    exec_on: engine.ExecTrigger = "output_open"
    generator: Generator | None = None
    problem_ids: dict[str, str] = field(default_factory=dict)
    drawn_log: Path | None = None
    answers: dict[str, str] = field(default_factory=dict)
    injection: FailureInjection = field(default_factory=FailureInjection)
    concurrency: int | None = None
    _calls: int = field(default=0, init=False, repr=False)
    _step_calls: tuple[int, int] = field(default=(-1, 0), init=False, repr=False)
    """(global step, calls made in it): the seed's call index restarts at every step."""

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Run one trajectory per prompt and return TRL's rollout dict.

        Raises:
            ConfigError: a prompt that does not fit the stage's budget, or an unsupported vLLM layout.
            BackendUnavailable: the vLLM server cannot be reached.
        """
        self._calls += 1
        problems = [_problem_text(p) for p in prompts]
        step = global_step(trainer)
        faults = self.faults(step, problems)
        self.log_drawn(
            {"step": step, "problems": [self.problem_ids.get(p, "problem") for p in problems]}, faults
        )
        want_logprobs = bool(getattr(trainer, "use_vllm", False))
        seed = (
            None
            if getattr(trainer, "state", None) is None
            else sampling_seed(trainer, self._call_in_step(trainer))
        )
        if self.generator is not None:
            results = asyncio.run(
                self._run_all(problems, faults, self.generator, want_logprobs, seed, close=False)
            )
        else:
            with self._policy_generator(trainer, seed) as generator:
                results = asyncio.run(
                    self._run_all(problems, faults, generator, want_logprobs, seed, close=True)
                )
        return self.columns(problems, faults, results, want_logprobs)

    def faults(self, step: int, problems: list[str]) -> list[int]:
        """Injected failures per row: per problem and step, never per row, so every copy of a prompt, on
        whichever rank, gets the same k."""
        return [self.injection.failures(step, p) for p in problems]

    def log_drawn(self, line: dict[str, Any], faults: list[int]) -> None:
        """Append one line to `drawn_log` (with each row's k while injection is on)."""
        if self.drawn_log is None:
            return
        if self.injection.active:
            line["injected"] = faults
        with self.drawn_log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    def columns(
        self, problems: list[str], faults: list[int], results: list[engine.RolloutResult], want_logprobs: bool
    ) -> dict[str, Any]:
        """TRL's rollout dict of these trajectories: token ids, logprobs, env_mask and the reward columns."""
        logprobs = None
        if want_logprobs:
            if any(r.logprobs is None for r in results):
                logger.warning(
                    "the generator returned no logprobs for some trajectories: no importance-sampling "
                    "correction on their tokens"
                )
            # NaN where unknown: TRL leaves those tokens' importance ratio at 1.
            logprobs = [r.logprobs or [math.nan] * len(r.completion_ids) for r in results]
        extra: dict[str, Any] = {"problem_text": problems} | self._grade(problems, results)
        if self.injection.active:
            met = [sum(e.injected for e in r.executions) for r in results]
            extra |= {
                "inject_k": faults,
                "n_injected": met,
                "inject_recovered": [
                    _recovered(k, m, r.text) for k, m, r in zip(faults, met, results, strict=True)
                ],
            }
        return {
            "prompt_ids": [r.prompt_ids for r in results],
            "completion_ids": [r.completion_ids for r in results],
            "logprobs": logprobs,
            "env_mask": [r.env_mask for r in results],
            "thinc_text": [r.text for r in results],
            "stop_reason": [r.stop_reason for r in results],
            "n_tool_calls": [r.n_tool_calls for r in results],
            "n_exec_errors": [r.n_exec_errors for r in results],
            **extra,
        }

    def _grade(self, problems: list[str], results: list[engine.RolloutResult]) -> dict[str, Any]:
        """`grade_status` when every gold answer is known; unscored rows get `env_mask` 0 throughout."""
        if not problems or any(p not in self.answers for p in problems):
            return {}
        from thinc_bench.train.rewards import grade_rollouts, is_masked

        statuses = grade_rollouts(
            [self.answers[p] for p in problems], [r.text for r in results], [r.stop_reason for r in results]
        )
        for status, result in zip(statuses, results, strict=True):
            if is_masked(status):
                result.env_mask = [0] * len(result.completion_ids)
        return {"grade_status": statuses}

    @contextlib.contextmanager
    def _policy_generator(self, trainer: Any, seed: int | None) -> Iterator[Generator]:
        """A generator over the trainer's current weights, in the engine the trainer was configured with."""
        tokenizer = trainer.processing_class
        if not getattr(trainer, "use_vllm", False):
            from trl.models.utils import unwrap_model_for_generation

            from thinc_bench.backends.hf import HFGenerator

            with unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            ) as policy:
                was_training = bool(policy.training)
                policy.eval()  # sample from the policy as it is, without dropout; restored for the loss
                try:
                    yield HFGenerator.from_model(policy, tokenizer, seed=seed)
                finally:
                    policy.train(was_training)
            return
        vllm_generation = trainer.vllm_generation
        if vllm_generation.mode == "server":
            trainer.accelerator.wait_for_everyone()  # the main process may still be pushing weights
            yield _server_generator(trainer.args, tokenizer)
            return
        if vllm_generation.tensor_parallel_size > 1:
            raise ConfigError(
                f"vllm_tensor_parallel_size={vllm_generation.tensor_parallel_size} with vllm_mode=colocate: the "
                "multi-turn rollout runs each rank's engine on its own; use vllm_mode=server for a sharded engine"
            )
        from thinc_bench.backends.vllm import ColocatedVLLMGenerator

        llm = vllm_generation.llm
        if vllm_generation.enable_sleep_mode:  # as TRL's own generate: weights back, then the KV cache
            if getattr(vllm_generation, "_llm_weights_sleeping", False):
                vllm_generation.sync_weights()
            llm.wake_up(tags=["kv_cache"])
        try:
            yield ColocatedVLLMGenerator(llm, tokenizer)
        finally:
            if vllm_generation.enable_sleep_mode:
                llm.sleep(level=2)
                vllm_generation._llm_weights_sleeping = True

    def _call_in_step(self, trainer: Any) -> int:
        step = int(trainer.state.global_step)
        last, calls = self._step_calls
        self._step_calls = (step, calls + 1 if step == last else 1)
        return self._step_calls[1] - 1

    async def _run_all(
        self,
        problems: list[str],
        faults: list[int],
        generator: Generator,
        logprobs: bool,
        seed: int | None,
        *,
        close: bool,
    ) -> list[engine.RolloutResult]:
        # One seed per trajectory: a rank's copies of a prompt differ, and a resumed run samples as the
        # uninterrupted one did, whatever the engine (hf, colocated vLLM, server) and its batching.
        seeds = [None if seed is None else (seed * 1_000_003 + i) % 2**31 for i in range(len(problems))]
        width = self.in_flight()
        gate = asyncio.Semaphore(width)
        opener = ThreadPoolExecutor(width, thread_name_prefix="rollout-open")  # threads start as needed
        try:
            return list(
                await asyncio.gather(
                    *(
                        self._one(p, i, faults[i], generator, logprobs, seeds[i], gate, opener)
                        for i, p in enumerate(problems)
                    )
                )
            )
        finally:
            opener.shutdown(wait=False, cancel_futures=True)
            if close:
                await generator.aclose()

    def in_flight(self) -> int:
        """Trajectories run at once: `concurrency` within the sandbox's pool (never more than its slots)."""
        slots = int(self.sandbox.config.max_sessions)
        return max(1, min(slots, self.concurrency or slots))

    async def _one(
        self,
        problem: str,
        index: int,
        faults: int,
        generator: Generator,
        logprobs: bool,
        seed: int | None,
        gate: asyncio.Semaphore,
        opener: ThreadPoolExecutor,
    ) -> engine.RolloutResult:
        async with gate:  # a slot of the pool is free for every holder: the open below never waits
            try:
                result = await self._in_session(problem, index, faults, generator, logprobs, seed, opener)
            except ConfigError:
                raise  # the run's settings, not this trajectory: every rank stops alike
            except Exception as exc:  # one trajectory never ends the step (issue 37)
                result = self._failed(problem, index, generator, logprobs, exc)
        if not result.completion_ids:
            _placeholder(result, generator.tokenizer)
        return result

    def _failed(
        self, problem: str, index: int, generator: Generator, logprobs: bool, exc: Exception
    ) -> engine.RolloutResult:
        """The row of a trajectory whose rollout raised: its prompt, no completion (the placeholder
        follows), stop reason `harness_error` and the exception as its error."""
        request_id = f"{self.problem_ids.get(problem, 'problem')}/{self._calls}-{index}"
        logger.error("rollout %s raised %s: %s", request_id, type(exc).__name__, exc, exc_info=exc)
        result = engine.RolloutResult(self._prompt_ids(problem, generator), [], [], "", "harness_error")
        result.error = f"rollout: {type(exc).__name__}: {str(exc)[:500]}"
        result.logprobs = [] if logprobs else None
        return result

    def _prompt_ids(self, problem: str, generator: Generator) -> list[int]:
        messages = build_messages(problem, self.system_prompt)
        if self.dialect == "tool_call":
            return render_prompt_ids(generator.tokenizer, messages, None, [python_tool(self.tool_name)])
        return engine.render_prompt(generator, messages)

    async def _in_session(
        self,
        problem: str,
        index: int,
        faults: int,
        generator: Generator,
        logprobs: bool,
        seed: int | None,
        opener: ThreadPoolExecutor,
    ) -> engine.RolloutResult:
        prompt_ids = self._prompt_ids(problem, generator)
        params = SamplingParams(
            temperature=self.temperature, max_tokens=self.limits.max_tokens, seed=seed, logprobs=logprobs
        )
        loop = asyncio.get_running_loop()
        open_session = functools.partial(self.sandbox.session, inject_failures=faults)
        session: Any = await loop.run_in_executor(opener, open_session)
        if faults:  # the sandbox injects and numbers the cells; the texts are training's own kinds
            session = with_training_faults(session)
        try:
            return await engine.rollout(
                generator,
                session,
                prompt_ids,
                params,
                limits=self.limits,
                dialect=self.dialect,
                response_prefix=self.response_prefix,
                exec_on=self.exec_on,
                tool_name=self.tool_name,
                request_id=f"{self.problem_ids.get(problem, 'problem')}/{self._calls}-{index}",
            )
        finally:
            await asyncio.to_thread(session.close)


def _recovered(k: int, met: int, text: str) -> bool:
    from thinc_bench.train.rewards import recovered_or_false

    return recovered_or_false(k, met, text)


def global_step(trainer: Any) -> int:
    """The trainer's global optimizer step (0 without a trainer: tests, a frozen generator)."""
    return int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)


def sampling_seed(trainer: Any, call: int) -> int:
    """The base seed of the `call`-th rollout call of a step: distinct per step, rank and call.

    Each trajectory of the call samples with its own seed derived from it (and the hf backend's
    shared generator, for anything unseeded, starts from it).

    It depends on the global step (not on how many calls this process made), so a run resumed at a
    stage boundary draws what the uninterrupted run drew; and on the rank, so ranks that hold
    copies of the same prompt (a group spread over processes) do not sample identical completions.
    """
    state = getattr(trainer, "state", None)
    step = int(getattr(state, "global_step", 0) or 0)
    ranks = int(getattr(trainer.args, "world_size", 1) or 1)
    rank = int(getattr(trainer.args, "process_index", 0) or 0)
    return int(trainer.args.seed) + (step * ranks + rank) * CALLS_PER_STEP + call % CALLS_PER_STEP


def _placeholder(result: engine.RolloutResult, tokenizer: Any) -> None:
    """Give a trajectory without tokens one untrained EOS token and mark it an infrastructure failure."""
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
    result.completion_ids, result.env_mask = [int(eos)], [0]
    if result.logprobs is not None:
        result.logprobs = [math.nan]
    if result.stop_reason not in ("infra_error", "harness_error"):
        result.error = result.error or f"no completion token (stop reason {result.stop_reason})"
        result.stop_reason = "infra_error"
    logger.warning("rollout produced no token (%s): kept as an unscored placeholder", result.error)


PROMPT_CANDIDATES = 32
"""Problems, longest first by their own token count, rendered in full by `max_prompt_tokens`."""


def max_prompt_tokens(
    tokenizer: Any, problems: list[str], system_prompt: str, tools: list[dict[str, Any]] | None = None
) -> int:
    """Tokens of the longest prompt as `ThincRollout` renders it (chat template, generation header,
    and the declared tool in the tool_call dialect).

    Rendering every problem through the chat template takes minutes for DAPO's 17K; the template
    adds the same text around each problem, so only the `PROMPT_CANDIDATES` problems with the most
    tokens of their own (one fast batched tokenizer call) are rendered in full.
    """
    if not problems:
        return 0
    own = tokenizer(problems, add_special_tokens=False)["input_ids"]
    ranked = sorted(range(len(problems)), key=lambda i: len(own[i]), reverse=True)[:PROMPT_CANDIDATES]
    longest = 0
    for i in ranked:
        ids = render_prompt_ids(tokenizer, build_messages(problems[i], system_prompt), None, tools)
        longest = max(longest, len(ids))
    return longest


def server_url(args: Any) -> str:
    """The vLLM server TRL talks to, from GRPOConfig's `vllm_server_base_url` or host and port."""
    base = getattr(args, "vllm_server_base_url", None)
    return str(base).rstrip("/") if base else f"http://{args.vllm_server_host}:{args.vllm_server_port}"


def served_model(base_url: str) -> str:
    """The model name the server answers to (`vllm serve PATH` serves it as PATH).

    Raises:
        BackendUnavailable: no server, or one that lists no model.
    """
    url = f"{base_url}/v1/models"
    try:
        with urllib.request.urlopen(url, timeout=SERVER_PROBE_TIMEOUT_S) as response:
            models = json.load(response).get("data") or []
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise BackendUnavailable(
            f"vLLM server at {url} did not answer ({exc}); start it with `trl vllm-serve --model MODEL` "
            "or set vllm_server_base_url"
        ) from exc
    if not models:
        raise BackendUnavailable(
            f"vLLM server at {url} lists no model; start it with `trl vllm-serve --model MODEL`"
        )
    return str(models[0]["id"])


def _server_generator(args: Any, tokenizer: Any) -> Generator:
    from thinc_bench.backends.openai import OpenAIGenerator

    base = server_url(args)
    return OpenAIGenerator(served_model(base), base_url=f"{base}/v1", tokenizer=tokenizer)


def _problem_text(prompt: Any) -> str:
    """The dataset's prompt column holds the problem text (or a one-turn chat, for TRL's default shape)."""
    if isinstance(prompt, str):
        return prompt
    return str(prompt[-1]["content"])
