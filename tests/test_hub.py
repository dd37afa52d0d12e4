"""Hub access fails fast: an unreachable Hub (simulated by a local socket that never answers, so this
machine's own network does not matter) ends a load in seconds with one line naming the local
alternative; a Hub that answers, even with an error status, is used as before."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from thinc_bench import benchmarks, hub
from thinc_bench.backends import _sources
from thinc_bench.errors import ConfigError, DatasetError

REPO_ROOT = Path(__file__).resolve().parents[1]
FAIL_FAST_S = 10.0
"""The issue's bound for an offline failure (it took about 50 s of retries before)."""


@pytest.fixture
def silent_hub() -> Iterator[str]:
    """A Hub endpoint that accepts connections and never answers (a black-holed or dead proxy)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def answering_hub() -> Iterator[str]:
    """A Hub endpoint that answers every request with 404."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def hub_at(monkeypatch: pytest.MonkeyPatch):
    """Point this process's huggingface_hub at an endpoint, online mode, with a fresh probe."""

    def point(endpoint: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.5)  # the CLI tests below keep the real one
        hub._probe.cache_clear()

    yield point
    hub._probe.cache_clear()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Qwen/Qwen3-1.7B", True),
        ("gpt2", True),
        ("./Qwen/Qwen3-1.7B", False),
        ("/no/such/folder", False),
        ("model.gguf", False),
        ("org/name/extra", False),
        ("aime2025.jsonl", False),
    ],
)
def test_only_names_that_cannot_be_local_paths_are_hub_ids(name: str, expected: bool) -> None:
    assert hub.is_hub_id(name) is expected


def test_an_existing_folder_is_never_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert not hub.is_hub_id("org/model")


def test_a_hub_that_answers_with_an_error_status_is_reachable(hub_at, answering_hub: str) -> None:
    hub_at(answering_hub)
    assert hub.unreachable() is None and hub.probe_failure() is None


def test_a_silent_hub_is_unreachable_within_the_probe_timeout(hub_at, silent_hub: str) -> None:
    hub_at(silent_hub)
    started = time.perf_counter()
    reason = hub.unreachable()
    assert reason is not None and silent_hub in reason
    assert time.perf_counter() - started < hub.PROBE_TIMEOUT_S + 2
    started = time.perf_counter()
    assert hub.unreachable() == reason and time.perf_counter() - started < 0.1  # probed once per process


def test_offline_mode_needs_no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hub.unreachable() == "HF_HUB_OFFLINE is set" and hub.probe_failure() is None


def test_decontamination_benchmark_from_an_unreachable_hub_names_its_flag(hub_at, silent_hub: str) -> None:
    hub_at(silent_hub)
    started = time.perf_counter()
    with pytest.raises(DatasetError, match="--decontam-data-dir ../shared/data/benchmarks") as caught:
        benchmarks.load("aime2024", local_flag="--decontam-data-dir")
    assert time.perf_counter() - started < FAIL_FAST_S and "\n" not in str(caught.value)


def test_student_tokenizer_from_an_unreachable_hub_names_a_local_folder(hub_at, silent_hub: str) -> None:
    hub_at(silent_hub)
    with pytest.raises(ConfigError, match="not in the local cache; pass a local folder") as caught:
        _sources.load_tokenizer("Qwen/Qwen3-1.7B-not-cached")
    assert "\n" not in str(caught.value)


def run_cli(
    args: list[str], tmp_path: Path, module: str = "thinc_bench.eval", **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    clean = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    environment = {**clean, "HF_HOME": str(tmp_path / "hf-home"), "PYTHONPATH": str(REPO_ROOT), **env}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", module, *args, "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        cwd=tmp_path,
    )
    return done, time.perf_counter() - started


def assert_one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and all(n in lines[0] for n in needles), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # a CLI process: imports and, but for offline mode, the real 3 s probe
def test_eval_of_a_hub_model_fails_fast_when_the_hub_is_silent(
    tmp_path: Path, silent_hub: str, benchmark_dir: Path
) -> None:
    args = ["--model", "Qwen/Qwen3-1.7B", "--data-dir", str(benchmark_dir), "--benchmarks", "aime2025"]
    done, elapsed = run_cli([*args, "--limit", "1", "--samples", "1"], tmp_path, HF_ENDPOINT=silent_hub)
    assert_one_line_error(done, "'Qwen/Qwen3-1.7B'", "cannot be reached", "pass a local folder")
    assert elapsed < FAIL_FAST_S


@pytest.mark.slow  # a CLI process: imports and, but for offline mode, the real 3 s probe
def test_eval_of_a_hub_model_fails_fast_in_offline_mode(tmp_path: Path, benchmark_dir: Path) -> None:
    args = ["--model", "Qwen/Qwen3-1.7B", "--data-dir", str(benchmark_dir), "--benchmarks", "aime2025"]
    done, elapsed = run_cli([*args, "--limit", "1", "--samples", "1"], tmp_path, HF_HUB_OFFLINE="1")
    assert_one_line_error(done, "HF_HUB_OFFLINE is set", "pass a local folder")
    assert elapsed < FAIL_FAST_S


@pytest.mark.slow  # a CLI process: imports and, but for offline mode, the real 3 s probe
def test_eval_of_a_hub_benchmark_fails_fast_when_the_hub_is_silent(tmp_path: Path, silent_hub: str) -> None:
    script = tmp_path / "turns.jsonl"
    script.write_text('{"problem_id": "x", "turns": ["a"]}\n', encoding="utf-8")
    args = ["--backend", "scripted", "--model", str(script), "--benchmarks", "aime2024"]
    done, elapsed = run_cli(args, tmp_path, HF_ENDPOINT=silent_hub)
    assert_one_line_error(done, "'aime2024'", "cannot be reached", "--data-dir ../shared/data/benchmarks")
    assert elapsed < FAIL_FAST_S


@pytest.mark.slow  # a CLI process
def test_build_sft_with_the_default_hub_student_tokenizer_fails_before_generating(
    tmp_path: Path, silent_hub: str, two_problem_benchmark: Path, benchmark_dir: Path
) -> None:
    script = tmp_path / "turns.jsonl"
    script.write_text('{"problem_id": "tiny-1", "turns": ["a"]}\n', encoding="utf-8")
    args = ["--teacher", str(script), "--backend", "scripted", "--source", str(two_problem_benchmark)]
    args += ["--decontam-data-dir", str(benchmark_dir)]  # the student tokenizer is the default Hub id
    done, elapsed = run_cli(args, tmp_path, module="thinc_bench.build_sft", HF_ENDPOINT=silent_hub)
    assert_one_line_error(done, "'Qwen/Qwen3-1.7B'", "cannot be reached", "pass a local folder")
    assert elapsed < FAIL_FAST_S and not (tmp_path / "run" / "rollouts").exists()


@pytest.mark.slow  # a CLI process
def test_build_sft_without_local_decontamination_copies_fails_before_generating(
    tmp_path: Path, silent_hub: str, two_problem_benchmark: Path, qwen3_tokenizer_dir: Path
) -> None:
    script = tmp_path / "turns.jsonl"
    script.write_text('{"problem_id": "tiny-1", "turns": ["a"]}\n', encoding="utf-8")
    args = ["--teacher", str(script), "--backend", "scripted", "--source", str(two_problem_benchmark)]
    args += ["--student-tokenizer", str(qwen3_tokenizer_dir)]
    done, elapsed = run_cli(args, tmp_path, module="thinc_bench.build_sft", HF_ENDPOINT=silent_hub)
    assert_one_line_error(done, "cannot be reached", "--decontam-data-dir")
    assert elapsed < FAIL_FAST_S and not (tmp_path / "run" / "rollouts").exists()


def test_the_demo_in_a_fresh_clone_names_both_ways_when_the_hub_is_out_of_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_at, silent_hub: str
) -> None:
    from thinc_bench.eval.config import EvalConfig

    monkeypatch.chdir(tmp_path)  # a clone with no ../shared/data beside it
    hub_at(silent_hub)
    with pytest.raises(ConfigError) as caught:
        EvalConfig()
    message = str(caught.value)
    assert "\n" not in message and "cannot be reached" in message
    assert "--data-dir" in message and "aime2025.jsonl" in message and "--benchmarks nano" in message
    config = EvalConfig(benchmarks="nano")  # the generated task needs neither copies nor the Hub
    assert config.benchmarks == "nano" and config.data_dir is None


def test_the_demo_in_a_fresh_clone_reads_the_hub_when_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_at, answering_hub: str
) -> None:
    from thinc_bench.eval.config import EvalConfig

    monkeypatch.chdir(tmp_path)
    hub_at(answering_hub)
    config = EvalConfig()
    assert config.benchmarks == "aime2025" and config.data_dir is None  # None: the Hub's copy


def test_a_benchmark_the_hub_cannot_serve_names_the_generated_one_for_eval(hub_at, silent_hub: str) -> None:
    hub_at(silent_hub)
    with pytest.raises(DatasetError, match="--benchmarks nano"):
        benchmarks.load("aime2025")
