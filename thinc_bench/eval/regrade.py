"""Re-grade a run with the current judge: `python -m thinc_bench.eval.regrade RUN [RUN ...]`.

A fix to the judge (a form it could not read, a failure it charged to the wrong side) must reach runs
already made without generating again: generation is the expensive part, and the trajectories are
all in samples.jsonl. Every stored sample with a trajectory is parsed again with the run's dialect
and graded against its stored gold by the current judge; the verdict-dependent fields (status,
answer, correct, grounded, post-hoc verification) are replaced and the record names the judge
(`grading.judge_version()`). A `harness_error` sample whose text was kept is processed again the
same way (a harness fixed since may score it); one the rollout never finished, and every
`infra_error` sample, stays as it is (only a rerun of the eval produces those). samples.jsonl is
rewritten atomically, the first original kept beside it (`samples.before-regrade.jsonl`), then
summary.json, samples.parquet and report.html are written again, an interrupted run's `partial` kept.
Measures that need the model's tokenizer (conformance, plan share, NL ratio) are kept as measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.cli import one_line_errors
from thinc_bench.errors import ConfigError, ThincError
from thinc_bench.eval.store import CONFIG_FILE, SCHEMA_VERSION, RunDir, SampleRecord
from thinc_bench.outcomes import HARNESS_STATUS, INFRA_STATUS

if TYPE_CHECKING:
    from thinc_bench.grading import Grader

logger = logging.getLogger("thinc_bench.eval")

BACKUP_FILE = "samples.before-regrade.jsonl"
"""The samples as they were before the first regrade of the run (later regrades keep it)."""


@dataclass
class Regraded:
    """What a regrade changed: records read, re-judged, and each verdict change as `old -> new`."""

    path: Path
    records: int = 0
    judged: int = 0
    kept: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    judge: str = ""

    def line(self) -> str:
        changed = sum(self.changes.values())
        detail = ", ".join(f"{k}: {n}" for k, n in self.changes.most_common())
        return (
            f"{self.path}: {self.judged} of {self.records} samples graded again by {self.judge}; "
            f"{changed} verdicts changed{f' ({detail})' if detail else ''}; {self.kept} kept as they were "
            "(infrastructure errors and unfinished rollouts: rerun the eval to produce them)"
        )


def regrade_record(record: SampleRecord, dialect: str, grader: Grader, judge: str) -> SampleRecord | None:
    """The record judged again, or None when it has no trajectory to judge (an infrastructure error,
    a rollout that never finished)."""
    from thinc_bench import metrics, trajectory

    if record.status == INFRA_STATUS or (record.status == HARNESS_STATUS and not record.text):
        return None
    parsed = trajectory.parse(record.text, dialect)
    verdict = grader.grade(gold=record.gold, pred=parsed)
    grounded = grader.is_grounded(parsed)
    posthoc = metrics.posthoc(parsed, verdict.answer, lambda a, text: bool(grader.grounded(a, [text])))
    return dataclasses.replace(
        record,
        status=verdict.status,
        answer=verdict.answer,
        correct=verdict.correct,
        grounded=grounded,
        posthoc=posthoc,
        style=trajectory.classify(parsed),
        error=None if record.status == HARNESS_STATUS else record.error,
        judge=judge,
        schema_version=SCHEMA_VERSION,
    )


def regrade_run(path: str | Path, grader: Grader | None = None) -> Regraded:
    """Grade every stored sample of the run at `path` again and rewrite its results (module docstring).

    Raises:
        ConfigError: `path` is not a run directory.
    """
    from contextlib import ExitStack

    from thinc_bench.eval.run import benchmark_order, write_results
    from thinc_bench.grading import Grader, judge_version

    path = Path(path)
    if not (path / CONFIG_FILE).is_file():
        raise ConfigError(
            f"{path} holds no {CONFIG_FILE}: not a run directory; pass the --out of an eval run"
        )
    config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    settings: dict[str, Any] = config.get("settings", {})
    run = RunDir(path, config)
    records = run.records()
    report = Regraded(path, records=len(records), judge=judge_version())
    dialect = str(settings.get("dialect") or "markdown")
    out: list[SampleRecord] = []
    with ExitStack() as owned:
        judge = grader or owned.enter_context(Grader())
        for record in records:
            new = regrade_record(record, dialect, judge, report.judge)
            if new is None:
                report.kept += 1
                out.append(record)
                continue
            report.judged += 1
            if new.status != record.status:
                report.changes[f"{record.status} -> {new.status}"] += 1
            out.append(new)
    run.rewrite(out, backup=BACKUP_FILE)
    previous = run.read_summary() or {}
    names = str(settings.get("benchmarks") or "").split(",")
    order = benchmark_order([n for n in names if n]) or list(dict.fromkeys(r.benchmark for r in out))
    write_results(run, order, samples=int(settings.get("samples") or 1), partial=previous.get("partial"))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m thinc_bench.eval.regrade",
        description="Grade every stored sample of eval runs again with the current judge, and write "
        "their summary.json, samples.parquet and report.html again (no generation).",
        allow_abbrev=False,
    )
    one_line_errors(parser)
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories (an eval run's --out)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for path in args.runs:
        try:
            print(regrade_run(path).line())  # noqa: T201 - the CLI owns the terminal
        except ThincError as exc:
            print(f"error: {exc}", file=sys.stderr)  # noqa: T201
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
