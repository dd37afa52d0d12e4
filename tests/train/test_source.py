"""GRPO's training problems lose their copies of benchmark problems, by build_sft's three passes."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import need_shared

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
