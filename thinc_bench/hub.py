"""Reaching the Hugging Face Hub: one short probe, so that a machine without it fails in seconds.

Left alone, huggingface_hub retries an unreachable Hub for about a minute before the loader's error
surfaces. Every loader that may read the Hub (benchmarks, training sources, models, tokenizers) asks
`unreachable()` first: huggingface_hub's offline mode (`HF_HUB_OFFLINE=1`) answers without a probe,
otherwise one request to the Hub's endpoint with a `PROBE_TIMEOUT_S` timeout does, once per process.
A reachable Hub is used exactly as before; an unreachable one turns into a one-line error naming the
local alternative (a model folder, `--data-dir`, `--decontam-data-dir`). It does not download.
"""

from __future__ import annotations

import functools
import re
import urllib.error
import urllib.request
from pathlib import Path

from thinc_bench.errors import ConfigError

__all__ = ["PROBE_TIMEOUT_S", "is_hub_id", "local_snapshot", "probe_failure", "unreachable"]

PROBE_TIMEOUT_S = 3.0
"""Seconds the probe waits for the Hub: a reachable Hub answers in well under a second."""

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_LOCAL_SUFFIXES = (".gguf", ".jsonl", ".json", ".parquet")


def is_hub_id(name: str) -> bool:
    """Whether `name` can only mean a Hub repository: no such local path, and shaped like `org/name`."""
    if Path(name).expanduser().exists() or name.endswith(_LOCAL_SUFFIXES):
        return False
    return name.count("/") <= 1 and _HUB_ID.fullmatch(name) is not None


def unreachable() -> str | None:
    """Why the Hub cannot be used now (offline mode, or the probe's failure), or None when it can."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    return _probe(constants.ENDPOINT)


def probe_failure() -> str | None:
    """Why the probe failed, or None when it answered or offline mode is on (the libraries then read
    their caches, and fail, at once: a dataset loader needs no probe of its own then)."""
    from huggingface_hub import constants

    return None if constants.HF_HUB_OFFLINE else _probe(constants.ENDPOINT)


@functools.lru_cache(maxsize=4)
def _probe(endpoint: str) -> str | None:
    """One HEAD request to the endpoint: any HTTP answer, even an error status, means it is there."""
    request = urllib.request.Request(endpoint, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):  # noqa: S310 - the Hub's own URL
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"no answer from {endpoint} within {PROBE_TIMEOUT_S:g} s: {type(reason).__name__}"


def local_snapshot(repo_id: str, revision: str | None, alternative: str) -> str:
    """The locally cached folder of a Hub model when the Hub cannot be reached.

    Args:
        repo_id: the Hub id.
        revision: its revision, None for the default branch.
        alternative: what to pass instead, for the error (e.g. "pass a local model folder").

    Returns:
        The cached snapshot folder.

    Raises:
        ConfigError: the Hub is unreachable and nothing of `repo_id` is cached.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    reason = unreachable() or "offline"
    try:
        return str(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        raise ConfigError(
            f"{repo_id!r} is a Hub id, but the Hugging Face Hub cannot be reached ({reason}) and it is not "
            f"in the local cache; {alternative}"
        ) from None
