"""Inputs beside the checkout that tests need (../shared): a skip naming the input in a fresh clone,
a failure under CI. A module of its own because `from conftest import ...` is ambiguous with several
conftest.py files (pytest imports whichever `conftest` it met first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

STRICT_ENV = "THINC_CI"
"""Set by .ci/run: a missing test input (../shared, chromium) fails there instead of skipping."""


def need_shared(path: Path, what: str) -> Path:
    """`path` under ../shared, or a skip naming it: a fresh clone has no ../shared (benchmark copies,
    the Qwen3 tokenizer), and its tests run without them; .ci/run sets THINC_CI, so there a
    missing copy fails instead of quietly skipping."""
    if not path.exists():
        message = (
            f"{what} missing at {path}: needs ../shared beside the checkout (docs/install.md, Benchmark data)"
        )
        if os.environ.get(STRICT_ENV):
            pytest.fail(message)
        pytest.skip(message)
    return path
