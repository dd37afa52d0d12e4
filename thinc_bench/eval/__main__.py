"""Evaluate a model on the ThinC benchmarks: `python -m thinc_bench.eval`.

Quick start (offline, the bundled SmolLM2-135M on CPU, 2 problems x 2 samples, a few minutes):

    python -m thinc_bench.eval

The defaults with a --model on the five benchmarks the sources name (avg@16 at 32K tokens: our choices,
docs/settings.md) on a GPU machine:

    python -m thinc_bench.eval --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm \
        --samples 16 --max-tokens 32768 --recovery-k 0,1,2,3 --out runs/qwen3-4b

Against a running server (`vllm serve M`, SGLang, llama.cpp): `--backend openai --base-url
http://127.0.0.1:8000/v1`. Split a large run with `--shard i/n` (the report merges shards). A rerun
with the same settings resumes into the same `--out`; other settings are refused there.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thinc_bench.errors import ThincError
from thinc_bench.eval.config import EvalConfig

logger = logging.getLogger("thinc_bench.eval")


def format_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: one line per benchmark, then the average; a Recovery@k column for every
    k > 0 that ran (accuracy of every sample run with k injected failures); then, when any, one line
    each for the model's failures counted as wrong (harness errors, grader timeouts)."""
    ks = sorted({int(k) for block in summary["per_benchmark"].values() for k in block.get("recovery", {})})
    recovery_head = "".join(f"{f'R@{k}':>7}" for k in ks)
    lines = [
        f"{'benchmark':<16}{'acc':>8}{'±se':>8}{'n':>6}{'calls':>8}{'tokens':>9}{'grounded':>10}{'excluded':>9}"
        f"{'missing':>8}{recovery_head}"
    ]
    for name, block in summary["per_benchmark"].items():
        excluded, missing = sum(block["excluded"].values()), block["missing"]["count"]
        recovery = block.get("recovery", {})
        cells = "".join(f"{_recovery_cell(recovery, k):>7}" for k in ks)
        if "accuracy" not in block:
            lines.append(
                f"{name:<16}{'-':>8}{'':>8}{0:>6}{'':>8}{'':>9}{'':>10}{excluded:>9}{missing:>8}{cells}"
            )
            continue
        acc = block["accuracy"]
        stderr = f"{acc['stderr']:.3f}" if acc["stderr"] is not None else "-"
        grounded = (block.get("grounding") or {}).get("answered", {}).get("value")
        calls = (block.get("tool_calls") or {}).get("mean")
        lengths = block.get("lengths") or {}
        tokens = (lengths.get("response_tokens") or {}).get("mean")
        lines.append(
            f"{name:<16}{acc['value']:>8.3f}{stderr:>8}{acc['n_samples']:>6}"
            f"{'-' if calls is None else f'{calls:.2f}':>8}"
            f"{'-' if tokens is None else f'{tokens:.0f}':>9}{'-' if grounded is None else f'{grounded:.3f}':>10}"
            f"{excluded:>9}{missing:>8}{cells}"
        )
    overall = summary["overall"]
    mean = overall["mean_accuracy"]
    lines.append(f"{'average':<16}{'-' if mean is None else f'{mean:.3f}':>8}")
    if harness := overall.get("harness_errors"):
        lines.append(
            f"{harness} trajectories the harness could not process are counted as wrong (report: warnings)"
        )
    if timeouts := overall.get("grader_timeouts"):
        lines.append(f"{timeouts} answers too deep to judge in bounded time are counted as wrong")
    return "\n".join(lines)


def _recovery_cell(recovery: dict[str, Any], k: int) -> str:
    value = (recovery.get(str(k)) or {}).get("accuracy")
    return "-" if value is None else f"{value:.3f}"


EXAMPLES = (
    "python -m thinc_bench.eval                      # the demo: bundled SmolLM2-135M, 2 AIME 2025 problems x 2",
    "python -m thinc_bench.eval --model bundled-smollm2 --benchmarks nano --limit 4 --samples 1 --recovery-k 0",
    "python -m thinc_bench.eval --model Qwen/Qwen3-4B-Thinking-2507 --backend vllm --out runs/qwen3-4b",
)
"""The first lines of `--help`: the demo, a small run on generated problems, the model defaults (docs/settings.md)."""
HELP_GROUPS = {
    "model": ("model", "backend", "preset", "setting", "revision", "dtype", "tokenizer"),
    "what to run": (
        "benchmarks",
        "data_dir",
        "limit",
        "benchmark_limits",
        "samples",
        "recovery_k",
        "recovery_benchmarks",
        "recovery_samples",
        "shard",
    ),
    "budget and sampling": (
        "max_tokens",
        "max_tool_calls",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "seed",
    ),
    "trajectory format and prompt": (
        "dialect",
        "tool_name",
        "system_prompt",
        "user_template",
        "chat_template_kwargs",
        "few_shot",
        "exec_on",
        "response_prefix",
    ),
    "output and execution": (
        "out",
        "push_to_hub",
        "concurrency",
        "exec_timeout_s",
        "sandbox_state",
        "log_level",
    ),
    "hf and vllm backends": (
        "max_batch_size",
        "kv_cache_tokens",
        "tensor_parallel_size",
        "data_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
    ),
    "openai backend (a server)": (
        "base_url",
        "api",
        "api_key_env",
        "max_retries",
        "api_extensions",
        "context_length",
    ),
}
"""`--help` by purpose, each flag once (`cli.grouped_help` refuses a flag in no group)."""


def _checkpoint_defaults(argv: Sequence[str] | None) -> dict[str, Any]:
    """What the --model checkpoint recorded about how it was trained to run (`thinc_bench.checkpoint`):
    eval's defaults for it, below every flag given."""
    import argparse

    from thinc_bench import checkpoint

    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--model")
    known, _ = peek.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    defaults = checkpoint.eval_defaults(known.model)
    if defaults:
        logger.info("defaults recorded by %s: %s", known.model, defaults)
    return defaults


def parse_config(argv: Sequence[str] | None = None) -> EvalConfig:
    """The run's config from the command line, over the --model checkpoint's recorded defaults.

    Raises:
        ThincError: a setting is invalid (see `EvalConfig`), or the checkpoint's record is unreadable.
        SystemExit: status 2 with one line, for an unknown flag (naming the closest one).
    """
    from transformers import HfArgumentParser

    from thinc_bench.cli import grouped_help, parse_dataclasses

    parser = HfArgumentParser(
        EvalConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.eval",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        allow_abbrev=False,
    )
    grouped_help(parser, HELP_GROUPS, EXAMPLES)
    parser.set_defaults(**_checkpoint_defaults(argv))
    (config,) = parse_dataclasses(parser, argv)
    assert isinstance(config, EvalConfig)
    return config


EXIT_INTERRUPTED = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""


def resume_command(argv: Sequence[str], out: Path) -> str:
    """The command that resumes this run: the same arguments, with its --out made explicit."""
    given = {a.split("=", 1)[0] for a in argv}
    extra = [] if given & {"--out", "--output-dir", "--output_dir"} else ["--out", str(out)]
    return shlex.join(["python", "-m", "thinc_bench.eval", *argv, *extra])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        config = parse_config(args)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        from thinc_bench.cli import quiet_libraries

        quiet_libraries(verbose=config.log_level.lower() in ("debug", "info"))
        return _main(config, args)
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2
    except KeyboardInterrupt:  # before the run's own handler is in place (loading, planning)
        print("interrupted before the run started; nothing was saved", file=sys.stderr)  # noqa: T201
        return EXIT_INTERRUPTED


def _main(config: EvalConfig, argv: Sequence[str]) -> int:
    from thinc_bench.eval.api import execute, plan_line, prepare

    prepared = prepare(config)
    print(plan_line(prepared), file=sys.stderr, flush=True)  # noqa: T201 - the CLI owns the terminal
    started = time.perf_counter()
    out = prepared.out
    try:
        summary, complete = execute(prepared, stop_on_signals=True)
    except KeyboardInterrupt:  # after the rollouts: while summary.json or the report was being written
        saved = len(prepared.run.records())
        print(  # noqa: T201
            f"interrupted while writing the summary and report: {saved} of {prepared.planned} trajectories "
            f"saved in {out}; rerun to write them: {resume_command(argv, out)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if not complete:
        saved = (summary.get("partial") or {}).get("saved", prepared.planned)
        print(  # noqa: T201
            f"interrupted: {saved} of {prepared.planned} trajectories saved in {out} (summary and report "
            f"marked partial); resume with: {resume_command(argv, out)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    print(format_table(summary))  # noqa: T201
    print(f"run: {out}  report: {out / 'report.html'}  ({time.perf_counter() - started:.0f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
