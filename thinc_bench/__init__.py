"""thinc_bench: the reference toolkit for code-centric math reasoning (ThinC).

The package is a pipeline of small stages (see DESIGN.md): trajectory IR, sandbox, grading,
benchmarks, rollout, metrics, store, report. This file only exposes the version and the error
hierarchy; import the stage modules directly.
"""

from thinc_bench.errors import ConfigError, DatasetError, GraderError, SandboxUnavailable, ThincError

__version__ = "0.1.0"

__all__ = ["ConfigError", "DatasetError", "GraderError", "SandboxUnavailable", "ThincError", "__version__"]
