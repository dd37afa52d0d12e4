"""The nano test part in held-out families: problems never trained on whose solution composes trained steps.

The seen and unseen parts ask what training asked, in its words or in others; this part asks whether
the model can chain what it learnt: the digit sum of a product, the gcd of two modular powers, the
divisor count of an lcm. The families live here, not in `FAMILIES`, which is all the training
generator draws from, so no train problem is ever one of them. Each step's own numbers hash to the
test split too (the product `a*b`, both modular powers, the lcm and its divisor count), so no step
was trained on either. Draws are shaped so answers vary: the two modular powers share a prime with
the modulus, so their gcd is never 1 by default; the lcm's factors are smooth, so its divisor count
is not almost always a small power of 2.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from thinc_bench.nano.problems import (
    DEFAULT_SEED,
    Family,
    NanoProblem,
    _digits,
    _n_divisors,
    key,
    split_of,
)

FAMILIES_SIZE = 48
"""Problems in the registered `nano_families` part: 16 per held-out family."""
_SMALL_PRIMES = (2, 3, 5, 7)
_EXPONENTS = ((0, 1, 2, 3, 4, 5, 6),) * 2 + ((0, 0, 1, 2, 3),) * 2 + ((0, 0, 1, 2),) * 2
"""Choices of exponent for 2, 3, 5, 7, 11 and 13 in the lcm family's numbers."""


def _draw_digit_sum_product(rng: random.Random) -> dict[str, int]:
    return {"a": _digits(rng, 4, 6), "b": _digits(rng, 4, 6)}


def _draw_gcd_modpow(rng: random.Random) -> dict[str, int]:
    """A modulus of 4-6 digits and two bases that share a small prime with it (so the gcd is not 1)."""
    while True:
        shared = rng.choice(_SMALL_PRIMES)
        m = shared ** rng.randint(1, 4) * rng.randint(11, 999)
        for p in _SMALL_PRIMES:
            m *= p ** rng.choice((0, 0, 1, 2, 3))
        if not 10**3 <= m < 10**6:
            continue
        a, c = (
            shared * math.prod(p for p in _SMALL_PRIMES if rng.random() < 0.4) * rng.randint(2, 60)
            for _ in range(2)
        )
        q = {"a": a, "b": rng.randint(10**3, 10**6), "c": c, "d": rng.randint(10**3, 10**6), "m": m}
        if a != c and pow(a, q["b"], m) and pow(c, q["d"], m):  # a residue 0 would make it one step
            return q


def _draw_lcm_divisor_count(rng: random.Random) -> dict[str, int]:
    """Two smooth numbers of 3-6 digits (as the trained divisor counts), sharing some primes.

    High powers of 2 and 3 and a large prime factor spread the counts: with exponents up to 3 only,
    one count (192) was an eighth of all answers and 16 problems had as few as 7 distinct ones.
    """

    def smooth() -> int:
        n: int = math.prod(p ** rng.choice(e) for p, e in zip((2, 3, 5, 7, 11, 13), _EXPONENTS, strict=True))
        return n * rng.choice((1, 17, 19, 23, 29, 31, 37, 41, 43, 47))

    while True:
        a, b = smooth(), smooth()
        if a != b and all(10**2 <= x < 10**6 for x in (a, b)):
            return {"a": a, "b": b}


def _steps(name: str, q: Mapping[str, int]) -> list[tuple[str, dict[str, int]]]:
    """The trained problems a held-out one is made of (family, numbers)."""
    if name == "digit_sum_product":
        return [("product", {"a": q["a"], "b": q["b"]})]
    if name == "gcd_modpow":
        return [
            ("modpow", {"a": q["a"], "b": q["b"], "m": q["m"]}),
            ("modpow", {"a": q["c"], "b": q["d"], "m": q["m"]}),
        ]
    lcm = math.lcm(q["a"], q["b"])
    return [("lcm", {"a": q["a"], "b": q["b"]}), ("divisor_count", {"n": lcm})]


HELD_OUT_FAMILIES: tuple[Family, ...] = (
    Family(
        "digit_sum_product",
        _draw_digit_sum_product,
        lambda p: sum(map(int, str(p["a"] * p["b"]))),
        (
            "What is the sum of the digits of {a} \\times {b}?",
            "Multiply {a} by {b} and add up the digits of the product. What is the total?",
            "Find the digit sum of the product of {a} and {b}.",
        ),
    ),
    Family(
        "gcd_modpow",
        _draw_gcd_modpow,
        lambda p: math.gcd(pow(p["a"], p["b"], p["m"]), pow(p["c"], p["d"], p["m"])),
        (
            "Let $x = {a}^{{{b}}} \\bmod {m}$ and $y = {c}^{{{d}}} \\bmod {m}$. What is $\\gcd(x, y)$?",
            "What is the greatest common divisor of the remainders of ${a}^{{{b}}}$ and ${c}^{{{d}}}$ "
            "when each is divided by {m}?",
            "Find the largest integer that divides both {a} to the power {b} modulo {m} and {c} to the "
            "power {d} modulo {m}.",
        ),
    ),
    Family(
        "lcm_divisor_count",
        _draw_lcm_divisor_count,
        lambda p: _n_divisors(math.lcm(p["a"], p["b"])),
        (
            "How many positive divisors does the least common multiple of {a} and {b} have?",
            "Find the number of positive integers that divide $\\operatorname{{lcm}}({a}, {b})$.",
            "Count the divisors of the smallest positive integer divisible by both {a} and {b}.",
        ),
    ),
)
"""Families no training draws from, each a chain of two trained steps, 3 phrasings each."""
HELD_OUT_NAMES: tuple[str, ...] = tuple(f.name for f in HELD_OUT_FAMILIES)


def generate_families(n: int | None = None, seed: int = DEFAULT_SEED) -> list[NanoProblem]:
    """The first `n` problems (default `FAMILIES_SIZE`) of the held-out-family test part.

    Families in turn, phrasings in turn within a family; a problem is kept only if every step it is
    made of hashes to the test split (see the module docstring). A smaller `n` is a prefix.
    """
    n = FAMILIES_SIZE if n is None else n
    rng = random.Random(f"thinc-nano-families/{seed}")
    taken: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
    out: list[NanoProblem] = []
    while len(out) < n:
        fam = HELD_OUT_FAMILIES[len(out) % len(HELD_OUT_FAMILIES)]
        k = len(out) // len(HELD_OUT_FAMILIES) % len(fam.phrasings)
        params = fam.draw(rng)
        steps = _steps(fam.name, params)
        if key(fam.name, params) in taken or any(split_of(f, q, seed) != "test" for f, q in steps):
            continue
        taken.add(key(fam.name, params))
        out.append(
            NanoProblem(
                id=f"nano-family-{len(out):04d}",
                family=fam.name,
                params=params,
                problem=fam.phrasings[k].format(**params),
                answer=fam.answer(params),
                meta={"family": fam.name, "part": "families", "phrasing": k, "seed": seed},
            )
        )
    return out
