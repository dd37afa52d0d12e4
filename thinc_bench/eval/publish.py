"""`--push-to-hub REPO`: a finished run as a Hub dataset, laid out like lighteval's results and details.

`results/<run>.json` holds the run's config and summary (one small file per run, what a leaderboard
reads); `details/<run>/` holds `samples.parquet` (every trajectory, docs/results.md), `prompts.jsonl`
and `report.html`. `<run>` is the run directory's name, so several runs share one dataset repo. The
Hub is probed first (`thinc_bench.hub`), at start and again before the upload, so an unreachable Hub
fails in seconds and never after hours of generation. Uploading only: it computes nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from thinc_bench import hub
from thinc_bench.errors import ConfigError
from thinc_bench.eval.results import PARQUET_FILE
from thinc_bench.eval.store import CONFIG_FILE, PROMPTS_FILE, SUMMARY_FILE

logger = logging.getLogger(__name__)

DETAIL_FILES = (PARQUET_FILE, PROMPTS_FILE, "report.html")
"""What goes under details/<run>/ (samples.jsonl is the same records as the Parquet table)."""


def check_reachable(repo: str) -> None:
    """Fail at once when the Hub cannot take the upload.

    Raises:
        ConfigError: offline mode, or the probe found no Hub.
    """
    reason = hub.unreachable()
    if reason is not None:
        raise ConfigError(
            f"--push-to-hub {repo}: the Hugging Face Hub cannot be reached ({reason}); run without "
            "--push-to-hub, then push the run directory when the Hub is back"
        )


def push_run(path: str | Path, repo: str, *, api: Any = None) -> list[str]:
    """Upload the run directory's results and details to the dataset repo `repo`.

    Args:
        path: a finished run directory (summary.json and samples.parquet written).
        repo: a Hub dataset id, created when missing.
        api: an `huggingface_hub.HfApi` (default: a new one, with the login's token).

    Returns:
        The paths written in the repo.

    Raises:
        ConfigError: the Hub cannot be reached, or the run has no summary yet.
    """
    path = Path(path)
    if not (path / SUMMARY_FILE).is_file():
        raise ConfigError(f"{path} has no {SUMMARY_FILE}: finish the run before pushing it")
    check_reachable(repo)
    if api is None:
        from thinc_bench.backends import require

        require("huggingface_hub")
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id=repo, repo_type="dataset", exist_ok=True)
    results = {
        "config": json.loads((path / CONFIG_FILE).read_text(encoding="utf-8")),
        "results": json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8")),
    }
    written = [f"results/{path.name}.json"]
    api.upload_file(
        path_or_fileobj=json.dumps(results, indent=2, ensure_ascii=False).encode("utf-8"),
        path_in_repo=written[0],
        repo_id=repo,
        repo_type="dataset",
        commit_message=f"thinc_bench results of {path.name}",
    )
    for name in DETAIL_FILES:
        if (path / name).is_file():
            written.append(f"details/{path.name}/{name}")
            api.upload_file(
                path_or_fileobj=str(path / name),
                path_in_repo=written[-1],
                repo_id=repo,
                repo_type="dataset",
                commit_message=f"thinc_bench details of {path.name}",
            )
    logger.info("pushed %s to the Hub dataset %s", path, repo)
    return written
