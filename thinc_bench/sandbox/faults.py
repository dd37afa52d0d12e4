"""Injected execution failures (Recovery@k) rendered as a real traceback of that cell would read.

Contract: `render_fault(code, cell, rng)` returns the text CPython's traceback module prints when one
line of `code`, run as notebook cell `cell`, raises: its own `<cell-N>` file name, the line and its
carets (formatted by the same `traceback` code the session's loop uses), and an exception type drawn
with `rng` from FAULT_TYPES among those that line could raise, with a message CPython would give
there (ZeroDivisionError at a division, KeyError at a string subscript, NameError at a name...). A
fixed text (`<cell-1>`, no source line, one exception type) told a model which failures were
injected; the record (`ExecResult.injected`) says so instead, never the text. Code that does not
parse gets the SyntaxError a real run prints. Only module-level lines are chosen (not function,
class or comprehension bodies, whose failures show two frames), and none after the first print
when there is a choice (a real failure there would show that print's output first). Pure: runs nothing, reads only
its arguments; eval's sessions and GRPO's rollouts both get their faults from here.
"""

from __future__ import annotations

import ast
import builtins
import random
import traceback
from dataclasses import dataclass
from typing import Any

FAULT_TYPES = ("ZeroDivisionError", "NameError", "TypeError", "IndexError", "KeyError", "ValueError")
# Functions whose failure is a ValueError with a fixed message (math domain, bad literal).
MATH_DOMAIN = frozenset({"sqrt", "log", "log2", "log10", "acos", "asin", "acosh", "atanh"})
OPERATOR_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Pow: "** or pow()", ast.MatMult: "@",
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
}  # fmt: skip
TYPE_PAIRS = (("int", "str"), ("NoneType", "int"), ("int", "NoneType"), ("list", "int"), ("str", "int"))
# Scopes whose lines run in a frame of their own (a second traceback entry): never chosen.
OWN_FRAME = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
             ast.SetComp, ast.DictComp, ast.GeneratorExp)  # fmt: skip


@dataclass(frozen=True)
class _Site:
    """One place a line could raise: the node's span and an exception CPython raises there."""

    node: ast.expr
    kind: str
    error: BaseException


def top_level_nodes(tree: ast.Module) -> list[ast.expr]:
    """Expressions that run in the cell's own frame, on one line each."""
    out: list[ast.expr] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, OWN_FRAME):
            continue
        if isinstance(node, ast.expr) and node.end_lineno == node.lineno:
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(out, key=lambda n: (n.lineno, n.col_offset, n.end_col_offset or 0))


def literal(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def bound_names(tree: ast.Module) -> set[str]:
    """Names the cell itself binds (assigned, imported, defined, loop targets): a NameError on one
    of them would read false."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _sites(node: ast.expr, rng: random.Random, bound: set[str]) -> list[_Site]:
    """What `node` could raise when it runs, each with CPython's message for that case."""
    sites: list[_Site] = []
    if isinstance(node, ast.BinOp):
        floats = any(isinstance(literal(side), float) for side in (node.left, node.right))
        if isinstance(node.op, ast.Div):
            msg = "float division by zero" if floats else "division by zero"
            sites.append(_Site(node, "ZeroDivisionError", ZeroDivisionError(msg)))
        elif isinstance(node.op, ast.FloorDiv):
            msg = "float floor division by zero" if floats else "integer division or modulo by zero"
            sites.append(_Site(node, "ZeroDivisionError", ZeroDivisionError(msg)))
        elif isinstance(node.op, ast.Mod):
            msg = "float modulo" if floats else "integer modulo by zero"
            sites.append(_Site(node, "ZeroDivisionError", ZeroDivisionError(msg)))
        elif (symbol := OPERATOR_SYMBOLS.get(type(node.op))) is not None:
            left, right = rng.choice(TYPE_PAIRS)
            known = [type(literal(side)).__name__ for side in (node.left, node.right)]
            literal_types = ("int", "float", "str")
            if known[0] in literal_types and known[1] in literal_types:
                left, right = known[0], known[1] if known[1] != known[0] else "NoneType"
            elif known[0] in literal_types:  # a literal operand keeps its own type
                left, right = known[0], rng.choice(("NoneType", "str" if known[0] != "str" else "int"))
            elif known[1] in literal_types:
                left, right = rng.choice(("NoneType", "str" if known[1] != "str" else "int")), known[1]
            if symbol == "+" and left in ("str", "list") and right != left:
                msg = f'can only concatenate {left} (not "{right}") to {left}'
            else:
                msg = f"unsupported operand type(s) for {symbol}: '{left}' and '{right}'"
            sites.append(_Site(node, "TypeError", TypeError(msg)))
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        key = literal(node.slice)
        if isinstance(key, str):
            sites.append(_Site(node, "KeyError", KeyError(key)))
        elif isinstance(node.slice, ast.Slice):
            sites.append(_Site(node, "TypeError", TypeError("'NoneType' object is not subscriptable")))
        else:
            kind = rng.choice(("list", "list", "tuple", "string"))
            sites.append(_Site(node, "IndexError", IndexError(f"{kind} index out of range")))
            if isinstance(node.slice, ast.Name):
                sites.append(_Site(node, "KeyError", KeyError(rng.randrange(2, 100))))
            sites.append(_Site(node, "TypeError", TypeError("'NoneType' object is not subscriptable")))
    elif isinstance(node, ast.Call):
        sites += _call_sites(node, rng)
    elif (
        isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Load)
        and node.id not in bound
        and not hasattr(builtins, node.id)
    ):
        sites.append(_Site(node, "NameError", NameError(f"name '{node.id}' is not defined")))
    return sites


def _call_sites(node: ast.Call, rng: random.Random) -> list[_Site]:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    arg = literal(node.args[0]) if node.args else None
    shown = arg if isinstance(arg, str) else rng.choice(("", "x", "1.5", "n"))
    if name == "int":
        return [_Site(node, "ValueError", ValueError(f"invalid literal for int() with base 10: {shown!r}"))]
    if name == "float":
        return [_Site(node, "ValueError", ValueError(f"could not convert string to float: {shown!r}"))]
    if name in MATH_DOMAIN and isinstance(func, ast.Attribute):
        return [_Site(node, "ValueError", ValueError("math domain error"))]
    if name == "len":
        kind = rng.choice(("int", "NoneType", "float"))
        return [_Site(node, "TypeError", TypeError(f"object of type '{kind}' has no len()"))]
    if isinstance(func, ast.Name) and not hasattr(builtins, name):
        given = len(node.args)
        if given:
            takes = given - 1
            plural = "" if takes == 1 else "s"
            were = "was" if given == 1 else "were"
            msg = f"{name}() takes {takes} positional argument{plural} but {given} {were} given"
        else:
            msg = f"{name}() missing 1 required positional argument: 'n'"
        return [_Site(node, "TypeError", TypeError(msg))]
    return []


def syntax_error(code: str, filename: str) -> str | None:
    """What a real run prints for code that does not parse (None when it parses)."""
    try:
        compile(code, filename, "exec", flags=ast.PyCF_ONLY_AST)
    except SyntaxError as exc:
        return "".join(traceback.format_exception_only(type(exc), exc))
    except ValueError as exc:  # null bytes: the loop reports it the same way
        return "".join(traceback.format_exception_only(type(exc), exc))
    return None


def render_fault(code: str, cell: int, rng: random.Random) -> str:
    """The traceback a failure of one line of `code`, run as cell number `cell`, would print.

    Args:
        code: the block the model wrote (not executed).
        cell: the cell number a real run of it would get (`<cell-N>`).
        rng: draws the exception type (uniformly among FAULT_TYPES the code allows), the line and
            details of the message; seed it for a reproducible choice.
    """
    filename = f"<cell-{cell}>"
    if (syntax := syntax_error(code, filename)) is not None:
        return syntax
    lines = code.splitlines()
    tree = ast.parse(code)
    bound = bound_names(tree)
    nodes = top_level_nodes(tree)
    # A real failure after a print would show that print's output first; the block was not run,
    # so the failure is placed where nothing has been printed yet (when the code allows).
    prints = [
        n.lineno
        for n in nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
    ]
    first_print = min(prints, default=len(lines))
    sites = [site for node in nodes for site in _sites(node, rng, bound)]
    sites = [site for site in sites if site.node.lineno <= first_print] or sites
    by_kind: dict[str, list[_Site]] = {}
    for site in sites:
        by_kind.setdefault(site.kind, []).append(site)
    if not by_kind:  # nothing on any line could raise one of these (pass, comments, a def)
        return cell_traceback(filename, lines, MemoryError())
    site = rng.choice(by_kind[rng.choice(sorted(by_kind))])
    return cell_traceback(filename, lines, site.error, site.node)


def cell_traceback(
    filename: str, lines: list[str], error: BaseException, node: Any = None, lineno: int | None = None
) -> str:
    """What a real run prints for `error` raised in a cell: one `<module>` frame of `filename`, the
    line, and CPython's carets under `node`'s span (an AST node of the line that raised); without a
    node, at `lineno`, else at the first line that is not blank. Eval's faults and training's
    (`train.faults`) are formatted by this one function, so neither can be told by its layout."""
    if node is not None:
        frame = traceback.FrameSummary(
            filename,
            node.lineno,
            "<module>",
            lookup_line=False,
            line=lines[node.lineno - 1],
            end_lineno=node.end_lineno,
            colno=node.col_offset,
            end_colno=node.end_col_offset,
        )
    else:
        if lineno is None:
            lineno = next((i for i, text in enumerate(lines, 1) if text.strip()), 1)
        line = lines[lineno - 1] if lines else ""
        frame = traceback.FrameSummary(filename, lineno, "<module>", lookup_line=False, line=line)
    stack = traceback.StackSummary.from_list([frame])
    text = "Traceback (most recent call last):\n" + "".join(stack.format())
    return text + "".join(traceback.format_exception_only(type(error), error))
