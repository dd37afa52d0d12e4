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
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thinc_bench.errors import ThincError
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.run import finish, load_problems, run_eval

logger = logging.getLogger("thinc_bench.eval")


def format_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: one line per benchmark, then the average."""
    lines = [
        f"{'benchmark':<16}{'acc':>8}{'±se':>8}{'n':>6}{'calls':>8}{'tokens':>9}{'grounded':>10}{'excluded':>9}{'missing':>8}"
    ]
    for name, block in summary["per_benchmark"].items():
        excluded, missing = sum(block["excluded"].values()), block["missing"]["count"]
        if "accuracy" not in block:
            lines.append(f"{name:<16}{'-':>8}{'':>8}{0:>6}{'':>8}{'':>9}{'':>10}{excluded:>9}{missing:>8}")
            continue
        acc = block["accuracy"]
        stderr = f"{acc['stderr']:.3f}" if acc["stderr"] is not None else "-"
        grounded = block["grounding"]["answered"]["value"]
        lengths = block.get("lengths") or {}
        tokens = (lengths.get("response_tokens") or {}).get("mean")
        lines.append(
            f"{name:<16}{acc['value']:>8.3f}{stderr:>8}{acc['n_samples']:>6}{block['tool_calls']['mean']:>8.2f}"
            f"{'-' if tokens is None else f'{tokens:.0f}':>9}{'-' if grounded is None else f'{grounded:.3f}':>10}"
            f"{excluded:>9}{missing:>8}"
        )
    mean = summary["overall"]["mean_accuracy"]
    lines.append(f"{'average':<16}{'-' if mean is None else f'{mean:.3f}':>8}")
    return "\n".join(lines)


def _checkpoint_defaults(argv: Sequence[str] | None) -> dict[str, Any]:
    """What the --model checkpoint recorded about how it was trained to run (`thinc_bench.checkpoint`):
    eval's defaults for it, below every flag given."""
    import argparse

    from thinc_bench import checkpoint

    peek = argparse.ArgumentParser(add_help=False)
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
    """
    from transformers import HfArgumentParser

    parser = HfArgumentParser(
        EvalConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.eval",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.set_defaults(**_checkpoint_defaults(argv))
    (config,) = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=False)
    return config


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = parse_config(argv)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return _main(config)
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2


def _main(config: EvalConfig) -> int:
    from thinc_bench.eval.store import RunDir, config_hash

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
