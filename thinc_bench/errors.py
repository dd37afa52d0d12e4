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


class ContextExceeded(ThincError):
    """A request does not fit the model's context (prompt alone, or the engine's own limit).

    Not a configuration error: one long trajectory reaching the context ends like any other that
    hits its budget (`max_tokens`), and the run goes on. The budget itself is checked at start
    (`Generator.check`).
    """


class RequestRejected(BackendUnavailable):
    """A server refused one request (HTTP 4xx other than the context limit); retrying cannot help.

    Recorded on that sample as an infrastructure error with the server's message; the backend
    stops the run (ConfigError) only when requests keep being rejected and none has succeeded.
    """


class HarnessError(ThincError):
    """The harness failed the same way on every trajectory so far (one trajectory's failure is a
    `harness_error` record; this is the run stopping because it is systematic: a bug or the environment)."""
