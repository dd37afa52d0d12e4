"""Reader warnings (MathArena-style flags): samples whose verdict a reader should check by eye.

Per sample: the gold answer appears in the model's own text but was not the extracted answer; the
token budget or the tool-call limit cut the trajectory (apart); no answer; the grader timed out or
failed; an infrastructure error kept the sample out of accuracy. Per run: fewer samples generated
than requested; problems with no scored sample at all (missing from every accuracy, from
summary.json). Each warning lists the sample ids the viewer opens. Flags are heuristics for
attention, never a second verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from thinc_bench.report.runs import Run, header

TRUNCATED_REASONS = frozenset({"max_tokens", "max_tool_calls"})
"""Finish reasons that mean a budget cut the trajectory (as in summary.TRUNCATED_REASONS)."""

MIN_GOLD_CHARS = 1
"""Golds this short still count: integer golds are matched as whole numbers, so 5 never hits 15."""

KINDS: dict[str, tuple[str, str]] = {
    "gold_in_text": (
        "Gold answer in the text but not extracted",
        "the model wrote the gold answer but the last \\boxed{} holds something else (or nothing): "
        "check the extraction or the model's final step",
    ),
    "truncated": ("Hit the token budget", "generation stopped at max_tokens before a final answer"),
    "tool_call_limit": (
        "Hit the tool-call limit",
        "the model asked for more executions than max_tool_calls allows; the trajectory was stopped",
    ),
    "no_answer": ("No answer", "no \\boxed{} in the final text; counted as incorrect"),
    "grader_timeout": (
        "Unverifiable answer (grader timeout)",
        "the answer could not be judged in bounded time (too large or deep for math-verify, twice); "
        "counted as wrong, as a careful grader marks an answer nobody can check",
    ),
    "grader_error": (
        "Grader errors excluded from accuracy",
        "the grading machinery failed on the answer and on a control check of the same gold; "
        "infrastructure: excluded from every rate (not a wrong answer), counted, graded again on resume",
    ),
    "harness_error": (
        "Trajectories the harness could not process (counted as wrong)",
        "thinc_bench raised while processing these trajectories' output (the record's error names the "
        "stage and the exception); strange output must never leave the denominator, so they count as "
        "wrong answers; a rerun or `python -m thinc_bench.eval.regrade` processes them again",
    ),
    "infra_error": (
        "Infrastructure errors excluded from accuracy",
        "backend or sandbox outage after retries; these samples are not in any accuracy",
    ),
}
"""Warning kind -> (title, what it means for the numbers)."""

_INTEGER = re.compile(r"^[+-]?[\d,]+$")


def gold_in_text(gold: str, model_text: str) -> bool:
    """Whether `gold` occurs in `model_text` as a whole number (integers) or verbatim (other forms)."""
    core = gold.strip().strip("$").strip()
    if len(core) < MIN_GOLD_CHARS:
        return False
    if _INTEGER.match(core):
        digits = str(int(core.replace(",", "")))
        return (
            re.search(rf"(?<![\d.]){re.escape(digits)}(?![\d]|\.\d)", model_text.replace(",", "")) is not None
        )
    return core in model_text


def flags(sample: dict[str, Any], segments: Sequence[dict[str, Any]]) -> dict[str, bool]:
    """The viewer's filter flags and the per-sample warnings of one sample record."""
    infra = sample["status"] in ("infra_error", "harness_error")  # no trajectory the checks can read
    model_text = "\n".join(s["text"] for s in segments if s["kind"] != "output")
    return {
        "exec_error": sample["n_exec_errors"] > 0,
        "ungrounded": sample["grounded"] is False,
        "nonconforming": not all(sample["checks"].values())
        if sample.get("checks")
        else sample["style"] != "thinc",
        "gold_in_text": not infra and not sample["correct"] and gold_in_text(sample["gold"], model_text),
        "truncated": sample["finish_reason"] == "max_tokens",
        "tool_call_limit": sample["finish_reason"] == "max_tool_calls",
        "no_answer": not infra and sample["answer"] is None,
        "grader_timeout": sample["status"] == "grader_timeout",
        "grader_error": sample["status"] == "grader_error",
        "infra_error": sample["status"] == "infra_error",
        "harness_error": sample["status"] == "harness_error",
    }


def collect(runs: Sequence[Run], samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every warning with a non-zero count, per run: kind, title, meaning, count and sample ids."""
    out: list[dict[str, Any]] = []
    for r, run in enumerate(runs):
        facts = header(run)
        if not facts["complete"]:
            out.append(
                {
                    "run": r,
                    "label": run.label,
                    "kind": "incomplete",
                    "title": "Incomplete run",
                    "meaning": f"{facts['generated_samples']} samples generated of {facts['requested_samples']} "
                    "requested (problems seen x samples x k); resume the run to finish it",
                    "count": abs(facts["requested_samples"] - facts["generated_samples"]),
                    "ids": [],
                }
            )
        missing = [
            (name, pid)
            for name, block in run.summary.get("per_benchmark", {}).items()
            for pid in (block.get("missing") or {}).get("ids", [])
        ]
        if missing:
            lost = {(s["benchmark"], s["problem_id"]) for s in samples if s["run"] == r} & set(missing)
            out.append(
                {
                    "run": r,
                    "label": run.label,
                    "kind": "missing",
                    "title": "Problems missing from accuracy",
                    "meaning": "no sample of these problems was scored (infrastructure or grader failures): "
                    "they are in no accuracy; resume the run to retry them. "
                    + ", ".join(f"{name}/{pid}" for name, pid in missing[:20])
                    + (f" … and {len(missing) - 20} more" if len(missing) > 20 else ""),
                    "count": len(missing),
                    "ids": [
                        s["id"]
                        for s in samples
                        if s["run"] == r and (s["benchmark"], s["problem_id"]) in lost
                    ],
                }
            )
        mine = [s for s in samples if s["run"] == r]
        for kind, (title, meaning) in KINDS.items():
            ids = [s["id"] for s in mine if s["flags"][kind]]
            if ids:
                out.append(
                    {
                        "run": r,
                        "label": run.label,
                        "kind": kind,
                        "title": title,
                        "meaning": meaning,
                        "count": len(ids),
                        "ids": ids,
                    }
                )
    return out
