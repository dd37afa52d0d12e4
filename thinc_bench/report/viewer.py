"""The trajectory viewer's data: one compact, JSON-ready dict per sample, with parsed segments.

`viewer_samples` splits each sample's text into plan / code / output / answer segments with
`trajectory.parse` (the run's own dialect), pairs the i-th code block with the i-th execution status,
marks the first k executions as injected failures, and precomputes the filter flags the page uses
(execution error, ungrounded, non-conforming, gold in text), and carries each problem's chat
prompt as the model saw it when the run directory recorded it (`prompts.jsonl`). The browser renders a sample only when
it is opened, so 2,240 trajectories stay fast. `problem_texts` finds problem statements in local
benchmark files named by a run's config, never the Hub: a missing file only leaves them out.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.report._warnings import flags
from thinc_bench.report.runs import public_path

if TYPE_CHECKING:
    from thinc_bench.report.runs import Run

logger = logging.getLogger(__name__)

GZIP_LEVEL = 6
"""zlib's default: within a few percent of level 9 on trajectory text, at a fraction of the time."""

LOCAL_SUFFIXES = (".jsonl", ".parquet")
"""Benchmark names that are local files (benchmarks.load accepts these as paths)."""


def _local_sources(settings: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(name, data_dir) pairs of a run's benchmarks that resolve to files on this machine."""
    data_dir = settings.get("data_dir")
    out: list[tuple[str, str | None]] = []
    for name in str(settings.get("benchmarks") or "").split(","):
        name = name.strip()
        if name.endswith(LOCAL_SUFFIXES) and Path(name).is_file():
            out.append((name, None))
        elif data_dir and Path(data_dir, f"{name}.jsonl").is_file():
            out.append((name, str(data_dir)))
    return out


def problem_texts(runs: Sequence[Run]) -> dict[tuple[str, str], str]:
    """(benchmark, problem id) -> statement, from the local benchmark files the runs name."""
    from thinc_bench import benchmarks
    from thinc_bench.errors import ThincError

    texts: dict[tuple[str, str], str] = {}
    seen: set[tuple[str, str | None]] = set()
    for run in runs:
        for source in _local_sources(run.config.get("settings", {})):
            if source in seen:
                continue
            seen.add(source)
            try:
                problems = benchmarks.load(source[0], data_dir=source[1], check_golds=False)
            except ThincError as exc:
                logger.warning("problem texts of %s left out of the report: %s", source[0], exc)
                continue
            texts.update({(p.benchmark, p.id): p.problem for p in problems})
    return texts


def _segments(sample: dict[str, Any], dialect: str) -> list[dict[str, Any]]:
    from thinc_bench import trajectory

    statuses = list(sample.get("exec_statuses") or [])
    out: list[dict[str, Any]] = []
    n_code = 0
    for seg in trajectory.parse(sample["text"], dialect).segments:
        if seg.kind == "text" and not seg.raw.strip():
            continue
        item: dict[str, Any] = {"kind": seg.kind, "text": seg.content if seg.kind != "text" else seg.raw}
        if seg.kind == "code" and dialect == "tool_call":  # the call's code, or its JSON when malformed
            call = trajectory.parse_call(seg.content)
            item["text"] = call.code if call.error is None else seg.content
            item["tool"] = call.name
        if seg.kind == "output" and dialect == "tool_call":
            item["tool_response"] = True
        if seg.kind == "code":
            item["closed"] = seg.closed
            item["status"] = statuses[n_code] if n_code < len(statuses) else "not run"
            item["injected"] = n_code < int(sample["k"]) and n_code < len(statuses)
            n_code += 1
        out.append(item)
    return out


def viewer_samples(runs: Sequence[Run], texts: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """Every sample of every run, in run, benchmark, problem, k, sample order; `id` is the index."""
    out: list[dict[str, Any]] = []
    for r, run in enumerate(runs):
        dialect = str(run.config.get("settings", {}).get("dialect") or "markdown")
        prompts = _prompts(run)
        for s in run.samples:
            prompt = prompts.get((s["benchmark"], s["problem_id"]), {})
            item = {
                "id": len(out),
                "run": r,
                "benchmark": s["benchmark"],
                "problem_id": s["problem_id"],
                "sample_idx": s["sample_idx"],
                "k": s["k"],
                "correct": s["correct"],
                "status": s["status"],
                "answer": s["answer"],
                "gold": s["gold"],
                "grounded": s["grounded"],
                "n_tool_calls": s["n_tool_calls"],
                "n_exec_errors": s["n_exec_errors"],
                "gen_tokens": s["gen_tokens"],
                "finish_reason": s["finish_reason"],
                "style": s["style"],
                "failed_checks": [name for name, ok in (s.get("checks") or {}).items() if not ok],
                "posthoc": s.get("posthoc"),
                "nl_literals": s.get("nl_literals") or [],
                "error": None if s["error"] is None else public_path(str(s["error"]), run.dirs[0]),
                "problem": texts.get((s["benchmark"], s["problem_id"])),
                "prompt": prompt.get("text"),
                "prompt_tokens": prompt.get("prompt_tokens"),
                "segments": _segments(s, dialect),
            }
            item["flags"] = flags(s, item["segments"])
            out.append(item)
    return out


def _prompts(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    """(benchmark, problem id) -> the rendered prompt its run directories recorded (prompts.jsonl)."""
    from thinc_bench.eval.store import RunDir

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for folder in run.dirs:
        found.update(RunDir(Path(folder), run.config).prompts())
    return found


def pack(samples: Sequence[dict[str, Any]], labels: Sequence[str]) -> str:
    """The viewer's data as the page embeds it: compact JSON, gzip, base64 (see the viewer script).

    Base64 holds no `<`, `&` or quote, so model text can never end the script element early. A lone
    surrogate (decoded from a model's JSON `"\\ud800"`) has no UTF-8 form: it is written as that JSON
    escape, which reads back as the same string.
    """
    blob = json.dumps({"samples": samples, "runs": list(labels)}, ensure_ascii=False, separators=(",", ":"))
    data = blob.encode("utf-8", "backslashreplace")  # only strings hold surrogates: \uXXXX is JSON there
    return base64.b64encode(gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)).decode()


def unpack(text: str) -> dict[str, Any]:
    """Inverse of `pack` (tests and tools read a report's samples back with it)."""
    data: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(text)))
    return data
