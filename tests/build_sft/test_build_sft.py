"""`python -m thinc_bench.build_sft` end to end: scripted teacher, real sandbox, grader and filters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from shared_inputs import need_shared

from thinc_bench import trajectory
from thinc_bench.backends import smollm2_gguf
from thinc_bench.backends._sources import load_tokenizer
from thinc_bench.build_sft import __main__ as build_sft
from thinc_bench.build_sft.config import BuildSFTConfig
from thinc_bench.build_sft.dataset import format_funnel
from thinc_bench.errors import ConfigError
from thinc_bench.prompts import render_prompt_ids

SFT_DATA = Path(__file__).resolve().parents[1] / "data" / "sft"
STOP = "```output"
EXPECTED_REMOVED = {
    "infra_error": 0,
    "ungraded": 0,
    "processed": 0,
    "finished": 0,
    "judgeable": 0,
    "correct": 2,  # sft-wrong-answer, both samples
    "exec_ok": 2,  # sft-exec-error
    "min_code_blocks": 2,  # sft-two-blocks
    "plan_share": 2,  # sft-long-plan: over half of all its tokens, interpreter output included
    "plan_computation": 2,  # sft-plan-computes: 2^{10} = 1024 worked out in the plan
    "grounded": 2,  # sft-ungrounded: the right answer, which no output printed
    # sft-prose (prose between blocks); sft-final-prose (a paragraph around the box); sft-unexecuted
    # (three blocks before one output block: all three run, but none shows its own output)
    "conformance": 6,
    "decontamination": 2,  # sft-contaminated (an AIME 2025 problem, copied at test time)
    "dedup": 1,  # sft-pass's second, identical sample
}
ALSO_FAILED: dict[str, list[str]] = {"sft-wrong-answer": ["correct", "grounded"]}
"""Trajectories that rightly fail a second filter: sft-wrong-answer boxes 25, which no output printed."""


@pytest.fixture
def source(tmp_path: Path, benchmark_dir: Path) -> Path:
    """The hand-written problems plus one evaluation problem (read at test time, never stored here)."""
    rows = (SFT_DATA / "problems.jsonl").read_text(encoding="utf-8").splitlines()
    copied = json.loads((benchmark_dir / "aime2025.jsonl").read_text(encoding="utf-8").splitlines()[0])
    rows.append(json.dumps({"id": "sft-contaminated", "problem": copied["problem"], "answer": "7"}))
    path = tmp_path / "problems.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _args(source: Path, out: Path, teacher: Path, *extra: str) -> list[str]:
    return [
        "--teacher",
        str(teacher),
        "--backend",
        "scripted",
        "--source",
        str(source),
        "--student-tokenizer",
        str(smollm2_gguf()),
        "--decontam-data-dir",
        str(
            need_shared(
                Path(__file__).resolve().parents[3] / "shared" / "data" / "benchmarks", "benchmark copies"
            )
        ),
        "--out",
        str(out),
        *extra,
    ]


def _removed(out: Path) -> dict[str, int]:
    return {s["name"]: s["removed"] for s in json.loads((out / "stats.json").read_text())["funnel"]}


def test_each_hand_written_trajectory_breaks_exactly_its_filter(source, tmp_path) -> None:
    out = tmp_path / "build"
    teacher = SFT_DATA / "teacher_turns.jsonl"
    assert build_sft.main(_args(source, out, teacher, "--samples-per-problem", "2")) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert _removed(out) == EXPECTED_REMOVED
    assert stats["counts"] == {"problems": 11, "trajectories": 22, "kept": 1, "kept_problems": 1}
    for name, examples in stats["rejected_examples"].items():
        assert all(e["all_failed"] == ALSO_FAILED.get(e["problem_id"], [name]) for e in examples), name
    unexecuted = [e for e in stats["rejected_examples"]["conformance"] if e["problem_id"] == "sft-unexecuted"]
    assert unexecuted and unexecuted[0]["reason"] == "failed code_followed_by_output"
    records = (out / "rollouts" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    final_prose = next(r["text"] for r in map(json.loads, records) if r["problem_id"] == "sft-final-prose")
    # stats.json keeps the first three conformance rejects (sft-prose, sft-unexecuted), not this one
    assert trajectory.check_conformance(trajectory.parse(final_prose)).failed == ["short_prose_outside_plan"]
    source = stats["source_dedup"]
    assert (source["rows"], source["distinct"], source["repeats_dropped"]) == (14, 11, 1)  # sft-pass-copy
    assert source["conflicting"] == [
        [{"id": "sft-conflict-a", "answer": "64"}, {"id": "sft-conflict-b", "answer": "6"}]
    ]
    assert stats["decontamination"]["per_benchmark"]["aime2025"] == {"problems": 1, "trajectories": 2}
    (match,) = stats["decontamination"]["matches"]
    assert (match["problem_id"], match["benchmark"], match["overlap"], match["method"]) == (
        "sft-contaminated",
        "aime2025",
        1.0,
        "words",
    )
    report = json.loads((out / "decontamination.json").read_text(encoding="utf-8"))  # as GRPO's
    assert [r["id"] for r in report["removed_problems"]] == ["sft-contaminated"]
    (listed,) = [rows for rows in report["review"]["aime2025"].values()]
    # one line of maths and prose is too little for the near-duplicate pass alone: the words pass drops it
    assert [(r["id"], r["decision"], r["words"], r["near_decision"]) for r in listed] == [
        ("sft-contaminated", "dropped", 1.0, "review")
    ]
    near = stats["decontamination"]["near_duplicate"]["per_benchmark"]["aime2025"]
    assert (near["removed"], near["near_duplicate_confirmed"], near["review"]) == (1, 0, 0)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "aime2025: 1 problems (0 near duplicates confirmed, 0 pairs kept for review)" in card
    import datasets

    dataset = datasets.load_from_disk(str(out / "dataset"))
    assert [(r["id"], r["sample_idx"]) for r in dataset] == [("sft-pass", 0)]
    assert datasets.Dataset.from_parquet(str(out / "thinc_sft.parquet"))["id"] == ["sft-pass"]
    row = dataset[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert "".join(s["text"] for s in row["segments"]) == row["messages"][-1]["content"]
    assert row["n_code_blocks"] == 3 and 0 < row["plan_tokens"] < row["model_tokens"] / 2


def test_kept_rows_mask_every_interpreter_token_and_no_model_token(source, tmp_path) -> None:
    out = tmp_path / "build"
    build_sft.main(_args(source, out, SFT_DATA / "teacher_turns.jsonl", "--min-code-blocks", "2"))
    import datasets

    tokenizer = load_tokenizer(str(smollm2_gguf()))
    rows = list(datasets.load_from_disk(str(out / "dataset")))
    assert {r["id"] for r in rows} == {"sft-pass", "sft-two-blocks"}
    for row in rows:
        n = len(render_prompt_ids(tokenizer, row["messages"][:2]))
        ids, mask = row["input_ids"][n:-1], row["assistant_masks"][n:-1]
        assert set(row["assistant_masks"][:n]) == {0} and row["assistant_masks"][-1] == 1
        model = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if m)
        harness = "".join(tokenizer.decode([t]) for t, m in zip(ids, mask, strict=True) if not m)
        segments = trajectory.parse(row["messages"][-1]["content"]).segments
        assert harness == "".join(s.raw[len(STOP) :] for s in segments if s.kind == "output")
        assert model == "".join(s.raw[: len(STOP)] if s.kind == "output" else s.raw for s in segments)


def test_refilter_applies_new_thresholds_without_generating(source, tmp_path) -> None:
    out = tmp_path / "build"
    teacher = SFT_DATA / "teacher_turns.jsonl"
    assert build_sft.main(_args(source, out, teacher)) == 0
    samples = (out / "rollouts" / "samples.jsonl").read_bytes()
    assert (
        build_sft.main(["--refilter", "--out", str(out), "--min-code-blocks", "2", "--max-plan-share", "0.9"])
        == 0
    )
    assert (out / "rollouts" / "samples.jsonl").read_bytes() == samples
    removed = _removed(out)
    assert removed["plan_share"] == 0
    # sft-two-blocks has its 2; sft-unexecuted ran its three blocks together (it fails conformance)
    assert removed["min_code_blocks"] == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counts"]["kept"] == 3 and stats["settings"]["min_code_blocks"] == 2
    assert "3 trajectories on 3 problems" in (out / "README.md").read_text()
    assert "min_code_blocks" in (out / "report.html").read_text()


def test_refilter_takes_the_stored_build_and_abbreviated_flags_without_teacher(
    source, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "build"
    teacher = SFT_DATA / "teacher_turns.jsonl"
    assert (
        build_sft.main(_args(source, out, teacher, "--max-per-problem", "2", "--samples-per-problem", "1"))
        == 0
    )
    monkeypatch.chdir(tmp_path)  # no demo data beside the working directory: the demo preset must not run
    assert build_sft.main(["--refilter", "--out", str(out), "--min-code", "2", "--max-plan=0.9"]) == 0
    settings = json.loads((out / "stats.json").read_text())["settings"]
    assert (settings["min_code_blocks"], settings["max_plan_share"]) == (2, 0.9)  # the abbreviations
    assert (settings["teacher"], settings["backend"]) == (str(SFT_DATA / "teacher_turns.jsonl"), "scripted")
    assert settings["max_per_problem"] == 2  # not given now: the stored build's, not the default
    assert settings["student_tokenizer"] == str(smollm2_gguf())


def test_refilter_refuses_generation_flags_and_ambiguous_abbreviations(source, tmp_path, capsys) -> None:
    out = tmp_path / "build"
    teacher = SFT_DATA / "teacher_turns.jsonl"
    assert build_sft.main(_args(source, out, teacher, "--samples-per-problem", "1")) == 0
    samples = (out / "rollouts" / "samples.jsonl").read_bytes()
    capsys.readouterr()
    assert build_sft.main(["--refilter", "--out", str(out), "--temp", "0.9"]) == 2
    assert "--temperature 0.9 differs from the stored build's 0.6" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --max-plan-share, --max-prose-chars or --max-per-problem?
        build_sft.main(["--refilter", "--out", str(out), "--max-p", "0.4"])
    assert "ambiguous option" in capsys.readouterr().err
    assert build_sft.main(["--refilter", "--out", str(out), "--teacher", str(teacher)]) == 0  # same as stored
    assert (out / "rollouts" / "samples.jsonl").read_bytes() == samples


def test_a_trajectory_cut_by_the_token_budget_is_counted_apart_not_kept(tmp_path) -> None:
    problem = {"id": "sft-cut", "problem": "What is 2 times 3?", "answer": "6"}
    (tmp_path / "cut.jsonl").write_text(json.dumps(problem) + "\n")
    blocks = [f"```python\n# product, way {i}\nprint(2 * 3)\n```\n```output" for i in range(3)]
    tail = "\\boxed{6}. Let me double-check " + "whether the product could be anything else; " * 150
    turns = {
        "problem_id": "sft-cut",
        "turns": ["<think>\nMultiply three ways.\n</think>\n" + blocks[0], *blocks[1:], tail],
    }
    (tmp_path / "turns.jsonl").write_text(json.dumps(turns) + "\n")
    out = tmp_path / "build"
    extra = (
        "--few-shot",
        "0",
        "--system-prompt",
        "none",
        "--max-tokens",
        "400",
        "--max-prose-chars",
        "100000",
        "--samples-per-problem",
        "1",
    )
    assert build_sft.main(_args(tmp_path / "cut.jsonl", out, tmp_path / "turns.jsonl", *extra)) == 0
    (record,) = [json.loads(line) for line in (out / "rollouts" / "samples.jsonl").read_text().splitlines()]
    assert record["finish_reason"] == "max_tokens" and record["status"] == "correct"
    assert "\\boxed{6}. Let me double-check" in record["text"] and not record["text"].endswith(tail)
    stats = json.loads((out / "stats.json").read_text())
    assert _removed(out)["finished"] == 1 and stats["counts"]["kept"] == 0
    (example,) = stats["rejected_examples"]["finished"]
    assert (example["reason"], example["all_failed"]) == ("stopped by max_tokens", ["finished"])


def _blocks(*codes: str) -> list[str]:
    turns = [f"```python\n{code}\n```\n{STOP}" for code in codes]
    return ["<think>\nCompute it, check it, print it.\n</think>\n" + turns[0], *turns[1:]]


RECOVERY_TURNS = {
    "clean-1": [*_blocks("ans = 6 * 7\nprint(ans)", "print(ans % 7 == 0)", "print(ans)"), "\\boxed{42}"],
    "clean-2": [*_blocks("ans = 5 * 9\nprint(ans)", "print(ans % 9 == 0)", "print(ans)"), "\\boxed{45}"],
    "recovered-1": [
        *_blocks(
            "ans = 6 * sevn\nprint(ans)", "ans = 6 * 8\nprint(ans)", "print(ans % 8 == 0)", "print(ans)"
        ),
        "\\boxed{48}",
    ],
    "recovered-2": [
        *_blocks(
            "import maths\nans = maths.prod([7, 9])",
            "import math\nans = math.prod([7, 9])\nprint(ans)",
            "print(ans % 9 == 0)",
            "print(ans)",
        ),
        "\\boxed{63}",
    ],
    # the answer is printed only by a block that then fails; the blocks after it run clean
    "ungrounded": [
        *_blocks("print(8 * 9)\n1 / 0", "x = 8 * 9", "print(x % 9 == 0)", "print(x > 70)"),
        "\\boxed{72}",
    ],
    # failed at the end
    "late-failure": [
        *_blocks("ans = 4 * 9\nprint(ans)", "print(ans % 9 == 0)", "print(ans)", "print(ans / 0)"),
        "\\boxed{36}",
    ],
}
RECOVERY_GOLDS = {
    "clean-1": 42,
    "clean-2": 45,
    "recovered-1": 48,
    "recovered-2": 63,
    "ungrounded": 72,
    "late-failure": 36,
}


def test_a_model_teachers_recovered_trajectories_are_kept_up_to_the_share(tmp_path) -> None:
    rows = [
        {"id": pid, "problem": f"Problem {pid}: what is {gold}?", "answer": str(gold)}
        for pid, gold in RECOVERY_GOLDS.items()
    ]
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = [{"problem_id": pid, "turns": t} for pid, t in RECOVERY_TURNS.items()]
    (tmp_path / "turns.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    out = tmp_path / "build"
    extra = (
        "--few-shot",
        "0",
        "--samples-per-problem",
        "1",
        "--decontam-benchmarks",
        "",
        "--recovery-share",
        "0.5",
    )
    assert build_sft.main(_args(tmp_path / "problems.jsonl", out, tmp_path / "turns.jsonl", *extra)) == 0
    records = {
        r["problem_id"]: r
        for r in map(json.loads, (out / "rollouts" / "samples.jsonl").read_text().splitlines())
    }
    assert {pid: r["exec_statuses"].count("error") for pid, r in records.items()} == {
        "clean-1": 0,
        "clean-2": 0,
        "recovered-1": 1,
        "recovered-2": 1,
        "ungrounded": 1,
        "late-failure": 1,
    }
    assert all(r["status"] == "correct" for r in records.values())
    import datasets

    def kept() -> list[str]:
        return sorted(datasets.load_from_disk(str(out / "dataset"))["id"])

    # 0.5: two recovered beside two clean
    assert kept() == ["clean-1", "clean-2", "recovered-1", "recovered-2"]
    # the slip is context: no token of a failed block's code is trained, the fix after it is
    student = load_tokenizer(str(smollm2_gguf()))
    for row in datasets.load_from_disk(str(out / "dataset")):
        trained = "".join(
            student.decode([t]) for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m
        )
        slip, fix = {"recovered-1": ("sevn", "6 * 8"), "recovered-2": ("maths", "math.prod")}.get(
            row["id"], ("```output\n", "print(ans)")
        )
        assert slip not in trained and fix in trained, (row["id"], trained)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["recovery"] == {
        "share": 0.5,
        "capped": True,
        "recovered": 2,
        "over_cap": 0,
        "kept": 2,
        "kept_share": 0.5,
        "failed_executions_kept": {"error": 2},
    }
    reasons = {e["problem_id"]: e["reason"] for e in stats["rejected_examples"]["exec_ok"]}
    assert "not recovered: the answer is not printed by a clean execution" in reasons["ungrounded"]
    assert "not recovered: the last execution ended in error" in reasons["late-failure"]
    assert "of which 2 recovered from a failed block (--recovery-share 0.5)" in format_funnel(stats)
    # a model teacher's share only filters: --refilter may change it. 0.3 of the kept set fits no
    # recovered one beside two clean (1 of 3 is over 0.3); 0 is the sources' clean-only rule
    assert build_sft.main(["--refilter", "--out", str(out), "--recovery-share", "0.3"]) == 0
    assert kept() == ["clean-1", "clean-2"]
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["recovery"]["over_cap"], _removed(out)["exec_ok"]) == (2, 4)
    assert "At most that share of the kept set may be recovered: 2 past it" in (out / "README.md").read_text()
    assert build_sft.main(["--refilter", "--out", str(out), "--recovery-share", "0"]) == 0
    assert kept() == ["clean-1", "clean-2"] and _removed(out)["exec_ok"] == 4
    assert "Recovered" not in (out / "README.md").read_text()


def test_grader_errors_are_reported_apart_and_graded_again_on_resume(source, tmp_path) -> None:
    out = tmp_path / "build"
    args = _args(source, out, SFT_DATA / "teacher_turns.jsonl", "--samples-per-problem", "1")
    assert build_sft.main(args) == 0
    samples = out / "rollouts" / "samples.jsonl"
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    for record in records:  # what a grader that crashed on sft-pass and timed out on sft-wrong-answer wrote
        if record["problem_id"] in ("sft-pass", "sft-wrong-answer"):
            timed_out = record["problem_id"] == "sft-wrong-answer"
            record |= {
                "status": "grader_timeout" if timed_out else "grader_error",
                "correct": False,
                "answer": None,
            }
    samples.write_text("".join(json.dumps(r) + "\n" for r in records))
    from thinc_bench.build_sft.dataset import finish

    stats = finish(
        BuildSFTConfig(**json.loads((out / "rollouts" / "config.json").read_text())["build_sft"]), out
    )
    removed = {s["name"]: s["removed"] for s in stats["funnel"]}
    # the crash is the infrastructure's: unknown, counted apart; the timeout is the teacher's answer
    # nobody can judge: rejected as such (issue 49's rule)
    assert (removed["ungraded"], removed["judgeable"], removed["correct"], stats["counts"]["kept"]) == (
        1,
        1,
        0,
        0,
    )
    assert stats["excluded"] == {"infrastructure": 1, "by_stage": {"infra_error": 0, "ungraded": 1}}
    assert build_sft.main(args) == 0  # the resume generates nothing and grades the crashed one again
    assert len(samples.read_text().splitlines()) == len(records) + 1
    assert _removed(out)["ungraded"] == 0 and _removed(out)["judgeable"] == 1  # sft-wrong-answer
    import datasets

    assert datasets.load_from_disk(str(out / "dataset"))["id"] == ["sft-pass"]


def test_a_build_that_keeps_nothing_still_writes_a_loadable_dataset(source, tmp_path) -> None:
    out = tmp_path / "build"
    assert build_sft.main(_args(source, out, SFT_DATA / "teacher_turns.jsonl", "--min-code-blocks", "9")) == 0
    import datasets

    dataset = datasets.load_from_disk(str(out / "dataset"))
    assert len(dataset) == 0 and "assistant_masks" in dataset.column_names
    assert "no trajectory passed every filter" in (out / "README.md").read_text()


def test_refilter_of_a_directory_without_a_build_is_a_config_error(tmp_path, capsys) -> None:
    assert build_sft.main(["--refilter", "--out", str(tmp_path / "none")]) == 2
    assert "build into --out first" in capsys.readouterr().err


def test_resume_after_kill_gives_the_same_dataset_as_an_uninterrupted_build(source, tmp_path) -> None:
    slow = tmp_path / "slow_turns.jsonl"
    lines = []
    for line in (SFT_DATA / "teacher_turns.jsonl").read_text().splitlines():
        row = json.loads(line)
        row["turns"][0] = row["turns"][0].replace(
            "```python\n", "```python\nimport time\ntime.sleep(0.25)\n", 1
        )
        lines.append(json.dumps(row))
    slow.write_text("\n".join(lines) + "\n")
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = [sys.executable, "-m", "thinc_bench.build_sft", *_args(source, killed, slow, "--concurrency", "1")]
    cmd += ["--samples-per-problem", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    samples = killed / "rollouts" / "samples.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not (
        samples.exists() and len(samples.read_text().splitlines()) >= 3
    ):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 3 <= len(samples.read_text().splitlines()) < 22, "the kill must land mid-run"
    assert not (killed / "stats.json").exists()
    assert subprocess.run(cmd, capture_output=True, timeout=180).returncode == 0
    keys = Counter(
        (r["problem_id"], r["sample_idx"]) for r in map(json.loads, samples.read_text().splitlines())
    )
    assert len(keys) == 22 and set(keys.values()) == {1}
    assert (
        build_sft.main([*_args(source, clean, slow, "--concurrency", "1"), "--samples-per-problem", "2"]) == 0
    )
    import datasets

    def rows(out: Path) -> list[dict]:
        return sorted(datasets.load_from_disk(str(out / "dataset")), key=lambda r: (r["id"], r["sample_idx"]))

    assert rows(killed) == rows(clean) and len(rows(clean)) == 1
    assert _removed(killed) == _removed(clean) == EXPECTED_REMOVED


def test_bad_thresholds_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="max-plan-share"):
        BuildSFTConfig(teacher="t", max_plan_share=0)
    with pytest.raises(ConfigError, match="samples-per-problem"):
        BuildSFTConfig(teacher="t", samples_per_problem=0)


def test_demo_preset_applies_only_without_a_teacher(shared_data) -> None:  # the demo reads ../shared/data
    demo = BuildSFTConfig()
    assert (demo.limit, demo.samples_per_problem, demo.exec_on, demo.student_tokenizer) == (
        3,
        1,
        "code_close",
        "bundled-smollm2",
    )
    paper = BuildSFTConfig(teacher="Qwen/Qwen3.5-27B")
    assert (paper.samples_per_problem, paper.max_tokens, paper.student_tokenizer) == (
        4,
        32768,
        "Qwen/Qwen3-1.7B",
    )


@pytest.mark.slow
def test_real_smollm2_teacher_on_dapo_problems_completes_and_explains_its_funnel(
    shared_data, tmp_path
) -> None:
    out = tmp_path / "build"
    # 384 tokens (1000 took 2.4x as long): a budget below the prompt's length (its few-shot example),
    # so one that counted the prompt would leave no room at all.
    budget = 384
    args = ["--limit", "2", "--max-tokens", str(budget), "--out", str(out)]
    assert build_sft.main(args) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counts"]["trajectories"] == 2
    assert sum(s["removed"] for s in stats["funnel"]) + stats["counts"]["kept"] == 2
    records = [json.loads(line) for line in (out / "rollouts" / "samples.jsonl").read_text().splitlines()]
    for r in records:
        assert r["text"].startswith("```python\n")  # the demo prefill reached the teacher
        assert 0 < r["gen_tokens"] <= r["response_tokens"] <= budget  # the budget excludes the prompt,
        assert r["prompt_tokens"] > budget  # which alone is longer than the budget
        assert r["n_tool_calls"] == len(r["exec_statuses"])
    assert sum(stats["generation"]["finish_reasons"].values()) == 2
    import datasets

    dataset = datasets.load_from_disk(str(out / "dataset"))
    assert len(dataset) == stats["counts"]["kept"]
    assert "input_ids" in dataset.column_names and "assistant_masks" in dataset.column_names
    assert "Funnel" in (out / "report.html").read_text()


def test_a_natively_thinking_teachers_trajectory_is_what_follows_its_thinking(tmp_path) -> None:
    """--teacher-thinks: the teacher's own <think> (long, with arithmetic) never becomes the ThinC plan;
    the card states the rule; --teacher-chat-template-kwargs reaches the teacher's prompt."""
    source = tmp_path / "problems.jsonl"
    source.write_text(
        json.dumps({"id": "native", "problem": "Find the sum of the squares of 1, 2 and 3.", "answer": "14"})
        + "\n"
    )
    native = (
        "<think>\nOkay, 1 + 4 + 9 is 14, but let me follow the format and compute it in code.\n</think>\n\n"
    )
    turns = [
        native
        + "<think>\nSum the squares in code.\n</think>\n```python\nprint(sum(k * k for k in (1, 2, 3)))\n```\n```output",
        "\\boxed{14}",
    ]
    teacher = tmp_path / "teacher.jsonl"
    teacher.write_text(json.dumps({"problem_id": "native", "turns": turns}) + "\n")
    out = tmp_path / "build"
    kwargs = '{"enable_thinking": false}'
    args = _args(source, out, teacher, "--min-code-blocks", "1", "--teacher-thinks")
    assert (
        build_sft.main([*args, "--teacher-chat-template-kwargs", kwargs, "--decontam-benchmarks", "aime2025"])
        == 0
    )
    import datasets

    (row,) = list(datasets.load_from_disk(str(out / "dataset")))
    assert row["messages"][-1]["content"].startswith("<think>\nSum the squares in code.\n</think>\n```python")
    assert "Okay" not in row["messages"][-1]["content"]
    assert "after its first </think>" in (out / "README.md").read_text()
    config = json.loads((out / "rollouts" / "config.json").read_text())
    assert config["settings"]["chat_template_kwargs"] == kwargs


def test_a_tool_call_teacher_builds_examples_with_every_tool_turn_masked(
    tmp_path, qwen3_tokenizer_dir
) -> None:
    """--dialect tool_call: the teacher's and the student's prompts declare the tool; each kept example
    trains on the calls and the end-of-turn tokens, never on the template's tool turns."""
    source = tmp_path / "problems.jsonl"
    source.write_text(json.dumps({"id": "tc", "problem": "Find 2^10 + 1.", "answer": "1025"}) + "\n")

    def call(code: str) -> str:
        return (
            "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"
        )

    turns = [
        "<think>\nPower, then add one, in code.\n</think>\n\n" + call("x = 2**10\nprint(x)"),
        call("print(x + 1)"),
        "\\boxed{1025}",
    ]
    teacher = tmp_path / "teacher.jsonl"
    teacher.write_text(json.dumps({"problem_id": "tc", "turns": turns}) + "\n")
    out = tmp_path / "build"
    args = _args(
        source,
        out,
        teacher,
        "--min-code-blocks",
        "2",
        "--dialect",
        "tool_call",
        "--decontam-benchmarks",
        "aime2025",
    )
    args[args.index("--student-tokenizer") + 1] = str(qwen3_tokenizer_dir)
    assert build_sft.main([*args, "--tokenizer", str(qwen3_tokenizer_dir)]) == 0
    import datasets

    (row,) = list(datasets.load_from_disk(str(out / "dataset")))
    tokenizer = load_tokenizer(str(qwen3_tokenizer_dir))
    ids, mask = row["input_ids"], row["assistant_masks"]
    prompt = tokenizer.decode(ids[: mask.index(1)])
    assert '"name": "python"' in prompt.split("<tools>")[-1] and "```python" not in prompt
    n = mask.index(1)  # the first trajectory token: the prompt is all 0
    harness = tokenizer.decode([t for t, m in zip(ids[n:], mask[n:], strict=True) if not m])
    assert harness.count("<tool_response>") == 2 and "<tool_call>" not in harness
    model = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert (
        model.count("<tool_call>") == 2 and model.count("<|im_end|>") == 3 and "<tool_response>" not in model
    )


def test_a_stored_rollout_the_filter_stage_cannot_read_is_the_teachers_failure_not_the_end_of_the_build(
    source, tmp_path, monkeypatch
) -> None:
    out = tmp_path / "build"
    args = _args(source, out, SFT_DATA / "teacher_turns.jsonl", "--samples-per-problem", "1")
    assert build_sft.main(args) == 0
    kept = json.loads((out / "stats.json").read_text())["counts"]["kept"]
    from thinc_bench.build_sft import masks

    real = masks.tokenize_example

    def tokenize_example(tokenizer, messages, traj, **kwargs):  # noqa: ANN001, ANN202
        if "Find the sum of the squares" in str(messages):  # a bug met by sft-pass alone (issue 37)
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return real(tokenizer, messages, traj, **kwargs)

    monkeypatch.setattr(masks, "tokenize_example", tokenize_example)
    assert build_sft.main(["--refilter", "--out", str(out)]) == 0
    removed = _removed(out)
    # its text made processing raise: the teacher's failure, rejected and counted as such (issue 49),
    # never excluded as an outage
    assert (removed["processed"], removed["infra_error"]) == (1, 0)
    assert json.loads((out / "stats.json").read_text())["counts"]["kept"] == kept - 1
