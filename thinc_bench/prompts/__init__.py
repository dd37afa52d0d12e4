"""Prompts: the system prompts for ThinC-style and interleaved solving, and the chat messages.

Prompts are data files beside this module so that they can be read, diffed and cited; a run records
the full prompt text in its config, not only its name. `examples.jsonl` holds few-shot ThinC
trajectories on problems outside every evaluation benchmark; each is real (tests re-execute its code
and compare every recorded output), so a few-shot prompt never teaches made-up interpreter output.
Few-shot examples go into the system turn, whole: chat templates such as Qwen3's drop `<think>...</think>`
from earlier assistant turns, which would show the model examples without their plans.
`check_settings` refuses a prompt that teaches another dialect than the one parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import get_args

from thinc_bench.errors import ConfigError
from thinc_bench.prompts.chat import opened_plan, parse_template_kwargs, render_prompt_ids
from thinc_bench.prompts.tools import (
    DEFAULT_TOOL_NAME,
    PUBLISHED_TOOLS,
    ToolSpec,
    neutralise_markup,
    python_tool,
    tool_spec,
    tool_turn_text,
)
from thinc_bench.trajectory import ExecOn, get_dialect

__all__ = [
    "DEFAULT_TOOL_NAME",
    "PUBLISHED_TOOLS",
    "SYSTEM_PROMPTS",
    "USER_TEMPLATES",
    "Example",
    "ToolSpec",
    "build_messages",
    "check_settings",
    "load_examples",
    "load_system_prompt",
    "load_user_template",
    "neutralise_markup",
    "opened_plan",
    "parse_template_kwargs",
    "render_examples",
    "python_tool",
    "render_prompt_ids",
    "tool_spec",
    "tool_turn_text",
]

EXAMPLES_FILE = "examples.jsonl"

SYSTEM_PROMPTS: dict[str, str] = {
    "thinc": "thinc.txt",
    "interleaved": "interleaved.txt",
    "nano": "nano.txt",
    "tool_call": "tool_call.txt",
    "rstar2-agent": "rstar2_agent.txt",
    "aster": "aster.txt",
}
"""Named system prompts: `thinc` (plan, then code blocks only), `interleaved` (TIR baselines),
`nano` (ThinC in two lines: the nano recipes train on it, so every training token counts),
`tool_call` (ThinC through native tool calls; the template declares the tool itself), and two
baselines' own, word for word (docs/tool_calls.md cites them): `rstar2-agent` (its `<reason>` /
`<answer>` prompt) and `aster` (the "math expert" prompt of ASTER's function-calling example)."""
USER_TEMPLATES: dict[str, str] = {
    "rstar2-agent": "user_rstar2_agent.txt",
    "aster": "user_aster.txt",
    "retool": "user_retool.txt",
    "qwen-math": "user_qwen_math.txt",
}
"""Named user turns of the baselines, word for word, with `{problem}` where the problem goes
(docs/tool_calls.md cites each; `qwen-math` is the Qwen thinking models' card's instruction for math,
the NL-only preset's); `none` is the problem alone."""
PROBLEM_SLOT = "{problem}"


def load_user_template(name_or_path: str) -> str:
    """The user turn around the problem: a named template, a template file, or `{problem}` for `none`.

    Kept exactly as written (no stripping): a baseline's user turn may begin or end with a newline.

    Raises:
        ConfigError: neither a known name nor an existing file, or a template without `{problem}`.
    """
    if name_or_path == "none":
        return PROBLEM_SLOT
    if name_or_path in USER_TEMPLATES:
        return (resources.files(__package__) / USER_TEMPLATES[name_or_path]).read_text(encoding="utf-8")
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            f"user template {name_or_path!r} is neither one of {', '.join([*USER_TEMPLATES, 'none'])} nor a "
            "file; pass a known name or the path of a text file with {problem} where the problem goes"
        )
    text = path.read_text(encoding="utf-8")
    if PROBLEM_SLOT not in text:
        raise ConfigError(
            f"user template {name_or_path!r} has no {PROBLEM_SLOT}; write {PROBLEM_SLOT} where the problem goes"
        )
    return text


def load_system_prompt(name_or_path: str) -> str:
    """The text of a named system prompt, a prompt file, or '' for `none`.

    Raises:
        ConfigError: neither a known name nor an existing file.
    """
    if name_or_path == "none":
        return ""
    if name_or_path in SYSTEM_PROMPTS:
        return (
            (resources.files(__package__) / SYSTEM_PROMPTS[name_or_path]).read_text(encoding="utf-8").strip()
        )
    path = Path(name_or_path)
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    raise ConfigError(
        f"system prompt {name_or_path!r} is neither one of {', '.join([*SYSTEM_PROMPTS, 'none'])} nor a file; "
        "pass a known name or the path of a text file"
    )


@dataclass(frozen=True)
class Example:
    """A few-shot ThinC trajectory: the problem, its gold answer and the canonical-dialect text."""

    id: str
    problem: str
    answer: str
    trajectory: str


def load_examples(n: int | None = None) -> list[Example]:
    """The first n bundled few-shot examples (all when n is None).

    Raises:
        ConfigError: more examples asked for than are bundled.
    """
    text = (resources.files(__package__) / EXAMPLES_FILE).read_text(encoding="utf-8")
    examples = [Example(**json.loads(line)) for line in text.splitlines() if line.strip()]
    if n is not None and n > len(examples):
        raise ConfigError(
            f"--few-shot {n}: only {len(examples)} bundled examples; pass at most {len(examples)}"
        )
    return examples[:n]


EXAMPLES_HEADER = "Solved examples, in exactly the format to follow:"
"""Opens the few-shot section of the system turn."""
_MARKDOWN_MARKERS = ("```python", "```output")
_XML_MARKERS = ("<code>", "<interpreter>")


def render_examples(examples: list[Example]) -> str:
    """The few-shot section of the system turn: each problem, then its whole trajectory (plan included)."""
    parts = [EXAMPLES_HEADER]
    for i, example in enumerate(examples, 1):
        parts.append(f"Example {i}\nProblem: {example.problem}\nSolution:\n{example.trajectory}")
    return "\n\n".join(parts)


def build_messages(
    problem: str,
    system_prompt: str,
    examples: list[Example] | None = None,
    user_template: str = PROBLEM_SLOT,
) -> list[dict[str, str]]:
    """Chat messages for one problem: a system turn (the prompt, then any few-shot examples), the
    user turn (`user_template` with the problem in its `{problem}` slot: a baseline's own wording).

    Examples are rendered whole into the system turn (see the module docstring). No system turn when
    the prompt is empty and there are no examples. The problem goes in by plain replacement, so
    braces in the template (`\\boxed{}`) or the problem stay as written.
    """
    system = "\n\n".join(
        part for part in (system_prompt, render_examples(examples) if examples else "") if part
    )
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": user_template.replace(PROBLEM_SLOT, problem)}]


def check_settings(*, dialect: str, system_prompt: str, few_shot: int, exec_on: str) -> None:
    """Refuse settings that cannot work together, before any model is loaded.

    Args:
        dialect: the trajectory dialect the run parses.
        system_prompt: the system prompt's text (as `load_system_prompt` returns it).
        few_shot: bundled examples shown (they are in the markdown dialect).
        exec_on: the execution trigger.

    Raises:
        ConfigError: an unknown dialect or trigger, a prompt that teaches the other dialect's blocks,
            or few-shot examples with the xml dialect.
    """
    get_dialect(dialect)
    if exec_on not in get_args(ExecOn):
        raise ConfigError(f"--exec-on {exec_on!r}: use one of {', '.join(get_args(ExecOn))}")
    taught = {
        "markdown": [m for m in _MARKDOWN_MARKERS if m in system_prompt],
        "xml": [m for m in _XML_MARKERS if m in system_prompt],
    }
    if dialect == "tool_call":
        blocks = taught["markdown"] + taught["xml"]
        if blocks:
            raise ConfigError(
                f"--dialect tool_call runs native tool calls, but the system prompt teaches {' and '.join(blocks)} "
                "blocks that would never run; pass --system-prompt tool_call (or none, or your own prompt)"
            )
        taught = {}
    other = "xml" if dialect == "markdown" else "markdown"
    if taught and taught[other] and not taught[dialect]:
        prompt = "interleaved" if dialect == "xml" else "thinc"
        raise ConfigError(
            f"--dialect {dialect} parses {' / '.join(_XML_MARKERS if dialect == 'xml' else _MARKDOWN_MARKERS)} "
            f"blocks, but the system prompt teaches {' and '.join(taught[other])}; pass --dialect {other}, "
            f"or a prompt in the {dialect} dialect (e.g. --system-prompt {prompt})"
        )
    if few_shot and dialect != "markdown":
        raise ConfigError(
            f"--few-shot {few_shot} with --dialect {dialect}: the bundled examples are markdown "
            "trajectories; pass --few-shot 0 or --dialect markdown"
        )
