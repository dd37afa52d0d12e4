"""Training's injected failures: exception kinds evaluation never injects, so Recovery@k stays out of distribution.

Eval's Recovery@k fails a block with a traceback drawn by the sandbox (`sandbox.faults.render_fault`)
from `EVAL_FAULT_KINDS`: ZeroDivisionError, NameError, TypeError, IndexError, KeyError, ValueError,
and MemoryError where no line could raise one of them. A model trained on those same kinds would
meet in Recovery@k exactly the failures it was paid to recover from, so the measure would be
in-distribution by construction. Training's faults are drawn from `TRAINING_FAULT_KINDS` instead,
a disjoint set of exceptions the same kind of code really raises:

- AttributeError at an attribute read of a value the cell did not import (`r.append` on a None,
  `x.real` on an int); never on an imported module (`math.sqrt` is not missing);
- OverflowError at a true division (`integer division result too large for a float`), a float
  power, `math.exp` / `float()` of a huge value, or a sized call (`len`, `list`, `tuple`,
  `sorted`, `set`: `Python int too large to convert to C ssize_t`);
- StopIteration at a `next(...)` call; AssertionError at an `assert` statement (its message when
  it has a literal one);
- RecursionError (`maximum recursion depth exceeded`) where no line could raise any of these.

The traceback is formatted exactly as eval's (the sandbox's own helpers: one `<cell-N>` frame, the
line, CPython's carets), with the same rules for which lines may fail (module level, before the
first print where the code allows). A block that does not parse gets the SyntaxError a real run
prints, in eval and training alike: that text is the code's own, not a drawn fault.

`with_training_faults(session)` wraps a sandbox session whose failures the sandbox injects (it
still decides which runs fail and numbers the cells, so the next real traceback names the right
cell): each injected result's text is replaced by one drawn here, from training's seed stream.
docs/training.md ("Recovery training") records the split.
"""

from __future__ import annotations

import ast
import dataclasses
import random
from typing import Any

from thinc_bench.sandbox.faults import (
    FAULT_TYPES,
    bound_names,
    cell_traceback,
    literal,
    syntax_error,
    top_level_nodes,
)

EVAL_FAULT_KINDS = frozenset({*FAULT_TYPES, "MemoryError"})
"""The exception kinds eval's Recovery@k injects (the sandbox's renderer, MemoryError its fallback)."""
TRAINING_FAULT_KINDS = ("AttributeError", "OverflowError", "StopIteration", "AssertionError")
"""The kinds GRPO's injected failures are drawn from (uniformly among those the code allows)."""
TRAINING_FALLBACK = "RecursionError"
"""The kind of a training fault in code where no line could raise one of TRAINING_FAULT_KINDS."""
TRAINING_FAULT_SEED = "grpo-train"
"""Salt of training's draws (with the cell number and the code)."""

SIZED_CALLS = frozenset({"len", "list", "tuple", "sorted", "set"})
"""Builtins that convert their argument's size to a C index: OverflowError on a huge one."""
RANGE_CALLS = frozenset({"exp", "expm1", "cosh", "sinh", "pow", "ldexp"})
"""math functions whose result overflows a float: `math range error`."""
OBJECT_TYPES = ("NoneType", "int", "float", "list", "tuple")


@dataclasses.dataclass(frozen=True)
class _Site:
    """One place a line could raise: the node to underline and what it raises."""

    node: ast.AST
    kind: str
    error: BaseException


def _imported(tree: ast.Module) -> set[str]:
    """Names bound by imports: an attribute of a module is never reported missing."""
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def _root(node: ast.expr) -> ast.expr:
    """The expression an attribute, call or subscript chain starts from (`r` of `r.x[0].y()`)."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _sites(node: ast.AST, rng: random.Random, values: set[str]) -> list[_Site]:
    """What `node` (an expression on one line, or an assert statement) could raise in training;
    `values` are the names the cell binds to values (not imports): only their attributes can be
    missing (a module's, a literal's or an earlier cell's name's cannot, as far as the text shows)."""
    if isinstance(node, ast.Assert):
        message = literal(node.msg) if node.msg is not None else None
        error = AssertionError(message) if isinstance(message, str) else AssertionError()
        return [_Site(node, "AssertionError", error)]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        root = _root(node.value)
        if not isinstance(root, ast.Name) or root.id not in values:
            return []
        kind = rng.choice(OBJECT_TYPES)
        return [
            _Site(node, "AttributeError", AttributeError(f"'{kind}' object has no attribute '{node.attr}'"))
        ]
    if isinstance(node, ast.BinOp):
        floats = any(isinstance(literal(side), float) for side in (node.left, node.right))
        if isinstance(node.op, ast.Div):
            return [
                _Site(node, "OverflowError", OverflowError("integer division result too large for a float"))
            ]
        if isinstance(node.op, ast.Pow) and floats:
            return [_Site(node, "OverflowError", OverflowError(34, "Numerical result out of range"))]
        return []
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "next" and isinstance(func, ast.Name):
            return [_Site(node, "StopIteration", StopIteration())]
        if name in RANGE_CALLS and isinstance(func, ast.Attribute):
            return [_Site(node, "OverflowError", OverflowError("math range error"))]
        if name == "float" and isinstance(func, ast.Name) and node.args:
            return [_Site(node, "OverflowError", OverflowError("int too large to convert to float"))]
        if name in SIZED_CALLS and isinstance(func, ast.Name) and node.args:
            return [
                _Site(node, "OverflowError", OverflowError("Python int too large to convert to C ssize_t"))
            ]
    return []


def _asserts(tree: ast.Module) -> list[ast.Assert]:
    """Module-level assert statements on one line (a failing assert shows its own line)."""
    return [n for n in tree.body if isinstance(n, ast.Assert) and n.end_lineno == n.lineno]


def render_training_fault(code: str, cell: int, rng: random.Random) -> str:
    """The traceback a failure of one line of `code`, run as cell `cell`, would print, of a training kind.

    Args:
        code: the block the model wrote (not executed).
        cell: its cell number (`<cell-N>`).
        rng: draws the kind (uniformly among TRAINING_FAULT_KINDS the code allows), the line and
            details of the message; seeded by `with_training_faults` per (cell, code).
    """
    filename = f"<cell-{cell}>"
    if (syntax := syntax_error(code, filename)) is not None:
        return syntax
    lines = code.splitlines()
    tree = ast.parse(code)
    values = bound_names(tree) - _imported(tree)
    nodes: list[ast.AST] = [*top_level_nodes(tree), *_asserts(tree)]
    prints = [
        n.lineno
        for n in nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
    ]
    first_print = min(prints, default=len(lines))
    sites = [site for node in nodes for site in _sites(node, rng, values)]
    sites = [s for s in sites if getattr(s.node, "lineno", 0) <= first_print] or sites
    by_kind: dict[str, list[_Site]] = {}
    for site in sorted(sites, key=lambda s: (s.node.lineno, s.node.col_offset)):  # type: ignore[attr-defined]
        by_kind.setdefault(site.kind, []).append(site)
    if by_kind:
        site = rng.choice(by_kind[rng.choice(sorted(by_kind))])
        return cell_traceback(filename, lines, site.error, site.node)
    # nothing raises a training kind: the first line that calls something, else cell_traceback's
    # first line that is not blank
    calls = [n.lineno for n in nodes if isinstance(n, ast.Call)]
    error = RecursionError("maximum recursion depth exceeded")
    return cell_traceback(filename, lines, error, lineno=min(calls, default=None))


def fault_kind(text: str) -> str:
    """The exception kind a traceback text ends with (`ZeroDivisionError: ...` -> `ZeroDivisionError`)."""
    last = text.rstrip().rsplit("\n", 1)[-1]
    return last.split(":", 1)[0].strip()


class TrainingFaultSession:
    """A sandbox session whose injected failures read as training's kinds (everything else passes through).

    The sandbox injects (the first k runs fail unrun, numbered as cells 1..k in its persistent
    interpreter); this wrapper only redraws each injected result's text with
    `render_training_fault`, seeded by (TRAINING_FAULT_SEED, cell, code) as the sandbox seeds its own.
    """

    def __init__(self, session: Any) -> None:
        self._session = session
        self._injected = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def _redraw(self, code: str, result: Any) -> Any:
        if not getattr(result, "injected", False):
            return result
        self._injected += 1
        cell = self._injected
        rng = random.Random(f"{TRAINING_FAULT_SEED}\0{cell}\0{code}")
        return dataclasses.replace(result, output=render_training_fault(code, cell, rng))

    def run(self, code: str, *args: Any, **kwargs: Any) -> Any:
        return self._redraw(code, self._session.run(code, *args, **kwargs))

    async def arun(self, code: str, *args: Any, **kwargs: Any) -> Any:
        return self._redraw(code, await self._session.arun(code, *args, **kwargs))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> TrainingFaultSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def with_training_faults(session: Any) -> TrainingFaultSession:
    """`session` with its injected failures redrawn from training's kinds (see the module docstring)."""
    return TrainingFaultSession(session)
