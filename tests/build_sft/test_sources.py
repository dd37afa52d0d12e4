"""Training sources: DAPO-Math-17k's template stripped and repeats removed; local files with any columns."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft import sources
from thinc_bench.errors import DatasetError


def _hub_row(problem: str, answer: str) -> dict:
    """A row shaped like BytedTsinghua-SIA/DAPO-Math-17k (PROVENANCE.md)."""
    return {
        "data_source": "math_dapo",
        "prompt": [{"content": sources.DAPO_PREFIX + problem + sources.DAPO_SUFFIX, "role": "user"}],
        "ability": "MATH",
        "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
        "extra_info": {"index": "uuid"},
    }


def test_dapo_hub_row_yields_the_bare_problem_and_answer() -> None:
    assert sources.REGISTRY["dapo_math_17k"].row_to_problem(_hub_row("Compute $1+1$.", "2")) == (
        "Compute $1+1$.",
        "2",
    )
    assert sources.strip_dapo_template("no template") == "no template"


def test_local_dapo_copy_is_deduplicated_with_content_ids(shared_data) -> None:
    result = sources.load_deduplicated("dapo_math_17k", shared_data / "train")
    problems = result.problems
    rows = (shared_data / "train" / "dapo_math_17k.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == result.rows == 17917
    # 17,188 distinct by whitespace alone; case, spacing, $ and \dfrac merge 480 more; 18 groups disagree on the gold
    assert (len(problems), result.repeats, len(result.conflicting)) == (16690, 1191, 18)
    assert len(problems) + result.repeats + sum(map(len, result.conflicting)) == len(rows)
    assert len({p.id for p in problems}) == len(problems)
    first = json.loads(rows[0])
    assert problems[0].id == sources.content_id("dapo_math_17k", first["problem"])
    assert sources.load_source("dapo_math_17k", shared_data / "train", limit=5) == problems[:5]


def test_hub_form_and_local_form_give_the_same_id(shared_data) -> None:
    local = sources.load_source("dapo_math_17k", shared_data / "train", limit=1)[0]
    problem, answer = sources.REGISTRY["dapo_math_17k"].row_to_problem(_hub_row(local.problem, local.answer))
    assert sources.content_id("dapo_math_17k", problem) == local.id and answer == local.answer


def test_parquet_with_custom_columns_and_repeats(tmp_path) -> None:
    path = tmp_path / "mine.parquet"
    table = {"question": ["Compute 2+3.", "Compute  2+3.", "Compute 4."], "gt": ["5", "5", "4"]}
    pq.write_table(pa.table(table), path)
    problems = sources.load_source(str(path), problem_column="question", answer_column="gt", id_column=None)
    assert [(p.problem, p.answer, p.benchmark) for p in problems] == [
        ("Compute 2+3.", "5", "mine"),
        ("Compute 4.", "4", "mine"),
    ]


def test_missing_column_and_missing_local_copy_name_the_fix(tmp_path, two_problem_benchmark) -> None:
    with pytest.raises(DatasetError, match="--problem-column"):
        sources.load_source(str(two_problem_benchmark), problem_column="question")
    with pytest.raises(DatasetError, match="no local copy"):
        sources.load_source("dapo_math_17k", tmp_path)


def _problems(*rows: tuple[str, str]) -> list[Problem]:
    return [Problem(f"row-{i}", text, answer, "t") for i, (text, answer) in enumerate(rows)]


def test_copies_differing_in_case_spacing_dollars_and_dfrac_are_one_problem() -> None:
    result = sources.dedupe(
        _problems(
            ("Find $\\dfrac{1}{2} + x$ when $x = 3$.", "7/2"),
            ("find \\tfrac{1}{2}+x when x=3.", "7/2"),  # DAPO-Math-17k holds both spellings
            ("Find  $\\frac{1}{2}  +  x$ when\n$x = 3$.", "7/2"),
            ("Find $\\frac{1}{2} + x$ when $x = 4$.", "9/2"),  # another number: another problem
        )
    )
    assert [p.id for p in result.problems] == ["row-0", "row-3"]
    assert (result.rows, result.repeats, result.conflicting) == (4, 2, [])


def test_copies_with_conflicting_golds_are_all_dropped_and_counted() -> None:
    text = "Determine the greatest power of $2$ that is a factor of $3^{15} + 3^{11} + 3^{6} + 1$."
    result = sources.dedupe(
        _problems(
            (text, "64"), ("Compute $2+3$.", "5"), (text, "6"), (text.lower(), "64"), ("Compute $2+3$.", "05")
        )
    )
    assert [p.id for p in result.problems] == ["row-1"]  # "5" and "05" are the same gold
    assert [[p.id for p in g] for g in result.conflicting] == [["row-0", "row-2", "row-3"]]
    stats = result.stats()
    assert (stats["distinct"], stats["repeats_dropped"], stats["conflicting_gold_rows"]) == (1, 1, 3)
    assert stats["conflicting"][0] == [
        {"id": "row-0", "answer": "64"},
        {"id": "row-2", "answer": "6"},
        {"id": "row-3", "answer": "64"},
    ]
