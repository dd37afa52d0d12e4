"""Training's injected failures and eval's are drawn from disjoint exception kinds, so no text Recovery@k
shows a model can have been paid to recover from in training."""

from __future__ import annotations

import ast
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.sandbox.faults import render_fault
from thinc_bench.train.faults import (
    EVAL_FAULT_KINDS,
    TRAINING_FALLBACK,
    TRAINING_FAULT_KINDS,
    fault_kind,
    render_training_fault,
)

TRAINING = {*TRAINING_FAULT_KINDS, TRAINING_FALLBACK}

# Blocks as ThinC students write them (from the nano teacher, the SFT fixtures and AIME-style code).
BLOCKS = [
    "from math import comb\nprint(comb(10, 3))",
    "import sympy as sp\nx = sp.symbols('x')\nprint(sp.solve(x**2 - 4, x))",
    "primes = [p for p in range(2, 50) if all(p % d for d in range(2, p))]\nprint(len(primes), sum(primes))",
    "n = 2024\ntotal = 0\nfor k in range(1, n + 1):\n    total += k * k\nprint(total % 1000)",
    "from fractions import Fraction\nx = Fraction(1, 2) + Fraction(1, 3)\nprint(x)",
    "vals = []\nvals.append(3)\nprint(vals[0] / 2)",
    "it = iter(range(5))\nfirst = next(it)\nprint(first)",
    "assert 7 % 2 == 1, 'odd'\nprint('ok')",
    "import math\nprint(math.exp(700))",
    "print(2 + 3)",
    "pass",
    "x = 3\n# just a comment",
    "def f(n):\n    return n * f(n - 1) if n else 1\nprint(f(5))",
    "print(float(10**400))",
    "d = {'a': 1}\nprint(d['a'])",
    "s = 'abc'\nprint(s.upper())",
    "print(1 +",  # does not parse
]


def test_the_kinds_are_disjoint() -> None:
    assert not TRAINING & EVAL_FAULT_KINDS
    assert len(EVAL_FAULT_KINDS) == 7  # the sandbox's six, and MemoryError where nothing else applies


def test_no_block_ever_draws_an_eval_kind_in_training_or_a_training_kind_in_eval() -> None:
    seen: set[str] = set()
    for code in BLOCKS:
        for seed in range(40):
            train = render_training_fault(code, 1 + seed % 3, random.Random(seed))
            evaluation = render_fault(code, 1 + seed % 3, random.Random(seed))
            if fault_kind(train) == "SyntaxError":  # what a real run prints; not a drawn fault
                assert train == evaluation
                continue
            seen.add(fault_kind(train))
            assert fault_kind(train) in TRAINING, (code, train)
            assert fault_kind(evaluation) in EVAL_FAULT_KINDS, (code, evaluation)
            assert train != evaluation
    assert seen == TRAINING  # every training kind is reachable from ordinary code


def test_a_training_fault_reads_as_a_real_traceback_of_its_cell_and_line() -> None:
    code = "vals = [1, 2]\nvals.append(3)\nprint(vals)"
    text = render_training_fault(code, 4, random.Random(0))
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == '  File "<cell-4>", line 2, in <module>'
    assert lines[2] == "    vals.append(3)"
    assert lines[-1] == "AttributeError: 'NoneType' object has no attribute 'append'" or lines[-1].startswith(
        "AttributeError: '"
    )
    # An imported module's attribute, a literal's or a name from an earlier cell is never "missing".
    for safe in ("import math\nprint(math.sqrt(2))", "print('abc'.upper())", "print(x.real)"):
        for seed in range(20):
            assert fault_kind(render_training_fault(safe, 1, random.Random(seed))) != "AttributeError"
    # An assert fails with its own message; code with nothing a training kind fits gets the fallback.
    assert render_training_fault("assert 1 == 2, 'nope'", 1, random.Random(0)).endswith(
        "AssertionError: nope\n"
    )
    assert fault_kind(render_training_fault("print(2 + 3)", 1, random.Random(0))) == TRAINING_FALLBACK


_names = st.sampled_from(["a", "b", "n", "vals", "res"])
_exprs = st.one_of(
    st.integers(0, 999).map(str),
    _names,
    st.tuples(_names, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), st.integers(1, 9)).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}"
    ),
    st.tuples(_names, st.sampled_from(["append(1)", "count(2)", "real", "index(0)"])).map(
        lambda t: f"{t[0]}.{t[1]}"
    ),
    st.tuples(st.sampled_from(["len", "sum", "sorted", "next", "float", "int", "abs"]), _names).map(
        lambda t: f"{t[0]}({t[1]})"
    ),
    st.tuples(_names, st.integers(0, 3)).map(lambda t: f"{t[0]}[{t[1]}]"),
    st.just("math.exp(a)"),
)
_statements = st.one_of(
    st.tuples(_names, _exprs).map(lambda t: f"{t[0]} = {t[1]}"),
    _exprs.map(lambda e: f"print({e})"),
    _exprs.map(lambda e: f"assert {e}"),
    st.just("import math"),
    st.just("for i in range(3):\n    a = i"),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_statements, min_size=1, max_size=6), st.integers(1, 5), st.integers(0, 2**32))
def test_any_block_gets_a_training_kind_in_training_and_an_eval_kind_in_eval(statements, cell, seed) -> None:
    code = "\n".join(statements)
    ast.parse(code)
    train = render_training_fault(code, cell, random.Random(seed))
    evaluation = render_fault(code, cell, random.Random(seed))
    assert fault_kind(train) in TRAINING and fault_kind(evaluation) in EVAL_FAULT_KINDS
    assert f'File "<cell-{cell}>", line ' in train
    shown = train.splitlines()[2].strip()
    assert shown in [line.strip() for line in code.splitlines()]  # one of the block's own lines
