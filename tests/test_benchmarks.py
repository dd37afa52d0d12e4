"""The registry loads every benchmark from the local copies, with stable ids and checked golds."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from thinc_bench import benchmarks
from thinc_bench.errors import DatasetError

EXPECTED_SIZES = {
    "aime2024": 30,
    "aime2025": 30,
    "aime2026": 30,
    "hmmt_feb2025": 30,
    "beyondaime": 100,
    "math500": 500,
}


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_registry_covers_the_paper_benchmarks_and_math500() -> None:
    assert set(benchmarks.PAPER_BENCHMARKS) <= set(benchmarks.REGISTRY)
    # GPQA-Diamond is gated and its terms ask that the questions not be republished: no local copy.
    assert set(benchmarks.REGISTRY) == set(EXPECTED_SIZES) | {"gpqa_diamond"}


@pytest.mark.parametrize("name", sorted(EXPECTED_SIZES))
def test_every_benchmark_loads_from_the_local_copy_with_unique_ids(name: str, benchmark_dir: Path) -> None:
    problems = benchmarks.load(name, data_dir=benchmark_dir)
    assert len(problems) == EXPECTED_SIZES[name]
    assert len({p.id for p in problems}) == len(problems)
    assert all(p.benchmark == name and p.problem and p.answer for p in problems)


def test_aime2024_ids_from_hub_rows_match_the_local_ids(benchmark_dir: Path, shared_data: Path) -> None:
    raw = shared_data / "raw/QwenLM__Qwen2.5-Math/evaluation/data/aime24/test.jsonl"
    hub_rows = [json.loads(line) for line in raw.read_text(encoding="utf-8").splitlines()]
    spec = benchmarks.REGISTRY["aime2024"]
    hub_ids = [spec.make_id(row, index) for index, row in enumerate(hub_rows)]
    assert hub_ids == [p.id for p in benchmarks.load("aime2024", data_dir=benchmark_dir, check_golds=False)]


@pytest.mark.parametrize(("name", "exam_dirs"), [("aime2025", ["aime_2025_I", "aime_2025_II"])])
def test_matharena_problem_idx_maps_to_exam_and_number(
    name: str, exam_dirs: list[str], benchmark_dir: Path, shared_data: Path
) -> None:
    local = {p.id: p.answer for p in benchmarks.load(name, data_dir=benchmark_dir, check_golds=False)}
    spec = benchmarks.REGISTRY[name]
    offset = 0
    for exam_dir in exam_dirs:
        with (shared_data / "raw/eth-sri__matharena/data/aime" / exam_dir / "answers.csv").open() as handle:
            for row in csv.DictReader(handle):
                problem_id = spec.make_id({"problem_idx": int(row["id"]) + offset}, 0)
                assert int(local[problem_id]) == int(row["answer"])
        offset += 15


def test_hmmt_ids_follow_problem_idx(benchmark_dir: Path) -> None:
    spec = benchmarks.REGISTRY["hmmt_feb2025"]
    ids = [p.id for p in benchmarks.load("hmmt_feb2025", data_dir=benchmark_dir, check_golds=False)]
    assert ids == [spec.make_id({"problem_idx": i}, i - 1) for i in range(1, 31)]


def test_gold_answers_keep_their_source_form(benchmark_dir: Path) -> None:
    answers = {p.id: p.answer for p in benchmarks.load("aime2024", data_dir=benchmark_dir, check_golds=False)}
    assert "025" in answers.values()


def test_unknown_benchmark_names_the_choices() -> None:
    with pytest.raises(DatasetError, match=r"unknown benchmark 'aime25'.*aime2025"):
        benchmarks.load("aime25")


def test_missing_local_copy_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"no local copy at .*aime2024\.jsonl.*--data-dir"):
        benchmarks.load("aime2024", data_dir=tmp_path)


def test_missing_column_names_the_column_and_the_file(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "mine.jsonl", [{"id": "a", "question": "1+1?", "answer": "2"}])
    with pytest.raises(DatasetError, match=r"no column 'problem' \(columns: id, question, answer\)"):
        benchmarks.load(str(path))


def test_local_jsonl_with_custom_columns_and_row_ids(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "mine.jsonl", [{"question": "1+1?", "gold": "2"}, {"question": "2+2?", "gold": "4"}]
    )
    problems = benchmarks.load(str(path), problem_column="question", answer_column="gold", id_column=None)
    assert [(p.id, p.problem, p.answer, p.benchmark) for p in problems] == [
        ("mine-0", "1+1?", "2", "mine"),
        ("mine-1", "2+2?", "4", "mine"),
    ]


def test_local_parquet_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pq.parquet"
    pq.write_table(
        pa.table({"id": ["x", "y"], "problem": ["p1", "p2"], "answer": ["\\frac{1}{2}", "7"]}), path
    )
    assert [p.answer for p in benchmarks.load(str(path))] == ["\\frac{1}{2}", "7"]


def test_bad_gold_names_benchmark_problem_and_value(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "bad.jsonl",
        [{"id": "ok", "problem": "p", "answer": "3"}, {"id": "p7", "problem": "p", "answer": "\\frac{1}{"}],
    )
    with pytest.raises(
        DatasetError, match=r"benchmark 'bad', problem p7: gold '\\\\frac\{1\}\{' does not parse"
    ):
        benchmarks.load(str(path))


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "problem": "p", "answer": "1"}] * 2)
    with pytest.raises(DatasetError, match="appears twice"):
        benchmarks.load(str(path))


def test_invalid_json_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"id": "a", "problem": "p", "answer": "1"}\n{not json\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"broken\.jsonl, line 2: not valid JSON"):
        benchmarks.load(str(path))


def test_unreachable_hub_without_local_copy_is_one_actionable_line(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    code = "from thinc_bench import benchmarks\nbenchmarks.load('aime2025')"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "thinc_bench.errors.DatasetError: benchmark 'aime2025': cannot load MathArena/aime_2025"
    )
    assert "--data-dir" in last


@pytest.mark.network
@pytest.mark.parametrize("name", sorted(EXPECTED_SIZES))
def test_hub_copy_matches_the_local_copy(name: str, benchmark_dir: Path) -> None:
    hub = benchmarks.load(name)
    local = benchmarks.load(name, data_dir=benchmark_dir)
    assert [(p.id, p.answer) for p in hub] == [(p.id, p.answer) for p in local]


GPQA_SYNTHETIC = Path(__file__).parent / "data" / "gpqa_synthetic.jsonl"
"""Three made-up questions in the GPQA Hub schema (the real ones must not be published)."""


def _shown_letter(problem: benchmarks.Problem, option: str) -> str:
    """The letter under which the problem text shows `option`, read as a model would read it."""
    (line,) = [line for line in problem.problem.splitlines() if line.endswith(f") {option}")]
    return line[1]


def test_gpqa_diamond_is_registered_with_its_gated_hub_config() -> None:
    spec = benchmarks.REGISTRY["gpqa_diamond"]
    assert (spec.hub_id, spec.config, spec.split) == ("Idavidrein/gpqa", "gpqa_diamond", "train")


def test_gpqa_local_file_loads_as_multiple_choice_with_the_letter_as_gold(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in GPQA_SYNTHETIC.read_text().splitlines()]
    _write_jsonl(tmp_path / "gpqa_diamond.jsonl", rows)
    problems = benchmarks.load("gpqa_diamond", data_dir=tmp_path)
    assert [p.id for p in problems] == ["synthetic-1", "synthetic-2", "synthetic-3"]
    for problem, row in zip(problems, rows, strict=True):
        assert problem.problem.startswith(row["Question"])
        assert "\\boxed{" in problem.problem
        assert problem.answer == _shown_letter(problem, row["Correct Answer"])
        shown = sorted(_shown_letter(problem, row[f"Incorrect Answer {i}"]) for i in (1, 2, 3))
        assert sorted([*shown, problem.answer]) == ["A", "B", "C", "D"]
        assert problem.meta["options"][problem.answer] == "Correct Answer"  # the shuffle is recorded
        assert problem.meta["shuffle_seed"] == benchmarks.GPQA_SHUFFLE_SEED


def test_gpqa_shuffle_is_deterministic_per_seed_and_differs_across_seeds() -> None:
    rows = [json.loads(line) for line in GPQA_SYNTHETIC.read_text().splitlines()]
    first = benchmarks.multiple_choice_rows(rows, "test")
    assert benchmarks.multiple_choice_rows(list(reversed(rows)), "test") == list(reversed(first))
    orders = {seed: [benchmarks.option_order(f"q{i}", seed) for i in range(20)] for seed in (0, 1)}
    assert orders[0] != orders[1]
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders[0])
    assert len({tuple(order) for order in orders[0]}) > 1  # not one fixed permutation for every question
    assert {order.index(0) for order in orders[0]} == {0, 1, 2, 3}  # the gold lands under every letter


def test_gpqa_path_loads_the_same_problems_as_the_registry_name(tmp_path: Path) -> None:
    by_path = benchmarks.load(str(GPQA_SYNTHETIC))
    _write_jsonl(
        tmp_path / "gpqa_diamond.jsonl", [json.loads(x) for x in GPQA_SYNTHETIC.read_text().splitlines()]
    )
    by_name = benchmarks.load("gpqa_diamond", data_dir=tmp_path)
    assert [(p.id, p.problem, p.answer) for p in by_path] == [(p.id, p.problem, p.answer) for p in by_name]


def test_gpqa_row_without_an_option_column_names_it(tmp_path: Path) -> None:
    row = json.loads(GPQA_SYNTHETIC.read_text().splitlines()[0])
    del row["Record ID"]
    with pytest.raises(DatasetError, match="'Record ID'"):
        benchmarks.multiple_choice_rows([row], "gpqa.jsonl")


@pytest.mark.parametrize(
    ("pred", "correct"),
    [
        ("\\boxed{B}", True),
        ("\\boxed{(B)}", True),
        ("\\boxed{\\text{B}}", True),
        ("\\boxed{\\textbf{(B)}}", True),
        ("\\boxed{C}", False),
        ("The answer is B.", False),  # no box, no answer
    ],
)
def test_letter_answers_are_graded_by_the_one_judge(pred: str, correct: bool) -> None:
    from thinc_bench import grading

    assert grading.grade(gold="B", pred=pred).correct is correct
