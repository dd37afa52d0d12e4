"""Build ThinC-SFT data by distilling a teacher: `python -m thinc_bench.build_sft`.

Quick start (offline, the bundled SmolLM2-135M as teacher on 3 local DAPO problems, a few minutes;
almost nothing passes the filters, and stats.json / report.html say why):

    python -m thinc_bench.build_sft

The paper's setting (a large teacher on GPUs, 4 samples per DAPO-Math-17k problem, Qwen3 student):

    python -m thinc_bench.build_sft --teacher Qwen/Qwen3.5-27B --backend vllm --source dapo_math_17k \
        --samples-per-problem 4 --student-tokenizer Qwen/Qwen3-1.7B --out runs/thinc-sft

Generation reuses eval's engine (same backends, rollout, sandbox and grader); every trajectory is
appended to `OUT/rollouts/samples.jsonl` as it finishes, so a rerun resumes. `--refilter` re-applies
the filters with new thresholds to stored rollouts without generating. Outputs: `OUT/dataset/`
(`datasets.load_from_disk`), `OUT/thinc_sft.parquet`, `OUT/stats.json`, `OUT/report.html`,
`OUT/README.md` (the dataset card); `--push-to-hub REPO` uploads the dataset and its card.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

from thinc_bench.build_sft.config import REFILTER_FIELDS, BuildSFTConfig
from thinc_bench.errors import ConfigError, ThincError

logger = logging.getLogger("thinc_bench.build_sft")


def _given(argv: Sequence[str]) -> set[str]:
    """Field names whose flags appear on the command line (--name or --name=value, - or _)."""
    return {arg[2:].split("=")[0].replace("-", "_") for arg in argv if arg.startswith("--")}


def _stored_config(out: Path, cli: BuildSFTConfig, given: set[str]) -> BuildSFTConfig:
    """For --refilter: the stored build's settings, overridden by the filter flags given now."""
    path = out / "rollouts" / "config.json"
    if not path.is_file():
        raise ConfigError(f"--refilter: {path} does not exist; build into --out first, then refilter it")
    stored = json.loads(path.read_text(encoding="utf-8")).get("build_sft")
    if not isinstance(stored, dict):
        raise ConfigError(f"--refilter: {path} has no build_sft settings; it was not written by build_sft")
    names = {f.name for f in fields(BuildSFTConfig)}
    merged = {k: v for k, v in stored.items() if k in names}
    merged |= {k: getattr(cli, k) for k in REFILTER_FIELDS & (given | {"out", "refilter"})}
    return BuildSFTConfig(**merged)


def generate(config: BuildSFTConfig, out: Path) -> None:
    """Run every teacher rollout not yet stored in `out/rollouts`, appending each as it finishes."""
    from thinc_bench.eval.run import run_eval
    from thinc_bench.eval.store import RunDir

    problems = config.load_problems(limit=config.limit)
    run = RunDir.open(out / "rollouts", config.generation_settings())
    run.annotate("build_sft", asdict(config))
    logger.info("%d problems x %s samples into %s", len(problems), config.samples_per_problem, run.path)
    asyncio.run(run_eval(config.eval_config(), run, problems))


def main(argv: Sequence[str] | None = None) -> int:
    from transformers import HfArgumentParser

    parser = HfArgumentParser(
        BuildSFTConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.build_sft",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        (config,) = parser.parse_args_into_dataclasses(args=args, return_remaining_strings=False)
        logging.basicConfig(
            level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return _main(config, _given(args))
    except ThincError as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2


def _main(config: BuildSFTConfig, given: set[str]) -> int:
    from thinc_bench.build_sft.dataset import finish, format_funnel, push

    started = time.perf_counter()
    name = Path(config.teacher).stem if config.teacher else "smollm2-135m-demo"
    out = Path(config.out or f"runs/sft-{name}")
    if config.refilter:
        config = _stored_config(out, config, given)
    else:
        generate(config, out)
    stats = finish(config, out)
    if config.push_to_hub:
        push(out, config.push_to_hub)
    print(format_funnel(stats))  # noqa: T201 - the CLI owns the terminal
    print(f"build: {out}  report: {out / 'report.html'}  ({time.perf_counter() - started:.0f} s)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
