"""Numbers that have no value: every table and figure shows `–` with its reason, and nothing crashes.

A real eval writes summary.json, then report.html; a benchmark whose every problem lost one sample
(a grader timeout or an infrastructure error) has no pass@n, and with infrastructure errors no
maj@n either. The run directories here are written through `store.RunDir` and `summary.summarize`
exactly as eval writes them (see `synthetic`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from report.pages import parse_page
from report.synthetic import synthetic_run
from thinc_bench.report import __main__ as report_cli
from thinc_bench.report import build_data, write_comparison, write_report


def _cell_titles(html: str, benchmark: str, metric: str) -> list[str]:
    """The tooltip of every `–` in the headline cells of one benchmark row and metric."""
    pattern = (
        rf'<tr[^>]*data-benchmark="{benchmark}"[^>]*>(?:(?!</tr>).)*?'
        rf'data-metric="{metric}" data-value="">\s*<span class="na" title="([^"]*)">–</span>'
    )
    return re.findall(pattern, html, re.S)


@pytest.mark.parametrize("lost", ["grader_error", "infra_error"])
def test_a_run_where_no_problem_has_n_usable_samples_reports_pass_and_maj_as_missing(
    tmp_path: Path, lost: str
) -> None:
    run = synthetic_run(tmp_path / "run", model="org/m", lost=lost, samples=4)
    summary = json.loads((run / "summary.json").read_text())
    block = summary["per_benchmark"]["aime2025"]
    assert block["pass_at_k"]["4"]["value"] is None  # every problem has at most 3 usable samples
    assert block["pass_at_k"]["4"]["n_problems_short"] == 6
    if lost == "infra_error":  # a lost trajectory does not vote either
        assert block["maj_at_k"]["4"]["value"] is None

    html = write_report(run).read_text()  # what eval.run.finish does after summary.json

    cells = parse_page(html).cells
    assert cells[("aime2025", 0, "pass_at_k")] == "" and cells[("average", 0, "pass_at_k")] == ""
    (why,) = _cell_titles(html, "aime2025", "pass_at_k")
    assert "no problem has 4 usable samples (6 problems have fewer" in why
    assert "scored benchmarks have no pass@" in _cell_titles(html, "average", "pass_at_k")[0]
    if lost == "infra_error":
        assert cells[("aime2025", 0, "maj_at_k")] == ""
        assert "no problem has 4 usable samples" in _cell_titles(html, "aime2025", "maj_at_k")[0]
    assert float(cells[("aime2025", 0, "accuracy")]) == pytest.approx(block["accuracy"]["value"])
    assert float(cells[("aime2025", 0, "pass_at_k")] or 0) == 0  # the cell has no number
    assert parse_page(html).svgs == len(parse_page(html).figures) == 7  # no Recovery@k: k = 0 only


def test_the_report_cli_renders_such_a_run(tmp_path: Path, capsys) -> None:
    run = synthetic_run(tmp_path / "run", model="org/m", lost="infra_error", samples=4)
    (run / "report.html").unlink(missing_ok=True)
    assert report_cli.main([str(run)]) == 0
    assert (run / "report.html").is_file() and "report:" in capsys.readouterr().out


def test_a_benchmark_with_no_scored_sample_shows_every_cell_missing_with_its_reason(tmp_path: Path) -> None:
    # synthetic problem 0 loses its first two clean samples: with 2 samples and 1 problem, none is scored
    run = synthetic_run(tmp_path / "run", model="org/m", sizes={"aime2025": 1, "hmmt_feb2025": 3}, samples=2)
    summary = json.loads((run / "summary.json").read_text())
    assert "accuracy" not in summary["per_benchmark"]["aime2025"]
    other = write_comparison(
        [run, synthetic_run(tmp_path / "b", model="org/b", samples=2)], tmp_path / "c.html"
    )
    html = other.read_text()
    row = re.search(r'<tr[^>]*data-benchmark="aime2025".*?</tr>', html, re.S)
    assert row is not None
    titles = re.findall(
        r'data-run="0" data-metric="(\w+)" data-value="">\s*<span class="na" title="([^"]*)"', row[0]
    )
    assert {metric for metric, _ in titles} >= {
        "accuracy",
        "pass_at_k",
        "maj_at_k",
        "tool_calls",
        "grounding",
    }
    assert all("no scored sample: 2 of 2 clean samples excluded" in why for _, why in titles)
    data = build_data([run])
    average = data["headline"]["rows"][-1]["groups"][0]
    assert average[0]["value"] == pytest.approx(summary["overall"]["mean_accuracy"])  # hmmt alone
    assert average[0]["note"] == average[1]["note"] == "1/2 benchmarks"  # aime2025 has no scored sample
    assert average[1]["value"] == pytest.approx(
        summary["per_benchmark"]["hmmt_feb2025"]["pass_at_k"]["2"]["value"]
    )


def test_the_excluded_column_counts_clean_samples_per_benchmark_and_overall_and_faulted_runs_apart(
    tmp_path: Path,
) -> None:
    from thinc_bench.eval.store import RunDir
    from thinc_bench.eval.summary import summarize

    path = synthetic_run(tmp_path / "run", model="org/m", ks=(0, 1, 2), samples=4)
    run = RunDir(path, json.loads((path / "config.json").read_text()))
    records = run.records()
    lost = 0
    for r in records:  # 6 samples of each benchmark's k = 2 run lost to infrastructure, 1 of k = 1
        if (r.k == 2 and r.sample_idx == 0) or (
            r.k == 1 and (r.problem_id, r.sample_idx) == (f"{r.benchmark}-1", 3)
        ):
            if r.k == 2 and int(r.problem_id.rsplit("-", 1)[1]) >= 6:
                continue
            r.status, r.correct, r.answer, r.finish_reason = "infra_error", False, None, "infra_error"
            lost += 1
    assert lost == (6 + 1) + (4 + 1)  # aime2025 has 6 problems, hmmt_feb2025 4
    run.samples_path.write_text("")
    for r in records:
        run.append(r)
    run.write_summary(summarize(records, same=lambda a, b: a == b, samples=4))
    html = write_report(path).read_text()
    shown = dict(
        re.findall(r'<tr[^>]*data-benchmark="(\w+)".*?data-metric="infra" data-value="(\d+)"', html, re.S)
    )
    # synthetic: problem 0 of each benchmark loses 2 clean samples (an infra error, a grader timeout)
    assert shown == {"aime2025": "2", "hmmt_feb2025": "2", "average": "4"}
    faulted = re.findall(r'data-metric="infra"[^>]*title="([^"]*)">\d+<span class="se"> \+(\d+) k&gt;0', html)
    assert [n for _, n in faulted] == ["7", "5", "12"]
    assert "k=1: 1, k=2: 6" in faulted[0][0]


def test_unverifiable_answers_are_scored_wrong_and_shown_beside_the_excluded(tmp_path: Path) -> None:
    # Every problem's clean sample 2 is an answer the grader could not judge in time: wrong, not excluded.
    run = synthetic_run(tmp_path / "run", model="org/m", lost="grader_timeout", samples=4)
    summary = json.loads((run / "summary.json").read_text())
    block = summary["per_benchmark"]["aime2025"]
    assert block["grader_timeouts"] == 6 and sum(block["excluded"].values()) == 2  # problem 0's two
    assert block["pass_at_k"]["4"]["n_problems_short"] == 1  # only problem 0 lost samples
    html = write_report(run).read_text()
    assert "(6 timed out, wrong)" in html
    kinds = {w["kind"]: w for w in build_data([run])["warnings"]}
    assert kinds["grader_timeout"]["count"] == 6 + 4  # aime2025 and hmmt_feb2025 problems
