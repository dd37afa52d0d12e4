"""The openai backend: any OpenAI-compatible completions server (`vllm serve`, SGLang, llama.cpp).

The prompt goes out as token ids (the completions endpoint accepts a list of ints), with every
sampling field explicit (a server fills unset `top_k`, `min_p`, `repetition_penalty` from the model's
generation_config.json: Qwen3's top_k 20). vLLM returns the generated ids (`return_token_ids`), keeps
the stop string (`include_stop_str_in_output`) and names it (`stop_reason`; SGLang: `matched_stop`);
for a server that returns only text, the text (plus the stop string the server cut, when it says
which) is re-tokenized, which can differ from the model's own ids: a documented fallback, logged once.
A server that cuts stop strings and names none cannot tell a stop from the model's end, so it is
refused (`ConfigError`). Logprobs are what the server returns: start `vllm serve` with
`--logprobs-mode processed_logprobs` for RL.

A request carries at most `MAX_STOPS` (4) stop strings, OpenAI's limit, which compatible servers copy
(more is an HTTP 400 for every request: markdown with `--exec-on code_close` has 5). The first four
go out, in the caller's order (`exec_stops`: the output opener, then the common closers before the
rare `~~~\r\n`); the others are enforced here: a completion whose text holds one before any sent stop
is cut after the token that completes it, ids and logprobs too, and reported as a stop on it, as if
the server had stopped there (the rollout does not re-scan a turn for a close it was not stopped
at). The cost is the tokens the server generated past it, discarded.

The sampling fields OpenAI lacks and vLLM's own are extensions: `api_extensions` (`_extensions`) sends them to
servers that take them and drops them for an API that refuses them by name (HTTP 400).

Requests go through the `openai` SDK with its own retries off: this module retries 429, 408, 5xx,
timeouts and connection errors with capped exponential backoff and jitter, then raises
`BackendUnavailable`, so an outage is never a wrong answer. A 4xx naming the context limit is
`ContextExceeded` (after one retry capped to the context it names); another 4xx is `RequestRejected`
for that sample, and `ConfigError` (the run stops) once `REJECTION_QUORUM` requests were all refused
with the same status and none succeeded.

`base_url` may name several servers (replicas of one model, `_servers.ServerPool`): each attempt goes
to the server with the fewest requests in flight; an outage of one is retried at once on another
(a retry of the budget is one round over the ready servers, so a single server behaves as before),
and a server that keeps failing is set aside for a while. With several servers, `check` asks each for
its models (`GET /models`: the served name, vLLM's `max_model_len`), and each server's first completion
says whether it returns token ids and keeps stop strings; servers that disagree are refused
(`ConfigError` naming both). A server down at start is checked when it first answers.
The module stays whole (about 600 lines): the request, its routing and retries, and the reading of
the answer share one per-server state and one wording of errors; the pool's bookkeeping is apart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from thinc_bench.backends import _sources
from thinc_bench.backends._extensions import (
    API_EXTENSIONS,
    EXTENSION_FIELDS,
    extension_fields,
    refuses_unknown_field,
)
from thinc_bench.backends._servers import SET_ASIDE_S, Server, ServerPool, parse_urls
from thinc_bench.backends.base import (
    Generation,
    Generator,
    SamplingParams,
    Usage,
    decode,
    first_stop,
    fit_context,
    ids_through_stop,
    one_line,
)
from thinc_bench.errors import BackendUnavailable, ConfigError, ContextExceeded, RequestRejected

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FunctionCall:
    """One call a function-calling server parsed out of the model's turn (`arguments` as sent: JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatTurn:
    """One assistant turn from the chat-completions endpoint: reasoning (a server's reasoning parser),
    content, and the parsed tool calls."""

    content: str
    reasoning: str
    calls: tuple[FunctionCall, ...]
    finish_reason: str


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

REJECTION_QUORUM = 8
"""Refusals with one status and no success before the run stops: a wrong model name or option fails
every request, a few bad requests among good ones are recorded per sample."""

MAX_STOPS = 4
"""Stop strings one request carries (OpenAI's `stop` takes up to 4); `generate` cuts at the rest
(`chat` turns carry none: function calling stops at the model's end of turn)."""

STOP_FIELDS = ("stop_reason", "matched_stop")
"""Where servers name the stop that ended a choice: vLLM (`stop_reason`), SGLang (`matched_stop`);
a string is a stop string, None or an int (a token id) the model's own end."""

UNLISTED_STATUSES = frozenset({404, 405, 501})
"""Answers to `GET /models` that mean "this server lists no models" rather than an outage."""

_CONTEXT_LIMIT = re.compile(r"maximum context length is (\d+)|max_model_len\D{0,3}(\d+)", re.I)
"""How vLLM (and servers copying OpenAI's wording) say a request does not fit, with the context."""


class OpenAIGenerator(Generator):
    """An OpenAI-compatible completions server behind the Generator interface.

    Args:
        model: the served model name sent in each request (for `vllm serve PATH`, PATH).
        base_url: the server's `/v1` URL, or several servers of the same model (a comma list or a
            list of URLs): requests are spread over them and an outage of one is retried on another.
        tokenizer: folder, Hub id or `.gguf` of the served model's tokenizer, or a loaded tokenizer
            (a trainer's); None uses `model`.
        api_key_env: environment variable holding the API key; unset sends no key.
        max_concurrency: requests in flight at once per server (the total is this times the servers).
        max_retries: retries of a retryable failure before `BackendUnavailable`.
        backoff_s: first retry delay in seconds (doubled per retry, jittered to 50-100%).
        max_backoff_s: cap on one delay, and on the server's Retry-After.
        timeout_s: read timeout of one attempt.
        connect_timeout_s: connect timeout of one attempt.
        api_extensions: `auto`, `vllm` or `none` (`API_EXTENSIONS`): whether requests carry the
            fields OpenAI lacks (`EXTENSION_FIELDS`: sampling fields vLLM, SGLang and llama.cpp read,
            vLLM's token ids and kept stop strings). `describe()` says what requests send now.
        vllm_extensions: the older switch: True is `vllm`, False `none` (overrides `api_extensions`).
        context_length: the served model's context (prompt plus generation), to cap each request and
            check the budget at start; None learns it from the servers' `GET /models` (several
            servers) or from the server's first context-limit error.
        set_aside_s: how long a server that keeps failing gets no requests (several servers).

    Raises:
        ConfigError: a bad option or a tokenizer that cannot be loaded.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] = DEFAULT_BASE_URL,
        tokenizer: str | PreTrainedTokenizerBase | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = MAX_CONCURRENCY,
        max_retries: int = MAX_RETRIES,
        backoff_s: float = BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        timeout_s: float = TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        api_extensions: str = "auto",
        vllm_extensions: bool | None = None,
        context_length: int | None = None,
        set_aside_s: float = SET_ASIDE_S,
    ) -> None:
        if (
            max_concurrency < 1
            or max_retries < 0
            or backoff_s < 0
            or max_backoff_s < backoff_s
            or timeout_s <= 0
            or set_aside_s < 0
        ):
            raise ConfigError(
                f"openai backend: max_concurrency={max_concurrency}, max_retries={max_retries}, backoff_s={backoff_s}, "
                f"max_backoff_s={max_backoff_s}, timeout_s={timeout_s}, set_aside_s={set_aside_s}; "
                "need >= 1, >= 0, >= 0, >= backoff_s, > 0, >= 0"
            )
        if vllm_extensions is not None:
            api_extensions = "vllm" if vllm_extensions else "sampling"
        if api_extensions not in (*API_EXTENSIONS, "sampling"):
            raise ConfigError(
                f"openai backend: api_extensions={api_extensions!r}; use one of {', '.join(API_EXTENSIONS)}"
            )
        self._model = model
        self._pool = ServerPool(
            parse_urls(base_url if isinstance(base_url, str) else tuple(base_url)), set_aside_s
        )
        self._base_url = ",".join(s.url for s in self._pool.servers)
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
        self._extensions = api_extensions
        self._vllm = api_extensions in ("auto", "vllm")  # False once an `auto` server refused an extension
        self._semaphore: asyncio.Semaphore | None = None
        self._closed = False
        self._warned_retokenize = False
        self._context = context_length
        self._succeeded = 0
        self._rejected: dict[int, int] = {}
        self._usage = Usage()

    @property
    def context_length(self) -> int | None:
        """The `context_length` option, or what the servers said (`GET /models` of several, or a
        context-limit error); None before."""
        return self._context

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, *, request_id: str | None = None
    ) -> Generation:
        if self._closed:
            raise BackendUnavailable("openai backend is closed; create a new generator")
        for attempt in range(2):  # the second only after the server named a context we did not know
            params = fit_context(prompt_ids, params, self._context, request_id)
            try:
                choice, server = await self._post_with_retries(self._body(prompt_ids, params), request_id)
                break
            except ContextExceeded as exc:
                learned = _context_of(str(exc))
                if attempt or learned is None or learned >= len(prompt_ids) + params.max_tokens:
                    raise  # nothing a capped retry would change
                logger.info("openai backend: %s serves a context of %d tokens", self._base_url, learned)
                self._context = learned
        self._succeeded += 1
        self._observe(server.url, choice, params)
        generation = self._generation(choice, params, server.url)
        self._count_tokens(len(generation.token_ids))  # a turn arrives whole
        return generation

    def check(self, max_tokens: int) -> None:
        """With several servers, first ask each for its models (the served name and context) and refuse
        servers that disagree; a server that does not answer is set aside and checked when it does.

        Raises:
            ConfigError: a server does not serve the model, the servers disagree, or `max_tokens` does
                not fit the context.
        """
        if len(self._pool) > 1:
            with concurrent.futures.ThreadPoolExecutor(1) as thread:  # its own loop: callers may be in one
                listings = thread.submit(asyncio.run, self._list_all()).result()
            for server, listing in zip(self._pool.servers, listings, strict=True):
                if isinstance(listing, BaseException):
                    if not _is_outage(listing):
                        raise ConfigError(
                            f"openai backend: {server.url} answered GET /models with {one_line(listing)}; "
                            "check the URL and --api-key-env"
                        ) from listing
                    self._pool.set_aside(server, time.monotonic())
                    logger.warning(
                        "openai backend: %s did not answer at start (%s); set aside, checked when it answers",
                        server.url,
                        one_line(listing),
                    )
                else:
                    self._agree_listing(server, listing)
        super().check(max_tokens)

    async def aclose(self) -> None:
        self._closed = True
        if len(self._pool) > 1 and any(s.sent for s in self._pool.servers):
            logger.info("openai backend: requests per server: %s", self._pool.summary())
        for server in self._pool.servers:
            if server.client is not None:
                await server.client.close()
                server.client = None

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "model": self._model,
            "base_url": self._base_url,
            "servers": [s.url for s in self._pool.servers],
            "set_aside_s": self._pool.set_aside_s,
            "tokenizer": self._tokenizer_name,
            "api_key_env": self._api_key_env,
            "max_concurrency": self._max_concurrency,
            "max_retries": self._retries,
            "timeout_s": self._timeout_s,
            "api_extensions": self._extensions,
            "extensions_sent": self._vllm,
            "request_fields": self._request_fields(),
            "context_length": self._context,
            "usage": self._usage.as_dict(),
        }

    @property
    def sends_extensions(self) -> bool:
        """Whether requests carry fields OpenAI lacks (`api_extensions`; False once an `auto` server
        refused one): function calling then sends each turn's reasoning back too."""
        return self._vllm

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        params: SamplingParams,
        *,
        template_kwargs: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> ChatTurn:
        """One assistant turn through function calling (`tools=[...]`; the server renders the prompt and
        parses the calls, e.g. `vllm serve --enable-auto-tool-choice --tool-call-parser hermes`).

        Raises:
            BackendUnavailable: the server is out of reach after the retries, or answered oddly.
            RequestRejected, ContextExceeded, ConfigError: as `generate`.
        """
        if self._closed:
            raise BackendUnavailable("openai backend is closed; create a new generator")
        body = self._body([], params)
        del body["prompt"]
        body |= {"messages": messages, "tools": tools}
        extra = {k: v for k, v in body["extra_body"].items() if k not in ("return_token_ids",)}
        extra.pop("include_stop_str_in_output", None)
        if template_kwargs:
            extra["chat_template_kwargs"] = dict(template_kwargs)
        body["extra_body"] = extra
        choice, server = await self._post_with_retries(body, request_id)
        self._succeeded += 1
        message = choice.message
        if choice.finish_reason not in ("stop", "length", "tool_calls"):
            raise BackendUnavailable(
                f"openai backend: {server.url} ended a chat request with finish_reason {choice.finish_reason!r}"
            )
        extra_fields = message.model_extra or {}
        reasoning = extra_fields.get("reasoning_content") or extra_fields.get("reasoning") or ""
        calls = tuple(
            FunctionCall(str(c.id), str(c.function.name), str(c.function.arguments))
            for c in (message.tool_calls or [])
        )
        return ChatTurn(str(message.content or ""), str(reasoning), calls, str(choice.finish_reason))

    def _request_fields(self) -> list[str]:
        """The fields a request sends now (besides the prompt or messages, stop, seed and logprobs)."""
        body = self._body([], SamplingParams())
        return sorted([k for k in body if k not in ("prompt", "extra_body")] + list(body["extra_body"]))

    def _body(self, prompt_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        """The request: every sampling field explicit, so the server's defaults never apply (with
        `api_extensions` off, OpenAI's own fields only: the server's defaults apply to the others)."""
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": list(prompt_ids),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "presence_penalty": params.presence_penalty,
            "frequency_penalty": params.frequency_penalty,
        }
        if params.stop:
            body["stop"] = list(params.stop[:MAX_STOPS])
        if params.seed is not None:
            body["seed"] = params.seed
        if params.logprobs:
            body["logprobs"] = 0  # the sampled token's own logprob (OpenAI: number of top alternatives)
        extra = extension_fields(params, self._extensions, vllm=self._vllm)
        body["extra_body"] = extra
        return body

    def _new_client(self, url: str) -> AsyncOpenAI:
        from openai import AsyncOpenAI, Timeout

        return AsyncOpenAI(
            base_url=url,
            api_key=os.environ.get(self._api_key_env) or "none",  # local servers take any key
            max_retries=0,  # ours below: bounded, logged, and ending in BackendUnavailable
            timeout=Timeout(self._timeout_s, connect=self._connect_timeout_s),
        )

    def _gate(self) -> asyncio.Semaphore:
        """The semaphore of requests in flight, made on first use inside the caller's event loop."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._max_concurrency * len(self._pool))
        return self._semaphore

    async def _post_with_retries(self, body: dict[str, Any], request_id: str | None) -> tuple[Any, Server]:
        """The first choice of a request and the server that gave it. Each retry of the budget is a
        round over the ready servers, so an outage of one server costs no backoff while another is up."""
        semaphore = self._gate()
        last = ""
        attempts = 0
        for retry in range(self._retries + 1):
            retry_after: float | None = None
            tried: set[str] = set()
            while True:
                async with semaphore:  # routed once a slot is free, on the load of that moment
                    server = self._pool.pick(tried, time.monotonic())
                    if server is None:
                        break
                    tried.add(server.url)
                    attempts += 1
                    server.outstanding += 1  # counted from the routing on, so the next pick sees it
                    server.sent += 1
                    try:
                        choice, last, retry_after = await self._attempt(server, body, request_id)
                    finally:
                        server.outstanding -= 1
                if choice is not None:
                    return choice, server
                if len(self._pool) > 1:
                    last = f"{server.url}: {last}"
                    logger.info("openai backend: %s (request %s)", last, request_id)
                if self._pool.failed(server, time.monotonic()):
                    logger.warning(
                        "openai backend: %s failed %d attempts in a row; set aside for %.0f s",
                        server.url,
                        server.failures_in_a_row,
                        self._pool.set_aside_s,
                    )
            if retry < self._retries:
                delay = min(self._max_backoff_s, self._backoff_s * 2**retry) * random.uniform(0.5, 1.0)
                if retry_after is not None:
                    delay = max(delay, min(retry_after, self._max_backoff_s))
                logger.warning("openai backend: %s (attempt %d); retrying in %.2f s", last, attempts, delay)
                await asyncio.sleep(delay)
        raise BackendUnavailable(
            f"openai backend: {self._base_url} failed request {request_id} {attempts} times; last: {last}"
        )

    async def _attempt(
        self, server: Server, body: dict[str, Any], request_id: str | None
    ) -> tuple[Any, str, float | None]:
        """One attempt on one server: (choice, "", None), or (None, what failed, Retry-After) for an
        outage worth retrying.

        Raises:
            ContextExceeded, RequestRejected, ConfigError: the server refused the request itself (4xx).
            ConfigError: the server disagrees with the others (its start-up check).
        """
        import openai

        try:
            await self._check_server(server)
            choice = await self._post_once(server, body)
        except openai.APIStatusError as exc:
            last = f"HTTP {exc.status_code}: {' '.join(str(exc.message).split())[:ERROR_SNIPPET_CHARS]}"
            if self._refuses_extensions(exc, body):
                return await self._attempt(server, body, request_id)
            if exc.status_code not in RETRY_STATUS and exc.status_code < 500:
                self._pool.succeeded(server)  # it answered: the request is wrong, not the server
                raise self._refused(server.url, exc.status_code, last, request_id) from exc
            return None, last, _retry_after(exc.response.headers.get("retry-after"))
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return None, one_line(exc), None
        self._pool.succeeded(server)
        return choice, "", None

    def _refuses_extensions(self, exc: Any, body: dict[str, Any]) -> bool:
        """Whether an `auto` server refused a field of `EXTENSION_FIELDS` by name (OpenAI: "Unrecognized
        request argument supplied: top_k"); if so, they are dropped from `body` and every later request."""
        extra = body.get("extra_body") or {}
        sent = [f for f in EXTENSION_FIELDS if f in extra]
        message = str(getattr(exc, "message", "")) + str(getattr(exc, "body", ""))
        if self._extensions != "auto" or not refuses_unknown_field(exc.status_code, message, sent):
            return False
        if self._vllm:
            self._vllm = False
            logger.warning(
                "openai backend: %s refused a field OpenAI lacks; sending only OpenAI's fields from now on "
                "(not sent: %s; the server's defaults apply to top_k, min_p, repetition_penalty)",
                self._base_url,
                ", ".join(f"{f}={extra[f]}" for f in sent),
            )
        body["extra_body"] = {k: v for k, v in extra.items() if k not in EXTENSION_FIELDS}
        return True

    async def _post_once(self, server: Server, body: dict[str, Any]) -> Any:
        if server.client is None:
            server.client = self._new_client(server.url)
        create = (
            server.client.chat.completions.create if "messages" in body else server.client.completions.create
        )
        completion = await create(**body)
        if not completion.choices:
            raise BackendUnavailable(f"openai backend: {server.url} answered without choices: {completion}")
        usage = completion.usage  # the engine's own counts; cached tokens when the server reports them
        self._usage.add(
            int(getattr(usage, "prompt_tokens", 0) or 0),
            getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )
        return completion.choices[0]

    async def _check_server(self, server: Server) -> None:
        """The start-up check of a server that was down at start, before its first request."""
        if server.checked or len(self._pool) == 1:
            return
        async with server.lock:
            if not server.checked:
                if server.client is None:
                    server.client = self._new_client(server.url)
                self._agree_listing(server, await _listing(server.client))

    async def _list_all(self) -> list[dict[str, Any] | None | BaseException]:
        """Every server's model listing, asked at once with clients of this (short-lived) loop."""
        clients = [self._new_client(s.url) for s in self._pool.servers]
        try:
            return await asyncio.gather(*(_listing(c) for c in clients), return_exceptions=True)
        finally:
            for client in clients:
                await client.close()

    def _agree_listing(self, server: Server, listing: dict[str, Any] | None) -> None:
        """Refuse a server that does not serve the model, or whose context differs from the others'.

        Raises:
            ConfigError: as described.
        """
        if listing is not None and self._model not in listing:
            serving = [s.url for s in self._pool.servers if s.checked]
            also = f" ({serving[0]} does)" if serving else ""
            raise ConfigError(
                f"openai backend: {server.url} serves {', '.join(sorted(listing)) or 'no model'}, not "
                f"{self._model!r}{also}; start it with the same model or drop it from --base-url"
            )
        context = None if listing is None else listing[self._model]
        self._pool.agree(
            server.url, "the model list (GET /models)", "missing" if listing is None else "present"
        )
        self._pool.agree(server.url, "the context length (max_model_len)", context)
        if self._context is None and isinstance(context, int):
            self._context = context
        server.checked = True

    def _observe(self, url: str, choice: Any, params: SamplingParams) -> None:
        """Hold a server's first completion against the other servers': token ids returned or not, stop
        strings kept or cut (seen on its first completion that ended on a named stop string).

        Raises:
            ConfigError: two servers differ.
        """
        if len(self._pool) == 1:
            return
        extra = choice.model_extra or {}
        self._pool.agree(url, "returning token ids", extra.get("token_ids") is not None)
        named = next((extra[f] for f in STOP_FIELDS if isinstance(extra.get(f), str)), None)
        if choice.finish_reason == "stop" and named in params.stop:
            self._pool.agree(url, "keeping stop strings", str(choice.text).endswith(str(named)))

    def _refused(self, url: str, status: int, last: str, request_id: str | None) -> Exception:
        """The error for a 4xx: the context limit, one refused request, or (quorum) a run that cannot work."""
        if _CONTEXT_LIMIT.search(last) or "context length" in last.lower():
            return ContextExceeded(f"openai backend: {url}: request {request_id}: {last}")
        self._rejected[status] = self._rejected.get(status, 0) + 1
        if not self._succeeded and len(self._rejected) == 1 and self._rejected[status] >= REJECTION_QUORUM:
            return ConfigError(
                f"openai backend: {url} refused all {self._rejected[status]} requests so far and "
                f"accepted none; last: {last}; check the model name, the sampling options and --max-tokens"
            )
        return RequestRejected(f"openai backend: {url} refused request {request_id} with {last}")

    def _generation(self, choice: Any, params: SamplingParams, url: str) -> Generation:
        extra = choice.model_extra or {}
        finish = choice.finish_reason
        if finish not in ("stop", "length"):
            raise BackendUnavailable(f"openai backend: {url} ended a request with finish_reason {finish!r}")
        named = [extra[f] for f in STOP_FIELDS if f in extra]
        stop_reason = next((v for v in named if isinstance(v, str)), None)
        ids = extra.get("token_ids")
        text = str(choice.text)
        logprobs = None
        if ids is None:
            ambiguous = finish == "stop" and params.stop and not named
            if ambiguous and first_stop(text, params.stop) is None:
                raise ConfigError(
                    f"openai backend: {url} ended a request with finish_reason 'stop' but neither kept "
                    f"the stop string nor named it ({' or '.join(STOP_FIELDS)}), so a stop cannot be told from "
                    "the model's end; serve the model with vLLM or SGLang (or use --api-extensions vllm)"
                )
            ids = self._retokenize(text, finish, stop_reason, params, url)
        elif params.logprobs and choice.logprobs is not None:
            # One per returned id; a server whose list does not line up with its ids gives none.
            values = choice.logprobs.token_logprobs or []
            if len(values) == len(ids):
                logprobs = [float("nan") if v is None else float(v) for v in values]
        token_ids = [int(i) for i in ids]
        text = decode(self._tokenizer, token_ids)
        unsent = first_stop(text, params.stop)
        if unsent is not None and unsent not in params.stop[:MAX_STOPS]:  # ran past a stop held back
            keep = ids_through_stop(self._tokenizer, token_ids, unsent)
            token_ids, logprobs = token_ids[:keep], None if logprobs is None else logprobs[:keep]
            text, finish, stop_reason = decode(self._tokenizer, token_ids), "stop", unsent
        stop = None
        if finish == "stop":
            stop = (
                stop_reason
                if isinstance(stop_reason, str) and stop_reason in params.stop
                else first_stop(text, params.stop)
            )
        return Generation(token_ids=token_ids, text=text, finish_reason=finish, stop=stop, logprobs=logprobs)

    def _retokenize(
        self, text: str, finish: str, stop_reason: Any, params: SamplingParams, url: str
    ) -> list[int]:
        """Ids for a server that returns only text: put back a stripped stop string, add EOS at a model stop."""
        if not self._warned_retokenize:
            logger.warning("openai backend: %s returns no token ids; re-tokenizing its text", url)
            self._warned_retokenize = True
        if finish == "stop" and isinstance(stop_reason, str) and not text.endswith(stop_reason):
            text += stop_reason
        ids = [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False)]
        eos = self._tokenizer.eos_token_id
        if finish == "stop" and first_stop(text, params.stop) is None and eos is not None:
            ids.append(int(eos))
        return ids


def _is_outage(exc: BaseException) -> bool:
    """Whether an error means "the server is out of reach for now" (retried), not "the request is wrong"."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUS or exc.status_code >= 500
    return isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError))


async def _listing(client: AsyncOpenAI) -> dict[str, Any] | None:
    """A server's models as {id: max_model_len or None}; None for a server that lists none (404).

    Raises:
        openai.APIStatusError, openai.APIConnectionError, openai.APITimeoutError: as the server answers.
    """
    import openai

    try:
        page = await client.models.list()
    except openai.APIStatusError as exc:
        if exc.status_code in UNLISTED_STATUSES:
            return None
        raise
    return {str(m.id): (m.model_extra or {}).get("max_model_len") for m in page.data}


def _context_of(message: str) -> int | None:
    """The context length a server's error message names, if it names one."""
    match = _CONTEXT_LIMIT.search(message)
    return None if match is None else int(match.group(1) or match.group(2))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header in its seconds form; the HTTP-date form is ignored."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
