"""`python -m thinc_bench.eval.regrade RUN`: a judge fix reaches a run already made, without generating
again. The run here is made by the eval CLI with the scripted backend, then its records are turned into
what an older judge wrote (a plain SymPy form it could not read, a harness failure, no judge named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.eval import regrade
from thinc_bench.grading import judge_version

ROWS = [
    {"id": "sympy", "problem": "Solve x^2 + 2x - 2 = 0 for the positive root.", "answer": "-1+\\sqrt{3}"},
    {"id": "python-gold", "problem": "Compute the fourth root of 2.", "answer": "2**(1/4)"},
    {"id": "plain", "problem": "Compute 2 + 3.", "answer": "5"},
    {"id": "wrong", "problem": "Compute 6 * 7.", "answer": "42"},
]
TURNS = {
    "sympy": "```python\nimport sympy as sp\nprint(sp.sqrt(3) - 1)\n```\n```output",
    "python-gold": "```python\nimport sympy as sp\nprint(sp.root(2, 4))\n```\n```output",
    "plain": "```python\nprint(2 + 3)\n```\n```output",
    "wrong": "```python\nprint(6 * 8)\n```\n```output",
}
ANSWERS = {"sympy": "-1 + sqrt(3)", "python-gold": "2**(1/4)", "plain": "5", "wrong": "48"}


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    bench = tmp_path / "forms.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    script = tmp_path / "turns.jsonl"
    script.write_text(
        "".join(
            json.dumps(
                {
                    "problem_id": pid,
                    "turns": ["<think>\nCompute.\n</think>\n" + t, f"\\boxed{{{ANSWERS[pid]}}}"],
                }
            )
            + "\n"
            for pid, t in TURNS.items()
        )
    )
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(script), "--benchmarks", str(bench), "--samples", "1"]
    assert thinc_eval.main([*args, "--recovery-k", "0", "--out", str(out)]) == 0
    # What the judge before version 2 wrote: it read neither plain SymPy form, and an exception while
    # grading "plain" was a harness error; no record named its judge.
    lines = []
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        record.update({"judge": None, "schema_version": 2})
        record.pop("judge")
        if record["problem_id"] == "sympy":
            record.update(status="unparseable_answer", correct=False)
        if record["problem_id"] == "python-gold":
            record.update(status="gold_error", correct=False)
        if record["problem_id"] == "plain":
            record.update(status="harness_error", correct=False, answer=None, error="grade: ValueError: boom")
        lines.append(json.dumps(record))
    (out / "samples.jsonl").write_text("\n".join(lines) + "\n")
    (out / "summary.json").unlink()
    return out


def test_regrade_gives_the_current_judges_verdicts_and_rewrites_the_summary(old_run: Path, capsys) -> None:
    before = (old_run / "samples.jsonl").read_text()
    assert regrade.main([str(old_run)]) == 0
    printed = capsys.readouterr().out
    assert "4 of 4 samples graded again" in printed and "3 verdicts changed" in printed
    records = {
        r["problem_id"]: r for r in map(json.loads, (old_run / "samples.jsonl").read_text().splitlines())
    }
    assert {p: r["status"] for p, r in records.items()} == {
        "sympy": "correct",
        "python-gold": "correct",
        "plain": "correct",
        "wrong": "incorrect",
    }
    assert all(r["judge"] == judge_version() and r["schema_version"] == 3 for r in records.values())
    assert records["plain"]["error"] is None and records["sympy"]["grounded"] is True
    summary = json.loads((old_run / "summary.json").read_text())
    assert summary["per_benchmark"]["forms"]["accuracy"]["value"] == 0.75
    assert summary["judge"] == [judge_version()]
    assert (old_run / "report.html").exists() and (old_run / "samples.parquet").exists()
    assert (old_run / regrade.BACKUP_FILE).read_text() == before  # the original, kept


def test_a_second_regrade_changes_nothing_and_keeps_the_first_original(old_run: Path) -> None:
    original = (old_run / "samples.jsonl").read_text()
    regrade.regrade_run(old_run)
    once = (old_run / "samples.jsonl").read_text()
    second = regrade.regrade_run(old_run)
    assert sum(second.changes.values()) == 0 and (old_run / "samples.jsonl").read_text() == once
    assert (old_run / regrade.BACKUP_FILE).read_text() == original


def test_samples_without_a_trajectory_are_kept_as_they_are(old_run: Path) -> None:
    lines = (old_run / "samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(status="infra_error", text="", answer=None, correct=False)
    (old_run / "samples.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = regrade.regrade_run(old_run)
    assert (result.kept, result.judged) == (1, 3)
    kept = json.loads((old_run / "samples.jsonl").read_text().splitlines()[0])
    assert kept["status"] == "infra_error" and kept.get("judge") is None


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path, capsys) -> None:
    assert regrade.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a run directory" in err and str(tmp_path) in err
