"""thinc_bench: the reference toolkit for code-centric math reasoning (ThinC).

The package is a pipeline of small stages (see docs/DESIGN.md): trajectory IR, sandbox, grading,
benchmarks, rollout, metrics, store, report. This file exposes the version, the error hierarchy and
the two calls most scripts need, `evaluate` and `load_run` (imported when called, so that importing
thinc_bench stays cheap); import the stage modules directly for the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from thinc_bench.errors import ConfigError, DatasetError, GraderError, SandboxUnavailable, ThincError

if TYPE_CHECKING:
    from thinc_bench.eval.results import Run

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DatasetError",
    "GraderError",
    "SandboxUnavailable",
    "ThincError",
    "__version__",
    "evaluate",
    "load_run",
]


def evaluate(model: str | None = None, benchmarks: str | list[str] | None = None, **settings: Any) -> Run:
    """Evaluate a model as `python -m thinc_bench.eval` does (same defaults, run directory and
    resume) and return the run as tables; see `thinc_bench.eval.api.evaluate`."""
    from thinc_bench.eval.api import evaluate as _evaluate

    return _evaluate(model, benchmarks, **settings)


def load_run(path: str | Path) -> Run:
    """Read a run directory: `.config`, `.summary`, `.samples` (a DataFrame) and `.problems()`;
    see `thinc_bench.eval.results.load_run`."""
    from thinc_bench.eval.results import load_run as _load_run

    return _load_run(path)
