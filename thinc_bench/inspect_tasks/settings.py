"""What a thinc_bench task runs with: its `-T` arguments, resolved by eval's own `EvalConfig`.

A task's arguments are the CLI's flags under Inspect's names (`preset`, `dialect`, `k`, `budget`,
...), and `EvalConfig` resolves them exactly as `python -m thinc_bench.eval` does: a preset fills every
field left at its default, the CLI's defaults (docs/settings.md) apply with a model and the bundled demo's without
one, and a combination that cannot work is one line naming the fix. The model is known only when a
sample runs (Inspect's `--model`), so the config is resolved twice: at task construction with a
stand-in model, for what the task itself fixes (the sandbox, the sampling defaults), and per eval
with the real model and backend (`ModelSpec`), for the rollout. Inspect's own generate options
(`--temperature`, `--top-p`, `--seed`, ...) win over both, as a command-line flag wins in the CLI.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinc_bench.errors import ConfigError
from thinc_bench.eval.config import EvalConfig

STAND_IN_MODEL = "inspect-model"
"""The model name a task's config is first resolved with: any name takes the CLI's model defaults."""

RENAMED = {"budget": "max_tokens", "exec_timeout": "exec_timeout_s"}
"""Task arguments whose `EvalConfig` field has another name (Inspect has its own `--max-tokens`, per call)."""

CONFIG_BENCHMARK = "nano"
"""The benchmark a runtime config names: the problems come from the task's dataset, and a generated
benchmark never makes `EvalConfig` look for data (the demo's Hub probe)."""

NATIVE_DIALECT = "tool_call"
"""The dialect whose calls go through Inspect's own tool loop; the others run thinc_bench's rollout."""

GENERATE_FIELDS = ("temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty", "seed")
"""Inspect generate options that override the resolved sampling (the seed is the base seed)."""


TASK_ARG_NAMES = {"max_tokens": "budget", "recovery_k": "k", "exec_timeout_s": "exec_timeout"}
"""The CLI flags whose task argument has another name."""
_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def as_task_args(message: str) -> str:
    """A CLI error message with each `--flag` written as the task argument `-T flag` it came from."""

    def name(match: re.Match[str]) -> str:
        field_name = match.group(1).replace("-", "_")
        return f"-T {TASK_ARG_NAMES.get(field_name, field_name)}"

    return _FLAG.sub(name, message)


def parse_ks(k: int | str | Sequence[int] | None) -> str:
    """Recovery@k's injected-failure counts as `--recovery-k` takes them: `1`, `"1,3"` or `[1, 3]`
    (the clean run, k = 0, is always added)."""
    if k is None:
        return "0"
    if isinstance(k, bool):  # YAML reads `-T k=yes` as True
        raise ConfigError(f"-T k={k!r}: use an integer or a comma list such as 1,3")
    if isinstance(k, int | str):
        return str(k)
    return ",".join(str(value) for value in k)


@dataclass(frozen=True)
class TaskArgs:
    """A task's `-T` arguments; None is "the CLI's default" (the preset's, the model defaults or the demo's).

    Attributes:
        preset: thinc | rstar2-agent | aster | retool (a baseline's published setup).
        dialect: markdown | xml (thinc_bench's rollout) | tool_call (Inspect's tool loop).
        k: Recovery@k's injected-failure counts (`--recovery-k`: `1` runs k = 0 and 1).
        budget: completion tokens per trajectory, model and interpreter (`--max-tokens`).
        tokenizer: the model's tokenizer where Inspect's provider does not give it: the native path's
            record tokenizer (its chat template renders the tool turns), and a served model's on the
            token path (`vllm/NAME -M base_url=...` serving NAME under another name); None: the model's.
        extra: any other `EvalConfig` field by name (`temperature`, `min_p`, `seed`, ...).
        others: the CLI flags of the same name.
    """

    preset: str | None = None
    dialect: str | None = None
    k: str = "0"
    budget: int | None = None
    max_tool_calls: int | None = None
    system_prompt: str | None = None
    user_template: str | None = None
    few_shot: int | None = None
    exec_on: str | None = None
    response_prefix: str | None = None
    exec_timeout: float | None = None
    sandbox_state: str | None = None
    tool_name: str | None = None
    chat_template_kwargs: str | None = None
    tokenizer: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def kwargs(self) -> dict[str, Any]:
        """The arguments given, as the solver's and scorer's parameters (what Inspect logs of them)."""
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {k: v for k, v in given.items() if v is not None} | dict(self.extra)

    @classmethod
    def of(cls, **given: Any) -> TaskArgs:
        """Arguments from keywords: the named fields, the rest into `extra`."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in given.items() if k in names}
        known["k"] = parse_ks(known.get("k"))
        return cls(**known, extra={k: v for k, v in given.items() if k not in names})

    def explicit(self) -> dict[str, Any]:
        """The `EvalConfig` fields these arguments set (renamed where Inspect's name differs)."""
        values = {
            RENAMED.get(f.name, f.name): getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("k", "extra", "tokenizer") and getattr(self, f.name) is not None
        }
        known = {f.name for f in dataclasses.fields(EvalConfig)} - {"model", "backend", "benchmarks"}
        unknown = sorted(set(self.extra) - known)
        if unknown:
            raise ConfigError(
                f"-T {', '.join(unknown)}: not a thinc_bench task argument or eval setting; see docs/inspect.md "
                "(any `python -m thinc_bench.eval` flag works by its field name)"
            )
        return {**dict(self.extra), **values, "recovery_k": self.k}

    def config(self, spec: ModelSpec | None = None, generate: Mapping[str, Any] | None = None) -> EvalConfig:
        """The run's `EvalConfig` for a model (None: the stand-in, for what the task fixes), with
        Inspect's generate options on top. The problems are the dataset's: the config never loads any.

        Raises:
            ConfigError: a setting, or a combination, that the CLI refuses too.
        """
        spec = spec or ModelSpec(STAND_IN_MODEL, "hf")
        settings = {**self.explicit(), **dict(spec.options)}
        for name in GENERATE_FIELDS:
            value = (generate or {}).get(name)
            if value is not None:
                settings[name] = value
        try:
            return EvalConfig(model=spec.model, backend=spec.backend, benchmarks=CONFIG_BENCHMARK, **settings)
        except ConfigError as exc:  # the CLI's message, in the task's argument names
            raise ConfigError(as_task_args(str(exc))) from None
        except TypeError as exc:  # an option no EvalConfig field takes
            raise ConfigError(f"thinc_bench task: {exc}; see docs/inspect.md for the arguments") from exc

    @property
    def native(self) -> bool:
        """Whether the dialect is native tool calls, which run through Inspect's tool loop."""
        return self.config().dialect == NATIVE_DIALECT


@dataclass(frozen=True)
class ModelSpec:
    """The thinc_bench backend behind an Inspect model: backend name, model (None: the bundled demo,
    as `python -m thinc_bench.eval` without `--model`), and backend options (the CLI's flags)."""

    model: str | None
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        return (self.backend, self.model, tuple(sorted((k, str(v)) for k, v in self.options.items())))


def tokenizer_name(config: EvalConfig) -> str:
    """The tokenizer a resolved config's backend reads the model with (what it renders and counts
    with), without loading the model: `--tokenizer` where given, else the model's, else the bundled
    SmolLM2 one (the demo, and the scripted backend's default)."""
    from thinc_bench.backends import smollm2_gguf

    if config.tokenizer:
        return config.tokenizer
    if config.backend == "scripted" or not config.model:
        return str(smollm2_gguf())
    return config.model
