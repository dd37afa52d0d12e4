"""Trajectories between thinc_bench and Inspect: turns written as messages, read back as rollouts.

Both paths leave in the sample's log everything the scorer needs, so a log can be scored again
(`inspect score`) without the model or the sandbox:

- **The token path** (thinc_bench's rollout) writes the trajectory as messages: each stretch the model
  wrote is an assistant message, each stretch the harness wrote (an output block) a tool message, in
  order, so their texts joined are the trajectory's text exactly (when a tokenizer cannot split it so,
  one assistant message holds it all); the rest of the `RolloutResult` (why it stopped, each run,
  token counts) goes to the store (`ROLLOUT_KEY`). `stored_rollout` rebuilds it.
- **The native path** (Inspect's tool loop) leaves chat messages; `native_rollout` writes them as the
  tool_call dialect's trajectory exactly as `eval.function_calling` writes a function-calling server's
  turns: each assistant turn as the model wrote it (our provider keeps its text; any other provider's
  turn is written `<think>` reasoning, content, `<tool_call>` JSON), its end-of-turn token, then the
  template's tool turn for the results (`prompts.tool_turn_text`), tokenized with the record's
  tokenizer, cut to the budget as the rollout cuts it. The runs come from the sandbox's store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool, ContentReasoning

from thinc_bench.eval.rollout import Execution, RolloutResult, _append_harness, _fit_output
from thinc_bench.inspect_tasks.model import TEXT_KEY

ROLLOUT_KEY = "thinc_bench/rollout"
"""Store key of the token path's `RolloutResult`, less its text and token ids (counts instead)."""
STOP_KEY = "thinc_bench/stop"
"""Store key of the native loop's stop: `stop_reason`, `context_exceeded`, `generate_s`."""
AUTHOR_KEY = "thinc_bench"
"""Message metadata: who wrote the message's text, `model` or `harness`."""


@dataclass
class StoredRollout(RolloutResult):
    """A `RolloutResult` rebuilt from a log: token counts instead of token ids."""

    counts: tuple[int, int, int] = (0, 0, 0)
    """Prompt, completion and model-written tokens."""

    @property
    def prompt_tokens(self) -> int:
        return self.counts[0]

    @property
    def completion_tokens(self) -> int:
        return self.counts[1]

    @property
    def gen_tokens(self) -> int:
        return self.counts[2]

    @property
    def total_tokens(self) -> int:
        return self.counts[0] + self.counts[1]


def to_store(result: RolloutResult) -> dict[str, Any]:
    """What the store keeps of a token-path rollout (its text is in the messages)."""
    return {
        "stop_reason": result.stop_reason,
        "executions": [asdict(e) for e in result.executions],
        "counts": [result.prompt_tokens, result.completion_tokens, result.gen_tokens],
        "generate_s": result.generate_s,
        "execute_s": result.execute_s,
        "error": result.error,
        "context_exceeded": result.context_exceeded,
        "output_cut": result.output_cut,
    }


def stored_rollout(text: str, stored: Mapping[str, Any]) -> StoredRollout:
    """The token path's rollout from its messages' text and its store entry."""
    return StoredRollout(
        [],
        [],
        [],
        text,
        stored["stop_reason"],
        executions=[Execution(**e) for e in stored["executions"]],
        generate_s=float(stored["generate_s"]),
        execute_s=float(stored["execute_s"]),
        error=stored["error"],
        context_exceeded=bool(stored["context_exceeded"]),
        output_cut=bool(stored["output_cut"]),
        counts=tuple(int(n) for n in stored["counts"]),  # type: ignore[arg-type]
    )


def turn_messages(result: RolloutResult, tokenizer: Any, tool_name: str) -> list[ChatMessage]:
    """The completion as messages: the model's stretches as assistant messages (a harness-written
    prefill joins the first, and its metadata says which text it was), the harness's output blocks as
    tool messages; their texts joined are the trajectory's text."""
    from thinc_bench.backends.base import decode

    runs: list[tuple[int, list[int]]] = []
    for token, author in zip(result.completion_ids, result.env_mask, strict=True):
        if runs and runs[-1][0] == author:
            runs[-1][1].append(token)
        else:
            runs.append((author, [token]))
    pieces = [(author, decode(tokenizer, ids)) for author, ids in runs]
    if "".join(text for _, text in pieces) != result.text:
        return [_assistant(result.text, "model")]
    messages: list[ChatMessage] = []
    for author, text in pieces:
        if author == 1 or not messages:
            if messages and isinstance(messages[-1], ChatMessageAssistant):  # a prefill, then the model
                prefill = messages[-1].text
                messages[-1] = _assistant(prefill + text, "model")
                messages[-1].metadata = {AUTHOR_KEY: "model", "prefill": prefill}
            else:
                messages.append(_assistant(text, "model" if author == 1 else "harness"))
        else:
            messages.append(
                ChatMessageTool(content=text, function=tool_name, metadata={AUTHOR_KEY: "harness"})
            )
    return messages


def _assistant(text: str, author: str) -> ChatMessageAssistant:
    return ChatMessageAssistant(content=text, source="generate", metadata={AUTHOR_KEY: author})


def completion_text(messages: Sequence[ChatMessage]) -> str:
    """The token path's trajectory text: its messages after the prompt, joined."""
    return "".join(m.text for m in messages)


def tool_output(message: ChatMessageTool) -> str:
    """What the model read for a call: its result, or Inspect's error (as Inspect sends one to a model)."""
    return f"Error: {message.error.message}" if message.error else message.text


def turn_text(message: ChatMessageAssistant) -> str:
    """An assistant turn as the model wrote it: our provider's own text, else the tool_call dialect's
    form of it (`eval.function_calling.turn_text`: `<think>` reasoning, content, `<tool_call>` JSON)."""
    from thinc_bench.backends.openai import ChatTurn, FunctionCall
    from thinc_bench.eval import function_calling

    written = (message.metadata or {}).get(TEXT_KEY)
    if isinstance(written, str):
        return written
    reasoning = ""
    if isinstance(message.content, list):
        reasoning = "".join(c.reasoning for c in message.content if isinstance(c, ContentReasoning))
    calls = tuple(
        FunctionCall(c.id, c.function, json.dumps(c.arguments, ensure_ascii=False))
        for c in message.tool_calls or []
    )
    return function_calling.turn_text(ChatTurn(message.text, reasoning, calls, "stop"))


def native_rollout(
    messages: Sequence[ChatMessage],
    runs: Sequence[Execution],
    *,
    tokenizer: Any,
    prompt_ids: list[int],
    tool_names: Sequence[str],
    template_kwargs: Mapping[str, Any] | None,
    budget: int,
    stopped: Mapping[str, Any] | None = None,
) -> RolloutResult:
    """The native path's trajectory as the tool_call dialect writes it (see the module docstring).

    Args:
        messages: the completion: assistant and tool messages after the prompt.
        runs: the sandbox's runs, in order (`sandbox.recorded`).
        tokenizer: the record's tokenizer (its template renders the tool turns).
        prompt_ids: the rendered prompt (the record's prompt tokens).
        tool_names: every name the declared tool answers to (the first is declared).
        template_kwargs: the chat-template variables of the tool turns.
        budget: the completion budget: output past it is cut as the rollout cuts it.
        stopped: the native loop's stop (`STOP_KEY`); without one (another agent's loop), the last
            turn says it: cut short, or ended with or without an answer.

    Raises:
        ValueError: the log holds fewer runs than its tool results (a log this code did not write).
    """
    from thinc_bench.eval import function_calling
    from thinc_bench.grading import final_answer
    from thinc_bench.prompts import tool_turn_text
    from thinc_bench.trajectory import TOOL_CALL, parse

    result = RolloutResult(list(prompt_ids), [], [], "", "eos")
    left = list(runs)
    text = ""
    i, cut = 0, False
    while i < len(messages):
        message = messages[i]
        i += 1
        if not isinstance(message, ChatMessageAssistant):
            continue
        written = turn_text(message)
        ids = [int(t) for t in tokenizer.encode(written, add_special_tokens=False)]
        cut = _cut_short(message)
        ids += [] if cut else [int(tokenizer.eos_token_id)]
        result.completion_ids += ids
        result.env_mask += [1] * len(ids)
        text += written
        if cut or len(result.completion_ids) >= budget:
            cut = True
            break
        if not message.tool_calls and not function_calling.calls_in_text(written):
            continue  # a turn without calls ends the trajectory
        text += str(tokenizer.eos_token)
        outputs: list[str] = []
        while i < len(messages) and isinstance(messages[i], ChatMessageTool):
            reply = messages[i]
            assert isinstance(reply, ChatMessageTool)
            outputs.append(tool_output(reply))
            run = _run_of(reply, left, message, tool_names)
            result.executions += [run] if run is not None else []
            i += 1
        if not outputs:
            continue  # the calls were over the limit: the trajectory ends here

        def block(outs: list[str]) -> str:
            # `_fit_output` has neutralised each output, as on the function-calling path
            return tool_turn_text(
                tokenizer, tool_names[0], [TOOL_CALL.guard(o) for o in outs], template_kwargs
            )

        room = budget - len(result.completion_ids)
        harness_ids, harness, result.output_cut = _fit_output(tokenizer, block, outputs, room)
        _append_harness(result, harness_ids, tokenizer)
        text += harness
        if result.output_cut:
            break
    result.text = text
    result.execute_s = sum(e.elapsed_s for e in result.executions)
    stopped = stopped or {}
    result.context_exceeded = bool(stopped.get("context_exceeded", False))
    result.generate_s = float(stopped.get("generate_s", 0.0))
    if stopped.get("stop_reason"):  # the loop's own stop: the budget or the tool-call limit
        result.stop_reason = stopped["stop_reason"]
    elif result.output_cut or cut:
        result.stop_reason = "max_tokens"
    else:  # the model ended its turn without a call: an answer, if the grader reads one
        result.stop_reason = "answer" if final_answer(parse(text, "tool_call")) is not None else "eos"
    return result


def _cut_short(message: ChatMessageAssistant) -> bool:
    return bool((message.metadata or {}).get("stop_reason") == "max_tokens")


def _run_of(
    reply: ChatMessageTool, left: list[Execution], call: ChatMessageAssistant, names: Sequence[str]
) -> Execution | None:
    """The run behind one tool result: the next recorded run; for a call Inspect answered itself (a
    malformed call, an unknown tool: it never reached the sandbox) a failed call; None for a result of
    another of the agent's tools (not a code execution)."""
    if reply.error is not None:
        code = next(
            (c.arguments.get("code") for c in call.tool_calls or [] if c.id == reply.tool_call_id), ""
        )
        return Execution("error", 0.0, False, False, code if isinstance(code, str) else "")
    if reply.function not in names:
        return None
    if not left:
        raise ValueError(
            "the log holds more python tool results than sandbox runs (store key thinc_bench/executions); "
            "score it with the solver and sandbox that wrote it"
        )
    return left.pop(0)
