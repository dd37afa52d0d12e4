"""The two paths, each what it says: thinc_bench's own rollout, and native tool calls in Inspect's loop.

- `rollout()` (**token path**): ThinC's markdown format, ReTool's tags, any dialect. It drives
  `eval.rollout.rollout` with thinc_bench's backend for the Inspect model (`model.spec_of`) in the
  sample's sandbox session: the model's own tokens are continued, never decoded and re-encoded, and
  the interpreter's output is appended as tokens, exactly as `python -m thinc_bench.eval` does (same
  prompt renderer, seeds, budget, stop strings and triggers). The turns are then written into the
  sample's messages for `inspect view` (`records.turn_messages`).
- `tool_loop()` (**native path**): native tool calls through Inspect. The model (any Inspect provider)
  is called with the `python` tool declared; Inspect executes its calls (`execute_tools`) in the
  sample's thinc_bench session; the loop stops as thinc_bench's does: at an answer, the token budget
  (completion tokens as the record's tokenizer counts them, the tool turns included) or the
  tool-call limit. This is the `--api chat` path of the CLI with Inspect as the server's client.

Both set the prompt as eval builds it (system prompt, few-shot examples, the preset's user turn) and
leave the trajectory in the log for the scorer. A sample whose processing raises (not the machinery's
outage, not a setting) becomes a failed record, as in eval: one trajectory never ends a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Model,
    ModelOutput,
    ModelUsage,
    execute_tools,
    get_model,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import store

from thinc_bench.errors import BackendUnavailable, ConfigError, DatasetError, SandboxUnavailable
from thinc_bench.eval._failures import Stage
from thinc_bench.eval.config import EvalConfig
from thinc_bench.inspect_tasks.dataset import problem_of
from thinc_bench.inspect_tasks.model import ThincModelAPI, generator_for, spec_of
from thinc_bench.inspect_tasks.names import registered
from thinc_bench.inspect_tasks.records import ROLLOUT_KEY, STOP_KEY, native_rollout, to_store, turn_messages
from thinc_bench.inspect_tasks.sandbox import recorded, session
from thinc_bench.inspect_tasks.settings import ModelSpec, TaskArgs, tokenizer_name
from thinc_bench.inspect_tasks.tool import python

FAILED_KEY = "failed"
"""In the rollout's store entry: the failed record of a trajectory whose processing raised."""
SETTINGS_KEY = "thinc_bench/settings"
"""Store key: the settings the sample ran with (backend, model, format, budget, sampling)."""
AUDITED = (
    "backend",
    "model",
    "preset",
    "dialect",
    "max_tokens",
    "max_tool_calls",
    "exec_on",
    "response_prefix",
    "few_shot",
    "system_prompt",
    "user_template",
    "tool_name",
    "sandbox_state",
    "exec_timeout_s",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "chat_template_kwargs",
)


def record_settings(config: EvalConfig, path: str, tokenizer: str) -> None:
    """Keep in the sample's store what it ran with (the model None is the bundled demo), and the
    tokenizer its record is counted with: `inspect score` reads the trajectory as it ran."""
    settings = {name: getattr(config, name) for name in AUDITED} | {"tokenizer": tokenizer}
    store().set(
        SETTINGS_KEY, {**settings, "path": path, "model": config.model or "bundled SmolLM2-135M demo"}
    )


def generate_options(model: Model) -> dict[str, Any]:
    """Inspect's generate options in force for this sample: the model's, the task's and the CLI's."""
    from inspect_ai.model._generate_config import active_generate_config

    return model.config.merge(active_generate_config()).model_dump(exclude_none=True)


def prompt_messages(config: EvalConfig, problem: str) -> list[dict[str, str]]:
    """The chat prompt as eval builds it: system prompt and few-shot examples, the preset's user turn."""
    from thinc_bench.prompts import build_messages, load_examples, load_system_prompt, load_user_template

    return build_messages(
        problem,
        load_system_prompt(str(config.system_prompt)),
        load_examples(config.few_shot),
        load_user_template(config.user_template),
    )


def as_inspect(messages: list[dict[str, str]]) -> list[ChatMessage]:
    """eval's prompt messages as Inspect's, for the log."""
    return [
        ChatMessageSystem(content=m["content"])
        if m["role"] == "system"
        else ChatMessageUser(content=m["content"])
        for m in messages
    ]


def inspect_prompt(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """Inspect's prompt messages back as eval's (role and text), to render the prompt's tokens."""
    return [{"role": m.role, "content": m.text} for m in messages]


def resolve(args: TaskArgs, model: Model, *, native: bool) -> tuple[EvalConfig, ModelSpec | None]:
    """The sample's config for Inspect's model, and the thinc_bench backend behind it (None for a
    provider thinc_bench cannot drive, which only the native path takes).

    Raises:
        ConfigError: a setting the CLI refuses, or (token path) a model whose tokens are out of reach.
    """
    try:
        spec: ModelSpec | None = spec_of(model)
    except ConfigError:
        if not native:
            raise
        spec = None
    if spec is not None and spec.backend == "openai" and args.tokenizer:  # a served model's own tokenizer
        spec = dataclasses.replace(spec, options={**spec.options, "tokenizer": args.tokenizer})
    generate = generate_options(model)
    return args.config(spec, generate), spec


def record_tokenizer(args: TaskArgs, config: EvalConfig, spec: ModelSpec | None) -> str:
    """The tokenizer the native path's record is written and counted with: `-T tokenizer`, else the
    model's own (a thinc_bench, vllm or hf model).

    Raises:
        ConfigError: neither is known (a hosted model: name a tokenizer whose template renders tools).
    """
    if args.tokenizer:
        return args.tokenizer
    if spec is None:
        raise ConfigError(
            "the native tool-call path writes each trajectory as the tool_call dialect reads it, with a tokenizer "
            "whose chat template renders tool calls; pass -T tokenizer=NAME (e.g. Qwen/Qwen3-4B, or a folder)"
        )
    return tokenizer_name(config)


@solver(name=registered("rollout"))
def rollout(**task_args: Any) -> Solver:
    """thinc_bench's own rollout (the token path): see the module docstring.

    Args:
        **task_args: the task's arguments (`settings.TaskArgs`: preset, dialect, budget, ...).
    """
    args = TaskArgs.of(**task_args)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from thinc_bench.eval import rollout as engine
        from thinc_bench.eval.run import failure_record, sample_seed
        from thinc_bench.eval.store import INFRA_STATUS
        from thinc_bench.prompts import parse_template_kwargs, python_tool, render_prompt_ids

        model = get_model()
        config, spec = resolve(args, model, native=False)
        record_settings(config, "token", tokenizer_name(config))
        generator = generator_for(config)
        generator.check(int(config.max_tokens or 1))
        tokenizer = generator.tokenizer
        problem = problem_of(state.input_text, state.target.text, state.metadata)
        k, sample_idx = int(state.metadata.get("k", 0)), state.epoch - 1
        messages = prompt_messages(config, problem.problem)
        state.messages = as_inspect(messages)
        template_kwargs = parse_template_kwargs(config.chat_template_kwargs)
        tools = [python_tool(config.tool_name)] if config.dialect == "tool_call" else None
        prompt_ids = render_prompt_ids(tokenizer, messages, template_kwargs, tools)
        params = config.sampling_params(
            seed=sample_seed(config.seed, problem.benchmark, problem.id, sample_idx, k)
        )
        per_call = generate_options(model).get("max_tokens")
        if per_call:
            params = dataclasses.replace(params, max_tokens=min(int(per_call), params.max_tokens))
        limits = engine.RolloutLimits(int(config.max_tokens or 1), int(config.max_tool_calls or 1))
        stage = _rollout_stage()
        result = None
        try:
            result = await engine.rollout(
                generator,
                session().session,
                prompt_ids,
                params,
                limits=limits,
                dialect=config.dialect,
                exec_on=config.exec_on,  # type: ignore[arg-type]
                response_prefix=config.response_prefix or "",
                request_id=f"{problem.id}/{sample_idx}/{k}",
                tool_name=config.tool_name,
                template_kwargs=template_kwargs,
            )
        except (ConfigError, DatasetError, asyncio.CancelledError):
            raise
        except Exception as exc:
            failed = failure_record(problem, sample_idx, k, exc, stage.of(exc), result)
            if failed.status == INFRA_STATUS:
                raise
            store().set(ROLLOUT_KEY, {FAILED_KEY: dataclasses.asdict(failed)})
            return state
        state.messages += turn_messages(result, tokenizer, config.tool_name)
        state.output = ModelOutput.from_content(
            str(model),
            state.messages[-1].text,
            stop_reason="max_tokens" if result.stop_reason == "max_tokens" else "stop",
        )
        state.output.usage = ModelUsage(  # the model's tokens; the interpreter's are in the record
            input_tokens=result.prompt_tokens,
            output_tokens=result.gen_tokens,
            total_tokens=result.prompt_tokens + result.gen_tokens,
        )
        store().set(ROLLOUT_KEY, to_store(result))
        if result.stop_reason == "infra_error":  # an outage: the sample is retried, never scored
            raise (SandboxUnavailable if str(result.error).startswith("sandbox") else BackendUnavailable)(
                str(result.error)
            )
        return state

    return solve


def _rollout_stage() -> Stage:
    """eval's stage tracker inside the rollout (a failure then names generate, execute or parse)."""
    stage = Stage()
    stage.name = "rollout"
    return stage


@solver(name=registered("tool_loop"))
def tool_loop(**task_args: Any) -> Solver:
    """Native tool calls through Inspect's tool loop (the native path): see the module docstring.

    Args:
        **task_args: the task's arguments (`settings.TaskArgs`).
    """
    args = TaskArgs.of(**task_args)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from thinc_bench.backends import load_tokenizer
        from thinc_bench.prompts import parse_template_kwargs, python_tool, render_prompt_ids, tool_spec

        model = get_model()
        config, spec = resolve(args, model, native=True)
        tokenizer_id = record_tokenizer(args, config, spec)
        record_settings(config, "native", tokenizer_id)
        tokenizer = load_tokenizer(tokenizer_id)
        problem = problem_of(state.input_text, state.target.text, state.metadata)
        messages = prompt_messages(config, problem.problem)
        state.messages = as_inspect(messages)
        state.tools = [python(config.tool_name)]
        template_kwargs = parse_template_kwargs(config.chat_template_kwargs)
        prompt_ids = render_prompt_ids(tokenizer, messages, template_kwargs, [python_tool(config.tool_name)])
        budget, calls_allowed = int(config.max_tokens or 1), int(config.max_tool_calls or 1)
        context = model.api.generator.context_length if isinstance(model.api, ThincModelAPI) else None
        names = tool_spec(config.tool_name).names
        prompt_len = len(state.messages)
        per_call = generate_options(model).get("max_tokens")
        stop: dict[str, Any] = {"stop_reason": None, "context_exceeded": False, "generate_s": 0.0}
        while True:
            sofar = native_rollout(
                state.messages[prompt_len:],
                recorded(),
                tokenizer=tokenizer,
                prompt_ids=prompt_ids,
                tool_names=names,
                template_kwargs=template_kwargs,
                budget=budget,
            )
            room = budget - len(sofar.completion_ids)
            by_context = context is not None and context - sofar.total_tokens < room
            room = min(room, context - sofar.total_tokens) if context is not None else room
            if room <= 0 or sofar.output_cut:
                stop.update(stop_reason="max_tokens", context_exceeded=by_context)
                break
            started = time.perf_counter()
            state = await generate(state, tool_calls="none", max_tokens=min(room, int(per_call or room)))
            stop["generate_s"] += time.perf_counter() - started
            message = state.messages[-1]
            if isinstance(message, ChatMessageAssistant):
                message.metadata = {**(message.metadata or {}), "stop_reason": state.output.stop_reason}
            if state.output.stop_reason in ("max_tokens", "model_length"):
                stop.update(
                    stop_reason="max_tokens", context_exceeded=state.output.stop_reason == "model_length"
                )
                break
            if not isinstance(message, ChatMessageAssistant) or not message.tool_calls:
                break  # the model ended its turn: `answer` or `eos`, as the grader reads the text
            if len(sofar.executions) + len(message.tool_calls) > calls_allowed:
                stop["stop_reason"] = "max_tool_calls"
                break
            executed = await execute_tools(state.messages, state.tools)
            state.messages.extend(executed.messages)
        store().set(STOP_KEY, stop)
        return state

    return solve
