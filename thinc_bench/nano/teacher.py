"""The nano template teacher: ThinC trajectories (a plan, then code blocks only) and, for the
contrast, natural-language-only solutions of the same problems.

A ThinC script has three blocks: compute, check another way, print the answer; each family has
several wordings of its plan and two ways to write each block, drawn per problem, so the student
sees varied code. The script holds the model's turns only: every turn ends where the model opens an
output block, and the harness runs the code for real and writes the output (`backends.scripted`),
so no output here is made up and the final `\\boxed{}` copies what the interpreter printed (the
answer is computed by the same code the problem generator used; the filters keep only what the
sandbox confirms). The NL-only solution says the same plan and states the result in words: a
model taught on it must do the arithmetic in its head, which is ThinC's point (plan in words, compute in code).

With a recovery share (`build_sft --recovery-share`), a drawn share of the ThinC scripts first write a
compute block with a real slip (a misspelt or missing name, a syntax slip, a wrong call, a wrong
attribute or module name, a recursion too deep), which fails in the sandbox, then write the whole
block again, correct, before the check and the print: a third of them fail twice first. Most rewrites
fix the slip and say so in a comment; a third write the clean block again without reading the
message, which is all a model can do after a failure its code did not cause (eval's injected one).
Without a share the scripts are exactly the clean ones.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from thinc_bench.nano.problems import NanoProblem

OUTPUT_OPEN = "```output"
"""Where each ThinC turn stops: the model opens the output block, the harness writes the rest."""

_PLANS: Mapping[str, tuple[str, ...]] = {
    "product": (
        "Multiply the two numbers in Python, check the product another way, then print it.",
        "Compute the product exactly with integers, confirm it by long multiplication, and print it.",
    ),
    "modpow": (
        "Use three-argument pow for the modular power, check it by repeated squaring, then print it.",
        "Compute the power modulo m with pow, confirm with a square-and-multiply loop, and print it.",
    ),
    "digit_sum_power": (
        "Compute the power exactly, sum its decimal digits, check the sum another way, then print it.",
        "Build the big integer, add its digits, confirm with divmod, and print the total.",
    ),
    "prime_count": (
        "Sieve the primes up to the upper end, count those in the range, check by trial division, then print.",
        "Count the primes in the range with a sieve, confirm with a primality test, and print the count.",
    ),
    "prime_sum": (
        "Sieve the primes up to the upper end, add those in the range, check by trial division, then print.",
        "Sum the primes in the range with a sieve, confirm with a primality test, and print the sum.",
    ),
    "gcd": (
        "Use math.gcd, check it with the Euclidean algorithm, then print it.",
        "Compute the gcd with the library, confirm it with Euclid's loop, and print it.",
    ),
    "lcm": (
        "Compute the lcm as a*b//gcd, check it with math.lcm, then print it.",
        "Use math.lcm, confirm that it equals a*b divided by the gcd, and print it.",
    ),
    "divisor_count": (
        "Count the divisors by trial division up to the square root, check with the prime factorisation, then print.",
        "Count the divisors in pairs up to sqrt(n), confirm from the exponents of n, and print the count.",
    ),
}

_TRIAL = "is_p = lambda k: k > 1 and all(k % d for d in range(2, int(k ** 0.5) + 1))\n"

_COMPUTE: Mapping[str, tuple[str, ...]] = {
    "product": (
        "# exact product\nans = {a} * {b}\nprint(ans)",
        "# multiply\nx, y = {a}, {b}\nans = x * y\nprint(ans)",
    ),
    "modpow": (
        "# modular power\nans = pow({a}, {b}, {m})\nprint(ans)",
        "# power modulo m\nbase, e, m = {a}, {b}, {m}\nans = pow(base, e, m)\nprint(ans)",
    ),
    "digit_sum_power": (
        "# digit sum\nans = sum(int(c) for c in str({a} ** {e}))\nprint(ans)",
        "# sum the digits\nn = {a} ** {e}\nans = sum(map(int, str(n)))\nprint(ans)",
    ),
    "prime_count": (
        "# count primes\nfrom sympy import primerange\nans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
        "# prime counting function\nfrom sympy import primepi\nans = primepi({hi}) - primepi({lo} - 1)\nprint(ans)",
    ),
    "prime_sum": (
        "# sum primes\nfrom sympy import primerange\nans = sum(primerange({lo}, {hi} + 1))\nprint(ans)",
        "# add the primes\nfrom sympy import isprime\nans = sum(k for k in range({lo}, {hi} + 1) if isprime(k))\nprint(ans)",
    ),
    "gcd": (
        "# gcd\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        "# library gcd\nfrom math import gcd\nans = gcd({a}, {b})\nprint(ans)",
    ),
    "lcm": (
        "# lcm from the gcd\nimport math\nans = {a} * {b} // math.gcd({a}, {b})\nprint(ans)",
        "# library lcm\nimport math\nans = math.lcm({a}, {b})\nprint(ans)",
    ),
    "divisor_count": (
        "# count divisors\nfrom sympy import divisor_count\nans = divisor_count({n})\nprint(ans)",
        "# number of divisors\nfrom sympy import divisors\nans = len(divisors({n}))\nprint(ans)",
    ),
}

_CHECK: Mapping[str, tuple[str, ...]] = {
    "product": (
        "# check by division\nprint(ans // {b} == {a} and ans % {b} == 0)",
        "# check by long multiplication\nprint(sum({a} * int(c) * 10 ** i for i, c in enumerate(str({b})[::-1])) == ans)",
    ),
    "modpow": (
        "# check by square-and-multiply\nr = 1\nfor bit in bin({b})[2:]:\n    r = r * r * ({a} if bit == '1' else 1) % {m}\nprint(r == ans)",
        "# check right to left over the bits\nr, s, k = 1, {a}, {b}\nwhile k:\n    if k & 1:\n        r = r * s % {m}\n    s = s * s % {m}\n    k >>= 1\nprint(r == ans)",
    ),
    "digit_sum_power": (
        "# check by divmod\nt, k = 0, {a} ** {e}\nwhile k:\n    k, d = divmod(k, 10)\n    t += d\nprint(t == ans)",
        "# check digit by digit\nprint(sum(int(c) * str({a} ** {e}).count(c) for c in '123456789') == ans)",
    ),
    "prime_count": (
        "# check by trial division\n" + _TRIAL + "print(sum(map(is_p, range({lo}, {hi} + 1))) == ans)",
        "# check by trial division\n"
        + _TRIAL
        + "print(len([k for k in range({lo}, {hi} + 1) if is_p(k)]) == ans)",
    ),
    "prime_sum": (
        "# check by trial division\n" + _TRIAL + "print(sum(filter(is_p, range({lo}, {hi} + 1))) == ans)",
        "# check by trial division\n"
        + _TRIAL
        + "print(sum(k for k in range({lo}, {hi} + 1) if is_p(k)) == ans)",
    ),
    "gcd": (
        "# check with Euclid\na, b = {a}, {b}\nwhile b:\n    a, b = b, a % b\nprint(a == ans)",
        "# check: divides both, cofactors coprime\nimport math\nprint({a} % ans == 0 and {b} % ans == 0 and math.gcd({a} // ans, {b} // ans) == 1)",
    ),
    "lcm": (
        "# check with math.lcm\nprint(math.lcm({a}, {b}) == ans)",
        "# check: a multiple of both\nprint(ans % {a} == 0 and ans % {b} == 0 and ans == {a} * {b} // math.gcd({a}, {b}))",
    ),
    "divisor_count": (
        "# check from the factorisation\nfrom sympy import factorint\nk = 1\nfor e in factorint({n}).values():\n    k *= e + 1\nprint(k == ans)",
        "# check by pairs up to the square root\nr = int({n} ** 0.5)\nprint(sum(2 for d in range(1, r + 1) if {n} % d == 0) - (r * r == {n}) == ans)",
    ),
}
_PRINT = ("# the answer\nprint(ans)", "print(ans)")

_NL: Mapping[str, str] = {
    "product": "Multiplying {a} by {b} digit by digit and adding the partial products gives {answer}.",
    "modpow": "Reducing {a} modulo {m} and squaring repeatedly over the bits of {b} leaves the remainder {answer}.",
    "digit_sum_power": "Expanding {a}^{e} in decimal and adding its digits gives {answer}.",
    "prime_count": "Going through the integers from {lo} to {hi} and keeping the primes, there are {answer} of them.",
    "prime_sum": "Listing the primes from {lo} to {hi} and adding them gives {answer}.",
    "gcd": "Running the Euclidean algorithm on {a} and {b}, the last nonzero remainder is {answer}.",
    "lcm": "The gcd of {a} and {b} divides their product; the product over the gcd is {answer}.",
    "divisor_count": "Factoring {n} into primes and multiplying one more than each exponent gives {answer}.",
}


MAX_FAILED_ATTEMPTS = 2
"""Most failing compute blocks before the one that runs: Recovery@2 injects two failures."""
TWICE_SHARE = 1 / 3
"""Share of the recovery scripts whose compute block fails twice before it runs."""
AGAIN_SHARE = 1 / 3
"""Share of the recovery scripts whose rewrite is the clean block, not the slip's fix: what a model must
do when the failure says nothing its code can fix."""


@dataclass(frozen=True)
class Slip:
    """A compute block with a real mistake, and the same block fixed (its first line names the fix).

    Both are `str.format` templates over the problem's numbers; `kind` is what the sandbox raises.
    """

    kind: str
    code: str
    fix: str


def _slips(*rows: tuple[str, str, str]) -> tuple[Slip, ...]:
    return tuple(Slip(kind, code, fix) for kind, code, fix in rows)


SLIPS: Mapping[str, tuple[Slip, ...]] = {
    "product": _slips(
        (
            "NameError",
            "# multiply\nx, y = {a}, {b}\nans = x * z\nprint(ans)",
            "# fix: the second factor is y\nx, y = {a}, {b}\nans = x * y\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# exact product\nans = {a} x {b}\nprint(ans)",
            "# fix: multiply with *\nans = {a} * {b}\nprint(ans)",
        ),
        (
            "TypeError",
            "# exact product\nimport math\nans = math.prod({a}, {b})\nprint(ans)",
            "# fix: math.prod takes one list\nimport math\nans = math.prod([{a}, {b}])\nprint(ans)",
        ),
        (
            "AttributeError",
            "# exact product\nimport math\nans = math.product([{a}, {b}])\nprint(ans)",
            "# fix: the function is math.prod\nimport math\nans = math.prod([{a}, {b}])\nprint(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# exact product\nimport maths\nans = maths.prod([{a}, {b}])\nprint(ans)",
            "# fix: the module is math\nimport math\nans = math.prod([{a}, {b}])\nprint(ans)",
        ),
        (
            "RecursionError",
            "# multiply by repeated addition\nmul = lambda x, y: 0 if y == 0 else x + mul(x, y - 1)\n"
            "ans = mul({a}, {b})\nprint(ans)",
            "# fix: too deep to recurse; multiply directly\nans = {a} * {b}\nprint(ans)",
        ),
    ),
    "modpow": _slips(
        (
            "NameError",
            "# power modulo m\nbase, e, m = {a}, {b}, {m}\nans = pow(base, exp, m)\nprint(ans)",
            "# fix: the exponent is e\nbase, e, m = {a}, {b}, {m}\nans = pow(base, e, m)\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# modular power\nans = pow({a}, {b}, {m}\nprint(ans)",
            "# fix: close the call\nans = pow({a}, {b}, {m})\nprint(ans)",
        ),
        (
            "TypeError",
            "# modular power\nimport math\nans = math.pow({a}, {b}, {m})\nprint(ans)",
            "# fix: math.pow takes no modulus, the built-in pow does\nans = pow({a}, {b}, {m})\nprint(ans)",
        ),
        (
            "AttributeError",
            "# modular power\nimport math\nans = math.powmod({a}, {b}, {m})\nprint(ans)",
            "# fix: the built-in pow takes the modulus\nans = pow({a}, {b}, {m})\nprint(ans)",
        ),
    ),
    "digit_sum_power": _slips(
        (
            "NameError",
            "# sum the digits\nn = {a} ** {e}\nans = sum(map(int, str(num)))\nprint(ans)",
            "# fix: the power is n\nn = {a} ** {e}\nans = sum(map(int, str(n)))\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# digit sum\nans = sum(int(c) for c in str({a} ** {e})\nprint(ans)",
            "# fix: close the sum\nans = sum(int(c) for c in str({a} ** {e}))\nprint(ans)",
        ),
        (
            "TypeError",
            "# digit sum\nans = sum(str({a} ** {e}))\nprint(ans)",
            "# fix: add the digits as ints\nans = sum(map(int, str({a} ** {e})))\nprint(ans)",
        ),
        (
            "AttributeError",
            "# sum the digits\nn = {a} ** {e}\nans = sum(n.digits())\nprint(ans)",
            "# fix: an int has no digits(), read them from str(n)\nn = {a} ** {e}\nans = sum(map(int, str(n)))\n"
            "print(ans)",
        ),
    ),
    "prime_count": _slips(
        (
            "NameError",
            "# count primes\nans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
            "# fix: import primerange from sympy\nfrom sympy import primerange\n"
            "ans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# count primes\nfrom sympy import primerange\nans = len(list(primerange({lo}, {hi} + 1))\nprint(ans)",
            "# fix: close the len call\nfrom sympy import primerange\n"
            "ans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
        ),
        (
            "TypeError",
            "# count primes\nfrom sympy import primerange\nans = len(primerange({lo}, {hi} + 1))\nprint(ans)",
            "# fix: primerange is a generator, list it first\nfrom sympy import primerange\n"
            "ans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
        ),
        (
            "AttributeError",
            "# prime counting function\nimport sympy\nans = sympy.prime_pi({hi}) - sympy.prime_pi({lo} - 1)\n"
            "print(ans)",
            "# fix: the function is sympy.primepi\nimport sympy\nans = sympy.primepi({hi}) - sympy.primepi({lo} - 1)\n"
            "print(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# count primes\nfrom Sympy import primerange\nans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
            "# fix: the module is sympy, lower case\nfrom sympy import primerange\n"
            "ans = len(list(primerange({lo}, {hi} + 1)))\nprint(ans)",
        ),
    ),
    "prime_sum": _slips(
        (
            "NameError",
            "# add the primes\nans = sum(k for k in range({lo}, {hi} + 1) if isprime(k))\nprint(ans)",
            "# fix: import isprime from sympy\nfrom sympy import isprime\n"
            "ans = sum(k for k in range({lo}, {hi} + 1) if isprime(k))\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# sum primes\nfrom sympy import primerange\nans = sum(primerange({lo}, {hi} + 1)\nprint(ans)",
            "# fix: close the sum\nfrom sympy import primerange\nans = sum(primerange({lo}, {hi} + 1))\nprint(ans)",
        ),
        (
            "TypeError",
            "# add the primes\nfrom sympy import isprime\nans = sum(filter(isprime, {lo}, {hi} + 1))\nprint(ans)",
            "# fix: filter takes a range\nfrom sympy import isprime\n"
            "ans = sum(filter(isprime, range({lo}, {hi} + 1)))\nprint(ans)",
        ),
        (
            "AttributeError",
            "# sum primes\nimport sympy\nans = sum(sympy.prime_range({lo}, {hi} + 1))\nprint(ans)",
            "# fix: the function is sympy.primerange\nimport sympy\nans = sum(sympy.primerange({lo}, {hi} + 1))\n"
            "print(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# sum primes\nfrom sympy.primes import primerange\nans = sum(primerange({lo}, {hi} + 1))\nprint(ans)",
            "# fix: primerange is in sympy itself\nfrom sympy import primerange\n"
            "ans = sum(primerange({lo}, {hi} + 1))\nprint(ans)",
        ),
    ),
    "gcd": _slips(
        (
            "NameError",
            "# gcd\nans = math.gcd({a}, {b})\nprint(ans)",
            "# fix: import math first\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# gcd\nimport math\nans = math.gcd({a} {b})\nprint(ans)",
            "# fix: a comma between the numbers\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "TypeError",
            "# gcd\nimport math\nans = math.gcd([{a}, {b}])\nprint(ans)",
            "# fix: pass the numbers, not a list\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "AttributeError",
            "# library gcd\nimport math\nans = math.gdc({a}, {b})\nprint(ans)",
            "# fix: the function is math.gcd\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# library gcd\nimport maths\nans = maths.gcd({a}, {b})\nprint(ans)",
            "# fix: the module is math\nimport math\nans = math.gcd({a}, {b})\nprint(ans)",
        ),
    ),
    # every lcm fix imports math: both lcm checks use it
    "lcm": _slips(
        (
            "NameError",
            "# lcm from the gcd\nans = {a} * {b} // gcd({a}, {b})\nprint(ans)",
            "# fix: gcd comes from math\nimport math\nans = {a} * {b} // math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "SyntaxError",
            "# lcm from the gcd\nimport math\nans = {a} * {b} // math.gcd({a}, {b}\nprint(ans)",
            "# fix: close the gcd call\nimport math\nans = {a} * {b} // math.gcd({a}, {b})\nprint(ans)",
        ),
        (
            "TypeError",
            "# library lcm\nimport math\nans = math.lcm([{a}, {b}])\nprint(ans)",
            "# fix: pass the numbers, not a list\nimport math\nans = math.lcm({a}, {b})\nprint(ans)",
        ),
        (
            "AttributeError",
            "# library lcm\nimport math\nans = math.lcd({a}, {b})\nprint(ans)",
            "# fix: the function is math.lcm\nimport math\nans = math.lcm({a}, {b})\nprint(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# library lcm\nimport maths\nans = maths.lcm({a}, {b})\nprint(ans)",
            "# fix: the module is math\nimport math\nans = math.lcm({a}, {b})\nprint(ans)",
        ),
    ),
    "divisor_count": _slips(
        (
            "NameError",
            "# count divisors\nans = divisor_count({n})\nprint(ans)",
            "# fix: import divisor_count from sympy\nfrom sympy import divisor_count\nans = divisor_count({n})\n"
            "print(ans)",
        ),
        (
            "SyntaxError",
            "# number of divisors\nfrom sympy import divisors\nans = len(divisors({n})\nprint(ans)",
            "# fix: close the len call\nfrom sympy import divisors\nans = len(divisors({n}))\nprint(ans)",
        ),
        (
            "TypeError",
            "# number of divisors\nfrom sympy import divisors\nans = len(divisors)\nprint(ans)",
            "# fix: call divisors on n\nfrom sympy import divisors\nans = len(divisors({n}))\nprint(ans)",
        ),
        (
            "AttributeError",
            "# count divisors\nimport sympy\nans = sympy.num_divisors({n})\nprint(ans)",
            "# fix: the function is sympy.divisor_count\nimport sympy\nans = sympy.divisor_count({n})\nprint(ans)",
        ),
        (
            "ModuleNotFoundError",
            "# count divisors\nfrom sympy.divisors import divisor_count\nans = divisor_count({n})\nprint(ans)",
            "# fix: divisor_count is in sympy itself\nfrom sympy import divisor_count\nans = divisor_count({n})\n"
            "print(ans)",
        ),
    ),
}
"""Per family, the slips a compute block may make; each raises the named error in the real sandbox."""


@dataclass(frozen=True)
class Recovery:
    """How one script fails before its compute block runs: the slips in order, and the rewrite."""

    slips: tuple[Slip, ...]
    again: bool
    """The rewrite is the clean block (no fix comment), not the last slip's fix."""


def recovery_plan(problem: NanoProblem, seed: int = 0, share: float = 0.0) -> Recovery | None:
    """Whether this problem's script fails first, and how: None for a clean script.

    Drawn per problem and seed, apart from the clean script's own draws (so a clean script is the same
    whatever the share) and by one uniform draw below `share` (so the problems chosen at 0.2 are among
    those chosen at 0.3).
    """
    if not 0 <= share <= 1:
        raise ValueError(f"recovery share {share}; use a value in [0, 1]")
    rng = random.Random(f"thinc-nano-recovery/{seed}/{problem.id}")
    if rng.random() >= share:
        return None
    failures = MAX_FAILED_ATTEMPTS if rng.random() < TWICE_SHARE else 1
    slips = tuple(rng.sample(SLIPS[problem.family], failures))
    return Recovery(slips, again=rng.random() < AGAIN_SHARE)


_BOUNDS: Mapping[tuple[bool, bool], str] = {
    (False, False): "Both ends count.",
    (True, True): "Both ends are excluded.",
    (False, True): "The lower end counts, the upper end does not.",
    (True, False): "The lower end is excluded, the upper end counts.",
}
"""The plan's last sentence for a range problem: the bounds as read from the wording. Last, not first:
as the first words of a plan, 2 of 8 families' plans opening alike, the student began other families'
plans with them too."""


def code_numbers(problem: NanoProblem) -> dict[str, str]:
    """The problem's numbers as the code writes them: plain digits of what the sentence states.

    The sentence may write `22{,}275`, `22,275` or `forty-two`; the code always writes `22275`, so the
    student learns to read a number into Python, not to copy its characters. A range's excluded end
    is written as the stated number with its step (`17117 + 1`, `19927 - 1`), so the code shows the
    bound it read and the compute blocks' `range({lo}, {hi} + 1)` counts exactly what was asked.
    """
    stated = dict(problem.meta.get("stated", problem.params))
    values = {k: str(v) for k, v in stated.items()}
    if problem.meta.get("lo_open"):
        values["lo"] += " + 1"
    if problem.meta.get("hi_open"):
        values["hi"] += " - 1"
    return values


def _block(code: str) -> str:
    return f"```python\n{code}\n```\n{OUTPUT_OPEN}"


def thinc_turns(problem: NanoProblem, seed: int = 0, *, recovery_share: float = 0.0) -> list[str]:
    """The model's turns of one ThinC trajectory: plan + block 1, block 2, block 3, the boxed answer.

    With a recovery share, the script `recovery_plan` draws for the problem first writes its failing
    compute blocks (the plan opens the first), then the compute block that runs.
    """
    rng = random.Random(f"thinc-nano-teacher/{seed}/{problem.id}")
    fam = problem.family
    values = code_numbers(problem)
    plan = rng.choice(_PLANS[fam])
    if "lo_open" in problem.meta:  # the bounds as read, last: next to the code that uses them
        plan = f"{plan} {_BOUNDS[problem.meta['lo_open'], problem.meta['hi_open']]}"
    blocks = [rng.choice(_COMPUTE[fam]), rng.choice(_CHECK[fam]), rng.choice(_PRINT)]
    recovery = recovery_plan(problem, seed, recovery_share)
    if recovery is not None:
        rewrite = blocks[0] if recovery.again else recovery.slips[-1].fix
        blocks = [*(slip.code for slip in recovery.slips), rewrite, *blocks[1:]]
    first = f"<think>\n{plan}\n</think>\n" + _block(blocks[0].format(**values))
    return [first, *(_block(b.format(**values)) for b in blocks[1:]), f"\\boxed{{{problem.answer}}}"]


def nl_turns(problem: NanoProblem) -> list[str]:
    """One natural-language-only turn: the same kind of plan, the result in words, the boxed answer."""
    reasoning = _NL[problem.family].format(**problem.params, answer=problem.answer)
    return [f"<think>\n{reasoning}\n</think>\n\\boxed{{{problem.answer}}}"]


def write_script(
    problems: Iterable[NanoProblem],
    path: Path,
    *,
    style: str = "thinc",
    seed: int = 0,
    recovery_share: float = 0.0,
) -> Path:
    """Write the scripted backend's turns file (`{"problem_id", "turns"}` per line) for these problems.

    `recovery_share` (thinc only) is the share of scripts that fail before they fix (`recovery_plan`).
    """
    if style not in ("thinc", "nl"):
        raise ValueError(f"nano teacher style {style!r}; use thinc or nl")
    if style == "nl" and recovery_share:
        raise ValueError("nano NL-only solutions run no code, so none can fail; use recovery_share 0")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for p in problems:
            turns = thinc_turns(p, seed, recovery_share=recovery_share) if style == "thinc" else nl_turns(p)
            handle.write(json.dumps({"problem_id": p.id, "turns": turns}) + "\n")
    return path
