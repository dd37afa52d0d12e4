"""Beside each accuracy, the report's first table says how many clean trajectories met an execution
error: a model that writes a slip and fixes it scores the same accuracy as one that writes none."""

from __future__ import annotations

import json
import re
from pathlib import Path

from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.report import write_report


def test_glance_table_shows_clean_trajectories_with_an_execution_error(tmp_path: Path) -> None:
    bench = tmp_path / "tiny.jsonl"
    rows = [
        {"id": "slip", "problem": "Compute 6 * 7.", "answer": "42"},
        {"id": "clean", "problem": "Compute 2 + 3.", "answer": "5"},
    ]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = [
        {  # a NameError, then the fix: correct, with an execution error
            "problem_id": "slip",
            "turns": [
                "<think>\nMultiply.\n</think>\n```python\nprint(six * 7)\n```\n```output",
                "```python\n# fix: the number is 6\nprint(6 * 7)\n```\n```output",
                "\\boxed{42}",
            ],
        },
        {
            "problem_id": "clean",
            "turns": ["<think>\nAdd.\n</think>\n```python\nprint(2 + 3)\n```\n```output", "\\boxed{5}"],
        },
    ]
    script = tmp_path / "turns.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in turns))
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(script), "--benchmarks", str(bench), "--samples", "2"]
    assert thinc_eval.main([*args, "--recovery-k", "0", "--out", str(out)]) == 0
    html = write_report(out).read_text()
    glance = html[
        html.index('<table class="glance">') : html.index("</table>", html.index('<table class="glance">'))
    ]
    errs = re.findall(r'<span class="se exec-err"[^>]*> · err (\d+)/(\d+)</span>', glance)
    assert errs == [("2", "4"), ("2", "4")]  # the benchmark, and the average of the one benchmark
    accuracy = re.search(r'data-benchmark="tiny">([\d.]+)', glance)
    assert accuracy is not None and float(accuracy.group(1)) == 100.0
