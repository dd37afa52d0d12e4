"""Answer-agnostic near duplicates: benchmark problems renumbered, reworded, re-asked or translated.

BeyondAIME is built by renumbering and re-asking known competition problems, and DAPO-Math-17k holds
such problems in other numbers, other words and in Chinese. `decontam`'s word passes need half of a
problem's 8-grams, which a rewording breaks, and its maths pass needs the same gold answer, which a
re-asked copy does not have. This pass uses neither the answer nor the numbers. It compares two
independent token streams of each problem, both with every number masked (`_normalize`):

- `maths` (`masked_maths`): LaTeX commands, operators and variable letters, which a translation into
  Chinese keeps and a rewording of the prose leaves alone;
- `prose` (`prose_words`): the words without the maths, which survive a rewritten formula.

Search: inverted indexes of maths 4-grams and prose 3-grams over the benchmark problems give the
candidates (either stream sharing `CANDIDATE_SHARED` grams and a Jaccard of `CANDIDATE_JACCARD`), a
lookup per gram. The index is exact: with ~700 benchmark problems it already takes seconds for all of
DAPO (perf/decontam.py), so MinHash/LSH would add a dependency and sampling error near the thresholds
for no speed that matters here.

Score: each stream's aligned share, `2 * aligned / (len(a) + len(b))`, where `aligned` counts the tokens
of common runs of at least `RUN` tokens in the same order (difflib); a copy scores 1.0, and shared
vocabulary in another order ("Find the number of ordered pairs" around other maths) scores little.

Decision (`decide`): a pair is `confirmed` (the training problem is dropped) by one of three rules,
else `review` (listed in decontamination.json, kept) when a stream reaches `REVIEW_SHARE` over
`REVIEW_ALIGNED` tokens. The thresholds come from reading, side by side, every confirmed pair and the
best candidates under each rule of the local DAPO copy against the five evaluation benchmarks and MATH-500
(docs/LOG.md, 2026-12-05). Pure: no IO.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from thinc_bench.benchmarks import Problem
from thinc_bench.build_sft._normalize import masked_maths, prose_words

Decision = Literal["confirmed", "review"]

MATHS_GRAM = 4
"""Maths tokens per search gram (as `decontam.MATHS_NGRAM`)."""
PROSE_GRAM = 3
"""Prose words per search gram: short, so a reworded sentence still shares some."""
CANDIDATE_JACCARD = 0.2
"""Gram-set Jaccard that makes a pair a candidate in either stream: low, the scores decide."""
CANDIDATE_SHARED = 8
"""Shared grams a candidate needs as well, so two one-line problems are not compared on `$m+n$`."""
RUN = 3
"""Shortest common run of tokens that counts as aligned: single shared words are vocabulary."""

MATHS_ALONE = (0.75, 40)
"""(share, aligned maths tokens) that confirm by maths alone: translations and renumbered copies. On
DAPO the Chinese copies of BeyondAIME problems score 0.77-0.98 over 47-85 tokens; the best different
problem 0.71 (a 10-tuple sum-of-squares problem against beyondaime-76), the next 0.69."""
PROSE_ALONE = (0.70, 25)
"""(share, aligned words) that confirm by prose alone: the same story with other numbers or formulas.
Copies score 0.76-1.0 over 25-103 words; template wording ("What is the remainder when ... is divided
by") aligns fewer than 20 words."""
BOTH = (0.80, 0.25, 10, 40)
"""(maths share, prose share, aligned tokens in each, aligned tokens in all) that confirm when both
streams agree: a natural paraphrase that rewrites the prose (beyondaime-31: maths 0.95 and prose
0.30 over 36 and 13 tokens; beyondaime-45: 0.86 and 0.55 over 34 and 21). The prose may agree little,
so the maths must agree much: at 0.5 two different Fermat-point problems in AIME's answer wording
(0.59 and 0.62) were confirmed, and a made-up problem on the same sequence with other conditions
(0.73 and 0.50; tests/build_sft/test_near_duplicates.py)."""
REVIEW_SHARE = 0.40
"""A stream's share that lists an unconfirmed candidate for review."""
REVIEW_ALIGNED = 12
"""Aligned tokens that stream needs as well, so short templates do not fill the review list."""


@dataclass(frozen=True)
class Scores:
    """The two streams' aligned shares in [0, 1] and aligned token counts of one pair of problems."""

    maths: float
    maths_aligned: int
    prose: float
    prose_aligned: int


@dataclass(frozen=True)
class NearPair:
    """A benchmark problem a training problem nearly duplicates, its scores and the decision."""

    benchmark: str
    problem_id: str
    scores: Scores
    decision: Decision

    @property
    def score(self) -> float:
        """The larger stream share: the pair's rank in a review list."""
        return max(self.scores.maths, self.scores.prose)


def aligned(a: Sequence[str], b: Sequence[str]) -> tuple[float, int]:
    """(aligned share, aligned tokens) of two token lists; symmetric, deterministic, 0.0 for an empty one.

    The common runs of at least `RUN` tokens in the same order (difflib's matching blocks). Order
    matters on purpose: tiling runs in any order also caught reordered conditions, but it raised
    different problems that share formula fragments (`a_1^2 + ... + a_n^2` here and there) to the
    scores of translations (docs/LOG.md). The pair is put in one order first, so ties break the same
    way whichever list comes first.
    """
    if not a or not b:
        return 0.0, 0
    first, second = (a, b) if tuple(a) <= tuple(b) else (b, a)
    blocks = SequenceMatcher(None, first, second, autojunk=False).get_matching_blocks()
    count = sum(block.size for block in blocks if block.size >= RUN)
    return 2 * count / (len(a) + len(b)), count


def scores(text_a: str, text_b: str) -> Scores:
    """The scores of two problem texts (the search aside): what `decide` judges."""
    return _scores((masked_maths(text_a), prose_words(text_a)), (masked_maths(text_b), prose_words(text_b)))


def _scores(a: tuple[list[str], list[str]], b: tuple[list[str], list[str]]) -> Scores:
    maths, maths_n = aligned(a[0], b[0])
    prose, prose_n = aligned(a[1], b[1])
    return Scores(maths, maths_n, prose, prose_n)


def decide(s: Scores) -> Decision | None:
    """`confirmed` by one of the three rules, `review` when a stream reaches the review level, else None."""
    if s.maths >= MATHS_ALONE[0] and s.maths_aligned >= MATHS_ALONE[1]:
        return "confirmed"
    if s.prose >= PROSE_ALONE[0] and s.prose_aligned >= PROSE_ALONE[1]:
        return "confirmed"
    if (
        s.maths >= BOTH[0]
        and s.prose >= BOTH[1]
        and min(s.maths_aligned, s.prose_aligned) >= BOTH[2]
        and s.maths_aligned + s.prose_aligned >= BOTH[3]
    ):
        return "confirmed"
    if (s.maths >= REVIEW_SHARE and s.maths_aligned >= REVIEW_ALIGNED) or (
        s.prose >= REVIEW_SHARE and s.prose_aligned >= REVIEW_ALIGNED
    ):
        return "review"
    return None


def _grams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


Key = tuple[str, str]


class NearDuplicateIndex:
    """Both streams of every benchmark problem, and inverted indexes of their grams for the search.

    Args:
        benchmarks: benchmark name -> its problems.
    """

    def __init__(self, benchmarks: Mapping[str, Sequence[Problem]]) -> None:
        self._streams: dict[Key, tuple[list[str], list[str]]] = {}
        self._postings: tuple[dict[tuple[str, ...], list[Key]], ...] = (defaultdict(list), defaultdict(list))
        self._sizes: tuple[dict[Key, int], dict[Key, int]] = ({}, {})
        for name, problems in benchmarks.items():
            for problem in problems:
                key = (name, problem.id)
                self._streams[key] = streams = (masked_maths(problem.problem), prose_words(problem.problem))
                for i, grams in enumerate(self._stream_grams(streams)):
                    self._sizes[i][key] = len(grams)
                    for gram in grams:
                        self._postings[i][gram].append(key)

    @staticmethod
    def _stream_grams(streams: tuple[list[str], list[str]]) -> tuple[set[tuple[str, ...]], ...]:
        return _grams(streams[0], MATHS_GRAM), _grams(streams[1], PROSE_GRAM)

    def pairs(self, text: str) -> list[NearPair]:
        """The benchmark problems this text confirms or is listed against, best first (empty: none)."""
        streams = (masked_maths(text), prose_words(text))
        found: set[Key] = set()
        for i, grams in enumerate(self._stream_grams(streams)):
            shared: dict[Key, int] = defaultdict(int)
            for gram in grams:
                for key in self._postings[i].get(gram, ()):
                    shared[key] += 1
            for key, n in shared.items():
                union = len(grams) + self._sizes[i][key] - n
                if n >= CANDIDATE_SHARED and n / union >= CANDIDATE_JACCARD:
                    found.add(key)
        result = []
        for key in found:
            s = _scores(streams, self._streams[key])
            decision = decide(s)
            if decision is not None:
                result.append(NearPair(key[0], key[1], s, decision))
        return sorted(result, key=lambda p: (p.decision != "confirmed", -p.score, p.benchmark, p.problem_id))


def settings() -> dict[str, object]:
    """The pass's thresholds, for the report beside its decisions."""
    return {
        "maths_alone": {"share": MATHS_ALONE[0], "aligned": MATHS_ALONE[1]},
        "prose_alone": {"share": PROSE_ALONE[0], "aligned": PROSE_ALONE[1]},
        "both": {"maths_share": BOTH[0], "prose_share": BOTH[1], "aligned_each": BOTH[2], "aligned": BOTH[3]},
        "review": {"share": REVIEW_SHARE, "aligned": REVIEW_ALIGNED},
        "run": RUN,
    }
