"""`python -m thinc_bench.eval` end to end with the scripted backend (real sandbox, real grader)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from thinc_bench.backends import smollm2_gguf
from thinc_bench.errors import ConfigError
from thinc_bench.eval import EvalConfig, sample_seed
from thinc_bench.eval import __main__ as thinc_eval


def _records(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def _scripted_args(benchmark: Path, turns: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--backend",
        "scripted",
        "--model",
        str(turns),
        "--benchmarks",
        str(benchmark),
        "--out",
        str(out),
        *extra,
    ]


def test_scripted_run_grades_correct_grounded_thinc_trajectories(
    two_problem_benchmark, scripted_turns, tmp_path
):
    out = tmp_path / "run"
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "2")) == 0
    records = _records(out)
    assert len(records) == 4
    assert all(r["correct"] and r["grounded"] and r["style"] == "thinc" for r in records)
    assert {r["problem_id"]: r["n_tool_calls"] for r in records} == {"tiny-1": 1, "tiny-2": 2}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_benchmark"]["tiny"]["accuracy"]["value"] == 1.0
    assert summary["per_benchmark"]["tiny"]["tool_calls"]["mean"] == 1.5
    assert "tiny-2" in (out / "report.html").read_text()
    config = json.loads((out / "config.json").read_text())
    assert config["resolved"]["generator"]["backend"] == "scripted"
    assert config["resolved"]["sandbox"]["timeout_s"] == 10.0
    protections = config["resolved"]["sandbox"]["protections"]  # the sandbox's summary, with reasons
    assert protections["active"] and all(protections["inactive"].values())
    assert "sandbox protections" in (out / "report.html").read_text()


def test_recovery_k_injections_are_visible_in_the_records(two_problem_benchmark, scripted_turns, tmp_path):
    out = tmp_path / "run"
    thinc_eval.main(
        _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1", "--recovery-k", "1,2")
    )
    by_key = {(r["problem_id"], r["k"]): r for r in _records(out)}
    assert sorted(by_key) == [(p, k) for p in ("tiny-1", "tiny-2") for k in (0, 1, 2)]
    assert by_key[("tiny-2", 0)]["exec_statuses"] == ["ok", "ok"]
    assert by_key[("tiny-2", 1)]["exec_statuses"] == ["error", "error"]  # injected, then x undefined
    assert by_key[("tiny-2", 2)]["n_exec_errors"] == 2
    recovery = json.loads((out / "summary.json").read_text())["per_benchmark"]["tiny"]["recovery"]
    assert set(recovery) == {"1", "2"}
    assert recovery["1"]["clean_accuracy"] == 1.0


def test_other_settings_are_refused_in_the_same_directory(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1")) == 0
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "3")) == 2
    assert "other settings (differ: samples)" in capsys.readouterr().err
    assert len(_records(out)) == 2


def test_rerun_with_same_settings_runs_nothing_twice(two_problem_benchmark, scripted_turns, tmp_path):
    out = tmp_path / "run"
    args = _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "2")
    thinc_eval.main(args)
    thinc_eval.main([*args, "--concurrency", "1"])  # runtime settings may change on resume
    assert len(_records(out)) == 4


def test_resume_after_kill_9_loses_and_duplicates_nothing(two_problem_benchmark, tmp_path):
    turns = tmp_path / "slow_turns.jsonl"
    slow = (
        "<think>\\nwait\\n</think>\\n```python\\nimport time\\ntime.sleep(0.3)\\nprint(5)\\n```\\n```output"
    )
    turns.write_text(
        f'{{"problem_id": "tiny-1", "turns": ["{slow}", "\\\\boxed{{5}}"]}}\n'
        f'{{"problem_id": "tiny-2", "turns": ["{slow}", "\\\\boxed{{5}}"]}}\n'
    )
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "thinc_bench.eval",
        *_scripted_args(two_problem_benchmark, turns, out, "--samples", "6", "--concurrency", "2"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        samples = out / "samples.jsonl"
        if samples.exists() and len(samples.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(_records(out))
    assert 3 <= before < 12, "the kill must land mid-run"
    assert subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
    keys = Counter((r["problem_id"], r["sample_idx"], r["k"]) for r in _records(out))
    assert len(keys) == 12 and set(keys.values()) == {1}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_openai_outage_is_recorded_as_infra_errors_not_wrong_answers(two_problem_benchmark, tmp_path):
    out = tmp_path / "run"
    args = [
        "--backend",
        "openai",
        "--model",
        "smollm2",
        "--tokenizer",
        str(smollm2_gguf()),
        "--base-url",
        f"http://127.0.0.1:{_closed_port()}/v1",
        "--max-retries",
        "1",
        "--benchmarks",
        str(two_problem_benchmark),
        "--samples",
        "1",
        "--recovery-k",
        "0",
        "--out",
        str(out),
    ]
    assert thinc_eval.main(args) == 0
    records = _records(out)
    assert [r["status"] for r in records] == ["infra_error", "infra_error"]
    assert all("BackendUnavailable" in str(r["error"]) for r in records)
    block = json.loads((out / "summary.json").read_text())["per_benchmark"]["tiny"]
    assert block["n_infra_errors"] == 2
    assert "accuracy" not in block  # nothing scored: an outage is not 0% accuracy
    assert block["missing"] == {"count": 2, "ids": ["tiny-1", "tiny-2"]}  # reported, not dropped
    assert "Problems missing from accuracy" in (out / "report.html").read_text()


def test_demo_preset_applies_only_without_a_model() -> None:
    demo = EvalConfig(data_dir="unused")
    assert (demo.samples, demo.limit, demo.max_tokens, demo.exec_on) == (2, 2, 1024, "code_close")
    paper = EvalConfig(model="Qwen/Qwen3-1.7B")
    assert (paper.samples, paper.limit, paper.max_tokens, paper.benchmark_names[0]) == (
        16,
        None,
        32768,
        "aime2024",
    )
    assert (demo.recovery_ks, paper.recovery_ks) == (
        [0],
        [0, 1, 2, 3, 4, 5],
    )  # Recovery@k up to 5 (our default, docs/settings.md)
    assert EvalConfig(model="turns.jsonl", backend="scripted").recovery_ks == [0]
    assert EvalConfig(model="m", recovery_k="0,2").recovery_ks == [0, 2]


@pytest.mark.parametrize(("flag", "value"), [("shard", "2/2"), ("recovery_k", "a"), ("samples", 0)])
def test_bad_flags_are_config_errors(flag: str, value: object) -> None:
    with pytest.raises(ConfigError, match=flag.replace("_", "-")):
        EvalConfig(model="m", **{flag: value})


def test_a_trajectory_reaching_the_context_ends_alone_and_the_run_goes_on(
    two_problem_benchmark, scripted_turns, tmp_path
):
    base = tmp_path / "base"
    thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, base, "--samples", "1"))
    totals = {r["problem_id"]: r["total_tokens"] for r in _records(base)}
    assert totals["tiny-1"] < totals["tiny-2"]  # the one-block trajectory is the shorter
    out = tmp_path / "ctx"
    context = str(totals["tiny-1"])  # tiny-1 fits exactly, tiny-2 overflows
    extra = ("--samples", "1", "--context-length", context, "--max-tokens", str(totals["tiny-1"] - 1))
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra)) == 0
    records = {r["problem_id"]: r for r in _records(out)}
    assert records["tiny-1"]["correct"] and not records["tiny-1"]["context_exceeded"]
    cut = records["tiny-2"]
    assert (cut["finish_reason"], cut["context_exceeded"], cut["total_tokens"]) == (
        "max_tokens",
        True,
        totals["tiny-1"],
    )
    assert cut["status"] != "infra_error" and cut["error"] is None


def test_a_budget_the_context_cannot_hold_is_refused_at_start_with_both_numbers(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    extra = ("--context-length", "500", "--max-tokens", "500")
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, tmp_path / "r", *extra)) == 2
    message = capsys.readouterr().err
    assert "--max-tokens 500" in message and "context of 500 tokens" in message
    assert not (tmp_path / "r" / "samples.jsonl").exists() or not _records(tmp_path / "r")


def test_config_json_records_every_effective_sampling_setting(
    two_problem_benchmark, scripted_turns, tmp_path
):
    out = tmp_path / "run"
    extra = ("--samples", "1", "--top-k", "20", "--min-p", "0.05", "--limit", "1")
    thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra))
    sampling = json.loads((out / "config.json").read_text())["resolved"]["sampling"]
    assert sampling == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }


@pytest.mark.parametrize(
    ("flag", "value"),
    [("min_p", 1.5), ("repetition_penalty", 0.0), ("presence_penalty", 3.0), ("top_p", 0.0)],
)
def test_bad_sampling_flags_are_config_errors(flag: str, value: float) -> None:
    with pytest.raises(ConfigError, match=flag):
        EvalConfig(model="m", **{flag: value})


def test_sample_seed_depends_on_the_sample_not_the_schedule() -> None:
    seeds = {sample_seed(0, "b", "p", i, 0) for i in range(100)}
    assert len(seeds) == 100
    assert sample_seed(0, "b", "p", 3, 0) == sample_seed(0, "b", "p", 3, 0)


@pytest.mark.slow
def test_demo_run_with_the_real_smollm2_writes_complete_consistent_records(two_problem_benchmark, tmp_path):
    out = tmp_path / "run"
    args = [
        "--benchmarks",
        str(two_problem_benchmark),
        "--samples",
        "2",
        "--max-tokens",
        "900",
        "--out",
        str(out),
    ]
    assert thinc_eval.main(args) == 0
    records = _records(out)
    assert sorted((r["problem_id"], r["sample_idx"]) for r in records) == [
        ("tiny-1", 0),
        ("tiny-1", 1),
        ("tiny-2", 0),
        ("tiny-2", 1),
    ]
    statuses = {"correct", "incorrect", "no_answer", "unparseable_answer", "grader_timeout", "grader_error"}
    for r in records:
        assert r["status"] in statuses and r["correct"] == (r["status"] == "correct")
        assert 0 < r["gen_tokens"] <= r["response_tokens"] <= 900  # the budget excludes the prompt
        assert r["total_tokens"] == r["prompt_tokens"] + r["response_tokens"]
        assert r["n_tool_calls"] == len(r["exec_statuses"])
        assert r["n_exec_errors"] == sum(s != "ok" for s in r["exec_statuses"])
        assert r["text"].startswith("```python\n")  # the demo's prefill
        assert r["finish_reason"] in {"answer", "eos", "max_tokens", "max_tool_calls"}
    assert any(r["n_tool_calls"] > 0 for r in records), "the real model's code must reach the sandbox"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_benchmark"]["tiny"]["accuracy"]["n_samples"] == 4
    assert (out / "report.html").stat().st_size > 1000
    assert json.loads((out / "config.json").read_text())["resolved"]["generator"]["backend"] == "hf"


def test_resume_retries_samples_lost_to_infrastructure(two_problem_benchmark, scripted_turns, tmp_path):
    out = tmp_path / "run"
    args = _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1")
    thinc_eval.main(args)
    lines = (out / "samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {
        "status": "infra_error",
        "correct": False,
        "error": "BackendUnavailable: down",
    }
    (out / "samples.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert thinc_eval.main(args) == 0
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 3  # the retry is appended; the store reads the last record per sample
    summary = json.loads((out / "summary.json").read_text())["per_benchmark"]["tiny"]
    assert summary["n_infra_errors"] == 0 and summary["accuracy"]["n_samples"] == 2


COUNT_PROBLEM = "How many integers from 1 to 100 are divisible by 3 or by 5?"
THINC_TURNS = [
    "<think>\nLoop over the integers up to the bound and test each divisibility condition.\n</think>\n"
    "```python\nprint(sum(1 for n in range(1, 101) if n % 3 == 0 or n % 5 == 0))\n```\n```output",
    "The count is \\boxed{47}.",
]
INTERLEAVED_TURNS = [
    "There are 33 multiples of 3 and 20 of 5, and 6 of 15, so the count is 47. Let me verify.\n"
    "<code>\nprint(33 + 20 - 6)\n</code>\n<interpreter>",
    "The code confirms it, so the answer is \\boxed{47}.",
]


def _one_problem_run(tmp_path: Path, name: str, turns: list[str], *extra: str) -> Path:
    bench = tmp_path / f"{name}.jsonl"
    bench.write_text(json.dumps({"id": "count", "problem": COUNT_PROBLEM, "answer": "47"}) + "\n")
    script = tmp_path / f"{name}-turns.jsonl"
    script.write_text(json.dumps({"problem_id": "count", "turns": turns}) + "\n")
    out = tmp_path / f"{name}-run"
    assert thinc_eval.main(_scripted_args(bench, script, out, "--samples", "1", *extra)) == 0
    return out


def test_scripted_eval_measures_the_tir_failure_modes_in_both_dialects(tmp_path):
    thinc = _one_problem_run(tmp_path, "thinc", THINC_TURNS)
    interleaved = _one_problem_run(
        tmp_path, "interleaved", INTERLEAVED_TURNS, "--dialect", "xml", "--system-prompt", "interleaved"
    )
    (t,) = _records(thinc)
    (i,) = _records(interleaved)
    assert (t["correct"], i["correct"]) == (True, True)
    assert (t["posthoc"], t["nl_literals"]) == (False, [])
    assert (i["posthoc"], i["nl_literals"]) == (True, ["33", "20"])
    assert all(t["checks"].values()) and not i["checks"]["has_plan"]
    assert 0 < t["nl_ratio"] < 0.2 < 0.5 < i["nl_ratio"]
    assert (
        t["prompt_tokens"] > 0 and t["gen_tokens"] < t["response_tokens"]
    )  # the output block is not the model's
    assert t["prompt_tokens"] + t["response_tokens"] == t["total_tokens"]
    modes = {
        name: json.loads((out / "summary.json").read_text())["per_benchmark"][name]["failure_modes"]
        for name, out in (("thinc", thinc), ("interleaved", interleaved))
    }
    assert modes["thinc"]["posthoc"]["value"] == 0.0 and modes["interleaved"]["posthoc"]["value"] == 1.0
    assert (
        modes["interleaved"]["nl_literals"]["value"] == 1.0
        and modes["interleaved"]["nl_literals_mean"] == 2.0
    )
    html = (interleaved / "report.html").read_text()
    assert "post-hoc" in html and "NL literals" in html


def test_a_synthetic_gpqa_file_runs_end_to_end_through_the_cli(tmp_path):
    from thinc_bench import benchmarks

    source = Path(__file__).parents[1] / "data" / "gpqa_synthetic.jsonl"
    bench = tmp_path / "gpqa_diamond.jsonl"
    bench.write_text(source.read_text())
    problems = benchmarks.load(str(bench))
    lines = []
    for problem, row in zip(problems, map(json.loads, source.read_text().splitlines()), strict=True):
        (shown,) = [x for x in problem.problem.splitlines() if x.endswith(f") {row['Correct Answer']}")]
        lines.append({"problem_id": problem.id, "turns": [f"Reading the options, \\boxed{{({shown[1]})}}"]})
    script = tmp_path / "turns.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "run"
    assert thinc_eval.main(_scripted_args(bench, script, out, "--samples", "1")) == 0
    records = _records(out)
    assert len(records) == 3 and all(r["correct"] for r in records)
    assert all(r["gold"] in "ABCD" and r["meta"]["options"][r["gold"]] == "Correct Answer" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_benchmark"]["gpqa_diamond"]["accuracy"]["value"] == 1.0


def test_a_run_that_fails_at_start_leaves_its_out_free_for_the_fixed_command(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    typo = _scripted_args(two_problem_benchmark, tmp_path / "turns-typo.jsonl", out, "--samples", "1")
    assert thinc_eval.main(typo) == 2
    assert "turns-typo.jsonl" in capsys.readouterr().err
    assert not out.exists()  # nothing written before the run could start
    budget = ("--samples", "1", "--context-length", "500", "--max-tokens", "500")
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *budget)) == 2
    assert not out.exists()
    fixed = _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1")
    assert thinc_eval.main(fixed) == 0
    assert len(_records(out)) == 2


def test_a_directory_with_no_sample_yet_takes_new_settings(two_problem_benchmark, scripted_turns, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"settings": {"model": "old"}, "config_hash": "0" * 16}))
    (out / "prompts.jsonl").write_text('{"benchmark": "tiny", "problem_id": "tiny-1", "text": "stale"}\n')
    alias = [
        "--output-dir" if a == "--out" else a
        for a in _scripted_args(two_problem_benchmark, scripted_turns, out)
    ]
    assert thinc_eval.main([*alias, "--samples", "1"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["model"] == str(scripted_turns) and config["settings"]["samples"] == 1
    assert "stale" not in (out / "prompts.jsonl").read_text()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--num-samples", "3"], "unknown flag --num-samples; did you mean --samples?"),
        (["--temprature=0.5"], "unknown flag --temprature; did you mean --temperature?"),
        (["--zzzz"], "unknown flag --zzzz; see --help"),
    ],
)
def test_an_unknown_flag_is_one_line_naming_the_closest_and_exit_2(argv, expected):
    fails_fast = ["--backend", "scripted", "--model", "/nonexistent/turns.jsonl"]  # were the flag accepted
    proc = subprocess.run(
        [sys.executable, "-m", "thinc_bench.eval", *fails_fast, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {expected}"


def test_the_plan_line_counts_the_trajectories_the_run_makes(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    extra = ("--samples", "3", "--recovery-k", "0,2")
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra)) == 0
    captured = capsys.readouterr()
    (line,) = [x for x in captured.err.splitlines() if x.startswith("plan: ")]
    assert "tiny 2 problems x 3 samples x 2 k (0,2) = 12 trajectories (12 to run)" in line
    assert "backend scripted" in line and "budget 32768 tokens" in line
    assert len(_records(out)) == 12
    header = captured.out.splitlines()[0]
    assert header.split()[-1] == "R@2"  # every k that ran is in the terminal table
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra)) == 0
    assert "= 12 trajectories (0 to run, 12 saved)" in capsys.readouterr().err


def test_recovery_samples_sets_the_samples_of_the_injected_failure_runs_only(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    extra = ("--samples", "3", "--recovery-k", "0,1,2", "--recovery-samples", "1")
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra)) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("plan: ")]
    assert "(0,1,2; 1 samples each k > 0) = 10 trajectories" in line  # 2 x 3 clean + 2 x 1 x 2 faulted
    per_k = {
        k: sorted((r["problem_id"], r["sample_idx"]) for r in _records(out) if r["k"] == k) for k in (0, 1, 2)
    }
    assert per_k[0] == [(p, i) for p in ("tiny-1", "tiny-2") for i in range(3)]
    assert per_k[1] == per_k[2] == [("tiny-1", 0), ("tiny-2", 0)]
    block = json.loads((out / "summary.json").read_text())["per_benchmark"]["tiny"]
    assert block["accuracy"]["n_samples"] == 6 and block["n_samples"] == 3  # avg@3 clean, untouched
    assert block["recovery"]["1"]["saw_k"]["denominator"] == 2
    # the flag is a setting of the run: resuming with another value is refused, not mixed
    other = _scripted_args(two_problem_benchmark, scripted_turns, out, *extra[:-1], "2")
    assert thinc_eval.main(other) != 0
    assert "recovery_samples" in capsys.readouterr().err


def test_sigint_saves_what_finished_says_how_to_resume_and_the_rerun_completes(
    two_problem_benchmark, tmp_path
):
    turns = tmp_path / "sleepy_turns.jsonl"
    sleepy = "<think>\nwait\n</think>\n```python\nimport time\ntime.sleep(0.5)\nprint(5)\n```\n```output"
    turns.write_text(
        "".join(
            json.dumps({"problem_id": pid, "turns": [sleepy, "\\boxed{5}"]}) + "\n"
            for pid in ("tiny-1", "tiny-2")
        )
    )
    out = tmp_path / "run"
    args = _scripted_args(two_problem_benchmark, turns, out, "--samples", "8", "--concurrency", "2")
    cmd = [sys.executable, "-m", "thinc_bench.eval", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    samples = out / "samples.jsonl"
    while time.monotonic() < deadline and not (
        samples.exists() and len(samples.read_text().splitlines()) >= 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    (line,) = [x for x in stderr.splitlines() if x.startswith("interrupted")]
    saved = len(_records(out))
    assert 2 <= saved < 16, "the signal must land mid-run"
    assert f"interrupted: {saved} of 16 trajectories saved in {out}" in line
    resume = line.split("resume with: ", 1)[1]
    assert resume == shlex.join(["python", "-m", "thinc_bench.eval", *args])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] == {"saved": saved, "planned": 16, "problems": {"tiny": 2}}
    report = (out / "report.html").read_text()
    assert "Incomplete run" in report and re.search(r"\d of 2 problems · run interrupted", report)
    assert subprocess.run(cmd, capture_output=True, timeout=300).returncode == 0
    keys = Counter((r["problem_id"], r["sample_idx"], r["k"]) for r in _records(out))
    assert len(keys) == 16 and set(keys.values()) == {1}
    assert "partial" not in json.loads((out / "summary.json").read_text())


def test_ctrl_c_while_the_report_is_written_says_every_trajectory_was_saved(
    two_problem_benchmark, scripted_turns, tmp_path, capsys, monkeypatch
):
    import thinc_bench.report

    real = thinc_bench.report.write_report

    def interrupted(run_dir):  # the user's Ctrl-C lands while the report is being rendered
        raise KeyboardInterrupt

    monkeypatch.setattr(thinc_bench.report, "write_report", interrupted)
    out = tmp_path / "run"
    args = _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1")
    assert thinc_eval.main(args) == 130
    err = capsys.readouterr().err
    assert "nothing was saved" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("interrupted")]
    assert f"2 of 2 trajectories saved in {out}" in line and line.endswith(
        shlex.join(["python", "-m", "thinc_bench.eval", *args])
    )
    assert len(_records(out)) == 2 and not (out / "report.html").exists()
    monkeypatch.setattr(thinc_bench.report, "write_report", real)
    assert thinc_eval.main(args) == 0 and (out / "report.html").is_file()


def test_raising_limit_extends_the_run_and_lowering_it_is_refused(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    args = _scripted_args(two_problem_benchmark, scripted_turns, out, "--samples", "1")
    assert thinc_eval.main([*args, "--limit", "1"]) == 0
    assert [r["problem_id"] for r in _records(out)] == ["tiny-1"]
    capsys.readouterr()
    assert thinc_eval.main([*args, "--limit", "2"]) == 0
    assert "= 2 trajectories (1 to run, 1 saved)" in capsys.readouterr().err
    assert sorted(r["problem_id"] for r in _records(out)) == ["tiny-1", "tiny-2"]
    assert json.loads((out / "config.json").read_text())["settings"]["limit"] == 2
    assert thinc_eval.main([*args, "--limit", "1"]) == 2
    assert "differ: limit" in capsys.readouterr().err


def test_bundled_smollm2_names_the_tokenizer_and_a_missing_model_folder_says_so(
    two_problem_benchmark, scripted_turns, tmp_path, capsys
):
    out = tmp_path / "run"
    extra = ("--samples", "1", "--limit", "1", "--tokenizer", "bundled-smollm2")
    assert thinc_eval.main(_scripted_args(two_problem_benchmark, scripted_turns, out, *extra)) == 0
    tokenizer = json.loads((out / "config.json").read_text())["resolved"]["generator"]["tokenizer"]
    assert tokenizer == "bundled-smollm2"
    missing = ["--model", str(tmp_path / "smol-hff"), "--benchmarks", str(two_problem_benchmark)]
    assert thinc_eval.main([*missing, "--out", str(tmp_path / "typo")]) == 2
    error = capsys.readouterr().err
    assert f"no model at '{tmp_path / 'smol-hff'}': no such folder or file" in error
    assert "Repo id" not in error and not (tmp_path / "typo").exists()


def test_several_servers_by_comma_list_or_repeated_flag_and_replicas_not_hashed() -> None:
    base = ["--model", "m", "--backend", "openai"]
    repeated = thinc_eval.parse_config(
        [*base, "--base-url", "http://a:8000/v1,http://b:8000/v1", "--base-url", "http://c:8000/v1"]
    )
    assert repeated.backend_options()["base_url"] == "http://a:8000/v1,http://b:8000/v1,http://c:8000/v1"
    one = thinc_eval.parse_config([*base, "--base-url", "http://a:8000/v1"])
    assert one.settings()["base_url"] == "http://a:8000/v1"  # a one-server run hashes as it always did
    dp = thinc_eval.parse_config(["--model", "m", "--backend", "vllm", "--data-parallel-size", "8"])
    assert dp.backend_options() == {"data_parallel_size": 8}
    assert dp.settings() == thinc_eval.parse_config(["--model", "m", "--backend", "vllm"]).settings()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--limit", "-3"], "--limit -3: use a positive number"),
        (["--limit", "0"], "--limit 0: use a positive number"),
        (["--benchmarks", "nano,nano_unseen,nano"], "names nano more than once"),
    ],
)
def test_bad_limits_and_repeated_benchmarks_are_one_line_before_anything_runs(
    flags, says, tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    args = ["--model", str(tmp_path / "no-such-model"), "--benchmarks", "nano", *flags, "--out", str(out)]
    assert thinc_eval.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--benchmark-limits", "nano_ranges=4"], "--benchmark-limits 'nano_ranges=4': write name=N"),
        (["--benchmark-limits", "nano=0"], "--benchmark-limits 'nano=0'"),
        (["--benchmark-limits", "nano"], "--benchmark-limits 'nano'"),
        (["--recovery-benchmarks", "nano_families"], "--recovery-benchmarks names nano_families, not in"),
    ],
)
def test_bad_per_benchmark_flags_are_one_line_before_anything_runs(flags, says, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    args = ["--model", str(tmp_path / "no-such-model"), "--benchmarks", "nano,nano_unseen", *flags]
    assert thinc_eval.main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err
    assert not out.exists()


def test_per_benchmark_limits_and_recovery_parts_plan_the_right_trajectories(tmp_path) -> None:
    from thinc_bench.eval.run import load_problems, plan

    config = thinc_eval.parse_config(
        [
            *("--backend", "scripted", "--model", str(tmp_path / "turns.jsonl")),
            *("--benchmarks", "nano,nano_unseen,nano_ranges", "--limit", "2"),
            *("--benchmark-limits", "nano_ranges=5", "--recovery-k", "0,1,2"),
            *("--recovery-benchmarks", "nano", "--samples", "3", "--recovery-samples", "1"),
        ]
    )
    problems = load_problems(config)
    assert Counter(p.benchmark for p in problems) == {"nano": 2, "nano_unseen": 2, "nano_ranges": 5}
    trajectories = Counter((problem.benchmark, k) for problem, _, k in plan(config, problems))
    # clean: 3 samples of all 9 problems; k = 1, 2: one sample of nano's 2 problems only
    assert trajectories == {
        ("nano", 0): 6,
        ("nano_unseen", 0): 6,
        ("nano_ranges", 0): 15,
        ("nano", 1): 2,
        ("nano", 2): 2,
    }
    default = thinc_eval.parse_config(
        [*("--backend", "scripted", "--model", "t.jsonl", "--benchmarks", "nano", "--limit", "1")]
    )
    assert "benchmark_limits" not in default.settings() and "recovery_benchmarks" not in default.settings()
    assert config.settings()["benchmark_limits"] == "nano_ranges=5"  # part of the config hash


def test_a_benchmark_file_with_other_columns_says_to_rename_them_not_to_pass_a_flag(tmp_path) -> None:
    from thinc_bench import benchmarks
    from thinc_bench.errors import DatasetError

    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "1+1?", "answer": "2"}) + "\n")
    with pytest.raises(DatasetError) as caught:
        benchmarks.load(str(path))
    message = str(caught.value)
    assert "no column 'problem'" in message and "question" in message
    assert "rename the file's column to 'problem'" in message and "pass the right" not in message
