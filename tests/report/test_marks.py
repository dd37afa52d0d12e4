"""What the report marks and draws must not mislead: a ★ only for the one best value among runs
measured alike, no figure for a run with nothing to draw, each run in its own colour, and a sample
without a verdict grey wherever it is shown (issue 54: in reports/nano.html the average's ★ went to a
run measured on 1 of 4 benchmarks, stars sat on ties, an interrupted run drew empty axes)."""

from __future__ import annotations

import json
from pathlib import Path

from report.synthetic import synthetic_run
from thinc_bench.eval.store import RunDir
from thinc_bench.report import build_data, render
from thinc_bench.report.figures import PALETTE
from thinc_bench.report.runs import header, load_run


def _accuracy(data: dict, row: str) -> list[dict]:
    """The accuracy cell of each run in a headline row (a benchmark's name, or "average")."""
    (found,) = [r for r in data["headline"]["rows"] if r["benchmark"] == row]
    return [group[0] for group in found["groups"]]


def _starred(data: dict) -> list[tuple[str, int, str]]:
    """Every ★ of the page's tables: (row, run, metric)."""
    return [
        (row["benchmark"], r, cell["key"])
        for row in data["headline"]["rows"]
        for r, group in enumerate(row["groups"])
        for cell in group
        if cell["best"]
    ]


def test_a_tie_for_the_best_value_marks_nobody(tmp_path: Path) -> None:
    sizes = {"aime2025": 4}
    twin_a = synthetic_run(tmp_path / "a", model="org/twin", sizes=sizes, p_correct=0.7)
    twin_b = synthetic_run(tmp_path / "b", model="org/twin", sizes=sizes, p_correct=0.7)  # the same records
    worse = synthetic_run(tmp_path / "c", model="org/worse", sizes=sizes, p_correct=0.1)
    data = build_data([twin_a, twin_b, worse])
    a, b, c = _accuracy(data, "aime2025")
    assert a["text"] == b["text"] and a["value"] > c["value"]
    assert not (a["best"] or b["best"] or c["best"])
    # every metric: a value two runs share as the best is no one's
    for row in data["headline"]["rows"]:
        for i in range(len(row["groups"][0])):
            cells = [g[i] for g in row["groups"]]
            for cell in cells:
                if cell["best"]:
                    assert sum(other["text"] == cell["text"] for other in cells) == 1


def test_all_zero_is_a_tie_too(tmp_path: Path) -> None:
    sizes = {"aime2025": 3}
    runs = [
        synthetic_run(tmp_path / n, model=f"org/{n}", sizes=sizes, p_correct=0.0, samples=1) for n in "xyz"
    ]
    assert not [s for s in _starred(build_data(runs)) if s[2] == "accuracy"]


def test_the_average_compares_only_runs_measured_on_every_benchmark(tmp_path: Path) -> None:
    """A run measured on one of two benchmarks with a higher average is no rival: ThinC-nano's GRPO
    stage 1 (1 of 4 benchmarks) took the average's ★."""
    both = {"aime2025": 3, "hmmt_feb2025": 3}
    good = synthetic_run(tmp_path / "good", model="org/good", sizes=both, p_correct=0.6, samples=2)
    poor = synthetic_run(tmp_path / "poor", model="org/poor", sizes=both, p_correct=0.1, samples=2)
    part = synthetic_run(
        tmp_path / "part", model="org/part", sizes={"hmmt_feb2025": 3}, p_correct=1.0, samples=2
    )
    data = build_data([good, poor, part])
    g, p, q = _accuracy(data, "average")
    assert q["value"] > g["value"] > p["value"]
    assert (g["best"], p["best"], q["best"]) == (True, False, False)
    alone = build_data([good, part])  # one run measured on both: nothing to compare it with
    assert not [s for s in _starred(alone) if s[0] == "average"]


def test_a_benchmark_row_compares_runs_on_the_same_problems(tmp_path: Path) -> None:
    six, three = {"aime2025": 6}, {"aime2025": 3}
    a = synthetic_run(tmp_path / "a", model="org/a", sizes=six, p_correct=0.6, samples=2)
    b = synthetic_run(tmp_path / "b", model="org/b", sizes=six, p_correct=0.2, samples=2)
    few = synthetic_run(tmp_path / "few", model="org/few", sizes=three, p_correct=1.0, samples=2)
    cells = _accuracy(build_data([a, b, few]), "aime2025")
    assert cells[2]["value"] > cells[0]["value"] > cells[1]["value"]
    assert [c["best"] for c in cells] == [True, False, False]


def test_an_interrupted_run_is_never_starred(tmp_path: Path) -> None:
    sizes = {"aime2025": 4}
    runs = [
        synthetic_run(tmp_path / n, model=f"org/{n}", sizes=sizes, p_correct=p)
        for n, p in (("x", 0.9), ("y", 0.2), ("z", 0.4))
    ]
    summary = json.loads((runs[0] / "summary.json").read_text())
    summary["partial"] = {"saved": 16, "planned": 32, "problems": {"aime2025": 8}}
    (runs[0] / "summary.json").write_text(json.dumps(summary))
    stars = _starred(build_data(runs))
    assert stars and all(run != 0 for _, run, _ in stars)


def _empty_run(path: Path) -> Path:
    """A run stopped before its first trajectory finished: config.json, no record."""
    run = RunDir.open(path, {"model": "org/stopped", "backend": "hf", "benchmarks": "aime2025", "samples": 1})
    run.annotate("resolved", {})
    return path


def test_runs_without_records_draw_no_figure_and_the_page_says_why(tmp_path: Path) -> None:
    data = build_data([_empty_run(tmp_path / "empty")])
    assert [f for f in data["figures"] if f["svg"]] == []
    assert "No figures: no run has a scored clean sample yet" in render(data)


def test_a_figure_leaves_out_a_run_without_records_and_keeps_each_runs_colour(tmp_path: Path) -> None:
    empty = _empty_run(tmp_path / "empty")
    full = synthetic_run(tmp_path / "full", model="org/full", sizes={"aime2025": 3}, samples=2)
    figures = {f["key"]: str(f["svg"]) for f in build_data([empty, full])["figures"] if f["svg"]}
    accuracy = figures["accuracy"].lower()
    assert PALETTE[1].lower() in accuracy  # the second run's swatch colour, as in the tables
    assert PALETTE[0].lower() not in accuracy  # the empty first run draws nothing, not even a legend entry


def test_a_sample_without_a_verdict_is_grey_in_the_problems_list(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path / "r", model="org/m", sizes={"aime2025": 2}, samples=3)
    rows = {(p["problem_id"], p["k"]): p["verdicts"] for p in build_data([run])["problems"]}
    # synthetic problem 0: sample 0 an infrastructure error, sample 1 a grader error (neither has a verdict)
    assert rows[("aime2025-0", 0)][:2] == ["infra", "infra"]


def test_a_run_planned_with_recovery_on_some_benchmarks_is_complete(tmp_path: Path) -> None:
    """eval plans k > 0 only for --recovery-benchmarks: a run that did exactly that is not "incomplete"."""
    settings = {"recovery_benchmarks": "aime2025"}
    path = synthetic_run(
        tmp_path / "r", model="org/m", sizes={"aime2025": 2}, samples=2, ks=(0, 1), settings=settings
    )
    run = load_run(path)
    facts = header(run)
    assert facts["requested_samples"] == facts["generated_samples"] == 2 * 2 * 2 and facts["complete"]
    assert not [w for w in build_data([path])["warnings"] if w["kind"] == "incomplete"]
