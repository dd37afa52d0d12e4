"""Native tool calling: the declared Python tool, and its results exactly as the model's template writes them.

Models trained as tool agents (Qwen3, rStar2-Agent, ASTER) call Python through the chat template's
`tools` argument and read each result as the template renders a `tool` message. Prompting them into
another format would measure the prompt, so the tool_call dialect declares one function (the plain
`name(code)` tool, or the one a baseline was trained with, word for word: `PUBLISHED_TOOLS`) and gets the text that follows the model's end of turn by rendering a probe conversation
with the template itself: no template's strings are written here. What is rendered differently from
how a model generates is listed in docs/tool_calls.md. Pure: the tokenizer is passed in; no IO.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from thinc_bench.errors import ConfigError

__all__ = [
    "DEFAULT_TOOL_NAME",
    "PUBLISHED_TOOLS",
    "ResultFormat",
    "ToolSpec",
    "neutralise_markup",
    "python_tool",
    "render_text",
    "tool_spec",
    "tool_turn_text",
]

DEFAULT_TOOL_NAME = "python"
"""Qwen3's name for the tool (and this harness's default); the baselines' are in `PUBLISHED_TOOLS`."""
TOOL_DESCRIPTION = (
    "Run Python code in a persistent interpreter session (variables and imports persist between calls) "
    "and return what it prints, or the error."
)
_CODE_ONLY: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python code to run."}},
    "required": ["code"],
}
_PROBE_QUESTION = "?"

ResultFormat = Literal["plain", "rstar2", "aster"]
"""How a call's result is written back: `plain` (what the interpreter showed), `rstar2` (rStar2-Agent's
`Tool call success` / `failure` lines), `aster` (ASTER's output, or its runtime-error and timeout
messages). `eval.tool_results` writes them; docs/tool_calls.md quotes each source."""


@dataclass(frozen=True)
class ToolSpec:
    """A Python tool as a model was trained to call it: the schema its prompt declared, the names a
    call may use, which argument (if any) is the program's standard input, and how results read.

    Attributes:
        name: the function name the prompt declares.
        description: the function's description, word for word.
        parameters: the JSON schema of its arguments (`code` is always the program).
        aliases: other names a call may use and still run (a baseline's paper that writes the name one way and
            the repository that evaluates it another).
        stdin_argument: the argument given to the program as its standard input, or None.
        result_format: how results are written back (`ResultFormat`).
    """

    name: str
    description: str = TOOL_DESCRIPTION
    parameters: Mapping[str, Any] = field(default_factory=lambda: _CODE_ONLY)
    aliases: tuple[str, ...] = ()
    stdin_argument: str | None = None
    result_format: ResultFormat = "plain"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a call of this tool may use, the declared one first."""
        return (self.name, *self.aliases)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema that chat templates and function-calling servers read (a copy)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }


_RSTAR2_TOOL = ToolSpec(
    # The name as arXiv 2508.20722 Fig. 3 and the model card declare it; the description and
    # parameters are those of microsoft/rStar rstar2_agent/config/tool_config/python_tool_config.yaml,
    # which names the same tool `python_code_with_standard_io` (what its evaluation declares).
    name="execute_python_code_with_standard_io",
    description=(
        "Execute Python code with standard input and capture standard output. This function takes a Python "
        "code string and an input string, provides the input string through standard input (stdin) to the "
        "code, and captures and returns any output produced through standard output (stdout). If the "
        "executed code raises an exception, the error message will be captured and returned instead."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "A string containing Python code to be executed. The code can read from "
                "standard input using the input() function.",
            },
            "input": {
                "type": "string",
                "description": "A string that will be provided as standard input to the code when it "
                "calls input().",
            },
        },
        "required": ["code", "input"],
    },
    aliases=("python_code_with_standard_io",),
    stdin_argument="input",
    result_format="rstar2",
)
PUBLISHED_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        _RSTAR2_TOOL,
        replace(_RSTAR2_TOOL, name="python_code_with_standard_io", aliases=(_RSTAR2_TOOL.name,)),
        # microsoft/rStar rstar2_agent/config/tool_config/jupyter_tool_config.yaml (its notebook variant)
        ToolSpec(
            "jupyter_code",
            "Execute python code in a Jupyter notebook cell and return result",
            {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The python code to execute in a single cell"}
                },
                "required": ["code"],
            },
            result_format="rstar2",
        ),
        # Rainyrou/ASTER aster/config/tool_config/sandbox_fusion_tool_config.yaml (verl's code_interpreter)
        ToolSpec(
            "code_interpreter",
            "A tool for executing code.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The code to execute."}},
                "required": ["code"],
            },
            result_format="aster",
        ),
    )
}
"""The tools the baselines were trained with, by declared name (docs/tool_calls.md cites each source).
`--tool-name` picks one by its name; any other name declares the plain Python tool `name(code)`."""


def tool_spec(name: str = DEFAULT_TOOL_NAME) -> ToolSpec:
    """The tool a run declares under `name`: a published one (`PUBLISHED_TOOLS`), else the plain
    Python tool of that name."""
    return PUBLISHED_TOOLS.get(name) or ToolSpec(name)


def python_tool(name: str = DEFAULT_TOOL_NAME) -> dict[str, Any]:
    """The one tool a tool_call trajectory declares, in the OpenAI schema that chat templates and
    function-calling servers read: `tool_spec(name)`'s (a baseline's word for word, or `name(code)`)."""
    return tool_spec(name).schema()


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
