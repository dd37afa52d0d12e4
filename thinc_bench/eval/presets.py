"""Baseline presets: each baseline's published setup, so it is evaluated as itself.

A preset sets what the baseline's own paper, public repository or model card fixes, in two parts.
`settings`, its format: the dialect, the tool the model was trained to call (name, description and
parameters word for word, the names a call may use, its stdin argument and the format its results
come back in: `prompts.PUBLISHED_TOOLS`) or none, the system prompt and user turn
(`prompts.SYSTEM_PROMPTS`, `prompts.USER_TEMPLATES`), the execution model (a fresh process per call,
or one stateful session) and the run time limit. `published`, its budget and sampling (`SHARED_FIELDS`).
`--setting published` (the default) applies both; `--setting shared` applies the format only, so every
preset runs at one shared budget and sampling (the defaults with a --model, docs/settings.md) and a
comparison table compares models, not settings. `sources` says where each comes from; what no source
states is listed in `unknown` and left at thinc_bench's documented defaults, never guessed.
`EvalConfig(preset=...)` applies a preset to every field still at its default, so a flag given on the
command line wins (one given with exactly the default's value is indistinguishable from none, and the
preset sets it). Pure data; docs/tool_calls.md is the same table for readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thinc_bench.provenance import SourceClass

__all__ = ["PRESETS", "SETTINGS", "SHARED_FIELDS", "Preset"]

SHARED_FIELDS = ("samples", "max_tokens", "max_tool_calls", "temperature", "top_p", "top_k", "min_p")
"""The budget and sampling fields `--setting shared` holds at one value for every preset."""
SETTINGS = ("published", "shared")
"""`--setting` values: each preset's own published budget and sampling, or one shared setting."""


@dataclass(frozen=True)
class Preset:
    """One baseline's published setup: the flags it sets, the answer it expects, where each comes from,
    and what is unknown.

    Attributes:
        name: the `--preset` value.
        settings: EvalConfig fields of its format (each a flag the command line may override).
        source: the baseline, its paper and its public code, in one line.
        published: its published budget and sampling (`SHARED_FIELDS` only), applied by
            `--setting published`.
        answer_format: how the baseline writes its final answer (the grader reads the last box in it).
        sources: for each setting (and `answer_format`), the figure, section or file it comes from.
        unknown: what the sources do not state (left at thinc_bench's defaults).
        classes: the source class (`thinc_bench.provenance`) of a setting whose source is not the
            baseline's own (`external`, the default): the ThinC explainers, or our choice.
    """

    name: str
    settings: dict[str, Any]
    source: str
    published: dict[str, Any] = field(default_factory=dict)
    answer_format: str = "\\boxed{...}"
    sources: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = field(default=())
    classes: dict[str, SourceClass] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.published) - set(SHARED_FIELDS) or set(self.settings) & set(SHARED_FIELDS) - {
            "max_tool_calls"
        }:
            raise ValueError(
                f"preset {self.name}: budget and sampling belong in `published`, its format in `settings`"
            )

    def flags(self, setting: str = "published") -> dict[str, Any]:
        """The fields this preset sets under `--setting` (`SETTINGS`): its format, and its published
        budget and sampling unless the setting is shared."""
        return {**self.settings, **(self.published if setting == "published" else {})}


RSTAR2 = "microsoft/rStar rstar2_agent"
NL_MODEL = "Qwen3-235B-A22B-Thinking"
NL_CARD = "the Qwen3-235B-A22B-Thinking-2507 model card"
ASTER = "github.com/Rainyrou/ASTER (a public reproduction of arXiv 2602.01204)"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "thinc",
            {"dialect": "markdown", "system_prompt": "thinc", "exec_on": "output_open"},
            "ThinC (this project): plan in <think>, then ```python blocks answered by ```output blocks; its "
            "budget and sampling are the --model defaults, the shared setting (none is stated by the sources: "
            "docs/settings.md)",
        ),
        Preset(
            "rstar2-agent",
            {
                "dialect": "tool_call",
                "tool_name": "python_code_with_standard_io",
                "system_prompt": "rstar2-agent",
                "user_template": "rstar2-agent",
                "sandbox_state": "fresh",
                "exec_timeout_s": 4.0,
            },
            "rStar2-Agent (arXiv 2508.20722; github.com/microsoft/rStar, rstar2_agent/): Hermes tool calls "
            "of python_code_with_standard_io(code, input), each run in a fresh process with `input` as stdin",
            published={"temperature": 0.6, "max_tokens": 30720, "max_tool_calls": 29, "samples": 16},
            answer_format="<answer> ... \\boxed{...} </answer> after <reason> ... </reason>",
            sources={
                "tool_name": f"{RSTAR2}/config/tool_config/python_tool_config.yaml (name, description, "
                "parameters code + input, both required; what examples/aime_eval.sh evaluates); the rStar2-Agent "
                "paper's Fig. 3 and the model card write execute_python_code_with_standard_io: a call of either "
                "name runs",
                "system_prompt": f"{RSTAR2}/config/rstar2_agent_trainer.yaml custom_chat_template (its default "
                "system turn; Fig. 3 words it slightly differently)",
                "user_template": "examples/chat_with_tool_call.py and the trainer template's user prefix "
                "(Fig. 3: the same words)",
                "sandbox_state": f"{RSTAR2}/tools/code_judge_utils.py: python_code_with_standard_io runs each "
                "call alone (no history replayed), `input` as stdin, the last expression's value printed",
                "result_format": f"{RSTAR2}/tools/code_judge_utils.py: Tool call success / Tool call failure, "
                "reason, stdout, stderr, execution time",
                "exec_timeout_s": "README: Code Judge server and workers started with MAX_EXECUTION_TIME=4",
                "temperature": "rStar2-Agent paper §5.1: math benchmarks at temperature 0.6, up to 30K tokens, "
                "T = 30 turns, 16 samples (avg pass@1)",
                "max_tokens": "examples/aime_eval.sh: data.max_response_length=30720 (tool turns count in it)",
                "max_tool_calls": "T = 30 assistant turns (rStar2-Agent paper §5.1) leave at most 29 tool turns; "
                "thinc_bench counts calls, so 29 is exact for one call a turn",
                "samples": "rStar2-Agent paper §5.1: each question sampled 16 times",
                "answer_format": "Fig. 3 and the user prefix: <answer> tags, answer read from \\boxed{}",
            },
            unknown=(
                "top-p (the rStar2-Agent paper states temperature only)",
                "whether the released model's chat template writes the system turn itself (it is sent here) or "
                "the user prefix (the repo's training template does; its chat example adds it by hand, as here)",
            ),
        ),  # fmt: skip
        Preset(
            "aster",
            {
                "dialect": "tool_call",
                "tool_name": "code_interpreter",
                "system_prompt": "none",
                "user_template": "aster",
                "sandbox_state": "persistent",
                "exec_timeout_s": 30.0,
            },
            f"ASTER (arXiv 2602.01204; {ASTER}): Hermes tool calls of code_interpreter(code) in one stateful "
            "Python session, Qwen3-4B-Thinking-2507 template",
            published={
                "temperature": 1.0,
                "top_p": 1.0,
                "max_tokens": 92160,
                "max_tool_calls": 255,
                "samples": 16,
            },
            sources={
                "tool_name": "aster/config/tool_config/sandbox_fusion_tool_config.yaml: code_interpreter, "
                "'A tool for executing code.', code 'The code to execute.'",
                "system_prompt": "datasets/aime25.parquet and hmmt25.parquet (what scripts/eval/eval.sh "
                "evaluates) have no system turn; the 'You are a math expert...' prompt of "
                "llamafactory/scripts/api_example/test_qwen3_python.py is --system-prompt aster",
                "user_template": "datasets/aime25.parquet prompts: the problem between newlines, then "
                "'Please reason step by step, and put your final answer within \\boxed{}.'",
                "sandbox_state": "README and aster/sandbox/stateful_python.py: a stateful sandbox that keeps "
                "state across calls; a bare last expression is printed",
                "result_format": "aster/sandbox/stateful_python.py execute_code: the output, or 'Runtime error "
                "occurred during execution.' / 'Execution timeout after N seconds...' with details",
                "exec_timeout_s": "sandbox_fusion_tool_config.yaml: default_timeout 30",
                "temperature": "README and scripts/eval/eval.sh: val_kwargs temperature 1.0, top_p 1.0",
                "top_p": "README and scripts/eval/eval.sh: top_p 1.0",
                "max_tokens": "scripts/eval/eval.sh: max_response_length=92160 (the README's 90K budget)",
                "max_tool_calls": "scripts/eval/eval.sh: max_assistant_turns=256, so at most 255 tool turns",
                "samples": "scripts/eval/eval.sh: val_kwargs.n=16",
                "answer_format": "the user turn: \\boxed{}",
            },
            unknown=(
                "the original authors' code (the public repository is a reproduction; the ASTER paper's own "
                "prompt and sandbox are not in it)",
                "top-k and min-p (verl's defaults, not stated)",
            ),
        ),  # fmt: skip
        Preset(
            "retool",
            {
                "dialect": "xml",
                "system_prompt": "none",
                "user_template": "retool",
                "exec_on": "code_close",
                "sandbox_state": "fresh",
            },
            "ReTool (arXiv 2504.11536; verl's ReTool recipe): <code>```python ...```</code> blocks run when "
            "they close, each a complete script in a fresh process, output in <interpreter>",
            answer_format="<answer>\\n\\boxed{...}\\n</answer>",
            sources={
                "user_template": "volcengine/verl recipe/retool/prepare_sft_data.py (ci_user_prompt_template_v3, "
                "the user turn of JoeYing/ReTool-SFT; also in the ReTool demo scheduler of verl's rollout tests)",
                "exec_on": "verl's ReTool scheduler: generation stops at </code> (stop=['</answer>', '</code>'])",
                "sandbox_state": "the template: 'The Python code should be complete scripts, including necessary "
                "imports'; verl runs each block alone through SandboxFusion run_code",
                "result_format": "the template: output wrapped in <interpreter>output_str</interpreter>",
                "answer_format": "the template: <answer>\\n\\boxed{'The final answer goes here.'}\\n</answer>",
            },
            unknown=(
                "sampling and budget (not stated in the sources found here)",
                "tool-call limit (verl's demo stops at 16 messages)",
                "run time limit (verl's demo uses 10 s, this harness's default)",
                "whether the template's doubled braces (a str.format string in verl) reached the model "
                "doubled; single braces are used",
            ),
        ),  # fmt: skip
        Preset(
            "nl",
            {
                "dialect": "markdown",
                "system_prompt": "none",
                "user_template": "qwen-math",
                "max_tool_calls": 0,
                "recovery_k": "0",
            },
            f"NL-only reasoning (no tool: no code runs, generation never stops for one), as the explainers' "
            f"NL-only comparison {NL_MODEL} (75.2, an AI summary's figure) reasons; sampling as its model card "
            "recommends",
            published={"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0, "max_tokens": 81920},
            sources={
                "dialect": "markdown: a dialect that declares no tool (which one is ours)",
                "recovery_k": "the clean run only: without a tool there is no execution to inject a failure into",
                "max_tool_calls": "the explainers call it a model that thinks only in natural language: no tool "
                "is declared or run (0: no tool)",
                "user_template": f"{NL_CARD}, Best Practices: for math, 'Please reason step by step, and put your "
                "final answer within \\boxed{}.' in the prompt",
                "system_prompt": f"{NL_CARD}: its examples send the user turn alone",
                "temperature": f"{NL_CARD}, Best Practices: Temperature=0.6, TopP=0.95, TopK=20, MinP=0 (read "
                "through copies of the card: the Hugging Face Hub is out of reach here)",
                "top_p": f"{NL_CARD}, Best Practices",
                "top_k": f"{NL_CARD}, Best Practices",
                "min_p": f"{NL_CARD}, Best Practices",
                "max_tokens": f"{NL_CARD}, Best Practices: 81,920 output tokens for competition math "
                "(32,768 for most queries)",
                "answer_format": "the user turn: \\boxed{}",
                "result_format": "none: no tool",
            },
            unknown=(
                "the ThinC paper's own setting for this baseline (the sources give its 75.2 only)",
                "samples per problem (the card states none)",
                "how the card's instruction joins the problem (a newline here)",
            ),
            classes={"dialect": "inference", "max_tool_calls": "explainer", "recovery_k": "inference"},
        ),  # fmt: skip
    )
}
