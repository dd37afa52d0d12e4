"""The nano task: integer problems a 135M model cannot do in its head and can do in a few lines of Python.

Eight families (products of 4-6-digit numbers, modular powers with large exponents, digit sums of
large powers, counts and sums of primes in a range, gcd and lcm of large numbers, divisor counts),
each worded by a grammar of templates, bounds and number formats (`grammar.py`), so a model learns
to read a problem rather than one sentence. Problems come from a seeded stream; each is assigned to
`train` or `test` by a hash of its family and numbers (never of its wording or position), so the two
splits are disjoint in substance, not only in text, and a split's first N problems are the same
whatever N a caller asks for. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from thinc_bench.nano.grammar import TRAIN_RANGES_BY_BOUND, TRAIN_TEMPLATES, Wording, counted, draw_wording

Split = Literal["train", "test"]

DEFAULT_SEED = 0
"""The seed of the registered `nano` benchmark and training source."""
SPLIT_SIZES: Mapping[str, int] = {"train": 2000, "test": 100}
"""Problems per split of the registered task: 100 test problems (a standard error near 5 points)."""
TEST_SHARE = 0.2
"""Share of the problem space (by hash) that belongs to the test split."""


@dataclass(frozen=True)
class NanoProblem:
    """One nano problem: its family, its numbers, its wording and the integer answer."""

    id: str
    family: str
    params: Mapping[str, int]
    problem: str
    answer: int
    meta: Mapping[str, Any] = field(default_factory=dict)


def _primes_between(lo: int, hi: int) -> list[int]:
    sieve = bytearray([1]) * (hi + 1)
    sieve[:2] = b"\x00\x00"
    for p in range(2, math.isqrt(hi) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(range(p * p, hi + 1, p)))
    return [n for n in range(max(lo, 2), hi + 1) if sieve[n]]


def _n_divisors(n: int) -> int:
    count, d = 1, 2
    while d * d <= n:
        e = 0
        while n % d == 0:
            n //= d
            e += 1
        count *= e + 1
        d += 1
    return count * (2 if n > 1 else 1)


def _digits(rng: random.Random, lo: int, hi: int) -> int:
    """A number with between `lo` and `hi` digits, the digit count drawn first (small ones are not rarer)."""
    k = rng.randint(lo, hi)
    return rng.randint(10 ** (k - 1), 10**k - 1)


@dataclass(frozen=True)
class Family:
    """A problem family: how to draw its numbers, its answer, and its phrasings.

    A trained family's phrasings are the training grammar's templates (`grammar.fill` slots, a
    `{range}` for a range wording); a held-out family's are `str.format` templates.
    """

    name: str
    draw: Callable[[random.Random], dict[str, int]]
    answer: Callable[[Mapping[str, int]], int]
    phrasings: tuple[str, ...]


def _draw_gcd(rng: random.Random) -> dict[str, int]:
    g = _digits(rng, 2, 4)
    x, y = _digits(rng, 2, 4), _digits(rng, 2, 4)
    return {"a": g * x, "b": g * y}


def _draw_lcm(rng: random.Random) -> dict[str, int]:
    g = rng.randint(2, 99)
    return {"a": g * _digits(rng, 2, 4), "b": g * _digits(rng, 2, 4)}


def _draw_divisors(rng: random.Random) -> dict[str, int]:
    """Smooth numbers (products of small prime powers) so the count is interesting, 5-9 digits."""
    while True:
        n = 1
        for p in (2, 3, 5, 7, 11, 13):
            n *= p ** rng.choice((0, 0, 1, 1, 2, 3, 4))
        n *= rng.choice((1, 1, 17, 19, 23, 29, 31, 37, 41, 43))
        if 10**4 <= n < 10**9:
            return {"n": n}


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _prime_ends(stated: Mapping[str, int]) -> dict[str, int]:
    """A range's ends moved up to primes, so reading its bounds the other way changes the answer.

    With ends drawn at random both are composite nine times in ten, and a model that reads "strictly
    between" as inclusive (or "up to and including" as exclusive) would still score.
    """
    lo = next(n for n in itertools.count(stated["lo"]) if _is_prime(n))
    hi = next(n for n in itertools.count(max(stated["hi"], lo + 1)) if _is_prime(n))
    return {**stated, "lo": lo, "hi": hi}


def _draw_range(width: tuple[int, int]) -> Callable[[random.Random], dict[str, int]]:
    """A range whose ends are both prime (`_prime_ends`): every bound its wording states matters."""

    def draw(rng: random.Random) -> dict[str, int]:
        lo = rng.randint(1, 20000)
        return _prime_ends({"lo": lo, "hi": lo + rng.randint(*width)})

    return draw


FAMILIES: tuple[Family, ...] = (
    Family(
        "product",
        lambda rng: {"a": _digits(rng, 4, 6), "b": _digits(rng, 4, 6)},
        lambda p: p["a"] * p["b"],
        TRAIN_TEMPLATES["product"],
    ),
    Family(
        "modpow",
        lambda rng: {
            "a": rng.randint(2, 999),
            "b": rng.randint(10**3, 10**7),
            "m": rng.randint(7, 99999),
        },
        lambda p: pow(p["a"], p["b"], p["m"]),
        TRAIN_TEMPLATES["modpow"],
    ),
    Family(
        "digit_sum_power",
        lambda rng: {"a": rng.randint(2, 99), "e": rng.randint(20, 300)},
        lambda p: sum(map(int, str(p["a"] ** p["e"]))),
        TRAIN_TEMPLATES["digit_sum_power"],
    ),
    Family(
        "prime_count",
        _draw_range((200, 20000)),
        lambda p: len(_primes_between(p["lo"], p["hi"])),
        TRAIN_TEMPLATES["prime_count"],
    ),
    Family(
        "prime_sum",
        _draw_range((50, 3000)),
        lambda p: sum(_primes_between(p["lo"], p["hi"])),
        TRAIN_TEMPLATES["prime_sum"],
    ),
    Family("gcd", _draw_gcd, lambda p: math.gcd(p["a"], p["b"]), TRAIN_TEMPLATES["gcd"]),
    Family("lcm", _draw_lcm, lambda p: math.lcm(p["a"], p["b"]), TRAIN_TEMPLATES["lcm"]),
    Family("divisor_count", _draw_divisors, lambda p: _n_divisors(p["n"]), TRAIN_TEMPLATES["divisor_count"]),
)
FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)
_BY_NAME = {f.name: f for f in FAMILIES}


def family(name: str) -> Family:
    return _BY_NAME[name]


def split_of(family_name: str, params: Mapping[str, int], seed: int = DEFAULT_SEED) -> Split:
    """Which split a problem's substance (family and numbers) belongs to: a hash, so never both."""
    key = f"{seed}/{family_name}/" + ",".join(f"{k}={params[k]}" for k in sorted(params))
    draw = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    return "test" if draw < TEST_SHARE else "train"


def generate(split: Split, n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems of a split (default: the registered size), families in turn.

    The stream is the same for both splits; each drawn problem goes to the split its hash names, so
    `generate("train", 50)` is a prefix of `generate("train", 500)` and shares nothing with any test
    problem of the same seed. Each problem is worded by the training grammar (`grammar.draw_wording`):
    `params` are the numbers its answer counts, `meta["stated"]` the numbers its sentence writes (a
    range's ends, before its bounds are applied) and `meta["lo_open"]`/`meta["hi_open"]` its bounds.
    """
    if split not in SPLIT_SIZES:
        raise ValueError(f"nano split {split!r}; use train or test")
    n = SPLIT_SIZES[split] if n is None else n
    out: list[NanoProblem] = []
    for fam, stated, wording in itertools.islice(stream(split, seed), n):
        params = counted(stated, wording.lo_open, wording.hi_open)
        meta: dict[str, Any] = {
            "family": fam.name,
            "phrasing": wording.template,
            "numbers": wording.numbers,
            "stated": stated,
            "seed": seed,
        }
        if "lo" in stated:
            meta |= {"lo_open": wording.lo_open, "hi_open": wording.hi_open}
        out.append(
            NanoProblem(
                id=f"nano-{split}-{len(out):04d}",
                family=fam.name,
                params=params,
                problem=wording.text,
                answer=fam.answer(params),
                meta=meta,
            )
        )
    return out


def key(family_name: str, params: Mapping[str, int]) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A problem's substance: its family and numbers (what the splits and parts must not share)."""
    return (family_name, tuple(sorted(params.items())))


def claim_test(
    family_name: str,
    numbers: Sequence[Mapping[str, int]],
    taken: set[tuple[str, tuple[tuple[str, int], ...]]],
    seed: int = DEFAULT_SEED,
) -> bool:
    """Whether a drawn problem may join a test part: each of its numbers (what its sentence states and
    what its answer counts) hashes to the test split and none is `taken`. If so, they are taken now,
    so no later problem of a part sharing `taken` can be the same problem by either reading."""
    keys = {key(family_name, q) for q in numbers}
    if keys & taken or any(split_of(family_name, q, seed) != "test" for q in numbers):
        return False
    taken |= keys
    return True


def stream(split: Split, seed: int = DEFAULT_SEED) -> Iterator[tuple[Family, dict[str, int], Wording]]:
    """The endless draw behind `generate` (family, stated numbers, wording), without the answers.

    A problem belongs to the split both its stated and its counted numbers hash to, and to no other:
    whichever numbers another part compares, they are never the same problem. A range family's
    problems take an inclusive and an exclusive bound in turn, so every prefix (an SFT dataset is one)
    teaches both readings equally: drawn at random, the split's hash (two keys to land for an excluded
    range, one for an inclusive) made them 56:44, and a reading the data favours is one a student can
    learn as a convention. Apart from `generate` so the other test parts can exclude the seen part's
    problems cheaply.
    """
    rng = random.Random(f"thinc-nano/{seed}")
    seen: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
    while True:
        fam = FAMILIES[len(seen) % len(FAMILIES)]  # balanced: each family's turn lasts until it lands here
        exclusive = len(seen) // len(FAMILIES) % 2 == 1  # a range family's bounds in turn, inclusive first
        stated = fam.draw(rng)
        wording = draw_wording(fam.name, stated, rng, ranges=TRAIN_RANGES_BY_BOUND[exclusive])
        params = counted(stated, wording.lo_open, wording.hi_open)
        k = key(fam.name, params)
        if k in seen or any(split_of(fam.name, q, seed) != split for q in (stated, params)):
            continue
        seen.add(k)
        yield fam, stated, wording
