"""The run directory resumes, refuses mixing, and never loses a finished sample."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.eval.store import SCHEMA_VERSION, RunDir, SampleKey, SampleRecord, config_hash

SETTINGS = {"model": "m", "benchmarks": ["aime2025"], "n_samples": 2, "seed": 0}


def _record(problem_id: str = "p1", sample_idx: int = 0, k: int = 0) -> SampleRecord:
    return SampleRecord(
        benchmark="aime2025",
        problem_id=problem_id,
        sample_idx=sample_idx,
        k=k,
        text="```python\nprint(5)\n```",
        answer="5",
        gold="5",
        correct=True,
        status="correct",
        n_tool_calls=1,
        n_exec_errors=0,
        gen_tokens=10,
        total_tokens=30,
        grounded=True,
        finish_reason="answer",
        timings={"total_s": 1.5},
    )


def test_config_hash_ignores_key_order() -> None:
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_new_run_writes_settings_hash_and_environment_with_its_first_record(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path / "run", SETTINGS)
    assert not (
        tmp_path / "run"
    ).exists()  # opening writes nothing: a run that fails at start leaves no trace
    assert run.records() == []
    run.annotate("resolved", {"backend": "scripted"})
    config = json.loads((tmp_path / "run/config.json").read_text())
    assert config["settings"] == SETTINGS
    assert config["config_hash"] == config_hash(SETTINGS)
    assert config["environment"]["versions"]["torch"]
    assert "math-verify" in config["environment"]["versions"]
    assert config["resolved"] == {"backend": "scripted"}


def test_appended_records_round_trip_and_resume_with_same_settings(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, SETTINGS)
    run.append(_record("p1", 0))
    run.append(_record("p1", 1))
    resumed = RunDir.open(tmp_path, dict(reversed(list(SETTINGS.items()))))
    assert resumed.done_keys() == {SampleKey("aime2025", "p1", 0, 0), SampleKey("aime2025", "p1", 1, 0)}
    assert resumed.records()[0] == _record("p1", 0)


def test_other_settings_are_refused_naming_what_differs(tmp_path: Path) -> None:
    RunDir.open(tmp_path, SETTINGS).append(_record())
    with pytest.raises(ConfigError, match=r"other settings \(differ: n_samples\).*--out"):
        RunDir.open(tmp_path, {**SETTINGS, "n_samples": 4})


def test_non_empty_folder_without_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and has no config.json"):
        RunDir.open(tmp_path, SETTINGS)


def test_torn_last_line_is_dropped_and_file_repaired(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, SETTINGS)
    run.append(_record("p1", 0))
    with run.samples_path.open("a") as handle:
        handle.write('{"benchmark": "aime2025", "problem_id": "p2"')  # killed mid-write
    assert [r.key for r in run.records()] == [SampleKey("aime2025", "p1", 0, 0)]
    run.append(_record("p2", 0))
    assert [r.problem_id for r in RunDir.open(tmp_path, SETTINGS).records()] == ["p1", "p2"]


def test_record_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, SETTINGS)
    line = dataclasses.asdict(_record()) | {"schema_version": SCHEMA_VERSION + 1}
    run.samples_path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ConfigError, match="schema_version"):
        run.records()


def test_summary_is_written_apart_from_samples(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, SETTINGS)
    run.write_summary({"overall": {"accuracy": 0.5}})
    assert run.read_summary() == {"overall": {"accuracy": 0.5}}
    assert not list(tmp_path.glob("*.tmp"))


def test_infra_errors_are_not_done_and_a_retry_replaces_them(tmp_path: Path) -> None:
    run = RunDir.open(tmp_path, SETTINGS)
    failed = dataclasses.replace(_record("p1", 0), status="infra_error", correct=False, answer=None)
    run.append(failed)
    run.append(_record("p2", 0))
    assert run.done_keys() == {SampleKey("aime2025", "p2", 0, 0)}
    run.append(_record("p1", 0))
    assert [(r.problem_id, r.status) for r in run.records()] == [("p1", "correct"), ("p2", "correct")]
    assert run.done_keys() == {SampleKey("aime2025", "p1", 0, 0), SampleKey("aime2025", "p2", 0, 0)}


def test_a_version_1_record_is_read_with_the_new_fields_unmeasured(tmp_path: Path) -> None:
    # The exact keys a version-1 run wrote: no prompt tokens, checks, failure modes or injected count.
    v1 = {
        "benchmark": "aime2025", "problem_id": "p1", "sample_idx": 0, "k": 2, "text": "t", "answer": "5",
        "gold": "5", "correct": True, "status": "correct", "n_tool_calls": 3, "n_exec_errors": 2,
        "gen_tokens": 10, "total_tokens": 30, "grounded": True, "finish_reason": "answer", "timings": {},
        "exec_statuses": ["error", "error", "ok"], "style": "thinc", "error": None, "schema_version": 1,
    }  # fmt: skip
    run = RunDir.open(tmp_path, SETTINGS)
    run.samples_path.write_text(json.dumps(v1) + "\n")
    (record,) = run.records()
    assert (record.schema_version, record.prompt_tokens, record.response_tokens) == (1, None, None)
    assert (record.checks, record.posthoc, record.nl_literals, record.nl_ratio) == ({}, None, None, None)
    assert record.n_injected == 2  # the injector fails the first k executions: min(k, executions)


def test_a_directory_without_samples_takes_other_settings_and_drops_the_old_prompts(tmp_path: Path) -> None:
    first = RunDir.open(tmp_path, SETTINGS)
    first.record_prompt("aime2025", "p1", [1, 2], "old prompt", False)
    second = RunDir.open(tmp_path, {**SETTINGS, "model": "fixed"})
    assert json.loads((tmp_path / "config.json").read_text())["settings"]["model"] == "m"  # nothing yet
    second.append(_record())
    assert json.loads((tmp_path / "config.json").read_text())["settings"]["model"] == "fixed"
    assert second.prompts() == {} and [r.key for r in second.records()] == [_record().key]


def test_raising_the_limit_keeps_the_samples_and_lowering_it_is_refused(tmp_path: Path) -> None:
    RunDir.open(tmp_path, {**SETTINGS, "limit": 2}).append(_record())
    raised = RunDir.open(tmp_path, {**SETTINGS, "limit": None})
    raised.append(_record("p2"))
    assert [r.problem_id for r in raised.records()] == ["p1", "p2"]
    assert json.loads((tmp_path / "config.json").read_text())["settings"]["limit"] is None
    with pytest.raises(ConfigError, match="differ: limit"):
        RunDir.open(tmp_path, {**SETTINGS, "limit": 1})


def test_an_unwritable_out_is_one_line_before_anything_loads(tmp_path, capsys) -> None:
    from thinc_bench.eval import __main__ as thinc_eval

    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    for out, says in ((file, "is a file, not a folder"), (file / "run", "is a file, so no folder")):
        # a model that does not exist: the --out check must come first, before any loading
        args = ["--model", str(tmp_path / "no-such-model"), "--benchmarks", "nano", "--out", str(out)]
        assert thinc_eval.main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(out) in err and says in err, err
        assert file.read_text() == "mine\n"


def test_a_read_only_out_is_refused_naming_the_folder(tmp_path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    locked = tmp_path / "locked"
    locked.mkdir()
    code = (
        "import sys\nfrom thinc_bench.eval.store import check_writable\n"
        "for out in sys.argv[1:]:\n    try:\n        check_writable(out)\n"
        "    except Exception as e:\n        print(e)\n"
    )
    outs = [str(locked), str(locked / "run")]
    if os.geteuid() == 0:  # root writes through permissions: make it a read-only mount instead
        if shutil.which("bwrap") is None:
            pytest.skip("as root a read-only folder needs a read-only mount: install bubblewrap")
        command = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(locked), str(locked)]
    else:
        locked.chmod(0o555)
        command = []
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": repo}
    try:
        done = subprocess.run(
            [*command, sys.executable, "-c", code, *outs], capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        locked.chmod(0o755)
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done
    for out, line in zip(outs, lines, strict=True):
        assert line.startswith(f"--out {out}: cannot write in {locked}"), line
    assert not (locked / "run").exists()
