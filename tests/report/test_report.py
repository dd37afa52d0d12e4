"""The report of a scripted-backend run: every headline number is summary.json's, figures are there,
the page is self-contained, and model text cannot inject markup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from report.pages import expected_cells, parse_page, viewer_data
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.report import build_data, write_report


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory, scripted_turns) -> Path:
    out = tmp_path_factory.mktemp("scripted") / "run"
    bench = out.parent / "tiny.jsonl"
    rows = [
        {"id": "tiny-1", "problem": "Compute 2 + 3.", "answer": "5"},
        {"id": "tiny-2", "problem": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}"},
    ]
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["--backend", "scripted", "--model", str(scripted_turns), "--benchmarks", str(bench)]
    assert thinc_eval.main([*args, "--samples", "2", "--recovery-k", "0,1", "--out", str(out)]) == 0
    return out


def test_every_headline_number_matches_summary_json(scripted_run: Path) -> None:
    html = write_report(scripted_run).read_text()
    summary = json.loads((scripted_run / "summary.json").read_text())
    cells = parse_page(html).cells
    expected = expected_cells(summary)
    assert set(expected) == set(cells)
    for key, value in expected.items():
        assert float(cells[key]) == pytest.approx(value), key


def test_accuracy_is_printed_as_a_percentage_with_its_stderr(scripted_run: Path) -> None:
    html = (scripted_run / "report.html").read_text()
    block = json.loads((scripted_run / "summary.json").read_text())["per_benchmark"]["tiny"]["accuracy"]
    assert f'>{100 * block["value"]:.1f}<span class="se"> ± {100 * block["stderr"]:.1f}</span>' in html


def test_report_has_every_figure_as_inline_svg(scripted_run: Path) -> None:
    page = parse_page(write_report(scripted_run).read_text())
    assert page.figures == [
        "fig-accuracy",
        "fig-recovery",
        "fig-failure_modes",
        "fig-tool_calls",
        "fig-lengths",
        "fig-grounding",
        "fig-heatmap-tiny",
    ]
    assert page.svgs == len(page.figures)


def test_report_requests_nothing_from_the_network(scripted_run: Path) -> None:
    html = (scripted_run / "report.html").read_text()
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and " src=" not in html
    assert "default-src 'none'" in html  # the page's CSP forbids any fetch the checks above could miss


def test_viewer_holds_every_sample_with_segments_and_problem_text(scripted_run: Path) -> None:
    data = viewer_data((scripted_run / "report.html").read_text())
    assert len(data["samples"]) == 8  # 2 problems x 2 samples x k in {0, 1}
    first = data["samples"][0]
    assert first["problem"] == "Compute 2 + 3."
    assert [s["kind"] for s in first["segments"]] == ["plan", "code", "output", "answer"]
    injected = [s for s in data["samples"] if s["k"] == 1][0]["segments"][1]
    assert injected["injected"] and injected["status"] == "error"


def test_header_says_requested_and_generated_samples_are_equal(scripted_run: Path) -> None:
    run = build_data(scripted_run)["runs"][0]
    assert (run["requested_samples"], run["generated_samples"], run["complete"]) == (8, 8, True)


def test_model_text_is_escaped(two_problem_benchmark, tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        '{"problem_id": "tiny-1", "turns": ["<script>alert(1)</script> \\\\boxed{5}"]}\n'
        '{"problem_id": "tiny-2", "turns": ["</script><b>x</b> \\\\boxed{1}"]}\n'
    )
    out = tmp_path / "run"
    args = ["--backend", "scripted", "--model", str(turns), "--benchmarks", str(two_problem_benchmark)]
    assert thinc_eval.main([*args, "--samples", "1", "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "<script>alert(1)" not in html and "</script><b>" not in html
    texts = [seg["text"] for s in viewer_data(html)["samples"] for seg in s["segments"]]
    assert any("<script>alert(1)</script>" in t for t in texts)  # kept as data, shown via textContent


def test_recovery_cells_match_summary_json(scripted_run: Path) -> None:
    html = (scripted_run / "report.html").read_text()
    recovery = json.loads((scripted_run / "summary.json").read_text())["per_benchmark"]["tiny"]["recovery"]
    shown = dict(re.findall(r'data-metric="recovery" data-k="(\d+)" data-value="([^"]*)"', html))
    assert shown.keys() == recovery.keys() == {"1"}
    assert float(shown["1"]) == pytest.approx(recovery["1"]["accuracy"])


def test_a_training_log_adds_the_reward_figure_and_labels_name_columns(
    scripted_run: Path, tmp_path: Path
) -> None:
    from thinc_bench.report import write_comparison

    grpo = tmp_path / "grpo"
    grpo.mkdir()
    history = [
        {"step": 1, "loss": 0.1, "rewards/exact_match_reward/mean": 0.25},
        {"step": 2, "loss": 0.1, "rewards/exact_match_reward/mean": 0.5},
        {"step": 3, "loss": 0.1, "rewards/exact_match_reward/mean": 0.75},
        {"train_runtime": 9.0},  # the end-of-training entry has no reward: skipped
    ]
    (grpo / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    out = tmp_path / "page.html"
    write_comparison([f"ThinC SFT={scripted_run}", f"again={scripted_run}"], out, training_logs=[grpo])
    page = parse_page(out.read_text())
    assert page.figures[-1] == "fig-training_reward" and page.svgs == len(page.figures)
    assert "ThinC SFT" in out.read_text() and "again" in out.read_text()
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        write_comparison([str(scripted_run)], out, training_logs=[tmp_path / "nowhere"])


def test_a_training_log_with_clip_fractions_adds_their_figure_even_when_nothing_was_clipped(
    scripted_run: Path, tmp_path: Path
) -> None:
    from thinc_bench.report import build_data, write_comparison

    grpo = tmp_path / "grpo"
    grpo.mkdir()
    history = [  # TRL logs a clip share at every optimizer step; 0 on a batch's first update
        {"step": s, "rewards/exact_match_reward/mean": 0.5, "clip_ratio/region_mean": clip}
        for s, clip in ((1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0))
    ]
    (grpo / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    out = tmp_path / "page.html"
    write_comparison([str(scripted_run)], out, training_logs=[grpo])
    page = parse_page(out.read_text())
    assert page.figures[-2:] == ["fig-training_reward", "fig-training_clip"] and page.svgs == len(
        page.figures
    )
    (clip,) = [
        f for f in build_data([scripted_run], training_logs=[grpo])["figures"] if f["key"] == "training_clip"
    ]
    assert "never moved far enough" in clip["caption"]


def test_a_grpo_log_with_held_out_accuracy_and_thinc_metrics_draws_them_per_step(
    scripted_run: Path, tmp_path: Path
) -> None:
    from thinc_bench.report import build_data, write_comparison

    grpo = tmp_path / "grpo"
    grpo.mkdir()
    history = [  # the recipe's log: held-out accuracy before training (step 0) and with some steps
        {"step": 0, "heldout/accuracy": 0.25},
        *(
            {
                "step": s,
                "rewards/exact_match_reward/mean": 0.5,
                "rollout/conformance": c,
                "rollout/tool_calls": t,
            }
            for s, c, t in ((1, 0.5, 2.0), (2, 0.75, 3.0), (3, 1.0, 3.5))
        ),
        {"step": 2, "heldout/accuracy": 0.5},
    ]
    (grpo / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    out = tmp_path / "page.html"
    write_comparison([str(scripted_run)], out, training_logs=[grpo])
    page = parse_page(out.read_text())
    assert page.figures[-1] == "fig-training_metrics" and page.svgs == len(page.figures)
    (figure,) = [
        f
        for f in build_data([scripted_run], training_logs=[grpo])["figures"]
        if f["key"] == "training_metrics"
    ]
    svg = str(figure["svg"])
    # a panel per metric logged (text stays text in the SVG), none for metrics never logged
    assert "held-out accuracy (%)" in svg and "ThinC conformance (%)" in svg and "tool calls" in svg
    assert "recovered" not in svg and "effective prompts" not in svg
