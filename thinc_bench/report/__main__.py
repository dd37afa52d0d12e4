"""Compare runs in one HTML page: `python -m thinc_bench.report RUN_DIR [RUN_DIR ...] --out FILE`.

Several models side by side, one column group per run with the best value marked; run directories
whose settings differ only in `--shard` are merged into one run first (their summary recomputed
from all records). Re-render one run's own report with a single RUN_DIR and no --out.

    python -m thinc_bench.report runs/qwen3-4b runs/thinc-4b --out reports/compare.html

The example report kept in the repository (SmolLM2-135M on 2 AIME 2025 problems, Recovery@k 0..3):

    python -m thinc_bench.eval --recovery-k 0,1,2,3 --out runs/smollm2-recovery
    python -m thinc_bench.report runs/smollm2-recovery --out reports/smollm2-recovery.html --no-problem-text
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from thinc_bench.errors import ThincError


@dataclass
class ReportConfig:
    """What to render and where."""

    run_dirs: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Run directories, also accepted as leading positional arguments; several compare. "
            "LABEL=DIR names a column."
        },
    )
    out: str | None = field(
        default=None, metadata={"help": "Output HTML file; default RUN_DIR/report.html for a single run."}
    )
    title: str | None = field(default=None, metadata={"help": "Page title; default from the model names."})
    no_problem_text: bool = field(
        default=False,
        metadata={
            "help": "Leave problem statements out (for reports kept in a repository: no benchmark texts)."
        },
    )
    training_log: list[str] = field(
        default_factory=list,
        metadata={
            "help": "GRPO output folders or trainer_state.json files: reward, clip, held-out accuracy and "
            "ThinC metrics per step as figures."
        },
    )
    paired: list[str] | None = field(
        default=None,
        metadata={
            "help": "Paired differences to show, as B:A run labels (B minus A, paired by problem); default "
            "every later run against the first."
        },
    )
    log_level: str = field(default="warning", metadata={"help": "debug | info | warning | error."})


def main(argv: Sequence[str] | None = None) -> int:
    from transformers import HfArgumentParser

    from thinc_bench.cli import one_line_errors, reject_unknown
    from thinc_bench.report import REPORT_FILE, write_comparison

    parser = HfArgumentParser(
        ReportConfig,  # type: ignore[arg-type]
        prog="python -m thinc_bench.report",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    one_line_errors(parser)
    config, rest = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    reject_unknown(parser, [a for a in rest if a.startswith("-")])
    config.run_dirs = [*config.run_dirs, *rest]
    if not config.run_dirs:
        parser.error("give at least one RUN_DIR")
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if config.out is None and len(config.run_dirs) != 1:
        print("error: --out FILE is required with several run directories", file=sys.stderr)  # noqa: T201
        return 2
    out = Path(config.out) if config.out else Path(config.run_dirs[0]) / REPORT_FILE
    try:
        path = write_comparison(
            config.run_dirs,
            out,
            title=config.title,
            problem_text=not config.no_problem_text,
            training_logs=config.training_log,
            paired=config.paired,
        )
    except (ThincError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
        return 2
    print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
