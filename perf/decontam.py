"""Decontamination and deduplication of the local DAPO-Math-17k copy, measured (docs/LOG.md, issue 20).

Reads ../shared/data/train/dapo_math_17k.jsonl and the benchmarks in ../shared/data/benchmarks and
prints:

- deduplication: rows, distinct problems by whitespace alone and by `_normalize.problem_key`, the
  extra merges, and the groups of copies with conflicting golds (exact copies and the rest);
- decontamination: problems flagged per benchmark by the word pass alone (before), by the three
  n-gram passes, and by all four (the answer-agnostic near-duplicate pass, issue 40), every flagged
  pair, the near-duplicate pairs listed for review, and the best pairs just under each threshold;
  against the five evaluation benchmarks and MATH-500 (~720 problems);
- recall on renumbered copies of every benchmark problem (every integer shifted by +1 and by +7)
  and on prose-replaced copies (every word of two or more letters replaced by a CJK character, `$`
  dropped, `\\frac` written `\\dfrac`: a stand-in for a translation, which keeps the maths), and
  both without the answer (a renumbered, re-asked translation), with the near-duplicate pass alone
  beside the others;
- time, side by side in one run: the three n-gram passes (inverted indexes), the near-duplicate pass
  alone, and all four with the review list (`Decontaminator.report`), over every DAPO problem; and
  the word pass comparing every pair, on a sample.

    OMP_NUM_THREADS=1 python perf/decontam.py [--data ../shared/data] [--under 8]
"""

import argparse
import re
import time
from collections import defaultdict
from pathlib import Path

from thinc_bench import benchmarks
from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft._normalize import problem_key
from thinc_bench.build_sft.decontam import (
    DEFAULT_MATHS_THRESHOLD,
    DEFAULT_THRESHOLD,
    METHODS,
    Decontaminator,
    Match,
    ngrams,
)
from thinc_bench.build_sft.near_duplicates import NearDuplicateIndex
from thinc_bench.build_sft.sources import dedupe, load_deduplicated, normalize_problem

SAMPLE = 500
"""DAPO problems the all-pairs baseline compares (it would take minutes on all of them)."""


def _dedup(train_dir: Path) -> None:
    rows = benchmarks.load(str(train_dir / "dapo_math_17k.jsonl"), check_golds=False)  # row ids dapo17k-N
    result = dedupe(rows)
    texts: dict[str, set[str]] = defaultdict(set)
    for p in rows:
        texts[problem_key(p.problem)].add(normalize_problem(p.problem))
    whitespace = sum(map(len, texts.values()))
    merged = [t for t in texts.values() if len(t) > 1]
    exact = sum(len({normalize_problem(p.problem) for p in g}) == 1 for g in result.conflicting)
    print(f"dedup: {len(rows)} rows; {whitespace} distinct problems by whitespace alone")
    print(f"  problem_key merges {sum(len(t) - 1 for t in merged)} more of them in {len(merged)} groups")
    print(
        f"  conflicting golds: {len(result.conflicting)} groups ({exact} exact copies), "
        f"{sum(map(len, result.conflicting))} rows dropped; {len(result.problems)} problems kept"
    )
    for group in result.conflicting:
        print("   ", [(p.id, p.answer) for p in group], repr(group[0].problem[:70]))


def _shift(text: str, by: int) -> str:
    return re.sub(r"\d+", lambda m: str(int(m.group()) + by), text)


def _prose_replaced(text: str) -> str:
    text = re.sub(r"\\[dt]?frac", r"\\dfrac", text.replace("$", " "))
    return re.sub(r"(?<![\\A-Za-z])[A-Za-z]{2,}", "词", text)


BENCHMARKS = (*benchmarks.PAPER_BENCHMARKS, "math500")
"""The five evaluation benchmarks (GRPO's and build_sft's default) and MATH-500."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--under", type=int, default=8, help="pairs shown just under each threshold")
    args = parser.parse_args()
    data = Path(args.data)
    _dedup(data / "train")

    bench = {n: benchmarks.load(n, data_dir=data / "benchmarks", check_golds=False) for n in BENCHMARKS}
    train = load_deduplicated("dapo_math_17k", data / "train").problems
    started = time.perf_counter()
    index = Decontaminator(bench)
    built = time.perf_counter() - started
    started = time.perf_counter()
    three = {p.id: m for p in train if (m := _three_passes(index, p)) is not None}
    timed_three = time.perf_counter() - started
    near = NearDuplicateIndex(bench)
    started = time.perf_counter()
    pairs = {p.id: near.pairs(p.problem) for p in train}
    timed_near = time.perf_counter() - started
    started = time.perf_counter()
    flagged, report = index.report(train)
    timed_four = time.perf_counter() - started
    best = {p.id: index.best_matches(p.problem, p.answer) for p in train}
    before = {
        pid: m for pid, found in best.items() if (m := found.get("words")) and m.overlap >= DEFAULT_THRESHOLD
    }
    print(
        f"\ndecontamination of {len(train)} DAPO problems against {sum(map(len, bench.values()))} benchmark problems"
    )
    print(
        f"  {'benchmark':<14}{'words':>7}{'3 passes':>10}{'4 passes':>10}{'near confirmed':>16}"
        f"{'near review':>13}{'with candidates':>17}"
    )
    for name in bench:
        row = report["per_benchmark"][name]
        print(
            f"  {name:<14}{sum(m.benchmark == name for m in before.values()):>7}"
            f"{sum(m.benchmark == name for m in three.values()):>10}{row['removed']:>10}"
            f"{row['near_duplicate_confirmed']:>16}{row['review']:>13}{row['problems_with_candidates']:>17}"
        )
    print(f"  dropped by method: {report['by_method']}")
    for pid, m in sorted(flagged.items(), key=lambda kv: (kv[1].benchmark, kv[1].problem_id)):
        words = best[pid].get("words")
        print(
            f"    {pid} -> {m.benchmark} {m.problem_id}: {m.method} {m.overlap:.3f} "
            f"(words {words.overlap if words else 0:.3f})"
        )
    for method in METHODS[:3]:
        limit = DEFAULT_MATHS_THRESHOLD if method == "maths_same_answer" else DEFAULT_THRESHOLD
        under = sorted(
            (
                (found[method].overlap, pid, found[method])
                for pid, found in best.items()
                if method in found and found[method].overlap < limit
            ),
            key=lambda item: -item[0],
        )[: args.under]
        print(f"  just under {method} threshold {limit}:")
        for overlap, pid, m in under:
            print(f"    {overlap:.3f} {pid} ~ {m.benchmark} {m.problem_id}")
    review = sorted(
        ((q, pid) for pid, qs in pairs.items() for q in qs if q.decision == "review"),
        key=lambda r: -r[0].score,
    )
    print(f"  best near-duplicate pairs kept for review (of {len(review)}):")
    for q, pid in review[: args.under]:
        s = q.scores
        print(
            f"    maths {s.maths:.2f} over {s.maths_aligned}, prose {s.prose:.2f} over {s.prose_aligned}: "
            f"{pid} ~ {q.benchmark} {q.problem_id}"
        )

    problems = [(n, p) for n, ps in bench.items() for p in ps]
    print(f"\nrecall on copies of all {len(problems)} benchmark problems (the right problem named)")
    for label, make, with_answer in (
        ("renumbered +1", lambda t: _shift(t, 1), False),
        ("renumbered +7", lambda t: _shift(t, 7), False),
        ("prose replaced", _prose_replaced, True),
        ("both, no answer", lambda t: _prose_replaced(_shift(t, 7)), False),  # a re-asked translation
    ):
        words_only = sum(
            (m := index.best_match(make(p.problem))) is not None
            and m.overlap >= DEFAULT_THRESHOLD
            and m.problem_id == p.id
            for _, p in problems
        )
        caught3 = sum(
            (m := _three_passes(index, Problem(p.id, make(p.problem), p.answer if with_answer else "", n)))
            is not None
            and m.problem_id == p.id
            for n, p in problems
        )
        near_only = sum(
            any(q.decision == "confirmed" and q.problem_id == p.id for q in near.pairs(make(p.problem)))
            for _, p in problems
        )
        caught4 = sum(
            (m := index.check(make(p.problem), p.answer if with_answer else None)) is not None
            and m.problem_id == p.id
            for _, p in problems
        )
        print(
            f"  {label:<15} words alone {words_only:>3}, three passes {caught3:>3}, near-duplicate alone "
            f"{near_only:>3}, four passes {caught4:>3} of {len(problems)}"
        )

    sample = train[:SAMPLE]
    bench_grams = [(p, ngrams(p.problem)) for _, p in problems]
    started = time.perf_counter()
    for t in sample:
        grams = ngrams(t.problem)
        max((len(grams & g) / max(len(grams), len(g), 1), p.id) for p, g in bench_grams)
    pairs_time = (time.perf_counter() - started) / len(sample) * len(train)
    print(f"\ntime over all {len(train)} DAPO problems (indexes built in {built:.2f} s):")
    print(f"  three n-gram passes:                    {timed_three:6.1f} s (1.00)")
    print(f"  near-duplicate pass alone:              {timed_near:6.1f} s ({timed_near / timed_three:.2f})")
    print(f"  all four with the review list (report): {timed_four:6.1f} s ({timed_four / timed_three:.2f})")
    print(
        f"  word pass alone, all pairs (extrapolated from {SAMPLE}): {pairs_time:.1f} s "
        f"({pairs_time / timed_three:.2f})"
    )


def _three_passes(index: Decontaminator, problem: Problem) -> Match | None:
    """The first of the three n-gram passes that reaches its threshold (the check before issue 40),
    without the near-duplicate search `best_matches` and `check` also run."""
    for method in METHODS[:3]:
        match = index._best(method, problem.problem, problem.answer or None, [])
        limit = DEFAULT_MATHS_THRESHOLD if method == "maths_same_answer" else DEFAULT_THRESHOLD
        if match is not None and match.overlap >= limit:
            return match
    return None


if __name__ == "__main__":
    main()
