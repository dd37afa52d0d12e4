"""The ThinC-nano chain's plan, without running a model: which stage waits for which, what runs side by
side, what a failure stops, and that every column is evaluated the same way at the precision asked for.

The stages here are real subprocesses (`python -c`) that log when they start and end, so the order
checked is the order the processes actually ran in.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _nano():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("recipes_nano_chain", REPO / "recipes" / "nano.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


nano = _nano()


def _stage(log: Path, name: str, seconds: float = 0.3, code: int = 0) -> list[list[str]]:
    """One command that appends `start NAME t` and `end NAME t` to `log` around a sleep, then exits `code`."""
    script = (
        "import sys, time\n"
        f"open({str(log)!r}, 'a').write(f'start {name} {{time.monotonic()}}\\n')\n"
        f"time.sleep({seconds})\n"
        f"open({str(log)!r}, 'a').write(f'end {name} {{time.monotonic()}}\\n')\n"
        f"sys.exit({code})\n"
    )
    return [[sys.executable, "-c", script]]


def _events(log: Path) -> dict[tuple[str, str], float]:
    return {
        (kind, name): float(t) for kind, name, t in (line.split() for line in log.read_text().splitlines())
    }


NEEDS = {"a": (), "b": ("a",), "c": (), "d": ("b", "c")}
ORDER = ("a", "b", "c", "d")


def test_side_by_side_a_stage_starts_only_after_what_it_needs_and_independent_ones_overlap(tmp_path) -> None:
    log = tmp_path / "events"
    steps = {name: _stage(log, name) for name in NEEDS}
    times: dict[str, float] = {}
    ok = nano.run_chain(
        list(NEEDS), steps, jobs=2, needs=NEEDS, priority=ORDER, done=lambda s, t: times.setdefault(s, t)
    )
    assert ok and set(times) == set(NEEDS) and all(t >= 0.3 for t in times.values())
    ev = _events(log)
    for stage, needed in NEEDS.items():
        for n in needed:
            assert ev[("start", stage)] >= ev[("end", n)], f"{stage} started before {n} ended"
    assert ev[("start", "c")] < ev[("end", "a")]  # c needs nothing: it ran beside a, not after it


def test_one_job_runs_the_stages_one_at_a_time_in_priority_order(tmp_path) -> None:
    log = tmp_path / "events"
    assert nano.run_chain(
        list(NEEDS), {n: _stage(log, n, 0.05) for n in NEEDS}, jobs=1, needs=NEEDS, priority=ORDER
    )
    ev = sorted(_events(log).items(), key=lambda item: item[1])
    assert [name for (kind, name), _ in ev if kind == "start"] == list(ORDER)
    assert all(ev[i][0][0] != ev[i + 1][0][0] for i in range(len(ev) - 1))  # start, end, start, end...


def test_after_a_failure_nothing_new_starts_and_the_stage_that_needs_it_never_runs(tmp_path) -> None:
    log = tmp_path / "events"
    steps = {n: _stage(log, n, 0.05, code=1 if n == "a" else 0) for n in NEEDS}
    passed: list[str] = []
    ok = nano.run_chain(
        list(NEEDS), steps, jobs=2, needs=NEEDS, priority=ORDER, done=lambda s, t: passed.append(s)
    )
    started = {name for kind, name in _events(log) if kind == "start"}
    assert not ok and "a" not in passed
    assert "b" not in started and "d" not in started  # they need a (d through b)
    assert started <= {"a", "c"}  # c may have started beside a; it is let finish


def test_a_stage_outside_the_run_counts_as_done_so_a_resumed_chain_starts_at_once(tmp_path) -> None:
    log = tmp_path / "events"
    assert nano.run_chain(
        ["b", "d"], {n: _stage(log, n, 0.05) for n in ("b", "d")}, jobs=2, needs=NEEDS, priority=ORDER
    )
    ev = _events(log)
    assert ev[("start", "d")] >= ev[("end", "b")]


def test_every_stage_is_planned_and_needs_only_stages_before_it() -> None:
    assert set(nano.NEEDS) == set(nano.STAGES) == set(nano.PRIORITY)
    for stage, needed in nano.NEEDS.items():
        assert all(nano.STAGES.index(n) < nano.STAGES.index(stage) for n in needed), stage


def _args(tmp_path: Path, *flags: str):  # noqa: ANN202
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(nano.NanoArgs).parse_args_into_dataclasses(
        args=["--out", str(tmp_path / "nano"), *flags]
    )
    return args


def _flag(command: list[str], name: str) -> str | None:
    for i, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.partition("=")[2]
        if arg == name:
            return command[i + 1]
    return None


@pytest.mark.parametrize(("dtype", "bf16"), [("float32", "false"), ("bfloat16", "true"), ("auto", None)])
def test_every_column_is_evaluated_alike_at_the_precision_asked_for(tmp_path, dtype, bf16) -> None:
    commands = nano._commands(_args(tmp_path, "--dtype", dtype))
    evals = [c for stage, (steps, _) in commands.items() for c in steps if "thinc_bench.eval" in c]
    assert len(evals) == 8  # base, NL, ThinC, GRPO x 2 seeds; recovery arm: ThinC at k=1, recovery, injected
    for flag in ("--dtype", "--max-tokens", "--max-tool-calls", "--limit", "--max-batch-size"):
        assert len({_flag(c, flag) for c in evals}) == 1, flag  # one budget, one test size, one precision
    assert _flag(evals[0], "--dtype") == dtype
    column = {Path(str(_flag(c, "--out"))).name: c for c in evals}
    parts = "nano,nano_unseen,nano_families"
    scored = {name: _flag(c, "--benchmarks") for name, c in column.items()}
    # the ThinC checkpoints (SFT and both GRPO seeds) on the matched-pair part beside the three, 48 pairs
    assert scored == {
        **dict.fromkeys(("base-code-close", "sft-nl", "sft-k1", "sft-recovery", "grpo-inject"), parts),
        **dict.fromkeys(("sft", "grpo", "grpo-seed1"), f"{parts},nano_pairs"),
    }
    assert {_flag(column[n], "--benchmark-limits") for n in ("sft", "grpo", "grpo-seed1")} == {
        "nano_pairs=96"
    }
    # Recovery@1 only in the recovery arm, where the clean runs solve something
    recovery = {
        name: (_flag(c, "--recovery-k"), _flag(c, "--recovery-benchmarks")) for name, c in column.items()
    }
    assert {recovery[n] for n in ("sft-k1", "sft-recovery", "grpo-inject")} == {("0,1", "nano,nano_unseen")}
    assert {recovery[n][0] for n in ("base-code-close", "sft-nl", "sft", "grpo", "grpo-seed1")} == {"0"}
    training = [
        c
        for steps, _ in commands.values()
        for c in steps
        if any(a.endswith(("sft.py", "grpo.py")) for a in c)
    ]
    assert len(training) == 6 and all(_flag(c, "--bf16") == bf16 for c in training)


def test_grpo_runs_twice_from_the_sft_checkpoint_with_two_seeds_and_only_the_final_policy_is_scored(
    tmp_path,
) -> None:
    out = tmp_path / "nano"
    commands = nano._commands(_args(tmp_path))
    runs = {stage: commands[stage][0][0] for stage in ("grpo", "grpo-seed1")}
    assert {_flag(c, "--model_name_or_path") for c in runs.values()} == {str(out / "sft")}
    assert [_flag(c, "--seed") for c in runs.values()] == ["0", "1"]
    assert [_flag(c, "--output_dir") for c in runs.values()] == [str(out / "grpo"), str(out / "grpo-seed1")]
    assert len({_flag(c, "--config") for c in runs.values()}) == 1  # one configuration, two seeds
    models = [_flag(c, "--model") for steps, _ in commands.values() for c in steps if "thinc_bench.eval" in c]
    assert str(out / "grpo") in models and str(out / "grpo-seed1") in models
    assert not [m for m in models if "stage" in Path(str(m)).name]  # the checkpoint named before the run
    assert nano.NAMED_CHECKPOINT == "final"
    # the report pairs each seed with its start and the two seeds with each other (their spread)
    (report,) = commands["report"][0]
    paired = report[report.index("--paired") + 1 : report.index("--title")]
    assert "ThinC SFT + GRPO, seed 1:ThinC SFT + GRPO, seed 0" in paired
    assert {"ThinC SFT + GRPO, seed 0:ThinC SFT", "ThinC SFT + GRPO, seed 1:ThinC SFT"} <= set(paired)
    logs = report[report.index("--training_log") + 1 : report.index("--paired")]
    assert logs == [str(out / "grpo"), str(out / "grpo-seed1")]


def test_the_matched_pair_part_takes_whole_pairs_and_session_11s_part_only_when_asked(tmp_path) -> None:
    (sft,) = nano._commands(_args(tmp_path, "--pairs-problems", "0"))["eval-sft"][0]
    assert (
        _flag(sft, "--benchmarks") == "nano,nano_unseen,nano_families"
        and _flag(sft, "--benchmark-limits") is None
    )
    (sft,) = nano._commands(_args(tmp_path, "--ranges-problems", "48"))["eval-sft"][0]
    assert _flag(sft, "--benchmarks") == "nano,nano_unseen,nano_families,nano_pairs,nano_ranges_confirm"
    assert _flag(sft, "--benchmark-limits") == "nano_pairs=96,nano_ranges_confirm=48"
    for bad in ("7", "-2"):
        with pytest.raises(SystemExit, match=f"--pairs-problems {bad}: use 0 .* even"):
            nano._commands(_args(tmp_path, "--pairs-problems", bad))


def test_recovery_continues_the_thinc_checkpoint_and_injected_grpo_starts_from_it(tmp_path) -> None:
    out = tmp_path / "nano"
    commands = nano._commands(_args(tmp_path))
    (recovery,), _ = commands["sft-recovery"]
    assert _flag(recovery, "--model_name_or_path") == str(out / "sft")
    assert _flag(recovery, "--dataset_name") == str(out / "sft-data-recovery" / "dataset")
    (inject,), _ = commands["grpo-inject"]
    (plain,), _ = commands["grpo"]
    assert _flag(inject, "--model_name_or_path") == str(out / "sft-recovery")
    assert _flag(plain, "--model_name_or_path") == str(out / "sft")
    assert (
        float(_flag(inject, "--inject_failures_share") or 0) > 0
        and _flag(plain, "--inject_failures_share") is None
    )
    import yaml

    steps = {
        name: [
            stage["max_steps"]
            for stage in yaml.safe_load(Path(str(_flag(c, "--config"))).read_text())["curriculum"]
        ]
        for name, c in (("inject", inject), ("plain", plain))
    }
    assert steps == {"inject": [nano.INJECT_STEPS] * 2, "plain": [4, 4]}
    (build,) = commands["data-recovery"][0]
    assert _flag(build, "--recovery-share") == "1" and _flag(build, "--limit") == str(nano.RECOVERY_EXAMPLES)
    assert len(commands["data"][0]) == 2  # the registered chain builds no recovery data
    (page,) = commands["report-recovery"][0]
    assert page[-1] == "reports/nano-recovery.html" and "ThinC SFT=" + str(out / "eval" / "sft-k1") in page


def test_each_arm_runs_its_own_stages_and_keeps_its_own_times(tmp_path, monkeypatch) -> None:
    out = tmp_path / "nano"
    out.mkdir()
    ran: list[str] = []
    monkeypatch.setattr(nano, "_commands", lambda args: {s: ([], out / f"{s}.missing") for s in nano.STAGES})
    monkeypatch.setattr(nano, "run_chain", lambda todo, steps, **kw: ran.extend(todo) or True)
    assert nano.main(["--out", str(out), "--dtype", "float32"]) == 0
    assert ran == list(nano.MAIN_STAGES) and "recovery" not in " ".join(ran)
    assert (out / "plan.txt").read_text() == nano.REGISTERED_PLAN and (out / "timings.json").is_file()
    chain = (out / "timings.json").read_text()
    ran.clear()
    assert nano.main(["--out", str(out), "--arm", "recovery"]) == 0
    assert ran == ["data", "sft", *nano.RECOVERY_STAGES] and (out / "timings-recovery.json").is_file()
    assert (out / "timings.json").read_text() == chain  # the registered chain's times are untouched
    assert nano.PRIORITY.index("grpo-seed1") < nano.PRIORITY.index(
        "eval-sft"
    )  # both seeds side by side first


def test_the_threads_are_shared_out_among_the_jobs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert nano._threads(_args(tmp_path)) == (2, 1)
    assert nano._threads(_args(tmp_path, "--jobs", "1")) == (1, 2)
    assert nano._threads(_args(tmp_path, "--threads", "8")) == (2, 4)
    assert nano._threads(_args(tmp_path, "--threads", "1")) == (1, 1)  # never two jobs on one thread
    with pytest.raises(SystemExit, match="--jobs 0"):
        nano._threads(_args(tmp_path, "--jobs", "0"))


def test_a_timings_file_of_the_old_layout_is_read_as_stage_times(tmp_path, monkeypatch) -> None:
    out = tmp_path / "nano"
    out.mkdir()
    (out / "timings.json").write_text(json.dumps({"data": 39.0, "sft": 501.0}))
    (out / "x").write_text("")  # data complete: skipped; sft (no command here) runs again
    monkeypatch.setattr(
        nano,
        "_commands",
        lambda args: {s: ([], out / ("missing" if s == "sft" else "x")) for s in nano.STAGES},
    )
    assert nano.main(["--out", str(out), "--stages", "data,sft", "--dtype", "float32"]) == 0
    timings = json.loads((out / "timings.json").read_text())
    assert timings["stages"]["data"] == 39.0 and timings["stages"]["sft"] < 501.0  # kept, and run again
    assert timings["dtype"] == "float32" and timings["wall_this_run_s"] >= 0
    written = (out / "timings.json").read_text()
    (out / "missing").write_text("")  # now every stage is complete: a rerun writes nothing
    assert nano.main(["--out", str(out), "--stages", "data,sft"]) == 0
    assert (out / "timings.json").read_text() == written


def test_re_rendering_the_report_alone_keeps_the_chains_settings_and_wall_time(tmp_path, monkeypatch) -> None:
    out = tmp_path / "nano"
    out.mkdir()
    chain = {
        "stages": {"sft": 569.0},
        "dtype": "float32",
        "jobs": 2,
        "threads_per_job": 1,
        "wall_this_run_s": 2917.5,
    }
    (out / "timings.json").write_text(json.dumps(chain))
    monkeypatch.setattr(nano, "_commands", lambda args: {s: ([], out / f"{s}.missing") for s in nano.STAGES})
    assert nano.main(["--out", str(out), "--stages", "report", "--dtype", "auto"]) == 0
    timings = json.loads((out / "timings.json").read_text())
    assert (
        timings["dtype"] == "float32" and timings["wall_this_run_s"] == 2917.5
    )  # the chain's, not 0 s of auto
    assert "report" in timings["stages"] and timings["stages"]["sft"] == 569.0


def _summary():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(
        "recipes_nano_summary", REPO / "recipes" / "nano_summary.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_summary_decides_the_registered_plan_by_its_rule_from_the_runs(tmp_path) -> None:
    from report.synthetic import synthetic_run

    out = tmp_path / "nano"

    def ids(benchmark: str, p: int) -> str:
        return (
            f"nano-pair-{p // 2:04d}-{'in' if p % 2 == 0 else 'ex'}"
            if benchmark == "nano_pairs"
            else f"x-{p}"
        )

    def reads_up_to(n: int):  # noqa: ANN202 - right on both members of pairs below n, else the inclusive one
        return lambda pid, s: (
            pid.startswith("nano-pair") and (int(pid.split("-")[2]) < n or pid.endswith("-in"))
        )

    sizes = {"nano": 4, "nano_pairs": 20}
    for name, model, n in (("sft", "sft", 0), ("grpo", "s0", 8), ("grpo-seed1", "s1", 3)):
        synthetic_run(
            out / "eval" / name, model=model, sizes=sizes, samples=1, ids=ids, verdict=reads_up_to(n)
        )
    summary = _summary()
    text = summary.summarize(out, nano.COLUMNS, nano.PAIRS, nano.PRIMARY, nano.SPREAD)
    # problem 0 of each part lost its sample to the infrastructure: pair 0 is incomplete, 9 pairs count
    assert "| ThinC SFT | 0/3 | – | – | 0/9 | 100 % / 0 % |" in text
    assert "| ThinC SFT + GRPO, seed 0 | 0/3 | – | – | 7/9 |" in text
    assert "**matched pairs +77.8 ± 14.7 (z +5.3, exact p 0.016; 7 gained, 0 lost of 9)**" in text
    assert "not supported: 1 of 2 seeds gain matched pairs at p < 0.05" in text
    assert "Run-to-run spread, ThinC SFT + GRPO, seed 1 - ThinC SFT + GRPO, seed 0, by pair: -55.6" in text
    # 7 of 9 pairs: more than a bound-blind reader (at most a quarter) makes, P = 0.0013; 2 of 9: not
    assert "seed 0: 7/9, blind p 0.0013; ThinC SFT + GRPO, seed 1: 2/9, blind p 0.7" in text
    assert "1 of 2 seeds solve more pairs than a bound-blind reader can" in text
    # every seed clears the threshold: supported; a seed missing: not decided
    seed1 = out / "eval" / "grpo-seed1"
    import shutil

    shutil.rmtree(seed1)
    synthetic_run(seed1, model="s1b", sizes=sizes, samples=1, ids=ids, verdict=reads_up_to(9))
    text = summary.summarize(out, nano.COLUMNS, nano.PAIRS, nano.PRIMARY, nano.SPREAD)
    assert "**supported: every seed gains matched pairs over its SFT start at p < 0.05**" in text
    assert "2 of 2 seeds solve more pairs than a bound-blind reader can" in text
    shutil.rmtree(seed1)
    assert "not decided" in summary.summarize(out, nano.COLUMNS, nano.PAIRS, nano.PRIMARY, nano.SPREAD)
    assert summary.main([str(out)]) == 0 and (out / "summary.md").read_text().startswith("| model |")
    # both seeds at 2 of 9 pairs: within what a bound-blind reader makes, whatever the verdict says
    for name, model in (("grpo", "s0c"), ("grpo-seed1", "s1c")):
        shutil.rmtree(out / "eval" / name, ignore_errors=True)
        synthetic_run(
            out / "eval" / name, model=model, sizes=sizes, samples=1, ids=ids, verdict=reads_up_to(3)
        )
    text = summary.summarize(out, nano.COLUMNS, nano.PAIRS, nano.PRIMARY, nano.SPREAD)
    assert "the pairs gained are no evidence that the student reads the bound" in text
