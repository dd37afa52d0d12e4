"""Shared fixtures: where the read-only benchmark data lives, and a tiny two-problem benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BENCHMARK_DIR = SHARED_DATA / "benchmarks"


@pytest.fixture(scope="session")
def benchmark_dir() -> Path:
    """The faithful benchmark copies beside the checkout (never copied into the project)."""
    if not BENCHMARK_DIR.is_dir():
        pytest.fail(f"benchmark data missing at {BENCHMARK_DIR}; the checkout needs ../shared/data beside it")
    return BENCHMARK_DIR


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of ../shared/data: benchmark copies, raw source files and training data."""
    return SHARED_DATA


@pytest.fixture
def two_problem_benchmark(tmp_path: Path) -> Path:
    """A local benchmark file in the normalised format, small enough to run end to end in seconds."""
    path = tmp_path / "tiny.jsonl"
    rows = [
        {"id": "tiny-1", "problem": "Compute 2 + 3.", "answer": "5", "source": "tests"},
        {"id": "tiny-2", "problem": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}", "source": "tests"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def scripted_turns() -> Path:
    """Model turns for the two-problem benchmark: a one-block and a two-block ThinC trajectory."""
    return REPO_ROOT / "tests" / "data" / "scripted_turns.jsonl"
