"""One evaluation run from start to summary, shared by the CLI and `thinc_bench.evaluate`.

`prepare` resolves what the run needs before anything is written (problems, the run directory and
what it already holds) and `plan_line` says the plan in one line: benchmarks x problems x samples x
k values = N trajectories, the budget and the backend. `execute` runs what is left (stoppable, for
Ctrl-C), writes the summary, the Parquet table and the report, and pushes them with --push-to-hub.
`evaluate` is the synchronous
Python face: the CLI's defaults (the checkpoint's record, the defaults with a --model or the demo's), its run
directory and its resume, returning the run as tables (`results.Run`). No printing here.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinc_bench.benchmarks import Problem
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.results import Run, load_run
from thinc_bench.eval.run import finish, load_problems, plan, run_eval
from thinc_bench.eval.store import RunDir, check_writable, config_hash

logger = logging.getLogger("thinc_bench.eval")

DEMO_NAME = "smollm2-135m-demo"
"""The default run directory's model part when no --model is given."""


@dataclass
class Prepared:
    """A run ready to start: nothing of it is written yet (see `RunDir.open`)."""

    config: EvalConfig
    problems: list[Problem]
    run: RunDir
    planned: int
    saved: int

    @property
    def out(self) -> Path:
        return self.run.path


def default_out(config: EvalConfig) -> Path:
    """runs/<model>-<config hash>: the same settings always land in the same directory."""
    model_name = Path(config.model).stem if config.model else DEMO_NAME
    return Path("runs", f"{model_name}-{config_hash(config.settings())[:8]}")


def prepare(config: EvalConfig) -> Prepared:
    """Load the problems and open (without writing) the run directory.

    Raises:
        ThincError: a benchmark cannot be loaded, or the directory holds another run's samples.
    """
    out = Path(config.out) if config.out else default_out(config)
    check_writable(out)  # before the Hub, the problems or the model: a bad --out fails in a second
    if config.push_to_hub:
        from thinc_bench.eval.publish import check_reachable

        check_reachable(config.push_to_hub)  # seconds now, not after hours of generation
    problems = load_problems(config)
    run = RunDir.open(out, config.settings())
    done = run.done_keys()
    planned = plan(config, problems)
    saved = sum((p.benchmark, p.id, i, k) in done for p, i, k in planned)
    return Prepared(config, problems, run, len(planned), saved)


def plan_line(prepared: Prepared) -> str:
    """The run's plan in one line, e.g. `plan: aime2025 30 problems x 16 samples x 6 k (0..5) = 2,880
    trajectories (2,880 to run); budget 32768 tokens, 32 tool calls each; backend hf Qwen/Qwen3-1.7B`."""
    config = prepared.config
    per = Counter(p.benchmark for p in prepared.problems)
    benchmarks = " + ".join(f"{name} {n}" for name, n in per.items()) or "no"
    ks = config.recovery_ks
    to_run = prepared.planned - prepared.saved
    left = f"{to_run:,} to run" + (f", {prepared.saved:,} saved" if prepared.saved else "")
    return (
        f"plan: {benchmarks} problems x {config.samples} samples x {len(ks)} k ({','.join(map(str, ks))}"
        + (f"; {config.recovery_samples} samples each k > 0" if config.recovery_samples is not None else "")
        + ") "
        f"= {prepared.planned:,} trajectories ({left}); budget {config.max_tokens} tokens, "
        f"{config.max_tool_calls} tool calls each; backend {config.backend} {config.model or 'bundled SmolLM2-135M'}"
        f"; into {prepared.out}"
    )


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that end a CLI run in order (Ctrl-C, a scheduler's stop): saved work stays, a rerun resumes."""


def execute(prepared: Prepared, *, stop_on_signals: bool = False) -> tuple[dict[str, Any], bool]:
    """Run what is left, then write summary.json, samples.parquet and report.html.

    Args:
        prepared: from `prepare`.
        stop_on_signals: SIGINT and SIGTERM stop the run in order (no new trajectory, those in flight
            cancelled, their sandbox sessions closed) instead of raising KeyboardInterrupt mid-write.

    Returns:
        The summary and whether the run is complete (False when a signal stopped it: the summary
        and report then cover what is saved and say `partial`).
    """
    complete = asyncio.run(_run(prepared, stop_on_signals))
    problems = Counter(p.benchmark for p in prepared.problems)
    summary = finish(prepared.config, prepared.run, planned=prepared.planned, problems=problems)
    if complete and prepared.config.push_to_hub:
        from thinc_bench.eval.publish import push_run

        push_run(prepared.out, prepared.config.push_to_hub)
    return summary, complete


async def _run(prepared: Prepared, stop_on_signals: bool) -> bool:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop_on_signals:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop.set)
    try:
        return await run_eval(prepared.config, prepared.run, prepared.problems, stop=stop)
    finally:
        if stop_on_signals:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)


def evaluate(model: str | None = None, benchmarks: str | list[str] | None = None, **settings: Any) -> Run:
    """Evaluate a model as `python -m thinc_bench.eval` does and return the run as tables.

    Args:
        model: a folder, Hub id, `.gguf` or `bundled-smollm2` (None: the embedded demo), as `--model`.
        benchmarks: names or files, as a list or a comma string, as `--benchmarks`.
        **settings: any other flag of the CLI by its field name (`samples=4`, `max_tokens=4096`,
            `out="runs/x"`, `backend="vllm"`); a checkpoint's recorded defaults apply below them.

    Returns:
        The run (`thinc_bench.load_run` of its directory): `.config`, `.summary`, `.samples`.

    Raises:
        ThincError: an invalid setting, a model or benchmark that cannot load, or an --out holding
            another run's samples (the message names the fix).

    Example:
        >>> run = evaluate("runs/nano/sft", benchmarks="nano", limit=10)  # doctest: +SKIP
        >>> run.problems().groupby("benchmark")["accuracy"].mean()  # avg@n, as summary.json  # doctest: +SKIP
    """
    from thinc_bench import checkpoint

    if isinstance(benchmarks, list | tuple):
        benchmarks = ",".join(benchmarks)
    given = {"model": model, "benchmarks": benchmarks, **settings}
    if "recovery_k" in given and isinstance(given["recovery_k"], list | tuple):
        given["recovery_k"] = ",".join(map(str, given["recovery_k"]))
    defaults = checkpoint.eval_defaults(model)
    config = EvalConfig(**(defaults | {k: v for k, v in given.items() if v is not None}))
    prepared = prepare(config)
    logger.info("%s", plan_line(prepared))
    execute(prepared)
    return load_run(prepared.out)
