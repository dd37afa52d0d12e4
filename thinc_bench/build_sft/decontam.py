"""Decontamination: does a training problem overlap an evaluation benchmark problem?

Texts are normalised (lower case; runs of ASCII letters and digits, and single CJK characters, are
the words, so LaTeX markup and spacing do not matter) and cut into word n-grams (`DEFAULT_NGRAM`).
The overlap of a training and a benchmark problem is shared n-grams / the larger n-gram count of the
two, so a short problem sharing only boilerplate ("... relatively prime positive integers. Find m+n")
scores low. A training problem is contaminated when its best overlap reaches `threshold`
(`DEFAULT_THRESHOLD`). Pure: the caller loads the benchmarks; this module does no IO.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from thinc_bench.benchmarks import Problem

DEFAULT_NGRAM = 8
"""Words per n-gram: long enough that shared phrasing ("find the number of ordered pairs") is not a
match, short enough that a reworded copy still shares most of its n-grams."""
DEFAULT_THRESHOLD = 0.5
"""Overlap that marks contamination. Measured on DAPO-Math-17k vs the five paper benchmarks (docs/LOG.md):
the 3 real copies score 1.0, 0.73, 0.51 (a renumbered copy); the next best is 0.38, boilerplate."""
_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


def ngrams(text: str, n: int = DEFAULT_NGRAM) -> set[tuple[str, ...]]:
    """The set of word n-grams of the normalised text (one shorter gram when it has fewer words)."""
    words = _WORD.findall(text.lower())
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Match:
    """The benchmark problem a training problem overlaps most, and by how much."""

    benchmark: str
    problem_id: str
    overlap: float


class Decontaminator:
    """An n-gram index over evaluation problems.

    Args:
        benchmarks: benchmark name -> its problems.
        n: words per n-gram.
        threshold: overlap share in (0, 1] at or above which a problem is contaminated.

    Raises:
        ValueError: n < 1 or threshold outside (0, 1].
    """

    def __init__(
        self,
        benchmarks: Mapping[str, Sequence[Problem]],
        *,
        n: int = DEFAULT_NGRAM,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        if n < 1 or not 0 < threshold <= 1:
            raise ValueError(f"decontamination n={n}, threshold={threshold}: use n >= 1, 0 < threshold <= 1")
        self.n, self.threshold = n, threshold
        self.benchmarks = list(benchmarks)
        self._index: dict[tuple[str, ...], set[tuple[str, str]]] = defaultdict(set)
        self._sizes: dict[tuple[str, str], int] = {}
        for name, problems in benchmarks.items():
            for problem in problems:
                grams = ngrams(problem.problem, n)
                self._sizes[(name, problem.id)] = len(grams)
                for gram in grams:
                    self._index[gram].add((name, problem.id))

    def best_match(self, text: str) -> Match | None:
        """The benchmark problem with the largest overlap with this text; None if none shares an n-gram."""
        grams = ngrams(text, self.n)
        if not grams:
            return None
        hits: dict[tuple[str, str], int] = defaultdict(int)
        for gram in grams:
            for key in self._index.get(gram, ()):
                hits[key] += 1
        if not hits:
            return None
        scores = {key: count / max(len(grams), self._sizes[key]) for key, count in hits.items()}
        (benchmark, problem_id), overlap = max(scores.items(), key=lambda item: (item[1], item[0]))
        return Match(benchmark, problem_id, overlap)

    def check(self, text: str) -> Match | None:
        """The overlapping benchmark problem when the overlap reaches the threshold, else None."""
        match = self.best_match(text)
        return match if match is not None and match.overlap >= self.threshold else None

    def check_many(self, problems: Iterable[Problem]) -> dict[str, Match]:
        """Problem id -> match, for the contaminated problems only."""
        return {p.id: m for p in problems if (m := self.check(p.problem)) is not None}
