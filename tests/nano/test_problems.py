"""The nano task: right answers (checked with SymPy, not the generator's code), disjoint splits,
stable prefixes, several phrasings per family, and registration as benchmark and training source."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest
import sympy

from thinc_bench import benchmarks, nano
from thinc_bench.build_sft.sources import load_source
from thinc_bench.errors import DatasetError


def _sympy_answer(p: nano.NanoProblem) -> int:
    q = p.params
    if p.family == "product":
        return int(sympy.Integer(q["a"]) * q["b"])
    if p.family == "modpow":
        return int(sympy.Integer(q["a"]).__pow__(q["b"], q["m"]))
    if p.family == "digit_sum_power":
        return sum(sympy.ntheory.digits(int(sympy.Integer(q["a"]) ** q["e"]))[1:])
    if p.family == "prime_count":
        return int(sympy.primepi(q["hi"]) - sympy.primepi(q["lo"] - 1))
    if p.family == "prime_sum":
        return int(sum(sympy.primerange(q["lo"], q["hi"] + 1)))
    if p.family == "gcd":
        return int(sympy.igcd(q["a"], q["b"]))
    if p.family == "lcm":
        return int(sympy.ilcm(q["a"], q["b"]))
    if p.family == "divisor_count":
        return int(sympy.divisor_count(q["n"]))
    raise AssertionError(p.family)


def test_every_test_answer_and_a_train_sample_agree_with_sympy() -> None:
    problems = nano.generate("test") + nano.generate("train", 200)
    wrong = [(p.id, p.answer, _sympy_answer(p)) for p in problems if p.answer != _sympy_answer(p)]
    assert wrong == []


def test_a_hand_checked_problem_of_each_kind() -> None:
    # Worked by hand, independent of the generator's draws: the families' answer functions.
    fam = {f.name: f for f in nano.FAMILIES}
    assert fam["product"].answer({"a": 1234, "b": 5678}) == 7006652
    assert fam["modpow"].answer({"a": 2, "b": 10, "m": 1000}) == 24
    assert fam["digit_sum_power"].answer({"a": 2, "e": 15}) == 26  # 32768
    assert fam["prime_count"].answer({"lo": 10, "hi": 30}) == 6  # 11 13 17 19 23 29
    assert fam["prime_sum"].answer({"lo": 2, "hi": 10}) == 17
    assert fam["prime_count"].answer({"lo": 1, "hi": 2}) == 1  # 1 is not prime, 2 is (inclusive)
    assert fam["gcd"].answer({"a": 462, "b": 1071}) == 21
    assert fam["lcm"].answer({"a": 4, "b": 6}) == 12
    assert fam["divisor_count"].answer({"n": 360}) == 24
    assert fam["divisor_count"].answer({"n": 97 * 97}) == 3  # a prime square


def test_splits_share_no_problem_in_substance_or_text() -> None:
    train, test = nano.generate("train"), nano.generate("test")
    assert len(train) == nano.SPLIT_SIZES["train"] and len(test) == nano.SPLIT_SIZES["test"]

    def key(p: nano.NanoProblem) -> tuple:
        return (p.family, tuple(sorted(p.params.items())))

    assert not {key(p) for p in train} & {key(p) for p in test}
    assert not {p.problem for p in train} & {p.problem for p in test}
    assert len({key(p) for p in train}) == len(train)  # no repeats inside a split either
    assert all(nano.split_of(p.family, p.params) == "test" for p in test)


def test_a_smaller_request_is_a_prefix_and_the_seed_changes_the_draw() -> None:
    assert nano.generate("train", 30) == nano.generate("train", 300)[:30]
    other = nano.generate("test", seed=1)
    assert [p.problem for p in other] != [p.problem for p in nano.generate("test")]


def test_families_are_balanced_phrased_several_ways_and_state_their_numbers() -> None:
    train = nano.generate("train")
    counts = Counter(p.family for p in train)
    assert set(counts) == set(nano.FAMILY_NAMES) and max(counts.values()) - min(counts.values()) <= 1
    phrasings: dict[str, set[int]] = defaultdict(set)
    for p in train:
        phrasings[p.family].add(p.meta["phrasing"])
        if p.meta["numbers"] == "plain":  # the other formats are read back in test_grammar.py
            numbers = set(re.findall(r"\d+", p.problem))
            assert {str(v) for v in p.meta["stated"].values()} <= numbers, p.problem
    assert all(len(v) >= 5 for v in phrasings.values())
    # the 4-6-digit factors and the large exponents the issue asks for
    products = [p.params for p in train if p.family == "product"]
    assert {len(str(q["a"])) for q in products} == {4, 5, 6}
    assert min(q["b"] for p in train if p.family == "modpow" for q in [p.params]) >= 1000


def test_registered_as_a_benchmark_and_as_a_training_source() -> None:
    test = benchmarks.load("nano")
    assert len(test) == 100 and test[0].id == "nano-test-0000" and test[0].benchmark == "nano"
    assert test[0].answer == str(nano.generate("test", 1)[0].answer)
    assert benchmarks.load("nano", data_dir="/nonexistent") == test  # generated: no local copy needed
    train = load_source("nano")
    assert len(train) == nano.SPLIT_SIZES["train"] and train[0].id == "nano-train-0000"
    assert not {p.problem for p in train} & {p.problem for p in test}
    assert [p.id for p in benchmarks.load("nano_train")] == [p.id for p in train]


def test_an_unknown_benchmark_error_names_nano() -> None:
    with pytest.raises(DatasetError, match="nano"):
        benchmarks.load("nan0")
