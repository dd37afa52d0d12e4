"""Decontamination: copies of benchmark problems are caught, shared boilerplate is not."""

from __future__ import annotations

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
