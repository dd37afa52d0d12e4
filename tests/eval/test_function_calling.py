"""Function calling (`--api chat`) as vLLM and OpenAI speak it: the same raw model turns through the
token path (scripted backend, real Qwen3 tokenizer) and through a local chat server that parses them
as vLLM does (Qwen3 reasoning parser + hermes tool parser) give the same record; a strict API that
refuses unknown fields with HTTP 400 gets only OpenAI's fields; reasoning goes back to vLLM."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from thinc_bench.eval import __main__ as thinc_eval


def call(code: str, name: str = "python") -> str:
    """A call as Qwen3 writes one: non-ASCII as is."""
    body = json.dumps({"name": name, "arguments": {"code": code}}, ensure_ascii=False)
    return "<tool_call>\n" + body + "\n</tool_call>"


PROBLEMS = {
    "malformed": ("Compute 3 + 4.", "7"),
    "unclosed": ("Compute 6 times 7.", "42"),
    "unicode": ("How many letters are in the word ππ?", "2"),
    "in-reasoning": ("Compute 5 times 5.", "25"),
}
TURNS = {
    # a call whose JSON misses a brace: vLLM returns the whole text as content and no tool_calls
    "malformed": [
        "<think>\nAdd in code.\n</think>\n\n"
        '<tool_call>\n{"name": "python", "arguments": {"code": "print(3 + 4)"}\n</tool_call>',
        "<think>\nFix the JSON.\n</think>\n\n" + call("print(3 + 4)"),
        "\\boxed{7}",
    ],
    # the turn ends without </tool_call>: vLLM's parser reads `<tool_call>(.*)` too
    "unclosed": [
        '<think>\nMultiply.\n</think>\n\n<tool_call>\n{"name": "python", "arguments": {"code": "print(6 * 7)"}}',
        "\\boxed{42}",
    ],
    # a call made while thinking: vLLM parses calls in the content only, so it stays in the reasoning
    "in-reasoning": ["<think>\nCompute it first " + call("print(5 * 5)") + "\n</think>\n\n", "\\boxed{25}"],
    "unicode": [
        "<think>\nCount them.\n</think>\n\n" + call('s = "ππ"  # π twice\nprint(len(s))'),
        "\\boxed{2}",
    ],
}
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def vllm_message(output: str, turn: int) -> tuple[dict, str]:
    """The assistant message vLLM returns for `output` with `--reasoning-parser qwen3
    --tool-call-parser hermes`, and its finish_reason (the parsers' rules, restated here)."""
    reasoning, content = None, output
    if "</think>" in output:
        before, _, content = output.partition("</think>")
        reasoning = before.removeprefix("<think>").strip("\n") or None
        content = content.lstrip("\n")
    calls = []
    if "<tool_call>" in content:
        try:
            for i, (closed, unclosed) in enumerate(_HERMES.findall(content)):
                parsed = json.loads(closed or unclosed)
                arguments = json.dumps(parsed["arguments"], ensure_ascii=False)
                function = {"name": parsed["name"], "arguments": arguments}
                calls.append({"id": f"chatcmpl-tool-{turn}{i}", "type": "function", "function": function})
            content = content[: content.find("<tool_call>")]
        except Exception:  # vLLM's hermes parser: any failure returns the whole text as content
            calls = []
    message = {"role": "assistant", "content": content or None, "reasoning_content": reasoning,
               "tool_calls": calls}  # fmt: skip
    return message, "tool_calls" if calls else "stop"


class ChatServer:
    """A chat-completions server on 127.0.0.1 that answers each conversation with its next scripted
    turn, parsed as vLLM parses it. `strict`: refuses, as OpenAI does, any field it does not know."""

    KNOWN = {"model", "messages", "tools", "max_tokens", "temperature", "top_p", "presence_penalty",
             "frequency_penalty", "seed", "stop", "logprobs", "tool_choice", "n"}  # fmt: skip

    def __init__(self, strict: bool = False) -> None:
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(request)
                unknown = sorted(set(request) - ChatServer.KNOWN)
                if strict and unknown:
                    error = {"message": f"Unrecognized request argument supplied: {unknown[0]}",
                             "type": "invalid_request_error", "param": None, "code": None}  # fmt: skip
                    return self._answer(400, {"error": error})
                question = next(m["content"] for m in request["messages"] if m["role"] == "user")
                problem = next(i for i, (p, _) in PROBLEMS.items() if p == question)
                turn = sum(m["role"] == "assistant" for m in request["messages"])
                message, finish = vllm_message(TURNS[problem][turn], turn)
                choice = {"index": 0, "finish_reason": finish, "message": message}
                body = {"id": "x", "object": "chat.completion", "created": 0, "model": request["model"],
                        "choices": [choice]}  # fmt: skip
                self._answer(200, body)

            def _answer(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def _run(tmp_path: Path, tokenizer: Path, *backend: str) -> tuple[dict[str, dict], dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bench = tmp_path / "fc.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": i, "problem": p, "answer": a}) + "\n" for i, (p, a) in PROBLEMS.items())
    )
    out = tmp_path / "run"
    args = [*backend, "--tokenizer", str(tokenizer), "--benchmarks", str(bench), "--dialect", "tool_call"]
    assert (
        thinc_eval.main(
            [*args, "--out", str(out), "--samples", "1", "--max-tool-calls", "4", "--recovery-k", "0"]
        )
        == 0
    )
    records = {r["problem_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    return records, json.loads((out / "config.json").read_text())


@pytest.fixture(scope="module")
def token_path(tmp_path_factory, qwen3_tokenizer_dir):
    tmp = tmp_path_factory.mktemp("token-path")
    script = tmp / "turns.jsonl"
    script.write_text("".join(json.dumps({"problem_id": i, "turns": t}) + "\n" for i, t in TURNS.items()))
    return _run(tmp, qwen3_tokenizer_dir, "--backend", "scripted", "--model", str(script))[0]


@pytest.fixture(scope="module", params=["vllm", "strict"])
def chat_path(request, tmp_path_factory, qwen3_tokenizer_dir):
    server = ChatServer(strict=request.param == "strict")
    try:
        backend = ("--backend", "openai", "--api", "chat", "--model", "m", "--base-url", server.url)
        records, config = _run(tmp_path_factory.mktemp("chat"), qwen3_tokenizer_dir, *backend)
    finally:
        server.server.shutdown()
    return request.param, records, config, server.requests


SAME = ("n_tool_calls", "n_exec_errors", "exec_statuses", "finish_reason", "answer", "correct", "grounded")


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_both_paths_give_the_same_calls_failed_calls_and_answer(token_path, chat_path, problem):
    _, records, _, _ = chat_path
    assert {f: records[problem][f] for f in SAME} == {f: token_path[problem][f] for f in SAME}
    expected = {
        "malformed": (2, 1, "7"),
        "unclosed": (1, 0, "42"),
        "unicode": (1, 0, "2"),
        "in-reasoning": (1, 0, "25"),
    }[problem]
    assert (
        records[problem]["n_tool_calls"],
        records[problem]["n_exec_errors"],
        records[problem]["answer"],
    ) == expected
    assert records[problem]["correct"] and records[problem]["finish_reason"] == "answer"


def test_a_malformed_call_is_answered_as_the_token_path_answers_it(token_path, chat_path):
    _, records, _, requests = chat_path
    response = records["malformed"]["text"].split("<tool_response>\n")[1].split("\n</tool_response>")[0]
    assert "not valid JSON" in response
    assert (
        response
        == token_path["malformed"]["text"].split("<tool_response>\n")[1].split("\n</tool_response>")[0]
    )
    second = next(r for r in requests if r["messages"][1]["content"] == PROBLEMS["malformed"][0]
                  and sum(m["role"] == "assistant" for m in r["messages"]) == 1)  # fmt: skip
    assistant, tool = second["messages"][2], second["messages"][3]
    assert '<tool_call>\n{"name": "python"' in assistant["content"] and not assistant["tool_calls"]
    assert tool["role"] == "tool" and "not valid JSON" in tool["content"]


def test_code_goes_as_written_and_counts_as_the_model_wrote_it(token_path, chat_path):
    _, records, _, _ = chat_path
    assert records["unicode"]["text"] == token_path["unicode"]["text"]
    assert "ππ" in records["unicode"]["text"] and "\\u03c0" not in records["unicode"]["text"]
    assert records["unicode"]["response_tokens"] == token_path["unicode"]["response_tokens"]


def test_only_fields_the_server_accepts_and_what_was_sent_is_recorded(chat_path):
    kind, records, config, requests = chat_path
    generator = config["resolved"]["generator"]
    if kind == "vllm":
        assert all("top_k" in r and r["skip_special_tokens"] is True for r in requests)
        assert generator["extensions_sent"] is True and "top_k" in generator["request_fields"]
    else:  # only the first requests (sent at once) were refused; every later turn has OpenAI's fields only
        refused = [r for r in requests if set(r) - ChatServer.KNOWN]
        assert 1 <= len(refused) <= len(PROBLEMS) and all(len(r["messages"]) == 2 for r in refused)
        assert len(requests) == len(refused) + sum(map(len, TURNS.values()))  # each turn answered once
        assert generator["extensions_sent"] is False and "top_k" not in generator["request_fields"]
    assert all(r["status"] != "infra_error" for r in records.values())


def test_reasoning_goes_back_to_vllm_and_not_to_a_strict_api(chat_path):
    kind, _, _, requests = chat_path
    later = [
        r
        for r in requests
        if r["messages"][1]["content"] == PROBLEMS["malformed"][0] and len(r["messages"]) > 2
    ]
    first_turn = later[-1]["messages"][2]
    if kind == "vllm":
        assert first_turn["reasoning"] == first_turn["reasoning_content"] == "Add in code."
        assert later[-1]["messages"][4]["reasoning"] == "Fix the JSON."
    else:
        assert "reasoning" not in first_turn and "reasoning_content" not in first_turn


def test_the_extensions_flag_is_recorded_and_a_wrong_value_is_one_clear_line():
    from thinc_bench.errors import ConfigError

    config = thinc_eval.parse_config(["--model", "m", "--backend", "openai", "--api-extensions", "none"])
    assert (
        config.backend_options()["api_extensions"] == "none" and config.settings()["api_extensions"] == "none"
    )
    assert "api_extensions" not in thinc_eval.parse_config(["--model", "m"]).settings()  # old hashes hold
    with pytest.raises(
        ConfigError, match="--api-extensions openai: unknown value; choose one of auto, vllm, none"
    ):
        thinc_eval.parse_config(["--model", "m", "--backend", "openai", "--api-extensions", "openai"])
