"""The answer-agnostic near-duplicate pass: paraphrases, renumbered, re-asked and translated copies of a
problem are dropped, different problems in the same template wording are not; its report lists the
candidates kept for review. The paraphrases are written here, of a made-up problem (issue 40)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from thinc_bench import benchmarks
from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft._normalize import masked_maths, prose_words
from thinc_bench.build_sft.decontam import Decontaminator
from thinc_bench.build_sft.near_duplicates import MATHS_ALONE, aligned, decide, scores

ORIGINAL = (
    "Let $a_1, a_2, \\ldots, a_{50}$ be real numbers such that $a_1 + a_2 + \\cdots + a_{50} = 10$ and "
    "$a_1^2 + a_2^2 + \\cdots + a_{50}^2 = 30$. The largest possible value of $a_{50}$ can be written as "
    "$\\frac{p}{q}$, where $p$ and $q$ are relatively prime positive integers. Find $p + q$."
)
COPIES = {
    "renumbered": ORIGINAL.replace("50", "64").replace("10", "12").replace("30", "40"),
    "paraphrased": (
        "Suppose the real numbers $a_1,a_2,\\dots,a_{50}$ satisfy $a_1+a_2+\\dots+a_{50}=10$ as well as "
        "$a_1^2+a_2^2+\\dots+a_{50}^2=30$. What is the maximum of $a_{50}$? Write it as a fraction $p/q$ in "
        "lowest terms and compute $p+q$."
    ),
    "translated": (
        "设实数 $a_1, a_2, \\cdots, a_{50}$ 满足 $a_1+a_2+\\cdots+a_{50}=10$，且 "
        "$a_1^2+a_2^2+\\cdots+a_{50}^2=30$。$a_{50}$ 的最大值可以写成既约分数 $\\frac{p}{q}$，求 $p+q$ 的值。"
    ),
    "renumbered and translated": (
        "设实数 $a_1, a_2, \\cdots, a_{2024}$ 满足 $a_1+a_2+\\cdots+a_{2024}=7$，且 "
        "$a_1^2+a_2^2+\\cdots+a_{2024}^2=9$。$a_{2024}$ 的最大值可以写成既约分数 $\\frac{p}{q}$，求 $p+q$ 的值。"
    ),
    "re-asked": ORIGINAL.replace("largest", "smallest").replace("a_{50}$ can", "a_1$ can"),
    "reordered": (
        "Find $p + q$, where $\\frac{p}{q}$ in lowest terms is the greatest value $a_{50}$ can take, given "
        "real numbers $a_1, a_2, \\ldots, a_{50}$ with $a_1^2 + a_2^2 + \\cdots + a_{50}^2 = 30$ and "
        "$a_1 + a_2 + \\cdots + a_{50} = 10$."
    ),
}
SAME_TEMPLATE = [
    (
        "Find the number of ordered pairs $(x, y)$ of positive integers such that $x^2 + y^2 = 2025$.",
        "Find the number of ordered pairs $(x, y)$ of positive integers such that "
        "$\\frac{1}{x} + \\frac{1}{y} = \\frac{1}{6}$.",
    ),
    (
        "Find the number of ordered pairs $(x,y)$ of integers with $|x| + |y| \\le 10$ such that $x + y$ is "
        "even and $xy$ is divisible by $3$.",
        "Find the number of ordered pairs $(x,y)$ of integers with $0 \\le x, y \\le 20$ such that "
        "$x^2 - y^2$ is a perfect square and $x > y$.",
    ),
    (
        "A fair coin is tossed $10$ times. The probability that no two consecutive tosses are heads is "
        "$\\frac{m}{n}$, where $m$ and $n$ are relatively prime positive integers. Find $m+n$.",
        "Two cards are drawn from a standard deck without replacement. The probability that both are aces "
        "or both are red is $\\frac{m}{n}$, where $m$ and $n$ are relatively prime positive integers. Find $m+n$.",
    ),
    (  # the same sequence and answer wording, another question: the hardest of these
        ORIGINAL,
        "Let $a_1, a_2, \\ldots, a_{50}$ be positive integers such that $a_1 a_2 \\cdots a_{50} = 10^{30}$. "
        "The number of such sequences with $a_1 \\le a_2$ can be written as $\\frac{p}{q}$, where $p$ and $q$ "
        "are relatively prime positive integers. Find $p + q$.",
    ),
]


def _index() -> Decontaminator:
    return Decontaminator({"made_up": [Problem("original", ORIGINAL, "29", "made_up")]})


def test_five_of_six_copies_are_dropped_without_their_answer_and_reordering_is_listed() -> None:
    index = _index()
    caught = {name: index.check(text) for name, text in COPIES.items()}
    assert {name: m.method if m else None for name, m in caught.items()} == {
        "renumbered": "numbers_masked",  # the old passes already see these two
        "re-asked": "words",
        "paraphrased": "near_duplicate",  # words alone: below 0.5; no answer given
        "translated": "near_duplicate",
        "renumbered and translated": "near_duplicate",
        "reordered": None,  # the two conditions swapped: maths aligned in order 0.61 < 0.75
    }
    assert {name: decide(scores(ORIGINAL, text)) for name, text in COPIES.items()} == {
        **dict.fromkeys(COPIES, "confirmed"),
        "reordered": "review",  # listed in decontamination.json, kept
    }


def test_different_problems_in_the_same_template_wording_are_not_dropped() -> None:
    for first, second in SAME_TEMPLATE:
        assert decide(scores(first, second)) != "confirmed", first[:40]
        index = Decontaminator({"b": [Problem("one", first, "1", "b")]})
        assert index.check(second) is None, second[:40]


def test_the_report_lists_dropped_and_review_pairs_per_benchmark_problem() -> None:
    training = [
        Problem("t-translated", COPIES["translated"], "29", "train"),
        Problem("t-reordered", COPIES["reordered"], "31", "train"),
        Problem("t-other", SAME_TEMPLATE[3][1], "1", "train"),
        Problem("t-unrelated", "How many divisors does $2^{10} \\cdot 3^4$ have?", "55", "train"),
    ]
    matches, report = _index().report(training)
    assert set(matches) == {"t-translated"} and report["removed"] == 1
    assert report["by_method"] == {"maths_same_answer": 1}  # it has the answer: the old pass names it
    rows = {r["id"]: r for r in report["review"]["made_up"]["original"]}
    assert set(rows) == {"t-translated", "t-reordered", "t-other"}
    assert (
        rows["t-translated"]["decision"] == "dropped" and rows["t-translated"]["near_decision"] == "confirmed"
    )
    assert [rows[i]["decision"] for i in ("t-reordered", "t-other")] == ["review", "review"]
    assert rows["t-translated"]["words"] < 0.5 and rows["t-translated"]["near_maths"] > 0.9
    assert report["per_benchmark"]["made_up"] == {
        "removed": 1,
        "near_duplicate_confirmed": 1,
        "review": 2,
        "problems_with_candidates": 1,
    }


# --- invariants ---------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "Let",
        "the",
        "sum",
        "of",
        "x",
        "y",
        "a_",
        "^",
        "+",
        "=",
        "\\frac{",
        "}{",
        "}",
        "\\cdots",
        "(",
        ")",
        "求",
        "值",
    ]
)
_TEXT = st.lists(st.one_of(_PIECES, st.integers(0, 10**6).map(str)), min_size=1, max_size=40).map(" ".join)


@given(_TEXT, st.lists(st.integers(0, 10**9), min_size=1, max_size=50))
def test_renumbering_never_changes_the_masked_streams(text, numbers) -> None:
    counter = iter(numbers * 50)
    renumbered = re.sub(r"\d+", lambda _: str(next(counter)), text)
    assert masked_maths(renumbered) == masked_maths(text)
    assert prose_words(renumbered) == prose_words(text)


@given(_TEXT, _TEXT)
def test_the_scores_are_symmetric_and_deterministic(first, second) -> None:
    assert scores(first, second) == scores(second, first) == scores(first, second)
    maths, n = aligned(masked_maths(first), masked_maths(first))
    assert n in (0, len(masked_maths(first))) and maths in (0.0, 1.0)


# --- the benchmark problems themselves, read at test time ----------------------------------------


def test_every_beyondaime_problem_with_enough_maths_renumbered_and_without_its_prose_is_dropped(
    benchmark_dir,
) -> None:
    problems = benchmarks.load("beyondaime", data_dir=benchmark_dir, check_golds=False)
    index = Decontaminator({"beyondaime": problems})
    disguised = {  # every integer + 7, every word replaced by a CJK character: a stand-in for a translation
        p.id: re.sub(
            r"(?<![\\A-Za-z])[A-Za-z]{2,}", "词", re.sub(r"\d+", lambda m: str(int(m.group()) + 7), p.problem)
        )
        for p in problems
        if len(masked_maths(p.problem)) >= MATHS_ALONE[1]
    }
    assert len(disguised) >= 30
    found = {pid: index.check(text) for pid, text in disguised.items()}
    assert {pid: m.problem_id if m else None for pid, m in found.items()} == {pid: pid for pid in disguised}
    originals = {p.id: p.problem for p in problems}
    # the near-duplicate pass alone confirms each (some are named by the masked word pass first)
    assert {decide(scores(originals[pid], text)) for pid, text in disguised.items()} == {"confirmed"}
