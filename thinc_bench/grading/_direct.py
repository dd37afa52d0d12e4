"""A direct sympy reading of the answer forms most golds and answers take, so they skip ANTLR.

86% of a math-verify check was latex2sympy's pure-Python ANTLR parse (gold 4.4 ms, answer 2.1 ms,
verify 1.1 ms). For integers, decimals, `\\frac{a}{b}`, `\\sqrt{n}`, `a\\sqrt{b}`, `\\pi`, `a\\pi`,
`\\frac{\\sqrt{n}}{b}`, `\\frac{a\\pi}{b}` and their negatives, `direct_parse` builds *the same* value
`math_verify.parse("$\\boxed{...}$")` returns: the same sympy tree node for node (latex2sympy leaves
`\\sqrt{8}` and `\\frac{\\pi}{2}` unevaluated, `-2\\sqrt{3}` is `Mul(-1, 2, sqrt(3))` unevaluated, and
`\\frac{4}{2}` is `Integer(2)`) and the same extracted string (math-verify's own `normalize_latex`,
which turns `0.5` into `\\frac{1}{2}` and `\\dfrac` into `\\frac`). `verify` then runs unchanged on
identical inputs, so no verdict can change; tests/grading/test_direct.py checks the trees against
math-verify on every benchmark gold, the agreement cases and hostile near-misses. Anything else
(`+`, a second sign, mixed numbers, zero denominators) returns None and goes to
math-verify. It does not verify anything: that stays math-verify's (`_worker`).
"""

import re
from dataclasses import replace
from typing import Any

import sympy
from latex2sympy2_extended.latex2sympy2 import normalize_latex
from math_verify.grader import sympy_numeric_eq, sympy_str_eq
from math_verify.parser import LatexExtractionConfig

# What math-verify applies to the content of a `\boxed{}` it extracts (its boxed pattern's config).
_NORMALIZATION = replace(LatexExtractionConfig().normalization_config, boxed="last")

# Cheap gate on the raw text before normalize_latex (~0.1 ms): only the alphabet of the grammar plus
# what normalisation rewrites into it (`\dfrac`, `\sqrt 2`, `.5`).
_CANDIDATE = re.compile(r"[-0-9.\\{}a-z ]{1,200}")
# Spaces where latex2sympy ignores them (after the sign, around a factor, inside braces), never
# inside a number.
_NUMBER = re.compile(r"(?:(-) *)?(?:(\d+)|(\d+\.\d+)|\\frac\{ *(\d+) *\}\{ *(\d+) *\})")
_TERM = r"(?:(\d+) *)?(?:\\sqrt\{ *(\d+) *\}|(\\pi))"
_SYMBOLIC = re.compile(rf"(?:(-) *)?(?:{_TERM}|\\frac\{{ *{_TERM} *\}}\{{ *(\d+) *\}})")

NUMERIC_PRECISION = 15
"""math-verify's default `numeric_precision` (digits of the evalf in its numeric comparison)."""

_HALF = sympy.Rational(1, 2)
_MINUS_ONE = sympy.Integer(-1)


def _term(coef: str | None, radicand: str | None) -> Any:
    """`\\sqrt{r}` (unevaluated, as latex2sympy leaves it) or `\\pi`, times an optional coefficient."""
    core = (
        sympy.Pow(sympy.Integer(int(radicand)), _HALF, evaluate=False) if radicand is not None else sympy.pi
    )
    if coef is None:
        return core
    return sympy.Mul(sympy.Integer(int(coef)), core, evaluate=False)


def _number(s: str) -> Any:
    m = _NUMBER.fullmatch(s)
    if m is None:
        return None
    neg, integer, decimal, num, den = m.groups()
    if integer is not None:
        value = sympy.Integer(int(integer))
    elif decimal is not None:
        value = sympy.Number(decimal)
    else:
        if int(den) == 0:  # zoo / nan: leave the odd cases to math-verify
            return None
        value = sympy.Rational(int(num), int(den))
    return -value if neg else value


def _symbolic(s: str) -> Any:
    m = _SYMBOLIC.fullmatch(s)
    if m is None:
        return None
    neg, coef, radicand, pi, fcoef, fradicand, fpi, den = m.groups()
    if radicand is not None or pi is not None:
        value = _term(coef, radicand)
    else:
        divisor = sympy.Pow(sympy.Integer(int(den)), _MINUS_ONE, evaluate=False)
        value = sympy.Mul(divisor, _term(fcoef, fradicand), evaluate=False)
    if not neg:
        return value
    # latex2sympy's unary minus: -1 joins the top product's factors, unevaluated.
    factors = value.args if isinstance(value, sympy.Mul) else (value,)
    return sympy.Mul(_MINUS_ONE, *factors, evaluate=False)


def direct_parse(answer: str) -> tuple[Any, str] | None:
    """What `math_verify.parse("$\\\\boxed{" + answer + "}$")` returns, for the forms above; else None.

    Args:
        answer: a normalised gold or answer (`_text.normalize_answer`), without `\\boxed`.

    Returns:
        (sympy value, math-verify's extracted string), or None when math-verify must parse it.
    """
    if _CANDIDATE.fullmatch(answer) is None:
        return None
    s = normalize_latex(answer, config=_NORMALIZATION)
    value = _number(s)
    if value is None:
        value = _symbolic(s)
    if value is None:
        return None
    return value, s


def direct_verdict(gold: tuple[Any, str], target: tuple[Any, str], float_rounding: int) -> bool:
    """`math_verify.verify(list(gold), list(target), float_rounding=...)` for two `direct_parse` values.

    verify compares every (gold, target) pair: the two strings (equal and non-empty), and the two
    values by its `sympy_expr_eq`, which for these numbers is its structural and numeric
    comparisons (called here as they are) and then `simplify(gold - target).is_zero`. That last
    step is what makes a wrong answer slow (0.1-0.5 s for `\\frac{8\\sqrt{23}}{23}` against
    `\\frac{9\\sqrt{23}}{23}`), and it can only say "equal" when the two values are exactly equal:
    rationals, floats and rational multiples of square roots of integers and of pi are compared
    exactly by evaluating both trees and subtracting (sympy takes square factors out of roots).
    As in verify, an exception in a comparison means "not equal".
    """
    (g, gs), (t, ts) = gold, target
    gs, ts = gs.strip(), ts.strip()
    if gs and gs == ts:
        return True
    try:
        if sympy_str_eq(g, t) or sympy_numeric_eq(g, t, float_rounding, NUMERIC_PRECISION):
            return True
    except Exception:  # noqa: BLE001 - verify's own rule: a failing comparison is "not equal"
        return False
    try:
        return bool((g.doit() - t.doit()).is_zero)
    except Exception:  # noqa: BLE001 - as sympy_symbolic_eq: a failing simplification is "not equal"
        return False
