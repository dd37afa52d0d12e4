"""The math-verify side of grading: the code that runs inside a killable worker process.

Owns the three checks that need math-verify (verify an answer against a gold, check that a gold
parses, compare a printed value with an answer) and the worker loop that serves them over a pipe,
streaming one result per item so that the parent can pin a hang on exactly one item. math-verify's
own SIGALRM timeouts are off; the parent kills the whole process instead (NOTES.md). Importing this
module imports math-verify, so the zygote (`_zygote`) that imports it forks warm workers.
It does not decide timeouts, retries or caching: that is `_pool` and `_judge`.
"""

import re
from functools import lru_cache
from multiprocessing.connection import Connection
from tokenize import TokenError
from typing import Any

import math_verify
import math_verify.grader
import math_verify.parser
import sympy
from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

from thinc_bench.grading._direct import direct_parse, direct_verdict
from thinc_bench.grading._messages import Result, Task

# The warning says "you must provide the timeout yourself": the pool does, by killing the process.
math_verify.grader.TIMEOUT_WARNING_SHOWN = True
math_verify.parser.TIMEOUT_WARNING_SHOWN = True

PARSE_CACHE_SIZE = 4_096
"""Parsed expressions kept per worker: a batch repeats each gold for many samples; ~4k sympy trees
stay well under 100 MB."""

FLOAT_ROUNDING = 6
"""math-verify's default decimal places for float comparison (1/3 == 0.333333); raised to the number of
places a gold writes, so gold .0000672 rejects .0000673 (math500 number_theory/598)."""

_DECIMALS = re.compile(r"\.(\d+)")
_PY_TOKEN = re.compile(r"\s+|\d+\.\d*|\.\d+|\d+|[A-Za-z_]\w*|\*\*|[-+*/^(),\[\]{}]")
# Names a sympy print may contain; anything else means "not a sympy print" (and is never eval'd).
_PY_NAMES = {
    name: getattr(sympy, name)
    for name in (
        *("sqrt", "pi", "E", "I", "oo", "zoo", "exp", "log", "sin", "cos", "tan", "asin", "acos"),
        *("atan", "Abs", "factorial", "binomial", "Rational", "Integer", "Float", "Symbol", "cbrt", "root"),
    )
}
_PY_GLOBALS: dict[str, Any] = {"__builtins__": {}, **_PY_NAMES}
# What only a SymPy / Python print writes (`-1 + sqrt(3)`, `2**(1/4)`, `pi/4`): LaTeX has no `**`, writes
# `\sqrt{..}` and `\pi`, so such text without a backslash or a brace is read as the print it is, as other
# harnesses' scorers read plain expressions; everything else stays LaTeX.
_PY_FORM = re.compile(
    r"\*\*|\b(?:sqrt|cbrt|root|exp|log|sin|cos|tan|asin|acos|atan|Abs|factorial|binomial|Rational)\s*\(|\b(?:pi|oo)\b"
)
_TRANSFORMS = (*standard_transformations, convert_xor)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _direct(answer: str) -> tuple[Any, str] | None:
    return direct_parse(answer)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_latex(answer: str, direct: bool = True) -> tuple[Any, ...]:
    # The common forms are read directly into the very tree math-verify would build (`_direct`).
    parsed = _direct(answer) if direct else None
    if parsed is not None:
        return parsed
    # `$\boxed{..}$` is math-verify's strongest anchor and applies its answer normalisation
    # (units, \text, degrees); bare LaTeX would parse to nothing (NOTES.md).
    return tuple(math_verify.parse("$\\boxed{" + answer + "}$", parsing_timeout=None))


def _has_math(parsed: tuple[Any, ...]) -> bool:
    return any(not isinstance(p, str) for p in parsed)


def _python_form(text: str) -> Any:
    """The SymPy expression of a plain-text SymPy / Python form, or None when `text` is not one."""
    if "\\" in text or "{" in text or not _PY_FORM.search(text):
        return None
    expr = _parse_printed(text, direct=False, latex=False)
    return expr if isinstance(expr, sympy.Basic) else None


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_math(text: str, direct: bool = True) -> tuple[Any, ...]:
    """A gold or an answer as math-verify's parse would give it: a plain-text SymPy form read as one
    (`2**(1/4)`, `-1 + sqrt(3)`), anything else as LaTeX (`_parse_latex`)."""
    expr = _python_form(text)
    if expr is not None:
        return (expr, text)
    return _parse_latex(text, direct)


def _parse_printed(value: str, direct: bool = True, latex: bool = True) -> Any:
    """Parse a sympy/Python print (`sqrt(2)/2`, `3*pi/4`, `(1, 2)`) or fall back to LaTeX (unless not `latex`)."""
    tokens = _PY_TOKEN.findall(value)
    words_ok = all(not (t[0].isalpha() or t[0] == "_") or t in _PY_NAMES or len(t) == 1 for t in tokens)
    if "".join(tokens) == value and words_ok:
        # Only whitelisted names, numbers and operators reach eval: no attributes, strings or calls
        # to anything but sympy constructors.
        try:
            expr = parse_expr(value, global_dict=_PY_GLOBALS, transformations=_TRANSFORMS)
        except (
            SyntaxError,
            TypeError,
            ValueError,
            NameError,
            ZeroDivisionError,
            sympy.SympifyError,
            TokenError,
        ):
            expr = None
        if isinstance(expr, (list, tuple)):
            return sympy.Tuple(*expr)
        if isinstance(expr, (set, frozenset)):
            return sympy.FiniteSet(*expr)
        if isinstance(expr, sympy.Basic):
            return expr
    if not latex:
        return None
    parsed = _parse_latex(value, direct)
    return list(parsed) if _has_math(parsed) else None


def run_task(task: Task, *, direct: bool = True) -> Result:
    """Run one check in this process; math-verify errors become outcomes, not exceptions.

    `direct=False` parses everything with math-verify (tests compare the two: no verdict may change).
    """
    if task.kind == "check_gold":
        gold = _parse_math(task.a, direct)
        ok = _has_math(gold) and math_verify.verify(list(gold), list(gold), timeout_seconds=None)
        return Result("correct" if ok else "gold_error")
    gold = _parse_math(task.a, direct)
    if not _has_math(gold):
        return Result("gold_error")
    if task.kind == "ground":
        target = _parse_printed(task.b, direct)
        if target is None:
            return Result("unparseable_answer")
    else:
        parsed = _parse_math(task.b, direct)
        if not _has_math(parsed):
            # Only math-verify's raw-string fallback is left: an exact string match still counts.
            same = bool(parsed) and math_verify.verify(list(gold), list(parsed), timeout_seconds=None)
            return Result("correct" if same else "unparseable_answer")
        target = list(parsed)
    places = max((len(m.group(1)) for m in _DECIMALS.finditer(task.a)), default=0)
    rounding = max(FLOAT_ROUNDING, places)
    if direct and task.kind == "verify":
        gold_d, target_d = _direct(task.a), _direct(task.b)
        if gold_d is not None and target_d is not None:  # verify's verdict without its simplify
            return Result("correct" if direct_verdict(gold_d, target_d, rounding) else "incorrect")
    ok = math_verify.verify(list(gold), target, float_rounding=rounding, timeout_seconds=None)
    return Result("correct" if ok else "incorrect")


def serve(conn: Connection) -> None:
    """Worker main loop: receive batches of (id, Task), send back (id, Result) one by one.

    A `None` message or a closed pipe ends the loop. An exception escaping a check is recorded as
    grader_error with its type and message: this is the worker boundary.
    """
    conn.send("ready")
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        for item_id, task in batch:
            try:
                result = run_task(task)
            except Exception as exc:  # worker boundary: record, never crash the loop
                result = Result("grader_error", f"{type(exc).__name__}: {exc}")
            conn.send((item_id, result))
