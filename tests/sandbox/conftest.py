"""Shared real-sandbox fixtures: one warm Sandbox per test module, a fresh session per test."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from thinc_bench.sandbox import Sandbox, SandboxConfig, Session


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig()) as sb:
        yield sb


@pytest.fixture
def session(sandbox: Sandbox) -> Iterator[Session]:
    with sandbox.session() as s:
        yield s


@pytest.fixture
def token() -> str:
    return f"thinc{uuid.uuid4().hex[:12]}"


def _host_processes_with(token: str) -> list[psutil.Process]:
    """Processes on the host whose command line mentions `token` (seen from outside the sandbox)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(token in part for part in cmdline):
            found.append(proc)
    return found


@pytest.fixture
def host_processes() -> Callable[[str], list[psutil.Process]]:
    """Lists host processes whose command line mentions a token (containment seen from outside)."""
    return _host_processes_with


@pytest.fixture
def sleeper(token: str) -> str:
    """Argv (as Python source) of a long sleep that carries `token` in its command line."""
    return f"['python3', '-c', 'import time; time.sleep(1000)', '{token}']"


FakeDistribution = Callable[[Path, dict[str, str]], str]


@pytest.fixture
def fake_distribution(monkeypatch: pytest.MonkeyPatch) -> FakeDistribution:
    """Installs a distribution of a fresh name into a folder put on the import path: a package of
    the given files with a dist-info folder (METADATA, RECORD), as pip leaves one; returns its name
    (the sandbox finds it the way it finds any allowed distribution, through its RECORD)."""

    def make(site: Path, files: dict[str, str]) -> str:
        name = f"thincfake{uuid.uuid4().hex[:10]}"
        package = site / name
        package.mkdir(parents=True, mode=0o755)
        package.chmod(0o755)
        site.chmod(0o755)
        records = []
        for rel, text in {"__init__.py": "", **files}.items():
            (package / rel).write_text(text)
            records.append(f"{name}/{rel},,")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(mode=0o755)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        records += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
        (info / "RECORD").write_text("\n".join(records) + "\n")
        monkeypatch.syspath_prepend(str(site))
        importlib.invalidate_caches()
        return name

    return make
