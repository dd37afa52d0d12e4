"""Differences between two runs, paired by problem (and by matched pair where a benchmark is asked
in pairs): the one table of the report computed from samples rather than read from summary.json,
since a difference between two runs belongs to neither run's summary. Pure over loaded Runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinc_bench.report.runs import Run


def paired_rows(
    runs: Sequence[Run], benchmarks: Sequence[str], pairs: Sequence[tuple[int, int]]
) -> list[dict[str, Any]]:
    """B minus A per benchmark, paired by problem, for each (b, a) pair of run indices.

    The one table computed here from samples rather than read from summary.json: a difference
    between two runs belongs to neither run's summary. Clean (k = 0) samples as accuracy counts them
    (all but infrastructure's: `thinc_bench.outcomes`); then, for each k > 0 both runs ran,
    Recovery@k the way eval counts it (every faulted sample; `k` on the row). Each run keeps its own samples per
    problem (avg@4 against avg@1 pairs). A benchmark the two runs share no problem of is left out.
    Every row has its exact test beside z (`p_exact`: McNemar's). On a benchmark asked in matched pairs
    (`thinc_bench.nano.pairs`) a second row (`unit` "pair") pairs the runs by pair, on pair accuracy.
    """
    from thinc_bench import metrics
    from thinc_bench.report.matched import by_problem, pair_members

    rows: list[dict[str, Any]] = []
    for b, a in pairs:
        ks = sorted({int(s["k"]) for s in runs[a].samples} & {int(s["k"]) for s in runs[b].samples} | {0})
        for k in ks:
            for name in benchmarks:
                a_scores, b_scores = by_problem(runs[a], name, k), by_problem(runs[b], name, k)
                if not any(b_scores.get(pid) for pid, v in a_scores.items() if v):
                    continue
                members = pair_members([*a_scores, *b_scores])
                units = [("problem", a_scores, b_scores)]
                if members:
                    a_pairs, b_pairs = (
                        metrics.pair_scores(a_scores, members),
                        metrics.pair_scores(b_scores, members),
                    )
                    if any(b_pairs.get(pair) for pair in a_pairs):
                        units.append(("pair", a_pairs, b_pairs))
                for unit, x, y in units:
                    d = metrics.paired_difference(x, y)
                    rows.append(
                        {
                            "b": b,
                            "a": a,
                            "b_label": runs[b].label,
                            "a_label": runs[a].label,
                            "benchmark": name,
                            "unit": unit,
                            "k": k,
                            "value": d.value,
                            "stderr": d.stderr,
                            "z": d.z,
                            "p_exact": d.p_exact,
                            "n_problems": d.n_problems,
                            "a_accuracy": d.a,
                            "b_accuracy": d.b,
                            "better": d.better,
                            "worse": d.worse,
                        }
                    )
    return rows


def resolve_pairs(runs: Sequence[Run], wanted: Sequence[str] | None) -> list[tuple[int, int]]:
    """Run-index pairs from `B:A` label pairs; by default every later run against the first.

    Raises:
        ConfigError: a pair that is not `B:A`, or a label no run has (the message lists the labels).
    """
    from thinc_bench.errors import ConfigError

    if wanted is None:
        return [(b, 0) for b in range(1, len(runs))]
    labels = [run.label for run in runs]
    out = []
    for text in wanted:
        b_label, sep, a_label = text.rpartition(":")
        missing = [x for x in (b_label, a_label) if x not in labels]
        if not sep or missing:
            raise ConfigError(
                f"--paired {text!r}: give B:A with two run labels of this report ({', '.join(labels)})"
            )
        out.append((labels.index(b_label), labels.index(a_label)))
    return out
