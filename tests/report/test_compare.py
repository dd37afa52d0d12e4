"""Comparison reports from synthetic run directories: column groups, best values, merged shards,
published numbers, reader warnings and the CLI."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from report.pages import expected_cells, parse_page, viewer_data
from report.synthetic import PAPER_SIZES, synthetic_run
from thinc_bench.report import __main__ as report_cli
from thinc_bench.report import build_data, render, write_comparison
from thinc_bench.report._warnings import gold_in_text
from thinc_bench.report.reference import load_reference


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    return [
        synthetic_run(root / "strong", model="org/strong-4b", p_correct=0.8, ks=(0, 1, 2)),
        synthetic_run(root / "weak", model="org/weak-1.7b", p_correct=0.3, ks=(0, 1, 2)),
    ]


def test_every_headline_number_of_every_run_matches_its_summary(two_runs, tmp_path) -> None:
    html = write_comparison(two_runs, tmp_path / "c.html").read_text()
    cells = parse_page(html).cells
    expected = {}
    for r, run in enumerate(two_runs):
        expected.update(expected_cells(json.loads((run / "summary.json").read_text()), run=r))
    assert set(expected) == set(cells)
    for key, value in expected.items():
        assert float(cells[key]) == pytest.approx(value), key


def test_one_column_group_per_run_with_the_best_accuracy_marked(two_runs) -> None:
    data = build_data(two_runs)
    assert [r["label"] for r in data["runs"]] == ["strong-4b", "weak-1.7b"]
    average = data["headline"]["rows"][-1]
    strong, weak = (group[0] for group in average["groups"])
    assert strong["value"] > weak["value"]
    assert (strong["best"], weak["best"]) == (True, False)
    html = render(data)
    for r in range(2):  # runs as rows: one row per run in each benchmark's group and in the average's
        rows = re.findall(rf'<tr[^>]*data-benchmark="(\w+)" data-run="{r}"', html)
        assert rows == ["aime2025", "hmmt_feb2025", "average"]


def test_shards_of_one_run_merge_into_one_column_with_the_unsharded_numbers(tmp_path) -> None:
    whole = synthetic_run(tmp_path / "whole", model="org/m", seed=3)
    shards = [synthetic_run(tmp_path / f"s{i}", model="org/m", seed=3, shard=f"{i}/2") for i in range(2)]
    merged = build_data(shards)
    assert len(merged["runs"]) == 1 and merged["runs"][0]["shards"] == ["0/2", "1/2"]
    assert len(merged["samples"]) == sum(len((s / "samples.jsonl").read_text().splitlines()) for s in shards)
    problems = {(s["benchmark"], s["problem_id"]) for s in merged["samples"]}
    assert problems == {(s["benchmark"], s["problem_id"]) for s in build_data(whole)["samples"]}
    assert merged["runs"][0]["complete"]


def test_published_numbers_sit_beside_the_run_and_are_labelled(two_runs) -> None:
    html = render(build_data(two_runs))
    assert "published, not measured here" in html
    for entry in load_reference()["numbers"]:
        assert f"<td>{entry['model']}</td>" in html
        shown = '<span class="muted">not reported' if entry["value"] is None else entry["value"]
        assert re.search(
            rf'<td class="pub" title="[^"]+" data-class="{entry["class"]}">{re.escape(str(shown))}', html
        )
    not_reported = {n["metric"] for n in load_reference()["numbers"] if n["value"] is None}
    assert not_reported == {"posthoc", "nl_literals", "nl_ratio"}  # the sources name A-C without a number
    (k5,) = [n for n in load_reference()["numbers"] if n["metric"] == "recovery_accuracy_k5"]
    assert (k5["model"], k5["value"]) == ("ThinC-4B", 33.0)
    assert [n["value"] for n in load_reference()["numbers"] if n["metric"] == "avg_accuracy"] == [
        78.1,
        42.8,
        32.2,
        75.2,
        74.0,
    ]


def test_every_published_number_says_how_we_know_it_and_names_baselines_as_the_source_does(two_runs) -> None:
    numbers = load_reference()["numbers"]
    by_model = {(n["metric"], n["model"]): n for n in numbers}
    # the classes themselves are checked against the source texts in tests/test_provenance.py
    assert by_model[("avg_accuracy", "ASTER-4B")]["class"] == "secondary"
    assert {n["model"] for n in numbers if n["metric"] == "grounding"} == {
        "ThinC-4B",
        "ReTool-32B",
        "rStar2-Agent-14B",
    }
    html = render(build_data(two_runs))
    for n in numbers:
        if n["class"] == "secondary":
            assert (
                f'title="an unverified secondary write-up (a blog analysis or an agent-written review): {n["via"]}"'
                in html
            )
    summary = 'title="an AI-generated summary of the paper, not written by its authors"'
    assert html.count(summary) == sum(n["class"] == "explainer" for n in numbers) > 0
    assert (
        html.count('title="the paper&#39;s abstract"') == sum(n["class"] == "abstract" for n in numbers) == 1
    )
    assert html.count('title="derived: arithmetic on published numbers (42.8 - 10.6)"') == 1
    assert "paper body" not in html and "78.1 (published; paper abstract)" not in html


def test_the_recovery_rate_is_shown_as_a_rate_beside_our_ratio_not_an_accuracy(two_runs) -> None:
    numbers = load_reference()["numbers"]
    (rate,) = [n for n in numbers if n["value"] == 64.0]
    assert (
        rate["metric"] == "recovery_rate_k3"
        and "does not define" in load_reference()["metrics"]["recovery_rate_k3"]
    )
    # the two runs have k up to 2: no Recovery@3 of their own, so their cells are –; a run with k = 3 has its ratio
    data = build_data(two_runs)
    (group,) = [g for g in data["published"] if g["metric"] == "recovery_rate_k3"]
    assert [m["value"] for m in group["measured"]] == [None, None] and "ratio" in group["measured_as"]


def test_published_markers_stand_only_on_the_benchmarks_they_were_published_for(tmp_path, two_runs) -> None:
    from thinc_bench.report.reference import applies

    reference = load_reference()
    five = reference["source"]["benchmarks"]
    (avg,) = [n for n in reference["numbers"] if n["model"] == "ThinC-4B" and n["metric"] == "avg_accuracy"]
    assert applies(avg, five, reference) and not applies(avg, ["aime2025", "hmmt_feb2025"], reference)
    assert not applies(avg, ["nano"], reference) and not applies(avg, [*five, "nano"], reference)
    figures = {f["key"]: f for f in build_data(two_runs)["figures"]}
    assert "78.1" not in str(figures["accuracy"]["svg"])  # a 2-benchmark average is not the published 5
    assert "99.2" in str(figures["failure_modes"]["svg"])  # grounding on two of the published benchmarks
    nano = synthetic_run(tmp_path / "nano", model="org/nano", sizes={"nano": 4}, samples=2)
    figures = {f["key"]: f for f in build_data(nano)["figures"]}
    assert "published" not in str(figures["accuracy"]["svg"]) + str(figures["failure_modes"]["svg"])
    assert "no published markers" in figures["accuracy"]["caption"]
    paper = synthetic_run(tmp_path / "paper", model="org/p", sizes=dict.fromkeys(five, 2), samples=2)
    svg = str({f["key"]: f for f in build_data(paper)["figures"]}["accuracy"]["svg"])
    assert "ThinC-4B 78.1 (published; AI summary of the paper, not by its authors)" in svg
    assert "Qwen3-1.7B 32.2 (published; derived: 42.8 - 10.6)" in svg
    assert "ASTER-4B 74.0 (published; unverified secondary write-up)" in svg


def test_warnings_list_every_kind_with_its_samples(two_runs) -> None:
    data = build_data(two_runs[:1])
    kinds = {w["kind"]: w for w in data["warnings"]}
    assert set(kinds) == {"no_answer", "truncated", "gold_in_text", "grader_error", "infra_error"}
    assert kinds["infra_error"]["count"] == 2  # problem 0 of each benchmark (synthetic)
    no_answer = [s["id"] for s in data["samples"] if s["answer"] is None and s["status"] != "infra_error"]
    assert kinds["no_answer"]["ids"] == no_answer
    unverified = set(no_answer) | set(kinds["grader_error"]["ids"])
    assert set(kinds["gold_in_text"]["ids"]) <= unverified  # synthetic: only these write the gold unboxed


def test_gold_in_text_matches_whole_numbers_only() -> None:
    assert gold_in_text("025", "so the answer is 25.")
    assert gold_in_text("33,124,147", "total 33124147")
    assert not gold_in_text("5", "we get 15 and 2.5")
    assert gold_in_text("\\frac{5}{6}", "x = \\frac{5}{6}")


def test_cli_compares_two_runs_into_one_file(two_runs, tmp_path, capsys) -> None:
    out = tmp_path / "compare.html"
    assert report_cli.main([*map(str, two_runs), "--out", str(out), "--no_problem_text"]) == 0
    assert "report:" in capsys.readouterr().out
    assert len(viewer_data(out.read_text())["samples"]) == 2 * 10 * 4 * 3


def test_cli_refuses_a_directory_that_is_not_a_run(tmp_path, capsys) -> None:
    assert report_cli.main([str(tmp_path), "--out", str(tmp_path / "x.html")]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_paper_scale_report_renders_quickly(tmp_path) -> None:
    run = synthetic_run(tmp_path / "big", model="org/big", sizes=PAPER_SIZES, samples=16)
    started = time.perf_counter()
    html = write_comparison([run], tmp_path / "big.html").read_text()
    elapsed = time.perf_counter() - started
    assert len(viewer_data(html)["samples"]) == 2240
    assert elapsed < 60, f"rendering 2,240 trajectories took {elapsed:.1f} s"


def test_two_runs_of_the_same_settings_stay_separate_columns(tmp_path) -> None:
    runs = [synthetic_run(tmp_path / name, model="org/m", seed=1) for name in ("first", "again")]
    data = build_data(runs)
    assert [r["label"] for r in data["runs"]] == ["m (first)", "m (again)"]


def test_a_killed_run_without_summary_json_still_reports_its_numbers(tmp_path) -> None:
    run = synthetic_run(tmp_path / "killed", model="org/m")
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").unlink()
    average = build_data(run)["headline"]["rows"][-1]["groups"][0][0]
    assert average["value"] == pytest.approx(summary["overall"]["mean_accuracy"])


def test_a_problem_lost_to_infrastructure_is_a_missing_warning_not_silently_dropped(tmp_path) -> None:
    from thinc_bench.eval.store import RunDir
    from thinc_bench.eval.summary import summarize

    path = synthetic_run(tmp_path / "run", model="org/m", sizes={"aime2025": 3}, samples=2)
    run = RunDir(path, json.loads((path / "config.json").read_text()))
    records = run.records()
    for r in records:
        if r.problem_id == "aime2025-2":  # every sample of this problem failed on infrastructure
            r.status, r.correct, r.answer, r.grounded, r.finish_reason = (
                "infra_error",
                False,
                None,
                None,
                "infra_error",
            )
    run.samples_path.write_text("")
    for r in records:
        run.append(r)
    run.write_summary(summarize(records, same=lambda a, b: a == b, samples=2))
    data = build_data(path)
    (missing,) = [w for w in data["warnings"] if w["kind"] == "missing"]
    # problem 2 as made here; problem 0 as synthetic makes it (one infrastructure error, one grader timeout)
    assert missing["count"] == 2 and "aime2025/aime2025-0, aime2025/aime2025-2" in missing["meaning"]
    assert {data["samples"][i]["problem_id"] for i in missing["ids"]} == {"aime2025-0", "aime2025-2"}
    assert "Problems missing from accuracy" in render(data)


def test_failure_mode_figure_shows_the_three_rates_and_says_what_the_paper_does_not_report(two_runs) -> None:
    (figure,) = [f for f in build_data(two_runs)["figures"] if f["key"] == "failure_modes"]
    svg = str(figure["svg"])
    for label in ("grounded", "(A) post-hoc", "(B) NL literals", "(C) NL ratio", "not reported", "99.2"):
        assert label in svg, label
    assert "strong-4b" in svg and "weak-1.7b" in svg


def test_recovery_table_shows_stderr_saw_k_and_samples_with_fewer_executions(two_runs) -> None:
    html = render(build_data(two_runs[:1]))
    summary = json.loads((two_runs[0] / "summary.json").read_text())
    rec = summary["per_benchmark"]["aime2025"]["recovery"]["2"]
    assert rec["saw_k"]["denominator"] == 6 * 4  # every k=2 sample of the benchmark
    assert 0 < rec["saw_k"]["value"] < 1  # synthetic trajectories with one block cannot see 2 failures
    assert "saw k" in html and "clean accuracy above 0" in html
    fewer = rec["fewer_than_k"]
    assert f">{fewer['numerator']}/{fewer['denominator']}<" in html


def test_a_run_summarised_by_an_older_version_is_summarised_again_from_its_records(tmp_path) -> None:
    from thinc_bench.eval.summary import SUMMARY_VERSION
    from thinc_bench.report.runs import load_run

    path = synthetic_run(tmp_path / "run", model="org/m", sizes={"aime2025": 3}, samples=2)
    current = json.loads((path / "summary.json").read_text())
    old = {"summary_version": 1, "per_benchmark": {"aime2025": {"n_records": 6}}, "overall": {}}
    (path / "summary.json").write_text(json.dumps(old))
    summary = load_run(path).summary
    assert summary["summary_version"] == SUMMARY_VERSION
    assert (
        summary["per_benchmark"]["aime2025"]["accuracy"] == current["per_benchmark"]["aime2025"]["accuracy"]
    )


def test_pass_and_maj_cells_say_on_how_many_problems_the_requested_k_was_computed(two_runs) -> None:
    # synthetic problem 0 of each benchmark lost one sample to infrastructure and one to a grader
    # timeout, so it has 2 scored samples of the 4 asked for: pass@4 and maj@4 stand on the others.
    summary = json.loads((two_runs[0] / "summary.json").read_text())
    block = summary["per_benchmark"]["aime2025"]
    assert (block["pass_at_k"]["4"]["n_problems"], block["pass_at_k"]["4"]["n_problems_short"]) == (5, 1)
    html = render(build_data(two_runs[:1]))
    row = html[html.index('data-benchmark="aime2025" data-run="0"') :]
    row = row[: row.index("</tr>")]
    assert row.count(">5/6 problems</span>") == 2  # pass@4 and maj@4


def _height_in(svg: str) -> float:
    return float(re.search(r'<svg[^>]*height="([\d.]+)pt"', svg)[1]) / 72  # type: ignore[index]


def test_figures_stay_within_a_bounded_height_for_many_problems_and_many_runs(tmp_path) -> None:
    from thinc_bench.report.figures import MAX_FIGURE_HEIGHT_IN

    sizes = {"nano": 100}
    runs = [
        synthetic_run(
            tmp_path / f"r{i}", model=f"org/run-with-a-rather-long-name-{i}", sizes=sizes, samples=1
        )
        for i in range(8)
    ]
    figures = build_data(runs)["figures"]
    heights = {f["key"]: _height_in(str(f["svg"])) for f in figures if f["svg"]}
    assert set(heights) >= {"accuracy", "lengths", "heatmap-nano"}
    assert max(heights.values()) <= MAX_FIGURE_HEIGHT_IN + 0.01, heights
    # 100 problems x 1 sample: one panel wraps into rows of 40 problems, not 100 rows
    single = {f["key"]: f for f in build_data(runs[0])["figures"]}
    assert _height_in(str(single["heatmap-nano"]["svg"])) < 1.5
    assert "40 problems per row x 1 sample" in str(single["heatmap-nano"]["svg"])


def test_pass_and_maj_at_different_k_are_not_ranked_against_each_other(tmp_path) -> None:
    runs = [
        synthetic_run(tmp_path / "four", model="org/four", samples=4, p_correct=0.3),
        synthetic_run(tmp_path / "eight", model="org/eight", samples=8, p_correct=0.3),
    ]
    rows = build_data(runs)["headline"]["rows"]
    for row in rows:
        cells = {c["key"]: c for group in row["groups"] for c in group if c["best"]}
        assert "pass_at_k" not in cells and "maj_at_k" not in cells, row["benchmark"]
    assert rows[0]["ks"]["pass_at_k"] == ["4", "8"]  # the row says which k each run has
    assert any(c["best"] for group in rows[-1]["groups"] for c in group[:1])  # avg@n is still ranked


def _clean_by_problem(run: Path, benchmark: str) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for line in (run / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if (
            s["benchmark"] == benchmark
            and s["k"] == 0
            and s["status"] not in ("infra_error", "harness_error", "grader_error")  # timeouts are wrong
        ):
            out.setdefault(s["problem_id"], []).append(s["correct"])
    return out


def test_paired_differences_are_b_minus_a_per_problem_with_their_standard_error(two_runs, tmp_path) -> None:
    import statistics

    html = write_comparison(two_runs, tmp_path / "c.html").read_text()
    shown = dict(
        re.findall(
            r'data-b="1" data-a="0" data-benchmark="(\w+)">.*?data-metric="paired" data-value="([^"]+)"',
            html,
            re.S,
        )
    )
    assert set(shown) == {"aime2025", "hmmt_feb2025"}
    data = build_data(two_runs)
    for name, value in shown.items():
        strong, weak = _clean_by_problem(two_runs[0], name), _clean_by_problem(two_runs[1], name)
        diffs = [sum(weak[p]) / len(weak[p]) - sum(strong[p]) / len(strong[p]) for p in strong if p in weak]
        assert float(value) == pytest.approx(statistics.fmean(diffs))
        (row,) = [r for r in data["paired"] if r["benchmark"] == name and r["k"] == 0]
        assert row["stderr"] == pytest.approx(statistics.stdev(diffs) / len(diffs) ** 0.5)
        assert (row["b_label"], row["a_label"], row["n_problems"]) == ("weak-1.7b", "strong-4b", len(diffs))
        assert row["value"] < 0 and row["worse"] > row["better"]  # the weak run is B: it lost


def _recovered_by_problem(run: Path, benchmark: str, k: int) -> dict[str, list[bool]]:
    """Recovery@k as eval counts it: every k-run sample with a verdict, whatever it did after its failures."""
    out: dict[str, list[bool]] = {}
    for line in (run / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        scored = s["status"] not in ("infra_error", "grader_error")
        if s["benchmark"] == benchmark and s["k"] == k and scored:
            out.setdefault(s["problem_id"], []).append(s["correct"])
    return out


def test_recovery_at_k_is_paired_too_on_every_faulted_sample(two_runs, tmp_path) -> None:
    import statistics

    data = build_data(two_runs)
    rows = {(r["benchmark"], r["k"]): r for r in data["paired"]}
    assert {k for _, k in rows} == {0, 1, 2}  # both runs ran Recovery@1 and @2
    for (name, k), row in rows.items():
        if not k:
            continue
        a, b = _recovered_by_problem(two_runs[0], name, k), _recovered_by_problem(two_runs[1], name, k)
        diffs = [sum(b[p]) / len(b[p]) - sum(a[p]) / len(a[p]) for p in a if p in b]
        assert row["n_problems"] == len(diffs) and row["value"] == pytest.approx(statistics.fmean(diffs))
    html = write_comparison(two_runs, tmp_path / "c.html").read_text()
    shown = re.findall(
        r'data-b="1" data-a="0" data-k="(\d)" data-benchmark="(\w+)">.*?<td>\2 · Recovery@\1</td>', html, re.S
    )
    assert sorted((b, int(k)) for k, b in shown) == sorted(key for key in rows if key[1])


def test_paired_pairs_are_chosen_by_label_and_a_wrong_label_is_a_one_line_error(
    two_runs, tmp_path, capsys
) -> None:
    data = build_data(two_runs, paired=["strong-4b:weak-1.7b"])
    assert {(r["b_label"], r["a_label"]) for r in data["paired"]} == {("strong-4b", "weak-1.7b")}
    assert all(r["value"] > 0 for r in data["paired"])
    code = report_cli.main(
        [*map(str, two_runs), "--out", str(tmp_path / "x.html"), "--paired", "strong:weak"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--paired 'strong:weak'" in err and "strong-4b, weak-1.7b" in err
    assert not (tmp_path / "x.html").exists()


def _interrupt(run: Path, planned_problems: dict[str, int]) -> None:
    """What eval's finish writes for a run stopped early: `partial` with the plan it did not finish."""
    summary = json.loads((run / "summary.json").read_text())
    saved = len((run / "samples.jsonl").read_text().splitlines())
    summary["partial"] = {"saved": saved, "planned": 2 * saved, "problems": planned_problems}
    (run / "summary.json").write_text(json.dumps(summary))


def test_an_interrupted_run_is_marked_on_its_numbers_and_a_finished_one_is_not(tmp_path) -> None:
    done = synthetic_run(tmp_path / "done", model="org/done", sizes={"aime2025": 6}, samples=1)
    stopped = synthetic_run(tmp_path / "stopped", model="org/stopped", sizes={"aime2025": 3}, samples=1)
    _interrupt(stopped, {"aime2025": 6})
    html = write_comparison([done, stopped], tmp_path / "c.html").read_text()
    glance = html[
        html.index('<table class="glance">') : html.index("</table>", html.index('<table class="glance">'))
    ]
    rows = dict(re.findall(r'<tr data-run="(\d)">(.*?)</tr>', glance, re.S))
    assert "run interrupted" not in rows["0"]
    scored = json.loads((stopped / "summary.json").read_text())["per_benchmark"]["aime2025"]["accuracy"]
    assert f"{scored['n_problems']} of 6 problems · run interrupted" in rows["1"]  # the benchmark's cell
    assert "3 of 6 trajectories · run interrupted" in rows["1"]  # the average's
    single = write_comparison([stopped], tmp_path / "s.html").read_text()
    assert single.count(f"{scored['n_problems']} of 6 problems · run interrupted") == 2  # glance, all metrics


def test_the_average_says_when_a_run_covers_fewer_benchmarks_than_the_table(tmp_path) -> None:
    both = synthetic_run(
        tmp_path / "both", model="org/both", sizes={"aime2025": 2, "hmmt_feb2025": 2}, samples=1
    )
    one = synthetic_run(tmp_path / "one", model="org/one", sizes={"hmmt_feb2025": 2}, samples=1)
    average = build_data([both, one])["headline"]["rows"][-1]
    assert average["groups"][0][0].get("note") is None
    assert average["groups"][1][0]["note"] == "1/2 benchmarks"


def test_heat_maps_draw_a_panel_only_for_runs_with_samples_of_that_benchmark(tmp_path) -> None:
    both = synthetic_run(
        tmp_path / "both", model="org/both", sizes={"aime2025": 2, "hmmt_feb2025": 2}, samples=1
    )
    one = synthetic_run(tmp_path / "one", model="org/one", sizes={"hmmt_feb2025": 2}, samples=1)
    figures = {f["key"]: str(f["svg"]) for f in build_data([both, one])["figures"] if f.get("svg")}

    def titles(key: str) -> set[str]:
        return set(re.findall(r">([a-z]+)</text>", figures[key])) & {"both", "one"}

    assert titles("heatmap-hmmt_feb2025") == {"both", "one"}
    assert titles("heatmap-aime2025") == {"both"}  # no empty frame for the run that never saw it


def test_a_run_without_a_scored_sample_renders_without_a_warning(tmp_path) -> None:
    import warnings

    run = synthetic_run(tmp_path / "run", model="org/m", sizes={"aime2025": 1}, samples=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "constrained_layout not applied" among them
        write_comparison([run], tmp_path / "page.html")
