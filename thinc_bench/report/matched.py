"""Matched pairs in the report: which benchmark is asked in pairs, and each run's score by pair.

A benchmark is asked in matched pairs when every problem id of it is a pair member
(`thinc_bench.nano.pair_member`: `nano_pairs`, each range asked with an inclusive and an exclusive
bound). `paired.paired_rows` pairs two runs on it by pair too; `matched_pair_rows` scores each run
(`metrics.matched_pairs`). The records carry no problem metadata, so the pairing is read from the ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinc_bench.report.runs import Run


def by_problem(run: Run, benchmark: str, k: int) -> dict[str, list[bool]]:
    """Per problem, the verdicts of its samples at `k` as accuracy counts them (all but infrastructure's)."""
    from thinc_bench.outcomes import EXCLUDED_STATUSES

    out: dict[str, list[bool]] = {}
    for s in run.samples:
        if s["benchmark"] != benchmark or s["k"] != k or s["status"] in EXCLUDED_STATUSES:
            continue
        out.setdefault(s["problem_id"], []).append(bool(s["correct"]))
    return out


def pair_members(problem_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Problem id -> (pair, member) when every id is a matched-pair member (`nano.pair_member`), else {}."""
    from thinc_bench.nano import pair_member

    members = {pid: pair_member(pid) for pid in problem_ids}
    if not members or any(m is None for m in members.values()):
        return {}
    return {pid: m for pid, m in members.items() if m is not None}


def matched_pair_rows(runs: Sequence[Run], benchmarks: Sequence[str]) -> list[dict[str, Any]]:
    """Per run and benchmark asked in matched pairs, its score by pair (`metrics.matched_pairs`): pair
    accuracy, how the pairs split, each member kind's accuracy, the exact tests against a reader that
    ignores the bound (blind p) and of one reading against the other (convention p). Clean samples."""
    from thinc_bench import metrics

    rows: list[dict[str, Any]] = []
    for r, run in enumerate(runs):
        for name in benchmarks:
            scores = by_problem(run, name, 0)
            members = pair_members(list(scores))
            if not members or not metrics.pair_scores(scores, members):
                continue
            m = metrics.matched_pairs(scores, members)
            rows.append({"run": r, "label": run.label, "benchmark": name, **dataclasses.asdict(m)})
    return rows
