"""The exact paired test and the matched-pair score: hand-computed values, the definition enumerated
outcome by outcome (written here apart from the code), and a wording-blind reader scoring 0 pairs."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thinc_bench.metrics import (
    BLIND_CEILING,
    binomial_tail_p,
    matched_pairs,
    mcnemar_p,
    pair_scores,
    paired_difference,
)


def test_mcnemar_by_hand() -> None:
    assert mcnemar_p(0, 0) == 1.0  # nothing changed: no evidence
    assert mcnemar_p(5, 0) == 2 / 32  # both tails of 5 coin flips all one way
    assert mcnemar_p(4, 1) == 2 * 6 / 32  # P(X <= 1) = (1 + 5) / 32, doubled
    assert mcnemar_p(10, 0) == 2 / 1024
    assert mcnemar_p(1, 1) == 1.0 and mcnemar_p(3, 3) == 1.0  # an even split: capped at 1
    # issue 55's recomputation of session 11's chain: 28 gained / 15 lost, 31 / 19, 18 lost of 22 changed
    assert round(mcnemar_p(28, 15), 3) == 0.066
    assert round(mcnemar_p(31, 19), 3) == 0.119
    with pytest.raises(ValueError, match="McNemar counts"):
        mcnemar_p(-1, 3)


@given(gained=st.integers(0, 60), lost=st.integers(0, 60))
def test_mcnemar_is_the_two_sided_binomial_test_outcome_by_outcome(gained: int, lost: int) -> None:
    # The definition: the chance, under an even split, of a split at least as far from even as this one.
    n = gained + lost
    far = abs(Fraction(gained) - Fraction(n, 2))
    expected = sum(
        (Fraction(math.comb(n, k), 2**n) for k in range(n + 1) if abs(Fraction(k) - Fraction(n, 2)) >= far),
        Fraction(0),
    )
    p = mcnemar_p(gained, lost)
    assert p == pytest.approx(float(min(expected, Fraction(1))), rel=1e-12, abs=1e-300)
    assert p == mcnemar_p(lost, gained) and 0 < p <= 1
    if gained >= lost:  # one more problem gained is stronger evidence
        assert mcnemar_p(gained + 1, lost) <= p


def test_the_exact_p_sits_beside_z_and_is_larger_where_few_problems_changed() -> None:
    # 43 problems changed of 96 (28 gained, 15 lost), as GRPO stage 1 did in session 11
    a = {f"p{i}": [i >= 28 and i < 43] for i in range(96)}
    b = {f"p{i}": [i < 28] for i in range(96)}
    for i in range(43, 96):
        a[f"p{i}"] = b[f"p{i}"] = [i % 2 == 0]
    d = paired_difference(a, b)
    assert (d.better, d.worse) == (28, 15)
    assert d.z is not None and d.z > 1.96  # the normal reading: "significant"
    assert round(d.p_exact, 3) == 0.066  # the exact test: not at 0.05
    assert paired_difference(a, a).p_exact == 1.0


def test_the_binomial_tail_by_hand() -> None:
    assert binomial_tail_p(0, 7) == 1.0
    assert binomial_tail_p(1, 1) == 0.25
    assert binomial_tail_p(2, 2) == 1 / 16
    assert binomial_tail_p(1, 2) == 7 / 16  # 1 - (3/4)^2
    assert binomial_tail_p(2, 5) == pytest.approx(1 - (243 + 405) / 1024)
    assert binomial_tail_p(3, 4, Fraction(1, 2)) == 5 / 16
    with pytest.raises(ValueError, match="0 <= successes <= trials"):
        binomial_tail_p(3, 2)
    with pytest.raises(ValueError, match="ceiling"):
        binomial_tail_p(1, 2, Fraction(3, 2))


def _members(n: int) -> dict[str, tuple[str, str]]:
    return {f"q{i}-{side[:2]}": (f"q{i}", side) for i in range(n) for side in ("inclusive", "exclusive")}


def test_matched_pairs_by_hand() -> None:
    verdicts = {
        "q0-in": [True],
        "q0-ex": [True],  # both right
        "q1-in": [True],
        "q1-ex": [False],  # the inclusive member only
        "q2-in": [False],
        "q2-ex": [True],  # the exclusive member only
        "q3-in": [False],
        "q3-ex": [False],
        "q4-in": [True],
        "q4-ex": [True],
        "q5-in": [True],  # its exclusive member was never asked (a --limit cut mid-pair)
        "other": [True],  # not a pair member: ignored
    }
    m = matched_pairs(verdicts, _members(6))
    assert (m.n_pairs, m.both, m.inclusive_only, m.exclusive_only, m.neither, m.incomplete) == (
        5,
        2,
        1,
        1,
        1,
        1,
    )
    assert m.value == pytest.approx(0.4) and m.inclusive == pytest.approx(0.6) and m.exclusive == 0.6
    assert m.stderr == pytest.approx(math.sqrt(0.3) / math.sqrt(5))  # sd of [1, 0, 0, 0, 1]
    assert m.blind_p == pytest.approx(1 - (243 + 405) / 1024)  # 2 or more of 5 at a chance of 1/4
    assert m.convention_p == 1.0
    assert pair_scores(verdicts, _members(6)) == {
        "q0": [True],
        "q1": [False],
        "q2": [False],
        "q3": [False],
        "q4": [True],
    }


def test_several_samples_score_a_pair_by_the_chance_that_one_of_each_is_right() -> None:
    m = matched_pairs({"q0-in": [True, True, False, False], "q0-ex": [True, False]}, _members(1))
    assert m.value == 0.25 and (m.both, m.inclusive) == (1, 0.5)  # counts: the first sample of each


def test_a_reader_that_ignores_the_bound_solves_no_pair_and_a_convention_shows() -> None:
    rng = random.Random(3)
    members = _members(48)
    # Wording-blind: one answer per pair's numbers, right for one reading; asked both ways, it is
    # right on exactly one member (or on none, when its arithmetic slips).
    blind: dict[str, list[bool]] = {}
    for i in range(48):
        reading, slip = rng.choice(("in", "ex")), rng.random() < 0.2
        blind[f"q{i}-in"] = [reading == "in" and not slip]
        blind[f"q{i}-ex"] = [reading == "ex" and not slip]
    m = matched_pairs(blind, members)
    assert (m.both, m.value) == (0, 0.0) and m.blind_p == 1.0
    # "always inclusive": the same zero pairs, and the convention test sees it
    convention = {pid: [pid.endswith("-in")] for pid in members}
    c = matched_pairs(convention, members)
    assert (c.value, c.inclusive_only, c.exclusive_only) == (0.0, 48, 0) and c.convention_p < 1e-12
    # a reader: 30 of 48 pairs both right, the rest split, well above a blind reader's ceiling
    reader: dict[str, list[bool]] = {}
    for i in range(48):
        reader[f"q{i}-in"] = [i < 30 or i % 2 == 0]
        reader[f"q{i}-ex"] = [i < 30 or i % 2 == 1]
    r = matched_pairs(reader, members)
    assert r.both == 30 and r.blind_p < 1e-6 and r.blind_p == binomial_tail_p(30, 48, BLIND_CEILING)


def test_bad_pairs_are_refused() -> None:
    with pytest.raises(ValueError, match="no complete matched pair"):
        matched_pairs({"q0-in": [True]}, _members(1))
    with pytest.raises(ValueError, match="two inclusive members"):
        matched_pairs({"a": [True], "b": [True]}, {"a": ("q", "inclusive"), "b": ("q", "inclusive")})
    with pytest.raises(ValueError, match="pair member 'half'"):
        matched_pairs({"a": [True]}, {"a": ("q", "half")})
