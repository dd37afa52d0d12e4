"""Shared real-sandbox fixtures: one warm Sandbox per test module, a fresh session per test."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

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
