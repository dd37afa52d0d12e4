"""The ThinC loop: generate -> execute -> feed the output back, in token ids, with limits and faults.

`rollout()` runs one trajectory: the chat prompt is rendered once, then the model generates until it
opens an output block (the dialect's stop string) or ends; the last code block runs in the
trajectory's own sandbox session; the output block is appended **as token ids** (never re-encoding
what the model wrote, so SFT masks and RL's env_mask stay exact); and the loop continues. It stops at
a final answer, the token budget, or the tool-call limit, and records why. The budget counts every
completion token after the prompt, model and interpreter alike, and nothing overruns it: output that
does not fit is cut (the block stays closed and says so), and the model's context ends a trajectory
like the budget does. Each turn samples with its own seed, derived from the sample's seed and the
tokens so far, so turns are independent and a replayed sample is the same. Many rollouts run as
asyncio tasks at once, so code execution of one overlaps generation of others. Grading and storage
are the caller's job.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from thinc_bench.backends import BackendUnavailable, Generator, SamplingParams
from thinc_bench.backends.base import MAX_SEED
from thinc_bench.errors import ContextExceeded, RequestRejected
from thinc_bench.eval.tool_results import render_result
from thinc_bench.grading import final_answer
from thinc_bench.prompts import DEFAULT_TOOL_NAME, neutralise_markup, opened_plan, tool_turn_text
from thinc_bench.prompts.tools import ResultFormat, tool_spec
from thinc_bench.sandbox import Session
from thinc_bench.trajectory import (
    DIALECTS,
    Dialect,
    ToolCall,
    Trigger,
    TurnTrigger,
    exec_stops,
    harness_block,
)

logger = logging.getLogger(__name__)

StopReason = Literal["answer", "eos", "max_tokens", "max_tool_calls", "infra_error", "harness_error"]
"""`answer` means the grader reads an answer in the final text (an unclosed or empty last box is
`eos`, as grading calls it no answer); `harness_error` is never the loop's own: a caller that caught
an exception of the loop sets it."""
ExecTrigger = Literal["output_open", "code_close"]

NO_CODE_OUTPUT = "Error: no code block to run before this output block."
"""What the interpreter 'says' when the model opens an output block without writing code first."""


OUTPUT_CUT_NOTE = "\n[output cut: the trajectory's token budget is spent]\n"
"""Ends interpreter output that was cut to fit the token budget, inside the (still closed) block."""


@dataclass(frozen=True)
class RolloutLimits:
    """Budgets of one trajectory; each hit is a recorded stop reason, not an error."""

    max_tokens: int = 32768
    """Completion tokens after the prompt, model and interpreter alike: 32K of generated
    context. The prompt is not counted; the model's context (prompt included) may end a trajectory
    sooner, which it records as `context_exceeded`."""
    max_tool_calls: int = 32
    """Code executions per trajectory; the model asking for one more ends the trajectory. 0 is no tool
    (an NL-only baseline): generation never stops for code and nothing runs, whatever the text holds."""


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
    context_exceeded: bool = False
    """The model's context, not the budget, ended the trajectory (its stop_reason is `max_tokens`)."""
    output_cut: bool = False
    """The last interpreter output was cut to fit the budget (then stop_reason is `max_tokens`)."""

    @property
    def n_tool_calls(self) -> int:
        return len(self.executions)

    @property
    def n_exec_errors(self) -> int:
        return sum(e.status != "ok" for e in self.executions)

    @property
    def gen_tokens(self) -> int:
        """Model-written completion tokens."""
        return sum(self.env_mask)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def completion_tokens(self) -> int:
        """The response length: model plus interpreter tokens after the prompt (what the budget counts)."""
        return len(self.completion_ids)

    @property
    def total_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


def refused(result: RolloutResult, exc: RequestRejected, *, model_output: bool) -> None:
    """End a trajectory whose request the server refused (HTTP 4xx). Before the model wrote anything
    the request held only the harness's prompt: the infrastructure's (`infra_error`, excluded and
    retried). After, it carried the model's own output (a tool call the server cannot read back, text
    its template refuses): the model's, like any output the harness cannot process (`harness_error`:
    wrong and counted, thinc_bench.outcomes), so a refusal cannot take a wrong answer out of the rates."""
    result.stop_reason = "harness_error" if model_output else "infra_error"
    stage = "generate: " if model_output else ""
    result.error = f"{stage}{type(exc).__name__}: {exc}"


def turn_seed(seed: int | None, tokens_so_far: int) -> int | None:
    """The seed of one turn: a fresh stream per turn (a backend restarts its generator from the request
    seed on every call), yet the same for a replay of the same sample, which reaches each turn with the
    same tokens. None stays None (the backend's shared generator)."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}/{tokens_so_far}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> 1) & MAX_SEED


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
    tool_name: str = DEFAULT_TOOL_NAME,
    template_kwargs: Mapping[str, Any] | None = None,
) -> RolloutResult:
    """Run one trajectory to its end.

    Args:
        generator: the model.
        session: this trajectory's sandbox session (fresh state; closed by the caller).
        prompt_ids: the rendered chat prompt.
        params: sampling parameters; per turn, `max_tokens` is capped by what is left of the budget
            and of the model's context, `stop` comes from the dialect, and `seed` (when set) is the
            sample's seed from which each turn's own derives (`turn_seed`).
        limits: completion budget and tool-call limit (injected failures are the session's, see Sandbox).
        dialect: the trajectory dialect (its stop string opens an output block).
        exec_on: `output_open` executes when the model opens an output block (ThinC, docs/DESIGN.md);
            `code_close` also executes as soon as a code block closes and the harness writes the
            output opener itself (ReTool-style `</code>`, or models that never open output blocks).
            What runs, and when a stop string is only a mention, is `trajectory.exec_trigger`'s
            (asked through `TurnTrigger`, which scans only what each turn added).
        response_prefix: text that starts the assistant turn (prefill); harness-written, mask 0.
        request_id: a stable id for this trajectory (the scripted backend keys its turns on it).
        tool_name: the tool_call dialect's declared tool; a call of another name is a failed call.
        template_kwargs: the prompt's chat-template variables (tool_call: the template renders each
            tool turn and the next generation prompt with them).

    In the tool_call dialect generation is not stopped at a call: when the model ends its turn,
    every `<tool_call>` of the turn runs in order (a malformed one, or one of another tool, gets an
    error as its result and counts as a failed call), and the template's rendering of the `tool`
    messages and of the next generation prompt is appended after the model's end-of-turn token.

    Returns:
        The trajectory; a backend outage or a request the server refused comes back with stop_reason
        `infra_error` and the error text, so the caller records it apart from wrong answers; reaching
        the model's context comes back as `max_tokens` with `context_exceeded`.

    Raises:
        ConfigError: from the backend, for a request that cannot be served as configured.
    """
    spec = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    tokenizer = generator.tokenizer
    context = generator.context_length
    result = RolloutResult(list(prompt_ids), [], [], "", "eos", logprobs=[] if params.logprobs else None)
    calling = spec.name == "tool_call"
    no_tool = limits.max_tool_calls == 0 and not calling
    stops = () if calling or no_tool else exec_stops(spec, exec_on)
    plan_open = opened_plan(tokenizer, prompt_ids)  # R1 distills, Qwen3 2507 thinking
    triggers = TurnTrigger(spec, plan_open=plan_open)  # scans each turn's text, not the whole again
    text = ""
    if response_prefix:
        room, by_context = _room(result, limits, context)
        ids = tokenizer.encode(response_prefix, add_special_tokens=False)
        if len(ids) > room:  # a prefix longer than the budget: what fits of it, and the trajectory ends
            result.text = _append_harness(result, ids[: max(room, 0)], tokenizer)
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            return result
        _append_harness(result, ids, tokenizer)
        text = response_prefix
    while True:
        room, by_context = _room(result, limits, context)
        if room <= 0:
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            break
        cap = min(params.max_tokens, room)
        turn = replace(
            params, max_tokens=cap, stop=stops, seed=turn_seed(params.seed, len(result.completion_ids))
        )
        started = time.perf_counter()
        try:
            generation = await generator.generate(
                result.prompt_ids + result.completion_ids, turn, request_id=request_id
            )
        except ContextExceeded as exc:
            logger.debug("request %s reached the model's context: %s", request_id, exc)
            result.stop_reason, result.context_exceeded = "max_tokens", True
            break
        except RequestRejected as exc:
            refused(result, exc, model_output=any(result.env_mask))
            break
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
        turn_start = len(text)  # the rollout's own turn boundary: this turn's calls start here
        text += generation.text
        if calling:
            calls = (
                []
                if generation.finish_reason == "length"
                else await _off_loop(triggers, triggers.calls, text, turn_start)
            )
            trigger = Trigger(bool(calls), tuple(c.code or "" for c in calls), False)
        elif no_tool:
            trigger = Trigger(False, (), False)
        else:
            trigger = await _off_loop(triggers, triggers, text, generation.stop)
        if generation.stop is None and (generation.finish_reason == "length" or not trigger.run):
            if generation.finish_reason == "length":
                # Cut short of our cap: a backend that knows a shorter context than we do.
                result.stop_reason = "max_tokens"
                result.context_exceeded = (by_context and cap == room) or len(generation.token_ids) < cap
            else:
                final = await _off_loop(triggers, triggers.parse, text)
                result.stop_reason = "answer" if final_answer(final) is not None else "eos"
            break
        if not trigger.run:
            continue  # a mention, a string, a plain ``` block or a draft in the plan: keep writing
        if calling:
            text += _end_turn(result, tokenizer)
        elif generation.stop is None:
            _drop_eos(result, tokenizer)  # the turn ended so that the code runs; it goes on after it
        if result.n_tool_calls + max(1, len(trigger.codes)) > limits.max_tool_calls:
            result.stop_reason = "max_tool_calls"
            break
        room, by_context = _room(result, limits, context)
        if room <= 0:  # the stop string took the last token allowed: no room for any output
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            break
        if calling:
            outputs = await _execute_calls(session, calls, tool_name, result)
        else:
            outputs = [await _execute(session, trigger.codes, result)]
        if result.executions[-1].status == "infra_error":
            result.stop_reason, result.error = "infra_error", f"sandbox: {outputs[-1]}"
            break
        stop = generation.stop

        def block(
            outs: list[str], trigger: Trigger = trigger, stop: str | None = stop, text: str = text
        ) -> str:
            if calling:
                return tool_turn_text(
                    tokenizer, tool_name, [spec.guard(out) for out in outs], template_kwargs
                )
            written = harness_block(text, trigger, outs[0], spec)
            return written if stop is None else _after_stop(written, text, stop)

        ids, written, result.output_cut = _fit_output(tokenizer, block, outputs, room)
        _append_harness(result, ids, tokenizer)
        text += written
        if result.output_cut:
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            break
    result.text = text
    return result


OFF_LOOP_CHARS = 20_000
"""A scan that reads more than this many characters (a long first turn, a text that restarts the
scan) runs in a worker thread: about 10 ms of regex work at 1-2 us a character, where the thread
hand-off costs ~0.1 ms. A turn's usual scan (its own text plus a block of overlap) stays inline."""


async def _off_loop(triggers: TurnTrigger, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, in a worker thread when the scan it does is big, so other rollouts keep running."""
    if triggers.backlog(args[0]) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


def _room(result: RolloutResult, limits: RolloutLimits, context: int | None) -> tuple[int, bool]:
    """Tokens the trajectory may still add (the budget left, capped by the model's context left), and
    whether the context is the tighter of the two."""
    budget = limits.max_tokens - len(result.completion_ids)
    if context is None or context - result.total_tokens >= budget:
        return budget, False
    return context - result.total_tokens, True


def _fit_output(
    tokenizer: Any, block: Callable[[list[str]], str], outputs: list[str], room: int
) -> tuple[list[int], str, bool]:
    """The output block's token ids and text, with the outputs cut (and `OUTPUT_CUT_NOTE` added) until
    they fit `room`, and whether they were cut; the block always closes. When not even empty outputs
    with the note fit, nothing is written.

    `block(outputs)` formats the whole harness-written text for the outputs (one per tool call, or
    one for a code block); the cut keeps the longest prefix of their concatenation that fits (binary
    search over characters: one encode per step), and every output after the cut is the note alone.
    Every output is neutralised first (`neutralise_markup`): in any dialect, text the code printed
    never becomes a special or added token, so it can neither end the turn nor forge one.
    """
    outputs = [neutralise_markup(tokenizer, output) for output in outputs]
    written = block(outputs)
    ids = tokenizer.encode(written, add_special_tokens=False)
    if len(ids) <= room:
        return ids, written, False
    best: tuple[list[int], str] = ([], "")
    low, high = 0, sum(len(output) for output in outputs)
    while low <= high:
        mid = (low + high) // 2
        candidate = block(_cut(outputs, mid))
        candidate_ids = tokenizer.encode(candidate, add_special_tokens=False)
        if len(candidate_ids) <= room:
            best, low = (candidate_ids, candidate), mid + 1
        else:
            high = mid - 1
    return best[0], best[1], True


def _cut(outputs: list[str], chars: int) -> list[str]:
    """The first `chars` characters of the outputs, in order: the one cut ends with `OUTPUT_CUT_NOTE`,
    and every later one is the note alone."""
    cut: list[str] = []
    for output in outputs:
        if chars >= len(output) and len(cut) < len(outputs) - 1:
            cut.append(output)
        elif chars >= 0:
            cut.append(output[:chars] + OUTPUT_CUT_NOTE)
        else:
            cut.append(OUTPUT_CUT_NOTE.strip())
        chars = -1 if chars < len(output) else chars - len(output)
    return cut


def _end_turn(result: RolloutResult, tokenizer: Any) -> str:
    """The model's end-of-turn token as text (a tool turn follows it in the record's text); a backend
    that dropped the token gets it back, written by the harness, so the ids stay the template's."""
    if not result.completion_ids or result.completion_ids[-1] != tokenizer.eos_token_id:
        _append_harness(result, [int(tokenizer.eos_token_id)], tokenizer)
    return str(tokenizer.eos_token)


def _append_harness(result: RolloutResult, ids: list[int], tokenizer: Any) -> str:
    """Append harness-written tokens (prefill, interpreter output) with mask 0; return their decode."""
    result.completion_ids += ids
    result.env_mask += [0] * len(ids)
    if result.logprobs is not None:
        result.logprobs += [math.nan] * len(ids)
    return str(tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))


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


async def _execute_calls(
    session: Session, calls: list[ToolCall], tool_name: str, result: RolloutResult
) -> list[str]:
    """Run every call of a turn in order, one result each; a call that cannot run (malformed, another
    tool) gets the reason as its result and counts as a failed call. A sandbox outage stops there.

    The declared tool (`prompts.tool_spec(tool_name)`) answers to each of its names, gives its stdin
    argument to the program, and writes results in its own format (`eval.tool_results`)."""
    spec = tool_spec(tool_name)
    outputs = []
    for call in calls:
        problem = call.problem(spec.names)
        stdin = (call.arguments or {}).get(spec.stdin_argument or "") if problem is None else None
        if problem is None and stdin is not None and not isinstance(stdin, str):
            problem = f"the tool call's argument {spec.stdin_argument!r} is not a string"
        if problem is not None:
            result.executions.append(Execution("error", 0.0, False, False, call.code or ""))
            outputs.append(f"Error: {problem}.")
            continue
        outputs.append(
            await _execute(session, (str(call.code),), result, stdin=stdin, result_format=spec.result_format)
        )
        if result.executions[-1].status == "infra_error":
            break
    return outputs


async def _execute(
    session: Session,
    codes: tuple[str, ...],
    result: RolloutResult,
    *,
    stdin: str | None = None,
    result_format: ResultFormat = "plain",
) -> str:
    """Run the blocks the model asked for, in order, up to the first that fails; one output for all,
    each block's written in `result_format` (a tool call's stdin argument goes to each block).

    Injected failures and an output block opened without code still count as calls.
    """
    if not codes:
        result.executions.append(Execution("error", 0.0, False, False))
        return NO_CODE_OUTPUT
    outputs = []
    for code in codes:
        started = time.perf_counter()
        exec_result = await session.arun(code, stdin=stdin)
        result.execute_s += time.perf_counter() - started
        result.executions.append(
            Execution(
                exec_result.status, exec_result.elapsed_s, exec_result.truncated, exec_result.injected, code
            )
        )
        outputs.append(render_result(exec_result, result_format, session.timeout_s))  # notices included
        if exec_result.status != "ok":
            break
    return "\n".join(output for output in outputs if output)
