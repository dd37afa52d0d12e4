"""GRPO's training problems without copies of evaluation benchmark problems: build_sft's four passes.

The SFT build drops every source problem that copies a benchmark problem (`build_sft.decontam`:
word n-grams as written, with numbers masked, same-answer maths for translations, and the
answer-agnostic near-duplicate pass for renumbered, reworded, re-asked and translated copies); GRPO
reads the same source and must drop the same problems, or RL trains on the AIME 2026 and BeyondAIME
copies that DAPO-Math-17k holds. `decontaminate` applies that one `Decontaminator` (its default
n-gram size and thresholds) and returns the kept problems with its JSON-ready report (what was
removed and why, and the near-duplicate candidates kept for review), which the recipe writes into
the run folder. Pure: the caller loads the benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft.decontam import Decontaminator

REPORT_FILE = "decontamination.json"
"""The report's name in the GRPO output folder."""


@dataclass(frozen=True)
class Decontaminated:
    """The problems kept (source order) and the report (`Decontaminator.report`)."""

    problems: list[Problem]
    report: dict[str, Any]


def decontaminate(problems: Sequence[Problem], benchmarks: Mapping[str, Sequence[Problem]]) -> Decontaminated:
    """Drop the problems that copy a benchmark problem in any of build_sft's four passes.

    With no benchmarks, nothing is checked (the report says so: `benchmarks` is empty).
    """
    matches, report = Decontaminator(benchmarks).report(problems)
    return Decontaminated([p for p in problems if p.id not in matches], report)
