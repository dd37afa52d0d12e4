"""The one error hierarchy of thinc_bench.

Every error we raise on purpose is a `ThincError`: the CLIs print it as one line without a
traceback, because its message already names the input, the value, where it came from and the fix.
Anything else is our bug and keeps its traceback.
"""


class ThincError(Exception):
    """Base of every deliberate thinc_bench error; its message is the whole story for the user."""


class ConfigError(ThincError):
    """A setting is invalid or inconsistent (bad CLI flag, unknown key, mismatched run directory)."""


class DatasetError(ThincError):
    """A dataset cannot be loaded or holds a bad row (missing file or column, unparseable gold)."""


class GraderError(ThincError):
    """The grading machinery itself failed (worker pool could not start), not a model's answer."""


class SandboxUnavailable(ThincError):
    """The sandbox cannot execute code at all (server died, no fork possible): infrastructure, not user code."""


class BackendUnavailable(ThincError):
    """A generation backend cannot serve (server down, HTTP 5xx after retries, engine dead): infrastructure."""
