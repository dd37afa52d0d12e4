"""Native tool calling: the declared Python tool, and its results exactly as the model's template writes them.

Models trained as tool agents (Qwen3, rStar2-Agent, ASTER) call Python through the chat template's
`tools` argument and read each result as the template renders a `tool` message. Prompting them into
another format would measure the prompt, so the tool_call dialect declares one function (`code`, a
string) and gets the text that follows the model's end of turn by rendering a probe conversation
with the template itself: no template's strings are written here. What is rendered differently from
how a model generates is listed in docs/tool_calls.md. Pure: the tokenizer is passed in; no IO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from thinc_bench.errors import ConfigError

__all__ = ["DEFAULT_TOOL_NAME", "neutralise_markup", "python_tool", "render_text", "tool_turn_text"]

DEFAULT_TOOL_NAME = "python"
"""Qwen3's and ASTER's name for the tool; rStar2-Agent's is `jupyter_code` (`--tool-name`)."""
TOOL_DESCRIPTION = (
    "Run Python code in a persistent interpreter session (variables and imports persist between calls) "
    "and return what it prints, or the error."
)
_PROBE_QUESTION = "?"


def python_tool(name: str = DEFAULT_TOOL_NAME) -> dict[str, Any]:
    """The one tool every tool_call trajectory declares: `name(code: str)`, in the OpenAI schema that
    chat templates and function-calling servers read."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": TOOL_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The Python code to run."}},
                "required": ["code"],
            },
        },
    }


def render_text(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    generation_prompt: bool,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The template's text for `messages` (special tokens as text)."""
    return str(
        tokenizer.apply_chat_template(
            list(messages),
            tools=tools,
            add_generation_prompt=generation_prompt,
            tokenize=False,
            **dict(template_kwargs or {}),
        )
    )


def tool_turn_text(
    tokenizer: Any,
    tool_name: str,
    outputs: Sequence[str],
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The text the template writes after an assistant turn of `len(outputs)` calls: one `tool`
    message per output, then the next assistant turn's generation prompt.

    It is what follows the model's end-of-turn token in the template's rendering of a probe
    conversation (a question, an assistant turn calling `tool_name`, the tool messages), so it holds
    the template's own markup around each result (Qwen3: `<tool_response>` in one user turn).

    Args:
        tokenizer: a Hugging Face tokenizer whose template renders `tools` and `tool` messages.
        tool_name: the declared tool.
        outputs: each call's result, in call order (already guarded against closing its block).
        template_kwargs: the run's template variables (a generation prompt may open a plan).

    Raises:
        ConfigError: the template does not render the probe (no tool support), or does not end an
            assistant turn with the tokenizer's EOS token.
    """
    tools = [python_tool(tool_name)]
    question = [{"role": "user", "content": _PROBE_QUESTION}]
    calls = [
        {"type": "function", "id": f"call_{i}", "function": {"name": tool_name, "arguments": {"code": ""}}}
        for i in range(len(outputs))
    ]
    answers = [
        {"role": "tool", "tool_call_id": f"call_{i}", "name": tool_name, "content": output}
        for i, output in enumerate(outputs)
    ]
    where = f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r}"
    try:
        head = render_text(
            tokenizer, question, tools=tools, generation_prompt=False, template_kwargs=template_kwargs
        )
        full = render_text(
            tokenizer,
            [*question, {"role": "assistant", "content": "", "tool_calls": calls}, *answers],
            tools=tools,
            generation_prompt=True,
            template_kwargs=template_kwargs,
        )
    except Exception as exc:  # jinja raises anything (TemplateError, TypeError on a missing field)
        raise ConfigError(
            f"{where}: its chat template cannot render tool calls ({type(exc).__name__}: {exc}); "
            "use --dialect markdown or xml for this model"
        ) from exc
    turn_end = str(getattr(tokenizer, "eos_token", None) or "")
    at = full.find(turn_end, len(head)) if turn_end and full.startswith(head) else -1
    if at < 0:
        raise ConfigError(
            f"{where}: its chat template does not end an assistant turn with the EOS token {turn_end!r}, so "
            "the tool turn cannot be placed after the model's; use --dialect markdown or xml for this model"
        )
    return full[at + len(turn_end) :]


def neutralise_markup(tokenizer: Any, output: str) -> str:
    """`output` with the text of every added token broken by a space after its first character
    (`<|im_end|>` -> `< |im_end|>`), so printed markup is read as text, never as a turn boundary.

    The rollout applies it to every interpreter output in every dialect (`eval.rollout._fit_output`).
    Whitespace-only added tokens (some code tokenizers add runs of spaces) are left alone: they read as
    the same blanks, and breaking them would change every indented line. Idempotent.
    """
    contents = sorted(
        {
            str(getattr(token, "content", ""))
            for token in getattr(tokenizer, "added_tokens_decoder", {}).values()
        },
        key=len,
        reverse=True,
    )
    for content in contents:
        if len(content) > 1 and not content.isspace() and content in output:
            output = output.replace(content, content[0] + " " + content[1:])
    return output
