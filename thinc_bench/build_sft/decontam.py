"""Decontamination: is a training problem a copy of an evaluation benchmark problem?

Four passes, in order; the first that reaches its threshold names the match (`Match.method`):

1. `words`: word n-grams (`DEFAULT_NGRAM`) of the normalised text (lower case; runs of ASCII letters
   and digits, and single CJK characters, are the words, so LaTeX markup and spacing do not matter).
2. `numbers_masked`: the same on the text with every number masked, for renumbered copies.
3. `maths_same_answer`: for a problem with the same gold answer, n-grams (`MATHS_NGRAM`) of its maths
   alone (LaTeX commands, numbers, single-letter symbols; `_normalize.maths_tokens`), for translated
   copies, whose prose shares nothing with the original but whose maths is the same.
4. `near_duplicate`: answer-agnostic, numbers masked, maths and prose compared apart
   (`near_duplicates`), for copies that are renumbered, reworded, re-asked for another quantity or
   translated at once (BeyondAIME is built that way); its pairs are `confirmed` (dropped) or listed
   for `review` (kept).

Overlap is shared n-grams / the larger n-gram count of the two problems, so a short problem sharing
only boilerplate ("... relatively prime positive integers. Find m+n") scores low. `report` runs every
pass over a training set and lists, per benchmark problem, every training problem any pass matched
or the near-duplicate pass listed, with each pass's score: what `decontamination.json` holds. Pure:
the caller loads the benchmarks; this module does no IO. Measured on DAPO-Math-17k in docs/LOG.md.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft import near_duplicates
from thinc_bench.build_sft._normalize import answer_key, mask_numbers, maths_tokens
from thinc_bench.build_sft.near_duplicates import NearDuplicateIndex, NearPair

Method = Literal["words", "numbers_masked", "maths_same_answer", "near_duplicate"]
METHODS: tuple[Method, ...] = ("words", "numbers_masked", "maths_same_answer", "near_duplicate")

DEFAULT_NGRAM = 8
"""Words per n-gram: long enough that shared phrasing ("find the number of ordered pairs") is not a
match, short enough that a reworded copy still shares most of its n-grams."""
DEFAULT_THRESHOLD = 0.5
"""Overlap that marks contamination in the two word passes. On the local DAPO-Math-17k copy against the
five benchmarks the sources name (docs/LOG.md, 2026-12-02; `perf/decontam.py`) the copies score 1.0 and 0.73 and
a renumbered copy 0.51 (0.69 with numbers masked). Words alone have no clean gap under them: the best
pairs below 0.5 are shared boilerplate (0.375) and a Chinese translation (0.35), which the maths pass
catches instead. With numbers masked nothing more reaches 0.5 (best below: the same 0.375, then 0.356),
and all 220 benchmark problems renumbered (+1 or +7 on every integer) are caught (words alone: 120)."""
MATHS_NGRAM = 4
"""Maths tokens per n-gram: formulas are short, and 4 tokens (`x _ 1 +`) already make a rare gram."""
DEFAULT_MATHS_THRESHOLD = 0.5
"""Maths overlap that marks a same-answer problem as a copy. On DAPO the translation scores 0.61 and
the best other same-answer problem 0.15 (docs/LOG.md)."""
MATHS_MIN_SHARED = 8
"""Shared maths n-grams required as well: a problem with little maths ("$m+n$") is not judged by it.
33 of the 220 benchmark problems have fewer, so a translation of one of them is not caught."""
_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


def ngrams(text: str, n: int = DEFAULT_NGRAM) -> set[tuple[str, ...]]:
    """The set of word n-grams of the normalised text (one shorter gram when it has fewer words)."""
    return _grams(_WORD.findall(text.lower()), n)


def _grams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


@dataclass(frozen=True)
class Match:
    """The benchmark problem a training problem overlaps most in one pass, and by how much."""

    benchmark: str
    problem_id: str
    overlap: float
    method: Method = "words"


Key = tuple[str, str]
"""(benchmark, problem id)."""


class _GramIndex:
    """An inverted index from n-gram to the benchmark problems holding it: a lookup per gram, not per pair."""

    def __init__(self) -> None:
        self.postings: dict[tuple[str, ...], set[Key]] = defaultdict(set)
        self.sizes: dict[Key, int] = {}

    def add(self, key: Key, grams: set[tuple[str, ...]]) -> None:
        self.sizes[key] = len(grams)
        for gram in grams:
            self.postings[gram].add(key)

    def best(self, grams: set[tuple[str, ...]]) -> tuple[Key, float] | None:
        hits: dict[Key, int] = defaultdict(int)
        for gram in grams:
            for key in self.postings.get(gram, ()):
                hits[key] += 1
        if not hits:
            return None
        scores = {key: count / max(len(grams), self.sizes[key]) for key, count in hits.items()}
        return max(scores.items(), key=lambda item: (item[1], item[0]))


class Decontaminator:
    """N-gram indexes over evaluation problems (words, words with numbers masked, maths by answer) and
    the near-duplicate index (`near_duplicates`).

    Args:
        benchmarks: benchmark name -> its problems.
        n: words per n-gram.
        threshold: overlap share in (0, 1] at or above which a word pass marks contamination.
        maths_threshold: the same for the maths pass (same gold answer required).

    Raises:
        ValueError: n < 1 or a threshold outside (0, 1].
    """

    def __init__(
        self,
        benchmarks: Mapping[str, Sequence[Problem]],
        *,
        n: int = DEFAULT_NGRAM,
        threshold: float = DEFAULT_THRESHOLD,
        maths_threshold: float = DEFAULT_MATHS_THRESHOLD,
    ) -> None:
        if n < 1 or not 0 < threshold <= 1 or not 0 < maths_threshold <= 1:
            raise ValueError(
                f"decontamination n={n}, threshold={threshold}, maths_threshold={maths_threshold}: "
                "use n >= 1 and thresholds in (0, 1]"
            )
        self.n, self.threshold, self.maths_threshold = n, threshold, maths_threshold
        self.benchmarks = list(benchmarks)
        self._words, self._masked = _GramIndex(), _GramIndex()
        self._maths: dict[str, list[tuple[Key, set[tuple[str, ...]]]]] = defaultdict(list)
        self._problems: dict[Key, Problem] = {}
        for name, problems in benchmarks.items():
            for problem in problems:
                key = (name, problem.id)
                self._problems[key] = problem
                self._words.add(key, ngrams(problem.problem, n))
                self._masked.add(key, ngrams(mask_numbers(problem.problem), n))
                maths = _grams(maths_tokens(problem.problem), MATHS_NGRAM)
                self._maths[answer_key(problem.answer)].append((key, maths))
        self._near = NearDuplicateIndex(benchmarks)

    def best_match(self, text: str) -> Match | None:
        """The benchmark problem with the largest word overlap with this text; None if none shares an n-gram."""
        return self._best("words", text, None, [])

    def best_matches(self, text: str, answer: str | None = None) -> dict[Method, Match]:
        """The best match of each pass (the maths pass only with an answer), below threshold or not."""
        near = self._near.pairs(text)
        found = {method: self._best(method, text, answer, near) for method in METHODS}
        return {method: match for method, match in found.items() if match is not None}

    def check(self, text: str, answer: str | None = None) -> Match | None:
        """The first pass's match that reaches its threshold, else None (no maths pass without an answer)."""
        return self._check(text, answer, None)

    def _check(self, text: str, answer: str | None, near: list[NearPair] | None) -> Match | None:
        for method in METHODS:
            if method == "near_duplicate":
                near = self._near.pairs(text) if near is None else near
                confirmed = [p for p in near if p.decision == "confirmed"]
                return _near_match(confirmed[0]) if confirmed else None
            match = self._best(method, text, answer, [])
            limit = self.maths_threshold if method == "maths_same_answer" else self.threshold
            if match is not None and match.overlap >= limit:
                return match
        return None

    def _best(self, method: Method, text: str, answer: str | None, near: list[NearPair]) -> Match | None:
        if method == "near_duplicate":
            return _near_match(near[0]) if near else None
        if method == "maths_same_answer":
            return None if answer is None else self._best_maths(text, answer)
        index = self._words if method == "words" else self._masked
        grams = ngrams(text if method == "words" else mask_numbers(text), self.n)
        best = index.best(grams) if grams else None
        if best is None:
            return None
        (benchmark, problem_id), overlap = best
        return Match(benchmark, problem_id, overlap, method)

    def _best_maths(self, text: str, answer: str) -> Match | None:
        """The same-answer problem sharing the most maths (at least MATHS_MIN_SHARED n-grams)."""
        candidates = self._maths.get(answer_key(answer))
        if not candidates:  # most training problems: no benchmark problem has their answer
            return None
        grams = _grams(maths_tokens(text), MATHS_NGRAM)
        scored = [
            (len(grams & theirs) / max(len(grams), len(theirs)), key)
            for key, theirs in candidates
            if len(grams & theirs) >= MATHS_MIN_SHARED
        ]
        if not scored:
            return None
        overlap, (benchmark, problem_id) = max(scored)
        return Match(benchmark, problem_id, overlap, "maths_same_answer")

    def check_many(self, problems: Iterable[Problem]) -> dict[str, Match]:
        """Problem id -> match, for the contaminated problems only (each checked with its gold answer)."""
        return {p.id: m for p in problems if (m := self.check(p.problem, p.answer)) is not None}

    def pair_scores(self, problem: Problem, benchmark: str, problem_id: str) -> dict[str, Any]:
        """Every pass's score of one training problem against one benchmark problem (a review row).

        `maths_same_answer` is None when the gold answers differ or fewer than MATHS_MIN_SHARED maths
        n-grams are shared, as the pass itself would not look.
        """
        theirs = self._problems[(benchmark, problem_id)]
        maths = None
        if answer_key(problem.answer) == answer_key(theirs.answer):
            mine, other = (
                _grams(maths_tokens(problem.problem), MATHS_NGRAM),
                _grams(maths_tokens(theirs.problem), MATHS_NGRAM),
            )
            if len(mine & other) >= MATHS_MIN_SHARED:
                maths = round(_overlap(mine, other), 3)
        near = near_duplicates.scores(problem.problem, theirs.problem)
        return {
            "words": round(_overlap(ngrams(problem.problem, self.n), ngrams(theirs.problem, self.n)), 3),
            "numbers_masked": round(
                _overlap(
                    ngrams(mask_numbers(problem.problem), self.n),
                    ngrams(mask_numbers(theirs.problem), self.n),
                ),
                3,
            ),
            "maths_same_answer": maths,
            "near_maths": round(near.maths, 3),
            "near_maths_aligned": near.maths_aligned,
            "near_prose": round(near.prose, 3),
            "near_prose_aligned": near.prose_aligned,
            "near_decision": near_duplicates.decide(near),
        }

    def report(self, problems: Sequence[Problem]) -> tuple[dict[str, Match], dict[str, Any]]:
        """Every pass over `problems`: (id -> match of the removed ones, the JSON-ready report).

        The report has the settings, counts (removed per benchmark and method, near-duplicate pairs
        confirmed and listed for review per benchmark), the removed problems, and `review`: per
        benchmark problem with any candidate, each training problem a pass matched to it or the
        near-duplicate pass listed, with every pass's score and the decision (`dropped` or `review`:
        kept, for a person to read).
        """
        matches: dict[str, Match] = {}
        rows: dict[Key, dict[str, dict[str, Any]]] = defaultdict(dict)
        for problem in problems:
            near = self._near.pairs(problem.problem)
            match = self._check(problem.problem, problem.answer, near)
            if match is not None:
                matches[problem.id] = match
            listed = {(p.benchmark, p.problem_id) for p in near}
            if match is not None:
                listed.add((match.benchmark, match.problem_id))
            for key in listed:
                rows[key][problem.id] = {"id": problem.id, **self.pair_scores(problem, *key)}
                rows[key][problem.id]["decision"] = "dropped" if match is not None else "review"
                rows[key][problem.id]["dropped_by"] = None if match is None else asdict(match)
        review: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in self.benchmarks}
        for (benchmark, problem_id), found in sorted(rows.items()):
            review[benchmark][problem_id] = sorted(
                found.values(),
                key=lambda r: (r["decision"] != "dropped", -max(r["near_maths"], r["near_prose"])),
            )
        per_benchmark = {
            name: {
                "removed": sum(m.benchmark == name for m in matches.values()),
                "near_duplicate_confirmed": sum(
                    r["near_decision"] == "confirmed" for rs in review[name].values() for r in rs
                ),
                "review": sum(r["decision"] == "review" for rs in review[name].values() for r in rs),
                "problems_with_candidates": len(review[name]),
            }
            for name in self.benchmarks
        }
        removed = [{"id": p.id, **asdict(matches[p.id])} for p in problems if p.id in matches]
        report = {
            "benchmarks": sorted(self.benchmarks),
            "ngram": self.n,
            "threshold": self.threshold,
            "maths_threshold": self.maths_threshold,
            "near_duplicate": near_duplicates.settings(),
            "checked": len(problems),
            "removed": len(removed),
            "by_benchmark": dict(sorted(Counter(r["benchmark"] for r in removed).items())),
            "by_method": dict(sorted(Counter(r["method"] for r in removed).items())),
            "per_benchmark": per_benchmark,
            "removed_problems": removed,
            "review": review,
        }
        return matches, report


def _overlap(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / max(len(a), len(b), 1)


def _near_match(pair: NearPair) -> Match:
    return Match(pair.benchmark, pair.problem_id, pair.score, "near_duplicate")
