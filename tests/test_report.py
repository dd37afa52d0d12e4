"""The first report renders from a run directory alone and shows summary.json's numbers."""

from __future__ import annotations

import json
from pathlib import Path

from thinc_bench import eval as thinc_eval
from thinc_bench.report import build_data, write_report


def test_report_from_a_scripted_run_shows_the_summary_numbers(
    two_problem_benchmark, scripted_turns, tmp_path
):
    out = tmp_path / "run"
    args = [
        "--backend",
        "scripted",
        "--model",
        str(scripted_turns),
        "--benchmarks",
        str(two_problem_benchmark),
        "--samples",
        "2",
        "--out",
        str(out),
    ]
    assert thinc_eval.main(args) == 0
    (out / "report.html").unlink()
    html = write_report(out).read_text()
    summary = json.loads((out / "summary.json").read_text())
    accuracy = summary["per_benchmark"]["tiny"]["accuracy"]["value"]
    assert f"<td>{accuracy:.3f}</td>" in html
    assert html.count("<details>") == 4
    assert "http://" not in html and "https://" not in html  # self-contained: no network requests
    assert build_data(out)["samples"][0]["problem_id"] == "tiny-1"


def test_model_text_is_escaped(two_problem_benchmark, tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        '{"problem_id": "tiny-1", "turns": ["<script>alert(1)</script> \\\\boxed{5}"]}\n'
        '{"problem_id": "tiny-2", "turns": ["\\\\boxed{1}"]}\n'
    )
    out = tmp_path / "run"
    thinc_eval.main(
        [
            "--backend",
            "scripted",
            "--model",
            str(turns),
            "--benchmarks",
            str(two_problem_benchmark),
            "--samples",
            "1",
            "--out",
            str(out),
        ]
    )
    html = (out / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
