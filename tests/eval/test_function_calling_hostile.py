"""Function calling (`--api chat`) against a server that returns call arguments as the model wrote them
(OpenAI's API does not validate them): arguments nested 20k deep (past the recursion limit), holding a 5,000-digit integer, or not
JSON at all are answered with an error result the model reads, never a harness failure, and the
trajectories stay in the denominator (issue 49: two such wrong answers read as accuracy 1.0 over 1
problem instead of 0.33 over 3)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from thinc_bench.eval import __main__ as thinc_eval

DEEP = '{"code": ' + "[" * 20_000 + "]" * 20_000 + "}"  # far past the recursion limit
HUGE = '{"code": "print(1)", "n": ' + "7" * 5_000 + "}"
NOT_JSON = '{"code": "print(2)"'  # a brace short

# problem id -> (question, gold, the assistant messages the server returns in turn)
SCRIPT: dict[str, tuple[str, str, list[dict]]] = {
    "fine": (
        "Compute 3 + 4.",
        "7",
        [
            {"content": None, "tool_calls": [("c1", '{"code": "print(3 + 4)"}')]},
            {"content": "\\boxed{7}"},
        ],
    ),
    "deep": (
        "Compute 5 + 5.",
        "10",
        [{"content": None, "tool_calls": [("c2", DEEP)]}, {"content": "\\boxed{11}"}],
    ),
    "huge": (
        "Compute 6 + 6.",
        "12",
        [{"content": None, "tool_calls": [("c3", HUGE)]}, {"content": "\\boxed{13}"}],
    ),
    "broken": (
        "Compute 1 + 1.",
        "2",
        [{"content": None, "tool_calls": [("c4", NOT_JSON)]}, {"content": "\\boxed{3}"}],
    ),
    # the server refuses (HTTP 400) the request that carries the model's first turn back to it
    "refused": (
        "Compute 9 + 9.",
        "18",
        [{"content": None, "tool_calls": [("c5", '{"code": "print(9 + 9)"}')]}, {"reject": True}],
    ),
}


class RawServer:
    """A chat-completions server that answers each conversation with its next scripted message, the
    tool calls' `arguments` strings exactly as scripted."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(request)
                question = next(m["content"] for m in request["messages"] if m["role"] == "user")
                pid = next(p for p, (q, _, _) in SCRIPT.items() if q == question)
                turn = sum(m["role"] == "assistant" for m in request["messages"])
                scripted = SCRIPT[pid][2][turn]
                if scripted.get("reject"):
                    error = {"message": "invalid tool call arguments", "type": "invalid_request_error"}
                    return self._answer(400, {"error": error})
                calls = [
                    {"id": cid, "type": "function", "function": {"name": "python", "arguments": args}}
                    for cid, args in scripted.get("tool_calls", [])
                ]
                message = {"role": "assistant", "content": scripted["content"], "tool_calls": calls}
                choice = {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
                self._answer(
                    200,
                    {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]},
                )

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


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, qwen3_tokenizer_dir) -> tuple[dict[str, dict], dict, list[dict]]:
    tmp = tmp_path_factory.mktemp("hostile-calls")
    bench = tmp / "hostile.jsonl"
    bench.write_text(
        "".join(json.dumps({"id": p, "problem": q, "answer": a}) + "\n" for p, (q, a, _) in SCRIPT.items())
    )
    server = RawServer()
    out = tmp / "run"
    try:
        code = thinc_eval.main(
            ["--backend", "openai", "--api", "chat", "--model", "m", "--base-url", server.url]
            + ["--tokenizer", str(qwen3_tokenizer_dir), "--benchmarks", str(bench), "--dialect", "tool_call"]
            + ["--samples", "1", "--max-tool-calls", "4", "--recovery-k", "0", "--out", str(out)]
        )
    finally:
        server.server.shutdown()
    assert code == 0
    records = {r["problem_id"]: r for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}
    return records, json.loads((out / "summary.json").read_text()), server.requests


def test_no_hostile_call_becomes_a_harness_error_and_accuracy_counts_every_problem(hostile_run) -> None:
    records, summary, _ = hostile_run
    assert {p: r["status"] for p, r in records.items()} == {
        "fine": "correct",
        "deep": "incorrect",
        "huge": "incorrect",
        "broken": "incorrect",
        "refused": "harness_error",
    }
    block = next(iter(summary["per_benchmark"].values()))
    assert block["accuracy"]["value"] == pytest.approx(0.2) and block["accuracy"]["n_problems"] == 5
    assert block["harness_errors"] == 1 and sum(block["excluded"].values()) == 0


def test_a_refused_request_carrying_the_models_output_is_the_models_failure(hostile_run) -> None:
    records, _, _ = hostile_run
    refused = records["refused"]
    assert refused["error"].startswith("generate: RequestRejected") and "HTTP 400" in refused["error"]
    assert refused["n_tool_calls"] == 1 and "print(9 + 9)" in refused["text"]


@pytest.mark.parametrize("pid", ["deep", "broken"])
def test_a_call_that_is_not_valid_json_is_answered_with_an_error_the_model_reads(hostile_run, pid) -> None:
    records, _, requests = hostile_run
    assert records[pid]["n_tool_calls"] == 1 and records[pid]["n_exec_errors"] == 1
    second = next(
        r for r in requests if r["messages"][1]["content"] == SCRIPT[pid][0] and len(r["messages"]) > 2
    )
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    assert "not valid JSON" in tool["content"]


def test_a_huge_integer_in_the_arguments_still_runs_the_code(hostile_run) -> None:
    records, _, requests = hostile_run
    second = next(
        r for r in requests if r["messages"][1]["content"] == SCRIPT["huge"][0] and len(r["messages"]) > 2
    )
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool["content"].strip() == "1" and records["huge"]["exec_statuses"] == ["ok"]


def test_the_helper_never_raises_on_model_arguments() -> None:
    from thinc_bench.backends.openai import FunctionCall
    from thinc_bench.eval.function_calling import _call_json
    from thinc_bench.trajectory import parse_call

    for arguments in (DEEP, HUGE, NOT_JSON, "", "null", "NaN", '{"code": 1e999}', "\ud800"):
        call = parse_call(_call_json(FunctionCall("id", "python", arguments)))
        assert call.error is not None or isinstance(call.code, str)
