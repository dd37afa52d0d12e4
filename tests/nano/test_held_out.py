"""The held-out-family test part: answers (worked by hand and checked with SymPy), families that no
training draws, steps whose numbers training never saw, and answers that vary."""

from __future__ import annotations

from collections import Counter

import pytest
import sympy

from thinc_bench import nano


def _sympy_answer(p: nano.NanoProblem) -> int:
    q = p.params
    if p.family == "digit_sum_product":
        return sum(sympy.ntheory.digits(int(sympy.Integer(q["a"]) * q["b"]))[1:])
    if p.family == "gcd_modpow":
        x = sympy.Integer(q["a"]).__pow__(q["b"], q["m"])
        y = sympy.Integer(q["c"]).__pow__(q["d"], q["m"])
        return int(sympy.igcd(x, y))
    if p.family == "lcm_divisor_count":
        return int(sympy.divisor_count(sympy.ilcm(q["a"], q["b"])))
    raise AssertionError(p.family)


@pytest.fixture(scope="module")
def held_out() -> list[nano.NanoProblem]:
    return nano.generate_families()


def test_hand_worked_answers() -> None:
    fam = {f.name: f for f in nano.HELD_OUT_FAMILIES}
    assert fam["digit_sum_product"].answer({"a": 1234, "b": 5678}) == 26  # 7006652
    assert fam["digit_sum_product"].answer({"a": 99999, "b": 99999}) == 45  # 9999800001
    assert fam["gcd_modpow"].answer({"a": 6, "b": 3, "c": 10, "d": 2, "m": 1000}) == 4  # gcd(216, 100)
    assert fam["gcd_modpow"].answer({"a": 2, "b": 10, "c": 3, "d": 5, "m": 1000}) == 3  # gcd(24, 243)
    assert fam["lcm_divisor_count"].answer({"a": 12, "b": 18}) == 9  # 36 = 2^2 3^2
    assert fam["lcm_divisor_count"].answer({"a": 360, "b": 84}) == 48  # 2520 = 2^3 3^2 5 7
    text = fam["gcd_modpow"].phrasings[0].format(a=6, b=3, c=10, d=2, m=1000)
    assert text == "Let $x = 6^{3} \\bmod 1000$ and $y = 10^{2} \\bmod 1000$. What is $\\gcd(x, y)$?"


def test_every_answer_agrees_with_sympy(held_out) -> None:
    assert [(p.id, p.answer) for p in held_out if p.answer != _sympy_answer(p)] == []


def test_never_trained_on_and_made_of_steps_training_never_saw(held_out) -> None:
    assert not set(nano.HELD_OUT_NAMES) & set(nano.FAMILY_NAMES)
    train = nano.generate("train")
    assert not {p.family for p in train} & set(nano.HELD_OUT_NAMES)
    trained = {(p.family, tuple(sorted(p.params.items()))) for p in train}
    for p in held_out:
        q = p.params
        if p.family == "digit_sum_product":
            steps = [("product", {"a": q["a"], "b": q["b"]})]
        elif p.family == "gcd_modpow":
            steps = [("modpow", {"a": q[x], "b": q[e], "m": q["m"]}) for x, e in (("a", "b"), ("c", "d"))]
        else:
            lcm = int(sympy.ilcm(q["a"], q["b"]))
            steps = [("lcm", {"a": q["a"], "b": q["b"]}), ("divisor_count", {"n": lcm})]
        for family, numbers in steps:
            assert nano.split_of(family, numbers) == "test", p.id
            assert (family, tuple(sorted(numbers.items()))) not in trained, p.id
    held_texts = {f.phrasings[k] for f in nano.HELD_OUT_FAMILIES for k in range(3)}
    assert not held_texts & {t for f in nano.FAMILIES for t in f.phrasings}


def test_answers_vary(held_out) -> None:
    by_family: dict[str, list[int]] = {}
    for p in held_out:
        by_family.setdefault(p.family, []).append(p.answer)
    assert sorted(by_family) == sorted(nano.HELD_OUT_NAMES) and all(len(v) == 16 for v in by_family.values())
    for family, answers in by_family.items():
        assert len(set(answers)) >= 10, (family, answers)  # 16 problems, at least 10 distinct answers
        assert Counter(answers).most_common(1)[0][1] <= 3, (family, answers)
    assert min(by_family["gcd_modpow"]) > 1  # not the gcd of two random residues, mostly 1
    assert all(x > 1 for x in by_family["lcm_divisor_count"])


def test_balanced_phrasings_ids_and_prefix(held_out) -> None:
    assert len(held_out) == nano.FAMILIES_SIZE == 48
    assert {(p.family, p.meta["phrasing"]) for p in held_out} == {
        (f, k) for f in nano.HELD_OUT_NAMES for k in range(3)
    }
    assert all(
        p.meta["part"] == "families" and p.id == f"nano-family-{i:04d}" for i, p in enumerate(held_out)
    )
    assert nano.generate_families(7) == held_out[:7]
    assert [p.problem for p in nano.generate_families(6, seed=1)] != [p.problem for p in held_out[:6]]
