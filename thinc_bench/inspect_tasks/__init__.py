"""thinc_bench inside Inspect AI: its benchmarks as tasks, its sandbox, tool, judge and metrics.

`pip install -e ".[inspect]"`, then `inspect eval thinc_bench/aime2025 --model vllm/NAME -T k=1`
(docs/inspect.md). Folders of the package it uses, in data-flow order: `settings` (a task's `-T`
arguments resolved by eval's `EvalConfig`), `dataset` (problems as samples, one per problem and k),
`model` (thinc_bench's backends as Inspect models: `--model thinc_bench/<backend>/<model>`),
`sandbox` (one thinc_bench session per sample: `sandbox="thinc_bench"`), `tool` (the preset's Python
tool over it), `records` (trajectories as messages and back), `solvers` (the token path,
thinc_bench's rollout; the native path, Inspect's tool loop), `scorer` (eval's judge and summary),
`tasks`. Inspect finds it through the `inspect_ai` entry point (`_registry`), every object named
`thinc_bench/<name>` however the package is installed (`names`). The package is named
for what it holds rather than `inspect` or `inspect_ai`, which would read as the standard library's
`inspect` module or as Inspect itself wherever this folder lands on `sys.path`.
"""

try:
    import inspect_ai  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is not installed
    raise ModuleNotFoundError(
        "thinc_bench.inspect_tasks needs Inspect AI: pip install -e '.[inspect]' (or pip install inspect-ai)",
        name=exc.name,
    ) from exc

from thinc_bench.inspect_tasks.dataset import dataset, sample_id, to_samples
from thinc_bench.inspect_tasks.model import ThincModelAPI, spec_of
from thinc_bench.inspect_tasks.records import native_rollout, stored_rollout, turn_messages
from thinc_bench.inspect_tasks.sandbox import ThincSandboxConfig, ThincSandboxEnvironment
from thinc_bench.inspect_tasks.scorer import headline, judge, thinc_bench_metrics
from thinc_bench.inspect_tasks.settings import ModelSpec, TaskArgs
from thinc_bench.inspect_tasks.solvers import rollout, tool_loop
from thinc_bench.inspect_tasks.tasks import (
    aime2024,
    aime2025,
    aime2026,
    benchmark,
    benchmark_task,
    beyondaime,
    gpqa_diamond,
    hmmt_feb2025,
    math500,
    nano,
)
from thinc_bench.inspect_tasks.tool import python

__all__ = [
    "ModelSpec",
    "TaskArgs",
    "ThincModelAPI",
    "ThincSandboxConfig",
    "ThincSandboxEnvironment",
    "aime2024",
    "aime2025",
    "aime2026",
    "benchmark",
    "benchmark_task",
    "beyondaime",
    "dataset",
    "gpqa_diamond",
    "headline",
    "hmmt_feb2025",
    "judge",
    "math500",
    "nano",
    "native_rollout",
    "python",
    "rollout",
    "sample_id",
    "spec_of",
    "stored_rollout",
    "thinc_bench_metrics",
    "to_samples",
    "tool_loop",
    "turn_messages",
]
