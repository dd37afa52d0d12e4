"""The chat prompt in token ids: one renderer for evaluation, SFT examples and RL rollouts.

A prompt that differs by one token between training and evaluation is a silent error, so every path
renders through `render_prompt_ids` (the model's own chat template, with the generation header and
any template switches such as Qwen3's `enable_thinking`). Templates differ in who opens the plan:
Qwen3's hybrid template leaves `<think>` to the model, Qwen3-4B-Thinking-2507's generation prompt
already ends in `<think>\\n`; `opened_plan` tells them apart from the rendered ids, so SFT examples
and trajectories hold exactly one `<think>`. Pure: the tokenizer is passed in; no IO.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from thinc_bench.errors import ConfigError

__all__ = ["PLAN_OPEN", "opened_plan", "parse_template_kwargs", "render_prompt_ids"]

PLAN_OPEN = "<think>"
"""The plan's opening tag (docs/DESIGN.md trajectory format); a template may write it into the prompt."""


def render_prompt_ids(
    tokenizer: Any,
    messages: list[dict[str, str]],
    template_kwargs: Mapping[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Token ids of the chat prompt with the assistant generation header, from the model's template.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        messages: system, few-shot and user turns (see `prompts.build_messages`).
        template_kwargs: extra variables of the template (e.g. `{"enable_thinking": False}`).
        tools: functions declared through the template's `tools` argument (the tool_call dialect's
            `prompts.tools.python_tool`); None declares none.

    Returns:
        The ids, exactly as the model is given them.

    Raises:
        ConfigError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template; "
            "use an instruct/chat model's tokenizer (tokenizer_config.json with chat_template)"
        )
    encoded: Any = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, tools=tools, **dict(template_kwargs or {})
    )
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded  # transformers 5: a BatchEncoding
    return [int(i) for i in ids]


def opened_plan(tokenizer: Any, prompt_ids: list[int]) -> bool:
    """Whether the prompt already opened the plan (ends in `<think>` and blank space), as 2507 does.

    A prompt that opens and closes an empty plan (`enable_thinking=False`) has not opened one.
    """
    text = str(tokenizer.decode(prompt_ids[-8:], skip_special_tokens=False))
    return text.rstrip().endswith(PLAN_OPEN)


def parse_template_kwargs(text: str | None) -> dict[str, Any]:
    """`--chat-template-kwargs` as a dict: a JSON object, or {} when not given.

    Raises:
        ConfigError: not JSON, or not an object.
    """
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--chat-template-kwargs {text!r} is not JSON ({exc.msg}); pass an object, "
            """e.g. '{"enable_thinking": false}'"""
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"--chat-template-kwargs {text!r} is not a JSON object; pass e.g. "
            """'{"enable_thinking": false}'"""
        )
    return value
