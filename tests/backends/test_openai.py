"""The openai backend over real sockets: a stub HTTP server for retries and outages, `vllm serve` for real.

The stub is a real `ThreadingHTTPServer` on 127.0.0.1 that answers POSTs from a list of canned
responses (status, JSON body, headers, delay). Retry tests use millisecond backoffs so each finishes
well under a second; the `vllm` tests start a
real `vllm serve` (vLLM's CPU build, SmolLM2) on 127.0.0.1 and stop it afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from thinc_bench.backends import BackendUnavailable, Generation, SamplingParams, load_generator
from thinc_bench.backends.base import decode
from thinc_bench.backends.openai import REJECTION_QUORUM, OpenAIGenerator
from thinc_bench.errors import ConfigError, ContextExceeded, RequestRejected
from thinc_bench.trajectory import exec_stops

FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 2.0, "connect_timeout_s": 1.0}
REAL_SERVER = {"timeout_s": 120.0}
"""A real `vllm serve` on 2 CPU cores decodes 9-16 tokens/s: a 200-token answer takes longer than FAST's 2 s."""
STOP = ("```output",)
CODE = "```python\nprint(2 + 3)\n```\n```output"
SERVER_START_S = 240
"""`vllm serve` of SmolLM2 starts in 30-90 s on 2 busy cores; beyond this it is broken, not slow."""

STUB_POLL_S = 0.02
"""Stub server shutdown latency; the default 0.5 s would dominate each test."""


@dataclass
class Canned:
    """One stub response: HTTP status, JSON body, extra headers, and a delay before answering."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class StubServer:
    """A real HTTP server on 127.0.0.1 that replays `Canned` responses (the last one repeats)."""

    def __init__(self, responses: list[Canned], models: Canned | None = None) -> None:
        self.responses = list(responses)
        self.models = models  # the answer to GET /v1/models; None: 404, as a server without the route
        self.max_stops: int | None = None  # refuse a request with more stop strings, as OpenAI's API does
        self.requests: list[dict[str, Any]] = []
        self.gets = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub.gets += 1
                canned = stub.models or Canned(404, {"error": "not found"})
                payload = json.dumps(canned.body).encode()
                self.send_response(canned.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                stub.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "json": json.loads(self.rfile.read(length)),
                    }
                )
                stops = stub.requests[-1]["json"].get("stop") or []
                if stub.max_stops is not None and len(stops) > stub.max_stops:
                    error = {
                        "message": f"'stop' has {len(stops)} items; at most {stub.max_stops}",
                        "code": 400,
                    }
                    canned = Canned(400, {"object": "error", "type": "BadRequestError", **error})
                else:
                    canned = stub.responses.pop(0) if len(stub.responses) > 1 else stub.responses[0]
                time.sleep(canned.delay_s)
                payload = json.dumps(canned.body).encode()
                try:
                    self.send_response(canned.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in canned.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up, which is what a delay test wants

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(STUB_POLL_S,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def stub_server() -> Iterator[type[StubServer]]:
    """A factory for stub servers; every server made is shut down after the test."""
    made: list[StubServer] = []

    class Factory(StubServer):
        def __init__(self, responses: list[Canned], models: Canned | None = None) -> None:
            super().__init__(responses, models)
            made.append(self)

    yield Factory
    for server in made:
        server.close()


def completion_body(text: str, **choice: Any) -> dict[str, Any]:
    """A completions response in the OpenAI format with one choice."""
    return {
        "id": "cmpl-test",
        "object": "text_completion",
        "created": 0,
        "model": "smollm2",
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None, **choice}],
    }


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make(base_url: str | list[str], tokenizer: str, **options: Any) -> OpenAIGenerator:
    gen = load_generator("openai", "smollm2", base_url=base_url, tokenizer=tokenizer, **{**FAST, **options})
    assert isinstance(gen, OpenAIGenerator)
    return gen


def generate(
    gen: OpenAIGenerator, params: SamplingParams | None = None, prompt: list[int] | None = None
) -> Generation:
    async def go() -> Generation:
        try:
            return await gen.generate(
                prompt or [1, 2, 3], params or SamplingParams(stop=STOP), request_id="p/0"
            )
        finally:
            await gen.aclose()

    return asyncio.run(go())


@pytest.fixture
def ok_body(smollm2_tokenizer: Any) -> dict[str, Any]:
    ids = smollm2_tokenizer.encode(CODE, add_special_tokens=False)
    return completion_body(CODE, token_ids=ids, stop_reason="```output")


def test_prompt_goes_out_as_token_ids_with_every_sampling_field(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    server = stub_server([Canned(200, ok_body), Canned(200, ok_body)])
    gen = make(server.base_url, smollm2_path)
    generate(gen, SamplingParams(stop=STOP, top_k=20, seed=3, max_tokens=50, temperature=0.6, top_p=0.95))
    sent = server.requests[0]
    assert sent["path"] == "/v1/completions" and sent["json"]["prompt"] == [1, 2, 3]
    fields = ("model", "stop", "seed", "max_tokens", "temperature", "top_p", "top_k", "min_p")
    assert {k: sent["json"][k] for k in fields} == {
        "model": "smollm2",
        "stop": ["```output"],
        "seed": 3,
        "max_tokens": 50,
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.0,
    }
    # Defaults go out too: a server must not fill them from the model's generation_config.json.
    penalties = ("repetition_penalty", "presence_penalty", "frequency_penalty")
    assert [sent["json"][k] for k in penalties] == [1.0, 0.0, 0.0]
    assert sent["json"]["return_token_ids"] is True and sent["json"]["include_stop_str_in_output"] is True
    generate(make(server.base_url, smollm2_path, vllm_extensions=False), SamplingParams(stop=STOP))
    plain = server.requests[1]["json"]
    assert (plain["top_k"], plain["min_p"], plain["repetition_penalty"]) == (-1, 0.0, 1.0)  # -1: every token
    assert "return_token_ids" not in plain


def test_returned_token_ids_and_stop_reason_become_the_generation(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    server = stub_server([Canned(200, ok_body)])
    generation = generate(make(server.base_url, smollm2_path))
    assert generation.token_ids == ok_body["choices"][0]["token_ids"]
    assert (generation.text, generation.finish_reason, generation.stop) == (CODE, "stop", "```output")


def test_five_stop_strings_go_out_as_four_and_the_fifth_is_cut_here(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    stops = exec_stops("markdown", "code_close")  # 5: the output opener and four code closers
    # The model closes a tilde fence with CRLF (the stop held back) and writes on to max_tokens.
    closed = "~~~python\r\nprint(2 + 3)\r\n~~~\r\n"
    ids = smollm2_tokenizer.encode(closed + "That prints 5.", add_special_tokens=False)
    values = [-0.5 - i for i in range(len(ids))]
    body = completion_body(closed + "That prints 5.", token_ids=ids, finish_reason="length", stop_reason=None)
    body["choices"][0]["logprobs"] = {"token_logprobs": values, "tokens": [], "text_offset": []}
    server = stub_server([Canned(200, body)])
    server.max_stops = 4
    generation = generate(make(server.base_url, smollm2_path), SamplingParams(stop=stops, logprobs=True))
    assert server.requests[0]["json"]["stop"] == ["```output", "```\n", "```\r\n", "~~~\n"]
    assert (generation.text, generation.finish_reason, generation.stop) == (closed, "stop", "~~~\r\n")
    # The model's own ids, up to the one completing the stop ('\r', '\n' here: not encode(closed)'s '\r\n').
    kept = len(generation.token_ids)
    assert generation.token_ids == ids[:kept] and "~~~\r\n" not in decode(smollm2_tokenizer, ids[: kept - 1])
    assert generation.logprobs == values[:kept]
    # The stub refuses what the bug sent: all five.
    refused = urllib.request.Request(
        f"{server.base_url}/completions",
        data=json.dumps({"model": "smollm2", "prompt": [1], "stop": list(stops)}).encode(),
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError, match="400"):
        urllib.request.urlopen(refused, timeout=2)


@pytest.mark.parametrize("returns_ids", [True, False])
def test_a_held_back_stop_before_the_one_the_server_stopped_at_wins(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any, returns_ids: bool
) -> None:
    closed = "Closed:\n~~~python\r\nprint(1)\r\n~~~\r\n"
    text = closed + "Now ```output"  # the server stopped at the sent opener, past the unsent close
    ids = {"token_ids": smollm2_tokenizer.encode(text, add_special_tokens=False)} if returns_ids else {}
    server = stub_server([Canned(200, completion_body(text, stop_reason="```output", **ids))])
    server.max_stops = 4
    generation = generate(
        make(server.base_url, smollm2_path), SamplingParams(stop=exec_stops("markdown", "code_close"))
    )
    assert (generation.text, generation.finish_reason, generation.stop) == (closed, "stop", "~~~\r\n")
    ids_all = smollm2_tokenizer.encode(text, add_special_tokens=False)
    kept = len(generation.token_ids)
    assert generation.token_ids == ids_all[:kept] and "~~~\r\n" not in decode(
        smollm2_tokenizer, ids_all[: kept - 1]
    )


def test_api_key_is_read_from_the_named_environment_variable(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THINC_TEST_KEY", "sk-test-123")
    server = stub_server([Canned(200, ok_body)])
    generate(make(server.base_url, smollm2_path, api_key_env="THINC_TEST_KEY"))
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-test-123"


def test_503_then_success_is_retried_transparently(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    server = stub_server(
        [Canned(503, {"error": "loading"}), Canned(503, {"error": "loading"}), Canned(200, ok_body)]
    )
    assert generate(make(server.base_url, smollm2_path)).text == CODE
    assert len(server.requests) == 3


def test_persistent_503_raises_backend_unavailable_after_all_retries(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(503, {"error": "overloaded"})])
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"failed request p/0 4 times; last: HTTP 503"):
        generate(make(server.base_url, smollm2_path, max_retries=3))
    assert len(server.requests) == 4 and time.monotonic() - started < 2.0


def test_429_retry_after_is_honoured_up_to_the_cap(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    server = stub_server(
        [Canned(429, {"error": "slow down"}, headers={"Retry-After": "0.3"}), Canned(200, ok_body)]
    )
    started = time.monotonic()
    generate(make(server.base_url, smollm2_path, max_backoff_s=0.5))
    assert 0.3 <= time.monotonic() - started < 2.0 and len(server.requests) == 2


def test_connection_refused_is_backend_unavailable(smollm2_path: str) -> None:
    gen = make(f"http://127.0.0.1:{free_port()}/v1", smollm2_path, max_retries=2)
    with pytest.raises(BackendUnavailable, match="3 times; last: APIConnectionError"):
        generate(gen)


def test_read_timeout_is_retried_then_backend_unavailable(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(200, {}, delay_s=1.0)])
    with pytest.raises(BackendUnavailable, match="last: APITimeoutError"):
        generate(make(server.base_url, smollm2_path, max_retries=1, timeout_s=0.2))
    assert len(server.requests) == 2


CONTEXT_400 = {
    "error": {
        "message": "This model's maximum context length is 40 tokens. However, you requested 1027 tokens "
        "(3 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.",
        "type": "BadRequestError",
    }
}


def test_context_limit_400_is_retried_once_capped_to_the_context_it_names(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    server = stub_server([Canned(400, CONTEXT_400), Canned(200, ok_body)])
    gen = make(server.base_url, smollm2_path)
    assert generate(gen, SamplingParams(stop=STOP, max_tokens=1024)).text == CODE
    assert [r["json"]["max_tokens"] for r in server.requests] == [1024, 37]  # 40 - 3 prompt tokens
    assert gen.context_length == 40


def test_context_limit_400_for_a_prompt_that_fills_the_context_is_context_exceeded(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(400, CONTEXT_400)])
    with pytest.raises(ContextExceeded, match="prompt of 50 tokens fills the model's context of 40"):
        generate(make(server.base_url, smollm2_path), prompt=[1] * 50)
    assert len(server.requests) == 1


def test_context_limit_400_that_a_cap_cannot_fix_is_context_exceeded_without_retry(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(400, CONTEXT_400)])
    with pytest.raises(ContextExceeded, match="maximum context length is 40"):
        generate(make(server.base_url, smollm2_path), SamplingParams(stop=STOP, max_tokens=30))
    assert len(server.requests) == 1


def test_other_400_is_one_rejected_request_without_retry(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    body = {
        "error": {"message": "top_k must be 0 (disable), or at least 1, got -5.", "type": "BadRequestError"}
    }
    server = stub_server([Canned(400, body)])
    with pytest.raises(RequestRejected, match="refused request p/0 with HTTP 400: .*top_k must be"):
        generate(make(server.base_url, smollm2_path))
    assert len(server.requests) == 1


def _many(gen: OpenAIGenerator, n: int) -> list[Generation | BaseException]:
    async def go() -> list[Generation | BaseException]:
        outcomes: list[Generation | BaseException] = []
        for i in range(n):  # one at a time, so the order of outcomes is the order of requests
            try:
                outcomes.append(await gen.generate([1, 2], SamplingParams(stop=STOP), request_id=f"p/{i}"))
            except (BackendUnavailable, ConfigError) as exc:
                outcomes.append(exc)
        await gen.aclose()
        return outcomes

    return asyncio.run(go())


def test_the_run_stops_only_when_every_request_is_refused_the_same_way(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    missing = {"error": {"message": "The model `smollm3` does not exist.", "type": "NotFoundError"}}
    refused = _many(make(stub_server([Canned(404, missing)]).base_url, smollm2_path), REJECTION_QUORUM)
    assert all(type(e) is RequestRejected for e in refused[:-1])
    assert type(refused[-1]) is ConfigError and "refused all 8 requests" in str(refused[-1])
    assert "does not exist" in str(refused[-1])
    # One success first: later refusals are per-sample errors, however many.
    mixed = [Canned(200, ok_body)] + [Canned(404, missing)]
    outcomes = _many(make(stub_server(mixed).base_url, smollm2_path), REJECTION_QUORUM + 3)
    assert isinstance(outcomes[0], Generation)
    assert all(type(e) is RequestRejected for e in outcomes[1:])


def test_text_only_server_is_retokenized_with_the_cut_stop_string(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    stripped = CODE.removesuffix("```output")
    server = stub_server([Canned(200, completion_body(stripped, stop_reason="```output"))])
    generation = generate(make(server.base_url, smollm2_path, vllm_extensions=False))
    assert (generation.text, generation.stop) == (CODE, "```output")
    assert generation.token_ids == smollm2_tokenizer.encode(CODE, add_special_tokens=False)
    assert "return_token_ids" not in server.requests[0]["json"]


@pytest.mark.parametrize("said", [{"stop_reason": None}, {"matched_stop": 2}])  # vLLM; SGLang (an EOS id)
def test_text_only_server_eos_stop_appends_the_eos_id(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any, said: dict[str, Any]
) -> None:
    server = stub_server([Canned(200, completion_body("\\boxed{5}", **said))])
    generation = generate(make(server.base_url, smollm2_path, vllm_extensions=False))
    assert (generation.text, generation.stop, generation.token_ids[-1]) == (
        "\\boxed{5}",
        None,
        smollm2_tokenizer.eos_token_id,
    )


def test_sglang_matched_stop_names_the_cut_stop_string(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    stripped = CODE.removesuffix("```output")
    server = stub_server([Canned(200, completion_body(stripped, matched_stop="```output"))])
    generation = generate(make(server.base_url, smollm2_path, vllm_extensions=False))
    assert (generation.text, generation.stop, generation.finish_reason) == (CODE, "```output", "stop")


def test_server_that_cuts_stops_and_names_none_is_refused(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    stripped = CODE.removesuffix("```output")  # plain OpenAI spec: the stop is cut, nothing says which
    server = stub_server([Canned(200, completion_body(stripped))])
    with pytest.raises(ConfigError, match="a stop cannot be told from the model's end"):
        generate(make(server.base_url, smollm2_path, vllm_extensions=False))


def test_server_that_keeps_the_stop_needs_no_stop_field(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(200, completion_body(CODE))])  # the text itself ends with the stop
    generation = generate(make(server.base_url, smollm2_path, vllm_extensions=False))
    assert (generation.text, generation.stop) == (CODE, "```output")


def test_unknown_finish_reason_is_backend_unavailable(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(200, completion_body("x", finish_reason="abort", token_ids=[87]))])
    with pytest.raises(BackendUnavailable, match="finish_reason 'abort'"):
        generate(make(server.base_url, smollm2_path))


def test_bad_options_are_a_config_error(smollm2_path: str) -> None:
    with pytest.raises(ConfigError, match="max_concurrency=0"):
        make("http://127.0.0.1:1/v1", smollm2_path, max_concurrency=0)


def test_describe_records_the_server_but_never_the_key(
    smollm2_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    info = make("http://127.0.0.1:1/v1", smollm2_path).describe()
    assert info["backend"] == "openai" and info["base_url"] == "http://127.0.0.1:1/v1"
    assert "sk-secret" not in repr(info)


def test_folder_without_tokenizer_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no tokenizer at"):
        load_generator("openai", str(tmp_path), base_url="http://127.0.0.1:1/v1")


# --- several servers (replicas of one model) behind one backend ------------------------------------


def models_body(*ids: str, context: int | None = 2048) -> dict[str, Any]:
    """`GET /v1/models` as vLLM answers it (`max_model_len` beside each id)."""
    cards = [
        {"id": i, "object": "model", "created": 0, "owned_by": "vllm", "max_model_len": context} for i in ids
    ]
    return {"object": "list", "data": cards}


def completions(server: StubServer) -> int:
    return sum(r["path"] == "/v1/completions" for r in server.requests)


def gather(gen: OpenAIGenerator, n: int, *, one_by_one: bool = False) -> list[Generation]:
    """n requests with distinct prompts, all at once (or one after another), then close."""

    async def one(i: int) -> Generation:
        return await gen.generate([1, 2, 100 + i], SamplingParams(stop=STOP), request_id=f"p/{i}")

    async def go() -> list[Generation]:
        try:
            if one_by_one:
                return [await one(i) for i in range(n)]
            return list(await asyncio.gather(*(one(i) for i in range(n))))
        finally:
            await gen.aclose()

    return asyncio.run(go())


def test_requests_go_to_the_server_with_fewest_in_flight(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    a, b = (stub_server([Canned(200, ok_body, delay_s=0.05)]) for _ in range(2))
    results = gather(make(f"{a.base_url},{b.base_url}", smollm2_path), 20)
    assert [g.text for g in results] == [CODE] * 20
    assert (completions(a), completions(b)) == (10, 10)
    # A slow server has requests in flight longer, so it is sent fewer (round robin would send it half).
    slow, fast = stub_server([Canned(200, ok_body, delay_s=0.4)]), stub_server([Canned(200, ok_body)])
    gather(make(f"{slow.base_url},{fast.base_url}", smollm2_path, max_concurrency=1), 20)
    assert completions(slow) <= 2 and completions(fast) >= 18


@pytest.mark.parametrize("outage", ["connection refused", "HTTP 503", "read timeout"])
def test_one_servers_outage_is_retried_on_another_without_spending_the_retry_budget(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any, outage: str
) -> None:
    if outage == "connection refused":
        down_url, down = f"http://127.0.0.1:{free_port()}/v1", None
    else:
        down = stub_server(
            [Canned(503, {"error": "loading"}) if outage == "HTTP 503" else Canned(200, ok_body, delay_s=1.0)]
        )
        down_url = down.base_url
    up = stub_server([Canned(200, ok_body)])
    gen = make(f"{down_url},{up.base_url}", smollm2_path, max_retries=0, timeout_s=0.3, set_aside_s=60)
    single = generate(make(up.base_url, smollm2_path))
    results = gather(gen, 8, one_by_one=True)
    assert results == [single] * 8  # the same generations as from the healthy server alone
    assert completions(up) == 8 + 1
    if down is not None:  # tried until set aside after two failures in a row, then left alone
        assert completions(down) == 2


def test_a_set_aside_server_is_tried_again_later_and_takes_load_back(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    flaky = stub_server(
        [Canned(503, {"error": "restarting"}), Canned(503, {"error": "restarting"}), Canned(200, ok_body)]
    )
    steady = stub_server([Canned(200, ok_body)])
    gen = make(f"{flaky.base_url},{steady.base_url}", smollm2_path, max_retries=0, set_aside_s=0.3)

    async def go() -> list[Generation]:
        outcomes = []
        for i in range(8):
            if i == 4:
                await asyncio.sleep(0.4)  # past the set-aside time
            outcomes.append(await gen.generate([1, 2], SamplingParams(stop=STOP), request_id=f"p/{i}"))
            if i == 3:
                assert completions(flaky) == 2  # set aside after two failures in a row
        await gen.aclose()
        return outcomes

    assert [g.text for g in asyncio.run(go())] == [CODE] * 8
    assert completions(flaky) >= 4  # back in the rotation once its time was up, and answering
    assert completions(flaky) - 2 + completions(steady) == 8


def test_every_server_down_is_backend_unavailable_after_the_budget(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    a, b = (stub_server([Canned(503, {"error": "overloaded"})]) for _ in range(2))
    started = time.monotonic()
    with pytest.raises(
        BackendUnavailable, match=r"failed request p/0 5 times; last: http://127\.0\.0\.1:\d+/v1: HTTP 503"
    ):
        generate(make(f"{a.base_url},{b.base_url}", smollm2_path, max_retries=2, set_aside_s=60))
    # Rounds: both servers, both again (now set aside), then the one back soonest.
    assert (completions(a), completions(b)) == (3, 2) and time.monotonic() - started < 2.0


def test_chat_requests_are_routed_and_failed_over_too(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    message = {"role": "assistant", "content": "\\boxed{7}", "tool_calls": []}
    chat_body = {
        "id": "c", "object": "chat.completion", "created": 0, "model": "smollm2",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }  # fmt: skip
    down, a, b = (
        stub_server([Canned(503, {})]),
        stub_server([Canned(200, chat_body)]),
        stub_server([Canned(200, chat_body)]),
    )
    gen = make(f"{down.base_url},{a.base_url},{b.base_url}", smollm2_path, max_retries=0, set_aside_s=60)

    async def go() -> list[Any]:
        try:
            ask = [{"role": "user", "content": "3 + 4?"}]
            return list(
                await asyncio.gather(
                    *(gen.chat(ask, [], SamplingParams(), request_id=f"c/{i}") for i in range(9))
                )
            )
        finally:
            await gen.aclose()

    assert [t.content for t in asyncio.run(go())] == ["\\boxed{7}"] * 9
    paths = {r["path"] for s in (down, a, b) for r in s.requests}
    assert paths == {"/v1/chat/completions"} and len(down.requests) == 3  # its share of the first round
    # The first round routes 3 requests to each server; the 3 failed ones go to whichever healthy server
    # has fewer in flight at that moment, which depends on timing.
    assert len(a.requests) + len(b.requests) == 9 and min(len(a.requests), len(b.requests)) >= 3


def test_start_up_check_learns_the_context_every_server_agrees_on(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    servers = [stub_server([Canned(200, {})], models=Canned(200, models_body("smollm2"))) for _ in range(3)]
    gen = make(",".join(s.base_url for s in servers), smollm2_path)
    gen.check(1024)
    assert gen.context_length == 2048 and [s.gets for s in servers] == [1, 1, 1]
    with pytest.raises(ConfigError, match="--max-tokens 4096 .* context of 2048"):
        gen.check(4096)


@pytest.mark.parametrize(
    ("second", "refusal"),
    [
        (models_body("smollm3"), r"{b} serves smollm3, not 'smollm2' \({a} does\)"),
        (
            models_body("smollm2", context=4096),
            r"disagree on the context length \(max_model_len\): {a} says 2048, {b} says 4096",
        ),
    ],
)
def test_start_up_check_refuses_servers_that_disagree_naming_both(
    stub_server: type[StubServer], smollm2_path: str, second: dict[str, Any], refusal: str
) -> None:
    a = stub_server([Canned(200, {})], models=Canned(200, models_body("smollm2")))
    b = stub_server([Canned(200, {})], models=Canned(200, second))
    gen = make(f"{a.base_url},{b.base_url}", smollm2_path)
    with pytest.raises(ConfigError, match=refusal.format(a=re.escape(a.base_url), b=re.escape(b.base_url))):
        gen.check(100)
    assert not a.requests and not b.requests  # refused before any generation


def test_a_server_down_at_start_is_checked_when_it_comes_back(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    a = stub_server([Canned(200, ok_body)], models=Canned(200, models_body("smollm2")))
    late = stub_server([Canned(200, ok_body)], models=Canned(503, {"error": "loading"}))
    gen = make(f"{a.base_url},{late.base_url}", smollm2_path, set_aside_s=0.2)
    gen.check(100)  # set aside, not refused: it may be loading
    late.models = Canned(200, models_body("smollm2-other"))  # up now, but serving another model
    time.sleep(0.25)
    with pytest.raises(ConfigError, match=f"{re.escape(late.base_url)} serves smollm2-other, not 'smollm2'"):
        gather(gen, 4, one_by_one=True)
    assert completions(late) == 0


def test_servers_that_disagree_on_token_ids_are_refused_at_their_first_answer(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    vllm = stub_server([Canned(200, ok_body)])
    sglang = stub_server(
        [Canned(200, completion_body(CODE.removesuffix("```output"), matched_stop="```output"))]
    )
    gen = make(f"{vllm.base_url},{sglang.base_url}", smollm2_path)
    pattern = f"disagree on returning token ids: {re.escape(vllm.base_url)} says True, {re.escape(sglang.base_url)} says False"
    with pytest.raises(ConfigError, match=pattern):
        gather(gen, 2, one_by_one=True)


def test_describe_records_every_server(smollm2_path: str) -> None:
    info = make(" http://127.0.0.1:1/v1/ ,http://127.0.0.1:2/v1", smollm2_path).describe()
    assert info["servers"] == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert info["base_url"] == "http://127.0.0.1:1/v1,http://127.0.0.1:2/v1"
    assert (
        make(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], smollm2_path).describe()["servers"]
        == info["servers"]
    )


@pytest.mark.parametrize(
    ("base_url", "refusal"),
    [
        ("http://127.0.0.1:1/v1,,http://127.0.0.1:2/v1", "an empty server URL"),
        ("127.0.0.1:8000/v1", "use an http:// or https:// URL"),
        ("http://127.0.0.1:1/v1,http://127.0.0.1:1/v1/", "more than once"),
    ],
)
def test_bad_server_lists_are_config_errors(smollm2_path: str, base_url: str, refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        make(base_url, smollm2_path)


def test_usage_sums_what_the_server_counted_and_its_cached_prefix(
    stub_server: type[StubServer], smollm2_path: str, ok_body: Any
) -> None:
    counted = {"prompt_tokens": 300, "completion_tokens": 7, "total_tokens": 307}
    cached = {**ok_body, "usage": {**counted, "prompt_tokens_details": {"cached_tokens": 256}}}
    server = stub_server([Canned(200, cached), Canned(200, {**ok_body, "usage": counted})])
    gen = make(server.base_url, smollm2_path)

    async def go() -> None:
        try:
            for _ in range(3):
                await gen.generate([1, 2, 3], SamplingParams(stop=STOP))
        finally:
            await gen.aclose()

    asyncio.run(go())
    # 3 answers of 300 prompt tokens; only the first said how many were cached (a server without
    # --enable-prompt-tokens-details says nothing): 256 of 900.
    assert gen.describe()["usage"] == {
        "requests": 3,
        "prompt_tokens": 900,
        "cached_prompt_tokens": 256,
        "prefix_cache_hit_rate": 0.2844,
        "generated_tokens": 21,
    }
    silent = make(server.base_url, smollm2_path)
    generate(silent)
    assert silent.describe()["usage"]["cached_prompt_tokens"] is None
    assert silent.describe()["usage"]["prefix_cache_hit_rate"] is None


# --- against a real `vllm serve` ------------------------------------------------------------------


class VllmServer:
    def __init__(self, process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
        self.process, self.base_url, self.log = process, base_url, log

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def vllm_server(
    vllm_python: str,
    vllm_env: dict[str, str],
    smollm2_folder: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[VllmServer]:
    """`vllm serve` of SmolLM2 on a free local port, float32, 2K context, 1 GiB KV cache."""
    import httpx2

    port = free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    command = [vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", smollm2_folder]
    command += ["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--dtype", "float32", "--max-model-len", "2048", "--seed", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=vllm_env, start_new_session=True
        )
    server = VllmServer(process, f"http://127.0.0.1:{port}/v1", log)
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"vllm serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not healthy after {SERVER_START_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield server
    finally:
        server.stop()


def chat_prompt(tokenizer: Any, question: str) -> list[int]:
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_serve_returns_ids_whose_decode_is_the_text_and_keeps_the_stop(
    vllm_server: VllmServer, smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    prompt = chat_prompt(smollm2_tokenizer, "Write Python code in a ```python block that prints 2+3.")
    generation = generate(
        make(vllm_server.base_url, smollm2_path, **REAL_SERVER),
        SamplingParams(temperature=0, max_tokens=64, stop=("```\n",)),
        prompt,
    )
    assert (generation.finish_reason, generation.stop) == ("stop", "```\n")
    assert generation.text.endswith("```\n") and generation.text.count("```\n") == 1
    assert generation.text == smollm2_tokenizer.decode(generation.token_ids, skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_serve_eos_and_length_finish_reasons(
    vllm_server: VllmServer, smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    prompt = chat_prompt(smollm2_tokenizer, "Say hello.")
    ended = generate(
        make(vllm_server.base_url, smollm2_path, **REAL_SERVER),
        SamplingParams(temperature=0, max_tokens=200),
        prompt,
    )
    cut = generate(
        make(vllm_server.base_url, smollm2_path, **REAL_SERVER),
        SamplingParams(temperature=0, max_tokens=3),
        prompt,
    )
    assert (ended.finish_reason, ended.stop, ended.token_ids[-1]) == (
        "stop",
        None,
        smollm2_tokenizer.eos_token_id,
    )
    assert (cut.finish_reason, len(cut.token_ids)) == ("length", 3)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_serve_same_seed_same_sample_under_concurrency(
    vllm_server: VllmServer, smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    prompt = chat_prompt(smollm2_tokenizer, "Tell me a story.")
    gen = make(vllm_server.base_url, smollm2_path, **REAL_SERVER)

    async def go() -> list[Generation]:
        try:
            calls = [
                gen.generate(prompt, SamplingParams(temperature=1.0, max_tokens=24, seed=s))
                for s in (7, 8, 7, 9)
            ]
            return await asyncio.gather(*calls)
        finally:
            await gen.aclose()

    first, other, again, _ = asyncio.run(go())
    assert first.token_ids == again.token_ids and first.token_ids != other.token_ids


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_serve_killed_mid_run_is_backend_unavailable(vllm_server: VllmServer, smollm2_path: str) -> None:
    # Runs last in this module: it stops the shared server.
    vllm_server.stop()
    with pytest.raises(BackendUnavailable, match="APIConnectionError"):
        generate(make(vllm_server.base_url, smollm2_path, max_retries=2, **REAL_SERVER))


OPENAI_UNKNOWN_FIELD = {
    "error": {
        "message": "Unrecognized request argument supplied: top_k",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
"""How OpenAI's API refuses a request holding a field it does not know."""


def test_auto_extensions_drop_what_a_strict_api_refuses_and_say_so(
    stub_server: type[StubServer], smollm2_path: str, smollm2_tokenizer: Any
) -> None:
    plain = completion_body(CODE)  # a strict API: text only, the stop string kept here
    server = stub_server([Canned(400, OPENAI_UNKNOWN_FIELD), Canned(200, plain), Canned(200, plain)])
    gen = make(server.base_url, smollm2_path)
    assert gen.describe()["extensions_sent"] is True and "top_k" in gen.describe()["request_fields"]
    generation = generate(gen, SamplingParams(stop=STOP, top_k=20))
    assert generation.token_ids == smollm2_tokenizer.encode(CODE, add_special_tokens=False)
    assert len(server.requests) == 2  # the refused request was sent again at once, without the fields
    second = server.requests[1]["json"]
    assert not set(second) & {
        "top_k",
        "min_p",
        "repetition_penalty",
        "return_token_ids",
        "skip_special_tokens",
    }
    assert {"temperature", "top_p", "max_tokens", "stop"} <= set(second)
    described = gen.describe()
    assert described["api_extensions"] == "auto" and described["extensions_sent"] is False
    assert "top_k" not in described["request_fields"] and "temperature" in described["request_fields"]


def test_explicit_extension_modes_are_kept_even_when_refused(
    stub_server: type[StubServer], smollm2_path: str
) -> None:
    server = stub_server([Canned(200, completion_body(CODE))])
    generate(make(server.base_url, smollm2_path, api_extensions="none"))
    assert "top_k" not in server.requests[0]["json"] and "return_token_ids" not in server.requests[0]["json"]
    refusing = stub_server([Canned(400, OPENAI_UNKNOWN_FIELD)])
    with pytest.raises(RequestRejected, match="Unrecognized request argument supplied: top_k"):
        generate(make(refusing.base_url, smollm2_path, api_extensions="vllm"))
    assert len(refusing.requests) == 1
    with pytest.raises(ConfigError, match="api_extensions='openai'"):
        make(server.base_url, smollm2_path, api_extensions="openai")
