"""A benchmark as Inspect samples: the CLI's problems, one sample per problem and k."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from thinc_bench import benchmarks
from thinc_bench.errors import DatasetError
from thinc_bench.inspect_tasks import aime2025, gpqa_diamond, nano
from thinc_bench.inspect_tasks.dataset import problem_of

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_local_copy_gives_every_problem_once_per_k_with_the_clis_ids_and_golds(benchmark_dir: Path) -> None:
    task = aime2025(data_dir=str(benchmark_dir), k="1,3")
    problems = benchmarks.load("aime2025", data_dir=benchmark_dir)
    assert [s.id for s in task.dataset] == [
        p.id if k == 0 else f"{p.id}@k{k}" for k in (0, 1, 3) for p in problems
    ]
    first = task.dataset[0]
    assert (first.input, first.target) == (problems[0].problem, problems[0].answer)
    assert task.dataset[len(problems)].metadata == {
        "benchmark": "aime2025",
        "problem_id": problems[0].id,
        "k": 1,
        "problem_meta": {},
    }


def test_gpqas_option_order_travels_to_the_problem_the_scorer_rebuilds(tmp_path: Path) -> None:
    shutil.copy(DATA / "gpqa_synthetic.jsonl", tmp_path / "gpqa_diamond.jsonl")
    task = gpqa_diamond(data_dir=str(tmp_path))
    expected = benchmarks.load("gpqa_diamond", data_dir=tmp_path)
    rebuilt = [problem_of(str(s.input), str(s.target), s.metadata or {}) for s in task.dataset]
    assert rebuilt == expected and [p.meta for p in rebuilt] == [p.meta for p in expected]
    assert all(p.meta for p in rebuilt)  # the option order and its seed


def test_nano_is_generated_here_with_no_data() -> None:
    assert [s.id for s in nano().dataset] == [p.id for p in benchmarks.load("nano")]


def test_a_missing_copy_names_the_task_argument_to_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"pass -T data_dir pointing at a folder with aime2025\.jsonl"):
        aime2025(data_dir=str(tmp_path))
