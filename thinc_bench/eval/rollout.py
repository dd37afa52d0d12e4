"""The ThinC loop: generate -> execute -> feed the output back, in token ids, with limits and faults.

`rollout()` runs one trajectory: the chat prompt is rendered once, then the model generates until it
opens an output block (the dialect's stop string) or ends; the last code block runs in the
trajectory's own sandbox session; the output block is appended **as token ids** (never re-encoding
what the model wrote, so SFT masks and RL's env_mask stay exact); and the loop continues. It stops at
a final answer, the token budget (prompt + completion <= `max_tokens`), or the tool-call limit, and
records why. Many rollouts run as asyncio tasks at once, so code execution of one overlaps
generation of others. Grading and storage are the caller's job.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from thinc_bench.backends import BackendUnavailable, Generator, SamplingParams
from thinc_bench.sandbox import Session
from thinc_bench.trajectory import (
    DIALECTS,
    Dialect,
    exec_stops,
    exec_trigger,
    harness_block,
    has_final_answer,
    parse,
)

logger = logging.getLogger(__name__)

StopReason = Literal["answer", "eos", "max_tokens", "max_tool_calls", "infra_error"]
ExecTrigger = Literal["output_open", "code_close"]

NO_CODE_OUTPUT = "Error: no code block to run before this output block."
"""What the interpreter 'says' when the model opens an output block without writing code first."""


PROMPT_TAIL_TOKENS = 8
"""Prompt tokens read to see whether the template opened `<think>` (it is the last tag written)."""


@dataclass(frozen=True)
class RolloutLimits:
    """Budgets of one trajectory; each hit is a recorded stop reason, not an error."""

    max_tokens: int = 32768
    """Prompt plus completion tokens, model and interpreter alike (the paper's 32K context)."""
    max_tool_calls: int = 32
    """Code executions per trajectory; the model asking for one more ends the trajectory."""


@dataclass(frozen=True)
class Execution:
    """One code execution as the trajectory saw it."""

    status: str
    elapsed_s: float
    truncated: bool
    injected: bool
    code: str = ""
    """The code that ran (fence indentation removed), as `trajectory.exec_trigger` chose it."""


@dataclass
class RolloutResult:
    """A finished trajectory in token ids with its per-token source mask (1 model, 0 interpreter)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    text: str
    stop_reason: StopReason
    executions: list[Execution] = field(default_factory=list)
    generate_s: float = 0.0
    execute_s: float = 0.0
    error: str | None = None
    logprobs: list[float] | None = None
    """Sampling logprob per completion token (NaN on harness tokens) when asked for and every turn
    returned them; else None."""

    @property
    def n_tool_calls(self) -> int:
        return len(self.executions)

    @property
    def n_exec_errors(self) -> int:
        return sum(e.status != "ok" for e in self.executions)

    @property
    def gen_tokens(self) -> int:
        return sum(self.env_mask)

    @property
    def total_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


def render_prompt(generator: Generator, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat prompt with the generation header, from the model's own template."""
    encoded: Any = generator.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True
    )
    ids = (
        encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    )  # transformers 5 returns a BatchEncoding
    return [int(i) for i in ids]


async def rollout(
    generator: Generator,
    session: Session,
    prompt_ids: list[int],
    params: SamplingParams,
    *,
    limits: RolloutLimits,
    dialect: str | Dialect = "markdown",
    exec_on: ExecTrigger = "output_open",
    response_prefix: str = "",
    request_id: str | None = None,
) -> RolloutResult:
    """Run one trajectory to its end.

    Args:
        generator: the model.
        session: this trajectory's sandbox session (fresh state; closed by the caller).
        prompt_ids: the rendered chat prompt.
        params: sampling parameters; `max_tokens` and `stop` are set per turn from `limits`.
        limits: token budget and tool-call limit (injected failures are the session's, see Sandbox).
        dialect: the trajectory dialect (its stop string opens an output block).
        exec_on: `output_open` executes when the model opens an output block (ThinC, DESIGN.md);
            `code_close` also executes as soon as a code block closes and the harness writes the
            output opener itself (ReTool-style `</code>`, or models that never open output blocks).
            What runs, and when a stop string is only a mention, is `trajectory.exec_trigger`'s.
        response_prefix: text that starts the assistant turn (prefill); harness-written, mask 0.
        request_id: a stable id for this trajectory (the scripted backend keys its turns on it).

    Returns:
        The trajectory; a backend outage comes back with stop_reason `infra_error` and the error text,
        so the caller records it apart from wrong answers.
    """
    spec = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    tokenizer = generator.tokenizer
    result = RolloutResult(list(prompt_ids), [], [], "", "eos", logprobs=[] if params.logprobs else None)
    text = _append_harness(result, tokenizer, response_prefix) if response_prefix else ""
    stops = exec_stops(spec, exec_on)
    plan_open = _prompt_opens_plan(tokenizer, prompt_ids)
    while True:
        budget = limits.max_tokens - result.total_tokens
        if budget <= 0:
            result.stop_reason = "max_tokens"
            break
        turn = replace(params, max_tokens=min(params.max_tokens, budget), stop=stops)
        started = time.perf_counter()
        try:
            generation = await generator.generate(
                result.prompt_ids + result.completion_ids, turn, request_id=request_id
            )
        except BackendUnavailable as exc:
            result.stop_reason, result.error = "infra_error", f"{type(exc).__name__}: {exc}"
            break
        finally:
            result.generate_s += time.perf_counter() - started
        result.completion_ids += generation.token_ids
        result.env_mask += [1] * len(generation.token_ids)
        if result.logprobs is not None:
            if generation.logprobs is None:
                result.logprobs = None  # a turn without them: none for the trajectory, not a ragged list
            else:
                result.logprobs += generation.logprobs
        text += generation.text
        hit_budget = generation.stop is None and generation.finish_reason == "length"
        trigger = exec_trigger(text, generation.stop, spec, plan_open=plan_open)
        if generation.stop is None and (hit_budget or not trigger.run):
            answered = has_final_answer(parse(text, spec.name))
            result.stop_reason = "max_tokens" if hit_budget else ("answer" if answered else "eos")
            break
        if not trigger.run:
            continue  # a mention, a string, a plain ``` block or a draft in the plan: keep writing
        if generation.stop is None:
            _drop_eos(result, tokenizer)  # the turn ended so that the code runs; it goes on after it
        if result.n_tool_calls + max(1, len(trigger.codes)) > limits.max_tool_calls:
            result.stop_reason = "max_tool_calls"
            break
        output = await _execute(session, trigger.codes, result)
        if result.executions[-1].status == "infra_error":
            result.stop_reason, result.error = "infra_error", f"sandbox: {output}"
            break
        block = harness_block(text, trigger, output, spec)
        if generation.stop is not None:
            block = _after_stop(block, text, generation.stop)
        text += _append_harness(result, tokenizer, block)
    result.text = text
    return result


def _append_harness(result: RolloutResult, tokenizer: Any, text: str) -> str:
    """Append harness-written text (prefill, interpreter output) as token ids with mask 0."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    result.completion_ids += ids
    result.env_mask += [0] * len(ids)
    if result.logprobs is not None:
        result.logprobs += [math.nan] * len(ids)
    return str(text)


def _after_stop(formatted: str, text: str, stop: str) -> str:
    """What to append after the model's text so the output block reads exactly as the dialect writes it.

    A backend keeps the token that completed the stop string whole, so the text may already run a few
    characters past it (e.g. the newline of "```output\n"); those characters are not written twice.
    """
    overrun = text[text.rfind(stop) + len(stop) :]
    return formatted[len(overrun) :] if overrun and formatted.startswith(overrun) else formatted


def _drop_eos(result: RolloutResult, tokenizer: Any) -> None:
    """Remove the end-of-turn token the model just sampled, so its turn continues after the output."""
    if result.completion_ids and result.completion_ids[-1] == tokenizer.eos_token_id:
        del result.completion_ids[-1], result.env_mask[-1]
        if result.logprobs:
            del result.logprobs[-1]


def _prompt_opens_plan(tokenizer: Any, prompt_ids: list[int]) -> bool:
    """Whether the chat template ended the prompt inside `<think>` (R1 distills, Qwen3 2507 thinking)."""
    tail = str(tokenizer.decode(prompt_ids[-PROMPT_TAIL_TOKENS:], skip_special_tokens=False))
    return tail.rstrip().endswith("<think>")


async def _execute(session: Session, codes: tuple[str, ...], result: RolloutResult) -> str:
    """Run the blocks the model asked for, in order, up to the first that fails; one output for all.

    Injected failures and an output block opened without code still count as calls.
    """
    if not codes:
        result.executions.append(Execution("error", 0.0, False, False))
        return NO_CODE_OUTPUT
    outputs = []
    for code in codes:
        started = time.perf_counter()
        exec_result = await session.arun(code)
        result.execute_s += time.perf_counter() - started
        result.executions.append(
            Execution(
                exec_result.status, exec_result.elapsed_s, exec_result.truncated, exec_result.injected, code
            )
        )
        outputs.append(exec_result.output.rstrip("\r\n"))
        if exec_result.status != "ok":
            break
    return "\n".join(output for output in outputs if output)
