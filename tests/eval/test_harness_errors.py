"""One trajectory never ends a run (issue 37): a trajectory whose processing raises is its own
`harness_error` record, excluded and counted, retried by a rerun; a failure every trajectory meets
stops the run with one line.

The failure is injected into the real scripted backend (a bug in one backend call is the simplest
harness failure to place exactly); the sandbox and the grader are real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from thinc_bench.backends.scripted import ScriptedGenerator
from thinc_bench.errors import HarnessError
from thinc_bench.eval import _failures
from thinc_bench.eval import run as eval_run
from thinc_bench.eval.config import EvalConfig
from thinc_bench.eval.store import RunDir
from thinc_bench.grading import Grader
from thinc_bench.sandbox import Sandbox, SandboxConfig

TURNS = ["<think>\nAdd in code.\n</think>\n```python\nprint(2 + 3)\n```\n```output", "\\boxed{5}"]


@pytest.fixture(scope="module")
def machinery() -> Iterator[tuple[Sandbox, Grader]]:
    with Sandbox(SandboxConfig()) as sandbox, Grader(workers=1) as grader:
        yield sandbox, grader


def _setup(root: Path, problems: list[str]) -> tuple[EvalConfig, RunDir, Any]:
    bench = root / "h.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": p, "problem": "Compute 2 + 3.", "answer": "5"}) + "\n" for p in problems)
    )
    script = root / "turns.jsonl"
    script.write_text("".join(json.dumps({"problem_id": p, "turns": TURNS}) + "\n" for p in problems))
    config = EvalConfig(
        backend="scripted",
        model=str(script),
        benchmarks=str(bench),
        samples=1,
        concurrency=1,
        out=str(root / "run"),
    )
    return config, RunDir.open(root / "run", config.settings()), eval_run.load_problems(config)


def _break(monkeypatch: pytest.MonkeyPatch, broken: str, exc: type[Exception] = RuntimeError) -> None:
    """Make the backend raise `exc` on every request of problem ids starting with `broken`."""
    real = ScriptedGenerator.generate

    async def generate(
        self: ScriptedGenerator, prompt_ids: list[int], params: Any, *, request_id: Any = None
    ) -> Any:
        if str(request_id).startswith(broken):
            raise exc("an unexpected bug")
        return await real(self, prompt_ids, params, request_id=request_id)

    monkeypatch.setattr(ScriptedGenerator, "generate", generate)


def _run(config: EvalConfig, run: RunDir, problems: Any, machinery: tuple[Sandbox, Grader]) -> bool:
    sandbox, grader = machinery
    return asyncio.run(eval_run.run_eval(config, run, problems, sandbox=sandbox, grader=grader))


def test_a_trajectory_that_raises_is_its_own_record_and_a_rerun_retries_it(
    machinery: tuple[Sandbox, Grader], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, run, problems = _setup(tmp_path, ["calm", "boom"])
    _break(monkeypatch, "boom")
    assert _run(config, run, problems, machinery)  # the run completes
    records = {r.problem_id: r for r in run.records()}
    assert records["calm"].status == "correct"
    boom = records["boom"]
    assert boom.status == "harness_error" and not boom.correct
    assert boom.error is not None and boom.error.startswith("generate: RuntimeError: an unexpected bug")
    summary = eval_run.finish(config, run, planned=2)
    block = summary["per_benchmark"]["h"]
    # the model's output met a bug: counted apart and wrong (1 of 2), never out of the denominator
    assert block["harness_errors"] == 1 and block["accuracy"]["value"] == 0.5
    assert summary["overall"]["harness_errors"] == 1 and sum(summary["overall"]["excluded"].values()) == 0

    monkeypatch.undo()  # the bug is fixed: a rerun produces the sample, and only it
    run = RunDir.open(tmp_path / "run", config.settings())
    assert _run(config, run, problems, machinery)
    assert {r.problem_id: r.status for r in run.records()} == {"calm": "correct", "boom": "correct"}
    assert len((tmp_path / "run" / "samples.jsonl").read_text().splitlines()) == 3


def test_an_outage_exception_is_an_infra_error_record(
    machinery: tuple[Sandbox, Grader], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thinc_bench.errors import SandboxUnavailable

    config, run, problems = _setup(tmp_path, ["calm", "boom"])
    _break(monkeypatch, "boom", SandboxUnavailable)
    assert _run(config, run, problems, machinery)
    statuses = {r.problem_id: r.status for r in run.records()}
    assert statuses == {"calm": "correct", "boom": "infra_error"}


def test_the_same_failure_on_every_trajectory_stops_the_run_with_one_line(
    machinery: tuple[Sandbox, Grader], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = _failures.HARNESS_QUORUM + 3
    config, run, problems = _setup(tmp_path, [f"p{i}" for i in range(n)])
    _break(monkeypatch, "p")
    with pytest.raises(
        HarnessError, match=r"first 8 trajectories all failed in the harness at generate: RuntimeError"
    ):
        _run(config, run, problems, machinery)
    records = run.records()  # nothing finished is lost, and the rest was never started
    assert len(records) == _failures.HARNESS_QUORUM and {r.status for r in records} == {"harness_error"}
    assert "\n" not in str(HarnessError("x"))


def test_failures_after_a_success_do_not_stop_the_run(
    machinery: tuple[Sandbox, Grader], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = _failures.HARNESS_QUORUM + 2
    config, run, problems = _setup(tmp_path, ["a-calm", *(f"p{i}" for i in range(n))])
    _break(monkeypatch, "p")
    assert _run(config, run, problems, machinery)  # the first trajectory finished: a bug of some inputs
    statuses = [r.status for r in run.records()]
    assert statuses.count("harness_error") == n and statuses.count("correct") == 1


def test_a_grader_error_is_graded_again_by_a_resumed_run_and_a_timeout_is_not(
    machinery: tuple[Sandbox, Grader], tmp_path: Path
) -> None:
    import dataclasses

    config, run, problems = _setup(tmp_path, ["crashed", "unverifiable"])
    assert _run(config, run, problems, machinery)
    for record in run.records():  # what a crashed worker and an answer nobody can judge left behind
        status = "grader_error" if record.problem_id == "crashed" else "grader_timeout"
        run.append(dataclasses.replace(record, status=status, correct=False))
    run = RunDir.open(tmp_path / "run", config.settings())
    assert _run(config, run, problems, machinery)  # nothing to generate; the crash gets its verdict
    assert {r.problem_id: r.status for r in run.records()} == {
        "crashed": "correct",
        "unverifiable": "grader_timeout",
    }


@pytest.mark.parametrize(
    ("target", "stage"),
    [
        ("thinc_bench.sandbox.Session.arun", "execute"),
        ("thinc_bench.grading.Grader.agrade", "grade"),
        ("thinc_bench.eval.run._measures", "measures"),
    ],
)
def test_the_record_names_the_stage_that_failed(
    machinery: tuple[Sandbox, Grader],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    stage: str,
) -> None:
    config, run, problems = _setup(tmp_path, ["boom"])

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(target, boom)
    assert _run(config, run, problems, machinery)
    (record,) = run.records()
    assert record.status == "harness_error" and record.error == f"{stage}: ZeroDivisionError: a bug"
    assert (record.text != "") == (stage != "execute")  # a finished rollout's text is kept
