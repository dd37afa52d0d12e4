"""summary.json: accuracy from clean samples only, infra errors counted apart, Recovery@k on the same problems."""

from __future__ import annotations

from thinc_bench.eval.store import SampleRecord
from thinc_bench.eval.summary import summarize


def _rec(
    pid: str,
    idx: int,
    correct: bool,
    *,
    k: int = 0,
    status: str | None = None,
    bench: str = "b",
    answer: str | None = "1",
    calls: int = 2,
) -> SampleRecord:
    return SampleRecord(
        benchmark=bench,
        problem_id=pid,
        sample_idx=idx,
        k=k,
        text="",
        answer=answer,
        gold="1",
        correct=correct,
        status=status or ("correct" if correct else "incorrect"),
        n_tool_calls=calls,
        n_exec_errors=1 if k else 0,
        gen_tokens=100,
        total_tokens=300,
        grounded=correct,
        finish_reason="answer",
        style="thinc",
    )


def _same(a: str, b: str) -> bool:
    return a == b


def test_accuracy_is_the_mean_of_per_problem_means_over_clean_samples() -> None:
    records = [
        _rec("p1", 0, True),
        _rec("p1", 1, False),
        _rec("p2", 0, True),
        _rec("p2", 1, True),
        _rec("p1", 0, False, k=1),
        _rec("p2", 0, False, k=1),
    ]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["accuracy"]["value"] == 0.75
    assert block["accuracy"]["n_samples"] == 4
    assert block["pass_at_k"]["2"]["value"] == 1.0
    assert block["recovery"]["1"] == {
        "k": 1,
        "accuracy": 0.0,
        "clean_accuracy": 0.75,
        "ratio": 0.0,
        "n_problems": 2,
    }


def test_infra_errors_are_counted_and_kept_out_of_accuracy() -> None:
    records = [_rec("p1", 0, True), _rec("p1", 1, False, status="infra_error", answer=None)]
    summary = summarize(records, same=_same)
    block = summary["per_benchmark"]["b"]
    assert block["accuracy"]["value"] == 1.0
    assert block["n_infra_errors"] == 1
    assert summary["overall"]["n_infra_errors"] == 1


def test_overall_averages_benchmarks_not_samples() -> None:
    records = [_rec("p1", 0, True, bench="a")] + [_rec(f"q{i}", 0, False, bench="c") for i in range(9)]
    overall = summarize(records, same=_same, benchmarks=["a", "c"])["overall"]
    assert overall["mean_accuracy"] == 0.5
    assert overall["tool_calls"]["mean"] == 2.0


def test_majority_vote_groups_answers_with_the_given_equivalence() -> None:
    records = [
        _rec("p1", 0, False, answer="2"),
        _rec("p1", 1, True, answer="1"),
        _rec("p1", 2, True, answer="1"),
    ]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["maj_at_k"]["3"]["value"] == 1.0
