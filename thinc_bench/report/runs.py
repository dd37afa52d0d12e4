"""Run directories as the report sees them: one `Run` per directory, shards merged, header facts.

`load_run` reads one run directory (config.json, summary.json, samples.jsonl); `merge_shards` joins
run directories whose settings differ only in `--shard` into one run (their summary is recomputed
from the merged records); `header` states the who/what/how a reader checks before trusting a
run's numbers. The tables, figures, viewer and warnings all take `Run`s from here.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SHARD_KEYS = frozenset({"shard"})
"""Settings in which the shards of one run differ; runs equal in everything else are merged."""


@dataclass
class Run:
    """One column group of the report: a run directory, or several shards merged into one run."""

    label: str
    dirs: list[Path]
    config: dict[str, Any]
    summary: dict[str, Any]
    samples: list[dict[str, Any]]
    shards: list[str]
    mtime_unix: float


def load_run(run_dir: str | Path) -> Run:
    """Read one run directory.

    Raises:
        FileNotFoundError: the directory has no config.json (it is not a run directory).
    """
    from thinc_bench.eval.store import CONFIG_FILE, SAMPLES_FILE, RunDir
    from thinc_bench.eval.summary import SUMMARY_VERSION

    path = Path(run_dir)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{path} has no {CONFIG_FILE}; pass a run directory written by thinc_bench.eval"
        )
    config = json.loads(config_path.read_text(encoding="utf-8"))
    run = RunDir(path, config)
    samples = [dataclasses.asdict(r) for r in run.records()]
    samples.sort(key=lambda s: (s["benchmark"], s["problem_id"], s["k"], s["sample_idx"]))
    summary = run.read_summary() or {}
    if samples and summary.get("summary_version") != SUMMARY_VERSION:
        # A killed run has records but no summary.json yet; an older thinc_bench wrote another version.
        logger.warning(
            "%s: summary.json %s; computing version %d from its %d records",
            path,
            "missing" if not summary else f"is version {summary.get('summary_version')}",
            SUMMARY_VERSION,
            len(samples),
        )
        order = list(summary.get("per_benchmark", {}))
        summary = _summarize(samples, None, order, config.get("settings", {}).get("samples"))
    samples_path = path / SAMPLES_FILE
    mtime = samples_path.stat().st_mtime if samples_path.exists() else config_path.stat().st_mtime
    settings = config.get("settings", {})
    label = _model_label(settings.get("model"))
    return Run(label, [path], config, summary, samples, [str(settings.get("shard", "0/1"))], mtime)


MODEL_FILE_SUFFIXES = (".gguf", ".jsonl", ".safetensors")
"""File suffixes dropped from a model's label; others stay (Hub ids like org/Qwen3-1.7B keep ".7B")."""


def _model_label(model: str | None) -> str:
    name = Path(str(model)).name if model else "smollm2-135m-demo"
    for suffix in MODEL_FILE_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def _identity(run: Run) -> str:
    settings = {k: v for k, v in run.config.get("settings", {}).items() if k not in SHARD_KEYS}
    return json.dumps(settings, sort_keys=True, default=str)


def merge_shards(runs: Sequence[Run], same: Callable[[str, str], bool] | None = None) -> list[Run]:
    """Join runs whose settings differ only in `shard` (each shard once); other runs stay separate columns.

    A merged run's summary is recomputed from all its records with `summary.summarize`; `same` is
    the answer equivalence for maj@k (default `grading.equivalent`, which starts grader workers).
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(_identity(run), []).append(run)
    merged: list[Run] = []
    for group in groups.values():
        if len(group) == 1 or len({run.shards[0] for run in group}) != len(group):
            merged.extend(group)  # repeated runs of one config (same shard) stay separate columns
            continue
        samples = sorted(
            (s for run in group for s in run.samples),
            key=lambda s: (s["benchmark"], s["problem_id"], s["k"], s["sample_idx"]),
        )
        order = list(dict.fromkeys(b for run in group for b in run.summary.get("per_benchmark", {})))
        summary = _summarize(samples, same, order, group[0].config.get("settings", {}).get("samples"))
        logger.info("merged %d shards of %s (%d samples)", len(group), group[0].label, len(samples))
        merged.append(
            Run(
                group[0].label,
                [d for run in group for d in run.dirs],
                group[0].config,
                summary,
                samples,
                sorted(s for run in group for s in run.shards),
                max(run.mtime_unix for run in group),
            )
        )
    _disambiguate(merged)
    return merged


def _summarize(
    samples: Sequence[dict[str, Any]],
    same: Callable[[str, str], bool] | None,
    order: Sequence[str],
    n_samples: int | None = None,
) -> dict[str, Any]:
    """summary.json's content for records that have none (merged shards, killed runs)."""
    from thinc_bench.eval.store import SampleRecord
    from thinc_bench.eval.summary import summarize
    from thinc_bench.grading import equivalent

    records = [SampleRecord.from_dict(s) for s in samples]
    return summarize(
        records,
        same=same or equivalent,
        benchmarks=list(order) or None,
        samples=int(n_samples) if n_samples else None,
    )


def _disambiguate(runs: list[Run]) -> None:
    """Give runs of the same model distinct labels (their directory names)."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.label} ({run.dirs[0].name})"


def utc(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.datetime.fromtimestamp(unix, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/<>-])(?:~|[A-Za-z]:)?/(?:[\w.+@-]+/)*[\w.+@-]+")
"""An absolute path written in a setting or an error message (POSIX, home-relative, or C:/...)."""

MAX_RELATIVE_UP = 2
"""A path at most this many folders above the run (runs/nano/sft beside runs/nano/eval) stays a
relative path; anything farther (a virtual environment, a home folder) becomes its name."""


def public_path(text: str, run_dir: Path) -> str:
    """`text` with every absolute path replaced by one that shows nothing of the machine: relative to
    the run directory when near it, else the file or folder's name (a model's name).

    Example:
        public_path("/home/me/.venv/lib/SmolLM2-135M.gguf", Path("/home/me/runs/a")) == "SmolLM2-135M.gguf"
    """

    def replace(match: re.Match[str]) -> str:
        path = os.path.expanduser(match[0])
        try:
            rel = os.path.relpath(path, Path(run_dir).resolve())
        except ValueError:  # another drive
            return Path(path).name
        parts = Path(rel).parts
        if parts.count("..") <= MAX_RELATIVE_UP and not {"site-packages", ".venv", ".cache"} & set(parts):
            return rel
        return Path(path).name or match[0]

    return _ABSOLUTE_PATH.sub(replace, text)


def _public(value: Any, run_dir: Path) -> Any:
    if isinstance(value, str):
        return public_path(value, run_dir)
    if isinstance(value, dict):
        return {k: _public(v, run_dir) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_public(v, run_dir) for v in value]
    return value


DIFFERENCE_GROUPS = {
    "setting": ("setting",),
    "prompt": ("system_prompt", "few_shot", "response_prefix", "chat_template_kwargs"),
    "trigger": ("exec_on",),
    "dialect": ("dialect",),
    "budget": ("max_tokens", "max_tool_calls"),
    "samples": ("samples",),
    "k set": ("recovery_k",),
}
"""Settings that change what a number measures: runs that differ in one are not compared like for
like, and the page says so in a banner (the model, sampling and versions differ by design)."""


def _flat(facts: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {"model": str(facts["model"]), "backend": str(facts["backend"])}
    for group in ("sampling", "budgets", "prompt", "sandbox", "versions"):
        for key, value in facts[group].items():
            if key in ("protections",):
                continue
            out[key if group in ("budgets", "prompt") else f"{group}.{key}"] = (
                value if isinstance(value, str) else json.dumps(value, default=str)
            )
    out["problems"] = str(facts["n_problems"])
    out["git"] = str((facts.get("git") or {}).get("sha", ""))[:12]
    return out


def differences(facts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What differs between runs' headers: `rows` (setting, one value per run) and `banner`, the
    groups of `DIFFERENCE_GROUPS` that differ, each with its differing settings."""
    flat = [_flat(f) for f in facts]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    rows = [
        {"name": key, "by_run": [f.get(key, "–") for f in flat]}
        for key in keys
        if len({f.get(key) for f in flat}) > 1
    ]
    differing = {row["name"] for row in rows}
    banner = [
        {"group": group, "settings": [k for k in keys if k in differing]}
        for group, keys in DIFFERENCE_GROUPS.items()
        if differing & set(keys)
    ]
    return {"rows": rows, "banner": banner}


def setting_note(facts: Sequence[dict[str, Any]]) -> str | None:
    """The banner saying at which setting baseline presets ran (`eval --setting`), None without one.

    Published: each preset at its own published budget and sampling, so they differ from run to run;
    shared: every preset at one budget and sampling, the comparison a table of models needs. Runs
    that differ in it are named by `differences`' banner instead."""
    settings = {f["prompt"]["setting"] for f in facts if "setting" in f["prompt"]}
    if len(settings) != 1:
        return None
    (setting,) = settings
    if setting == "shared":
        return (
            "Setting: shared. Every baseline preset ran at one shared budget and sampling (the defaults "
            "with a --model), in its own format (tool, prompt, execution model): the numbers compare models."
        )
    return (
        "Setting: published. Each baseline preset ran at its own published budget and sampling "
        "(docs/tool_calls.md), which differ between baselines: the numbers compare each as published, "
        "not at one setting (eval --setting shared runs them at one)."
    )


def header(run: Run) -> dict[str, Any]:
    """Who, what and how of one run: the facts a reader checks before trusting its numbers; no
    absolute path of the machine that ran it (see `public_path`)."""
    facts: dict[str, Any] = _public(_header(run), run.dirs[0])
    return facts


def _header(run: Run) -> dict[str, Any]:
    settings = run.config.get("settings", {})
    env = run.config.get("environment", {})
    resolved = run.config.get("resolved", {})
    ks = sorted({int(k) for k in str(settings.get("recovery_k", "0")).split(",") if k.strip()} | {0})
    problems = sorted({(s["benchmark"], s["problem_id"]) for s in run.samples})
    n_samples = int(settings.get("samples") or 1)
    requested = len(problems) * n_samples * len(ks)
    requested = max(
        requested, int((run.summary.get("partial") or {}).get("planned", 0))
    )  # an interrupted run
    created = env.get("created_unix")
    busy = sum(sum(s.get("timings", {}).values()) for s in run.samples)
    return {
        "label": run.label,
        "run_dirs": [d.name for d in run.dirs],
        "shards": run.shards,
        "model": settings.get("model") or "bundled SmolLM2-135M-Instruct (demo)",
        "backend": settings.get("backend"),
        "generator": resolved.get("generator", {}),
        "sampling": {k: settings.get(k) for k in ("temperature", "top_p", "top_k", "seed")},
        "budgets": {
            k: settings.get(k)
            for k in ("samples", "max_tokens", "max_tool_calls", "limit", "recovery_k", "exec_on")
        },
        "sandbox": {
            "exec_timeout_s": settings.get("exec_timeout_s"),
            "state": settings.get("sandbox_state"),
            **resolved.get("sandbox", {}),
        },
        "prompt": {
            k: settings.get(k)
            for k in (
                "preset",
                "setting",
                "dialect",
                "tool_name",
                "system_prompt",
                "user_template",
                "few_shot",
                "response_prefix",
                "chat_template_kwargs",
            )
            if (k != "tool_name" or settings.get("dialect") == "tool_call")
            and (k not in ("preset", "user_template", "setting") or k in settings)
        }
        | ({"setting": settings.get("setting", "published")} if "preset" in settings else {}),
        "versions": {**env.get("versions", {}), "python": env.get("python")},
        "platform": env.get("platform"),
        "git": env.get("git"),
        "config_hash": run.config.get("config_hash"),
        "date": utc(created),
        "wall_s": (run.mtime_unix - created) if created is not None else None,
        "busy_s": busy,
        "n_problems": len(problems),
        "requested_samples": requested,
        "generated_samples": len(run.samples),
        "complete": requested == len(run.samples),
        "ks": ks,
    }
