"""The tool_call loop through a function-calling server: `tools=[...]`, `tool_calls`, `role: tool`.

Hosted APIs and `vllm serve --enable-auto-tool-choice --tool-call-parser hermes` parse the model's
calls themselves and take results as `tool` messages; the model's token ids never come back. So this
loop keeps the chat messages, and writes the trajectory the token path would have: each assistant
turn in the tool_call dialect's own form (its reasoning as the plan, its content, each call as
`<tool_call>` JSON; docs/tool_calls.md), the model's end-of-turn token, then the template's tool turn
(`prompts.tool_turn_text`), tokenized with `--tokenizer`. Calls run as in `rollout.rollout` (same
session, order, failed calls, Recovery@k), so every metric is the token path's. Grading and storage
are the caller's job.

As vLLM speaks it (docs/tool_calls.md): each assistant turn goes back with its reasoning (`reasoning`
and `reasoning_content`: Qwen3's template keeps the reasoning of the turns after the last user query);
a turn whose `<tool_call>` text the server's parser could not read comes back as content with no
`tool_calls` (vLLM's hermes parser then returns the whole text), and its calls are read here as the
token path reads them (each malformed one a failed call, answered), so a malformed call never ends the
trajectory, and so are calls the model made inside its reasoning (vLLM parses the content only); arguments are written as the model wrote them (`ensure_ascii=False`, as vLLM does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from thinc_bench.backends import BackendUnavailable, SamplingParams
from thinc_bench.errors import ContextExceeded, RequestRejected
from thinc_bench.eval.rollout import (
    RolloutLimits,
    RolloutResult,
    _append_harness,
    _execute_calls,
    _fit_output,
    _room,
    refused,
)
from thinc_bench.grading import final_answer
from thinc_bench.prompts import python_tool, tool_turn_text
from thinc_bench.sandbox import Session
from thinc_bench.trajectory import TOOL_CALL, ToolCall, TurnTrigger, loads_model_json, parse, parse_call

if TYPE_CHECKING:
    from thinc_bench.backends.openai import ChatTurn, FunctionCall, OpenAIGenerator


def turn_text(turn: ChatTurn) -> str:
    """An assistant turn as the model writes it in the tool_call dialect: `<think>` reasoning, the
    content, then each call as `<tool_call>` JSON (arguments that parse are written as `json.dumps`
    writes them; others as sent, so the call reads as malformed)."""
    text = f"<think>\n{turn.reasoning.strip(chr(10))}\n</think>\n\n" if turn.reasoning else ""
    text += turn.content
    for i, call in enumerate(turn.calls):
        if i or turn.content:
            text += "\n"
        text += "<tool_call>\n" + _call_json(call) + "\n</tool_call>"
    return text


def _call_json(call: FunctionCall) -> str:
    """The call as the model wrote it, in the body of a `<tool_call>`. Its arguments are model text:
    whatever they hold (malformed JSON, nesting 100k deep, a 5,000-digit integer, a value JSON cannot
    write back), the call is written as it came, and `parse_call` answers a malformed one with an
    error result the model reads, as the token path does; nothing here raises on model output."""
    name = json.dumps(call.name, ensure_ascii=False)
    try:
        arguments: Any = loads_model_json(call.arguments)
        return json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; so is a NaN JSON cannot write
        return '{"name": ' + name + ', "arguments": ' + call.arguments + "}"


def calls_in_text(written: str) -> list[ToolCall]:
    """The calls of a turn the server returned no `tool_calls` for, read from the turn as written
    (`turn_text`) as the token path reads them: in the content when the server's parser failed on one
    (vLLM's hermes parser then returns the whole text as content), or in the reasoning (vLLM parses
    calls in the content only); an unclosed last one included, malformed ones with their `error`."""
    if "<tool_call>" not in written:
        return []
    return TurnTrigger("tool_call").calls(written, 0)


async def rollout(
    generator: OpenAIGenerator,
    session: Session,
    messages: list[dict[str, Any]],
    prompt_ids: list[int],
    params: SamplingParams,
    *,
    limits: RolloutLimits,
    tool_name: str,
    template_kwargs: Mapping[str, Any] | None = None,
    request_id: str | None = None,
) -> RolloutResult:
    """Run one tool_call trajectory through function calling; the result reads as `rollout.rollout`'s.

    Args:
        generator: an openai backend.
        session: this trajectory's sandbox session.
        messages: the chat prompt (system, user), sent as messages.
        prompt_ids: the same prompt rendered here (the record's prompt tokens; the server renders its own).
        params: sampling; each turn's `max_tokens` is what is left of the budget.
        limits: completion budget and tool-call limit.
        tool_name: the declared tool.
        template_kwargs: chat-template variables, sent to the server and used for the tool turns.
        request_id: this trajectory's id.

    Returns:
        The trajectory; an outage or refusal is `infra_error`, as in `rollout.rollout`.
    """
    tokenizer = generator.tokenizer
    tools = [python_tool(tool_name)]
    chat = list(messages)
    result = RolloutResult(list(prompt_ids), [], [], "", "eos")
    text = ""
    while True:
        room, by_context = _room(result, limits, generator.context_length)
        if room <= 0:
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            break
        turn_params = replace(params, max_tokens=min(params.max_tokens, room), stop=())
        started = time.perf_counter()
        try:
            turn = await generator.chat(
                chat, tools, turn_params, template_kwargs=template_kwargs, request_id=request_id
            )
        except ContextExceeded:
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
        written = turn_text(turn)
        ids = [int(i) for i in tokenizer.encode(written, add_special_tokens=False)]
        ids += [int(tokenizer.eos_token_id)] if turn.finish_reason != "length" else []
        result.completion_ids += ids
        result.env_mask += [1] * len(ids)
        text += written
        if turn.finish_reason == "length" or len(result.completion_ids) >= limits.max_tokens:
            result.stop_reason = "max_tokens"
            break
        in_content = [] if turn.calls else calls_in_text(written)
        if not turn.calls and not in_content:
            result.stop_reason = "answer" if final_answer(parse(text, "tool_call")) is not None else "eos"
            break
        text += str(tokenizer.eos_token)
        calls = [parse_call(_call_json(call)) for call in turn.calls] or in_content
        if result.n_tool_calls + len(calls) > limits.max_tool_calls:
            result.stop_reason = "max_tool_calls"
            break
        outputs = await _execute_calls(session, calls, tool_name, result)
        if result.executions[-1].status == "infra_error":
            result.stop_reason, result.error = "infra_error", f"sandbox: {outputs[-1]}"
            break

        def block(outs: list[str]) -> str:
            # `_fit_output` has neutralised each output already, as on the token path
            return tool_turn_text(
                tokenizer, tool_name, [TOOL_CALL.guard(out) for out in outs], template_kwargs
            )

        room, by_context = _room(result, limits, generator.context_length)
        ids, harness, result.output_cut = _fit_output(tokenizer, block, outputs, room)
        _append_harness(result, ids, tokenizer)
        text += harness
        if result.output_cut:
            result.stop_reason, result.context_exceeded = "max_tokens", by_context
            break
        chat.append(_assistant_message(turn, reasoning=generator.sends_extensions))
        ids_names = [(c.id, c.name) for c in turn.calls] or [
            (f"malformed_{len(chat)}_{i}", c.name or tool_name) for i, c in enumerate(in_content)
        ]
        chat += [
            {"role": "tool", "tool_call_id": call_id, "name": name, "content": out}
            for (call_id, name), out in zip(ids_names, outputs, strict=False)
        ]
    result.text = text
    return result


def _assistant_message(turn: ChatTurn, *, reasoning: bool) -> dict[str, Any]:
    """The turn as it goes back: its content, its calls (arguments as the server wrote them) and, to a
    server that takes fields OpenAI lacks, its reasoning under both names vLLM has read (`reasoning`
    since 0.11, `reasoning_content` before), for templates that keep it (Qwen3 after the last query)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.calls
        ],
    }
    if reasoning and turn.reasoning:
        message |= {"reasoning": turn.reasoning, "reasoning_content": turn.reasoning}
    return message
