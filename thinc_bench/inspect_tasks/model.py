"""thinc_bench's backends as Inspect models, and which backend stands behind any Inspect model.

`--model thinc_bench/<backend>/<model>` (`thinc_bench/hf/bundled-smollm2`,
`thinc_bench/scripted/turns.jsonl`, `thinc_bench/vllm/Qwen/Qwen3-4B`; `-M` gives the backend's options,
e.g. `-M tokenizer=...`) is a thinc_bench `Generator` as an Inspect model: any Inspect solver can call
it (the chat messages are rendered with the model's own template, tools declared through it, and
Hermes `<tool_call>` blocks read back as Inspect tool calls, the way `vllm serve --tool-call-parser
hermes` does), and thinc_bench's rollout solver reaches its generator for token-exact continuation.

`spec_of` names the backend behind other Inspect models for that solver: `vllm/NAME` (thinc_bench's
in-process vLLM engine; with `-M base_url` the served model through the openai backend's token-id
completions), `hf/NAME` (the hf backend: Inspect's provider has loaded the weights too, so
`thinc_bench/hf/NAME` loads them once), and no model at all (the bundled SmolLM2 demo, as
`python -m thinc_bench.eval` without `--model`). A generator is loaded once per eval and shared by its
samples.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import weakref
from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    Model,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    StopReason,
    modelapi,
)
from inspect_ai.tool import ToolCall, ToolChoice, ToolInfo

from thinc_bench.backends import Generator, SamplingParams, load_generator, smollm2_gguf
from thinc_bench.errors import ConfigError, ContextExceeded
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.rollout import turn_seed
from thinc_bench.inspect_tasks.settings import ModelSpec
from thinc_bench.prompts.chat import parse_template_kwargs

BACKENDS = ("hf", "vllm", "openai", "scripted")
PROVIDER = "thinc_bench"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TEXT_KEY = "thinc_bench_text"
"""Assistant-message metadata: the turn's text exactly as the model wrote it (the record's source)."""

_GENERATORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Generator]] = (
    weakref.WeakKeyDictionary()
)
"""Generators by event loop (one Inspect eval), then by backend, model and options."""


def generator_for(config: EvalConfig) -> Generator:
    """The eval's generator for a resolved config's backend, model and options: loaded once per eval
    (its event loop), shared by its samples; the next eval gets its own (an engine is bound to its
    loop, and a scripted backend replays from the first turn)."""
    options = config.backend_options()
    key = (config.backend, config.model, tuple(sorted((k, str(v)) for k, v in options.items())))
    loaded = _GENERATORS.setdefault(asyncio.get_running_loop(), {})
    if key not in loaded:
        model = config.model or str(smollm2_gguf())
        loaded[key] = load_generator(config.backend, model, **options)  # type: ignore[arg-type]
    return loaded[key]


def parse_name(name: str, options: dict[str, Any]) -> ModelSpec:
    """`<backend>/<model>`, or a model alone for the hf backend (`bundled-smollm2`, a Hub id).

    Raises:
        ConfigError: no model named.
    """
    backend, _, model = name.partition("/")
    if backend not in BACKENDS:
        backend, model = "hf", name
    if not model:
        raise ConfigError(
            f"--model {PROVIDER}/{name}: name a model, e.g. {PROVIDER}/hf/bundled-smollm2 or "
            f"{PROVIDER}/scripted/turns.jsonl"
        )
    return ModelSpec(model, backend, options)


def spec_of(model: Model) -> ModelSpec:
    """The thinc_bench backend that runs Inspect's `model` on the token path.

    Raises:
        ConfigError: a provider whose tokens thinc_bench cannot reach (a hosted chat API).
    """
    provider = str(model).split("/", 1)[0]
    api = model.api
    if isinstance(api, ThincModelAPI):
        return api.spec
    if provider == "none":
        return ModelSpec(None, "hf")
    served = model.explicit_base_url or api.base_url  # --model-base-url, -M base_url, or a started server
    if provider in ("vllm", "sglang") and served:
        return ModelSpec(model.name, "openai", {"base_url": served, "tokenizer": model.name})
    if provider in ("vllm", "hf"):
        return ModelSpec(model.name, provider)
    raise ConfigError(
        f"--model {model}: the markdown and xml formats continue the model's own tokens, which the {provider} "
        f"provider does not give; use --model vllm/NAME, {PROVIDER}/<hf|vllm|openai|scripted>/NAME, or "
        "-T dialect=tool_call (native tool calls through Inspect's tool loop)"
    )


class ThincModelAPI(ModelAPI):
    """A thinc_bench generator as an Inspect model (see the module docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's own signature)
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        options = dict(model_args) | ({"base_url": base_url} if base_url else {})
        self.spec = parse_name(model_name, options)
        try:
            self._config = EvalConfig(model=self.spec.model, backend=self.spec.backend, **options)
        except TypeError as exc:  # an -M option no thinc_bench setting takes
            raise ConfigError(
                f"--model {PROVIDER}/{model_name}: {exc}; -M takes the backend's options "
                "(e.g. tokenizer, base_url, context_length, dtype)"
            ) from exc
        self._template_kwargs = parse_template_kwargs(self._config.chat_template_kwargs)

    @property
    def generator(self) -> Generator:
        return generator_for(self._config)

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        from thinc_bench.prompts import neutralise_markup, opened_plan, render_prompt_ids

        generator = self.generator
        tokenizer = generator.tokenizer
        schemas = [_schema(t) for t in tools] or None
        messages = [_message(m, lambda text: neutralise_markup(tokenizer, text)) for m in input]
        prompt_ids = render_prompt_ids(tokenizer, messages, self._template_kwargs, schemas)
        params = _sampling(self._config, config)
        request_id, seed = _sample_request(config.seed or 0)
        if seed is not None:  # each sample and turn its own stream, as on the token path
            params = dataclasses.replace(params, seed=turn_seed(seed, len(prompt_ids)))
        try:
            generation = await generator.generate(prompt_ids, params, request_id=request_id)
        except ContextExceeded as exc:
            return ModelOutput.from_content(self.model_name, "", stop_reason="model_length", error=str(exc))
        text = generation.text
        reasoning, content, calls = read_turn(
            text, opened_plan(tokenizer, prompt_ids), [t.name for t in tools]
        )
        parts: list[Any] = [ContentReasoning(reasoning=reasoning)] if reasoning else []
        parts.append(ContentText(text=content))
        message = ChatMessageAssistant(
            content=parts,
            tool_calls=calls or None,
            model=self.model_name,
            source="generate",
            metadata={TEXT_KEY: text},
        )
        stop: StopReason = (
            "max_tokens" if generation.finish_reason == "length" else "tool_calls" if calls else "stop"
        )
        output = ModelOutput.from_message(message, stop_reason=stop)
        output.usage = ModelUsage(
            input_tokens=len(prompt_ids),
            output_tokens=len(generation.token_ids),
            total_tokens=len(prompt_ids) + len(generation.token_ids),
        )
        return output

    def max_tokens(self) -> int | None:
        return self._config.max_tokens


@modelapi(name=PROVIDER)
def thinc_bench_model() -> type[ModelAPI]:
    """Registers `ThincModelAPI` as Inspect's `thinc_bench/...` models."""
    return ThincModelAPI


def _schema(info: ToolInfo) -> dict[str, Any]:
    """A tool as chat templates read it (OpenAI's function schema), parameters as declared."""
    parameters = info.parameters.model_dump(exclude_none=True)
    return {
        "type": "function",
        "function": {"name": info.name, "description": info.description, "parameters": parameters},
    }


def _message(message: ChatMessage, neutralise: Any) -> dict[str, Any]:
    """An Inspect message as the chat template takes it (tool results with printed markup broken)."""
    if isinstance(message, ChatMessageTool):
        text = message.error.message if message.error else message.text
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "name": message.function,
            "content": neutralise(text),
        }
    if isinstance(message, ChatMessageAssistant):
        out: dict[str, Any] = {"role": "assistant", "content": message.text}
        reasoning = "".join(c.reasoning for c in message.content if isinstance(c, ContentReasoning))
        if isinstance(message.content, list) and reasoning:
            out["reasoning_content"] = reasoning
        if message.tool_calls:
            out["tool_calls"] = [
                {"type": "function", "id": c.id, "function": {"name": c.function, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        return out
    return {"role": message.role, "content": message.text}


def _sampling(defaults: EvalConfig, config: GenerateConfig) -> SamplingParams:
    """Inspect's generate options over thinc_bench's defaults (the CLI's sampling and budget, docs/settings.md)."""
    values: dict[str, Any] = {
        "temperature": config.temperature,
        "top_p": config.top_p,
        "top_k": config.top_k,
        "presence_penalty": config.presence_penalty,
        "frequency_penalty": config.frequency_penalty,
        "max_tokens": config.max_tokens,
    }
    chosen = {k: v for k, v in values.items() if v is not None}
    stop = tuple(config.stop_seqs or ())
    return dataclasses.replace(defaults.sampling_params(), **chosen, stop=stop, seed=config.seed)


def _sample_request(base_seed: int) -> tuple[str | None, int | None]:
    """The running sample's request id, `<problem>/<sample>/<k>` as eval names it (the scripted backend
    finds its script by it), and its seed (eval's `sample_seed` from `base_seed`); None, None outside
    a sample (then Inspect's `--seed`, if any, is every call's)."""
    from inspect_ai.solver._task_state import sample_state

    from thinc_bench.eval.run import sample_seed

    state = sample_state()
    if state is None:
        return None, None
    meta = state.metadata or {}
    problem = str(meta.get("problem_id", state.sample_id))
    k = int(meta.get("k", 0))
    seed = sample_seed(base_seed, str(meta.get("benchmark", "")), problem, state.epoch - 1, k)
    return f"{problem}/{state.epoch - 1}/{k}", seed


_CALL = re.compile(r"<tool_call>")


def read_turn(text: str, plan_open: bool, tools: Sequence[str]) -> tuple[str, str, list[ToolCall]]:
    """A turn's reasoning, content and tool calls, as a server's reasoning and Hermes parsers read them.

    The reasoning is the `<think>` block (from the start when the prompt opened it); the content is
    what follows, up to the first call; each `<tool_call>` is a call, read as the tool_call dialect
    reads it. A call that cannot run (malformed, or of a tool not in `tools`) carries the token path's
    reason as its `parse_error`, so Inspect answers it with that error and it counts as a failed call.
    """
    from thinc_bench.trajectory import TurnTrigger

    reasoning, rest = "", text
    head = text.lstrip()
    if plan_open or head.startswith(THINK_OPEN):
        start = 0 if plan_open else text.index(THINK_OPEN) + len(THINK_OPEN)
        end = text.find(THINK_CLOSE, start)
        if end >= 0:
            reasoning, rest = text[start:end].strip("\n"), text[end + len(THINK_CLOSE) :].lstrip("\n")
    if not tools:
        return reasoning, rest, []
    found = TurnTrigger("tool_call", plan_open=plan_open).calls(text, 0)
    problems = [call.problem(tools) if tools else call.error for call in found]
    calls = [
        ToolCall(
            id=f"call_{i}",
            function=call.name or "",
            arguments=dict(call.arguments or {}) if problem is None else {},
            parse_error=None if problem is None else f"{problem}.",
        )
        for i, (call, problem) in enumerate(zip(found, problems, strict=True))
    ]
    match = _CALL.search(rest)
    content = rest[: match.start()].rstrip("\n") if calls and match else rest
    return reasoning, content, calls
