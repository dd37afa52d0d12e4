"""`--push-to-hub`: the run's results and details land in a Hub dataset, behind the fast Hub probe.

The Hub cannot be reached from the test machines, so `HfApi` is a stub that records each upload
(what a real one would send) and the probe is told the Hub is there.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from thinc_bench import hub
from thinc_bench.eval import __main__ as thinc_eval
from thinc_bench.eval import publish


class StubHfApi:
    """Records create_repo and upload_file calls, reading each upload as the Hub would."""

    def __init__(self) -> None:
        self.repos: list[tuple[str, str]] = []
        self.files: dict[str, bytes] = {}

    def create_repo(self, *, repo_id: str, repo_type: str, exist_ok: bool) -> None:
        assert exist_ok
        self.repos.append((repo_id, repo_type))

    def upload_file(
        self, *, path_or_fileobj: Any, path_in_repo: str, repo_id: str, repo_type: str, **_: Any
    ) -> None:
        assert (repo_id, repo_type) in self.repos
        data = path_or_fileobj if isinstance(path_or_fileobj, bytes) else Path(path_or_fileobj).read_bytes()
        self.files[path_in_repo] = data


def _args(bench: Path, turns: Path, out: Path) -> list[str]:
    return [
        "--backend",
        "scripted",
        "--model",
        str(turns),
        "--benchmarks",
        str(bench),
        "--samples",
        "1",
        "--out",
        str(out),
    ]


def test_a_finished_run_is_pushed_as_results_and_details(
    two_problem_benchmark, scripted_turns, tmp_path, monkeypatch
):
    stub = StubHfApi()
    monkeypatch.setattr(hub, "unreachable", lambda: None)
    factory = type(
        "HfApi", (StubHfApi,), {"__new__": lambda cls: stub}
    )  # a class: transformers annotates with it
    monkeypatch.setattr("huggingface_hub.HfApi", factory)
    out = tmp_path / "qwen-run"
    assert (
        thinc_eval.main([*_args(two_problem_benchmark, scripted_turns, out), "--push-to-hub", "me/evals"])
        == 0
    )
    assert stub.repos == [("me/evals", "dataset")]
    assert set(stub.files) == {
        "results/qwen-run.json",
        "details/qwen-run/samples.parquet",
        "details/qwen-run/prompts.jsonl",
        "details/qwen-run/report.html",
    }
    results = json.loads(stub.files["results/qwen-run.json"])
    assert results["results"]["per_benchmark"]["tiny"]["accuracy"]["value"] == 1.0
    assert results["config"]["settings"]["samples"] == 1
    details = pd.read_parquet(io.BytesIO(stub.files["details/qwen-run/samples.parquet"]))
    assert sorted(details["problem_id"]) == ["tiny-1", "tiny-2"] and details["correct"].all()


def test_an_unreachable_hub_fails_at_start_and_writes_nothing(
    two_problem_benchmark, scripted_turns, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(hub, "unreachable", lambda: "HF_HUB_OFFLINE is set")
    out = tmp_path / "run"
    assert (
        thinc_eval.main([*_args(two_problem_benchmark, scripted_turns, out), "--push-to-hub", "me/evals"])
        == 2
    )
    assert "--push-to-hub me/evals: the Hugging Face Hub cannot be reached (HF_HUB_OFFLINE is set)" in (
        capsys.readouterr().err
    )
    assert not out.exists()


def test_an_unfinished_run_is_not_pushed(tmp_path):
    with pytest.raises(publish.ConfigError, match="no summary.json"):
        publish.push_run(tmp_path, "me/evals", api=StubHfApi())
