"""Run directory: the durable record of one evaluation run (docs/DESIGN.md, "Run directory").

`config.json` holds every setting plus the environment (versions, git SHA, host) and the hash of the
settings; `samples.jsonl` gets one `SampleRecord` per (benchmark, problem, sample, k), appended and
flushed as each finishes, so a killed run loses at most the samples in flight; `summary.json` sits
apart so listing and comparing runs never loads every trajectory. Reopening a directory with the same
settings resumes it; different settings are refused rather than mixed. This module does not compute
metrics or render reports.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

from thinc_bench.errors import ConfigError
from thinc_bench.outcomes import HARNESS_STATUS, INFRA_STATUS, RETRIED_STATUSES

__all__ = ["HARNESS_STATUS", "INFRA_STATUS", "RETRIED_STATUSES", "RunDir", "SampleKey", "SampleRecord"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 3
"""Bump on any rename, removal or reordering of a SampleRecord field (STYLE rule 18).

3: added `judge` (the judge that gave the verdict: `grading.JUDGE_VERSION`); `harness_error` records
are the model's (wrong, counted apart: thinc_bench.outcomes).
2: added prompt_tokens, response_tokens, n_injected, checks, plan_share, posthoc, nl_literals, nl_ratio, meta."""

READABLE_SCHEMA_VERSIONS = (1, 2, 3)
"""Versions `SampleRecord.from_dict` reads: an older line gets the new fields' "not measured"
defaults (None, empty), and a version-1 line its injected-failure count from its k and executions."""

TRACKED_PACKAGES = ("thinc_bench", "torch", "transformers", "vllm", "trl", "math-verify", "datasets")
"""Versions recorded in config.json: the packages whose behaviour changes results."""


CONFIG_FILE = "config.json"
SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
PROMPTS_FILE = "prompts.jsonl"
"""Each problem's chat prompt exactly as the model was given it, one line per problem, written once."""


class SampleKey(NamedTuple):
    """What makes a sample unique within a run; resuming skips keys already recorded."""

    benchmark: str
    problem_id: str
    sample_idx: int
    k: int


@dataclass
class SampleRecord:
    """One finished trajectory with its verdict: a line of samples.jsonl (versioned contract).

    `status` is the grade status, or `infra_error` for samples infrastructure kept from being
    produced, or `harness_error` for samples whose processing raised (then `error` is
    "STAGE: ExceptionType: message"). Who each failure belongs to is `thinc_bench.outcomes`:
    `infra_error` and `grader_error` are kept out of every rate and counted; `harness_error` and
    `grader_timeout` are the model's, scored wrong and counted apart. `judge` names the judge
    that gave the verdict (`grading.JUDGE_VERSION`; None before schema 3). Token counts: `response_tokens` is the completion, model and
    interpreter tokens (the response length), `gen_tokens` its model-written part,
    `prompt_tokens` the chat prompt, `total_tokens` prompt plus completion. Per-trajectory measures
    (None or empty when not measured, e.g. infrastructure errors and version-1 records): `checks`,
    the ThinC conformance checks by name; `plan_share` (of all completion tokens); `posthoc`, `nl_literals` and `nl_ratio`,
    the three TIR failure modes of `metrics.failure_modes`. `meta` carries what the problem's
    loader recorded (the GPQA option order and its seed).
    """

    benchmark: str
    problem_id: str
    sample_idx: int
    k: int
    text: str
    answer: str | None
    gold: str
    correct: bool
    status: str
    n_tool_calls: int
    n_exec_errors: int
    gen_tokens: int
    total_tokens: int
    grounded: bool | None
    finish_reason: str
    timings: dict[str, float] = field(default_factory=dict)
    exec_statuses: list[str] = field(default_factory=list)
    style: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    """Tokens of the rendered prompt (None in records written before the field existed)."""
    response_tokens: int | None = None
    """The response length: model plus interpreter tokens after the prompt, what --max-tokens bounds."""
    n_injected: int | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    plan_share: float | None = None
    posthoc: bool | None = None
    nl_literals: list[str] | None = None
    nl_ratio: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    context_exceeded: bool = False
    """The model's context, not the budget, ended the trajectory (finish_reason max_tokens)."""
    output_cut: bool = False
    """The last interpreter output was cut to fit the budget (finish_reason max_tokens)."""
    judge: str | None = None
    """The judge that gave the verdict (`grading.JUDGE_VERSION`); None in records before schema 3."""
    schema_version: int = SCHEMA_VERSION

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.benchmark, self.problem_id, self.sample_idx, self.k)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SampleRecord:
        """Rebuild a record of any readable schema version (see `READABLE_SCHEMA_VERSIONS`).

        Raises:
            ConfigError: the line's schema_version is not one this thinc_bench reads.
        """
        version = data.get("schema_version")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise ConfigError(
                f"sample record schema_version {version!r} is not one this thinc_bench reads "
                f"({', '.join(map(str, READABLE_SCHEMA_VERSIONS))}); evaluate into a new --out "
                "or use the thinc_bench version that wrote it"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        record = cls(**{k: v for k, v in data.items() if k in names})
        if version == 1 and record.n_injected is None and record.status != INFRA_STATUS:
            # The injector fails the first k executions, so a version-1 sample saw min(k, executions).
            record.n_injected = min(record.k, record.n_tool_calls)
        return record


def _record_line(record: SampleRecord) -> str:
    line = json.dumps(dataclasses.asdict(record), ensure_ascii=False) + "\n"
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (from model JSON): \uXXXX escapes read back the same
        line = json.dumps(dataclasses.asdict(record), ensure_ascii=True) + "\n"
    return line


def config_hash(settings: Mapping[str, Any]) -> str:
    """Stable short hash of the settings (key order does not matter)."""
    blob = json.dumps(settings, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def environment() -> dict[str, Any]:
    """What produced a run beyond its settings: package versions, git state, host."""
    versions: dict[str, str | None] = {}
    for package in TRACKED_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "versions": versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git": _git_state(),
        "created_unix": time.time(),
    }


def _git_state() -> dict[str, Any] | None:
    """The checkout's commit and whether it had uncommitted changes; None outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"sha": sha, "dirty": bool(dirty)}


class RunDir:
    """An open run directory; create it with `RunDir.open`."""

    def __init__(
        self, path: Path, config: dict[str, Any], *, written: bool = True, replaces: bool = True
    ) -> None:
        self.path = path
        self.config = config
        self._written = written
        self._replaces = replaces
        self._prompted: set[tuple[str, str]] | None = None

    @classmethod
    def open(cls, path: str | Path, settings: Mapping[str, Any]) -> RunDir:
        """The run directory for `settings`: the run there to resume, or a new one.

        Nothing is written here: config.json (and the folder) appear with the first thing recorded
        (`annotate`, `append`, `record_prompt`, `write_summary`), so a run that fails before it can
        start (a mistyped model, a budget the context cannot hold) leaves `path` as it was. A
        directory holding no sample yet takes new settings: its config.json and prompts are replaced.

        Raises:
            ConfigError: the directory holds samples of a run with other settings, or is not a run
                directory.
        """
        path = Path(path)
        settings = json.loads(json.dumps(settings, default=str))
        digest = config_hash(settings)
        config_path = path / CONFIG_FILE
        fresh = {"settings": settings, "config_hash": digest, "environment": environment()}
        if config_path.exists():
            existing = json.loads(config_path.read_text(encoding="utf-8"))
            if existing.get("config_hash") == digest:
                logger.info("resuming run in %s (config %s)", path, digest)
                return cls(path, existing)
            if not cls(path, existing).records():
                logger.info("%s holds no sample yet: starting it again with these settings", path)
                return cls(path, fresh, written=False)
            old = existing.get("settings", {})
            changed = sorted(k for k in set(settings) | set(old) if settings.get(k) != old.get(k))
            if changed == ["limit"] and _raises_limit(old.get("limit"), settings.get("limit")):
                logger.info(
                    "%s: --limit raised from %s to %s; extending the run",
                    path,
                    old["limit"],
                    settings["limit"],
                )
                extended = existing | {"settings": settings, "config_hash": digest}
                return cls(path, extended, written=False, replaces=False)
            raise ConfigError(
                f"{path} holds a run with other settings (differ: {', '.join(changed) or 'hash'}); "
                "pass a new --out, or the same settings to resume"
            )
        if path.exists() and any(path.iterdir()):
            raise ConfigError(f"{path} exists, is not empty and has no {CONFIG_FILE}; pass a new --out")
        return cls(path, fresh, written=False)

    def _materialize(self) -> None:
        """Create the folder and write config.json on the first write (see `open`); a directory that
        held another run's config without samples loses that config, its prompts and its report."""
        if self._written:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        for stale in (PROMPTS_FILE, SAMPLES_FILE, SUMMARY_FILE, "report.html") if self._replaces else ():
            (self.path / stale).unlink(missing_ok=True)
        _atomic_write_json(self.path / CONFIG_FILE, self.config)
        self._written = True
        self._prompted = None

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES_FILE

    def records(self, *, repair: bool = True) -> list[SampleRecord]:
        """One complete record per sample key, the last written winning, in first-seen order.

        A torn last line (killed mid-write) is cut off the file, unless `repair` is False (a reader
        beside a running eval, whose last line may be half written). A key appears twice only when a
        resumed run retried a sample that had failed on infrastructure.
        """
        latest: dict[SampleKey, SampleRecord] = {}
        for record in self._iter_records(repair=repair):
            latest[record.key] = record
        return list(latest.values())

    def done_keys(self) -> set[SampleKey]:
        """Keys a resumed run skips: every recorded sample except infrastructure and harness failures,
        which it retries (`outcomes.RETRIED_STATUSES`: after an outage or a fixed harness bug the
        rerun fills them; until then a harness failure counts as the model's wrong answer)."""
        return {record.key for record in self.records() if record.status not in RETRIED_STATUSES}

    def rewrite(self, records: list[SampleRecord], *, backup: str) -> Path | None:
        """Replace samples.jsonl with `records` atomically (a crash leaves the old file or the new one,
        never half of either); the old file is kept as `backup` (first one only: the original survives
        repeated rewrites). Returns the backup's path, or None when there was no file."""
        kept = None
        if self.samples_path.exists():
            kept = self.path / backup
            if not kept.exists():
                os.link(self.samples_path, kept)
        tmp = self.samples_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(_record_line(record))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.samples_path)
        return kept

    def append(self, record: SampleRecord) -> None:
        """Append one record and flush it to disk before returning (a crash loses nothing finished)."""
        self._materialize()
        line = _record_line(record)
        with self.samples_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def prompts(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(benchmark, problem id) -> its line of prompts.jsonl (`text`, `prompt_ids`, `prompt_tokens`,
        `opened_plan`: whether the prompt ended by opening the plan, as Qwen3-Thinking-2507's does)."""
        path = self.path / PROMPTS_FILE
        if not path.exists():
            return {}
        rows = [
            json.loads(line)
            for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if line.endswith("\n")
        ]
        return {(row["benchmark"], row["problem_id"]): row for row in rows}

    def record_prompt(
        self, benchmark: str, problem_id: str, ids: list[int], text: str, opened_plan: bool
    ) -> None:
        """Write a problem's rendered prompt to prompts.jsonl, once per problem and run directory."""
        self._materialize()
        if self._prompted is None:
            self._prompted = set(self.prompts())
        if (benchmark, problem_id) in self._prompted:
            return
        self._prompted.add((benchmark, problem_id))
        row = {
            "benchmark": benchmark,
            "problem_id": problem_id,
            "prompt_tokens": len(ids),
            "opened_plan": opened_plan,
            "text": text,
            "prompt_ids": ids,
        }
        with (self.path / PROMPTS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")

    def annotate(self, key: str, value: Any) -> None:
        """Record what was resolved at run time (backend, sandbox) in config.json; not hashed."""
        self._materialize()
        self.config[key] = json.loads(json.dumps(value, default=str))
        _atomic_write_json(self.path / CONFIG_FILE, self.config)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        self._materialize()
        _atomic_write_json(self.path / SUMMARY_FILE, summary)

    def read_summary(self) -> dict[str, Any] | None:
        path = self.path / SUMMARY_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def _iter_records(self, *, repair: bool) -> Iterator[SampleRecord]:
        if not self.samples_path.exists():
            return
        raw = self.samples_path.read_bytes()
        good_end = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            yield SampleRecord.from_dict(json.loads(line))
            good_end += len(line)
        if good_end < len(raw) and repair:
            logger.warning(
                "dropping a torn last line of %s (the run was killed mid-write)", self.samples_path
            )
            with self.samples_path.open("r+b") as handle:
                handle.truncate(good_end)


def check_writable(path: str | Path, flag: str = "--out") -> None:
    """Refuse, before anything is loaded, an output folder the run could not write: a file, a path
    under a file, or a folder (or its nearest existing parent) this user cannot write in. Nothing is
    created here; the run writes its folder with its first record.

    Raises:
        ConfigError: one line naming the path and the fix.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"{flag} {path} is a file, not a folder; pass a folder path (new, or a run to resume)"
        )
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing != path and not existing.is_dir():
        raise ConfigError(
            f"{flag} {path}: {existing} is a file, so no folder can be made under it; pass another path"
        )
    target = path if path.exists() else existing
    if not os.access(target, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{flag} {path}: cannot write in {target} (read-only, or not yours); pass {flag} in a folder "
            "you can write, e.g. runs/NAME"
        )


def _raises_limit(old: Any, new: Any) -> bool:
    """Whether `new` keeps every problem of `old` (`--limit` N takes the first N): None is all."""
    return old is not None and (new is None or int(new) > int(old))


def _atomic_write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader never sees half a JSON file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
