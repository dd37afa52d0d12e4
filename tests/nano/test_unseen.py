"""The unseen-phrasing test part: answers that follow the wording (read back from the text and checked
with SymPy, and worked by hand), new wordings that are no variant of a trained one, and no problem
shared with the train split or the seen test part."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import sympy

from thinc_bench import nano
from thinc_bench.nano import grammar

# What a reader of each wording counts, written from the sentences themselves (not the code's
# `bounds`): these ranges leave out their ends.
EXCLUSIVE = {("prime_count", 0), ("prime_count", 1), ("prime_count", 3), ("prime_sum", 0), ("prime_sum", 1)}
# A number as a user writes it: plain, or grouped by 3 with ",", "{,}", "\," or a space.
NUMBER = re.compile(r"(?<![\d,])\d{1,3}(?:(?:,|\{,\}|\\,| )\d{3})+(?!\d)|\d+")


def _numbers(text: str) -> list[int]:
    return [int(re.sub(r"\D", "", m)) for m in NUMBER.findall(text)]


def _range_answer(family: str, lo: int, hi: int, *, exclusive: bool) -> int:
    primes = list(sympy.primerange(lo + 1, hi) if exclusive else sympy.primerange(lo, hi + 1))
    return len(primes) if family == "prime_count" else sum(primes)


def _from_text(family: str, phrasing: int, text: str) -> int:
    """The answer a careful reader computes from the sentence: numbers parsed from it, SymPy's arithmetic."""
    nums = _numbers(text)
    if family == "product":
        a, b = nums
        return int(sympy.Integer(a) * b)
    if family == "modpow":  # "A counter starts at 1 ..."; "... for the integer x with 0 <= x < m"
        a, b, m = nums[1:] if text.startswith("A counter") else nums[:3]
        return int(sympy.Integer(a).__pow__(b, m))
    if family == "digit_sum_power":  # "... the base-10 digits"; "{a}^{e} ({e} factors of {a} ...)"
        a, e = nums[:2]
        return sum(sympy.ntheory.digits(int(sympy.Integer(a) ** e))[1:])
    if family in ("prime_count", "prime_sum"):
        lo, hi = nums
        return _range_answer(family, lo, hi, exclusive=(family, phrasing) in EXCLUSIVE)
    if family in ("gcd", "lcm"):
        a, b = nums
        return int(sympy.igcd(a, b) if family == "gcd" else sympy.ilcm(a, b))
    if family == "divisor_count":
        (n,) = nums
        return int(sympy.divisor_count(n))
    raise AssertionError(family)


@pytest.fixture(scope="module")
def unseen() -> list[nano.NanoProblem]:
    return nano.generate_unseen()


def test_every_answer_is_what_the_sentence_asks(unseen) -> None:
    wrong = [
        (p.id, p.problem, p.answer)
        for p in unseen
        if p.answer != _from_text(p.family, p.meta["phrasing"], p.problem)
    ]
    assert wrong == []


def test_reading_the_bounds_the_other_way_changes_every_range_answer(unseen) -> None:
    ranges = [p for p in unseen if p.family in ("prime_count", "prime_sum")]
    assert len(ranges) == 16 and {(p.family, p.meta["phrasing"]) for p in ranges} >= EXCLUSIVE
    for p in ranges:
        lo, hi = _numbers(p.problem)
        assert sympy.isprime(lo) and sympy.isprime(hi), p.problem
        misread = (p.family, p.meta["phrasing"]) not in EXCLUSIVE
        assert p.answer != _range_answer(p.family, lo, hi, exclusive=misread), p.problem


def test_hand_worked_wordings() -> None:
    def phrasing(family: str, start: str) -> nano.UnseenPhrasing:
        (found,) = [u for u in nano.UNSEEN_PHRASINGS[family] if u.template.startswith(start)]
        return found

    strictly = phrasing("prime_count", "Leaving out")
    assert strictly.text({"lo": 10, "hi": 30}) == (
        "Leaving out both endpoints, find the count of prime numbers that lie between 10 and 30."
    )
    assert strictly.answer({"lo": 10, "hi": 30}) == 6  # 11 13 17 19 23 29
    assert strictly.answer({"lo": 11, "hi": 29}) == 4  # prime ends are left out: 13 17 19 23
    inclusive = phrasing("prime_count", "A list holds")
    assert inclusive.answer({"lo": 11, "hi": 29}) == 6
    assert phrasing("prime_sum", "Evaluate").text({"lo": 2, "hi": 11}).endswith("with $2 < p < 11$.")
    assert phrasing("prime_sum", "Evaluate").answer({"lo": 2, "hi": 11}) == 15  # 3 + 5 + 7
    assert phrasing("prime_sum", "What do").answer({"lo": 1_000, "hi": 1_020}) == 3041  # 1009 + 1013 + 1019
    assert phrasing("prime_sum", "What do").text({"lo": 1_000, "hi": 1_020}) == (
        "What do the primes above 1,000 and below 1,020 add up to?"
    )

    separators = phrasing("product", "Using exact")
    assert (
        separators.text({"a": 22275, "b": 96704})
        == "Using exact integer arithmetic, what does $22{,}275 \\cdot 96{,}704$ come to?"
    )
    assert separators.answer({"a": 22275, "b": 96704}) == 2_154_081_600  # 2,227,500,000 - 22,275 * 3,296
    latex = phrasing("product", "If")
    assert latex.text({"a": 1234, "b": 5678}) == "If $x = 1{,}234$ and $y = 5{,}678$, what is $xy$?"
    assert latex.answer({"a": 1234, "b": 5678}) == 7006652
    assert (
        phrasing("product", "Work out").text({"a": 120, "b": 1_000_000}) == "Work out 1 000 000 lots of 120."
    )

    words = phrasing("modpow", "Determine")
    assert words.text({"a": 2, "b": 10, "m": 1000}) == (
        "Determine the remainder of 2 raised to the exponent 10 upon division by 1,000."
    )
    assert words.answer({"a": 2, "b": 10, "m": 1000}) == 24  # 1024
    assert (
        phrasing("modpow", "Solve")
        .text({"a": 3, "b": 4, "m": 5})
        .startswith("Solve $3^{4} \\equiv x \\pmod{5}$")
    )
    assert phrasing("modpow", "A counter").answer({"a": 3, "b": 4, "m": 5}) == 1  # 81 = 16 * 5 + 1
    assert phrasing("digit_sum_power", "A printer").answer({"a": 2, "e": 15}) == 26  # 32768
    tau = phrasing("divisor_count", "Compute")
    assert tau.text({"n": 1_000_000}).startswith("Compute $\\tau(1\\,000\\,000)$")
    assert tau.answer({"n": 1_000_000}) == 49  # 2^6 5^6: 7 * 7
    assert phrasing("divisor_count", "A teacher").answer({"n": 12}) == 6  # groups of 1 2 3 4 6 12
    assert phrasing("gcd", "Two ropes").answer({"a": 462, "b": 1071}) == 21
    assert phrasing("gcd", "If").text({"a": 462, "b": 1071}).endswith("$y = 1{,}071$, what is $d$?")
    assert phrasing("lcm", "One beacon").answer({"a": 4, "b": 6}) == 12


def test_the_forms_users_write_are_all_there(unseen) -> None:
    texts = [p.problem for p in unseen]
    assert any(re.search(r"\d,\d{3}\b", t) for t in texts)  # thousands separators
    assert any("{,}" in t for t in texts) and any("\\," in t for t in texts)
    assert any(re.search(r"\d \d{3}\b", t) for t in texts)  # a space as separator
    assert any("\\gcd" in t for t in texts) and any("\\operatorname{lcm}" in t for t in texts)
    assert any("\\pmod{" in t for t in texts) and any(re.search(r"\^\{[\d{},]+\}", t) for t in texts)
    assert any("greater than" in t for t in texts) and any("\\cdot" in t for t in texts)
    for p in unseen:  # a number of 4+ digits is written grouped wherever the wording groups numbers
        u = nano.UNSEEN_PHRASINGS[p.family][p.meta["phrasing"]]
        stated = p.meta["stated"]
        assert not Counter(stated.values()) - Counter(_numbers(p.problem)), (
            p.problem
        )  # all stated, each whole
        if u.numbers != "plain":
            assert not any(str(v) in p.problem for v in stated.values() if v >= 1000), p.problem


def test_balanced_every_wording_used_and_a_prefix(unseen) -> None:
    assert len(unseen) == nano.UNSEEN_SIZE == 64
    assert Counter(p.family for p in unseen) == {f: 8 for f in nano.FAMILY_NAMES}
    used = {(p.family, p.meta["phrasing"]) for p in unseen}
    assert used == {(f, k) for f, us in nano.UNSEEN_PHRASINGS.items() for k in range(len(us))}
    assert all(len(us) >= 3 for us in nano.UNSEEN_PHRASINGS.values())
    assert nano.generate_unseen(10) == unseen[:10]
    assert all(p.meta["part"] == "unseen" and p.id == f"nano-unseen-{i:04d}" for i, p in enumerate(unseen))


def _key(family: str, params) -> tuple:
    return (family, tuple(sorted(params.items())))


def test_shares_no_problem_with_train_nor_the_seen_test_part(unseen) -> None:
    train, seen = nano.generate("train"), nano.generate("test", 1000)  # the seen part 10x its size
    trained = {_key(p.family, p.params) for p in train}
    seen_keys = {_key(p.family, p.params) for p in seen}
    for p in unseen:  # both what the sentence states and what it counts
        for q in (p.params, p.meta["stated"]):
            assert nano.split_of(p.family, q) == "test", p.id
            assert _key(p.family, q) not in trained | seen_keys, p.id
    assert len({_key(p.family, p.params) for p in unseen}) == len(unseen)
    assert not {p.problem for p in unseen} & {p.problem for p in train + seen}


def _tokens(template: str) -> list[str]:
    template = re.sub(r"\{+[a-z_0-9]*\}+", " N ", template)
    return re.findall(r"[A-Za-z]+", template.lower())


def _edits(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def _near_copy(template: str, trained: str) -> bool:
    """Half the words edited or fewer, or half the vocabulary shared or more (numbers and LaTeX aside)."""
    a, b = _tokens(template), _tokens(trained)
    return _edits(a, b) < 0.5 * max(len(a), len(b)) or len(set(a) & set(b)) >= 0.5 * len(set(a) | set(b))


def test_no_wording_is_a_trained_one_or_a_near_copy() -> None:
    ranges = [r.text for r in grammar.TRAIN_RANGES]  # a trained sentence: its template, its range wording
    trained = [t.replace("{range}", r) for f in nano.FAMILIES for t in f.phrasings for r in ranges]
    unseen = [u.template for us in nano.UNSEEN_PHRASINGS.values() for u in us]
    assert not set(unseen) & set(trained)
    assert [(u, t) for u in unseen for t in trained if _near_copy(u, t)] == []
    # the check bites: a lead-in, a contraction, one word added
    assert _near_copy(
        "Tell me how many positive divisors {n} has.", "How many positive divisors does {n} have?"
    )
    assert _near_copy("What's {a} \\times {b}?", "What is {a} \\times {b}?")
    inclusive = "How many primes are there between {lo} and {hi}, inclusive?"  # a trained sentence
    assert inclusive in trained and _near_copy(
        "How many primes are there strictly between {lo} and {hi}?", inclusive
    )
