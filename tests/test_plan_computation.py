"""Computation in the plan (`trajectory.computation`): what the sources rule out of a ThinC plan.

The hostile plans do in prose what the explainers say a ThinC plan never does ("no step-by-step
derivation or numerical computation"; their own example is 500 x 0.12 worked out in words); the clean
ones are strategies and algebraic reformulations a plan may state. The project's own plans (the
bundled few-shot examples, every nano template-teacher plan) must pass, or its own SFT data would be
filtered out by its own rule.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench import nano, trajectory
from thinc_bench.trajectory import check_conformance, parse, plan_computation

COMPUTING = {
    "500 * 0.12 = 60, then write the loop.": "arithmetic",
    "First, 500 × 0.12 = 50, so use 50 in the code.": "arithmetic",
    r"Note $\frac{3}{4} \cdot 8 = 6$ before counting.": "arithmetic",
    "Since 2^{10} = 1024 we need ten bits.": "arithmetic",
    "2024 = 2^3 * 11 * 23, so factor by hand.": "arithmetic",
    "1/2 + 1/3 = 5/6 is the first partial sum.": "arithmetic",
    "The total is 3 + 4 + 5 = 12.": "arithmetic",
    "gcd(12, 18) = 6 fixes the period.": "arithmetic",
    r"$\sqrt{144} = 12$ is the side.": "arithmetic",
    "5! = 120 orderings.": "arithmetic",
    "22,275 / 5 = 4,455 per group.": "arithmetic",
    "12% of 500 is 60.": "arithmetic",
    "7 times 8 is 56.": "arithmetic",
    "Multiplying 17 by 23 digit by digit gives 391.": "arithmetic",
    "From 2x + 3 = 11, so x = 4, and then y follows.": "solved",
    "Subtracting the equations we get n = 17.": "solved",
    r"Thus $k = 12$ is the period.": "solved",
    "The system reduces, which means a = 9.": "solved",
    "(a+b)^2 = a^2 + 2ab + b^2 = 49 gives the square.": "chain",
    r"$S = \frac{n(n+1)}{2} = 5050$": "chain",
}
CLEAN = [
    "Sum directly over 1..999, keeping numbers divisible by 3 or 5 but not by 15.",
    "Use Vieta's formulas: the sum of squares is the square of the sum minus twice the sum of pairwise products.",
    "Let n = 2024 and count its divisors with a loop, then check against the factorisation.",
    "x^2 + y^2 = 25 is a circle; count lattice points with |x| <= 5 in code.",
    "Compute the lcm as a*b//gcd, check it with math.lcm, then print it.",
    "Work modulo 10^9 + 7 throughout.",
    "For 1 <= n <= 1000 test each n.",
    "f(x) = x^2 + 3x; find the roots of f(f(x)) = 0 numerically and count the real ones.",
    "The recurrence a_n = a_{n-1} + 2a_{n-2} with a_1 = 1 and a_2 = 3; iterate to a_{100}.",
    "Iterate k from 1 to 100, so k = 1 is the first case.",
    "Set up m/n in lowest terms and report m + n.",
    "The condition a + b = c determines c; enumerate a and b.",
    "Write P(x) = (x - r_1)(x - r_2)(x - r_3), expand it with sympy and read the coefficients.",
    "Both ends count.",
    "Let f = g = 0 at the boundary, and x = y = 3 where the curves meet.",
    "",
]


@pytest.mark.parametrize("plan", sorted(COMPUTING))
def test_computation_in_prose_is_found_with_its_kind(plan: str) -> None:
    found = plan_computation(plan)
    assert found and found[0].kind == COMPUTING[plan], found


@pytest.mark.parametrize("plan", CLEAN)
def test_strategy_restatement_and_algebra_are_not_computation(plan: str) -> None:
    assert plan_computation(plan) == []


def test_the_bundled_few_shot_examples_pass() -> None:
    lines = resources.files("thinc_bench.prompts").joinpath("examples.jsonl").read_text().splitlines()
    examples = [json.loads(line) for line in lines if line.strip()]
    assert examples
    for example in examples:
        traj = parse(example["trajectory"])
        assert traj.plan and plan_computation(trajectory.plan_words(traj)) == [], example["id"]
        assert check_conformance(traj).get("no_computation_in_plan").passed


def test_every_nano_teacher_plan_passes_and_its_nl_product_solution_does_not() -> None:
    problems = nano.generate("train")
    for problem in problems:
        for seed in (0, 1):
            traj = parse("".join(nano.thinc_turns(problem, seed)))
            assert plan_computation(trajectory.plan_words(traj)) == [], traj.plan
    product = next(p for p in problems if p.family == "product")
    (nl,) = nano.nl_turns(product)
    assert [f.kind for f in plan_computation(parse(nl).plan)] == ["arithmetic"]


def test_the_check_reads_the_plan_only_not_the_code_or_the_answer() -> None:
    text = "<think>\nMultiply in code.\n</think>\n```python\nprint(17 * 23)  # 17 * 23 = 391\n```\n```output\n391\n```\n17 * 23 = 391, so \\boxed{391}"
    assert check_conformance(parse(text)).get("no_computation_in_plan").passed
    worked = text.replace("Multiply in code.", "17 * 23 = 391; print it.")
    check = check_conformance(parse(worked)).get("no_computation_in_plan")
    assert not check.passed and "17 * 23 = 391" in check.detail


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 =+-*/^()xyn.,;so\\{}frac")), max_size=400))
def test_any_text_is_read_without_error_and_findings_quote_it(text: str) -> None:
    for finding in plan_computation(text):
        assert finding.kind in ("arithmetic", "solved", "chain") and finding.text


def test_a_long_hostile_plan_is_read_in_linear_time() -> None:
    import time

    unit = "1 + 1 = 2 = 2 = " + "(" * 50 + "3 ^ 4 " * 30 + ") so x = 5; "
    small, large = unit * 50, unit * 400
    started = time.perf_counter()
    plan_computation(small)
    one = time.perf_counter() - started
    started = time.perf_counter()
    plan_computation(large)
    eight = time.perf_counter() - started
    assert eight < 30 * one + 0.5  # 8x the text: far from the 64x of a quadratic scan
