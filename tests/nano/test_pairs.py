"""The matched-pair part: each pair is one range asked inclusive and exclusive in one wording, its
answers are what the sentences ask (numbers and bounds read back from the text, counted by SymPy), the
two differ, a reader that ignores the bound solves no pair, and neither its wordings nor its problems
are shared with training, GRPO's pool or another test part."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import sympy

from thinc_bench import benchmarks, metrics, nano
from thinc_bench.nano import grammar

# How a reader tells the bound from the part's sentences (written from their English, not from the
# code's flags). "larger than" alone is the exclusive phrase; "no larger than" the inclusive one.
EXCLUDING = re.compile(r"(?<!no )larger than|themselves left out|\$\]|ends dropped")
INCLUDING = re.compile(r"no smaller than|themselves counted|\$\[|ends kept")
NUMBER = re.compile(r"(?<![\d,])\d{1,3}(?:,\d{3})+(?!\d)|\d+")


def _reading(text: str) -> tuple[int, int, bool]:
    """The stated ends and whether the sentence leaves them out."""
    excluding, including = EXCLUDING.search(text), INCLUDING.search(text)
    assert bool(excluding) != bool(including), text  # exactly one kind of bound is stated
    ends = list(dict.fromkeys(int(m.replace(",", "")) for m in NUMBER.findall(text)))
    assert len(ends) == 2, text
    return ends[0], ends[1], bool(excluding)


def _answer(family: str, lo: int, hi: int, exclusive: bool) -> int:
    primes = list(sympy.primerange(lo + 1, hi) if exclusive else sympy.primerange(lo, hi + 1))
    return len(primes) if family == "prime_count" else sum(primes)


@pytest.fixture(scope="module")
def pairs() -> list[nano.NanoProblem]:
    return nano.generate_part("pairs")


def test_48_pairs_each_one_range_asked_both_ways_in_one_wording(pairs) -> None:
    assert len(pairs) == nano.PAIRS_SIZE == 96
    assert [p.problem for p in nano.generate_pairs(10)] == [p.problem for p in pairs[:10]]  # a prefix
    for inclusive, exclusive in zip(pairs[::2], pairs[1::2], strict=True):
        assert inclusive.meta["pair"] == exclusive.meta["pair"] and inclusive.family == exclusive.family
        assert (inclusive.meta["bounds"], exclusive.meta["bounds"]) == ("inclusive", "exclusive")
        lo, hi, excl = _reading(inclusive.problem)
        assert (lo, hi, excl) == (*_reading(exclusive.problem)[:2], False) and _reading(exclusive.problem)[2]
        # the same sentence around a different bound: with its bound phrase cut out, one text
        cut = [
            p.problem.replace(grammar.fill(w.text, p.meta["stated"], p.meta["numbers"]), "{range}")
            for p, w in zip(
                (inclusive, exclusive), nano.PAIR_BOUNDS[inclusive.meta["bound_wording"]], strict=True
            )
        ]
        assert cut[0] == cut[1] and "{range}" in cut[0] and inclusive.problem != exclusive.problem
        assert inclusive.answer != exclusive.answer  # both ends prime: the bound always matters
    kinds = Counter((p.family, p.meta["bounds"]) for p in pairs)
    assert kinds == {(f, b): 24 for f in nano.RANGE_FAMILIES for b in ("inclusive", "exclusive")}
    wordings = Counter(p.meta["bound_wording"] for p in pairs[::2])
    assert wordings == dict.fromkeys(range(len(nano.PAIR_BOUNDS)), 12)
    assert {p.meta["numbers"] for p in pairs} == {"plain", "comma"}


def test_every_answer_is_what_the_sentence_asks_and_the_other_reading_is_wrong(pairs) -> None:
    for p in pairs:
        lo, hi, exclusive = _reading(p.problem)
        assert sympy.isprime(lo) and sympy.isprime(hi), p.problem
        assert p.answer == _answer(p.family, lo, hi, exclusive), p.problem
        assert p.answer != _answer(p.family, lo, hi, not exclusive), p.problem


def test_a_reader_that_ignores_the_bound_solves_no_pair_and_one_that_reads_solves_all(pairs) -> None:
    members = {p.id: nano.pair_member(p.id) for p in pairs}
    assert all(m == (p.meta["pair"], p.meta["bounds"]) for p, m in zip(pairs, members.values(), strict=True))
    for exclusive_always in (False, True):  # a convention: one reading for every sentence
        verdicts = {}
        for p in pairs:
            lo, hi, _ = _reading(p.problem)
            verdicts[p.id] = [_answer(p.family, lo, hi, exclusive_always) == p.answer]
        score = metrics.matched_pairs(verdicts, members)  # type: ignore[arg-type]
        assert (score.n_pairs, score.both, score.value) == (48, 0, 0.0)
        assert score.convention_p < 1e-10
    read = {p.id: [_answer(p.family, *_reading(p.problem)) == p.answer] for p in pairs}
    assert metrics.matched_pairs(read, members).both == 48  # type: ignore[arg-type]
    assert nano.pair_member("nano-test-0001") is None and nano.pair_member("nano-pair-0001") is None


def _training_sentences() -> list[str]:
    """Every sentence of the training grammar (templates x range wordings x frames), slots left open."""
    out = []
    for templates in grammar.TRAIN_TEMPLATES.values():
        for t in templates:
            bodies = [t.replace("{range}", r.text) for r in grammar.TRAIN_RANGES] if "{range}" in t else [t]
            out += [
                lead + b + close for b in bodies for lead in grammar.LEAD_INS for close in grammar.CLOSINGS
            ]
    return out


def test_its_wordings_are_none_of_trainings_grpos_or_the_unseen_parts() -> None:
    sentences = _training_sentences()
    unseen = [u.template for us in nano.UNSEEN_PHRASINGS.values() for u in us]
    assert [s for s in sentences + unseen if any(m in s for m in nano.PAIR_MARKERS)] == []
    for templates in nano.PAIR_TEMPLATES.values():  # every sentence of the part holds a marker
        assert all(sum(m in t for m in nano.PAIR_MARKERS) == 1 for t in templates)
    bounds = [w.text for pair in nano.PAIR_BOUNDS for w in pair]
    trained = [r.text for r in grammar.TRAIN_RANGES]
    assert not [(b, t) for b in bounds for t in trained if b in t or t in b]  # no phrase in another
    assert not [(b, s) for b in bounds for s in sentences + unseen if b in s]
    assert not set(bounds) & {u.template for u in nano.UNSEEN_PHRASINGS["prime_count"]}


@pytest.mark.parametrize("seed", [0, 7])
def test_no_problem_of_another_part_holds_its_wording_and_none_of_its_holds_anothers(seed: int) -> None:
    pairs = nano.generate_pairs(seed=seed)
    assert all(any(m in p.problem for m in nano.PAIR_MARKERS) for p in pairs)
    assert not [p.problem for p in pairs if grammar.test_marked(p.problem)]  # no unseen-part component
    others = nano.generate("train", 400, seed) + nano.generate_rl(64, seed) + nano.generate("test", seed=seed)
    others += nano.generate_unseen(None, seed) + nano.generate_ranges_confirm(None, seed)
    assert not [p.problem for p in others if any(m in p.problem for m in nano.PAIR_MARKERS)]
    for p in pairs:  # no training range phrase, filled with this problem's ends, is in its sentence
        lo, hi, _ = _reading(p.problem)
        for r in grammar.TRAIN_RANGES:
            for fmt in set(grammar.TRAIN_NUMBERS):
                assert grammar.fill(r.text, {"lo": lo, "hi": hi}, fmt) not in p.problem, (r.text, p.problem)


def test_it_shares_no_problem_with_training_grpo_or_another_test_part(pairs) -> None:
    others = (
        nano.generate("train") + nano.generate_rl() + nano.generate("test", 1000) + nano.generate_unseen()
    )
    others += nano.generate_ranges() + nano.generate_ranges_confirm()
    keys = {
        (p.family, tuple(sorted(q.items())))
        for p in others
        for q in (p.params, p.meta.get("stated", p.params))
    }
    for p in pairs:
        for numbers in (p.params, p.meta["stated"]):
            assert nano.split_of(p.family, numbers) == "test", p.id
            assert (p.family, tuple(sorted(numbers.items()))) not in keys, p.id
    assert len({p.meta["pair"] for p in pairs}) == 48 and len({p.id for p in pairs}) == 96


def test_registered_as_a_benchmark_that_eval_limits_to_whole_pairs(pairs) -> None:
    loaded = benchmarks.load("nano_pairs")
    assert [(p.id, p.problem, p.answer, p.benchmark) for p in loaded] == [
        (p.id, p.problem, str(p.answer), "nano_pairs") for p in pairs
    ]
    assert loaded[0].id == "nano-pair-0000-in" and loaded[1].id == "nano-pair-0000-ex"
    assert {p.meta["part"] for p in loaded} == {"pairs"}
