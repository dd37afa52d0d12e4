"""The package layout as a contract: no file imports a file that imports it back, and every folder's
`__init__.py` is a public face whose `__all__` names exist.

Imports are read from the source (every `import` / `from ... import`, also inside functions), except
those under `if TYPE_CHECKING:`, which only annotations see. `from pkg import name` counts as an
import of `pkg/name.py` when that file exists, else of `pkg/__init__.py`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "thinc_bench"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(name: str, source: str) -> set[str]:
    """The project modules that `name` imports when it runs."""
    is_package = MODULES.get(name, Path()).name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    visit_node(other)
                continue
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.add(f"{base}.{alias.name}")
                elif base in MODULES:
                    found.add(base)
        visit(node)

    visit(ast.parse(source))
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_sees_function_level_imports_and_ignores_type_checking() -> None:
    a = "from thinc_bench.eval import store\n"
    b = "def f():\n    from thinc_bench.eval import run\n"
    c = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from thinc_bench.eval import run\n"
    assert runtime_imports("thinc_bench.eval.run", a) == {"thinc_bench.eval.store"}
    assert runtime_imports("thinc_bench.eval.store", b) == {"thinc_bench.eval.run"}
    assert runtime_imports("thinc_bench.eval.store", c) == set()
    graph = {"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}
    assert cycles(graph) == [["x", "y", "z"]]


def test_no_file_imports_a_file_that_imports_it_back() -> None:
    graph = {name: runtime_imports(name, path.read_text(encoding="utf-8")) for name, path in MODULES.items()}
    assert cycles(graph) == []


FACES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py" and name != "thinc_bench")


@pytest.mark.parametrize("package", FACES)
def test_every_folder_has_a_public_face_whose_names_exist(package: str) -> None:
    module = importlib.import_module(package)
    public = getattr(module, "__all__", None)
    assert public, f"{package}/__init__.py lists no public names in __all__"
    assert not [n for n in public if not hasattr(module, n)]
    assert not [n for n in public if n.startswith("_")]


def test_the_top_level_holds_only_the_shared_vocabulary_and_the_folders() -> None:
    top = sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert top == [
        "__init__.py",
        "backends",
        "benchmarks.py",
        "build_sft",
        "checkpoint.py",  # what a trained checkpoint records: written by the recipes, read by eval
        "cli.py",  # the command-line parsing every CLI and recipe shares (one-line errors, short help)
        "errors.py",
        "eval",
        "grading",
        "hub.py",
        "inspect_tasks",  # thinc_bench inside Inspect AI (the [inspect] extra): tasks, sandbox, tool, judge
        "metrics",
        "nano",  # the generated ThinC-nano task and its template teacher
        "outcomes.py",  # who a sample's failure belongs to: the one rule of eval, build_sft and GRPO
        "precision.py",  # which float format the hardware computes natively (eval's and the recipes' "auto")
        "progress.py",  # what a long job shows while it runs: counts, tokens/s, ETA (and its tqdm bar)
        "prompts",
        "provenance.py",  # the one table of source classes: where a published number or setting comes from
        "report",
        "sandbox",
        "train",
        "trajectory",  # the trajectory IR: segments, what runs when, the ThinC checks (+ its lexer _scan)
    ]
    private = {name for name, path in MODULES.items() if path.name == "_scan.py"}
    importers = {name for name, path in MODULES.items() if private & runtime_imports(name, path.read_text())}
    assert importers == {
        "thinc_bench.trajectory.segments",
        "thinc_bench.trajectory.turns",
    }  # its own folder only
