"""What model code may import: the allowed distributions and what they require, found through their
RECORD files, never thinc_bench; and a runtime that imports nothing of the harness."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from thinc_bench.errors import ConfigError
from thinc_bench.sandbox import Sandbox, SandboxConfig, _packages

RUNTIME = Path(__file__).resolve().parents[2] / "thinc_bench" / "sandbox" / "runtime"
Fake = Callable[[Path, dict[str, str]], str]


def _add_requirement(site: Path, name: str, line: str) -> None:
    metadata = site / f"{name}-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text() + f"Requires-Dist: {line}\n")


def test_the_closure_follows_requirements_without_extras() -> None:
    visible = _packages.resolve(("sympy",), ())
    assert {"sympy", "mpmath"} <= set(visible.versions)  # sympy requires mpmath
    assert not {"pytest", "hypothesis"} & set(visible.versions)  # sympy's "dev" extra stays out
    names = {e.name for e in visible.entries}
    assert {"sympy", "mpmath"} <= names and not any(n.startswith(("pytest", "_pytest")) for n in names)


def test_preloaded_modules_bring_their_distribution() -> None:
    visible = _packages.resolve((), ("math", "numpy"))
    assert set(visible.versions) == {"numpy"}  # math is the standard library's


def test_names_not_installed_are_left_out_and_said() -> None:
    visible = _packages.resolve(("numpy", "no-such-distribution-here"), ())
    assert visible.missing == ("no-such-distribution-here",) and "numpy" in visible.versions


def test_a_requirement_on_the_harness_is_never_followed(tmp_path: Path, fake_distribution: Fake) -> None:
    name = fake_distribution(tmp_path, {"x.py": "X = 1\n"})
    _add_requirement(tmp_path, name, "thinc_bench>=0.1")
    _add_requirement(tmp_path, name, "mpmath")
    visible = _packages.resolve((name,), ())
    assert set(visible.versions) == {name, "mpmath"}
    assert not [e for e in visible.entries if "thinc_bench" in e.source or e.name.startswith("thinc_bench")]


def test_record_entries_outside_the_package_folder_and_pth_files_are_left_out(
    tmp_path: Path, fake_distribution: Fake
) -> None:
    name = fake_distribution(tmp_path, {})
    (tmp_path / "hook.pth").write_text("import os\n")
    record = tmp_path / f"{name}-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "../../bin/tool,,\nhook.pth,,\n")
    names = {e.name for e in _packages.resolve((name,), ()).entries}
    assert names == {name, f"{name}-1.0.dist-info"}


@pytest.mark.parametrize(
    "field, value",
    [("packages", ("thinc-bench",)), ("packages", ("Thinc_Bench",)), ("preload", ("thinc_bench.nano",))],
)
def test_asking_for_the_harness_is_a_config_error(field: str, value: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="must never reach thinc_bench"):
        SandboxConfig(**{field: value})  # type: ignore[arg-type]


def test_a_session_imports_an_allowed_distribution_and_nothing_else(
    tmp_path: Path, fake_distribution: Fake
) -> None:
    allowed = fake_distribution(tmp_path / "a", {"x.py": "VALUE = 42\n"})
    other = fake_distribution(tmp_path / "b", {})
    with Sandbox(SandboxConfig(packages=(allowed,))) as sb, sb.session() as s:
        r = s.run(f"from {allowed}.x import VALUE\nprint(VALUE)\nimport {other}")
        summary = sb.protection_summary()
    assert r.output.startswith("42\n") and f"No module named '{other}'" in r.output
    assert summary["packages"][allowed] == "1.0" and other not in summary["packages"]


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or ""))
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in RUNTIME.glob("*.py")))
def test_the_runtime_imports_the_standard_library_and_itself_only(module: str) -> None:
    """The runtime is all the jail shows of the sandbox: an import of thinc_bench (or of any
    installed package) from it would fail in every session, or pull the harness back in."""
    foreign = [
        name
        for level, name in _imports(RUNTIME / module)
        if level == 0 and name.partition(".")[0] not in sys.stdlib_module_names and name != "__future__"
    ]
    assert foreign == []
