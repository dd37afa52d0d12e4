"""Training sources: DAPO-Math-17k's template stripped and repeats removed; local files with any columns."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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
    problems = sources.load_source("dapo_math_17k", shared_data / "train")
    rows = (shared_data / "train" / "dapo_math_17k.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 17917 and len(problems) == 17188  # repeated texts under different indices
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
