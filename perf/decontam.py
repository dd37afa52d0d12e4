"""Decontamination and deduplication of the local DAPO-Math-17k copy, measured (docs/LOG.md, issue 20).

Reads ../shared/data/train/dapo_math_17k.jsonl and the five paper benchmarks in
../shared/data/benchmarks and prints:

- deduplication: rows, distinct problems by whitespace alone and by `_normalize.problem_key`, the
  extra merges, and the groups of copies with conflicting golds (exact copies and the rest);
- decontamination: problems flagged per benchmark by the word pass alone (before) and by the three
  passes (after), every flagged pair, and the best pairs just under each pass's threshold;
- recall on renumbered copies of all 220 benchmark problems (every integer shifted by +1 and by +7)
  and on prose-replaced copies (every word of two or more letters replaced by a CJK character, `$`
  dropped, `\\frac` written `\\dfrac`: a stand-in for a translation, which keeps the maths);
- time: the inverted index against comparing every pair, on a sample, side by side.

    python perf/decontam.py [--data ../shared/data] [--under 8]
"""

import argparse
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from thinc_bench import benchmarks
from thinc_bench.build_sft._normalize import maths_tokens, problem_key
from thinc_bench.build_sft.decontam import (
    DEFAULT_MATHS_THRESHOLD,
    DEFAULT_THRESHOLD,
    MATHS_MIN_SHARED,
    MATHS_NGRAM,
    METHODS,
    Decontaminator,
    _grams,
    ngrams,
)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--under", type=int, default=8, help="pairs shown just under each threshold")
    args = parser.parse_args()
    data = Path(args.data)
    _dedup(data / "train")

    bench = {
        n: benchmarks.load(n, data_dir=data / "benchmarks", check_golds=False)
        for n in benchmarks.PAPER_BENCHMARKS
    }
    train = load_deduplicated("dapo_math_17k", data / "train").problems
    started = time.perf_counter()
    index = Decontaminator(bench)
    built = time.perf_counter() - started
    started = time.perf_counter()
    best = {p.id: index.best_matches(p.problem, p.answer) for p in train}
    indexed = time.perf_counter() - started
    flagged = index.check_many(train)
    before = {
        pid: m for pid, found in best.items() if (m := found.get("words")) and m.overlap >= DEFAULT_THRESHOLD
    }
    print(
        f"\ndecontamination of {len(train)} DAPO problems against {sum(map(len, bench.values()))} benchmark problems"
    )
    print(f"  {'benchmark':<14}{'before (words)':>16}{'after (3 passes)':>18}")
    for name in bench:
        b = sum(m.benchmark == name for m in before.values())
        a = sum(m.benchmark == name for m in flagged.values())
        print(f"  {name:<14}{b:>16}{a:>18}")
    print(f"  flagged by method: {dict(Counter(m.method for m in flagged.values()))}")
    for pid, m in sorted(flagged.items(), key=lambda kv: -kv[1].overlap):
        words = best[pid].get("words")
        print(
            f"    {pid} -> {m.benchmark} {m.problem_id}: {m.method} {m.overlap:.3f} (words {words.overlap if words else 0:.3f})"
        )
    for method in METHODS:
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

    problems = [(n, p) for n, ps in bench.items() for p in ps]
    print(f"\nrecall on copies of all {len(problems)} benchmark problems")
    for label, make, with_answer in (
        ("renumbered +1", lambda t: _shift(t, 1), False),
        ("renumbered +7", lambda t: _shift(t, 7), False),
        ("prose replaced", _prose_replaced, True),
    ):
        words_only = sum(
            (m := index.best_match(make(p.problem))) is not None
            and m.overlap >= DEFAULT_THRESHOLD
            and m.problem_id == p.id
            for _, p in problems
        )
        caught = [index.check(make(p.problem), p.answer if with_answer else None) for _, p in problems]
        right = sum(
            m is not None and m.problem_id == p.id for m, (_, p) in zip(caught, problems, strict=True)
        )
        print(f"  {label:<15} words alone {words_only:>3}, three passes {right:>3} of {len(problems)}")
        if label == "prose replaced":
            missed = [
                p for m, (_, p) in zip(caught, problems, strict=True) if m is None or m.problem_id != p.id
            ]
            small = sum(len(_grams(maths_tokens(p.problem), MATHS_NGRAM)) < MATHS_MIN_SHARED for p in missed)
            print(
                f"    missed {len(missed)}, of which {small} have fewer than {MATHS_MIN_SHARED} maths {MATHS_NGRAM}-grams"
            )

    sample = train[:SAMPLE]
    bench_grams = [(p, ngrams(p.problem)) for _, p in problems]
    started = time.perf_counter()
    for t in sample:
        grams = ngrams(t.problem)
        max((len(grams & g) / max(len(grams), len(g), 1), p.id) for p, g in bench_grams)
    pairs = (time.perf_counter() - started) / len(sample) * len(train)
    print(f"\ntime: index built in {built:.2f} s; all {len(train)} problems, three passes: {indexed:.1f} s")
    print(
        f"  word pass alone, all pairs (extrapolated from {SAMPLE}): {pairs:.1f} s; index, three passes: {indexed:.1f} s"
    )


if __name__ == "__main__":
    main()
