"""Evaluate a model on the ThinC benchmarks: `python -m thinc_bench.eval`.

Quick start (offline, the bundled SmolLM2-135M on CPU, 2 problems x 2 samples, a few minutes):

    python -m thinc_bench.eval

The paper's setting (avg@16 at 32K tokens on the five benchmarks) on a GPU machine:

    python -m thinc_bench.eval --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm \
        --samples 16 --max-tokens 32768 --recovery-k 0,1,2,3 --out runs/qwen3-4b

Against a running server (`vllm serve M`, SGLang, llama.cpp): `--backend openai --base-url
http://127.0.0.1:8000/v1`. Split a large run with `--shard i/n` (the report merges shards). A rerun
with the same settings resumes into the same `--out`; other settings are refused there.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.benchmarks import PAPER_BENCHMARKS, REGISTRY, Problem
from thinc_bench.errors import ConfigError, ThincError

if TYPE_CHECKING:
    from thinc_bench.backends import Generator
    from thinc_bench.grading import Grader
    from thinc_bench.prompts import Example
    from thinc_bench.sandbox import Sandbox
    from thinc_bench.store import RunDir, SampleRecord

logger = logging.getLogger("thinc_bench.eval")

DEMO_BENCHMARKS = "aime2025"
"""The embedded default runs one benchmark: enough to exercise every path, short enough for 2 cores."""
DEMO = {
    "samples": 2,
    "limit": 2,
    "max_tokens": 2048,
    "concurrency": 4,
    "max_tool_calls": 4,
    "few_shot": 1,
    "exec_on": "code_close",
    "response_prefix": "```python\n",
}
"""Settings of the embedded default (no --model): the bundled tiny model on CPU in a few minutes."""
PAPER = {
    "samples": 16,
    "limit": None,
    "max_tokens": 32768,
    "concurrency": 64,
    "max_tool_calls": 32,
    "few_shot": 0,
    "exec_on": "output_open",
    "response_prefix": "",
}
"""Defaults with a --model: the ThinC paper's avg@16 at 32K tokens."""
DATA_DIR_CANDIDATES = ("shared/data/benchmarks", "../shared/data/benchmarks")
"""Where the embedded default looks for local benchmark copies (a checkout with shared data beside it)."""
RUNTIME_FIELDS = frozenset({"out", "concurrency", "log_level"})
"""Settings that do not change results: left out of the config hash, so a resume may change them."""
_BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {
    "hf": ("revision", "dtype", "max_batch_size"),
    "vllm": ("revision", "dtype", "tensor_parallel_size", "max_model_len", "gpu_memory_utilization"),
    "openai": ("base_url", "tokenizer", "api_key_env", "max_retries"),
    "scripted": ("tokenizer",),
}


@dataclass
class EvalConfig:
    """Everything that defines an evaluation run; None means "the documented default"."""

    model: str | None = field(
        default=None,
        metadata={
            "help": "Folder, Hub id or .gguf (hf, vllm); served model name (openai); script (scripted). "
            "Omitted: the bundled SmolLM2-135M-Instruct GGUF on a tiny demo run."
        },
    )
    backend: str = field(default="hf", metadata={"help": "hf | vllm | openai | scripted."})
    benchmarks: str | None = field(
        default=None,
        metadata={
            "help": f"Comma list of {', '.join(REGISTRY)} or .jsonl/.parquet paths. "
            f"Default: the paper's five ({DEMO_BENCHMARKS} for the demo)."
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Folder with <benchmark>.jsonl copies; omitted: the Hugging Face Hub "
            "(the demo looks for ../shared/data/benchmarks)."
        },
    )
    samples: int | None = field(
        default=None, metadata={"help": "Samples per problem (avg@n); default 16, demo 2."}
    )
    max_tokens: int | None = field(
        default=None,
        metadata={"help": "Prompt + completion token budget per trajectory; default 32768, demo 1024."},
    )
    max_tool_calls: int | None = field(
        default=None,
        metadata={"help": "Code executions per trajectory; default 32 (ThinC averages ~6), demo 4."},
    )
    temperature: float = field(
        default=0.6, metadata={"help": "Sampling temperature (Qwen3 thinking's advice)."}
    )
    top_p: float = field(default=0.95, metadata={"help": "Nucleus sampling mass (Qwen3 thinking's advice)."})
    top_k: int | None = field(default=None, metadata={"help": "Top-k; omitted keeps every token."})
    seed: int = field(
        default=0, metadata={"help": "Base seed; each sample's seed derives from it and the sample key."}
    )
    limit: int | None = field(
        default=None, metadata={"help": "Problems per benchmark (first N); default all, demo 2."}
    )
    recovery_k: str = field(
        default="0",
        metadata={"help": "Comma list of injected-failure counts k; 0 is the clean run (Recovery@k)."},
    )
    dialect: str = field(
        default="markdown", metadata={"help": "markdown (ThinC) | xml (interleaved TIR baselines)."}
    )
    system_prompt: str = field(
        default="thinc", metadata={"help": "thinc | interleaved | none | path to a text file."}
    )
    few_shot: int | None = field(
        default=None,
        metadata={
            "help": "Bundled ThinC example trajectories shown as earlier chat turns; default 0 "
            "(trained models need none), demo 1 (a 135M instruct model needs the format shown)."
        },
    )
    exec_on: str | None = field(
        default=None,
        metadata={
            "help": "output_open: run code when the model opens an output block (ThinC); code_close: as soon "
            "as a code block closes (ReTool-style </code>). Default output_open; demo code_close."
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
        default=None, metadata={"help": "Run directory; default runs/<model>-<config hash>."}
    )
    shard: str = field(default="0/1", metadata={"help": "i/n: evaluate every n-th problem starting at i."})
    exec_timeout_s: float = field(
        default=10.0, metadata={"help": "Wall seconds per code block before it is killed."}
    )
    sandbox_state: str = field(
        default="persistent", metadata={"help": "persistent (notebook) | fresh per block."}
    )
    revision: str | None = field(default=None, metadata={"help": "Hub revision of the model (hf, vllm)."})
    dtype: str | None = field(default=None, metadata={"help": "Model dtype (hf, vllm); default per backend."})
    max_batch_size: int | None = field(
        default=None, metadata={"help": "hf: most sequences decoded together."}
    )
    tensor_parallel_size: int | None = field(default=None, metadata={"help": "vllm: GPUs per model replica."})
    max_model_len: int | None = field(default=None, metadata={"help": "vllm: context length to reserve."})
    gpu_memory_utilization: float | None = field(
        default=None, metadata={"help": "vllm: share of GPU memory."}
    )
    base_url: str | None = field(
        default=None, metadata={"help": "openai: server URL, e.g. http://127.0.0.1:8000/v1."}
    )
    tokenizer: str | None = field(
        default=None, metadata={"help": "openai/scripted: tokenizer folder, Hub id or .gguf."}
    )
    api_key_env: str | None = field(
        default=None, metadata={"help": "openai: environment variable holding the key."}
    )
    max_retries: int | None = field(
        default=None,
        metadata={"help": "openai: retries (exponential backoff) before a request is an infra error."},
    )
    log_level: str = field(default="warning", metadata={"help": "debug | info | warning | error."})

    def __post_init__(self) -> None:
        preset = DEMO if self.model is None else PAPER
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
        for name in ("samples", "max_tokens", "max_tool_calls", "concurrency"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(self, name)}: use a positive integer")
        if self.exec_on not in ("output_open", "code_close"):
            raise ConfigError(f"--exec-on {self.exec_on!r}: use output_open or code_close")
        if int(self.few_shot or 0) < 0:
            raise ConfigError(f"--few-shot {self.few_shot}: use 0 or more bundled examples")
        _parse_shard(self.shard)
        _parse_ks(self.recovery_k)

    @property
    def shard_index(self) -> int:
        return _parse_shard(self.shard)[0]

    @property
    def shard_count(self) -> int:
        return _parse_shard(self.shard)[1]

    @property
    def recovery_ks(self) -> list[int]:
        return _parse_ks(self.recovery_k)

    @property
    def benchmark_names(self) -> list[str]:
        return [b.strip() for b in str(self.benchmarks).split(",") if b.strip()]

    def backend_options(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in _BACKEND_OPTIONS[self.backend] if getattr(self, n) is not None}

    def settings(self) -> dict[str, Any]:
        """What defines the results (hashed into the run config): every field but the runtime ones,
        plus the full system prompt text, so an edited prompt file never mixes into an old run."""
        from thinc_bench.prompts import load_examples, load_system_prompt

        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RUNTIME_FIELDS}
        settings["system_prompt_text"] = load_system_prompt(self.system_prompt)
        settings["few_shot_trajectories"] = [e.trajectory for e in load_examples(self.few_shot)]
        return settings


def _find_demo_data() -> str:
    for candidate in DATA_DIR_CANDIDATES:
        if Path(candidate, f"{DEMO_BENCHMARKS}.jsonl").is_file():
            return candidate
    raise ConfigError(
        f"the demo run needs local benchmark copies ({DEMO_BENCHMARKS}.jsonl) and found none in "
        f"{' or '.join(DATA_DIR_CANDIDATES)}; pass --data-dir FOLDER (or --model M to read the Hub)"
    )


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r}: use i/n with 0 <= i < n, e.g. 0/4") from None
    if not 0 <= index < count:
        raise ConfigError(f"--shard {text!r}: use i/n with 0 <= i < n, e.g. 0/4")
    return index, count


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


def sample_seed(base: int, benchmark: str, problem_id: str, sample_idx: int, k: int) -> int:
    """A per-sample seed that does not depend on scheduling order, so reruns and resumes agree."""
    digest = hashlib.sha256(f"{base}/{benchmark}/{problem_id}/{sample_idx}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def load_problems(config: EvalConfig) -> list[Problem]:
    """Every problem of this run and shard, benchmarks in the order given."""
    from thinc_bench import benchmarks

    problems: list[Problem] = []
    for name in config.benchmark_names:
        loaded = benchmarks.load(name, data_dir=config.data_dir)[: config.limit]
        problems += loaded[config.shard_index :: config.shard_count]
    return problems


@dataclass
class _Progress:
    done: int = 0
    correct: int = 0
    scored: int = 0
    gen_tokens: int = 0
    sandbox_errors: int = 0
    started: float = field(default_factory=time.perf_counter)

    def postfix(self) -> dict[str, str]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        accuracy = f"{self.correct / self.scored:.3f}" if self.scored else "-"
        return {
            "acc": accuracy,
            "tok/s": f"{self.gen_tokens / elapsed:.1f}",
            "sandbox_err": str(self.sandbox_errors),
        }


async def _evaluate_one(
    problem: Problem,
    sample_idx: int,
    k: int,
    *,
    config: EvalConfig,
    generator: Generator,
    sandbox: Sandbox,
    grader: Grader,
    system_prompt: str,
    examples: list[Example],
) -> SampleRecord:
    from thinc_bench import rollout, trajectory
    from thinc_bench.backends import SamplingParams
    from thinc_bench.prompts import build_messages
    from thinc_bench.store import SampleRecord

    prompt_ids = rollout.render_prompt(generator, build_messages(problem.problem, system_prompt, examples))
    params = SamplingParams(
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        max_tokens=int(config.max_tokens or 1),
        seed=sample_seed(config.seed, problem.benchmark, problem.id, sample_idx, k),
    )
    limits = rollout.RolloutLimits(int(config.max_tokens or 1), int(config.max_tool_calls or 1))
    session = await asyncio.to_thread(sandbox.session, inject_failures=k)
    try:
        result = await rollout.rollout(
            generator,
            session,
            prompt_ids,
            params,
            limits=limits,
            dialect=config.dialect,
            request_id=f"{problem.id}/{sample_idx}/{k}",
            exec_on=config.exec_on,  # type: ignore[arg-type]
            response_prefix=config.response_prefix or "",
        )
    finally:
        await asyncio.to_thread(session.close)
    started = time.perf_counter()
    parsed = trajectory.parse(result.text, config.dialect)
    style = trajectory.classify(parsed)
    if result.stop_reason == "infra_error":
        grade_status, answer, correct, grounded = "infra_error", None, False, None
    else:
        verdict = await grader.agrade(gold=problem.answer, pred=result.text)
        grade_status, answer, correct = verdict.status, verdict.answer, verdict.correct
        grounded = await asyncio.to_thread(grader.is_grounded, parsed)
    return SampleRecord(
        benchmark=problem.benchmark,
        problem_id=problem.id,
        sample_idx=sample_idx,
        k=k,
        text=result.text,
        answer=answer,
        gold=problem.answer,
        correct=correct,
        status=grade_status,
        n_tool_calls=result.n_tool_calls,
        n_exec_errors=result.n_exec_errors,
        gen_tokens=result.gen_tokens,
        total_tokens=result.total_tokens,
        grounded=grounded,
        finish_reason=result.stop_reason,
        timings={
            "generate_s": result.generate_s,
            "execute_s": result.execute_s,
            "grade_s": time.perf_counter() - started,
        },
        exec_statuses=[e.status for e in result.executions],
        style=style,
        error=result.error,
    )


async def run_eval(config: EvalConfig, run: RunDir, problems: Sequence[Problem]) -> None:
    """Run every (problem, sample, k) not yet in the run directory, appending each as it finishes."""
    from tqdm import tqdm

    from thinc_bench.backends import load_generator, smollm2_gguf
    from thinc_bench.grading import Grader
    from thinc_bench.prompts import load_examples, load_system_prompt
    from thinc_bench.sandbox import Sandbox, SandboxConfig

    done = run.done_keys()
    todo = [
        (problem, sample_idx, k)
        for k in config.recovery_ks
        for problem in problems
        for sample_idx in range(int(config.samples or 1))
        if (problem.benchmark, problem.id, sample_idx, k) not in done
    ]
    if not todo:
        logger.info("nothing to do: all %d samples are in %s", len(done), run.path)
        return
    system_prompt = load_system_prompt(config.system_prompt)
    examples = load_examples(config.few_shot)
    model = config.model or str(smollm2_gguf())
    concurrency = int(config.concurrency or 1)
    sandbox_config = SandboxConfig(
        timeout_s=config.exec_timeout_s,
        state=config.sandbox_state,  # type: ignore[arg-type]
        max_sessions=max(concurrency, SandboxConfig.max_sessions),
    )
    progress = _Progress()
    generator = load_generator(config.backend, model, **config.backend_options())  # type: ignore[arg-type]
    run.annotate("resolved", {"generator": generator.describe(), "sandbox": asdict(sandbox_config)})
    try:
        with (
            Sandbox(sandbox_config) as sandbox,
            Grader() as grader,
            tqdm(total=len(todo), desc="eval") as bar,
        ):
            bar.update(0)
            gate = asyncio.Semaphore(concurrency)

            async def one(problem: Problem, sample_idx: int, k: int) -> None:
                async with gate:
                    record = await _evaluate_one(
                        problem,
                        sample_idx,
                        k,
                        config=config,
                        generator=generator,
                        sandbox=sandbox,
                        grader=grader,
                        system_prompt=system_prompt,
                        examples=examples,
                    )
                run.append(record)
                progress.done += 1
                progress.gen_tokens += record.gen_tokens
                progress.sandbox_errors += sum(s == "infra_error" for s in record.exec_statuses)
                if record.k == 0 and record.status != "infra_error":
                    progress.scored += 1
                    progress.correct += record.correct
                bar.set_postfix(progress.postfix(), refresh=False)
                bar.update(1)

            await asyncio.gather(*(one(*item) for item in todo))
    finally:
        await generator.aclose()


def finish(config: EvalConfig, run: RunDir) -> dict[str, Any]:
    """Write summary.json and report.html from the run directory alone; return the summary."""
    from thinc_bench import grading
    from thinc_bench.report import write_report
    from thinc_bench.summary import summarize

    order = list(
        dict.fromkeys(
            Path(b).stem if b.endswith((".jsonl", ".parquet")) else b for b in config.benchmark_names
        )
    )
    summary = summarize(run.records(), same=grading.equivalent, benchmarks=order)
    run.write_summary(summary)
    write_report(run.path)
    return summary


def format_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: one line per benchmark, then the average."""
    lines = [
        f"{'benchmark':<16}{'acc':>8}{'±se':>8}{'n':>6}{'calls':>8}{'tokens':>9}{'grounded':>10}{'infra':>7}"
    ]
    for name, block in summary["per_benchmark"].items():
        if "accuracy" not in block:
            lines.append(f"{name:<16}{'-':>8}{'':>8}{0:>6}{'':>8}{'':>9}{'':>10}{block['n_infra_errors']:>7}")
            continue
        acc = block["accuracy"]
        stderr = f"{acc['stderr']:.3f}" if acc["stderr"] is not None else "-"
        grounded = block["grounding"]["answered"]["value"]
        lines.append(
            f"{name:<16}{acc['value']:>8.3f}{stderr:>8}{acc['n_samples']:>6}{block['tool_calls']['mean']:>8.2f}"
            f"{block['lengths']['model_tokens']['mean']:>9.0f}{'-' if grounded is None else f'{grounded:.3f}':>10}"
            f"{block['n_infra_errors']:>7}"
        )
    mean = summary["overall"]["mean_accuracy"]
    lines.append(f"{'average':<16}{'-' if mean is None else f'{mean:.3f}':>8}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from transformers import HfArgumentParser

    parser = HfArgumentParser(
        EvalConfig,  # type: ignore[arg-type]
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    try:
        (config,) = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=False)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return _main(config)
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2


def _main(config: EvalConfig) -> int:
    from thinc_bench.store import RunDir, config_hash

    problems = load_problems(config)
    model_name = Path(config.model).stem if config.model else "smollm2-135m-demo"
    out = Path(config.out or f"runs/{model_name}-{config_hash(config.settings())[:8]}")
    run = RunDir.open(out, config.settings())
    logger.info("run directory %s, %d problems, k in %s", out, len(problems), config.recovery_ks)
    started = time.perf_counter()
    asyncio.run(run_eval(config, run, problems))
    summary = finish(config, run)
    print(format_table(summary))  # noqa: T201 - the CLI owns the terminal
    print(f"run: {out}  report: {out / 'report.html'}  ({time.perf_counter() - started:.0f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
