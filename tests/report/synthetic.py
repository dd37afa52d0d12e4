"""Synthetic run directories for report tests: real RunDir files and summary.json, no model.

`synthetic_run` writes config.json through `store.RunDir.open`, sample records shaped like real
ThinC trajectories (plan, code, output, boxed answer) with chosen accuracy, and a summary.json from
`summary.summarize`, so reports see exactly what an eval run leaves behind. A few samples per run
are made to trip each reader warning (no answer, truncated, execution error, non-conforming).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from thinc_bench import grading, metrics, trajectory
from thinc_bench.eval.store import RunDir, SampleRecord
from thinc_bench.eval.summary import summarize

PAPER_SIZES = {"aime2024": 30, "aime2025": 30, "aime2026": 30, "hmmt_feb2025": 30, "beyondaime": 20}
"""5 benchmarks x 16 samples = 2,240 trajectories: the issue's scale target for the viewer."""


def _text(rng: random.Random, answer: int, kind: str, k: int) -> str:
    plan = "<think>\nCount the cases with a loop and print the total.\n</think>\n"
    blocks = []
    for i in range(rng.randint(1, 4)):
        code = f"# step {i}\nfrom math import comb\ntotal = sum(range({answer}))\nprint({answer})\n"
        output = "Traceback (most recent call last):\nRuntimeError: injected\n" if i < k else f"{answer}\n"
        if kind == "exec_error" and i == 0:
            output = "Traceback (most recent call last):\nNameError: name 'x' is not defined\n"
        blocks.append(f"```python\n{code}```\n```output\n{output}```\n")
    if kind == "interleaved":
        blocks.insert(1, "Now I check the result in words.\n")
    if kind == "posthoc":  # the answer in prose first, a number of it typed into the code
        blocks.insert(
            0, f"By hand the total is {answer}.\n```python\nprint({answer})\n```\n```output\n{answer}\n```\n"
        )
    tail = {"no_answer": f"So the total is {answer}.", "truncated": "```python\nfor i in range("}.get(
        kind, f"\\boxed{{{answer}}}"
    )
    return plan + "".join(blocks) + tail


def _lose(record: SampleRecord, status: str) -> SampleRecord:
    if status == "infra_error":
        record.status, record.correct, record.answer, record.grounded = "infra_error", False, None, None
        record.finish_reason, record.error = "infra_error", "BackendUnavailable: HTTP 503 after 3 retries"
    else:
        record.status, record.correct = status, False
    return record


def _special(record: SampleRecord, problem: int, sample: int, k: int, lost: str | None) -> SampleRecord:
    """Problem 0's first two clean samples: an infrastructure error and a grader error; with `lost`,
    the last clean sample of every problem has that status too (so no problem has n usable samples)."""
    if lost is not None and k == 0 and sample == 2:
        return _lose(record, lost)
    if (problem, k) != (0, 0) or sample > 1:
        return record
    if sample == 0:
        record.status, record.correct, record.answer, record.grounded = "infra_error", False, None, None
        record.finish_reason, record.error = "infra_error", "BackendUnavailable: HTTP 503 after 3 retries"
    else:
        record.status, record.correct = "grader_error", False
    return record


def _measure(record: SampleRecord, problem: str) -> SampleRecord:
    """The per-trajectory measures eval records, from the real functions."""
    if record.status == "infra_error":
        return record
    parsed = trajectory.parse(record.text)
    conformance = trajectory.check_conformance(parsed)
    record.checks = {c.name: c.passed for c in conformance.checks}
    record.plan_share = conformance.plan_share
    record.posthoc = metrics.posthoc(parsed, record.answer, lambda a, t: bool(grading.grounded(a, [t])))
    record.nl_literals = metrics.nl_literals(parsed, problem)
    record.nl_ratio = metrics.nl_ratio(parsed)
    return record


def synthetic_run(
    path: Path,
    *,
    model: str,
    sizes: Mapping[str, int] | None = None,
    samples: int = 4,
    ks: Sequence[int] = (0,),
    p_correct: float = 0.5,
    seed: int = 0,
    shard: str = "0/1",
    lost: str | None = None,
    settings: Mapping[str, object] | None = None,
    ids: Callable[[str, int], str] | None = None,
    verdict: Callable[[str, int], bool] | None = None,
) -> Path:
    """Write a complete run directory; returns its path. Golds are 3-digit integers.

    `lost`: a status without verdict (`grader_error`, `infra_error`) given to clean sample 2 of
    every problem as well; `settings`: config settings to override (prompt, budgets, ...); `ids`:
    (benchmark, index) -> problem id (default `benchmark-index`); `verdict`: (problem id, sample) ->
    whether a clean sample is right, instead of the `p_correct` draw.
    """
    sizes = dict(sizes or {"aime2025": 6, "hmmt_feb2025": 4})
    config = {
        "model": model,
        "backend": "scripted",
        "benchmarks": ",".join(sizes),
        "samples": samples,
        "max_tokens": 4096,
        "max_tool_calls": 8,
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": None,
        "seed": seed,
        "limit": None,
        "recovery_k": ",".join(map(str, ks)),
        "dialect": "markdown",
        "system_prompt": "thinc",
        "shard": shard,
        "exec_timeout_s": 10.0,
        "sandbox_state": "persistent",
        **(settings or {}),
    }
    run = RunDir.open(path, config)
    index, count = (int(x) for x in shard.split("/"))
    rng = random.Random(f"{model}/{seed}")
    records = []
    for benchmark, n_problems in sizes.items():
        for p in range(n_problems)[index::count]:
            gold = 100 + p
            for k in ks:
                for s in range(samples):
                    kind = rng.choice(
                        ["ok"] * 12 + ["exec_error", "interleaved", "no_answer", "truncated", "posthoc"]
                    )
                    pid = ids(benchmark, p) if ids else f"{benchmark}-{p}"
                    if verdict is not None and k == 0:
                        kind, correct = "ok", verdict(pid, s)
                    else:
                        correct = kind not in ("no_answer", "truncated") and rng.random() < p_correct
                    answer = gold if correct else gold + 1
                    text = _text(
                        rng, gold if kind == "no_answer" else answer, kind, k
                    )  # gold written, not boxed
                    n_calls = text.count("```python") - (kind == "truncated")
                    record = SampleRecord(
                        benchmark=benchmark,
                        problem_id=pid,
                        sample_idx=s,
                        k=k,
                        text=text,
                        answer=None if kind in ("no_answer", "truncated") else str(answer),
                        gold=str(gold),
                        correct=correct,
                        status=(
                            "correct"
                            if correct
                            else "no_answer"
                            if kind in ("no_answer", "truncated")
                            else "incorrect"
                        ),
                        n_tool_calls=n_calls,
                        n_exec_errors=min(n_calls, k + (kind == "exec_error")),
                        gen_tokens=len(text) // 4,
                        total_tokens=len(text) // 3 + 200,
                        prompt_tokens=200,
                        response_tokens=len(text) // 3,
                        n_injected=min(n_calls, k),
                        grounded=None if kind in ("no_answer", "truncated") else True,
                        finish_reason="max_tokens" if kind == "truncated" else "answer",
                        exec_statuses=(
                            ["error"] * max(min(n_calls, k), kind == "exec_error")
                            + ["ok"] * max(0, n_calls - max(k, kind == "exec_error"))
                        ),
                        style="interleaved" if kind == "interleaved" else "thinc",
                    )
                    records.append(_measure(_special(record, p, s, k, lost), f"Problem {p} of {benchmark}."))
    for record in records:
        run.append(record)
    summary = summarize(records, same=lambda a, b: a == b, benchmarks=list(sizes), samples=samples)
    run.write_summary(summary)
    return path
