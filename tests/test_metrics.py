"""Tests for thinc_bench.metrics: estimators against brute force and hand computation."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from fractions import Fraction
from typing import Any

import pytest

from thinc_bench.metrics import (
    Bin,
    Faulted,
    Vote,
    avg_at_n,
    distribution,
    execution_errors,
    grounding_rate,
    maj_at_k,
    no_answer_rate,
    paired_difference,
    pass_at_k,
    pass_at_k_estimate,
    rate,
    recovery_at_k,
    response_lengths,
    tool_calls,
    truncation_rate,
)


def _same_number(a: str, b: str) -> bool:
    return Fraction(a) == Fraction(b)


def test_pass_at_k_equals_brute_force_over_all_k_subsets() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                expected = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    assert pass_at_k(1000, 1, 1) == pytest.approx(1 / 1000)
    assert pass_at_k(10_000, 10, 100) == pytest.approx(1 - math.comb(9990, 100) / math.comb(10_000, 100))


@pytest.mark.parametrize(("n", "c", "k"), [(4, 1, 5), (4, 5, 1), (4, 1, 0), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


def test_pass_at_k_estimate_averages_problems() -> None:
    estimate = pass_at_k_estimate({"a": [True, False, False, False], "b": [False] * 4}, k=2)
    assert estimate.value == pytest.approx((0.5 + 0.0) / 2)
    assert estimate.n_samples == 8


def test_pass_at_k_estimate_names_problems_with_too_few_samples() -> None:
    with pytest.raises(ValueError, match=r"\['b'\]"):
        pass_at_k_estimate({"a": [True, False], "b": [True]}, k=2)


def test_avg_at_n_is_the_mean_of_per_problem_means_with_stderr_by_hand() -> None:
    estimate = avg_at_n({"a": [True, True, False, False], "b": [True], "c": [False, False]})
    # per-problem means 0.5, 1, 0: mean 0.5, sample sd (ddof=1) sqrt((0 + 0.25 + 0.25) / 2) = 0.5
    assert estimate.value == pytest.approx(0.5)
    assert estimate.stderr == pytest.approx(0.5 / math.sqrt(3))
    assert (estimate.n_problems, estimate.n_samples) == (3, 7)


def test_avg_at_n_has_no_stderr_for_one_problem() -> None:
    assert avg_at_n({"a": [True, False]}).stderr is None


def test_avg_at_n_rejects_a_problem_without_samples() -> None:
    with pytest.raises(ValueError, match=r"\['b'\]"):
        avg_at_n({"a": [True], "b": []})


def test_avg_at_n_rejects_no_problems() -> None:
    with pytest.raises(ValueError, match="no problems"):
        avg_at_n({})


def test_maj_at_k_groups_answers_with_the_injected_equivalence() -> None:
    votes = [Vote("3", False), Vote("1/2", True), Vote("2/4", True)]
    assert maj_at_k({"p": votes}, 3, _same_number).value == 1.0


def test_maj_at_k_tie_goes_to_the_group_seen_first() -> None:
    votes = [Vote("1", False), Vote("2", True), Vote("2", True), Vote("1", False)]
    assert maj_at_k({"p": votes}, 4, _same_number).value == 0.0


def test_maj_at_k_uses_only_the_first_k_samples() -> None:
    votes = [Vote("1", False), Vote("2", True), Vote("2", True), Vote("1", False)]
    assert maj_at_k({"p": votes}, 3, _same_number).value == 1.0


def test_maj_at_k_none_answers_never_win() -> None:
    votes = [Vote(None, False), Vote(None, False), Vote("5", True)]
    assert maj_at_k({"p": votes}, 3, _same_number).value == 1.0


def test_maj_at_k_without_any_answer_is_unsolved() -> None:
    assert maj_at_k({"p": [Vote(None, False)] * 2}, 2, _same_number).value == 0.0


def test_maj_at_k_correctness_is_the_first_known_verdict_of_the_group() -> None:
    votes = [Vote("7", False), Vote("7.0", True)]  # same group; the first known verdict decides it
    assert maj_at_k({"p": votes}, 2, lambda a, b: float(a) == float(b)).value == 0.0


def test_maj_at_k_group_is_not_decided_by_one_members_grader_timeout() -> None:
    # The first member's grading timed out (verdict unknown); its group mates were graded correct.
    votes = [Vote("12", None), Vote("12", True), Vote("5", False)]
    estimate = maj_at_k({"p": votes}, 3, _same_number)
    assert estimate is not None and estimate.value == 1.0


def test_maj_at_k_leaves_out_problems_whose_winning_group_has_no_verdict() -> None:
    votes = {"p": [Vote("12", None), Vote("12", None), Vote("5", False)], "q": [Vote("1", True)] * 3}
    estimate = maj_at_k(votes, 3, _same_number)
    assert estimate is not None and (estimate.value, estimate.n_problems) == (1.0, 1)
    assert maj_at_k({"p": votes["p"]}, 3, _same_number) is None


def test_maj_at_k_no_answer_samples_do_not_vote() -> None:
    # Three samples without an answer outnumber the one answered sample but cannot outvote it.
    votes = [Vote(None, False), Vote(None, False), Vote(None, False), Vote("9", True)]
    assert maj_at_k({"p": votes}, 4, _same_number).value == 1.0


def test_maj_at_k_accepts_plain_tuples_and_reports_votes_used() -> None:
    estimate = maj_at_k(
        {"p": [("1", True), ("2", False)], "q": [("4", False), ("4", False)]}, 2, _same_number
    )
    assert (estimate.value, estimate.n_samples) == (0.5, 4)


def test_maj_at_k_rejects_problems_with_fewer_than_k_samples() -> None:
    with pytest.raises(ValueError, match=r"maj@3.*\['p'\]"):
        maj_at_k({"p": [Vote("1", True)]}, 3, _same_number)


def test_tool_calls_distribution_by_hand() -> None:
    dist = tool_calls([0, 1, 1, 2, 5])
    # p90 by linear interpolation: rank 0.9 * 4 = 3.6 between 2 and 5 -> 2 + 0.6 * 3
    assert (dist.n, dist.mean, dist.median, dist.max) == (5, 1.8, 1, 5)
    assert dist.p90 == pytest.approx(3.8)
    assert [(b.lo, b.count) for b in dist.histogram] == [(0, 1), (1, 2), (2, 1), (3, 0), (4, 0), (5, 1)]


def test_equal_width_histogram_puts_the_maximum_in_the_last_bin() -> None:
    assert distribution([0, 4, 5, 10], n_bins=2).histogram == (Bin(0.0, 5.0, 2), Bin(5.0, 10.0, 2))


def test_constant_values_make_one_bin() -> None:
    assert distribution([3.0, 3.0], n_bins=5).histogram == (Bin(3.0, 3.0, 2),)


def test_distribution_rejects_no_values() -> None:
    with pytest.raises(ValueError, match="0 values"):
        distribution([])


def test_response_lengths_keep_completion_model_and_prompt_apart() -> None:
    # completion 40 and 80 tokens, of which the model wrote 30 and 50; prompts of 200 and 300
    lengths = response_lengths([40, 80], [30, 50], [200, 300])
    assert (lengths.response_tokens.mean, lengths.model_tokens.mean) == (60, 40)
    assert lengths.prompt_tokens is not None and lengths.prompt_tokens.mean == 250
    assert response_lengths([40], [30]).prompt_tokens is None


def test_response_lengths_reject_mismatched_or_impossible_lengths() -> None:
    with pytest.raises(ValueError, match="2 model lengths but 1 response"):
        response_lengths([15], [10, 20])
    with pytest.raises(ValueError, match=r"trajectories \[0\] have more model tokens"):
        response_lengths([10], [20])


def test_grounding_rate_among_answered_and_among_correct() -> None:
    grounding = grounding_rate([True, False, None, True], [True, False, False, False])
    assert grounding.answered == rate(2, 3)
    assert grounding.correct == rate(1, 1)


def test_grounding_rate_rejects_a_correct_sample_without_answer() -> None:
    with pytest.raises(ValueError, match="correct but has no answer"):
        grounding_rate([None], [True])


def _saw(*correct: bool, k: int = 1) -> list[Faulted]:
    return [Faulted(c, k) for c in correct]


def test_recovery_compares_on_the_problems_both_runs_share() -> None:
    faulted = {"a": _saw(True, False), "b": _saw(False, False), "only_faulted": _saw(True)}
    clean = {"a": [True, True], "b": [True, False], "only_clean": [False]}
    recovery = recovery_at_k(1, faulted, clean)
    assert (recovery.accuracy, recovery.clean_accuracy, recovery.n_problems) == (0.25, 0.75, 2)
    assert recovery.ratio == pytest.approx(1 / 3)
    # per-problem faulted means 0.5 and 0: sample sd sqrt(0.125) / sqrt(2)
    assert recovery.stderr == pytest.approx(math.sqrt(0.125) / math.sqrt(2))
    assert recovery.saw_k == rate(5, 5)


def test_recovery_ratio_uses_only_problems_with_clean_accuracy_above_zero() -> None:
    # "b" is never solved clean: it cannot show recovery, so it stays out of the ratio only.
    faulted = {"a": _saw(True, False, k=2), "b": _saw(False, False, k=2)}
    clean = {"a": [True, True], "b": [False, False]}
    recovery = recovery_at_k(2, faulted, clean)
    assert (recovery.accuracy, recovery.clean_accuracy, recovery.ratio) == (0.25, 0.5, 0.5)
    assert (recovery.n_problems, recovery.n_problems_ratio) == (2, 1)


def test_recovery_ratio_is_none_when_no_problem_is_solved_clean() -> None:
    assert recovery_at_k(2, {"a": _saw(True, k=2)}, {"a": [False]}).ratio is None


def test_recovery_counts_every_faulted_sample_with_those_that_met_fewer_than_k_as_a_breakdown() -> None:
    # k = 3: one sample met all 3 failures and failed; two stopped calling code after 1 (one correct).
    faulted = {"a": [Faulted(False, 3), Faulted(True, 1), Faulted(False, 1)]}
    recovery = recovery_at_k(3, faulted, {"a": [True]})
    assert recovery.accuracy == pytest.approx(1 / 3)  # every sample run with 3 failures counts
    assert recovery.ratio == pytest.approx(1 / 3)
    assert recovery.saw_k == rate(1, 3)
    assert recovery.fewer_than_k == rate(1, 2)
    assert recovery.saw_k_correct == rate(0, 1)


def test_recovery_of_samples_that_all_gave_up_on_code_is_their_accuracy() -> None:
    # The sample stopped after 2 of 4 failures and answered right anyway: it counts, and none met 4.
    recovery = recovery_at_k(4, {"a": [Faulted(True, 2)]}, {"a": [True]})
    assert (recovery.accuracy, recovery.ratio, recovery.n_problems) == (1.0, 1.0, 1)
    assert recovery.saw_k == rate(0, 1)
    assert recovery.fewer_than_k == rate(1, 1)
    assert recovery.saw_k_correct == rate(0, 0)


def test_recovery_on_the_issue_example_is_three_of_eight_not_three_of_four() -> None:
    # 8 faulted samples (k = 3) of one problem solved clean every time: 4 met all 3 failures (3
    # correct), 4 abandoned code after the first and answered wrong in prose.
    faulted = {"p": [Faulted(True, 3)] * 3 + [Faulted(False, 3)] + [Faulted(False, 1)] * 4}
    recovery = recovery_at_k(3, faulted, {"p": [True, True]})
    assert (recovery.accuracy, recovery.ratio) == (0.375, 0.375)
    assert recovery.saw_k_correct == rate(3, 4)
    assert recovery.saw_k == rate(4, 8)


def test_abandoning_code_never_scores_above_trying_at_equal_correct_answers() -> None:
    # Model X keeps calling code through its 2 failures and gets 1 of 4 right; model Y gives up on code
    # on 3 of 4 samples and gets the 1 that met both failures right: the same accuracy for both.
    x = recovery_at_k(2, {"p": [Faulted(True, 2)] + [Faulted(False, 2)] * 3}, {"p": [True]})
    y = recovery_at_k(2, {"p": [Faulted(True, 2)] + [Faulted(False, 0)] * 3}, {"p": [True]})
    assert x.accuracy == y.accuracy == 0.25
    assert y.saw_k_correct.value == 1.0  # the old definition would have given Y 1.0


def test_recovery_rejects_k_below_one() -> None:
    with pytest.raises(ValueError, match="k >= 1"):
        recovery_at_k(0, {"a": _saw(True)}, {"a": [True]})


def test_execution_errors_per_execution_and_per_trajectory() -> None:
    errors = execution_errors([0, 2, 1], [3, 2, 4])
    assert errors.per_execution == rate(3, 9)
    assert errors.trajectories_with_error == rate(2, 3)


def test_execution_errors_reject_more_errors_than_executions() -> None:
    with pytest.raises(ValueError, match=r"trajectories \[1\]"):
        execution_errors([0, 3], [1, 2])


def test_rate_with_zero_denominator_has_no_value() -> None:
    assert rate(0, 0).value is None


def test_no_answer_and_truncation_rates() -> None:
    assert no_answer_rate(["1", None, "3", None]).value == 0.5
    assert truncation_rate([True, False, False, False]).value == 0.25


def test_results_serialise_to_json_through_asdict() -> None:
    def round_trip(result: Any) -> Any:
        return json.loads(json.dumps(dataclasses.asdict(result)))

    assert round_trip(tool_calls([1, 2]))["histogram"] == [
        {"lo": 1, "hi": 2, "count": 1},
        {"lo": 2, "hi": 3, "count": 1},
    ]
    assert round_trip(response_lengths([2], [1]))["response_tokens"] == {
        "n": 1, "mean": 2, "median": 2, "p90": 2, "max": 2, "histogram": [{"lo": 2, "hi": 2, "count": 1}],
    }  # fmt: skip
    assert round_trip(recovery_at_k(1, {"a": [(True, 1)]}, {"a": [False]}))["ratio"] is None
    assert round_trip(execution_errors([1], [2]))["per_execution"] == {
        "numerator": 1,
        "denominator": 2,
        "value": 0.5,
    }


def test_paired_difference_by_hand_over_the_shared_problems_only() -> None:
    a = {"p1": [True, False, False, False], "p2": [False], "p3": [True, True], "only_a": [True]}
    b = {"p1": [True, True, True, False], "p2": [True], "p3": [True, True], "only_b": [False]}
    d = paired_difference(a, b)
    # per-problem differences 0.75-0.25, 1-0, 1-1 = 0.5, 1, 0: mean 0.5, sd 0.5, se 0.5/sqrt(3)
    assert (d.n_problems, d.better, d.worse) == (3, 2, 0)
    assert d.value == pytest.approx(0.5) and d.stderr == pytest.approx(0.5 / 3**0.5)
    assert (d.a, d.b) == (pytest.approx(1.25 / 3), pytest.approx(2.75 / 3))
    assert d.z == pytest.approx(3**0.5)


def test_pairing_removes_the_problems_shared_difficulty() -> None:
    # Ten easy problems both solve, ten hard ones neither does, and B gains one more easy-ish problem:
    # unpaired, each accuracy's standard error is ~0.11; paired, the only variance is that one problem.
    a = {f"e{i}": [True] for i in range(10)} | {f"h{i}": [False] for i in range(10)}
    b = dict(a) | {"h0": [True]}
    d = paired_difference(a, b)
    unpaired = avg_at_n(a).stderr
    assert d.value == pytest.approx(0.05) and d.stderr == pytest.approx(0.05)  # sd sqrt(1/20) / sqrt(20)
    assert unpaired is not None and d.stderr < unpaired / 2
    assert paired_difference(a, a).z is None  # identical runs: no difference, no z


def test_paired_difference_needs_a_shared_problem() -> None:
    with pytest.raises(ValueError, match="share no problem"):
        paired_difference({"x": [True]}, {"y": [True]})
    single = paired_difference({"x": [True]}, {"x": [False]})
    assert (single.value, single.stderr, single.z) == (-1.0, None, None)
