"""summary.json: accuracy from clean samples only, infra errors counted apart, Recovery@k on the same problems."""

from __future__ import annotations

import pytest

from thinc_bench.eval.store import SampleRecord
from thinc_bench.eval.summary import summarize

ALL_PASS = {"has_plan": True, "no_text_between_code": True, "answer_after_last_output": True}


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
    finish: str = "answer",
    checks: dict[str, bool] | None = None,
    injected: int | None = None,
    prompt: int | None = 200,
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
        grounded=correct if answer is not None else None,
        finish_reason=finish,
        style="thinc",
        prompt_tokens=prompt,
        response_tokens=None if prompt is None else 300 - prompt,
        n_injected=min(k, calls) if injected is None else injected,
        checks=dict(ALL_PASS) if checks is None else checks,
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
        "stderr": 0.0,
        "clean_accuracy": 0.75,
        "ratio": 0.0,
        "n_problems": 2,
        "n_problems_ratio": 2,
        "saw_k": {"numerator": 2, "denominator": 2, "value": 1.0},
        "fewer_than_k": {"numerator": 0, "denominator": 0, "value": None},
        "saw_k_correct": {"numerator": 0, "denominator": 2, "value": 0.0},
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


def test_overall_tool_calls_grounding_and_failure_modes_are_benchmark_means_with_the_pooled_apart() -> None:
    # Benchmark "a": 1 trajectory, 10 calls, grounded, post-hoc; "c": 9 trajectories, 1 call each,
    # none grounded, none post-hoc. Mean over benchmarks: 5.5 calls, 50% grounded, 50% post-hoc;
    # pooled over the 10 trajectories: 1.9 calls, 10% grounded, 10% post-hoc.
    a = _rec("p1", 0, True, bench="a", calls=10)
    a.posthoc, a.nl_ratio = True, 0.4
    records = [a]
    for i in range(9):
        r = _rec(f"q{i}", 0, False, bench="c", calls=1)
        r.grounded, r.posthoc, r.nl_ratio = False, False, 0.0
        records.append(r)
    overall = summarize(records, same=_same, benchmarks=["a", "c"])["overall"]
    assert overall["tool_calls"]["mean"] == pytest.approx(5.5)
    assert overall["tool_calls"]["n_benchmarks"] == 2
    assert overall["grounding"]["answered"]["value"] == pytest.approx(0.5)
    assert overall["failure_modes"]["posthoc"]["value"] == pytest.approx(0.5)
    assert overall["failure_modes"]["nl_ratio"] == pytest.approx(0.2)
    assert "histogram" not in overall["tool_calls"] and "numerator" not in overall["grounding"]["answered"]
    pooled = overall["pooled"]
    assert pooled["tool_calls"]["mean"] == pytest.approx(1.9)
    assert pooled["grounding"]["answered"]["value"] == pytest.approx(0.1)
    assert pooled["failure_modes"]["posthoc"]["value"] == pytest.approx(0.1)


def test_a_benchmark_without_a_measure_is_left_out_of_its_mean_and_counted() -> None:
    # "c" has only a harness error: accuracy 0 there, but no trajectory to measure tool calls on.
    records = [_rec("p1", 0, True, bench="a", calls=4)]
    records.append(_rec("q1", 0, False, bench="c", status="harness_error", answer=None))
    overall = summarize(records, same=_same, benchmarks=["a", "c"])["overall"]
    assert overall["mean_accuracy"] == 0.5
    assert (overall["tool_calls"]["mean"], overall["tool_calls"]["n_benchmarks"]) == (4.0, 1)


def test_majority_vote_groups_answers_with_the_given_equivalence() -> None:
    records = [
        _rec("p1", 0, False, answer="2"),
        _rec("p1", 1, True, answer="1"),
        _rec("p1", 2, True, answer="1"),
    ]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["maj_at_k"]["3"]["value"] == 1.0


@pytest.mark.parametrize("status", ["grader_error", "infra_error"])
def test_samples_without_a_verdict_are_excluded_from_accuracy_and_counted(status: str) -> None:
    records = [_rec("p1", 0, True), _rec("p1", 1, False, status=status), _rec("p2", 0, False)]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["accuracy"]["value"] == 0.5  # p1: 1/1, p2: 0/1; the unverdicted sample is not a wrong answer
    assert block["accuracy"]["n_samples"] == 2
    assert block["excluded"][status] == 1
    assert sum(block["excluded"].values()) == 1


def test_an_answer_the_grader_cannot_judge_in_time_is_wrong_and_counted_apart() -> None:
    # A wrong \boxed{10^{10^{10}}} is not a way out of the denominator: accuracy 0.5 over 2, not 1.0 over 1.
    records = [_rec("p1", 0, True), _rec("p2", 0, False, status="grader_timeout", answer="10^{10^{10}}")]
    summary = summarize(records, same=_same)
    block = summary["per_benchmark"]["b"]
    assert (block["accuracy"]["value"], block["accuracy"]["n_problems"]) == (0.5, 2)
    assert block["grader_timeouts"] == 1 and sum(block["excluded"].values()) == 0
    assert summary["overall"]["grader_timeouts"] == 1 and summary["summary_version"] == 5


def test_a_sample_the_harness_could_not_process_is_wrong_and_counted_apart() -> None:
    # Issue 49: two wrong answers whose tool calls broke the harness read 1.0 over 1 problem; they are
    # the model's output, so accuracy is 1/3 over 3 problems and the two are counted.
    records = [_rec("p1", 0, True)]
    records += [_rec(p, 0, False, status="harness_error", answer=None) for p in ("p2", "p3")]
    summary = summarize(records, same=_same)
    block = summary["per_benchmark"]["b"]
    assert block["accuracy"]["value"] == pytest.approx(1 / 3) and block["accuracy"]["n_problems"] == 3
    assert block["harness_errors"] == 2 and sum(block["excluded"].values()) == 0
    assert block["missing"]["count"] == 0
    assert summary["overall"]["harness_errors"] == 2 and summary["overall"]["mean_accuracy"] == pytest.approx(
        1 / 3
    )
    assert block["tool_calls"]["n"] == 1  # the trajectory measures read processed trajectories only


def test_excluded_is_counted_the_same_way_per_benchmark_and_overall_with_the_faulted_runs_apart() -> None:
    # per benchmark: 1 clean harness error; the k = 1 run loses 2 samples and the k = 2 run 4
    records = []
    for bench in ("a", "c"):
        records += [
            _rec("p1", 0, True, bench=bench),
            _rec("p1", 1, False, bench=bench, status="harness_error", answer=None),
        ]
        records += [
            _rec("p1", i, False, bench=bench, k=1, status="infra_error", answer=None) for i in range(2)
        ]
        records += [_rec("p1", i, False, bench=bench, k=2, status="grader_error") for i in range(3)]
        records += [_rec("p1", 3, False, bench=bench, k=2, status="infra_error", answer=None)]
    summary = summarize(records, same=_same, benchmarks=["a", "c"])
    none = {"infra_error": 0, "grader_error": 0}
    for block in summary["per_benchmark"].values():
        assert block["excluded"] == none and block["harness_errors"] == 1
        assert block["n_infra_errors"] == 0
        assert block["excluded_recovery"] == {
            "1": {**none, "infra_error": 2},
            "2": {**none, "infra_error": 1, "grader_error": 3},
        }
    overall = summary["overall"]
    assert (
        overall["excluded"] == none and overall["harness_errors"] == 2
    )  # sums of the benchmarks, clean only
    assert overall["n_infra_errors"] == 0
    assert overall["excluded_recovery"] == {
        "1": {**none, "infra_error": 4},
        "2": {**none, "infra_error": 2, "grader_error": 6},
    }


def test_a_problem_with_no_scored_sample_is_reported_missing_not_dropped() -> None:
    records = [
        _rec("p1", 0, True),
        _rec("p2", 0, False, status="infra_error", answer=None),
        _rec("p2", 1, False, status="grader_error"),
    ]
    summary = summarize(records, same=_same)
    block = summary["per_benchmark"]["b"]
    assert block["missing"] == {"count": 1, "ids": ["p2"]}
    assert block["accuracy"]["n_problems"] == 1
    assert summary["overall"]["missing"] == {"count": 1, "ids": ["b/p2"]}


def test_pass_and_maj_keep_the_requested_k_when_one_sample_is_lost() -> None:
    # 4 samples asked per problem; one sample of p2 was lost to an infrastructure error.
    records = [_rec("p1", i, i == 0, answer=str(i)) for i in range(4)]
    records += [_rec("p2", i, True) for i in range(3)]
    records.append(_rec("p2", 3, False, status="infra_error", answer=None))
    block = summarize(records, same=_same, samples=4)["per_benchmark"]["b"]
    assert set(block["pass_at_k"]) == {"1", "2", "4"}  # k is not lowered to 3 for every problem
    assert block["pass_at_k"]["4"]["value"] == 1.0  # p1 only: 1 of 4 correct, so pass@4 = 1
    assert (block["pass_at_k"]["4"]["n_problems"], block["pass_at_k"]["4"]["n_problems_short"]) == (1, 1)
    assert block["pass_at_k"]["2"]["n_problems"] == 2
    maj = block["maj_at_k"]["4"]
    assert (maj["n_problems"], maj["n_problems_short"]) == (1, 1)
    assert maj["value"] == 1.0  # p1: four different answers, the first ("0", correct) wins the tie


def test_maj_at_k_group_correctness_survives_a_members_grader_error() -> None:
    records = [
        _rec("p1", 0, False, status="grader_error", answer="7"),
        _rec("p1", 1, True, answer="7"),
        _rec("p1", 2, False, answer="3"),
    ]
    maj = summarize(records, same=_same)["per_benchmark"]["b"]["maj_at_k"]["3"]
    assert (maj["value"], maj["n_unresolved"]) == (1.0, 0)


def test_an_unverifiable_majority_answer_is_a_wrong_majority() -> None:
    records = [
        _rec("p1", 0, False, status="grader_timeout", answer="10^{10^{10}}"),
        _rec("p1", 1, False, status="grader_timeout", answer="10^{10^{10}}"),
        _rec("p1", 2, True, answer="7"),
    ]
    maj = summarize(records, same=_same)["per_benchmark"]["b"]["maj_at_k"]["3"]
    assert (maj["value"], maj["n_problems"], maj["n_unresolved"]) == (0.0, 1, 0)


def test_a_harness_error_is_drawn_without_a_vote_and_counts_as_wrong() -> None:
    records = [_rec("p1", 0, True, answer="7"), _rec("p1", 1, False, status="harness_error", answer=None)]
    block = summarize(records, same=_same, samples=2)["per_benchmark"]["b"]
    assert block["accuracy"]["value"] == 0.5 and block["harness_errors"] == 1
    maj = block["maj_at_k"]["2"]
    assert (maj["value"], maj["n_problems"], maj["n_problems_short"]) == (1.0, 1, 0)  # "7" is the only vote


def test_truncation_counts_token_budget_and_tool_call_limit_apart_and_together() -> None:
    records = [
        _rec("p1", 0, False, finish="max_tokens", answer=None),
        _rec("p1", 1, False, finish="max_tool_calls", answer=None),
        _rec("p2", 0, True),
        _rec("p2", 1, True, finish="eos"),
    ]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["truncation"]["value"] == 0.5
    assert block["truncation_by"]["max_tokens"]["numerator"] == 1
    assert block["truncation_by"]["max_tool_calls"]["numerator"] == 1


def test_response_length_is_the_completion_and_the_prompt_is_apart() -> None:
    records = [_rec("p1", 0, True, prompt=150), _rec("p1", 1, True, prompt=100)]
    lengths = summarize(records, same=_same)["per_benchmark"]["b"]["lengths"]
    assert lengths["response_tokens"]["mean"] == 175  # total 300 minus prompts 150 and 100
    assert lengths["model_tokens"]["mean"] == 100  # gen_tokens: the model-written part of the completion
    assert lengths["prompt_tokens"]["mean"] == 125


def test_conformance_is_the_share_passing_every_check_not_the_style_label() -> None:
    records = [
        _rec("p1", 0, True),
        _rec("p1", 1, True, checks={**ALL_PASS, "answer_after_last_output": False}),  # style "thinc"
    ]
    block = summarize(records, same=_same)["per_benchmark"]["b"]
    assert block["thinc_conformance"]["value"] == 0.5
    assert block["thinc_style"]["value"] == 1.0
    assert block["conformance_checks"]["answer_after_last_output"]["value"] == 0.5
    assert block["conformance_checks"]["has_plan"]["value"] == 1.0


def test_recovery_counts_every_faulted_sample_and_says_which_saw_k_failures() -> None:
    records = [_rec("p1", 0, True), _rec("p2", 0, True), _rec("p3", 0, True)]
    records += [_rec("p1", 0, True, k=3, calls=4), _rec("p2", 0, True, k=3, calls=1)]  # p2 stopped early
    # p3 gave up on code after its first failure and answered wrong in prose: the failure measured
    records.append(_rec("p3", 0, False, k=3, calls=1, answer="9"))
    recovery = summarize(records, same=_same)["per_benchmark"]["b"]["recovery"]["3"]
    assert (recovery["accuracy"], recovery["n_problems"]) == (pytest.approx(2 / 3), 3)
    assert recovery["saw_k"] == {"numerator": 1, "denominator": 3, "value": pytest.approx(1 / 3)}
    assert recovery["fewer_than_k"] == {"numerator": 1, "denominator": 2, "value": 0.5}
    assert recovery["saw_k_correct"] == {"numerator": 1, "denominator": 1, "value": 1.0}


def test_a_faulted_sample_the_harness_could_not_process_counts_in_recovery_as_wrong() -> None:
    records = [
        _rec("p1", 0, True),
        _rec("p1", 0, True, k=1),
        _rec("p1", 1, False, k=1, status="harness_error"),
    ]
    recovery = summarize(records, same=_same)["per_benchmark"]["b"]["recovery"]["1"]
    assert recovery["accuracy"] == 0.5


def test_failure_modes_are_summarised_per_benchmark() -> None:
    a, b = _rec("p1", 0, True), _rec("p1", 1, True)
    a.posthoc, a.nl_literals, a.nl_ratio, a.plan_share = True, ["33", "20"], 0.6, 0.0
    b.posthoc, b.nl_literals, b.nl_ratio, b.plan_share = False, [], 0.1, 0.3
    modes = summarize([a, b], same=_same)["per_benchmark"]["b"]["failure_modes"]
    assert modes["posthoc"]["value"] == 0.5
    assert modes["nl_literals"]["value"] == 0.5
    assert modes["nl_literals_mean"] == 1.0
    assert modes["nl_ratio"] == pytest.approx(0.35)
    assert modes["plan_share"] == pytest.approx(0.15)


def test_records_that_do_not_say_their_lengths_give_no_length_numbers() -> None:
    # Version-1 records carried prompt + completion only; a length built from them would mean something else.
    block = summarize([_rec("p1", 0, True, prompt=None)], same=_same)["per_benchmark"]["b"]
    assert "lengths" not in block and block["accuracy"]["value"] == 1.0


STATUSES = (
    "correct",
    "incorrect",
    "no_answer",
    "unparseable_answer",
    "grader_timeout",
    "grader_error",
    "infra_error",
    "harness_error",
)


def _records_strategy():
    from hypothesis import strategies as st

    row = st.tuples(
        st.sampled_from(["a", "c"]),  # benchmark
        st.integers(0, 4),  # problem
        st.sampled_from(STATUSES),
        st.sampled_from([0, 0, 1, 2]),  # k
        st.integers(0, 3),  # injected failures met
    )
    return st.lists(row, min_size=1, max_size=40)


def test_no_failure_of_the_models_output_ever_leaves_a_denominator() -> None:
    """Invariant: every sample but infrastructure's (infra_error, grader_error) is in accuracy and in
    Recovery@k, and a failure of the model's output is always wrong there; never a better number."""
    from hypothesis import given, settings

    @settings(max_examples=200, deadline=None)
    @given(_records_strategy())
    def check(rows: list[tuple[str, int, str, int, int]]) -> None:
        records, index = [], {}
        for bench, problem, status, k, met in rows:
            key = (bench, f"p{problem}", k)
            index[key] = index.get(key, -1) + 1
            correct = status == "correct"
            answer = None if status in ("no_answer", "infra_error", "harness_error") else "1"
            records.append(
                _rec(
                    f"p{problem}",
                    index[key],
                    correct,
                    k=k,
                    status=status,
                    bench=bench,
                    answer=answer,
                    injected=met,
                )
            )
        summary = summarize(records, same=_same)
        for bench, block in summary["per_benchmark"].items():
            for k in {0} | {r.k for r in records if r.benchmark == bench}:
                mine = [r for r in records if r.benchmark == bench and r.k == k]
                scored = [r for r in mine if r.status not in ("infra_error", "grader_error")]
                by_problem: dict[str, list[bool]] = {}
                for r in scored:
                    by_problem.setdefault(r.problem_id, []).append(r.status == "correct")
                if k == 0:
                    counted = sum(r.status in ("harness_error", "grader_timeout") for r in mine)
                    assert block["harness_errors"] + block["grader_timeouts"] == counted
                    assert sum(block["excluded"].values()) == len(mine) - len(scored)
                    if not by_problem:
                        assert "accuracy" not in block
                        continue
                    got = block["accuracy"]
                else:
                    clean = {  # problems with a scored clean sample: Recovery@k compares on those
                        r.problem_id
                        for r in records
                        if r.benchmark == bench
                        and r.k == 0
                        and r.status not in ("infra_error", "grader_error")
                    }
                    by_problem = {p: v for p, v in by_problem.items() if p in clean}
                    rec = block["recovery"].get(str(k))
                    if not by_problem:
                        assert rec is None or rec["accuracy"] is None
                        continue
                    got = {"value": rec["accuracy"], "n_samples": sum(map(len, by_problem.values()))}
                expected = sum(sum(v) / len(v) for v in by_problem.values()) / len(by_problem)
                assert got["value"] == pytest.approx(expected)
                assert got.get("n_samples", sum(map(len, by_problem.values()))) == sum(
                    map(len, by_problem.values())
                )

    check()
