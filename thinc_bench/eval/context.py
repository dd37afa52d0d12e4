"""What the model's context leaves for a run: each problem's prompt ids, and a budget that fits.

`--max-tokens` is the completion budget after the prompt. With a `--model` and no budget given, the
default is 32,768 tokens (docs/settings.md), which a small model cannot hold (SmolLM2-135M has 8,192): such a
run would be refused at start. `fit_budget` makes the budget follow the model's context instead:
the context less the run's longest prompt, so every trajectory gets the same budget and none meets
the context first. A budget the user gave (or a checkpoint recorded) is never changed; it is checked
at start as before (`Generator.check`). The budget is settled before the run directory is opened,
since it is one of the settings the directory's hash holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinc_bench.benchmarks import Problem
    from thinc_bench.eval.config import EvalConfig


def prompt_ids(
    config: EvalConfig, tokenizer: Any, problems: Sequence[Problem]
) -> dict[tuple[str, str], list[int]]:
    """Each problem's chat prompt as the model is given it (`prompts.render_prompt_ids`, the
    renderer SFT examples and GRPO use too), keyed by (benchmark, problem id)."""
    from thinc_bench.prompts import (
        build_messages,
        load_examples,
        load_system_prompt,
        load_user_template,
        parse_template_kwargs,
        python_tool,
        render_prompt_ids,
    )

    system_prompt = load_system_prompt(str(config.system_prompt))
    examples = load_examples(config.few_shot)
    template_kwargs = parse_template_kwargs(config.chat_template_kwargs)
    tools = [python_tool(config.tool_name)] if config.dialect == "tool_call" else None
    user_template = load_user_template(config.user_template)
    prompts: dict[tuple[str, str], list[int]] = {}
    for problem in problems:
        key = (problem.benchmark, problem.id)
        if key not in prompts:
            messages = build_messages(problem.problem, system_prompt, examples, user_template)
            prompts[key] = render_prompt_ids(tokenizer, messages, template_kwargs, tools)
    return prompts


def model_context(config: EvalConfig) -> int | None:
    """The context (prompt plus completion) the run's model serves, read without loading its
    weights: the model config's `max_position_embeddings` (hf, vllm; vllm's `--max-model-len` when
    given), `--context-length` for the openai and scripted backends; None when it cannot be told."""
    if config.backend in ("openai", "scripted"):
        return config.context_length
    if config.backend == "vllm" and config.max_model_len:
        return int(config.max_model_len)
    from transformers import AutoConfig

    from thinc_bench.backends import _sources, smollm2_gguf

    source = _sources.resolve(str(config.model or smollm2_gguf()), revision=config.revision)
    model_config = AutoConfig.from_pretrained(source.load_path, revision=config.revision)
    context = getattr(model_config, "max_position_embeddings", None)
    return int(context) if context else None


def _tokenizer(config: EvalConfig) -> Any:
    """The tokenizer the backend will load (the scripted backend's default is the bundled model's)."""
    from thinc_bench.backends import _sources, smollm2_gguf

    if config.backend == "scripted":
        return _sources.load_tokenizer(str(config.tokenizer or smollm2_gguf()))
    if config.backend == "openai":
        return _sources.load_tokenizer(str(config.tokenizer or config.model))
    return _sources.load_tokenizer(str(config.model or smollm2_gguf()), config.revision)


def fit_budget(config: EvalConfig, problems: Sequence[Problem]) -> str | None:
    """Lower a preset budget the model's context cannot hold to what it can; return how it was set.

    Only a budget left to the preset follows the context (`EvalConfig.budget_given` is False), and
    only when the context is known and smaller than the preset budget plus the longest prompt. Then
    `config.max_tokens` becomes the context less the longest prompt, and the returned note (for the
    plan line) says so; else None and nothing changes.

    Raises:
        ConfigError: the model cannot be resolved (as the generator would raise), or the longest
            prompt alone fills the context.
    """
    from thinc_bench.errors import ConfigError

    if config.budget_given:
        return None
    context = model_context(config)
    if context is None or int(config.max_tokens or 0) < context // 2:
        return None  # far inside the context whatever the prompt: no need to render the prompts
    longest = max((len(ids) for ids in prompt_ids(config, _tokenizer(config), problems).values()), default=0)
    if int(config.max_tokens or 0) + longest <= context:
        return None
    if longest >= context - 1:
        raise ConfigError(
            f"the longest prompt of this run ({longest:,} tokens) fills the model's context of {context:,}; "
            "use fewer --few-shot examples or a model with a longer context"
        )
    preset = config.max_tokens
    config.max_tokens = context - longest
    return (
        f"the model's {context}-token context less the longest prompt, {longest} tokens; the preset {preset} "
        "does not fit, --max-tokens sets it"
    )
