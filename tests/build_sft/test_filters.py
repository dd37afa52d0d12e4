"""The SFT filters: each a named decision, charged in order, with a documented per-problem cap."""

from __future__ import annotations

import dataclasses

import pytest

from thinc_bench.build_sft.filters import FILTERS, Candidate, FilterConfig, apply_filters, funnel
from thinc_bench.prompts import load_examples

GOOD = Candidate(
    problem_id="p",
    sample_idx=0,
    grade_status="correct",
    exec_statuses=("ok", "ok", "ok"),
    n_code_blocks=3,
    plan_tokens=20,
    model_tokens=100,
    total_tokens=100,
    grounded=True,
)


def one(**changes) -> Candidate:
    return dataclasses.replace(GOOD, **changes)


@pytest.mark.parametrize(
    ("filter_name", "changes"),
    [
        ("correct", {"grade_status": "incorrect"}),
        ("correct", {"grade_status": "no_answer"}),
        ("exec_ok", {"exec_statuses": ("ok", "timeout", "ok")}),
        ("exec_ok", {"exec_statuses": ("ok", "ok", "killed")}),
        ("min_code_blocks", {"n_code_blocks": 2, "exec_statuses": ("ok", "ok")}),
        # `code, code, code, output, \\boxed{}`: three blocks written, one executed (issue 20)
        ("min_code_blocks", {"n_code_blocks": 3, "exec_statuses": ("ok",)}),
        ("plan_share", {"plan_tokens": 50}),
        ("conformance", {"conformance_failures": ("no_text_between_code",)}),
        ("decontamination", {"contamination": "aime2025 2025-I-1 (1.00)"}),
        ("infra_error", {"grade_status": "infra_error"}),
        # processing the teacher's text raised: the teacher's failure (issue 49), never an outage
        ("processed", {"grade_status": "harness_error"}),
        ("ungraded", {"grade_status": "grader_error"}),
        # too large or deep to judge in bounded time: the teacher's answer (docs/grading.md)
        ("judgeable", {"grade_status": "grader_timeout"}),
        ("plan_computation", {"plan_computation": ("arithmetic: 500 * 0.12 = 60",)}),
        ("grounded", {"grounded": False}),
        ("grounded", {"grounded": None}),
        # cut by the budget after `\\boxed{6}. Let me double-check ... wh`: correct, but never ended
        ("finished", {"stop_reason": "max_tokens"}),
        ("finished", {"stop_reason": "max_tool_calls"}),
    ],
)
def test_each_broken_property_is_charged_to_its_filter(filter_name, changes) -> None:
    (decision,) = apply_filters([one(**changes)], FilterConfig())
    assert decision.failed == (filter_name,)
    assert not decision.kept


def test_trajectories_that_ended_by_answering_or_eos_are_finished() -> None:
    decisions = apply_filters(
        [one(stop_reason="answer"), one(problem_id="q", stop_reason="eos")], FilterConfig()
    )
    assert all(d.kept for d in decisions)


def test_an_ungraded_trajectory_is_not_counted_as_incorrect() -> None:
    (decision,) = apply_filters(
        [one(grade_status="grader_error", n_code_blocks=1, exec_statuses=("ok",))], FilterConfig()
    )
    assert decision.failed == ("ungraded", "min_code_blocks")  # not "correct": the verdict is unknown


def test_first_failed_filter_is_charged_but_all_are_recorded() -> None:
    (decision,) = apply_filters([one(grade_status="incorrect", exec_statuses=("ok",))], FilterConfig())
    assert decision.dropped_by == "correct"
    assert decision.failed == ("correct", "min_code_blocks")


def test_dedup_keeps_the_shortest_trajectories_ties_by_sample_index() -> None:
    candidates = [
        one(sample_idx=0, model_tokens=300),
        one(sample_idx=1, model_tokens=100),
        one(sample_idx=2, model_tokens=100),
        one(sample_idx=3, model_tokens=50, grade_status="incorrect"),
    ]
    kept = [d.candidate.sample_idx for d in apply_filters(candidates, FilterConfig()) if d.kept]
    assert kept == [1]
    kept2 = [
        d.candidate.sample_idx for d in apply_filters(candidates, FilterConfig(max_per_problem=2)) if d.kept
    ]
    assert sorted(kept2) == [1, 2]


def test_plan_share_threshold_is_strict() -> None:
    (at,) = apply_filters([one(plan_tokens=50)], FilterConfig(max_plan_share=0.5))
    (below,) = apply_filters([one(plan_tokens=49)], FilterConfig(max_plan_share=0.5))
    assert at.failed == ("plan_share",) and below.kept


def test_plan_share_counts_total_tokens_by_default_and_model_tokens_as_an_option() -> None:
    # 45 plan tokens of 80 written by the model, 120 in all (40 interpreter tokens): the sources count
    # the total (0.375, kept); the stricter model share (0.5625) rejects it
    long_plan = one(plan_tokens=45, model_tokens=80, total_tokens=120)
    (total,) = apply_filters([long_plan], FilterConfig())
    (model,) = apply_filters([long_plan], FilterConfig(plan_share_of="model"))
    assert total.kept and model.failed == ("plan_share",)
    assert model.reasons == ("plan 45 of 80 model tokens = 0.56 >= 0.5",)
    with pytest.raises(ValueError, match="plan_share_of"):
        apply_filters([GOOD], FilterConfig(plan_share_of="prompt"))  # type: ignore[arg-type]


def test_the_nl_contrast_can_turn_off_the_plan_computation_and_grounding_filters() -> None:
    nl = one(plan_computation=("arithmetic: 17 * 23 = 391",), grounded=False)
    (on,) = apply_filters([nl], FilterConfig())
    (off,) = apply_filters([nl], FilterConfig(plan_computation=False, grounded=False))
    assert on.failed == ("plan_computation", "grounded") and off.kept


def test_only_the_infrastructures_failures_are_counted_apart() -> None:
    from thinc_bench.build_sft.filters import INFRASTRUCTURE

    assert {"infra_error", "ungraded"} == INFRASTRUCTURE
    statuses = ["infra_error", "grader_error", "harness_error", "grader_timeout", "correct"]
    decisions = apply_filters([one(problem_id=s, grade_status=s) for s in statuses], FilterConfig())
    assert [d.dropped_by for d in decisions] == ["infra_error", "ungraded", "processed", "judgeable", None]


def test_funnel_counts_removed_remaining_and_failing_in_filter_order() -> None:
    candidates = [
        GOOD,
        one(problem_id="q", grade_status="incorrect", exec_statuses=("ok",)),
        one(problem_id="r", exec_statuses=("ok",)),
        one(sample_idx=1, model_tokens=200),
    ]
    steps = {s.name: s for s in funnel(apply_filters(candidates, FilterConfig()))}
    assert [s for s in steps] == list(FILTERS)
    assert (steps["correct"].removed, steps["correct"].remaining) == (1, 3)
    assert (steps["min_code_blocks"].removed, steps["min_code_blocks"].failing) == (1, 2)
    assert (steps["dedup"].removed, steps["dedup"].remaining) == (1, 1)


def test_conformance_filter_counts_every_check_but_those_with_a_filter_of_their_own() -> None:
    from thinc_bench.build_sft.filters import conformance_failures
    from thinc_bench.trajectory import check_conformance, parse

    text = (
        "<think>\nplan\n</think>\n```python\na = 1\n```\n```python\nb = 2\n```\n"
        "```python\nprint(3)\n```\n```output\n3\n```\n\\boxed{3}"
    )
    conformance = check_conformance(parse(text), min_code_blocks=5, max_plan_share=0.01)
    assert conformance.failed == ["n_code_blocks", "plan_share", "code_followed_by_output"]
    assert conformance_failures(conformance) == ("code_followed_by_output",)


def test_out_of_range_thresholds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_plan_share"):
        apply_filters([GOOD], FilterConfig(max_plan_share=0))


RECOVERED = one(exec_statuses=("error", "ok", "ok", "ok"), n_code_blocks=4, grounded_clean=True)
"""A compute block that failed, then compute, check and print that ran clean; the answer printed clean."""
SHARE = FilterConfig(recovery_share=0.3, cap_recovered=False)
"""The template teacher's filters: recovered trajectories accepted, no cap (it writes the share itself)."""
CAPPED = FilterConfig(recovery_share=0.3)
"""A model teacher's: at most 0.3 of the kept set recovered."""


def test_a_recovered_trajectory_is_kept_only_with_a_recovery_share() -> None:
    (off,) = apply_filters([RECOVERED], FilterConfig())
    assert off.failed == ("exec_ok",) and off.reasons == ("executions error",) and not off.recovered
    (on,) = apply_filters([RECOVERED], SHARE)
    assert on.kept and on.recovered
    (twice,) = apply_filters(
        [one(exec_statuses=("error", "timeout", "ok", "ok", "ok"), grounded_clean=True)], SHARE
    )
    assert twice.kept and twice.recovered  # a block too slow is the code's failure too
    (clean,) = apply_filters([GOOD], SHARE)
    assert clean.kept and not clean.recovered


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        # failed at the end: nothing ran clean after the failure
        ({"exec_statuses": ("ok", "ok", "ok", "error")}, "the last execution ended in error"),
        ({"exec_statuses": ("error", "ok", "ok", "ok", "memory")}, "the last execution ended in memory"),
        # the answer was printed only by a block that then failed (`print(ans); 1/0`)
        ({"grounded_clean": False}, "the answer is not printed by a clean execution"),
        ({"grounded_clean": None}, "the answer is not printed by a clean execution"),  # never measured
        # the harness's failure is not the code's: nothing for a student to learn from its notice
        ({"exec_statuses": ("infra_error", "ok", "ok", "ok")}, "infra_error is the harness's failure"),
    ],
)
def test_what_is_not_a_recovery_is_charged_to_exec_ok_with_its_reason(changes, why) -> None:
    (decision,) = apply_filters([dataclasses.replace(RECOVERED, **changes)], SHARE)
    assert decision.dropped_by == "exec_ok" and not decision.recovered
    assert why in decision.reasons[0] and "not recovered" in decision.reasons[0]


def test_a_recovered_trajectorys_failed_attempts_are_not_counted_as_code_blocks() -> None:
    # failed, then two clean blocks: three executions but two blocks of reasoning
    (two,) = apply_filters([dataclasses.replace(RECOVERED, exec_statuses=("error", "ok", "ok"))], SHARE)
    assert two.failed == ("min_code_blocks",) and two.reasons == ("2 clean of 4 code blocks < 3",)


def test_dedup_prefers_a_clean_trajectory_to_a_shorter_recovered_one() -> None:
    shorter = dataclasses.replace(RECOVERED, sample_idx=0, model_tokens=50)
    clean = one(sample_idx=1, model_tokens=300)
    decisions = apply_filters([shorter, clean], SHARE)
    assert [d.kept for d in decisions] == [False, True] and decisions[0].dropped_by == "dedup"
    both = apply_filters([shorter, clean], dataclasses.replace(SHARE, max_per_problem=2))
    assert all(d.kept for d in both)


def _mixed(n_clean: int, n_recovered: int) -> list[Candidate]:
    clean = [one(problem_id=f"c{i}") for i in range(n_clean)]
    recovered = [  # longer and longer, each on its own problem
        dataclasses.replace(RECOVERED, problem_id=f"r{i}", model_tokens=100 + i) for i in range(n_recovered)
    ]
    return clean + recovered


def test_a_model_teachers_recovered_trajectories_are_capped_at_the_share_of_the_kept_set() -> None:
    # 7 clean kept: 3 recovered make 3/10 = 0.3 of the kept set, a fourth would make 4/11 > 0.3
    decisions = apply_filters(_mixed(7, 5), CAPPED)
    kept = [d.candidate.problem_id for d in decisions if d.kept]
    assert kept == ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "r0", "r1", "r2"]  # the shortest recovered
    capped = [d for d in decisions if not d.kept]
    assert [d.candidate.problem_id for d in capped] == ["r3", "r4"]
    assert all(d.failed == ("exec_ok",) and d.recovered for d in capped)
    assert "past --recovery-share 0.3: 3 of 5 recovered kept beside 7 clean" in capped[0].reasons[0]
    steps = {s.name: s for s in funnel(decisions)}
    assert (steps["exec_ok"].removed, steps["dedup"].remaining) == (2, 10)
    # no clean trajectory at all: no recovered one fits under a share below 1
    assert not any(d.kept for d in apply_filters(_mixed(0, 3), CAPPED))
    # a share of 0.5: as many recovered as clean
    half = apply_filters(_mixed(4, 6), FilterConfig(recovery_share=0.5))
    assert sum(d.kept and d.recovered for d in half) == 4


def test_without_the_cap_or_at_share_one_every_recovered_trajectory_is_kept() -> None:
    uncapped = apply_filters(_mixed(7, 5), SHARE)
    assert all(d.kept for d in uncapped) and sum(d.recovered for d in uncapped) == 5
    assert all(d.kept for d in apply_filters(_mixed(0, 3), FilterConfig(recovery_share=1.0)))


def test_an_out_of_range_recovery_share_is_refused() -> None:
    for share in (-0.1, 1.5):
        with pytest.raises(ValueError, match="recovery_share"):
            apply_filters([GOOD], FilterConfig(recovery_share=share))


@pytest.mark.parametrize("example", load_examples(), ids=lambda e: e.id)
def test_fewshot_example_is_real_and_passes_every_sft_filter(example, benchmark_dir) -> None:
    from thinc_bench import benchmarks, grading, trajectory
    from thinc_bench.backends import smollm2_gguf
    from thinc_bench.backends._sources import load_tokenizer
    from thinc_bench.build_sft.decontam import Decontaminator
    from thinc_bench.build_sft.filters import conformance_failures
    from thinc_bench.build_sft.masks import tokenize_example
    from thinc_bench.prompts import build_messages
    from thinc_bench.sandbox import Sandbox

    parsed = trajectory.parse(example.trajectory)
    with Sandbox() as sb, sb.session() as session:
        results = [session.run(code) for code in parsed.code_blocks]
    assert [r.output.rstrip("\n") for r in results] == parsed.outputs
    tokenized = tokenize_example(
        load_tokenizer(str(smollm2_gguf())), build_messages(example.problem, "sys"), parsed
    )
    index = Decontaminator(
        {
            n: benchmarks.load(n, data_dir=benchmark_dir, check_golds=False)
            for n in benchmarks.PAPER_BENCHMARKS
        }
    )
    candidate = Candidate(
        problem_id=example.id,
        sample_idx=0,
        grade_status=grading.grade(gold=example.answer, pred=example.trajectory).status,
        exec_statuses=tuple(r.status for r in results),
        n_code_blocks=parsed.n_code_blocks,
        plan_tokens=tokenized.plan_tokens,
        model_tokens=tokenized.model_tokens,
        total_tokens=tokenized.total_tokens,
        plan_computation=tuple(f.text for f in trajectory.plan_computation(trajectory.plan_words(parsed))),
        grounded=grading.is_grounded(tokenized.trajectory),
        conformance_failures=conformance_failures(trajectory.check_conformance(tokenized.trajectory)),
        contamination=None if index.check(example.problem) is None else "contaminated",
    )
    (decision,) = apply_filters([candidate], FilterConfig())
    assert decision.kept, decision.reasons
    assert grading.is_grounded(parsed) and not candidate.plan_computation
