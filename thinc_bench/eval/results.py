"""A run directory as tables: `load_run(DIR)` for Python, `samples.parquet` for every other tool.

`Run` reads config.json, summary.json and samples.jsonl (the source of truth: the last record of a
sample wins, as in `RunDir.records`) and gives the trajectories as a pandas DataFrame with one row per
(benchmark, problem, sample, k) and typed columns (`SAMPLE_DTYPES`; docs/results.md defines each).
`write_parquet` writes the same table beside samples.jsonl at the end of a run, with the nested
fields (`checks`, `meta`) as JSON text so any Parquet reader takes it. Reading only: it runs nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.errors import ConfigError
from thinc_bench.eval.store import CONFIG_FILE, RunDir, SampleRecord
from thinc_bench.outcomes import EXCLUDED_STATUSES

if TYPE_CHECKING:
    import pandas as pd

PARQUET_FILE = "samples.parquet"

SAMPLE_DTYPES: dict[str, str] = {
    "benchmark": "string",
    "problem_id": "string",
    "sample_idx": "int64",
    "k": "int64",
    "status": "string",
    "correct": "bool",
    "answer": "string",
    "gold": "string",
    "grounded": "boolean",
    "finish_reason": "string",
    "style": "string",
    "n_tool_calls": "int64",
    "n_exec_errors": "int64",
    "n_injected": "Int64",
    "prompt_tokens": "Int64",
    "response_tokens": "Int64",
    "gen_tokens": "int64",
    "total_tokens": "int64",
    "context_exceeded": "bool",
    "output_cut": "bool",
    "plan_share": "float64",
    "posthoc": "boolean",
    "nl_ratio": "float64",
    "generate_s": "float64",
    "execute_s": "float64",
    "grade_s": "float64",
    "error": "string",
    "text": "string",
    "exec_statuses": "object",
    "nl_literals": "object",
    "checks": "object",
    "meta": "object",
    "schema_version": "int64",
}
"""Column -> pandas dtype of `Run.samples`. Nullable dtypes (`boolean`, `Int64`, `string`) where a
record may hold None (not measured, or an infrastructure error); lists and dicts stay Python objects.
The three `timings` of a record are the `*_s` columns."""
TIMINGS = ("generate_s", "execute_s", "grade_s")
NESTED = ("checks", "meta")
"""Dict columns written to Parquet as JSON text (their keys differ between benchmarks and records)."""


def samples_frame(records: Sequence[SampleRecord]) -> pd.DataFrame:
    """One row per record, columns and dtypes as `SAMPLE_DTYPES`."""
    import pandas as pd

    rows = []
    for record in records:
        row = dataclasses.asdict(record)
        timings = row.pop("timings") or {}
        row.update({name: timings.get(name) for name in TIMINGS})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(SAMPLE_DTYPES))
    for name in ("plan_share", "nl_ratio", *TIMINGS):  # None -> NaN before the cast
        frame[name] = pd.to_numeric(frame[name], errors="coerce")
    return frame.astype(SAMPLE_DTYPES)


def write_parquet(path: str | Path, records: Sequence[SampleRecord]) -> Path:
    """Write `samples.parquet` into the run directory (replacing it); return its path."""
    frame = samples_frame(records)
    for name in NESTED:
        frame[name] = frame[name].map(lambda value: json.dumps(value, ensure_ascii=False))
    out = Path(path) / PARQUET_FILE
    tmp = out.with_suffix(".parquet.tmp")
    frame.to_parquet(tmp, index=False)
    tmp.replace(out)
    return out


@dataclass
class Run:
    """A run directory, read: its settings, its summary and its trajectories.

    Attributes:
        path: the run directory.
        config: config.json (`settings`, `config_hash`, `environment`, `resolved`).
        summary: summary.json ({} while a run has not finished once).
    """

    path: Path
    config: dict[str, Any]
    summary: dict[str, Any]
    _records: list[SampleRecord] = field(repr=False, default_factory=list)

    @property
    def samples(self) -> pd.DataFrame:
        """Every trajectory, one row per (benchmark, problem_id, sample_idx, k); see `SAMPLE_DTYPES`."""
        return samples_frame(self._records)

    def problems(self, k: int = 0) -> pd.DataFrame:
        """One row per problem at `k` (0: the clean run): samples, scored (a verdict, not an
        infrastructure or grader failure), correct, accuracy over scored, mean tool calls."""
        frame = self.samples
        frame = frame[frame["k"] == k]
        # summary.json's rule (thinc_bench.outcomes): harness errors and grader timeouts are the model's,
        # scored wrong; only infrastructure (infra_error, grader_error) is left out
        scored = ~frame["status"].isin(list(EXCLUDED_STATUSES))
        frame = frame.assign(scored=scored, hit=frame["correct"] & scored)
        table = frame.groupby(["benchmark", "problem_id"], sort=False).agg(
            gold=("gold", "first"),
            samples=("sample_idx", "size"),
            scored=("scored", "sum"),
            correct=("hit", "sum"),
            tool_calls=("n_tool_calls", "mean"),
        )
        table["accuracy"] = table["correct"] / table["scored"].where(table["scored"] > 0)
        return table.reset_index()


def load_run(path: str | Path) -> Run:
    """Read a run directory written by `python -m thinc_bench.eval` or `thinc_bench.evaluate`.

    Raises:
        ConfigError: `path` holds no config.json (not a run directory, or a run that never started).
    """
    path = Path(path)
    if not (path / CONFIG_FILE).is_file():
        raise ConfigError(f"{path} holds no {CONFIG_FILE}: not a run directory (or a run that never started)")
    config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    run = RunDir(path, config)
    return Run(path, config, run.read_summary() or {}, run.records(repair=False))
