"""What defines a ThinC-SFT build: `BuildSFTConfig`, its presets, and how it maps onto eval's engine.

`BuildSFTConfig` is the dataclass behind `python -m thinc_bench.build_sft` (parsed by HfArgumentParser).
Fields left as None take the defaults with a teacher (`WITH_TEACHER`; docs/settings.md gives each one's
source), the nano template teacher's, or the offline demo's when no teacher is given.
Generation is eval's engine, so `eval_config()` restates the generation settings as an `EvalConfig`;
`generation_settings()` is what the rollout directory hashes. Filter thresholds, the student tokenizer
and runtime fields stay out of that hash, so `--refilter` and resumes may change them. Nothing here
loads a model, data or the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.benchmarks import PAPER_BENCHMARKS
from thinc_bench.build_sft.decontam import DEFAULT_MATHS_THRESHOLD, DEFAULT_NGRAM, DEFAULT_THRESHOLD
from thinc_bench.errors import ConfigError
from thinc_bench.trajectory import DEFAULT_MAX_PROSE_CHARS

if TYPE_CHECKING:
    from thinc_bench.benchmarks import Problem
    from thinc_bench.build_sft.sources import Deduplicated
    from thinc_bench.eval.config import EvalConfig

DEFAULT_STUDENT_TOKENIZER = "Qwen/Qwen3-1.7B"
"""The smaller student the explainers name; the plan-share filter counts its tokens."""
TEACHER_PROMPT = "teacher"
"""Name of the bundled teacher system prompt (`prompts/teacher.txt`)."""
DEMO = {
    "limit": 3,
    "samples_per_problem": 1,
    "max_tokens": 1536,
    "max_tool_calls": 4,
    "few_shot": 1,
    "exec_on": "code_close",
    "response_prefix": "```python\n",
    "concurrency": 3,
}
"""Settings without --teacher: the bundled 135M model needs one example and a prefilled code block."""
TEACHER_TEMPLATE_KWARGS = '{"enable_thinking": false}'
"""The teacher's chat-template variables by default: thinking off. The documented teacher, Qwen3.5-27B,
thinks by default (its template's generation prompt ends in `<think>\\n`; `enable_thinking=false`
puts an empty `<think>\\n\\n</think>\\n\\n` there instead: docs/settings.md gives where this was read),
and its own reasoning would become the ThinC plan, which must be brief and compute nothing. Templates
without the variable ignore it; one that opens a plan anyway is refused at start unless
--teacher-thinks drops its thinking (`build_sft.__main__.preflight`)."""
WITH_TEACHER = {
    "limit": None,
    "samples_per_problem": 4,
    "max_tokens": 32768,
    "max_tool_calls": 32,
    "few_shot": None,
    "exec_on": "output_open",
    "response_prefix": "",
    "concurrency": 64,
    "teacher_chat_template_kwargs": TEACHER_TEMPLATE_KWARGS,
}
"""Defaults with a --teacher (docs/settings.md gives each one's source class: none of these is stated
by the sources): every bundled example (few_shot None = all), the teacher's thinking off."""
TEMPLATE_TEACHERS: dict[str, str] = {
    "template": "the nano template teacher (thinc_bench.nano: plan, compute, check, print), replayed "
    "through the scripted backend; every block ran in the sandbox",
    "template-nl": "the nano template teacher's natural-language-only solutions (no code), replayed "
    "through the scripted backend: the NL-only contrast",
}
"""Teachers of the generated `nano` source: scripts written per build from the problems, no model."""
NANO = {
    "backend": "scripted",
    "limit": 256,
    "samples_per_problem": 1,
    "max_tokens": 1024,
    "max_tool_calls": 4,
    "few_shot": 0,
    "exec_on": "output_open",
    "response_prefix": "",
    "concurrency": 4,
}
"""Settings of a `--source nano` build left as None: one scripted trajectory per problem, 256 problems
(about 62K SmolLM2 training tokens: eight minutes an epoch on 2 CPU cores)."""
NANO_RECOVERY_MAX_TOOL_CALLS = 6
"""--max-tool-calls of a nano build with --recovery-share left as None: the three blocks and up to two
failed attempts before them (`nano.teacher.MAX_FAILED_ATTEMPTS`) take 5; 6 is what the nano eval allows."""
NANO_CLI: dict[str, dict[str, object]] = {
    "template": {
        "system_prompt": "nano",
        "student_system_prompt": "nano",
        "student_tokenizer": "bundled-smollm2",
        "decontam_benchmarks": "",
        "out": "runs/nano/sft-data",
    },
    "template-nl": {
        "system_prompt": "nano",
        "student_system_prompt": "nano",
        "student_tokenizer": "bundled-smollm2",
        "decontam_benchmarks": "",
        "min_code_blocks": 0,
        "max_plan_share": 1.0,
        "reject_plan_computation": False,
        "require_grounded": False,
        "out": "runs/nano/sft-data-nl",
    },
}
"""Command-line defaults of `--source nano` per teacher (flags given still win): the nano prompt for
teacher and student, the bundled student, no n-gram decontamination (nano's splits are disjoint by
construction, by a hash of family and numbers, while every problem of a family shares its wording
with the test split, which n-gram overlap would call contamination), and for the
NL-only contrast no code-block, plan-share, plan-computation or grounding filter (its plan is the whole
solution and no code prints its answer; the other filters, correctness first, still run)."""
DATA_DIR_CANDIDATES = ("shared/data", "../shared/data")
"""Where the demo looks for local copies (train/ and benchmarks/) beside the checkout."""
REFILTER_FIELDS = frozenset(
    {
        "min_code_blocks",
        "max_plan_share",
        "plan_share_of",
        "reject_plan_computation",
        "require_grounded",
        "max_per_problem",
        "max_prose_chars",
        "recovery_share",
        "decontam_benchmarks",
        "decontam_data_dir",
        "decontam_ngram",
        "decontam_threshold",
        "decontam_maths_threshold",
        "student_tokenizer",
        "student_system_prompt",
        "teacher_thinks",
        "push_to_hub",
        "out",
        "refilter",
        "concurrency",
        "log_level",
    }
)
"""Settings --refilter takes from the command line; every other one comes from the stored build."""
_BACKEND_FIELDS = (
    "revision",
    "dtype",
    "max_batch_size",
    "tensor_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "base_url",
    "tokenizer",
    "api_key_env",
    "max_retries",
)


@dataclass
class BuildSFTConfig:
    """Everything that defines an SFT build; None means "the documented default"."""

    teacher: str | None = field(
        default=None,
        metadata={
            "help": "Teacher: folder, Hub id or .gguf (hf, vllm); served name (openai); turns .jsonl "
            "(scripted); template | template-nl with --source nano (ThinC code or NL-only solutions, "
            "default template). Omitted: the bundled SmolLM2-135M on a tiny offline demo."
        },
    )
    backend: str = field(default="hf", metadata={"help": "hf | vllm | openai | scripted (as in eval)."})
    source: str = field(
        default="dapo_math_17k",
        metadata={
            "help": "Registered source (dapo_math_17k; nano: the generated ThinC-nano train split), Hub "
            "dataset id, or local .jsonl/.parquet."
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with a registered source's local copy; omitted: the Hub (demo: ../shared/data/train)."
        },
    )
    problem_column: str = field(default="problem", metadata={"help": "Problem column (Hub id or file)."})
    answer_column: str = field(default="answer", metadata={"help": "Answer column (Hub id or file)."})
    id_column: str | None = field(
        default="id", metadata={"help": "Id column (Hub id or file); missing: content-hash ids."}
    )
    split: str = field(default="train", metadata={"help": "Split of an unregistered Hub id."})
    limit: int | None = field(
        default=None,
        metadata={"help": "First N distinct problems; default all, demo 3. Raising it extends a build."},
    )
    samples_per_problem: int | None = field(
        default=None, metadata={"help": "Teacher rollouts per problem; default 4, demo 1."}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Completion tokens per rollout (model + interpreter, after the prompt); default 32768, demo 1536."
        },
    )
    max_tool_calls: int | None = field(
        default=None, metadata={"help": "Code executions per rollout; default 32, demo 4."}
    )
    temperature: float = field(default=0.6, metadata={"help": "Teacher sampling temperature."})
    top_p: float = field(default=0.95, metadata={"help": "Teacher nucleus sampling mass."})
    top_k: int | None = field(default=None, metadata={"help": "Teacher top-k; omitted keeps every token."})
    seed: int = field(
        default=0, metadata={"help": "Base seed; each rollout's seed derives from it and its key."}
    )
    system_prompt: str = field(
        default=TEACHER_PROMPT,
        metadata={"help": "Teacher system prompt: teacher | thinc | none | path to a text file."},
    )
    few_shot: int | None = field(
        default=None,
        metadata={"help": "Bundled few-shot ThinC examples shown to the teacher; default all, demo 1."},
    )
    dialect: str = field(
        default="markdown",
        metadata={
            "help": "markdown (ThinC blocks) | tool_call (native tool calls: the teacher's and the student's "
            "prompts declare the tool, tool turns are masked; teacher and student prompts default to tool_call)."
        },
    )
    tool_name: str = field(default="python", metadata={"help": "tool_call: the declared function."})
    teacher_chat_template_kwargs: str | None = field(
        default=None,
        metadata={
            "help": "JSON object of the teacher's chat-template variables; default with --teacher "
            f"{TEACHER_TEMPLATE_KWARGS} (Qwen3.5 thinks by default: its reasoning would become the plan); "
            "'{}' sends none."
        },
    )
    teacher_thinks: bool = field(
        default=False,
        metadata={
            "help": "The teacher thinks natively before its answer (<think>...</think>): each trajectory is "
            "what follows its first </think>, so that thinking never becomes the ThinC plan (the card "
            "records the rule). Re-applied by --refilter."
        },
    )
    exec_on: str | None = field(
        default=None,
        metadata={
            "help": "output_open (ThinC, default) | code_close (demo: the 135M model never opens output)."
        },
    )
    response_prefix: str | None = field(
        default=None,
        metadata={"help": "Prefill of the teacher's turn (mask 0); default none, demo a python fence."},
    )
    student_tokenizer: str | None = field(
        default=None,
        metadata={
            "help": f"Student tokenizer (Hub id, folder, .gguf or bundled-smollm2) for plan share, input_ids and masks; "
            f"default {DEFAULT_STUDENT_TOKENIZER}, demo the bundled SmolLM2."
        },
    )
    student_system_prompt: str = field(
        default="thinc", metadata={"help": "System turn of the dataset's messages: thinc | none | file."}
    )
    min_code_blocks: int = field(
        default=3,
        metadata={"help": "Executed code blocks (tool calls) required (explainers: at least three)."},
    )
    max_plan_share: float = field(
        default=0.5,
        metadata={
            "help": "Plan tokens must be below this share of --plan-share-of tokens (explainers: 50%)."
        },
    )
    plan_share_of: str = field(
        default="total",
        metadata={
            "help": "total (every trajectory token, interpreter output included: the explainers' 'total "
            "tokens') | model (model-written tokens only, stricter)."
        },
    )
    reject_plan_computation: bool = field(
        default=True,
        metadata={"help": "Reject plans that compute (arithmetic with results, equations solved in prose)."},
    )
    require_grounded: bool = field(
        default=True,
        metadata={"help": "Reject answers no interpreter output printed (the grader's grounding rule)."},
    )
    max_prose_chars: int = field(
        default=DEFAULT_MAX_PROSE_CHARS,
        metadata={
            "help": "Conformance: most prose characters before the first block and after the last "
            "(box excluded), each: a short sentence around the answer."
        },
    )
    max_per_problem: int = field(
        default=1, metadata={"help": "Kept trajectories per problem, shortest first (default 1)."}
    )
    recovery_share: float = field(
        default=0.0,
        metadata={
            "help": "Share of recovered trajectories (a code block fails, a later one runs clean, the answer "
            "is printed by a clean one): --teacher template writes them for this share of problems; with a "
            "model teacher exec_ok keeps them, up to this share of the kept set (clean ones first). "
            "0: every execution clean (the explainers' executions that succeed)."
        },
    )
    decontam_benchmarks: str = field(
        default=",".join(PAPER_BENCHMARKS),
        metadata={"help": "Decontamination: comma list of evaluation benchmarks."},
    )
    decontam_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with <benchmark>.jsonl copies; omitted: the Hub (demo: ../shared/data/benchmarks)."
        },
    )
    decontam_ngram: int = field(
        default=DEFAULT_NGRAM, metadata={"help": "Decontamination: words per n-gram."}
    )
    decontam_threshold: float = field(
        default=DEFAULT_THRESHOLD,
        metadata={"help": "Word overlap in (0, 1] that marks contamination (as written, numbers masked)."},
    )
    decontam_maths_threshold: float = field(
        default=DEFAULT_MATHS_THRESHOLD,
        metadata={"help": "Maths-only overlap in (0, 1] that marks a same-answer problem (translations)."},
    )
    refilter: bool = field(
        default=False,
        metadata={
            "help": "Re-apply the filters to the rollouts stored in --out; generate nothing. Every setting "
            "but the filter flags given comes from the stored build (no --teacher needed)."
        },
    )
    push_to_hub: str | None = field(
        default=None, metadata={"help": "Hub dataset repo to push to (needs a token)."}
    )
    out: str | None = field(default=None, metadata={"help": "Build directory; default runs/sft-<teacher>."})
    concurrency: int | None = field(
        default=None, metadata={"help": "Rollouts in flight; default 64, demo 3."}
    )
    exec_timeout_s: float = field(default=10.0, metadata={"help": "Wall seconds per code block."})
    revision: str | None = field(default=None, metadata={"help": "hf/vllm: Hub revision of the teacher."})
    dtype: str | None = field(default=None, metadata={"help": "hf/vllm: teacher dtype."})
    max_batch_size: int | None = field(
        default=None, metadata={"help": "hf: most sequences decoded together."}
    )
    tensor_parallel_size: int | None = field(default=None, metadata={"help": "vllm: GPUs per replica."})
    max_model_len: int | None = field(default=None, metadata={"help": "vllm: context length to reserve."})
    gpu_memory_utilization: float | None = field(
        default=None, metadata={"help": "vllm: share of GPU memory."}
    )
    base_url: str | None = field(default=None, metadata={"help": "openai: server URL."})
    tokenizer: str | None = field(default=None, metadata={"help": "openai/scripted: teacher tokenizer."})
    api_key_env: str | None = field(default=None, metadata={"help": "openai: variable holding the key."})
    max_retries: int | None = field(default=None, metadata={"help": "openai: retries before infra error."})
    log_level: str = field(default="warning", metadata={"help": "debug | info | warning | error."})

    def __post_init__(self) -> None:
        from thinc_bench.build_sft.sources import NANO_SOURCE

        if self.source == NANO_SOURCE and self.teacher is None:
            self.teacher = "template"
        if self.teacher in TEMPLATE_TEACHERS:
            if self.source != NANO_SOURCE:
                raise ConfigError(
                    f"--teacher {self.teacher} writes nano solutions; use it with --source nano"
                )
            if self.backend not in ("hf", "scripted"):
                raise ConfigError(
                    f"--teacher {self.teacher} is replayed by the scripted backend; drop --backend"
                )
            self.backend = "scripted"
        if self.dialect == "tool_call":
            self.system_prompt = "tool_call" if self.system_prompt == TEACHER_PROMPT else self.system_prompt
            self.student_system_prompt = (
                "tool_call" if self.student_system_prompt == "thinc" else self.student_system_prompt
            )
            self.few_shot = 0 if self.few_shot is None else self.few_shot  # the examples are markdown
        if not 0 <= self.recovery_share <= 1:
            raise ConfigError(f"--recovery-share {self.recovery_share}: use a value in [0, 1] (0: off)")
        if self.teacher == "template-nl" and self.recovery_share:
            raise ConfigError(
                "--recovery-share: --teacher template-nl runs no code, so none can fail; drop it"
            )
        if self.teacher == "template" and self.recovery_share and self.max_tool_calls is None:
            self.max_tool_calls = NANO_RECOVERY_MAX_TOOL_CALLS
        demo = self.teacher is None
        preset = DEMO if demo else NANO if self.teacher in TEMPLATE_TEACHERS else WITH_TEACHER
        for name, value in preset.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if demo:
            if self.backend != "hf":
                raise ConfigError(f"--backend {self.backend} needs --teacher; omit both for the bundled demo")
            if self.data_dir is None or self.decontam_data_dir is None:
                root = _find_demo_data()
                self.data_dir = self.data_dir or str(Path(root, "train"))
                self.decontam_data_dir = self.decontam_data_dir or str(Path(root, "benchmarks"))
            self.student_tokenizer = self.student_tokenizer or "bundled-smollm2"
        self.student_tokenizer = self.student_tokenizer or DEFAULT_STUDENT_TOKENIZER
        for name in ("samples_per_problem", "max_tokens", "max_tool_calls", "concurrency", "decontam_ngram"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(self, name)}: use a positive integer")
        if self.min_code_blocks < 0 or self.max_per_problem < 1 or self.max_prose_chars < 0:
            raise ConfigError("--min-code-blocks and --max-prose-chars must be >= 0, --max-per-problem >= 1")
        from thinc_bench.prompts.chat import parse_template_kwargs

        try:
            parse_template_kwargs(self.teacher_chat_template_kwargs)
        except ConfigError as exc:  # eval's message, named by this CLI's flag
            raise ConfigError(str(exc).replace("--chat-template", "--teacher-chat-template", 1)) from None
        if self.plan_share_of not in ("total", "model"):
            raise ConfigError(f"--plan-share-of {self.plan_share_of!r}: use total or model")
        for name in ("max_plan_share", "decontam_threshold", "decontam_maths_threshold"):
            if not 0 < getattr(self, name) <= 1:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(self, name)}: use a value in (0, 1]")

    @property
    def source_name(self) -> str:
        return Path(self.source).stem if self.source.endswith((".jsonl", ".parquet")) else self.source

    def out_dir(self) -> Path:
        return Path(self.out) if self.out else default_out(self.teacher)

    def teacher_model(self) -> str:
        """What eval's engine loads: the teacher, the bundled model, or a template teacher's script."""
        from thinc_bench.backends import smollm2_gguf

        if self.teacher in TEMPLATE_TEACHERS:
            return str(self.out_dir() / "teacher_turns.jsonl")
        return self.teacher or str(smollm2_gguf())

    def teacher_description(self) -> str:
        """The teacher as the dataset card names it."""
        if self.teacher in TEMPLATE_TEACHERS:
            return TEMPLATE_TEACHERS[self.teacher]
        return self.teacher or "bundled SmolLM2-135M-Instruct (GGUF Q4_1)"

    def student_tokenizer_path(self) -> str:
        from thinc_bench.backends import smollm2_gguf

        name = str(self.student_tokenizer)
        return str(smollm2_gguf()) if name == "bundled-smollm2" else name

    def load_problems(self, *, limit: int | None = None) -> list[Problem]:
        """The source's problems with this config's columns and split (first `limit` when given).

        Raises:
            DatasetError: the source cannot be read (see `sources.load_source`).
        """
        return self.load_source().problems[:limit]

    def load_source(self) -> Deduplicated:
        """The source deduplicated with this config's columns and split, and what deduplication removed.

        Raises:
            DatasetError: the source cannot be read (see `sources.load_deduplicated`).
        """
        from thinc_bench.build_sft.sources import load_deduplicated

        return load_deduplicated(
            self.source,
            self.data_dir,
            problem_column=self.problem_column,
            answer_column=self.answer_column,
            id_column=self.id_column,
            split=self.split,
        )

    def eval_config(self) -> EvalConfig:
        """The generation settings as eval's config: the same engine, seeds and backends run them."""
        from thinc_bench.eval.config import EvalConfig

        prompt = self.system_prompt
        if prompt == TEACHER_PROMPT:
            prompt = str(resources.files("thinc_bench.prompts") / "teacher.txt")
        from thinc_bench.prompts import load_examples

        return EvalConfig(
            model=self.teacher_model(),
            backend=self.backend,
            benchmarks=self.source_name,
            samples=self.samples_per_problem,
            max_tokens=self.max_tokens,
            max_tool_calls=self.max_tool_calls,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            system_prompt=prompt,
            few_shot=len(load_examples()) if self.few_shot is None else self.few_shot,
            exec_on=self.exec_on,
            response_prefix=self.response_prefix,
            chat_template_kwargs=self.teacher_chat_template_kwargs,
            dialect=self.dialect,
            tool_name=self.tool_name,
            concurrency=self.concurrency,
            exec_timeout_s=self.exec_timeout_s,
            recovery_k="0",  # teacher rollouts are clean; Recovery@k is for eval
            **{n: getattr(self, n) for n in _BACKEND_FIELDS},
        )

    def generation_settings(self) -> dict[str, Any]:
        """What defines the stored rollouts (hashed): eval's settings plus the source."""
        settings = self.eval_config().settings()
        settings["system_prompt"] = self.system_prompt  # the text is hashed; its install path is not
        settings |= {
            n: getattr(self, n) for n in ("source", "problem_column", "answer_column", "id_column", "split")
        }
        if self.teacher in TEMPLATE_TEACHERS and self.recovery_share:
            # the template teacher's scripts depend on it (a model teacher's rollouts do not: it only
            # filters); absent at 0, so the hash of a build without it stays what it was
            settings["recovery_share"] = self.recovery_share
        return settings


def default_out(teacher: str | None) -> Path:
    """The build folder without --out: runs/sft-<teacher>, runs/nano/sft-data[-nl] for the nano teachers."""
    if teacher in NANO_CLI:
        return Path(str(NANO_CLI[teacher]["out"]))
    return Path(f"runs/sft-{Path(teacher).stem if teacher else 'smollm2-135m-demo'}")


def _find_demo_data() -> str:
    for candidate in DATA_DIR_CANDIDATES:
        if Path(candidate, "train", "dapo_math_17k.jsonl").is_file():
            return candidate
    raise ConfigError(
        f"the demo build needs local data (train/dapo_math_17k.jsonl) and found none in "
        f"{' or '.join(DATA_DIR_CANDIDATES)}; pass --teacher, --data-dir and --decontam-data-dir"
    )
