"""Exact tests for small paired evaluations, and the score of a benchmark asked in matched pairs.

A paired difference's z (difference over its standard error) leans on the normal approximation,
which overstates the evidence when few problems change between two runs: 28 gained and 15 lost
reads z 2.0 but has an exact two-sided p of 0.066. So every paired difference carries the exact
test beside its z: McNemar's, the two-sided binomial test of the discordant problems against an even
split (`mcnemar_p`), computed here in integers (`math.comb`) with no approximation and no SciPy.

A benchmark asked in **matched pairs** (the same numbers with an inclusive and an exclusive bound,
`thinc_bench.nano.pairs`) is scored by pair: a pair counts only when both of its members are right
(`matched_pairs`), so a model whose answer ignores the wording solves no pair, and one that picks a
reading at random independently of the wording solves a pair at most a quarter of the time (its two
chances of being right, one per member, add up to at most 1). `MatchedPairs.blind_p` tests the
pair accuracy against that ceiling, exactly; `MatchedPairs.convention_p` tests whether the two
readings are right equally often among the pairs with one member right (a model following a
convention is right on one kind of member only). Pure functions over plain values, like `estimates`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

BLIND_CEILING = Fraction(1, 4)
"""The most pairs a wording-blind reader solves, per pair: its chances p and q of the two members'
answers satisfy p + q <= 1 (the two answers differ), so p * q <= 1/4."""


def mcnemar_p(gained: int, lost: int) -> float:
    """The exact two-sided McNemar p: how likely a split of the discordant pairs at least this uneven
    is when either direction is equally likely (a binomial with n = gained + lost, p = 1/2).

    Doubles the smaller tail (the symmetric binomial's two tails are equal), capped at 1; with no
    discordant pair the test has no evidence and p is 1. With several samples per problem, `gained`
    and `lost` are the problems whose accuracy rose and fell: the exact sign test, which is McNemar's
    when each run has one sample per problem.

    Raises:
        ValueError: a negative count.
    """
    if gained < 0 or lost < 0:
        raise ValueError(f"McNemar counts must be >= 0; got gained={gained}, lost={lost}")
    n, low = gained + lost, min(gained, lost)
    if n == 0:
        return 1.0
    tail = Fraction(sum(math.comb(n, i) for i in range(low + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def binomial_tail_p(successes: int, trials: int, ceiling: Fraction = BLIND_CEILING) -> float:
    """The exact one-sided p of `successes` or more out of `trials` when each succeeds with chance at
    most `ceiling`: P(X >= successes) for X binomial(trials, ceiling), a bound for every chance below it.

    Raises:
        ValueError: counts out of range, or a ceiling outside [0, 1].
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"binomial tail needs 0 <= successes <= trials; got {successes} of {trials}")
    if not 0 <= ceiling <= 1:
        raise ValueError(f"binomial tail needs a ceiling in [0, 1]; got {ceiling}")
    q = 1 - ceiling
    tail = sum(math.comb(trials, i) * ceiling**i * q ** (trials - i) for i in range(successes, trials + 1))
    return float(tail)


@dataclass(frozen=True)
class MatchedPairs:
    """One run on a benchmark asked in matched pairs (an inclusive and an exclusive member each).

    Attributes:
        n_pairs: pairs with samples of both members (the rest are `incomplete`).
        value: pair accuracy: the mean over pairs of (inclusive member's avg@n) x (exclusive member's
            avg@n), the chance that one sample of each is right (the members are separate trajectories,
            so independent); with one sample each, the share of pairs with both members right.
        stderr: its standard error across pairs (None with fewer than two).
        both, inclusive_only, exclusive_only, neither: pairs by their first sample of each member.
        inclusive, exclusive: the members' avg@n, averaged over the pairs.
        blind_p: exact one-sided p of `both` or more pairs from a reader whose answer ignores the bound
            (chance <= 1/4 per pair); small p: the run reads the bound.
        convention_p: exact two-sided McNemar p of inclusive_only against exclusive_only; small p: one
            reading is right more often than the other (a convention).
        incomplete: pairs with a sample of one member only (left out: a run cut by `--limit` mid-pair).
    """

    n_pairs: int
    value: float
    stderr: float | None
    both: int
    inclusive_only: int
    exclusive_only: int
    neither: int
    inclusive: float
    exclusive: float
    blind_p: float
    convention_p: float
    incomplete: int


INCLUSIVE, EXCLUSIVE = "inclusive", "exclusive"
"""The two members of a matched pair."""


def pair_scores(
    correct_by_problem: Mapping[str, Sequence[bool]], members: Mapping[str, tuple[str, str]]
) -> dict[str, list[bool]]:
    """Per complete pair, one verdict per sample index both members have: both right.

    `members` maps a problem id to (pair id, "inclusive" | "exclusive"); problems it does not name
    are not pair members and are ignored. The result pairs with another run's through
    `estimates.paired_difference` (pair accuracy B minus A, by pair) and its exact test.
    """
    grouped = _grouped(correct_by_problem, members)
    return {
        pair: [a and b for a, b in zip(sides[INCLUSIVE], sides[EXCLUSIVE], strict=False)]
        for pair, sides in grouped.items()
        if sides.get(INCLUSIVE) and sides.get(EXCLUSIVE)
    }


def _grouped(
    correct_by_problem: Mapping[str, Sequence[bool]], members: Mapping[str, tuple[str, str]]
) -> dict[str, dict[str, Sequence[bool]]]:
    grouped: dict[str, dict[str, Sequence[bool]]] = {}
    for pid, verdicts in correct_by_problem.items():
        if pid not in members:
            continue
        pair, side = members[pid]
        if side not in (INCLUSIVE, EXCLUSIVE):
            raise ValueError(f"problem {pid!r}: pair member {side!r}; use {INCLUSIVE} or {EXCLUSIVE}")
        if side in grouped.setdefault(pair, {}):
            raise ValueError(f"pair {pair!r} has two {side} members; each pair has one of each")
        grouped[pair][side] = verdicts
    return grouped


def matched_pairs(
    correct_by_problem: Mapping[str, Sequence[bool]], members: Mapping[str, tuple[str, str]]
) -> MatchedPairs:
    """Score a run's per-problem verdicts as matched pairs (see `MatchedPairs`).

    Raises:
        ValueError: no complete pair, a pair with two members of one kind, or an unknown member kind.
    """
    grouped = _grouped(correct_by_problem, members)
    complete = {p: s for p, s in grouped.items() if s.get(INCLUSIVE) and s.get(EXCLUSIVE)}
    if not complete:
        raise ValueError("no complete matched pair (both members with samples); score the whole benchmark")
    inc = [sum(s[INCLUSIVE]) / len(s[INCLUSIVE]) for s in complete.values()]
    exc = [sum(s[EXCLUSIVE]) / len(s[EXCLUSIVE]) for s in complete.values()]
    scores = [a * b for a, b in zip(inc, exc, strict=True)]
    firsts = [(bool(s[INCLUSIVE][0]), bool(s[EXCLUSIVE][0])) for s in complete.values()]
    both = sum(a and b for a, b in firsts)
    inclusive_only = sum(a and not b for a, b in firsts)
    exclusive_only = sum(b and not a for a, b in firsts)
    n = len(complete)
    return MatchedPairs(
        n_pairs=n,
        value=statistics.fmean(scores),
        stderr=statistics.stdev(scores) / math.sqrt(n) if n > 1 else None,
        both=both,
        inclusive_only=inclusive_only,
        exclusive_only=exclusive_only,
        neither=n - both - inclusive_only - exclusive_only,
        inclusive=statistics.fmean(inc),
        exclusive=statistics.fmean(exc),
        blind_p=binomial_tail_p(both, n),
        convention_p=mcnemar_p(inclusive_only, exclusive_only),
        incomplete=len(grouped) - n,
    )
