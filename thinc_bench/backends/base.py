"""The Generator contract: token ids and sampling parameters in, one `Generation` out.

Every backend (hf, vllm, openai, scripted) implements `Generator`. The rollout works in token ids
end to end: it renders the chat prompt with `Generator.tokenizer`, sends ids, and appends the ids it
gets back without re-encoding text. Stop strings are kept at the end of the output, and generation
stops at the first token whose text completes one; that token is kept whole, so the text may run a
few characters past the stop string (documented on `Generation`). Every sampling field is explicit
(`SamplingParams`) and every backend applies all of them, in vLLM's order, so a server never fills one
from the model's generation_config.json. A request that does not fit the model's context raises
`ContextExceeded`; an infrastructure failure (server down, engine dead) raises `BackendUnavailable`
(`RequestRejected` for one request a server refuses). Nothing here retries, grades or executes code.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from thinc_bench.errors import ConfigError, ContextExceeded

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

FinishReason = Literal["stop", "length"]

MAX_SEED = 2**63 - 1
"""Seeds travel as signed 64-bit integers in torch, vLLM and the OpenAI API alike."""


class SamplingError(ConfigError):
    """A sampling field out of range, with the field, its value and the advice apart, so a CLI can
    name its own flag (`--temperature -1: ...`) where the library names the field."""

    def __init__(self, field: str, value: object, advice: str) -> None:
        super().__init__(f"SamplingParams.{field}={value}: {advice}")
        self.field, self.value, self.advice = field, value, advice


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one generation; the defaults sample the model's own distribution.

    Attributes:
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus sampling mass in (0, 1]; 1 keeps every token.
        top_k: keep only the k most likely tokens; None keeps all.
        max_tokens: most tokens to generate in this call.
        stop: strings that end the generation; the matched one is kept at the end of the text.
        seed: per-request seed; None draws from the backend's generator (see each backend for what
            determinism it gives).
        logprobs: also return each sampled token's log-probability, as the sampler saw it (after
            penalties, temperature and filtering: vLLM's processed logprobs); RL uses it to correct
            for engine-vs-trainer mismatch. Backends that cannot (servers without vLLM's
            extensions) return None.
        min_p: drop tokens whose probability is below `min_p` times the most likely one's; 0 keeps all.
        repetition_penalty: divides positive (multiplies negative) logits of every token already in
            the prompt or the output; 1 disables it.
        presence_penalty: subtracted once from the logit of every token already generated in this call.
        frequency_penalty: subtracted from a token's logit per time it was generated in this call.

    The order is vLLM's: penalties, temperature, min_p, top_k, top_p.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.stop, str) or not isinstance(self.stop, tuple | list):
            raise SamplingError("stop", repr(self.stop), "pass a tuple of strings, e.g. ('```output',)")
        object.__setattr__(self, "stop", tuple(self.stop))
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise SamplingError("temperature", self.temperature, "use a finite value >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise SamplingError("top_p", self.top_p, "use a value in (0, 1]; 1 disables nucleus sampling")
        if self.top_k is not None and self.top_k < 1:
            raise SamplingError("top_k", self.top_k, "use an integer >= 1, or None to disable top-k")
        if self.max_tokens < 1:
            raise SamplingError("max_tokens", self.max_tokens, "generate at least one token")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise SamplingError("stop", repr(self.stop), "every stop string must be a non-empty str")
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise SamplingError("seed", self.seed, "use an integer in [0, 2**63 - 1] or None")
        if not 0 <= self.min_p <= 1:
            raise SamplingError("min_p", self.min_p, "use a value in [0, 1]; 0 disables min-p")
        if not math.isfinite(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise SamplingError(
                "repetition_penalty", self.repetition_penalty, "use a finite value > 0; 1 disables it"
            )
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not math.isfinite(value) or not -2 <= value <= 2:
                raise SamplingError(name, value, "use a value in [-2, 2]; 0 disables it")

    def sampling(self) -> dict[str, Any]:
        """The fields that shape the distribution (not the per-call budget, stops or seed): what a
        run records as its effective sampling settings and what every backend sends explicitly."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
        }


@dataclass(frozen=True)
class Generation:
    """One generation call's result.

    Attributes:
        token_ids: the generated ids, ending with the EOS id when the model ended the turn.
        text: `tokenizer.decode(token_ids, skip_special_tokens=True)`. When a stop string matched,
            the text contains it and ends with it, except that the token completing the match is
            kept whole: with stop "```output", a last token "output\\n" leaves the text ending in
            "```output\\n".
        finish_reason: "stop" (EOS or a stop string) or "length" (`max_tokens` reached).
        stop: the stop string that ended the generation, None for EOS or length.
        logprobs: one log-probability per token of `token_ids` when the request asked for them and
            the backend can give them; else None.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    stop: str | None = None
    logprobs: list[float] | None = None

    def __post_init__(self) -> None:
        if self.stop is not None and self.finish_reason != "stop":
            raise ValueError(f"Generation with stop={self.stop!r} must have finish_reason 'stop'")
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"Generation has {len(self.logprobs)} logprobs for {len(self.token_ids)} tokens; one per token"
            )


class Generator(ABC):
    """A text generator over token ids; use as `async with` or call `aclose()` when done.

    Every backend sets `_tokenizer` in its constructor (loading errors surface there).
    """

    _tokenizer: PreTrainedTokenizerBase
    _generated_tokens: int = 0

    @property
    def generated_tokens(self) -> int:
        """Tokens this generator has produced since it was made, those of requests still decoding
        included where the backend decodes them itself (hf, in-process vllm); a backend that gets a
        turn whole (a server, a script) counts it when it arrives. Progress bars read differences of
        it to show life between finished trajectories; nothing else depends on it."""
        return self._generated_tokens

    def _count_tokens(self, n: int) -> None:
        """Add `n` to `generated_tokens` (from the backend's own thread: an int add under the GIL)."""
        self._generated_tokens += n

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The HF tokenizer that renders the chat prompt and decodes what this backend returns."""
        return self._tokenizer

    @property
    def context_length(self) -> int | None:
        """Most tokens (prompt plus generation) one request may hold; None when the backend cannot tell."""
        return None

    def check(self, max_tokens: int) -> None:
        """Refuse a completion budget that cannot fit the model's context even after a one-token prompt.

        A trajectory whose prompt plus budget exceeds the context still runs: it ends with `max_tokens`
        when the context is full (the rollout records `context_exceeded`). Only a budget that no
        trajectory could use is an error, named with both numbers.

        Raises:
            ConfigError: `max_tokens` >= `context_length`.
        """
        context = self.context_length
        if context is not None and max_tokens >= context:
            raise ConfigError(
                f"--max-tokens {max_tokens} (the completion budget, after the prompt) does not fit the model's "
                f"context of {context} tokens (prompt included); lower --max-tokens or serve the model with a "
                "longer context (vllm: --max-model-len)"
            )

    @abstractmethod
    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        """Generate a continuation of `prompt_ids`.

        Args:
            prompt_ids: the full prompt in token ids (chat prompt plus the trajectory so far).
            params: sampling parameters of this call.
            request_id: a stable id of the trajectory across its turns, for logs; the scripted
                backend reads the problem id from it.

        Returns:
            The generated ids, their text, why generation ended and the matched stop string.

        A backend that knows its context caps `max_tokens` so prompt plus generation fits it (the cap
        ends with "length").

        Raises:
            BackendUnavailable: the engine or server cannot serve (down, dead, closed, retries spent);
                `RequestRejected`, a subclass, when a server refuses this one request.
            ContextExceeded: the prompt alone fills the model's context.
            ConfigError: the request cannot be served as configured (e.g. no script for the problem,
                or requests keep being rejected and none has succeeded).
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Release the engine, threads and connections; later `generate` calls fail.

        Raises:
            BackendUnavailable: never; closing twice is allowed.
        """

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What goes into the run config: backend, model, revision or file hash, dtype, device, options.

        Raises:
            BackendUnavailable: never; it reports what the constructor resolved.
        """

    async def __aenter__(self) -> Generator:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def first_stop(text: str, stops: tuple[str, ...]) -> str | None:
    """The stop string whose match ends earliest in `text` (ties: the longer one), or None."""
    best: tuple[int, int, str] | None = None
    for stop in stops:
        at = text.find(stop)
        if at >= 0:
            key = (at + len(stop), -len(stop), stop)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


def ids_through_stop(tokenizer: PreTrainedTokenizerBase, token_ids: list[int], stop: str) -> int:
    """How many of `token_ids` to keep so their text ends at `stop`'s first match, the token that
    completes it kept whole (the `Generation` contract); `len(token_ids)` when the text lacks it.

    A prefix's text is a prefix of the whole text (an unfinished UTF-8 character at its end aside), so
    "contains `stop`" only turns true as ids are added: a binary search, O(log n) decodes.
    """
    low, high = 1, len(token_ids)
    if stop not in decode(tokenizer, token_ids):
        return high
    while low < high:
        mid = (low + high) // 2
        if stop in decode(tokenizer, token_ids[:mid]):
            high = mid
        else:
            low = mid + 1
    return high


class Usage:
    """What the engine did for a generator's requests, kept by the vllm and openai backends and shown
    in `describe()["usage"]` (so in a run's config.json): requests, prompt tokens, how many of them
    the engine found in its prefix cache (vLLM's `num_cached_tokens`; a server's
    `usage.prompt_tokens_details.cached_tokens`, which `vllm serve` reports with
    `--enable-prompt-tokens-details`), and tokens returned. Every turn of a trajectory resends the
    whole trajectory as its prompt, so the hit rate shows whether prefix caching spares that work."""

    def __init__(self) -> None:
        self.requests = self.prompt_tokens = self.cached_tokens = self.generated_tokens = 0
        self.cache_reported = False

    def add(self, prompt_tokens: int, cached_tokens: int | None, generated_tokens: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += int(cached_tokens or 0)
        self.cache_reported |= cached_tokens is not None
        self.generated_tokens += generated_tokens

    def as_dict(self) -> dict[str, Any]:
        """The counts, and the hit rate (None before any prompt, or when the engine never said)."""
        known = self.prompt_tokens and self.cache_reported
        hit_rate = self.cached_tokens / self.prompt_tokens if known else None
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_tokens if self.cache_reported else None,
            "prefix_cache_hit_rate": None if hit_rate is None else round(hit_rate, 4),
            "generated_tokens": self.generated_tokens,
        }


def decode(tokenizer: PreTrainedTokenizerBase, token_ids: list[int]) -> str:
    """The text of generated ids, as every backend reports it (special tokens such as EOS dropped)."""
    return str(tokenizer.decode(token_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))


def fit_context(
    prompt_ids: list[int], params: SamplingParams, context: int | None, request_id: str | None
) -> SamplingParams:
    """Cap `max_tokens` so prompt plus generation fits `context`, as every backend that knows it does.

    Raises:
        ContextExceeded: the prompt alone fills the context.
    """
    if context is None:
        return params
    room = context - len(prompt_ids)
    if room <= 0:
        raise ContextExceeded(
            f"request {request_id}: prompt of {len(prompt_ids)} tokens fills the model's context of {context}"
        )
    return params if params.max_tokens <= room else replace(params, max_tokens=room)


def one_line(exc: BaseException) -> str:
    """An exception as one line (`Type: message`), for errors that quote a library's multi-line text."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
