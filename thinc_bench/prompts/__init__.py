"""Prompts: the system prompts for ThinC-style and interleaved solving, and the chat messages.

Prompts are data files beside this module so that they can be read, diffed and cited; a run records
the full prompt text in its config, not only its name. `examples.jsonl` holds few-shot ThinC
trajectories on problems outside every evaluation benchmark; each is real (tests re-execute its code
and compare every recorded output), so a few-shot prompt never teaches made-up interpreter output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from thinc_bench.errors import ConfigError
from thinc_bench.prompts.chat import opened_plan, parse_template_kwargs, render_prompt_ids

__all__ = [
    "SYSTEM_PROMPTS",
    "Example",
    "build_messages",
    "load_examples",
    "load_system_prompt",
    "opened_plan",
    "parse_template_kwargs",
    "render_prompt_ids",
]

EXAMPLES_FILE = "examples.jsonl"

SYSTEM_PROMPTS: dict[str, str] = {"thinc": "thinc.txt", "interleaved": "interleaved.txt"}
"""Named system prompts: `thinc` (plan, then code blocks only) and `interleaved` (TIR baselines)."""


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


def build_messages(
    problem: str, system_prompt: str, examples: list[Example] | None = None
) -> list[dict[str, str]]:
    """Chat messages for one problem, with few-shot examples as earlier user/assistant turns.

    No system turn when the prompt is empty.
    """
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for example in examples or []:
        messages += [
            {"role": "user", "content": example.problem},
            {"role": "assistant", "content": example.trajectory},
        ]
    return [*messages, {"role": "user", "content": problem}]
