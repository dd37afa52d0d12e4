"""The openai backend: any OpenAI-compatible completions server (`vllm serve`, SGLang, llama.cpp).

The prompt goes out as token ids (the completions endpoint accepts a list of ints). vLLM returns the
generated ids (`return_token_ids`), keeps the stop string (`include_stop_str_in_output`) and names
it (`stop_reason`); for a server that returns only text, the text (plus the stop string the server
cut, when it says which) is re-tokenized, which can differ from the model's own ids: a documented
fallback, logged once. Requests go through the `openai` SDK with its own retries off: this module
retries 429, 408, 5xx, timeouts and connection errors with capped exponential backoff and jitter,
then raises `BackendUnavailable`, so an outage is never a wrong answer. Other 4xx are `ConfigError`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from typing import TYPE_CHECKING, Any

from thinc_bench.backends import _sources
from thinc_bench.backends.base import Generation, Generator, SamplingParams, decode, first_stop, one_line
from thinc_bench.errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
"""Where `vllm serve` listens by default."""

MAX_CONCURRENCY = 64
"""Requests in flight at once: enough to fill a vLLM server's batch without flooding a small one."""

MAX_RETRIES = 6
"""Retries after the first attempt; with the default backoff they span about a minute of outage."""

BACKOFF_S = 1.0
"""First retry delay; doubles on each retry."""

MAX_BACKOFF_S = 30.0
"""Cap on one retry delay (and on a server's Retry-After), so a long outage is still probed."""

TIMEOUT_S = 600.0
"""Per-request read timeout: a long reasoning turn on a busy server can take minutes."""

CONNECT_TIMEOUT_S = 10.0
"""A local or LAN server accepts connections in well under this, unless it is down."""

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
"""Statuses that mean 'try again later'; other 4xx mean the request itself is wrong."""

ERROR_SNIPPET_CHARS = 300
"""How much of a server's error body goes into our error message."""


class OpenAIGenerator(Generator):
    """An OpenAI-compatible completions server behind the Generator interface.

    Args:
        model: the served model name sent in each request (for `vllm serve PATH`, PATH).
        base_url: the server's `/v1` URL.
        tokenizer: folder, Hub id or `.gguf` of the served model's tokenizer, or a loaded tokenizer
            (a trainer's); None uses `model`.
        api_key_env: environment variable holding the API key; unset sends no key.
        max_concurrency: requests in flight at once.
        max_retries: retries of a retryable failure before `BackendUnavailable`.
        backoff_s: first retry delay in seconds (doubled per retry, jittered to 50-100%).
        max_backoff_s: cap on one delay, and on the server's Retry-After.
        timeout_s: read timeout of one attempt.
        connect_timeout_s: connect timeout of one attempt.
        vllm_extensions: send vLLM's fields (`return_token_ids`, `include_stop_str_in_output`,
            `top_k`); turn off for servers that reject unknown fields.

    Raises:
        ConfigError: a bad option or a tokenizer that cannot be loaded.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        tokenizer: str | PreTrainedTokenizerBase | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = MAX_CONCURRENCY,
        max_retries: int = MAX_RETRIES,
        backoff_s: float = BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        timeout_s: float = TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        vllm_extensions: bool = True,
    ) -> None:
        if (
            max_concurrency < 1
            or max_retries < 0
            or backoff_s < 0
            or max_backoff_s < backoff_s
            or timeout_s <= 0
        ):
            raise ConfigError(
                f"openai backend: max_concurrency={max_concurrency}, max_retries={max_retries}, backoff_s={backoff_s}, "
                f"max_backoff_s={max_backoff_s}, timeout_s={timeout_s}; need >= 1, >= 0, >= 0, >= backoff_s, > 0"
            )
        self._model = model
        self._base_url = base_url.rstrip("/")
        if tokenizer is None or isinstance(tokenizer, str):
            self._tokenizer_name = tokenizer or model
            self._tokenizer = _sources.load_tokenizer(self._tokenizer_name)
        else:
            self._tokenizer_name = str(getattr(tokenizer, "name_or_path", "") or "in-memory")
            self._tokenizer = tokenizer
        self._api_key_env = api_key_env
        self._max_concurrency = max_concurrency
        self._retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._vllm = vllm_extensions
        self._client: AsyncOpenAI | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._closed = False
        self._warned_retokenize = False

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        if self._closed:
            raise BackendUnavailable("openai backend is closed; create a new generator")
        body = self._body(prompt_ids, params)
        choice = await self._post_with_retries(body, request_id)
        return self._generation(choice, params)

    async def aclose(self) -> None:
        self._closed = True
        if self._client is not None:
            await self._client.close()
            self._client = None

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "model": self._model,
            "base_url": self._base_url,
            "tokenizer": self._tokenizer_name,
            "api_key_env": self._api_key_env,
            "max_concurrency": self._max_concurrency,
            "max_retries": self._retries,
            "timeout_s": self._timeout_s,
            "vllm_extensions": self._vllm,
        }

    def _body(self, prompt_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": list(prompt_ids),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.logprobs:
            body["logprobs"] = 0  # the sampled token's own logprob (OpenAI: number of top alternatives)
        extra: dict[str, Any] = {}
        if self._vllm:
            extra = {
                "return_token_ids": True,
                "include_stop_str_in_output": True,
                "skip_special_tokens": True,
            }
        if params.top_k is not None:
            extra["top_k"] = params.top_k
        body["extra_body"] = extra
        return body

    def _connect(self) -> tuple[AsyncOpenAI, asyncio.Semaphore]:
        """The client and semaphore, made on first use inside the caller's event loop."""
        if self._client is None or self._semaphore is None:
            from openai import AsyncOpenAI, Timeout

            self._client = AsyncOpenAI(
                base_url=self._base_url,
                api_key=os.environ.get(self._api_key_env) or "none",  # local servers take any key
                max_retries=0,  # ours below: bounded, logged, and ending in BackendUnavailable
                timeout=Timeout(self._timeout_s, connect=self._connect_timeout_s),
            )
            self._semaphore = asyncio.Semaphore(self._max_concurrency)
        return self._client, self._semaphore

    async def _post_with_retries(self, body: dict[str, Any], request_id: str | None) -> Any:
        import openai

        client, semaphore = self._connect()
        last = ""
        for attempt in range(self._retries + 1):
            retry_after: float | None = None
            try:
                async with semaphore:
                    completion = await client.completions.create(**body)
                if not completion.choices:
                    raise BackendUnavailable(
                        f"openai backend: {self._base_url} answered without choices: {completion}"
                    )
                return completion.choices[0]
            except openai.APIStatusError as exc:
                last = f"HTTP {exc.status_code}: {' '.join(str(exc.message).split())[:ERROR_SNIPPET_CHARS]}"
                if exc.status_code not in RETRY_STATUS and exc.status_code < 500:
                    raise ConfigError(
                        f"openai backend: {self._base_url} rejected request {request_id} with {last}; "
                        "check the model name, max_tokens and the server's max model length"
                    ) from exc
                retry_after = _retry_after(exc.response.headers.get("retry-after"))
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                last = one_line(exc)
            if attempt < self._retries:
                delay = min(self._max_backoff_s, self._backoff_s * 2**attempt) * random.uniform(0.5, 1.0)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, self._max_backoff_s))
                logger.warning(
                    "openai backend: %s (attempt %d); retrying in %.2f s", last, attempt + 1, delay
                )
                await asyncio.sleep(delay)
        raise BackendUnavailable(
            f"openai backend: {self._base_url} failed request {request_id} {self._retries + 1} times; last: {last}"
        )

    def _generation(self, choice: Any, params: SamplingParams) -> Generation:
        extra = choice.model_extra or {}
        finish = choice.finish_reason
        if finish not in ("stop", "length"):
            raise BackendUnavailable(
                f"openai backend: {self._base_url} ended a request with finish_reason {finish!r}"
            )
        stop_reason = extra.get("stop_reason")
        ids = extra.get("token_ids")
        text = str(choice.text)
        logprobs = None
        if ids is None:
            ids = self._retokenize(text, finish, stop_reason, params)
        elif params.logprobs and choice.logprobs is not None:
            # One per returned id; a server whose list does not line up with its ids gives none.
            values = choice.logprobs.token_logprobs or []
            if len(values) == len(ids):
                logprobs = [float("nan") if v is None else float(v) for v in values]
        token_ids = [int(i) for i in ids]
        text = decode(self._tokenizer, token_ids)
        stop = None
        if finish == "stop":
            stop = (
                stop_reason
                if isinstance(stop_reason, str) and stop_reason in params.stop
                else first_stop(text, params.stop)
            )
        return Generation(token_ids=token_ids, text=text, finish_reason=finish, stop=stop, logprobs=logprobs)

    def _retokenize(self, text: str, finish: str, stop_reason: Any, params: SamplingParams) -> list[int]:
        """Ids for a server that returns only text: put back a stripped stop string, add EOS at a model stop."""
        if not self._warned_retokenize:
            logger.warning("openai backend: %s returns no token ids; re-tokenizing its text", self._base_url)
            self._warned_retokenize = True
        if finish == "stop" and isinstance(stop_reason, str) and not text.endswith(stop_reason):
            text += stop_reason
        ids = [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False)]
        eos = self._tokenizer.eos_token_id
        if finish == "stop" and first_stop(text, params.stop) is None and eos is not None:
            ids.append(int(eos))
        return ids


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header in its seconds form; the HTTP-date form is ignored."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
