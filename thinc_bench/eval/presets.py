"""Baseline presets: the settings under which the field's TIR models are evaluated in their own format.

A preset names the settings a baseline's own harness uses that thinc_bench can reproduce (dialect,
tool name, system prompt, execution trigger) and says where each comes from; what its source does
not state here (sampling, tool-call limit, exact prompt text) is listed as unknown and left at
thinc_bench's documented defaults, never guessed. `EvalConfig(preset=...)` applies a preset to every
field still at its default, so a flag given on the command line wins (one given with exactly the
default's value is indistinguishable from none, and the preset sets it). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """One baseline's settings, their source, and what is unknown."""

    name: str
    settings: dict[str, Any]
    source: str
    unknown: tuple[str, ...] = field(default=())


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "thinc",
            {"dialect": "markdown", "system_prompt": "thinc", "exec_on": "output_open"},
            "ThinC (this project): plan in <think>, then ```python blocks answered by ```output blocks; "
            "the paper's sampling and budget are the --model defaults (temperature 0.6, top-p 0.95, 32K, "
            "32 tool calls)",
        ),
        Preset(
            "rstar2-agent",
            {"dialect": "tool_call", "tool_name": "jupyter_code", "system_prompt": "none"},
            "rStar2-Agent (arXiv 2508.20722; github.com/microsoft/rStar, recipe rstar2_agent): Hermes tool "
            "calls parsed by its RStar2AgentHermesToolParser; its SimJupyterTool runs calls named "
            "jupyter_code with one argument, code",
            (
                "system prompt text (none is sent here: the template declares the tool)",
                "sampling",
                "tool-call limit",
            ),
        ),  # fmt: skip
        Preset(
            "aster",
            {"dialect": "tool_call", "tool_name": "python", "system_prompt": "none"},
            "ASTER: native tool calls of a Python tool in the Qwen3 (Hermes) format",
            (
                "tool name (python is this harness's default, not confirmed from ASTER's code)",
                "system prompt text",
                "sampling",
                "tool-call limit",
            ),
        ),  # fmt: skip
        Preset(
            "retool",
            {"dialect": "xml", "system_prompt": "interleaved", "exec_on": "code_close"},
            "ReTool (arXiv 2504.11536): <code> blocks run when they close, results in <interpreter>",
            (
                "exact system prompt text (the bundled interleaved prompt stands in)",
                "sampling",
                "tool-call limit",
            ),
        ),  # fmt: skip
    )
}
