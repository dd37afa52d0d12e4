"""Prompts: the system prompts for ThinC-style and interleaved solving, and the chat messages.

Prompts are data files beside this module so that they can be read, diffed and cited; a run records
the full prompt text in its config, not only its name. Few-shot teacher examples for the SFT builder
live here too (added with the builder).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from thinc_bench.errors import ConfigError

__all__ = ["SYSTEM_PROMPTS", "build_messages", "load_system_prompt"]

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


def build_messages(problem: str, system_prompt: str) -> list[dict[str, str]]:
    """Chat messages for one problem; no system turn when the prompt is empty."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": problem}]
