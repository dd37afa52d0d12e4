"""GRPO's part of the nano task: the held-out range part asks both bounds of both range families, its
answers follow the sentence (read back from the text, counted by SymPy), and neither it nor GRPO's
pool shares a problem with what SFT trains on or with another test part."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import sympy

from thinc_bench import benchmarks, nano
from thinc_bench.build_sft.sources import load_source

# How a reader tells the bounds from the sentence (written from the training wordings' English, not
# from the code's flags).
EXCLUDING = ("strictly between", "neither end", "open interval", "< p <", "not counting either end")
INCLUDING = ("inclusive", "both ends included", " through ", "interval $[", "\\le p \\le")
NUMBER = re.compile(r"(?<![\d,])\d{1,3}(?:(?:,|\{,\})\d{3})+(?!\d)|\d+")


def _reading(text: str) -> tuple[list[int], bool]:
    """The stated ends and whether the sentence leaves them out."""
    excluding = [w for w in EXCLUDING if w in text]
    including = [w for w in INCLUDING if w in text]
    assert bool(excluding) != bool(including), text  # exactly one kind of bound is stated
    return [int(re.sub(r"\D", "", m)) for m in NUMBER.findall(text)], bool(excluding)


def _answer(family: str, lo: int, hi: int, exclusive: bool) -> int:
    primes = list(sympy.primerange(lo + 1, hi) if exclusive else sympy.primerange(lo, hi + 1))
    return len(primes) if family == "prime_count" else sum(primes)


@pytest.fixture(scope="module")
def ranges() -> list[nano.NanoProblem]:
    return nano.generate_part("ranges")


@pytest.fixture(scope="module")
def confirm() -> list[nano.NanoProblem]:
    return nano.generate_part("ranges_confirm")


@pytest.fixture(scope="module")
def pool() -> list[nano.NanoProblem]:
    return nano.generate_part("rl")


def test_both_families_both_bounds_evenly_and_a_prefix(ranges) -> None:
    assert len(ranges) == 48
    kinds = Counter((p.family, _reading(p.problem)[1]) for p in ranges)
    assert kinds == {(f, e): 12 for f in ("prime_count", "prime_sum") for e in (False, True)}
    assert [p.problem for p in nano.generate_part("ranges", 10)] == [p.problem for p in ranges[:10]]
    assert {p.meta["part"] for p in ranges} == {"ranges"}


def test_the_confirmatory_part_is_twice_as_large_alike_in_kind_and_shares_no_problem(ranges, confirm) -> None:
    assert len(confirm) == 96
    kinds = Counter((p.family, _reading(p.problem)[1]) for p in confirm)
    assert kinds == {(f, e): 24 for f in ("prime_count", "prime_sum") for e in (False, True)}
    assert {p.meta["part"] for p in confirm} == {"ranges_confirm"}
    assert [p.problem for p in nano.generate_part("ranges_confirm", 8)] == [p.problem for p in confirm[:8]]
    # nothing in common with the part the configuration was chosen on: not a sentence, not a range
    assert not {p.problem for p in confirm} & {p.problem for p in ranges}
    assert not {p.id for p in confirm} & {p.id for p in ranges}
    assert not {tuple(_reading(p.problem)[0]) for p in confirm} & {
        tuple(_reading(p.problem)[0]) for p in ranges
    }


@pytest.mark.parametrize("part", ["ranges", "ranges_confirm", "rl"])
def test_every_answer_is_what_the_sentence_asks_and_a_misread_bound_changes_it(part) -> None:
    problems = nano.generate_part(part, 64)  # type: ignore[arg-type]
    for p in problems:
        (lo, hi), exclusive = _reading(p.problem)
        assert sympy.isprime(lo) and sympy.isprime(hi), p.problem
        assert p.answer == _answer(p.family, lo, hi, exclusive), p.problem
        assert p.answer != _answer(p.family, lo, hi, not exclusive), p.problem


def test_the_pool_is_range_problems_no_sft_dataset_holds(pool) -> None:
    assert len(pool) == 512 and {p.family for p in pool} == {"prime_count", "prime_sum"}
    # both bounds in turn, so no GRPO batch teaches one reading by its majority
    assert [_reading(p.problem)[1] for p in pool] == [i % 2 == 1 for i in range(len(pool))]
    train = nano.generate("train")  # every nano SFT dataset is a prefix of it (build_sft --limit)
    trained = {(p.family, tuple(sorted(p.params.items()))) for p in train}
    for p in pool:
        assert nano.split_of(p.family, p.params) == "train", p.id
        assert (p.family, tuple(sorted(p.params.items()))) not in trained, p.id
    assert not {p.problem for p in pool} & {p.problem for p in train}


def test_the_held_out_parts_share_nothing_with_training_or_another_test_part(ranges, confirm, pool) -> None:
    others = nano.generate("train") + pool + nano.generate("test", 1000) + nano.generate_unseen()
    keys = {(p.family, tuple(sorted(p.params.items()))) for p in others}
    for p in ranges + confirm:
        for numbers in (p.params, p.meta["stated"]):
            assert nano.split_of(p.family, numbers) == "test", p.id
            assert (p.family, tuple(sorted(numbers.items()))) not in keys, p.id


def test_grpo_reads_the_pool_and_eval_the_parts_by_name(ranges, confirm, pool) -> None:
    source = load_source("nano_rl")
    assert [(p.id, p.problem, p.answer) for p in source] == [(p.id, p.problem, str(p.answer)) for p in pool]
    loaded = benchmarks.load("nano_ranges")
    assert [(p.id, p.answer, p.benchmark) for p in loaded] == [
        (p.id, str(p.answer), "nano_ranges") for p in ranges
    ]
    confirmed = benchmarks.load("nano_ranges_confirm")
    assert [(p.id, p.answer, p.benchmark) for p in confirmed] == [
        (p.id, str(p.answer), "nano_ranges_confirm") for p in confirm
    ]


def test_the_pool_asks_each_range_both_ways_so_no_convention_pays(pool) -> None:
    from thinc_bench.train.curriculum import shuffled_order

    train = nano.generate("train")
    trained = {(p.family, tuple(sorted(q.items()))) for p in train for q in (p.params, p.meta["stated"])}
    for inclusive, exclusive in zip(pool[::2], pool[1::2], strict=True):
        (lo, hi), excl = _reading(inclusive.problem)
        assert not excl and _reading(exclusive.problem) == ([lo, hi], True)  # one range, both readings
        assert inclusive.meta["pair"] == exclusive.meta["pair"] and inclusive.family == exclusive.family
        assert inclusive.meta["phrasing"] == exclusive.meta["phrasing"]  # one sentence, two bounds
        # a policy that ignores the bound answers both alike: right on one at most
        assert inclusive.answer != exclusive.answer
        for p in (inclusive, exclusive):  # both readings' numbers: train split, in no SFT dataset
            for q in (p.params, p.meta["stated"]):
                assert (
                    nano.split_of(p.family, q) == "train"
                    and (p.family, tuple(sorted(q.items()))) not in trained
                )
    assert len({p.meta["pair"] for p in pool}) == len(pool) // 2
    # GRPO keeps a pair's members side by side: every batch of 4 prompts is 2 whole pairs, 2 readings each
    source = load_source("nano_rl")
    together = {p.id: p.meta["pair"] for p in source}
    by_id = {p.id: p for p in source}
    for seed in (0, 1):
        order = shuffled_order([p.id for p in source], seed, together=together)
        assert sorted(order) == sorted(by_id) and order != [p.id for p in source]
        for start in range(0, 64, 4):
            batch = [by_id[i] for i in order[start : start + 4]]
            assert Counter(p.meta["pair"] for p in batch) == {
                batch[0].meta["pair"]: 2,
                batch[2].meta["pair"]: 2,
            }
            assert Counter(p.meta["bounds"] for p in batch) == {"inclusive": 2, "exclusive": 2}
