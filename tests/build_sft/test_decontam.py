"""Decontamination: copies of benchmark problems (verbatim, renumbered, translated) are caught, boilerplate is not."""

from __future__ import annotations

import json
import re

import pytest

from thinc_bench import benchmarks
from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft.decontam import Decontaminator, ngrams


@pytest.fixture(scope="module")
def index(benchmark_dir) -> Decontaminator:
    names = benchmarks.PAPER_BENCHMARKS
    return Decontaminator({n: benchmarks.load(n, data_dir=benchmark_dir, check_golds=False) for n in names})


def test_a_verbatim_benchmark_problem_is_contaminated(index, benchmark_dir) -> None:
    problem = benchmarks.load("aime2025", data_dir=benchmark_dir, check_golds=False)[3]
    match = index.check(problem.problem)
    assert match is not None and (match.benchmark, match.problem_id, match.overlap) == (
        "aime2025",
        problem.id,
        1.0,
    )


def test_latex_and_spacing_changes_do_not_hide_a_copy(index, benchmark_dir) -> None:
    problem = benchmarks.load("aime2024", data_dir=benchmark_dir, check_golds=False)[0]
    disguised = problem.problem.replace("$", "\\(").replace(" ", "  ").upper()
    assert index.check(disguised) is not None


def test_shared_answer_boilerplate_is_not_contamination(index) -> None:
    text = (
        "The probability that a fair coin lands heads four times in a row is $\\frac{m}{n}$, "
        "where $m$ and $n$ are relatively prime positive integers. Find $m+n$."
    )
    assert index.check(text) is None


def test_check_many_reports_only_contaminated_problems(index, benchmark_dir) -> None:
    copy = benchmarks.load("hmmt_feb2025", data_dir=benchmark_dir, check_golds=False)[0]
    problems = [Problem("mine", "Compute 2 + 3.", "5", "t"), Problem("copy", copy.problem, "1", "t")]
    assert set(index.check_many(problems)) == {"copy"}


def test_short_texts_become_one_ngram_and_bad_settings_are_refused() -> None:
    assert ngrams("Compute 2 + 3", n=8) == {("compute", "2", "3")}
    with pytest.raises(ValueError, match="threshold"):
        Decontaminator({}, threshold=0)


# --- renumbered and translated copies (issue 20) ------------------------------------------------


def _shift_integers(text: str, by: int) -> str:
    return re.sub(r"\d+", lambda m: str(int(m.group()) + by), text)


@pytest.mark.parametrize("by", [1, 7])
def test_every_renumbered_benchmark_problem_is_caught(index, benchmark_dir, by) -> None:
    problems = [
        p
        for n in benchmarks.PAPER_BENCHMARKS
        for p in benchmarks.load(n, data_dir=benchmark_dir, check_golds=False)
    ]
    caught = [index.check(_shift_integers(p.problem, by)) for p in problems]
    assert [m.problem_id if m else None for m in caught] == [p.id for p in problems]
    assert {m.method for m in caught if m is not None} == {"words", "numbers_masked"}  # words alone miss some


def _dapo(shared_data, start: str) -> dict:
    rows = (shared_data / "train" / "dapo_math_17k.jsonl").read_text(encoding="utf-8").splitlines()
    return next(r for r in map(json.loads, rows) if r["problem"].startswith(start))


def test_masking_numbers_raises_the_overlap_of_the_renumbered_copy_in_dapo(index, shared_data) -> None:
    copy = _dapo(shared_data, "There are $2022$ equally spaced points")  # beyondaime-82 has 1038 points
    found = index.best_matches(copy["problem"], copy["answer"])
    assert found["words"].problem_id == found["numbers_masked"].problem_id == "beyondaime-82"
    assert found["words"].overlap < 0.55 < 0.65 < found["numbers_masked"].overlap


def test_the_chinese_translation_in_dapo_is_caught_with_its_answer_and_without(index, shared_data) -> None:
    translated = _dapo(shared_data, "设实数 x_1,x_2,\\cdots,x_{1997} 满足")  # beyondaime-80, translated
    assert index.best_matches(translated["problem"])["words"].overlap < 0.5  # words alone: 0.35
    match = index.check(translated["problem"], answer=translated["answer"])
    assert match is not None and (match.benchmark, match.problem_id, match.method) == (
        "beyondaime",
        "beyondaime-80",
        "maths_same_answer",
    )
    for answer in (None, "189549"):  # no answer, or re-asked for another: the near-duplicate pass sees it
        match = index.check(translated["problem"], answer=answer)
        assert match is not None and (match.problem_id, match.method) == ("beyondaime-80", "near_duplicate")


def test_a_prose_replaced_copy_is_caught_when_it_has_enough_maths(index, benchmark_dir) -> None:
    aime2024 = benchmarks.load("aime2024", data_dir=benchmark_dir, check_golds=False)
    original = next(p for p in aime2024 if p.id == "2024-I-14")  # the tetrahedron: AB=CD=sqrt(41), ...
    prose_gone = re.sub(r"(?<![\\A-Za-z])[A-Za-z]{2,}", "词", original.problem.replace("$", " "))
    match = index.check(prose_gone, answer=original.answer)
    assert match is not None and (match.problem_id, match.method) == (original.id, "maths_same_answer")


def test_same_answer_with_little_shared_maths_is_not_contamination(index, benchmark_dir) -> None:
    target = benchmarks.load("aime2024", data_dir=benchmark_dir, check_golds=False)[0]
    unrelated = "Let $x$ be a positive integer with $x^2 + x = m + n$. Find $m+n$."
    assert index.best_matches(unrelated, target.answer).get("maths_same_answer") is None


FOUND_BY_HAND = {
    # DAPO id (content hash of the problem) -> the benchmark problem it copies and the first pass that
    # sees it; every pair read side by side (docs/LOG.md, 2026-12-05)
    "dapo_math_17k-4d866680f923": ("aime2026", "2026-I-1", "words"),  # verbatim
    "dapo_math_17k-5f9bd3d78e97": ("beyondaime", "beyondaime-30", "words"),  # asks another form of the answer
    "dapo_math_17k-8bc55bd17c0d": (
        "beyondaime",
        "beyondaime-82",
        "words",
    ),  # renumbered: 2022 points, not 1038
    "dapo_math_17k-f1b45da44e08": ("beyondaime", "beyondaime-80", "maths_same_answer"),  # Chinese translation
    # issue 40's four: renumbered and reworded (31, 45), renumbered Chinese (68), re-asked Chinese (76, twice)
    "dapo_math_17k-dde5a520a6f1": ("beyondaime", "beyondaime-31", "near_duplicate"),
    "dapo_math_17k-fbda9e94f235": ("beyondaime", "beyondaime-45", "near_duplicate"),
    "dapo_math_17k-32c6f1e04bba": ("beyondaime", "beyondaime-68", "near_duplicate"),
    "dapo_math_17k-9767896dd462": ("beyondaime", "beyondaime-76", "near_duplicate"),
    "dapo_math_17k-5ce7eabf33c7": ("beyondaime", "beyondaime-76", "near_duplicate"),
    # found by the new pass: the same matrix with n^2-1 for n^3-n, in Chinese (three copies)
    "dapo_math_17k-b8f053be4402": ("beyondaime", "beyondaime-1", "near_duplicate"),
    "dapo_math_17k-3865489b24ba": ("beyondaime", "beyondaime-1", "near_duplicate"),
    "dapo_math_17k-c1d688c0d0bf": ("beyondaime", "beyondaime-1", "near_duplicate"),
    # the same sets with 100 for 200, in Chinese (three copies)
    "dapo_math_17k-c0dbb6a21aa4": ("beyondaime", "beyondaime-51", "near_duplicate"),
    "dapo_math_17k-f19fb3208fbb": ("beyondaime", "beyondaime-51", "near_duplicate"),
    "dapo_math_17k-83e15b2a369d": ("beyondaime", "beyondaime-51", "near_duplicate"),
    # the problem beyondaime-83 re-asks with other bounds and 20 summands for two
    "dapo_math_17k-c84d9aaa6c28": ("beyondaime", "beyondaime-83", "near_duplicate"),
}


def test_dapo_copy_flags_exactly_the_copies_found_by_hand(index, shared_data) -> None:
    from thinc_bench.build_sft.sources import load_source

    flagged = index.check_many(load_source("dapo_math_17k", shared_data / "train"))
    assert {pid: (m.benchmark, m.problem_id, m.method) for pid, m in flagged.items()} == FOUND_BY_HAND
