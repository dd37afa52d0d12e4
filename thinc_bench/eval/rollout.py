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
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from thinc_bench.backends import BackendUnavailable, Generator, SamplingParams
from thinc_bench.sandbox import ExecResult, Session
from thinc_bench.trajectory import DIALECTS, Dialect

logger = logging.getLogger(__name__)

StopReason = Literal["answer", "eos", "max_tokens", "max_tool_calls", "infra_error"]
ExecTrigger = Literal["output_open", "code_close"]

NO_CODE_OUTPUT = "Error: no code block to run before this output block."
"""What the interpreter 'says' when the model opens an output block without writing code first."""

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


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
    from thinc_bench.prompts import render_prompt_ids

    return render_prompt_ids(generator.tokenizer, messages)


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
    stops = (spec.stop,) if exec_on == "output_open" else (spec.stop, spec.code_end)
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
        if generation.stop is None:
            hit_budget = generation.finish_reason == "length"
            result.stop_reason = "max_tokens" if hit_budget else ("answer" if _BOXED.search(text) else "eos")
            break
        opened_output = generation.stop == spec.stop
        if not opened_output and spec.last_code(text) is None:
            continue  # a fence closed that ends no code block (e.g. a plain ``` block): keep writing
        if result.n_tool_calls >= limits.max_tool_calls:
            result.stop_reason = "max_tool_calls"
            break
        output = await _execute(session, spec, text, result)
        if result.executions[-1].status == "infra_error":
            result.stop_reason, result.error = "infra_error", f"sandbox: {output}"
            break
        block = spec.format_output(output) if opened_output else spec.stop + spec.format_output(output)
        text += _append_harness(result, tokenizer, _after_stop(block, text, generation.stop))
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


async def _execute(session: Session, spec: Dialect, text: str, result: RolloutResult) -> str:
    """Run the block the model just closed; injected failures and missing code still count as calls."""
    code = spec.last_code(text)
    started = time.perf_counter()
    if code is None:
        exec_result = ExecResult(status="error", output=NO_CODE_OUTPUT, elapsed_s=0.0, truncated=False)
    else:
        exec_result = await session.arun(code)
    result.execute_s += time.perf_counter() - started
    result.executions.append(
        Execution(exec_result.status, exec_result.elapsed_s, exec_result.truncated, exec_result.injected)
    )
    return exec_result.output
