"""The training grammar: every drawn wording states its numbers whole in its format, its gold answer is
what the sentence asks (numbers and bounds read back from the text, SymPy's arithmetic), the teacher's
code writes those numbers as plain Python integers, and no training problem of any seed holds a
test-only component while every unseen problem does (disjoint by construction, checked on the text)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench import nano
from thinc_bench.nano import grammar
from thinc_bench.nano.problems import key
from thinc_bench.nano.teacher import thinc_turns

# Number words as a reader knows them, written here apart from the grammar's table.
_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
} | {
    w: 10 * i
    for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2)
}
_GROUPED = re.compile(r"(?<![\d,])\d{1,3}(?:(?:,|\{,\}|\\,| )\d{3})+(?!\d)|\d+")
_WORD = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")(?:-([a-z]+))?\b", re.I)


def _numbers(text: str) -> Counter[int]:
    """Every number the sentence writes, in any format a reader knows (digits grouped or not, words)."""
    found = Counter(int(re.sub(r"\D", "", m)) for m in _GROUPED.findall(text))
    for tens, ones in _WORD.findall(text):
        found[_WORDS[tens.lower()] + (_WORDS.get(ones.lower(), 0) if ones else 0)] += 1
    return found


def _bounds(text: str) -> tuple[bool, bool]:
    """Whether the sentence leaves out the range's lower and upper end, read from its words."""
    both = re.search(r"strictly between|neither end|either end|open interval", text)
    lo_open = both or re.search(r"greater than|[\d}] < p", text)
    hi_open = both or re.search(r"not including|less than|p < \d", text)
    return bool(lo_open), bool(hi_open)


def _answer(p: nano.NanoProblem) -> int:
    """The answer from the stated numbers and the bounds the text says, with SymPy."""
    q = dict(p.meta["stated"])
    if p.family in ("prime_count", "prime_sum"):
        lo_open, hi_open = _bounds(p.problem)
        primes = list(sympy.primerange(q["lo"] + lo_open, q["hi"] - hi_open + 1))
        return len(primes) if p.family == "prime_count" else sum(primes)
    if p.family == "product":
        return int(sympy.Integer(q["a"]) * q["b"])
    if p.family == "modpow":
        return int(sympy.Integer(q["a"]).__pow__(q["b"], q["m"]))
    if p.family == "digit_sum_power":
        return sum(sympy.ntheory.digits(int(sympy.Integer(q["a"]) ** q["e"]))[1:])
    if p.family in ("gcd", "lcm"):
        return int(sympy.igcd(q["a"], q["b"]) if p.family == "gcd" else sympy.ilcm(q["a"], q["b"]))
    return int(sympy.divisor_count(q["n"]))


seeds = st.integers(min_value=0, max_value=10**6)


@settings(max_examples=12, deadline=None)
@given(seed=seeds)
def test_every_training_answer_is_what_its_sentence_asks_and_states_its_numbers(seed: int) -> None:
    for p in nano.generate("train", 24, seed=seed):
        assert p.answer == _answer(p), p.problem
        assert not Counter(p.meta["stated"].values()) - _numbers(p.problem), p.problem


def test_the_gold_answers_of_the_registered_train_prefix_and_every_bound_matters() -> None:
    train = nano.generate("train", 400)
    assert [p.id for p in train if p.answer != _answer(p)] == []
    ranges = [p for p in train if p.family in ("prime_count", "prime_sum")]
    for p in ranges:  # both ends prime: reading either bound the other way changes the answer
        q = p.meta["stated"]
        assert sympy.isprime(q["lo"]) and sympy.isprime(q["hi"]), p.problem
    kinds = Counter(_bounds(p.problem) for p in ranges)
    assert set(kinds) == {(False, False), (True, True)} and min(kinds.values()) >= 0.35 * len(ranges)


def test_the_grammar_varies_formats_templates_and_frames() -> None:
    train = nano.generate("train", 800)
    assert {p.meta["numbers"] for p in train} == {"plain", "comma", "latex", "words"}
    texts = [p.problem for p in train]
    assert any(re.search(r"\d,\d{3}", t) for t in texts) and any("{,}" in t for t in texts)
    spelt = [p for p in train for v in p.meta["stated"].values() if v < 100 and str(v) not in p.problem]
    assert len(spelt) >= 3 and all(p.meta["numbers"] == "words" for p in spelt)  # rare: few numbers < 100
    assert any(t.startswith("Exercise.") for t in texts) and any(t.endswith("single number.") for t in texts)
    for fam, templates in grammar.TRAIN_TEMPLATES.items():
        used = {p.meta["phrasing"] for p in train if p.family == fam}
        assert len(used) >= len(templates) - 1 >= 4, fam


def test_hand_written_renderings() -> None:
    assert grammar.render_number(22275, "latex", math=True) == "22{,}275"
    assert grammar.render_number(22275, "latex", math=False) == "$22{,}275$"
    assert grammar.render_number(1234567, "comma", math=False) == "1,234,567"
    assert grammar.render_number(42, "words", math=False) == "forty-two"
    assert grammar.render_number(42, "words", math=True) == "42"
    assert grammar.render_number(420, "words", math=False) == "420"
    assert grammar.render_number(22275, "thin", math=True) == "22\\,275"
    assert grammar.render_number(999, "space", math=False) == "999"
    text = grammar.fill("Is ${a}^{{e}}$ bigger than {a}?", {"a": 7, "e": 300}, "words")
    assert text == "Is $7^{300}$ bigger than seven?"
    assert grammar.counted({"lo": 11, "hi": 29}, True, False) == {"lo": 12, "hi": 29}


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=10**12),
    numbers=st.sampled_from(sorted(set(grammar.TRAIN_NUMBERS))),
    math=st.booleans(),
)
def test_no_training_number_format_writes_a_test_only_one(n: int, numbers, math: bool) -> None:
    shown = grammar.render_number(n, numbers, math)
    assert not grammar.test_marked(f"Take {shown} and {shown}.")
    assert _numbers(shown) == Counter([n])  # and a reader gets the number back


def test_no_training_sentence_of_the_whole_grammar_holds_a_test_marker() -> None:
    """Exhaustive over the finite grammar: every template, range wording, lead-in and closing."""
    sentences = []
    for templates in grammar.TRAIN_TEMPLATES.values():
        for t in templates:
            bodies = [t.replace("{range}", r.text) for r in grammar.TRAIN_RANGES] if "{range}" in t else [t]
            sentences += [
                lead + b + close for b in bodies for lead in grammar.LEAD_INS for close in grammar.CLOSINGS
            ]
    assert len(sentences) > 1000
    assert [s for s in sentences if grammar.test_marked(s)] == []
    unseen = [u.template for us in nano.UNSEEN_PHRASINGS.values() for u in us]
    assert [u for u in unseen if not any(m in u for m in grammar.TEST_MARKERS)] == []


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_no_training_or_seen_problem_of_any_seed_holds_a_test_marker(seed: int) -> None:
    for p in nano.generate("train", 40, seed=seed) + nano.generate("test", 16, seed=seed):
        assert not grammar.test_marked(p.problem), p.problem


def test_every_unseen_problem_holds_a_test_only_component() -> None:
    for seed in (0, 7):
        unseen = nano.generate_unseen(seed=seed)
        assert [p.problem for p in unseen if not grammar.test_marked(p.problem)] == []


@settings(max_examples=10, deadline=None)
@given(seed=seeds)
def test_the_split_follows_the_numbers_hash_whatever_the_wording(seed: int) -> None:
    train, test = nano.generate("train", 40, seed=seed), nano.generate("test", 16, seed=seed)
    for split, problems in (("train", train), ("test", test)):
        for p in problems:  # what the sentence states and what it counts both hash to its split
            assert nano.split_of(p.family, p.params, seed) == split
            assert nano.split_of(p.family, p.meta["stated"], seed) == split
    keys = lambda ps: {key(p.family, q) for p in ps for q in (p.params, p.meta["stated"])}  # noqa: E731
    assert not keys(train) & keys(test)


def test_the_teachers_code_writes_plain_integers_and_the_bounds_it_read() -> None:
    for p in nano.generate("train", 200):
        first = thinc_turns(p)[0]
        code = first.split("```python\n", 1)[1].split("```", 1)[0]
        for v in p.meta["stated"].values():
            assert re.search(rf"(?<!\d){v}(?!\d)", code), (p.problem, code)
        statements = "\n".join(line for line in code.splitlines() if not line.startswith("#"))
        assert not re.search(r"\d,\d{3}|\{,\}|\\,", statements) and not _WORD.search(statements), code
        if "lo_open" in p.meta:
            namespace: dict = {}
            exec(code, namespace)  # noqa: S102 - the teacher's own block: its count is the gold answer
            assert namespace["ans"] == p.answer, (p.problem, code)


RANGES = ("prime_count", "prime_sum")
_PLAN_BOUND = {(False, False): "Both ends count.", (True, True): "Both ends are excluded."}


def test_every_prefix_of_training_asks_both_readings_of_a_range_equally() -> None:
    train = nano.generate("train")  # every SFT dataset is a prefix of it (build_sft --limit)
    for n in (16, 64, 96, 256, 1000, 2000):
        kinds = Counter((p.family, _bounds(p.problem)) for p in train[:n] if p.family in RANGES)
        for fam in RANGES:
            inclusive, exclusive = kinds[fam, (False, False)], kinds[fam, (True, True)]
            assert abs(inclusive - exclusive) <= 1 and inclusive + exclusive >= n // 8 - 1, (n, kinds)


def test_the_plan_names_the_bound_and_the_code_opens_with_it_then_follows_only_it() -> None:
    for p in [p for p in nano.generate("train", 400) if p.family in RANGES]:
        bounds = _bounds(p.problem)  # read from the sentence's words
        first = thinc_turns(p)[0]
        plan = first.split("<think>\n", 1)[1].split("\n</think>", 1)[0]
        assert plan.endswith(" " + _PLAN_BOUND[bounds]), (p.problem, plan)
        code = first.split("```python\n", 1)[1].split("```", 1)[0]
        comment, ends, *body = code.splitlines()
        assert comment == "# " + _PLAN_BOUND[bounds].rstrip(".").lower()  # the plan's words, then the ends
        lo, hi = p.meta["stated"]["lo"], p.meta["stated"]["hi"]
        assert ends == f"lo, hi = {lo}{' + 1' * bounds[0]}, {hi}{' - 1' * bounds[1]}"
        rest = "\n".join(body)
        assert str(lo) not in rest and str(hi) not in rest  # the count reads lo and hi, nothing else
        # the code follows the line that names the bound: the other reading's line gives its answer
        other = (not bounds[0], not bounds[1])
        for reading, answer in ((bounds, p.answer), (other, None)):
            namespace: dict = {}
            line = f"lo, hi = {lo}{' + 1' * reading[0]}, {hi}{' - 1' * reading[1]}"
            exec(line + "\n" + rest, namespace)  # noqa: S102 - the teacher's own block
            primes = list(sympy.primerange(lo + reading[0], hi - reading[1] + 1))
            want = len(primes) if p.family == "prime_count" else sum(primes)
            assert namespace["ans"] == want and (answer is None or want == answer), (p.problem, code)


def test_a_matched_pair_is_one_wording_around_two_bounds_and_only_ranges_have_one() -> None:
    rng = random.Random(5)
    for _ in range(50):
        inclusive, exclusive = grammar.draw_pair("prime_sum", {"lo": 11, "hi": 97}, rng)
        assert (inclusive.lo_open, exclusive.lo_open) == (
            False,
            True,
        ) and inclusive.template == exclusive.template
        assert _bounds(inclusive.text) == (False, False)
        assert _bounds(exclusive.text) == (True, True) and inclusive.numbers == exclusive.numbers
    with pytest.raises(ValueError, match="'gcd' states no range"):
        grammar.draw_pair("gcd", {"a": 12, "b": 18}, rng)
