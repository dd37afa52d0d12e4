"""The scripted backend: replays model turns from a JSONL file, for paths where no model can run.

Each line is `{"problem_id": "...", "turns": ["<plan + first code block>", ..., "<final text>"]}`.
A call's `request_id` names the trajectory: the problem id itself, or `"<problem_id>/<anything>"`
(e.g. `"2025-I-1/3"` for sample 3; problem ids may contain "/" and the longest matching id wins).
The generator counts calls per request_id and returns the next turn: exactly its text, with token
ids from a real tokenizer (the bundled SmolLM2 one by default). A turn ending in one of the call's
stop strings comes back as `stop=<that string>`; any other turn ends like a model's last turn, with
EOS. `max_tokens` cuts a turn as it would cut a model, and so does `context_length` when given (a
prompt that fills it raises `ContextExceeded`, as the model backends do); asked for logprobs, it gives
0.0 per token (the script is certain of each). Sampling fields and seeds change nothing: a script is
one fixed trajectory. The harness still executes every code block for real; this module only
stands in for the model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from thinc_bench.backends import _sources
from thinc_bench.backends.base import (
    Generation,
    Generator,
    SamplingParams,
    decode,
    first_stop,
    fit_context,
)
from thinc_bench.errors import BackendUnavailable, ConfigError, DatasetError


class ScriptedGenerator(Generator):
    """Replays scripted turns per problem.

    Args:
        script: the JSONL file of `{"problem_id", "turns"}` lines.
        tokenizer: a folder, Hub id or `.gguf` whose tokenizer makes the token ids; None is the
            bundled SmolLM2-135M-Instruct GGUF.
        context_length: the context of the model the script stands in for (prompt plus
            generation); None is unlimited.

    Raises:
        DatasetError: the script is missing, malformed, has a duplicate problem id, or a turn that
            the tokenizer cannot reproduce exactly.
        ConfigError: the tokenizer cannot be found.
    """

    def __init__(
        self, script: str | Path, *, tokenizer: str | None = None, context_length: int | None = None
    ) -> None:
        if context_length is not None and context_length < 2:
            raise ConfigError(f"scripted backend: context_length={context_length}; use at least 2, or None")
        self._context = context_length
        self._path = Path(script)
        self._turns = _read_script(self._path)
        self._tokenizer_name = tokenizer or str(_sources.smollm2_gguf())
        self._tokenizer = _sources.load_tokenizer(self._tokenizer_name)
        self._calls: dict[str, int] = {}
        self._closed = False
        eos = self._tokenizer.eos_token_id
        self._eos: list[int] = [] if eos is None else [int(eos)]

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        if self._closed:
            raise BackendUnavailable("scripted backend is closed; create a new generator")
        problem_id = self._problem_of(request_id)
        turns = self._turns[problem_id]
        key = str(request_id)
        index = self._calls.get(key, 0)
        if index >= len(turns):
            raise ConfigError(
                f"scripted backend: request {key!r} asked for turn {index + 1} but problem {problem_id!r} has "
                f"{len(turns)} turns in {self._path}; use a fresh request_id per trajectory"
            )
        params = fit_context(prompt_ids, params, self._context, request_id)
        self._calls[key] = index + 1
        generation = self._turn(problem_id, index, turns[index], params)
        self._count_tokens(len(generation.token_ids))
        return generation

    @property
    def context_length(self) -> int | None:
        return self._context

    async def aclose(self) -> None:
        self._closed = True

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "scripted",
            "model": str(self._path),
            "script_sha256": hashlib.sha256(self._path.read_bytes()).hexdigest(),
            "problems": len(self._turns),
            "tokenizer": self._tokenizer_name,
            "context_length": self._context,
        }

    def _problem_of(self, request_id: str | None) -> str:
        if request_id is None:
            raise ConfigError("scripted backend needs request_id '<problem_id>/<sample>' to pick the script")
        if request_id in self._turns:
            return request_id
        prefixes = [p for p in self._turns if request_id.startswith(p + "/")]
        if not prefixes:
            raise ConfigError(
                f"scripted backend: no script for request {request_id!r} in {self._path} "
                f"({len(self._turns)} problems); add a line with its problem_id or run only scripted problems"
            )
        return max(prefixes, key=len)

    def _turn(self, problem_id: str, index: int, text: str, params: SamplingParams) -> Generation:
        ids = [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False)]
        if decode(self._tokenizer, ids) != text:
            raise DatasetError(
                f"{self._path}: problem {problem_id!r} turn {index + 1} does not survive encode/decode with "
                f"{self._tokenizer_name}; remove special-token text from it or choose another tokenizer"
            )
        stop = first_stop(text, params.stop)
        if stop is not None and not text.endswith(stop):
            raise DatasetError(
                f"{self._path}: problem {problem_id!r} turn {index + 1} contains stop string {stop!r} before "
                "its end, where a model would have stopped; split the turn there"
            )
        if stop is None:
            ids += self._eos
        if len(ids) > params.max_tokens:
            cut = ids[: params.max_tokens]
            return Generation(
                token_ids=cut,
                text=decode(self._tokenizer, cut),
                finish_reason="length",
                logprobs=_certain(cut, params),
            )
        return Generation(
            token_ids=ids, text=text, finish_reason="stop", stop=stop, logprobs=_certain(ids, params)
        )


def _certain(ids: list[int], params: SamplingParams) -> list[float] | None:
    """A script is a deterministic policy: each of its tokens has probability 1, logprob 0."""
    return [0.0] * len(ids) if params.logprobs else None


def _read_script(path: Path) -> dict[str, list[str]]:
    """Parse the script file into problem id -> turns, naming the line of the first bad row."""
    if not path.is_file():
        raise DatasetError(f"scripted backend: script file {path} does not exist")
    turns: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{where}: not JSON ({exc.msg}); each line is one {{problem_id, turns}} object"
            ) from exc
        problem_id, texts = (
            (row.get("problem_id"), row.get("turns")) if isinstance(row, dict) else (None, None)
        )
        if not isinstance(problem_id, str) or not problem_id:
            raise DatasetError(f"{where}: 'problem_id' must be a non-empty string, got {problem_id!r}")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            raise DatasetError(
                f"{where}: 'turns' of {problem_id!r} must be a non-empty list of non-empty strings"
            )
        if problem_id in turns:
            raise DatasetError(f"{where}: problem_id {problem_id!r} appears twice; keep one line per problem")
        turns[problem_id] = texts
    if not turns:
        raise DatasetError(f"scripted backend: script file {path} has no turns")
    return turns
