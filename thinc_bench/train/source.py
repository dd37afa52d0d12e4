"""GRPO's training problems without copies of evaluation benchmark problems: build_sft's three passes.

The SFT build drops every source problem that copies a benchmark problem (`build_sft.decontam`:
word n-grams as written, with numbers masked, and same-answer maths for translations); GRPO reads
the same source and must drop the same problems, or RL trains on the AIME 2026 and BeyondAIME
copies that DAPO-Math-17k holds. `decontaminate` applies that one `Decontaminator` (its default
n-gram size and thresholds) and returns the kept problems with a JSON-ready report of what was
removed and why, which the recipe writes into the run folder. Pure: the caller loads the benchmarks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft.decontam import (
    DEFAULT_MATHS_THRESHOLD,
    DEFAULT_NGRAM,
    DEFAULT_THRESHOLD,
    Decontaminator,
)

REPORT_FILE = "decontamination.json"
"""The report's name in the GRPO output folder."""


@dataclass(frozen=True)
class Decontaminated:
    """The problems kept (source order) and the report: settings, counts, every removed problem."""

    problems: list[Problem]
    report: dict[str, Any]


def decontaminate(problems: Sequence[Problem], benchmarks: Mapping[str, Sequence[Problem]]) -> Decontaminated:
    """Drop the problems that copy a benchmark problem in any of build_sft's three passes.

    With no benchmarks, nothing is checked (the report says so: `benchmarks` is empty).
    """
    settings = {
        "ngram": DEFAULT_NGRAM,
        "threshold": DEFAULT_THRESHOLD,
        "maths_threshold": DEFAULT_MATHS_THRESHOLD,
    }
    matches = Decontaminator(benchmarks).check_many(problems) if benchmarks else {}
    kept = [p for p in problems if p.id not in matches]
    removed = [{"id": p.id, **asdict(matches[p.id])} for p in problems if p.id in matches]
    report = {
        "benchmarks": sorted(benchmarks),
        **settings,
        "checked": len(problems),
        "removed": len(removed),
        "by_benchmark": dict(sorted(Counter(r["benchmark"] for r in removed).items())),
        "by_method": dict(sorted(Counter(r["method"] for r in removed).items())),
        "removed_problems": removed,
    }
    return Decontaminated(kept, report)
