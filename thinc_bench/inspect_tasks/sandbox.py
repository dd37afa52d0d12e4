"""thinc_bench's sandbox as an Inspect sandbox environment: one stateful session per sample.

`sandbox="thinc_bench"` gives each sample one session of thinc_bench's own sandbox (a notebook:
state persists across calls, the jail and limits of docs/DESIGN.md "Sandbox"), opened when Inspect
starts the sample and closed when it ends, on error or cancellation too. Inspect's `local` and
`docker` sandboxes run a fresh `python3` per call (the stock `python()` tool says so to the model);
ThinC's format is a notebook. One fork server per task and configuration serves every session
(`task_init` / `task_cleanup`). A sample whose metadata says `k` gets a session whose first k runs are
injected failures (Recovery@k), exactly as eval's (`Sandbox.session(inject_failures=k)`).

Every run is recorded in the sample's store (`EXECUTIONS_KEY`), so the scorer counts the tool calls,
their errors and the injected failures from the log alone (`inspect score` re-scores a log).
Commands and files are not this sandbox's: it runs Python code, through the `python` tool.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Literal, overload

from inspect_ai.util import ExecResult, SandboxEnvironment, SandboxEnvironmentConfigType, sandboxenv, store
from pydantic import BaseModel, ConfigDict

from thinc_bench.errors import SandboxUnavailable
from thinc_bench.eval.rollout import Execution
from thinc_bench.eval.tool_results import render_result
from thinc_bench.prompts.tools import ResultFormat
from thinc_bench.sandbox import Sandbox, SandboxConfig, Session

NAME = "thinc_bench"
EXECUTIONS_KEY = "thinc_bench/executions"
"""Store key: each run of the sample's session (`Execution` fields), in order."""
ONLY_PYTHON = (
    "thinc_bench's sandbox runs Python in one stateful session, through its python tool; it runs no "
    "commands and holds no sample files"
)


class ThincSandboxConfig(BaseModel):
    """The sandbox settings a task fixes (the CLI's `--exec-timeout-s` and `--sandbox-state`)."""

    model_config = ConfigDict(frozen=True)

    timeout_s: float = SandboxConfig.timeout_s
    state: Literal["persistent", "fresh"] = "persistent"

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(timeout_s=self.timeout_s, state=self.state)


_SERVERS: dict[ThincSandboxConfig, tuple[Sandbox, int]] = {}
"""One running fork server per configuration, with the number of tasks using it."""


def _config(config: SandboxEnvironmentConfigType | None) -> ThincSandboxConfig:
    if config is None:
        return ThincSandboxConfig()
    if isinstance(config, ThincSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return ThincSandboxConfig(**config.model_dump())
    raise ValueError(f"sandbox {NAME}: config {config!r} is not a ThincSandboxConfig; pass one, or none")


def _server(config: ThincSandboxConfig) -> Sandbox:
    if config not in _SERVERS:  # a task started without task_init (inspect_ai's own tests do)
        _SERVERS[config] = (Sandbox(config.sandbox_config()), 1)
    return _SERVERS[config][0]


@sandboxenv(name=NAME)
class ThincSandboxEnvironment(SandboxEnvironment):
    """A sample's thinc_bench session (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    async def run(self, code: str, *, stdin: str | None = None, result_format: ResultFormat = "plain") -> str:
        """Run `code` in the sample's session and return what the model reads, in `result_format`.

        Raises:
            SandboxUnavailable: the sandbox's own infrastructure failed twice (a sample error, which
                `inspect eval-retry` retries; never a result the model reads).
        """
        result = await self.session.arun(code, stdin=stdin)
        record(Execution(result.status, result.elapsed_s, result.truncated, result.injected, code))
        if result.status == "infra_error":
            raise SandboxUnavailable(f"sandbox: {result.notice_after.strip() or 'infrastructure error'}")
        return render_result(result, result_format, self.session.timeout_s)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        key = _config(config)
        sandbox, users = _SERVERS.get(key, (None, 0))
        if sandbox is None:
            sandbox = Sandbox(key.sandbox_config())
            await asyncio.to_thread(sandbox.start)
        _SERVERS[key] = (sandbox, users + 1)

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        k = int(metadata.get("k", 0) or 0)
        session = await asyncio.to_thread(_server(_config(config)).session, inject_failures=k)
        return {"default": cls(session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            if isinstance(environment, cls):
                await asyncio.to_thread(environment.session.close)

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        key = _config(config)
        sandbox, users = _SERVERS.get(key, (None, 0))
        if sandbox is None:
            return
        if users > 1:
            _SERVERS[key] = (sandbox, users - 1)
            return
        del _SERVERS[key]
        await asyncio.to_thread(sandbox.close)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return SandboxConfig.max_sessions

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return ThincSandboxConfig(**config)

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        return ExecResult(success=False, returncode=126, stdout="", stderr=ONLY_PYTHON)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        raise PermissionError(f"{file}: {ONLY_PYTHON}")

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        raise PermissionError(f"{file}: {ONLY_PYTHON}")


def record(execution: Execution) -> None:
    """Append one run to the sample's store (a failed call the tool never ran included)."""
    runs: list[dict[str, Any]] = list(store().get(EXECUTIONS_KEY, []))
    runs.append(dataclasses.asdict(execution))
    store().set(EXECUTIONS_KEY, runs)


def recorded() -> list[Execution]:
    """The sample's runs so far, from its store."""
    runs: list[dict[str, Any]] = store().get(EXECUTIONS_KEY, [])
    return [Execution(**run) for run in runs]


def session() -> ThincSandboxEnvironment:
    """The running sample's thinc_bench sandbox.

    Raises:
        SandboxUnavailable: the task runs another sandbox (or none).
    """
    from inspect_ai.util import sandbox

    try:
        return sandbox().as_type(ThincSandboxEnvironment)
    except (TypeError, ValueError, RuntimeError, ProcessLookupError) as exc:
        raise SandboxUnavailable(
            f"thinc_bench's python tool and solvers run in the {NAME!r} sandbox; give the task "
            f"sandbox={NAME!r} ({type(exc).__name__}: {exc})"
        ) from exc
