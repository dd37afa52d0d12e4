"""The tasks: `thinc_bench/<benchmark>` for every benchmark thinc_bench evaluates, and any file.

`inspect eval thinc_bench/aime2025 --model vllm/Qwen/Qwen3-4B-Thinking-2507 -T k=1` evaluates as
`python -m thinc_bench.eval` does, inside Inspect: the same problems, prompt, sandbox, judge and
metrics. Arguments (`-T`), each the CLI flag of the same meaning:

- `preset` (thinc | rstar2-agent | aster | retool) and `dialect` (markdown | xml | tool_call): the
  format. markdown and xml run thinc_bench's own rollout (token path); tool_call runs native tool
  calls through Inspect's tool loop (native path). The task's metadata says which.
- `k`: Recovery@k's injected-failure counts (`1`, or `1,3`); the clean run is always added.
- `samples`: samples per problem (Inspect's epochs; `--epochs` works too). Reduced by `mean` (avg@n)
  and `pass_at_<k>` for k = 2, 4, ... up to it.
- `budget`: completion tokens per trajectory, model and interpreter (the CLI's `--max-tokens`;
  Inspect's own `--max-tokens` caps each model call).
- `data_dir`: a folder of `<benchmark>.jsonl` copies (else the Hugging Face Hub).
- any other `python -m thinc_bench.eval` setting by its field name (`max_tool_calls`, `few_shot`,
  `system_prompt`, `exec_timeout`, `tool_name`, `tokenizer` for the native path's record, ...).

A setting the CLI refuses is refused when the task is built, in one line.
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.model import GenerateConfig

from thinc_bench.inspect_tasks.dataset import dataset
from thinc_bench.inspect_tasks.names import registered
from thinc_bench.inspect_tasks.sandbox import NAME as SANDBOX
from thinc_bench.inspect_tasks.sandbox import ThincSandboxConfig
from thinc_bench.inspect_tasks.scorer import judge
from thinc_bench.inspect_tasks.settings import NATIVE_DIALECT, TaskArgs
from thinc_bench.inspect_tasks.solvers import rollout, tool_loop

PATHS = {
    "token": "token path: thinc_bench's rollout and backend continue the model's own tokens",
    "native": "native path: tool calls through Inspect's model API and tool loop",
}
"""How each task labels the path its trajectories take (task metadata `thinc_bench_path`)."""


def reducers(samples: int) -> list[str]:
    """`mean` (avg@n) and Inspect's `pass_at_<k>` for k = 2, 4, 8, ... and `samples` itself."""
    ks = sorted({*(1 << i for i in range(1, samples.bit_length()) if 1 << i <= samples), samples} - {1})
    return ["mean", *(f"pass_at_{k}" for k in ks)]


def benchmark_task(
    benchmark: str,
    *,
    preset: str | None = None,
    dialect: str | None = None,
    k: int | str | list[int] | None = 0,
    samples: int = 1,
    budget: int | None = None,
    data_dir: str | None = None,
    **settings: Any,
) -> Task:
    """A thinc_bench task over `benchmark` (a registered or generated name, or a local file).

    Raises:
        ConfigError: a setting the CLI refuses (named, with the fix).
        DatasetError: the benchmark cannot be loaded (a missing copy, no Hub, a bad gold).
    """
    from thinc_bench.errors import ConfigError

    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ConfigError(f"-T samples={samples!r}: use a positive number of samples per problem")
    args = TaskArgs.of(preset=preset, dialect=dialect, k=k, budget=budget, **settings)
    config = args.config()  # every setting checked now, before a sample runs
    given = args.kwargs()
    native = config.dialect == NATIVE_DIALECT
    return Task(
        dataset=dataset(benchmark, data_dir, config.recovery_ks),
        solver=tool_loop(**given) if native else rollout(**given),
        scorer=judge(**given),
        sandbox=(SANDBOX, ThincSandboxConfig(timeout_s=config.exec_timeout_s, state=config.sandbox_state)),  # type: ignore[arg-type]
        epochs=Epochs(samples, reducers(samples)),
        config=GenerateConfig(
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            presence_penalty=config.presence_penalty or None,
            frequency_penalty=config.frequency_penalty or None,
        ),
        metadata={
            "thinc_bench_path": PATHS["native" if native else "token"],
            "dialect": config.dialect,
            "preset": config.preset,
            "recovery_k": config.recovery_ks,
        },
    )


@task(name=registered("aime2024"))
def aime2024(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """AIME 2024 (30 problems), as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("aime2024", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("aime2025"))
def aime2025(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """AIME 2025 (30 problems), as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("aime2025", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("aime2026"))
def aime2026(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """AIME 2026 (30 problems), as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("aime2026", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("hmmt_feb2025"))
def hmmt_feb2025(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """HMMT February 2025 (30 problems), as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("hmmt_feb2025", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("beyondaime"))
def beyondaime(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """BeyondAIME (100 problems), as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("beyondaime", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("math500"))
def math500(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """MATH-500, as thinc_bench evaluates it (see `tasks` for the arguments)."""
    return benchmark_task("math500", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("gpqa_diamond"))
def gpqa_diamond(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """GPQA-Diamond (198 questions, options shuffled per question as the CLI does; out of domain)."""
    return benchmark_task("gpqa_diamond", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("nano"))
def nano(preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """ThinC-nano's test split (100 generated problems; no data needed), as `make nano` evaluates it."""
    return benchmark_task("nano", preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip


@task(name=registered("benchmark"))
def benchmark(name: str, preset: str | None = None, dialect: str | None = None, k: Any = 0, samples: int = 1, budget: int | None = None, data_dir: str | None = None, **settings: Any) -> Task:  # fmt: skip
    """Any benchmark thinc_bench reads, by `-T name=`: a registered or generated one (`nano_unseen`,
    `nano_ranges`, ...) or a local `.jsonl` / `.parquet` file (`problem`, `answer` and `id` columns)."""
    return benchmark_task(name, preset=preset, dialect=dialect, k=k, samples=samples, budget=budget, data_dir=data_dir, **settings)  # fmt: skip
