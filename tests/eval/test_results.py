"""`thinc_bench.evaluate` and `thinc_bench.load_run` on a scripted run: the run as tables."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import thinc_bench
from thinc_bench.errors import ConfigError
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.eval.results import SAMPLE_DTYPES


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory, scripted_turns):
    """One evaluate() call: 2 problems x 2 samples x k in {0, 1}, into a fresh directory."""
    tmp = tmp_path_factory.mktemp("api")
    bench = tmp / "tiny.jsonl"
    rows = [
        {"id": "tiny-1", "problem": "Compute 2 + 3.", "answer": "5"},
        {"id": "tiny-2", "problem": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}"},
    ]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp / "run"
    run = thinc_bench.evaluate(
        str(scripted_turns), [str(bench)], backend="scripted", samples=2, recovery_k=[1], out=str(out)
    )
    return run, bench, out


def test_evaluate_returns_the_run_it_wrote(scripted_run):
    run, _, out = scripted_run
    assert run.path == out
    assert run.config["settings"]["samples"] == 2 and run.config["settings"]["recovery_k"] == "1"
    assert run.summary["per_benchmark"]["tiny"]["accuracy"]["value"] == 1.0
    assert "partial" not in run.summary
    assert (out / "report.html").is_file() and (out / "samples.parquet").is_file()


def test_samples_is_one_typed_row_per_trajectory(scripted_run):
    run, _, out = scripted_run
    frame = run.samples
    assert len(frame) == 8  # 2 problems x 2 samples x k in {0, 1}
    assert frame.duplicated(["benchmark", "problem_id", "sample_idx", "k"]).sum() == 0
    assert dict(frame.dtypes.astype(str)) == SAMPLE_DTYPES
    assert str(frame["correct"].dtype) == "bool" and str(frame["prompt_tokens"].dtype) == "Int64"
    clean = frame[frame["k"] == 0]
    assert clean["correct"].all()
    assert clean.set_index(["problem_id", "sample_idx"])["n_tool_calls"].to_dict() == {
        ("tiny-1", 0): 1,
        ("tiny-1", 1): 1,
        ("tiny-2", 0): 2,
        ("tiny-2", 1): 2,
    }
    faulted = frame[frame["k"] == 1]
    assert (faulted["n_injected"] == 1).all()  # each saw its one injected failure
    assert (frame["total_tokens"] == frame["prompt_tokens"] + frame["response_tokens"]).all()
    assert (frame["generate_s"] >= 0).all()
    jsonl = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted(frame["text"]) == sorted(r["text"] for r in jsonl)


def test_parquet_holds_the_same_table(scripted_run):
    run, _, out = scripted_run
    table = pd.read_parquet(out / "samples.parquet")
    frame = run.samples
    assert list(table.columns) == list(frame.columns)
    assert table["correct"].tolist() == frame["correct"].tolist()
    assert table["problem_id"].tolist() == frame["problem_id"].tolist()
    assert [json.loads(c) for c in table["checks"]] == frame["checks"].tolist()


def test_problems_is_one_row_per_problem_with_its_accuracy(scripted_run):
    run, _, _ = scripted_run
    table = run.problems()
    assert table[["problem_id", "gold", "samples", "scored", "correct", "accuracy"]].values.tolist() == [
        ["tiny-1", "5", 2, 2, 2, 1.0],
        ["tiny-2", "\\frac{5}{6}", 2, 2, 2, 1.0],
    ]
    assert table["tool_calls"].tolist() == [1.0, 2.0]


def test_evaluate_resumes_like_the_cli(scripted_run, scripted_turns, capsys):
    _, bench, out = scripted_run
    args = ["--backend", "scripted", "--model", str(scripted_turns), "--benchmarks", str(bench)]
    assert thinc_eval.main([*args, "--samples", "2", "--recovery-k", "1", "--out", str(out)]) == 0
    assert "(0 to run, 8 saved)" in capsys.readouterr().err  # the same settings: the same run
    assert len((out / "samples.jsonl").read_text().splitlines()) == 8


def test_load_run_of_a_folder_that_is_not_a_run_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not a run directory"):
        thinc_bench.load_run(tmp_path)


def _readme_api_lines() -> list[str]:
    """docs/api.md's "The run as tables" snippet from `df = run.samples` on (the lines that need only a run)."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    block = page.split("## The run as tables", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    lines = block.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("df = run.samples")) :]


def test_the_readmes_pandas_snippet_gives_summary_accuracy_with_grader_errors(tmp_path):
    from report.synthetic import synthetic_run

    path = synthetic_run(tmp_path / "run", model="org/m", ks=(0, 1), lost="grader_error", p_correct=0.7)
    run = thinc_bench.load_run(path)
    names = {"run": run}
    exec("\n".join(_readme_api_lines()), names)  # noqa: S102 - the README's own lines, run as a user would
    naive = run.samples[run.samples.k == 0].groupby("benchmark")["correct"].mean()
    per_problem = names["problems"].groupby("benchmark").accuracy.mean()
    for benchmark, block in run.summary["per_benchmark"].items():
        expected = block["accuracy"]["value"]
        assert names["accuracy"][benchmark] == pytest.approx(expected), benchmark
        assert per_problem[benchmark] == pytest.approx(expected), benchmark
        assert naive[benchmark] != pytest.approx(expected)  # the grader errors would count as wrong
