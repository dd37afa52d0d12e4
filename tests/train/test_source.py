"""GRPO's training problems lose their copies of benchmark problems, by build_sft's four passes."""

from __future__ import annotations

import json
from pathlib import Path

from shared_inputs import need_shared

from thinc_bench import benchmarks
from thinc_bench.benchmarks import PAPER_BENCHMARKS, Problem
from thinc_bench.train.source import decontaminate

BENCHMARKS = Path(__file__).resolve().parents[3] / "shared" / "data" / "benchmarks"


def _problem(pid: str, text: str, answer: str) -> Problem:
    return Problem(pid, text, answer, "train")


def test_copies_renumbered_copies_and_translations_are_removed_and_reported() -> None:
    need_shared(BENCHMARKS, "benchmark copies")
    aime = {n: benchmarks.load(n, BENCHMARKS, check_golds=False) for n in ("aime2025",)}
    original = next(p for p in aime["aime2025"] if p.id == "2025-I-1")
    training = [
        _problem("copy", "Question: " + original.problem, original.answer),  # as written, a prefix added
        # renumbered: 17 -> 18, 97 -> 98 (the words pass misses it, the masked pass does not)
        _problem("renumbered", original.problem.replace("17_b", "18_b").replace("97_b", "98_b"), "12"),
        _problem("own", "How many positive divisors does $2^{10} \\cdot 3^4$ have?", "55"),
    ]
    clean = decontaminate(training, aime)
    assert [p.id for p in clean.problems] == ["own"]
    report = clean.report
    assert (report["checked"], report["removed"], report["by_benchmark"]) == (3, 2, {"aime2025": 2})
    removed = {r["id"]: r for r in report["removed_problems"]}
    assert removed["copy"]["problem_id"] == "2025-I-1" and removed["copy"]["method"] == "words"
    assert removed["renumbered"]["method"] == "numbers_masked"
    json.dumps(report)  # written as is into the run folder


def test_no_benchmark_checks_nothing_and_says_so() -> None:
    training = [_problem("a", "What is 1 + 1?", "2")]
    clean = decontaminate(training, {})
    assert clean.problems == training and clean.report["benchmarks"] == [] and clean.report["removed"] == 0


def test_the_recipe_checks_the_paper_benchmarks_by_default() -> None:
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "recipes" / "grpo.py"
    spec = importlib.util.spec_from_file_location("recipes_grpo_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert module.ScriptArgs().decontam_benchmarks.split(",") == list(PAPER_BENCHMARKS)


def test_a_re_asked_translation_is_removed_by_the_near_duplicate_pass_and_a_related_problem_is_listed() -> (
    None
):
    original = (
        "Let $x_1, x_2, \\ldots, x_{40}$ be real numbers in $[-1, 2]$ with $x_1 + x_2 + \\cdots + x_{40} = 8$. "
        "Find the largest possible value of $x_1^3 + x_2^3 + \\cdots + x_{40}^3$."
    )
    translated = (  # renumbered, translated, and asked for the smallest value: another answer
        "设实数 $x_1, x_2, \\ldots, x_{99}$ 属于 $[-1, 2]$，且 $x_1 + x_2 + \\cdots + x_{99} = 5$。"
        "求 $x_1^3 + x_2^3 + \\cdots + x_{99}^3$ 的最小值。"
    )
    related = "Let $x_1, x_2, \\ldots, x_{40}$ be real numbers with $x_1^3 + x_2^3 = 2$. Find $x_1 + x_2$."
    training = [
        _problem("translated", translated, "-37"),
        _problem("related", related, "2"),
        _problem("own", "How many positive divisors does $2^{10} \\cdot 3^4$ have?", "55"),
    ]
    clean = decontaminate(training, {"made_up": [_problem("m-1", original, "56")]})
    assert [p.id for p in clean.problems] == ["related", "own"]
    report = json.loads(json.dumps(clean.report))  # written as is into the run folder
    assert report["by_method"] == {"near_duplicate": 1}
    rows = {r["id"]: r for r in report["review"]["made_up"]["m-1"]}
    assert rows["translated"]["decision"] == "dropped" and rows["translated"]["maths_same_answer"] is None
    assert rows["related"]["decision"] == "review" and rows["related"]["near_decision"] == "review"  # kept
    assert report["per_benchmark"]["made_up"] == {
        "removed": 1,
        "near_duplicate_confirmed": 1,
        "review": 1,
        "problems_with_candidates": 1,
    }
